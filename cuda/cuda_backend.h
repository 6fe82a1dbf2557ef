// The CUDA backend's public seam. Only plain C++ types cross this header (no CUDA types), so
// cc_core, the app and the tests can include it without the CUDA toolkit's headers.
//
// The pieces (DESIGN §5): probe() finds devices; make_cuda_backend() builds a cc::Backend whose
// weights and KV live on the device; run_selftest() compares every op and the whole model with
// the CPU reference on the user's own GPU (`contextcache-cli selftest --backend cuda`).
#pragma once

#include "core/backend/backend.h"
#include "core/backend/registry.h"
#include "core/model/weights.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace cc::cuda {

struct DeviceInfo {
    int index = 0;
    std::string name;
    int compute_major = 0;
    int compute_minor = 0;
    size_t total_memory_bytes = 0;
    int sm_count = 0;
    // Peaks for the benchmarks' "fraction of peak" figures; 0 when unknown for this device.
    double peak_bf16_tflops = 0;   // dense tensor-core BF16 with FP32 accumulate
    double peak_dram_gb_s = 0;     // memory bus width x memory clock x 2 (DDR)
};

struct Probe {
    bool available = false;           // at least one usable device and a working cuBLAS handle
    std::string message;              // "no CUDA device: ..." or a one-line description
    int runtime_version = 0;          // cudaRuntimeGetVersion, e.g. 13000
    int driver_version = 0;           // cudaDriverGetVersion; 0 when no driver is installed
    std::vector<DeviceInfo> devices;
};

// Looks for CUDA devices at run time. Never throws and never aborts: on a machine without a
// driver or a device it returns available == false with a message that says why.
Probe probe();

// A failed CUDA or cuBLAS call: what() names the call, the file:line and the error name, e.g.
// "cudaMalloc(&p, 1073741824) failed at cuda/context.cu:88: cudaErrorMemoryAllocation (out of
// memory)". Out of memory says how much was asked for and suggests a smaller budget.
struct CudaError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct CudaBackendOptions {
    int device = 0;
    KvDType kv_dtype = KvDType::f32;
    size_t workspace_bytes = size_t(64) << 20;  // cuBLAS(Lt) workspace
    int max_batch_tokens = 512;                  // activation buffers are sized for this many rows;
                                                 // forward() runs longer batches in chunks of it
    // Attention on tensor cores (cuda/attention_mma_kernels.cuh; bf16 operands, another numerics
    // id). Not yet run on a device, so off by default; the programs turn it on with the environment
    // variable CONTEXTCACHE_CUDA_ATTENTION=mma (docs/cuda.md, "Tensor-core attention").
    bool mma_attention = false;
    // forward_batch() stacks the rows of every sequence of a step into each GEMM (the weights read
    // once a step for all of them), instead of running the sequences one after another. The same
    // bits either way (a row's result does not depend on its neighbours), but not yet run on a
    // device, so off by default; the programs turn it on with CONTEXTCACHE_CUDA_BATCH=stacked.
    bool stacked_batch = false;
    // Chunks of up to geom::kGraphMaxRows rows (decode steps, short suffixes) run as CUDA graphs of
    // a few layers each (cuda/step_graphs.h): the same kernels with the same arguments, so the same
    // bits and the same numerics id, without a launch per op. Not yet run on a device, so off by
    // default; the programs turn it on with CONTEXTCACHE_CUDA_GRAPHS=on.
    bool graphs = false;
    // With graphs: the chunks whose every piece takes the tensor-core attention's batch launch (up
    // to 32 rows in all: decode steps of up to 16 sequences) are captured once per shape and
    // KV-length bucket (geom::graph_positions_bucket) and replayed, their positions and KV views
    // read from tables the host writes to the device before each launch, instead of captured again
    // every step (cuda/step_graphs.h). The same kernels' code on the same values, so the same bits
    // and numerics id. Needs graphs and mma_attention (make_cuda_backend throws otherwise); the other
    // chunks run as `graphs` says. Not yet run on a device, so off by default; the programs turn it
    // on with CONTEXTCACHE_CUDA_GRAPHS=replay (with CONTEXTCACHE_CUDA_ATTENTION=mma).
    bool graph_replay = false;
    // Every GEMM through our own tensor-core kernels (cuda/gemm_mma_kernels.cuh) instead of cuBLASLt:
    // a rows kernel for up to 64 rows that streams the weights at the memory bandwidth (decode) and
    // a tiled kernel for more (prefill), one mma chain per output in the same order, so a decode row
    // keeps the prefill's bits. Another arithmetic than cuBLASLt's (its own numerics id); not yet
    // run on a device, so off by default; the programs turn it on with CONTEXTCACHE_CUDA_GEMM=own.
    bool own_gemm = false;
    // Uploads (a stored group's KV, import_kv) through the pinned staging buffer as a ring of four
    // slices, host copies overlapping the PCIe transfers (Context::set_upload_ring). The same bytes
    // arrive; not yet run on a device, so off by default: CONTEXTCACHE_CUDA_UPLOAD=ring.
    bool upload_ring = false;
    // Greedy tokens (SequenceRows::argmax) picked on the device by the argmax kernel (self-tested
    // on the H100, km::argmax_row's rule) after the lm_head: the ids come back, 4 bytes a row,
    // instead of the row's logits (0.6 MB on a 152k vocabulary) being copied back and scanned on
    // the host. The same tokens either way; the step around it not yet run on a device, so off by
    // default (the logits come back and the host picks): CONTEXTCACHE_CUDA_GREEDY=device.
    bool device_greedy = false;
    // Small kernels fused (issue 35): each residual add with the RMSNorm that follows it
    // (add_rmsnorm: after o_proj the MLP's norm, after the MLP the next layer's attention norm), and
    // attention writing its output as bf16 straight into o_proj's input, and with own_gemm gate, up
    // and SwiGLU in one launch for up to 64 rows: three launches fewer a layer, four with own_gemm.
    // The bits of the unfused kernels by construction (row_kernels.cuh, attn_store, the rows
    // kernel's chains); not yet run on a device, so off by default: CONTEXTCACHE_CUDA_FUSED=on.
    bool fused_kernels = false;
};

