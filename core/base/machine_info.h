// The machine and the build a result came from: every result file and benchmark records them.
#pragma once

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

}  // namespace cc
