// What every result file records about the run : commit, machine, model, backend.
// Two results are comparable only when these say so.
#pragma once

#include "core/base/machine_info.h"
#include "core/engine/engine.h"

#include <nlohmann/json.hpp>

#include <string>

namespace cc {

// {"commit", "date" (UTC, ISO 8601), "machine": {...}, "model": spec, "model_fingerprint",
//  "synthetic_weights", "backend", "numerics", "device" (CPU or GPU name), "threads"}
nlohmann::ordered_json run_info_json(const ModelInfo& model);

}  // namespace cc
