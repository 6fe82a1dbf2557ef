#include "core/engine/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cc {

StepDiff compare_steps(const QueryResult& reference, const QueryResult& other) {
    const auto& a_steps = reference.step_logits;
    const auto& b_steps = other.step_logits;
    const size_t n_common = std::min(a_steps.size(), b_steps.size());
    StepDiff d;
    d.identical = reference.tokens == other.tokens && a_steps.size() == b_steps.size();
    for (size_t i = 0; i < n_common; ++i) {
        const auto& a = a_steps[i];
        const auto& b = b_steps[i];
        const bool same_logits = a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
        for (size_t v = 0; v < a.size() && v < b.size(); ++v)
            d.max_abs_logit_diff = std::max(d.max_abs_logit_diff, std::abs(double(a[v]) - double(b[v])));
        const bool same_token = reference.tokens[i] == other.tokens[i];
        if (!same_logits || !same_token) {
            d.identical = false;
            if (!d.first_difference) d.first_difference = i;
            if (!same_token) break;
        }
    }
    if (!d.identical && !d.first_difference) d.first_difference = n_common;
    return d;
}

}  // namespace cc
