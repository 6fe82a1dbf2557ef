// How far two next-token distributions are apart (the per-tool NoPE experiment compares its logits
// with a full prefill's). Pure functions over logit vectors, computed in double.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace cc {

// cos(a, b) = a·b / (|a| |b|). NaN when either vector is all zeros (the angle is undefined).
// Throws std::invalid_argument when the lengths differ or the vectors are empty.
double cosine_similarity(std::span<const float> a, std::span<const float> b);

// log softmax(logits), stable: x_i - max - log(sum exp(x_j - max)). Throws on an empty vector.
std::vector<double> log_softmax(std::span<const float> logits);

// KL(P || Q) in nats, P = softmax(p_logits) (the reference), Q = softmax(q_logits):
// sum_i P_i (log P_i - log Q_i); terms with P_i == 0 contribute 0. Throws when the lengths differ.
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits);

// The first index of the largest logit (greedy's pick; ties go to the lower id). Throws on empty.
size_t top1(std::span<const float> logits);

}  // namespace cc
