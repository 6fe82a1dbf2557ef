// Which backend a model runs on (DESIGN §5): a pure decision from what was asked for, what the
// CUDA probe found and what the model needs, with the reason the app and the CLI show. Pure, so
// every branch is unit-tested on a machine without a GPU (tests/backend/test_backend_choice.cpp) with fake
// probes; core/engine/backend_select.cpp gathers the real inputs.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace cc {

// What the CUDA probe says about the device the engine would use (device 0), in plain terms.
struct CudaProbeSummary {
    bool compiled = false;            // this build has the CUDA backend (CC_HAVE_CUDA)
    bool available = false;           // a usable device and cuBLAS handle (cc::cuda::Probe::available)
    std::string message;              // the probe's line, e.g. "no CUDA device: no CUDA-capable device is detected"
    std::string device_name;          // e.g. "NVIDIA H100 80GB HBM3"
    int compute_major = 0;
    int compute_minor = 0;
    std::optional<size_t> free_bytes; // cudaMemGetInfo now; nullopt when it could not be read
    std::string free_bytes_error;     // why, when it could not be read
};

struct BackendChoiceInputs {
    std::string requested = "auto";           // auto | cpu | cuda
    CudaProbeSummary cuda;
    std::optional<size_t> required_bytes;     // cuda_required_bytes(config, options); nullopt when unknown
    std::string required_bytes_error;         // why it is unknown (e.g. the backend refuses this model)
};

struct BackendChoice {
    std::string backend;   // "cpu" | "cuda"
    std::string reason;    // one line, e.g. "auto: CUDA device NVIDIA H100 (sm_90)"
};

// "auto" picks CUDA only when the build has it, a device is available, the bytes the model needs
// are known and fit in the device's free memory; otherwise the CPU, with the reason. "cuda"
// without all of that throws std::runtime_error("--backend cuda: <why>") — never a silent CPU run.
// "cpu" is always the CPU. Anything else throws std::invalid_argument.
BackendChoice choose_backend(const BackendChoiceInputs& in);

// "17.2 GiB", "512.0 MiB", "12 bytes": sizes in the reasons.
std::string human_bytes(size_t bytes);

}  // namespace cc
