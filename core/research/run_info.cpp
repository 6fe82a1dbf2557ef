#include "core/research/run_info.h"

#include <chrono>
#include <ctime>

namespace cc {

nlohmann::ordered_json run_info_json(const ModelInfo& model) {
    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&now, &tm);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const MachineInfo m = machine_info();
    return {{"commit", build_commit()},
            {"date", date},
            {"machine", {{"cpu", m.cpu}, {"hardware_threads", m.hardware_threads}, {"os", m.os}, {"hostname", m.hostname}}},
            {"model", model.spec},
            {"model_fingerprint", model.fingerprint},
            {"synthetic_weights", model.synthetic_weights},
            {"backend", model.backend},
            {"numerics", model.numerics},
            {"device", model.device},
            {"threads", model.n_threads}};
}

}  // namespace cc
