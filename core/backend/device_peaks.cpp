#include "core/backend/device_peaks.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <vector>

namespace cc {

namespace {

// Upper-cased words of the name, split at spaces, '-' and '_' ("NVIDIA A100-SXM4-80GB" ->
// NVIDIA, A100, SXM4, 80GB), so "A10" never matches "A100".
std::vector<std::string> words(const std::string& name) {
    std::string s = name;
    for (char& c : s) c = (c == '-' || c == '_') ? ' ' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

}  // namespace

double peak_bf16_tflops(const std::string& device_name) {
    const auto w = words(device_name);
    auto has = [&](const char* word) { return std::find(w.begin(), w.end(), word) != w.end(); };
    if (has("GH200")) return 989.0;
    if (has("H200")) return has("NVL") ? 835.0 : 989.0;          // H200 SXM 989; H200 NVL 835
    if (has("H100")) {
        if (has("PCIE")) return 756.0;                            // H100 PCIe
        if (has("NVL")) return 835.0;                             // H100 NVL
        return 989.0;                                             // H100 SXM5 ("80GB HBM3")
    }
    if (has("A100")) return 312.0;                                // SXM4 and PCIe alike
    if (has("A30")) return 165.0;
    if (has("A40")) return 149.7;
    if (has("A10")) return 125.0;
    if (has("L40S")) return 362.0;
    if (has("L40")) return 181.0;
    if (has("L4")) return 121.0;
    return 0.0;
}

double peak_dram_gb_s(long long memory_clock_khz, int bus_width_bits) {
    if (memory_clock_khz <= 0 || bus_width_bits <= 0) return 0.0;
    return double(memory_clock_khz) * 1e3 * 2.0 * double(bus_width_bits) / 8.0 / 1e9;
}

}  // namespace cc
