#include "core/base/machine_info.h"

#include "git_commit.h"  // generated at build time: CC_GIT_COMMIT

#include <sys/utsname.h>

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

}  // namespace cc
