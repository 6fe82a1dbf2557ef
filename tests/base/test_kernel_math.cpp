// core/base/kernel_math.h against float64 formulas (and exact bit patterns where the result is exact).
#include "core/base/kernel_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace km = cc::km;

namespace {

double bf16_rne_reference(double x) {
    // Round a float to 8 significant bits, ties to even, by arithmetic on the double.
    if (x == 0.0 || std::isinf(x)) return x;
    int e;
    std::frexp(x, &e);              // x = m * 2^e, 0.5 <= |m| < 1
    const double ulp = std::ldexp(1.0, e - 8);
    return std::nearbyint(x / ulp) * ulp;  // nearbyint: ties to even in the default rounding mode
}

}  // namespace

TEST(kernel_math, bf16_widen_is_exact_shift) {
    for (uint32_t h = 0; h < 0x10000; h += 7) {
        const float f = km::bf16_to_f32(uint16_t(h));
        EXPECT_EQ(km::f32_bits(f), h << 16) << h;
    }
}

TEST(kernel_math, bf16_round_to_nearest_even) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1000.0f, 1000.0f);
    for (int i = 0; i < 100000; ++i) {
        const float x = u(rng) * std::pow(2.0f, float(int(rng() % 40) - 20));
        const float r = km::bf16_to_f32(km::f32_to_bf16(x));
        ASSERT_EQ(double(r), bf16_rne_reference(double(x))) << "x=" << x;
    }
    // ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> 1 (even); 1 + 3*2^-8 -> 1 + 2^-6.
    EXPECT_EQ(km::bf16_to_f32(km::f32_to_bf16(1.0f + 0.00390625f)), 1.0f);
    EXPECT_EQ(km::bf16_to_f32(km::f32_to_bf16(1.0f + 3 * 0.00390625f)), 1.0f + 0.015625f);
    EXPECT_TRUE(std::isinf(km::bf16_to_f32(km::f32_to_bf16(std::numeric_limits<float>::infinity()))));
    EXPECT_TRUE(std::isnan(km::bf16_to_f32(km::f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
    // the largest finite float rounds up to inf, as in torch
    EXPECT_TRUE(std::isinf(km::bf16_to_f32(km::f32_to_bf16(std::numeric_limits<float>::max()))));
}

TEST(kernel_math, f16_widen_matches_ldexp) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const uint32_t e = (h >> 10) & 31, m = h & 1023;
        const double sign = (h & 0x8000) ? -1.0 : 1.0;
        const float f = km::f16_to_f32(uint16_t(h));
        if (e == 31) {
            if (m == 0) {
                EXPECT_TRUE(std::isinf(f) && (f < 0) == (sign < 0)) << h;
            } else {
                EXPECT_TRUE(std::isnan(f)) << h;
            }
            continue;
        }
        const double expect = e == 0 ? sign * std::ldexp(double(m), -24) : sign * std::ldexp(double(1024 + m), int(e) - 25);
        ASSERT_EQ(double(f), expect) << "h=" << h;
        if (e == 0 && m == 0) {
            EXPECT_EQ(std::signbit(f), sign < 0);
        }
    }
}

TEST(kernel_math, rmsnorm_row_matches_float64) {
    std::mt19937 rng(2);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (int n : {1, 7, 64, 1000}) {
        std::vector<float> x(static_cast<size_t>(n)), w(static_cast<size_t>(n)), y(static_cast<size_t>(n));
        for (auto& v : x) v = nd(rng);
        for (auto& v : w) v = nd(rng);
        km::rmsnorm_row(x.data(), w.data(), y.data(), n, 1e-5f);
        double ss = 0;
        for (float v : x) ss += double(v) * v;
        const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
        for (int i = 0; i < n; ++i) {
            const double expect = double(w[size_t(i)]) * double(x[size_t(i)]) * inv;
            EXPECT_NEAR(y[size_t(i)], expect, 1e-6 * std::sqrt(double(n)) * (std::abs(expect) + 1e-3)) << "n=" << n << " i=" << i;
        }
    }
}

