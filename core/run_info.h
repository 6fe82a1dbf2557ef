// What every result file records about the run (issue 7): commit, machine, model, backend.
// Two results are comparable only when these say so.
#pragma once

#include "core/engine.h"

#include <nlohmann/json.hpp>

#include <string>

namespace cc {

struct MachineInfo {
    std::string cpu;             // /proc/cpuinfo "model name"
    unsigned hardware_threads = 0;
    std::string os;              // uname: sysname release
    std::string hostname;
};
MachineInfo machine_info();

// `git describe --always --dirty` of the source tree at build time ("...-dirty" = uncommitted changes).
const char* build_commit();

// {"commit", "date" (UTC, ISO 8601), "machine": {...}, "model": spec, "model_fingerprint",
//  "synthetic_weights", "backend", "numerics", "device" (CPU or GPU name), "threads"}
nlohmann::ordered_json run_info_json(const ModelInfo& model);

}  // namespace cc
