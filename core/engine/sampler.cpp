#include "core/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace cc {

token_id argmax_token(const std::vector<float>& logits) {
    return static_cast<token_id>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

token_id sample_token(const std::vector<float>& logits, float temperature, float top_p, std::mt19937_64& rng) {
    if (temperature <= 0.0f) return argmax_token(logits);
    const float max_logit = *std::max_element(logits.begin(), logits.end());
    std::vector<std::pair<double, token_id>> probs(logits.size());
    double sum = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
        const double p = std::exp((static_cast<double>(logits[i]) - max_logit) / temperature);
        probs[i] = {p, static_cast<token_id>(i)};
        sum += p;
    }
    std::sort(probs.begin(), probs.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    double kept = 0;
    size_t n_kept = 0;
    for (; n_kept < probs.size(); ++n_kept) {
        kept += probs[n_kept].first / sum;
        if (kept >= top_p) {
            ++n_kept;
            break;
        }
    }
    n_kept = std::min(n_kept, probs.size());
    double mass = 0;
    for (size_t i = 0; i < n_kept; ++i) mass += probs[i].first;
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * mass;
    double acc = 0;
    for (size_t i = 0; i < n_kept; ++i) {
        acc += probs[i].first;
        if (u < acc) return probs[i].second;
    }
    return probs[n_kept - 1].second;
}

}  // namespace cc