TEST(kernel_math, rope_frequencies_plain_and_llama3) {
    km::RopeParams p;
    p.theta = 10000.0;
    p.head_dim = 64;
    for (int i = 0; i < 32; ++i) EXPECT_DOUBLE_EQ(km::rope_inv_freq(i, p), std::pow(10000.0, -2.0 * i / 64));

    // llama3: factor 8, low 1, high 4, orig 8192 (Llama 3.1), theta 500000, head_dim 128.
    p.theta = 500000.0;
    p.head_dim = 128;
    p.factor = 8.0;
    p.low_freq_factor = 1.0;
    p.high_freq_factor = 4.0;
    p.original_max_position_embeddings = 8192;
    const double pi = std::acos(-1.0);
    int n_low = 0, n_high = 0, n_mid = 0;
    for (int i = 0; i < 64; ++i) {
        const double f = std::pow(500000.0, -2.0 * i / 128);
        const double wl = 2 * pi / f;
        double expect;
        if (wl < 8192.0 / 4.0) {
            expect = f;
            ++n_high;
        } else if (wl > 8192.0) {
            expect = f / 8.0;
            ++n_low;
        } else {
            const double s = (8192.0 / wl - 1.0) / (4.0 - 1.0);
            expect = (1 - s) * f / 8.0 + s * f;
            ++n_mid;
        }
        EXPECT_NEAR(km::rope_inv_freq(i, p), expect, 1e-15 * expect) << i;
    }
    EXPECT_GT(n_low, 0);
    EXPECT_GT(n_high, 0);
    EXPECT_GT(n_mid, 0);
}

TEST(kernel_math, rope_rotate_is_rotate_half) {
    const int hd = 8, half = 4;
    float x[hd] = {1, 2, 3, 4, 5, 6, 7, 8};
    float c[half], s[half];
    const double angles[half] = {0.1, 0.7, 2.0, -1.3};
    for (int i = 0; i < half; ++i) {
        c[i] = float(std::cos(angles[i]));
        s[i] = float(std::sin(angles[i]));
    }
    float y[hd];
    std::copy(x, x + hd, y);
    km::rope_rotate(y, c, s, half);
    for (int i = 0; i < half; ++i) {
        // HF: q * cos + rotate_half(q) * sin, rotate_half(q) = cat(-q[half:], q[:half])
        EXPECT_NEAR(y[i], x[i] * std::cos(angles[i]) - x[i + half] * std::sin(angles[i]), 1e-5);
        EXPECT_NEAR(y[i + half], x[i + half] * std::cos(angles[i]) + x[i] * std::sin(angles[i]), 1e-5);
    }
}

TEST(kernel_math, silu_swiglu_match_float64) {
    for (double xd = -30.0; xd <= 30.0; xd += 0.0137) {
        const double x = double(float(xd));
        const double expect = x / (1.0 + std::exp(-x));
        EXPECT_NEAR(km::silu(float(x)), expect, 4e-7 * (std::abs(expect) + 1e-6)) << x;
        EXPECT_NEAR(km::swiglu(float(x), 1.5f), expect * 1.5, 4e-7 * (std::abs(expect * 1.5) + 1e-6)) << x;
    }
    EXPECT_EQ(km::silu(-200.0f), -0.0f);
    EXPECT_EQ(km::silu(200.0f), 200.0f);
}

TEST(kernel_math, online_softmax_matches_two_pass) {
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 4.0f);
    std::vector<float> s(257), v(257);
    for (auto& x : s) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    km::SoftmaxState st;
    float acc = 0.0f;
    for (size_t j = 0; j < s.size(); ++j) {
        float p;
        const float rescale = km::softmax_update(st, s[j], &p);
        acc = acc * rescale + p * v[j];
    }
    double m = -1e300, l = 0, a = 0;
    for (float x : s) m = std::max(m, double(x));
    for (size_t j = 0; j < s.size(); ++j) {
        l += std::exp(s[j] - m);
        a += std::exp(s[j] - m) * v[j];
    }
    EXPECT_NEAR(st.m, m, 0.0);
    EXPECT_NEAR(st.l, l, 1e-5 * l);
    EXPECT_NEAR(acc / st.l, a / l, 1e-5 * (std::abs(a / l) + 1));
}

