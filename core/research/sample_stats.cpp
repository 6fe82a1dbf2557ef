#include "core/research/sample_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace cc {

double percentile(std::vector<double> samples, double q) {
    if (samples.empty()) throw std::invalid_argument("percentile of an empty sample");
    if (!(q >= 0 && q <= 100)) throw std::invalid_argument("percentile: q must lie in [0, 100]");
    std::sort(samples.begin(), samples.end());
    const double rank = q / 100.0 * double(samples.size() - 1);
    const size_t lo = size_t(std::floor(rank));
    const size_t hi = std::min(lo + 1, samples.size() - 1);
    const double frac = rank - double(lo);
    return samples[lo] + (samples[hi] - samples[lo]) * frac;
}

double median(const std::vector<double>& samples) { return percentile(samples, 50); }

SampleStats sample_stats(const std::vector<double>& samples) {
    if (samples.empty()) throw std::invalid_argument("statistics of an empty sample");
    SampleStats s;
    s.n = samples.size();
    s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / double(s.n);
    double ss = 0;
    for (const double x : samples) ss += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(ss / double(s.n));
    const auto [mn, mx] = std::minmax_element(samples.begin(), samples.end());
    s.min = *mn;
    s.max = *mx;
    s.p50 = percentile(samples, 50);
    s.p95 = percentile(samples, 95);
    return s;
}

nlohmann::ordered_json to_json(const SampleStats& s) {
    return {{"n", s.n}, {"mean", s.mean}, {"std", s.std}, {"min", s.min}, {"max", s.max}, {"p50", s.p50}, {"p95", s.p95}};
}

}  // namespace cc
