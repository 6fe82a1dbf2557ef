// The sampler: greedy, the nucleus (top_p < 1) drawn exactly as a full sort would draw it, and the
// whole distribution (top_p >= 1) drawn in proportion to softmax(logits / temperature).
#include "core/engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace {

using namespace cc;

// The nucleus by a full sort of every token (the sampler's definition, written the plain way):
// the reference the partial sort must match token for token.
token_id full_sort_nucleus(const std::vector<float>& logits, float temperature, float top_p, std::mt19937_64& rng) {
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
    size_t n_kept = 0;
    double kept = 0;
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

std::vector<float> random_logits(size_t n, float scale, uint32_t seed) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> l(n);
    for (auto& x : l) x = d(g);
    return l;
}

TEST(Sampler, greedy_is_the_first_maximum) {
    std::mt19937_64 rng(1);
    EXPECT_EQ(sample_token({0.5f, 2.0f, 2.0f, -1.0f}, 0.0f, 1.0f, rng), 1);
    EXPECT_EQ(argmax_token({3.0f, 3.0f}), 0);
}

// The rule every backend's greedy tokens follow (km::argmax_row; the CUDA argmax kernel's tree
// picks the same index): NaN never wins, wherever it sits; masked (-inf) tokens only when nothing
// else is left; a row of NaN gives 0.
TEST(Sampler, greedy_skips_nan_and_takes_the_first_of_equal_values) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    EXPECT_EQ(argmax_token({nan, 1.0f, 2.0f, 2.0f}), 2);
    EXPECT_EQ(argmax_token({1.0f, nan, 0.5f}), 0);
    EXPECT_EQ(argmax_token({-inf, -inf, -2.0f, nan}), 2);
    EXPECT_EQ(argmax_token({-inf, -inf}), 0);
    EXPECT_EQ(argmax_token({nan, nan, nan}), 0);
    EXPECT_EQ(argmax_token({nan, -inf}), 1);
    EXPECT_EQ(argmax_token({0.0f, -0.0f, 0.0f}), 0);
    EXPECT_EQ(argmax_token({-0.0f, 0.0f}), 0);  // equal values: the first
}

// Qwen3-sized and small vocabularies, narrow and flat distributions, ties, masked (-inf) tokens,
// nuclei from one token to nearly all of them (so the sort's slices grow to the end).
TEST(Sampler, the_nucleus_is_drawn_as_a_full_sort_draws_it) {
    std::vector<std::vector<float>> cases;
    for (float scale : {0.05f, 3.0f}) cases.push_back(random_logits(151936, scale, uint32_t(scale * 100)));
    std::vector<float> ties(300, 1.0f);
    for (size_t i = 0; i < ties.size(); i += 3) ties[i] = 2.0f;
    for (size_t i = 1; i < ties.size(); i += 7) ties[i] = -std::numeric_limits<float>::infinity();
    cases.push_back(ties);
    int draws = 0;
    for (size_t c = 0; c < cases.size(); ++c)
        for (float temperature : {0.3f, 1.0f, 4.0f})
            for (float top_p : {0.0f, 0.1f, 0.5f, 0.9f, 0.95f, 0.999f})
                for (uint64_t seed = 0; seed < 3; ++seed) {
                    std::mt19937_64 a(seed * 7919 + c), b(seed * 7919 + c);
                    const token_id got = sample_token(cases[c], temperature, top_p, a);
                    const token_id want = full_sort_nucleus(cases[c], temperature, top_p, b);
                    ASSERT_EQ(got, want) << "case " << c << " T " << temperature << " top_p " << top_p << " seed " << seed;
                    ASSERT_EQ(a(), b()) << "one draw from the generator per call";
                    ASSERT_NE(cases[c][size_t(got)], -std::numeric_limits<float>::infinity());
                    ++draws;
                }
    EXPECT_EQ(draws, 3 * 3 * 6 * 3);
}

// top_p >= 1: every token drawn in proportion to its probability (a seeded run: the counts are
// the same every time; each within 4.5 standard deviations of its expectation), masked never.
TEST(Sampler, the_whole_distribution_is_drawn_in_proportion) {
    const std::vector<float> logits{1.0f, 0.0f, 2.5f, -std::numeric_limits<float>::infinity(), -1.0f, 2.5f};
    const float temperature = 0.8f;
    std::vector<double> expect(logits.size());
    double z = 0;
    for (size_t i = 0; i < logits.size(); ++i) z += expect[i] = std::exp(double(logits[i]) / temperature);
    std::mt19937_64 rng(123);
    constexpr int kDraws = 60000;
    std::vector<int> count(logits.size(), 0);
    for (int d = 0; d < kDraws; ++d) ++count[size_t(sample_token(logits, temperature, 1.0f, rng))];
    EXPECT_EQ(count[3], 0) << "a masked token was drawn";
    for (size_t i = 0; i < logits.size(); ++i) {
        const double p = expect[i] / z, mean = p * kDraws, sd = std::sqrt(kDraws * p * (1 - p));
        EXPECT_NEAR(count[i], mean, 4.5 * sd + 1) << "token " << i;
    }
    // reproducible
    std::mt19937_64 r1(9), r2(9);
    for (int d = 0; d < 100; ++d) ASSERT_EQ(sample_token(logits, 1.3f, 1.0f, r1), sample_token(logits, 1.3f, 1.0f, r2));
}

}  // namespace
