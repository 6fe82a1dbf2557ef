// Per-element math shared by the CPU and CUDA backends (HF semantics, float32 compute).
//
// Everything here is a small inline function over scalars, usable from host code and from CUDA
// kernels (CC_HD). The CPU backend's vector kernels implement the same formulas lane by lane; the
// scalar versions here are their reference and the scalar path's implementation. Tests compare
// them with float64 formulas (tests/test_kernel_math.cpp).
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
CC_HD inline void rope_rotate(float* x, const float* cos_t, const float* sin_t, int half) {
    for (int i = 0; i < half; ++i) {
        const float a = x[i], b = x[i + half];
        x[i] = a * cos_t[i] - b * sin_t[i];
        x[i + half] = b * cos_t[i] + a * sin_t[i];
    }
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

}  // namespace cc::km