namespace {

// The CUDA attention's scheme on the host: keys in tiles of `tile`, grouped in chunks of
// `chunk`; per chunk an online softmax over its tiles (softmax_tile_begin), the chunks merged in
// order (softmax_merge / merge_acc). Returns the weighted mean of v.
double tiled_chunked_softmax(const std::vector<float>& s, const std::vector<float>& v, int tile, int chunk) {
    km::SoftmaxState total;
    float acc_t = 0.0f;
    for (size_t c0 = 0; c0 < s.size(); c0 += size_t(chunk)) {
        km::SoftmaxState st;
        float acc = 0.0f;
        for (size_t t0 = c0; t0 < std::min(s.size(), c0 + size_t(chunk)); t0 += size_t(tile)) {
            const size_t t1 = std::min({s.size(), t0 + size_t(tile), c0 + size_t(chunk)});
            float mx = -INFINITY;
            for (size_t j = t0; j < t1; ++j) mx = std::max(mx, s[j]);
            const float rescale = km::softmax_tile_begin(st, mx);
            acc = acc * rescale;
            for (size_t j = t0; j < t1; ++j) {
                const float p = std::exp(s[j] - st.m);
                st.l = st.l + p;
                acc = acc + p * v[j];
            }
        }
        const km::MergeScales f = km::softmax_merge(total, st);
        acc_t = km::merge_acc(acc_t, f.a, acc, f.b);
    }
    return double(acc_t) / double(total.l);
}

}  // namespace

TEST(kernel_math, tiled_chunked_softmax_matches_two_pass) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 4.0f);
    for (int n : {1, 31, 32, 33, 255, 256, 257, 1000}) {
        std::vector<float> s(static_cast<size_t>(n)), v(static_cast<size_t>(n));
        for (auto& x : s) x = nd(rng);
        for (auto& x : v) x = nd(rng);
        double m = -1e300, l = 0, a = 0;
        for (float x : s) m = std::max(m, double(x));
        for (size_t j = 0; j < s.size(); ++j) {
            l += std::exp(s[j] - m);
            a += std::exp(s[j] - m) * v[j];
        }
        EXPECT_NEAR(tiled_chunked_softmax(s, v, 32, 256), a / l, 1e-5 * (std::abs(a / l) + 1)) << "n=" << n;
    }
}

TEST(kernel_math, softmax_merge_with_empty_and_order) {
    // Merging into an empty state takes the other side exactly (factor 1, the empty side 0).
    km::SoftmaxState empty, b;
    b.m = 2.5f;
    b.l = 3.25f;
    const km::MergeScales f = km::softmax_merge(empty, b);
    EXPECT_EQ(f.a, 0.0f);
    EXPECT_EQ(f.b, 1.0f);
    EXPECT_EQ(empty.m, 2.5f);
    EXPECT_EQ(empty.l, 3.25f);
    EXPECT_EQ(km::merge_acc(0.0f, f.a, 7.0f, f.b), 7.0f);
    // Merging an empty state in keeps a state as it is.
    km::SoftmaxState a = b, none;
    const km::MergeScales g = km::softmax_merge(a, none);
    EXPECT_EQ(g.a, 1.0f);
    EXPECT_EQ(g.b, 0.0f);
    EXPECT_EQ(a.m, b.m);
    EXPECT_EQ(a.l, b.l);
    // Two states merge to the softmax of their union: (m=0, l=1) + (m=ln 3, l=1) -> m=ln 3, l=1/3+1.
    km::SoftmaxState x, y;
    x.m = 0.0f;
    x.l = 1.0f;
    y.m = std::log(3.0f);
    y.l = 1.0f;
    const km::MergeScales h = km::softmax_merge(x, y);
    EXPECT_NEAR(h.a, 1.0 / 3.0, 1e-7);
    EXPECT_EQ(h.b, 1.0f);
    EXPECT_NEAR(x.l, 4.0 / 3.0, 1e-6);
}

TEST(kernel_math, softmax_tile_begin_rescales_running_sum) {
    km::SoftmaxState st;
    EXPECT_EQ(km::softmax_tile_begin(st, 1.0f), 0.0f);  // empty: nothing to rescale
    EXPECT_EQ(st.m, 1.0f);
    st.l = 2.0f;
    EXPECT_EQ(km::softmax_tile_begin(st, 0.5f), 1.0f);  // a smaller tile max keeps m
    EXPECT_EQ(st.l, 2.0f);
    const float r = km::softmax_tile_begin(st, 3.0f);
    EXPECT_NEAR(r, std::exp(-2.0), 1e-7);
    EXPECT_EQ(st.m, 3.0f);
    EXPECT_NEAR(st.l, 2.0 * std::exp(-2.0), 1e-7);
}

