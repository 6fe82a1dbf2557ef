// The amortisation arithmetic of a cached prefix (paper Table 2, the app's amortisation chart):
// one compile paid once, a saving of (full TTFT - cached TTFT) on every request after it.
// One definition, used by the benchmark (core/research/paper_bench) and the Timings panel (ui/charts/timing_data).
#pragma once

#include <algorithm>
#include <cmath>

namespace cc {

// The first request count n with n * saving_ms >= compile_ms, i.e. ceil(compile / saving), at least 1;
// 0 = never (no saving per request). The paper prints the unrounded ratio (break_even_exact).
inline int break_even_requests(double compile_ms, double saving_ms) {
    return saving_ms > 0 ? std::max(1, int(std::ceil(compile_ms / saving_ms))) : 0;
}

// Cumulative time saved after `requests` requests, the compile subtracted (negative before break-even).
// The paper's savings_{100,1000,10000}_requests_ms.
inline double saved_after_ms(long long requests, double compile_ms, double saving_ms) {
    return double(requests) * saving_ms - compile_ms;
}

}  // namespace cc
