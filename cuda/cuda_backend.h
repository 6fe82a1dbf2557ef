// The CUDA backend's public seam. Only plain C++ types cross this header (no CUDA types), so
// cc_core, the app and the tests can include it without the CUDA toolkit's headers.
#pragma once

#include <string>
#include <vector>

namespace cc::cuda {

struct DeviceInfo {
    int index = 0;
    std::string name;
    int compute_major = 0;
    int compute_minor = 0;
    size_t total_memory_bytes = 0;
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

}  // namespace cc::cuda