TEST(kernel_math, uniform01_is_open_interval_repeatable_and_uniform) {
    double sum = 0;
    int below_quarter = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
        const float u = km::uniform01(42, 7, uint64_t(i));
        ASSERT_GT(u, 0.0f) << i;
        ASSERT_LT(u, 1.0f) << i;
        ASSERT_EQ(u, km::uniform01(42, 7, uint64_t(i)));
        sum += u;
        below_quarter += u < 0.25f;
    }
    EXPECT_NEAR(sum / n, 0.5, 0.005);            // sd of the mean: 0.00065
    EXPECT_NEAR(double(below_quarter) / n, 0.25, 0.005);
    // seed, step and index each change the stream
    EXPECT_NE(km::uniform01(42, 7, 0), km::uniform01(43, 7, 0));
    EXPECT_NE(km::uniform01(42, 7, 0), km::uniform01(42, 8, 0));
    EXPECT_NE(km::uniform01(42, 7, 0), km::uniform01(42, 7, 1));
}

TEST(kernel_math, gumbel_max_samples_softmax) {
    // Two logits [0, ln 3]: softmax gives P(1) = 0.75; at temperature 0.5, P(1) = 9 / 10.
    for (auto [temperature, want] : {std::pair{1.0f, 0.75}, std::pair{0.5f, 0.9}}) {
        const int n = 100000;
        int ones = 0;
        for (int r = 0; r < n; ++r) {
            const float s0 = km::gumbel_score(0.0f, temperature, km::uniform01(9, 1, uint64_t(r) * 2));
            const float s1 = km::gumbel_score(std::log(3.0f), temperature, km::uniform01(9, 1, uint64_t(r) * 2 + 1));
            ones += s1 > s0;
        }
        EXPECT_NEAR(double(ones) / n, want, 0.007) << "temperature " << temperature;  // 5 sd
    }
}

// binary16 rounding: every binary16 value survives the round trip, halfway cases go to even,
// overflow to infinity, tiny values to (signed) zero or the nearest subnormal.
TEST(kernel_math, f32_to_f16_round_trips_and_rounds_to_nearest_even) {
    for (uint32_t h = 0; h < 0x10000u; ++h) {
        const float f = cc::km::f16_to_f32(uint16_t(h));
        if (std::isnan(f)) {
            EXPECT_TRUE(std::isnan(cc::km::f16_to_f32(cc::km::f32_to_f16(f)))) << h;
            continue;
        }
        ASSERT_EQ(cc::km::f32_to_f16(f), uint16_t(h)) << "h=" << h;
    }
    // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: even (1). 1 + 3 * 2^-11: halfway, to 1 + 2^-9.
    EXPECT_EQ(cc::km::f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);
    EXPECT_EQ(cc::km::f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02u);
    EXPECT_EQ(cc::km::f32_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01u);
    EXPECT_EQ(cc::km::f32_to_f16(65504.0f), 0x7bffu);
    EXPECT_EQ(cc::km::f32_to_f16(65519.0f), 0x7bffu);
    EXPECT_EQ(cc::km::f32_to_f16(65520.0f), 0x7c00u);
    EXPECT_EQ(cc::km::f32_to_f16(-1e9f), 0xfc00u);
    EXPECT_EQ(cc::km::f32_to_f16(std::ldexp(1.0f, -25)), 0x0000u);                          // tie: to even (0)
    EXPECT_EQ(cc::km::f32_to_f16(std::ldexp(1.0f, -25) * 1.5f), 0x0001u);                   // smallest subnormal
    EXPECT_EQ(cc::km::f32_to_f16(std::ldexp(3.0f, -25)), 0x0002u);                          // 1.5 units: tie to even 2
    EXPECT_EQ(cc::km::f32_to_f16(-std::ldexp(1.0f, -30)), 0x8000u);
    EXPECT_EQ(cc::km::f32_to_f16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400u);  // rounds up into the normals
}
