// The CPU backend: the readable, deterministic reference (DESIGN §5).
#pragma once

#include "core/backend/backend.h"
#include "core/backend/registry.h"
#include "core/model/weights.h"

#include <memory>
#include <string>

namespace cc {

struct CpuBackendOptions {
    int n_threads = 0;               // 0 = every core the process may use (sched_getaffinity)
    KvDType kv_dtype = KvDType::f32;
    // Weight matrices in memory (backend.h): stored (the checkpoint's width), f32, bf16 or q8. All
    // are prepacked once at construction into the GEMM's panel layout; a converting choice enters
    // numerics_id() as "/weights=<name>".
    WeightDType weights = WeightDType::stored;
    // Kernel instruction set: "" or "auto" = the CC_CPU_ISA environment variable when set, else the
    // best this CPU has; or "scalar", "avx2", "avx512" (an unsupported one is an error). The paths
    // round differently, so the path is part of numerics_id(): "cpu/<isa>/<kv dtype>[/weights=<w>]", e.g.
    // "cpu/avx512/f32" or "cpu/avx512/bf16/weights=q8" ("weights=bf16dot-<cpu vendor>" for bf16dot,
    // plus "/attention=bf16dot" with BF16 KV: see bf16_attention). Within one path, results do not
    // depend on threads or batching; across machines they match when the path and the C library
    // (exp, cos, sin) are the same.
    std::string isa;
    // forward_batch: sequences over the same prefix block attend in one call, so the prefix's K and
    // V stream from memory once per step for all of them (cpu::AttentionArgs::suffixes). The bits
    // are the same either way (a test compares them with each sequence alone); off only to measure
    // what it saves (also with CC_CPU_SHARED_PREFIX=0 in the environment).
    bool share_prefix_attention = true;
    // Memory made resident for KV blocks (on a thread of its own, off the requests' path), and
    // where freed KV storage returns, up to this many bytes (rounded down to 2 MiB pieces; 0 = no
    // pool: storage is mapped fresh and faulted in on its first write). A server's blocks then
    // come from pages already there, as llama-server's and vLLM's KV cache is allocated up front;
    // see KvRecycler in cpu_backend.cpp. It changes no value.
    size_t kv_warm_bytes = 0;
    // How much of it is made resident ahead of use: on_demand (the default) as much as the blocks
    // taken so far have lacked, so that a server with one client at a time holds about one block
    // warm, not the whole capacity in its RSS; up_front: all of it when the backend is built.
    WarmFill kv_warm_fill = WarmFill::on_demand;
    // Whether that pool is refilled, at the lowest priority, whenever takes leave it below half its
    // fill target (WarmPages::keep_filled); false: filled once, on the caller's thread while the
    // backend is built, then only by freed storage (what a test uses to know which pieces the pool
    // holds, with no thread beside it whose progress depends on the machine's load).
    bool kv_warm_refill = true;
};

// numerics_id() of a CPU backend made with these options, without making one (for keys shown
// before a model is loaded, e.g. `contextcache-cli key`).
std::string cpu_numerics_id(const CpuBackendOptions& options);

// Whether attention runs in BF16 dot products (cpu::AttentionArgs::bf16_dot): with bf16dot weights
// and BF16 KV, q and the softmax weights are rounded to BF16 too, so QK and P·V use VDPBF16PS as
// the GEMMs do. With F32 KV a bf16dot backend keeps F32 attention.
bool bf16_attention(const CpuBackendOptions& options);

// Keeps a reference to `weights` (which must outlive the backend) and converts what it needs
// (e.g. F16 tensors) once, at construction.
std::unique_ptr<Backend> make_cpu_backend(const ModelWeights& weights, const CpuBackendOptions& options = {});

// The CPU backend's registry entry ("cpu"; needs no device, so it has no probe).
BackendEntry cpu_backend_entry();

}  // namespace cc
