// Per-element math shared by the CPU and CUDA backends (HF semantics, float32 compute).
//
// Everything here is a small inline function over scalars, usable from host code and from CUDA
// kernels (CC_HD). The CPU backend's vector kernels implement the same formulas lane by lane; the
// scalar versions here are their reference and the scalar path's implementation. Tests compare
// them with float64 formulas (tests/base/test_kernel_math.cpp).
//
// Floating-point contraction matters for exactness: a compiler that fuses `a * b + c` into an FMA
// in one caller and not in another makes the same formula give different bits. The CPU sources
// are compiled with -ffp-contract=off, and where an FMA is wanted it is written explicitly.
#pragma once

#ifdef __CUDACC__
#define CC_HD __host__ __device__
#else
#define CC_HD
#endif

#include <cmath>
#include <cstdint>
#include <cstring>

namespace cc::km {

// ---- bf16 / f16 <-> f32 ------------------------------------------------------------------------

CC_HD inline uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
CC_HD inline float f32_from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// bf16 is the upper half of an f32: widening is a 16-bit shift, exact.
CC_HD inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

// Round to nearest, ties to even (as torch's .to(torch.bfloat16)); NaN stays a (quiet) NaN.
CC_HD inline uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);
    uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
    return uint16_t((u + rounding_bias) >> 16);
}

