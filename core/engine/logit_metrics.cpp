#include "core/engine/logit_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace cc {
namespace {

void check_pair(std::span<const float> a, std::span<const float> b, const char* what) {
    if (a.size() != b.size())
        throw std::invalid_argument(std::string(what) + ": the logit vectors have " + std::to_string(a.size()) + " and " +
                                    std::to_string(b.size()) + " elements");
    if (a.empty()) throw std::invalid_argument(std::string(what) + ": empty logit vectors");
}

}  // namespace

double cosine_similarity(std::span<const float> a, std::span<const float> b) {
    check_pair(a, b, "cosine_similarity");
    double dot = 0, na = 0, nb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double x = a[i], y = b[i];
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if (na == 0 || nb == 0) return std::numeric_limits<double>::quiet_NaN();
    return dot / (std::sqrt(na) * std::sqrt(nb));
}

std::vector<double> log_softmax(std::span<const float> logits) {
    if (logits.empty()) throw std::invalid_argument("log_softmax: empty logit vector");
    const double m = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float x : logits) sum += std::exp(double(x) - m);
    const double log_z = m + std::log(sum);
    std::vector<double> out(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i]) - log_z;
    return out;
}

double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits) {
    check_pair(p_logits, q_logits, "kl_divergence");
    const auto lp = log_softmax(p_logits);
    const auto lq = log_softmax(q_logits);
    double kl = 0;
    for (size_t i = 0; i < lp.size(); ++i) {
        const double p = std::exp(lp[i]);
        if (p > 0) kl += p * (lp[i] - lq[i]);
    }
    return kl;
}

size_t top1(std::span<const float> logits) {
    if (logits.empty()) throw std::invalid_argument("top1: empty logit vector");
    return size_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace cc
