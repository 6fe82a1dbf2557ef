// The CPU backend: the readable, deterministic reference (DESIGN §5).
#pragma once

#include "core/backend.h"
#include "core/weights.h"

#include <memory>

namespace cc {

struct CpuBackendOptions {
    int n_threads = 0;               // 0 = every core the process may use
    KvDType kv_dtype = KvDType::f32;
};

// Keeps a reference to `weights` (which must outlive the backend) and converts what it needs
// (e.g. F16 tensors) once, at construction.
std::unique_ptr<Backend> make_cpu_backend(const ModelWeights& weights, const CpuBackendOptions& options = {});

}  // namespace cc