// IEEE binary16 -> binary32, exact (subnormals, infinities and NaN included).
CC_HD inline float f16_to_f32(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else {  // subnormal: normalise
        int e = -1;
        do {
            mant <<= 1;
            ++e;
        } while ((mant & 0x400u) == 0);
        bits = sign | (uint32_t(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
    return f32_from_bits(bits);
}

// binary32 -> IEEE binary16, round to nearest, ties to even (as torch's .to(torch.float16));
// overflow gives infinity, NaN stays a (quiet) NaN. f32_to_f16(f16_to_f32(h)) == h for every
// non-NaN h.
CC_HD inline uint16_t f32_to_f16(float f) {
    const uint32_t u = f32_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds past 65504
    if (a >= 0x38800000u) {                                  // a normal binary16 (>= 2^-14)
        const uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
        return uint16_t(sign | ((r - 0x38000000u) >> 13));
    }
    if (a < 0x33000000u) return uint16_t(sign);  // below 2^-25: rounds to zero
    // subnormal: the value in units of 2^-24, rounded to nearest even (may carry into the
    // smallest normal, whose encoding follows on)
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - (a >> 23);  // 14..24
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return uint16_t(sign | q);
}

// ---- RMSNorm (HF LlamaRMSNorm in float32) ------------------------------------------------------

// 1 / sqrt(mean(x²) + eps), from the sum of squares of n elements; eps as float like HF's
// `variance + self.variance_epsilon` on a float32 tensor.
CC_HD inline float rms_inv(float sum_sq, int n, float eps) { return 1.0f / std::sqrt(sum_sq / float(n) + eps); }

// y = (x * inv) * w, the order HF applies: weight * (x * rsqrt(var + eps)).
CC_HD inline float rms_apply(float x, float inv, float w) { return w * (x * inv); }

// Reference row: sum of squares in index order.
CC_HD inline void rmsnorm_row(const float* x, const float* w, float* y, int n, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; ++i) ss = ss + x[i] * x[i];
    const float inv = rms_inv(ss, n, eps);
    for (int i = 0; i < n; ++i) y[i] = rms_apply(x[i], inv, w[i]);
}

// ---- RoPE (HF rotate_half style) ---------------------------------------------------------------

struct RopeParams {
    double theta = 10000.0;
    int head_dim = 0;
    // llama3 rope_scaling; factor == 0 means none.
    double factor = 0.0;
    double low_freq_factor = 1.0;
    double high_freq_factor = 1.0;
    double original_max_position_embeddings = 0.0;
};

// Frequency of rotation pair i (0 <= i < head_dim/2): theta^(-2i/head_dim), with llama3 scaling:
// long wavelengths (> orig_max/low_freq_factor) are divided by `factor`, short ones
// (< orig_max/high_freq_factor) kept, and the band between interpolated smoothly.
// Computed in double; the backends round cos/sin of position * freq to float.
CC_HD inline double rope_inv_freq(int i, const RopeParams& p) {
    double freq = 1.0 / std::pow(p.theta, double(2 * i) / double(p.head_dim));
    if (p.factor == 0.0) return freq;
    const double pi = 3.14159265358979323846;
    const double low_freq_wavelen = p.original_max_position_embeddings / p.low_freq_factor;
    const double high_freq_wavelen = p.original_max_position_embeddings / p.high_freq_factor;
    const double wavelen = 2.0 * pi / freq;
    if (wavelen > low_freq_wavelen) return freq / p.factor;
    if (wavelen < high_freq_wavelen) return freq;
    const double smooth = (p.original_max_position_embeddings / wavelen - p.low_freq_factor) /
                          (p.high_freq_factor - p.low_freq_factor);
    return (1.0 - smooth) * freq / p.factor + smooth * freq;
}

// Rotates one head in place: pairs (i, i + half), half = head_dim / 2;
// x_i' = x_i cos - x_{i+half} sin, x_{i+half}' = x_{i+half} cos + x_i sin
// (HF: q * cos + rotate_half(q) * sin, rotate_half(x) = cat(-x[half:], x[:half])).
// One rotation pair (a = x_i, b = x_{i+half}); the CUDA kernel rotates pairs in parallel with it.
CC_HD inline void rope_pair(float& a, float& b, float c, float s) {
    const float a0 = a, b0 = b;
    a = a0 * c - b0 * s;
    b = b0 * c + a0 * s;
}
CC_HD inline void rope_rotate(float* x, const float* cos_t, const float* sin_t, int half) {
    for (int i = 0; i < half; ++i) rope_pair(x[i], x[i + half], cos_t[i], sin_t[i]);
}

// ---- activations and softmax -------------------------------------------------------------------

// SiLU as torch computes it: x / (1 + exp(-x)).
CC_HD inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
// The SwiGLU MLP's elementwise step: silu(gate) * up.
CC_HD inline float swiglu(float gate, float up) { return silu(gate) * up; }

// Online softmax state over a stream of scores: running max m and running sum l of exp(s - m).
struct SoftmaxState {
    float m = -INFINITY;
    float l = 0.0f;
};
// Adds score s; returns the factor by which earlier exp-weighted accumulators must be rescaled
// (exp(m_old - m_new)), and writes exp(s - m_new) to *p.
CC_HD inline float softmax_update(SoftmaxState& st, float s, float* p) {
    const float m_new = s > st.m ? s : st.m;
    const float rescale = st.m == -INFINITY ? 0.0f : std::exp(st.m - m_new);
    *p = std::exp(s - m_new);
    st.l = st.l * rescale + *p;
    st.m = m_new;
    return rescale;
}

// Starts a tile of scores whose largest is tile_max (a finite score): moves the running max to
// max(m, tile_max), rescales l, and returns the factor for the earlier weighted sums (0 when the
// state was empty). The tile's exp(s - st.m) are then added to l and the sums by the caller, in
// key order. (The CUDA attention kernels update a whole key tile at once with this.)
CC_HD inline float softmax_tile_begin(SoftmaxState& st, float tile_max) {
    const float m_new = tile_max > st.m ? tile_max : st.m;
    const float rescale = st.m == -INFINITY ? 0.0f : std::exp(st.m - m_new);
    st.l = st.l * rescale;
    st.m = m_new;
    return rescale;
}

// Merging two partial softmax states (split-K attention): a := a (+) b. Returns the factors by
// which a's and b's weighted sums are scaled before adding them (merge_acc). An empty side
// (m == -inf) gets factor 0. Written without FMAs so the host and the device give the same bits.
struct MergeScales {
    float a = 0.0f;
    float b = 0.0f;
};
CC_HD inline MergeScales softmax_merge(SoftmaxState& a, const SoftmaxState& b) {
    const float m = b.m > a.m ? b.m : a.m;
    MergeScales s;
    s.a = a.m == -INFINITY ? 0.0f : std::exp(a.m - m);
    s.b = b.m == -INFINITY ? 0.0f : std::exp(b.m - m);
    a.l = a.l * s.a + b.l * s.b;
    a.m = m;
    return s;
}
CC_HD inline float merge_acc(float acc_a, float scale_a, float acc_b, float scale_b) {
    return acc_a * scale_a + acc_b * scale_b;
}

// ---- greedy and seeded sampling ----------------------------------------------------------------

// Greedy's rule, the same wherever a token is picked (the engine's sampler, the CPU backend, the
// CUDA backend's argmax kernel, whose tree of "larger value, or the lower index on equal values"
// picks the same index): the first index of the largest value; NaN never wins; a row of NaN only
// gives 0.
CC_HD inline int argmax_row(const float* x, int n) {
    int best_i = -1;
    float best = 0.0f;
    for (int i = 0; i < n; ++i)
        if (!(x[i] != x[i]) && (best_i < 0 || x[i] > best)) {  // x != x: NaN (no <cmath> isnan on the device)
            best = x[i];
            best_i = i;
        }
    return best_i < 0 ? 0 : best_i;
}

// splitmix64: a counter-based generator, so sample i of step s is a pure function of (seed, s, i)
// on the host and on the device alike.
CC_HD inline uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
// Uniform in (0, 1), never 0 or 1: 24 random bits at the centre of their interval.
CC_HD inline float uniform01(uint64_t seed, uint64_t step, uint64_t index) {
    const uint64_t h = splitmix64(seed ^ splitmix64(step ^ splitmix64(index)));
    return (float(uint32_t(h >> 40)) + 0.5f) * (1.0f / 16777216.0f);
}
// Gumbel-max: argmax_i(logit_i / temperature + gumbel_i) is a sample of softmax(logits / temperature).
CC_HD inline float gumbel_score(float logit, float temperature, float u) {
    return logit / temperature - std::log(-std::log(u));
}

}  // namespace cc::km
