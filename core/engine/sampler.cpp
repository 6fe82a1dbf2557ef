#include "core/engine/sampler.h"

#include "core/base/kernel_math.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace cc {

token_id argmax_token(const std::vector<float>& logits) {
    return static_cast<token_id>(km::argmax_row(logits.data(), int(logits.size())));
}

// Sampling runs once per generated token of every request, over the whole vocabulary (152k on
// Qwen3): it sorts only as far as the nucleus reaches, and keeps its scratch per thread, so that a
// token costs a few passes over the logits, not a full sort into freshly allocated memory (which
// took 14 ms a token, half a decode step, on a 2-core machine: docs/benchmarks.md, "Sampling").
token_id sample_token(const std::vector<float>& logits, float temperature, float top_p, std::mt19937_64& rng) {
    if (temperature <= 0.0f) return argmax_token(logits);
    const size_t n = logits.size();
    const float max_logit = *std::max_element(logits.begin(), logits.end());
    const auto weight = [&](size_t i) { return std::exp((static_cast<double>(logits[i]) - max_logit) / temperature); };
    const double draw = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)

    if (top_p >= 1.0f) {
        // The whole distribution: one draw against the running sum in id order, the weights
        // computed again rather than stored (the same expression gives the same bits).
        double sum = 0;
        for (size_t i = 0; i < n; ++i) sum += weight(i);
        const double u = draw * sum;
        double acc = 0;
        size_t last = 0;  // the last token with a non-zero weight (u can round up to the sum)
        for (size_t i = 0; i < n; ++i) {
            const double p = weight(i);
            if (p == 0.0) continue;
            acc += p;
            last = i;
            if (u < acc) return static_cast<token_id>(i);
        }
        return static_cast<token_id>(last);
    }

    // The nucleus: the most likely tokens first (ties: lower id) until their mass reaches top_p.
    // The order is built a slice at a time (64, 512, 4,096, ... tokens), each slice the next most
    // likely of the rest (selected in linear time, then sorted), so a nucleus of a few tokens sorts
    // a few tokens.
    thread_local std::vector<double> p;
    thread_local std::vector<token_id> order;
    p.resize(n);
    order.resize(n);
    double sum = 0;
    for (size_t i = 0; i < n; ++i) {
        p[i] = weight(i);
        sum += p[i];
    }
    std::iota(order.begin(), order.end(), token_id{0});
    const auto before = [&](token_id a, token_id b) {
        return p[size_t(a)] != p[size_t(b)] ? p[size_t(a)] > p[size_t(b)] : a < b;
    };
    size_t n_kept = n, sorted = 0;
    double kept = 0;
    for (size_t slice = 64; sorted < n && n_kept == n; slice *= 8) {
        const size_t end = std::min(n, sorted + slice);
        const auto first = order.begin() + std::ptrdiff_t(sorted), middle = order.begin() + std::ptrdiff_t(end);
        if (end < n) std::nth_element(first, middle, order.end(), before);  // the slice: the rest's most likely
        std::sort(first, middle, before);
        for (; sorted < end; ++sorted) {
            kept += p[size_t(order[sorted])] / sum;
            if (kept >= top_p) {
                n_kept = sorted + 1;
                break;
            }
        }
    }
    double mass = 0;
    for (size_t i = 0; i < n_kept; ++i) mass += p[size_t(order[i])];
    const double u = draw * mass;
    double acc = 0;
    for (size_t i = 0; i < n_kept; ++i) {
        acc += p[size_t(order[i])];
        if (u < acc) return order[i];
    }
    return order[n_kept - 1];
}

}  // namespace cc
