#include "core/run_info.h"

#include "git_commit.h"  // generated at build time: CC_GIT_COMMIT

#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <thread>

namespace cc {

MachineInfo machine_info() {
    MachineInfo m;
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
            m.cpu = line.substr(line.find(':') + 1);
            m.cpu.erase(0, m.cpu.find_first_not_of(" \t"));
            break;
        }
    m.hardware_threads = std::thread::hardware_concurrency();
    utsname u{};
    if (uname(&u) == 0) {
        m.os = std::string(u.sysname) + " " + u.release;
        m.hostname = u.nodename;
    }
    return m;
}

const char* build_commit() { return CC_GIT_COMMIT; }

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
