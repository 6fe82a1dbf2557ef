// Gathers the real inputs of the backend choice (core/backend_choice.h: the CUDA probe, the free
// device memory, the bytes the model needs) and builds the chosen backend. The only file of
// cc_core that calls into cc_cuda; in a build without CUDA it reports "no CUDA backend".
#pragma once

#include "core/backend.h"
#include "core/backend_choice.h"
#include "core/engine.h"
#include "core/weights.h"

#include <memory>
#include <string>

namespace cc {

struct PlannedBackend {
    BackendChoice choice;   // backend + reason
    std::string numerics;   // the numerics id the backend will report (enters the group_key)
    std::string device;     // the CPU's model name, or the GPU's name
};

// What the CUDA probe finds now (device 0). Never throws.
CudaProbeSummary probe_cuda_summary();

// The model's shape as load_model will see it, without loading weights (builtin recipe or
// DIR/config.json). Throws naming the spec or file.
ModelConfig planned_model_config(const std::string& model_spec);

// Decides for `config` under `options` (probing the device when the build has CUDA). Throws for
// an unknown backend name and for "cuda" without a usable device (naming why).
PlannedBackend plan_backend(const EngineOptions& options, const ModelConfig& config);

// Builds the planned backend over `weights` (which must outlive it). Throws what the backend's
// constructor throws (e.g. cc::cuda::CudaError when the upload runs out of device memory).
std::unique_ptr<Backend> make_planned_backend(const PlannedBackend& plan, const ModelWeights& weights,
                                              const EngineOptions& options);

}  // namespace cc