// CONTEXTCACHE_CUDA_ATTENTION: unset, "" or "scalar" -> false, "mma" -> true; anything else throws
// std::runtime_error naming the variable and the values it takes.
bool mma_attention_from_env();
// CONTEXTCACHE_CUDA_BATCH: unset, "" or "serial" -> false, "stacked" -> true; anything else throws
// as above.
bool stacked_batch_from_env();
// CONTEXTCACHE_CUDA_GRAPHS: unset, "" or "off" -> false, "on" or "replay" -> true; anything else
// throws as above.
bool graphs_from_env();
// CONTEXTCACHE_CUDA_GRAPHS=replay -> true (graph_replay: captured once per shape and bucket).
bool graph_replay_from_env();
// CONTEXTCACHE_CUDA_GEMM: unset, "" or "cublaslt" -> false, "own" -> true; anything else throws as above.
bool own_gemm_from_env();
// CONTEXTCACHE_CUDA_UPLOAD: unset, "" or "staged" -> false, "ring" -> true; anything else throws as above.
bool upload_ring_from_env();
// CONTEXTCACHE_CUDA_GREEDY: unset, "" or "host" -> false, "device" -> true; anything else throws as above.
bool device_greedy_from_env();
// CONTEXTCACHE_CUDA_FUSED: unset, "" or "off" -> false, "on" -> true; anything else throws as above.
bool fused_kernels_from_env();

// "cuda/sm<major><minor>/bf16/<kv dtype>[/attn-mma][/gemm-own]", e.g. "cuda/sm90/bf16/f32": enters the group_key, so a
// group computed on the GPU never links on the CPU (or on another architecture), and vice versa.
std::string cuda_numerics_id(const DeviceInfo& device, const CudaBackendOptions& options);

// Device bytes the backend needs for a model: weights (as uploaded: BF16 matrices, F32 norms),
// activation buffers for max_batch_tokens rows, and the workspace. KV blocks come on top.
size_t cuda_required_bytes(const ModelConfig& config, const CudaBackendOptions& options);

// Free device memory now (cudaMemGetInfo); throws CudaError.
size_t device_free_bytes(int device);

// Uploads the weights once and returns the backend. Throws CudaError (no device, out of memory)
// with a message a user can act on.
std::unique_ptr<Backend> make_cuda_backend(const ModelWeights& weights, const CudaBackendOptions& options);

// The CUDA backend's registry entry ("cuda"): its probe (device 0, with the free memory), numerics
// id, required bytes, factory and self-test (cuda/registry_entry.cpp). The programs load it from
// the plugin (cuda/plugin_entry.cpp, app/backends.cpp); `load_model` as in SelftestOptions.
BackendEntry cuda_backend_entry(std::function<ModelWeights(const std::string& spec)> load_model = {});

// ---- self-test -----------------------------------------------------------------------------

struct SelftestOptions {
    int device = 0;
    bool quick = false;        // fewer shapes (the ctest run); the CLI runs the full sweep
    std::string model_spec;    // "" = builtin:qwen3-test only; else that model too (builtin:NAME or an HF directory)
    bool ops = true;           // the per-op checks
    bool models = true;        // the whole-model checks
    // Loads a --model SPEC; empty: cc::load_model_weights. The plugin's host passes its own, so
    // that the models embedded in the program (builtin:toolcaller) are found from the plugin too.
    std::function<ModelWeights(const std::string& spec)> load_model;
};

// One line of the self-test's table.
struct SelftestRow {
    std::string check;         // "rmsnorm", "rope", "gemm_bf16", "attention_prefill", "model: cached == full", ...
    std::string shape;         // e.g. "rows=7 dim=4096"
    double max_error = 0;      // measured max |cuda - cpu| (or 0 / 1 for exact checks)
    double bound = 0;          // the bound it is held to
    bool pass = false;
    std::string note;          // NaN/Inf found, guard bytes touched, ...
};

// Runs every op's parity check and the whole-model checks on the device. Throws CudaError when no
// device is available (callers check probe() first and report "skipped").
std::vector<SelftestRow> run_selftest(const SelftestOptions& options);

}  // namespace cc::cuda
