// Summary statistics of repeated timings: what a benchmark reports instead of one noisy sample.
// Percentiles interpolate linearly between order statistics (numpy's default), so our p50/p95 read
// like the paper's published ones computed the same way from the same samples.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <vector>

namespace cc {

// q in [0, 100]; rank q/100 * (n - 1) between the sorted samples. Throws on an empty sample.
double percentile(std::vector<double> samples, double q);
double median(const std::vector<double>& samples);  // percentile(samples, 50)

struct SampleStats {
    size_t n = 0;
    double mean = 0;
    double std = 0;  // population standard deviation (numpy's default, ddof = 0), as the paper's
    double min = 0;
    double max = 0;
    double p50 = 0;
    double p95 = 0;
};
SampleStats sample_stats(const std::vector<double>& samples);  // throws on an empty sample

// {"n", "mean", "std", "min", "max", "p50", "p95"}: the paper's stats object plus n.
nlohmann::ordered_json to_json(const SampleStats& s);

}  // namespace cc
