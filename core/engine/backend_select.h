// Gathers the real inputs of the backend choice (core/backend/backend_choice.h: the GPU probe, the
// free device memory, the bytes the model needs) from the registry the program wired, and builds
// the chosen backend.
#pragma once

#include "core/backend/backend.h"
#include "core/backend/backend_choice.h"
#include "core/backend/registry.h"
#include "core/engine/engine.h"
#include "core/model/weights.h"

#include <memory>
#include <string>

namespace cc {

struct PlannedBackend {
    BackendChoice choice;   // backend + reason
    std::string numerics;   // the numerics id the backend will report (enters the group_key)
    std::string device;     // the CPU's model name, or the GPU's name
};

// The model's shape as load_model will see it, without loading weights (builtin recipe or
// DIR/config.json). Throws naming the spec or file.
ModelConfig planned_model_config(const std::string& model_spec);

// Decides for `config` under `options` among `backends` (probing the GPU when one is registered
// and not "cpu" was asked). Throws for an unknown backend name and for "cuda" without a usable
// device (naming why).
PlannedBackend plan_backend(const EngineOptions& options, const ModelConfig& config, const BackendRegistry& backends);

// Builds the planned backend over `weights` (which must outlive it). Throws what the backend's
// constructor throws (e.g. cc::cuda::CudaError when the upload runs out of device memory).
std::unique_ptr<Backend> make_planned_backend(const PlannedBackend& plan, const ModelWeights& weights,
                                              const EngineOptions& options, const BackendRegistry& backends);

// The registry EngineOptions::backends falls back to: the CPU backend alone.
std::shared_ptr<const BackendRegistry> cpu_only_backends();

}  // namespace cc
