// The AVX2 + FMA kernels, chosen at run time when the CPU has them but not AVX-512.
#include "core/cpu/kernels.h"
#include "core/base/kernel_math.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <type_traits>

// GCC takes the target for the rest of the file; clang has no "GCC target" pragma and takes it as
// a function attribute applied to every function below.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace cc::cpu::avx2 {
namespace {

struct V {
    using reg = __m256;
    static constexpr int W = 8;
    static constexpr int n_regs = 16;
    static constexpr int gemm_mr = 6;  // 6 x 16 tile: 12 accumulators
    static constexpr bool gemm_rows_whole_k = true;
    static constexpr int gemm_nrv = 2;
    // 7-8 tokens over q8 panels: one tile of up to 8 x 8 over both token panels, read in place
    // (gemm_tall in kernels_impl.h); measured 13-16% faster there, and slower from 10 tokens on.
    // F32 and BF16 panels take the row tiles down the whole of K (gemm_rows), faster at every
    // row count measured (2-512).
    static constexpr int gemm_tall_r2 = 2;
    static constexpr int qk_r = 6;     // 6 vrows x 1 key tile (2 vectors): 12 accumulators
    static constexpr bool has_transpose16 = false;
    static constexpr int qk_tt = 1;
    static constexpr int pv_rows = 6;   // P·V: up to 6 vrows share each V vector (2-vector chunks, pv_chunk_for)
    static constexpr int gemv_np = 3;   // decode: 3 panels x 2 vectors = 6 FMA chains (16 registers)

    static __m256i lane_mask(int first, int n) {
        const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i ge = _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(first - 1));
        const __m256i lt = _mm256_cmpgt_epi32(_mm256_set1_epi32(first + n), idx);
        return _mm256_and_si256(ge, lt);
    }
    static reg zero() { return _mm256_setzero_ps(); }
    static reg set1(float f) { return _mm256_set1_ps(f); }
    static reg load(const float* p) { return _mm256_loadu_ps(p); }
    static reg load_n(const float* p, int n) { return _mm256_maskload_ps(p, lane_mask(0, n)); }
    static reg widen(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
    static reg load(const uint16_t* p) { return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
    static reg load_n(const uint16_t* p, int n) {
        alignas(16) uint16_t tmp[8] = {};
        std::memcpy(tmp, p, size_t(n) * sizeof(uint16_t));
        return widen(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp)));
    }
    static reg load(const int8_t* p) {
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
    }
    static reg load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
    static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
    static void store_n(float* p, reg v, int n) { _mm256_maskstore_ps(p, lane_mask(0, n), v); }
    static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
    static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
    static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
    static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
    static reg div(reg a, reg b) { return _mm256_div_ps(a, b); }
    static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
    static reg keep_lanes(reg v, int first, int n, float fill) {
        return _mm256_blendv_ps(set1(fill), v, _mm256_castsi256_ps(lane_mask(first, n)));
    }
    // Fixed tree: lanes i + i+4, then + i+2, + i+1.
    static float hsum(reg v) {
        const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
        return _mm_cvtss_f32(s1);
    }
    static float hmax(reg v) {
        const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        const __m128 m1 = _mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 1));
        return _mm_cvtss_f32(m1);
    }
    // r[i][j] -> r[j][i] for an 8 x 8 block: unpack pairs, 4x4 shuffles within 128-bit lanes, then
    // swap the lanes' halves.
    static void transpose_w(reg* r) {
        reg t[8], u[8];
        for (int i = 0; i < 8; i += 2) {
            t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
        }
        for (int g = 0; g < 2; ++g) {  // u[4g + c]: column c (lane 0) and c + 4 (lane 1) of rows 4g..4g+3
            u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
            u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
            u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
            u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
        }
        for (int c = 0; c < 4; ++c) {
            r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
            r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
        }
    }
    // As the AVX-512 exp (same clamp, reduction and polynomial); 2^n is applied as two exact
    // power-of-two factors 2^(n>>1) * 2^(n - (n>>1)), each a normal float, so the result is rounded
    // once, as scalef does (gradual underflow included).
    static reg exp(reg x) {
        x = _mm256_max_ps(_mm256_min_ps(x, set1(88.8f)), set1(-104.0f));
        const reg n = _mm256_round_ps(mul(x, set1(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        reg r = fma(n, set1(-0.693359375f), x);
        r = fma(n, set1(2.12194440e-4f), r);
        reg p = set1(1.9875691500e-4f);
        p = fma(p, r, set1(1.3981999507e-3f));
        p = fma(p, r, set1(8.3334519073e-3f));
        p = fma(p, r, set1(4.1665795894e-2f));
        p = fma(p, r, set1(1.6666665459e-1f));
        p = fma(p, r, set1(5.0000001201e-1f));
        reg y = fma(p, mul(r, r), r);
        y = add(y, set1(1.0f));
        const __m256i ni = _mm256_cvtps_epi32(n);
        const __m256i n1 = _mm256_srai_epi32(ni, 1);
        const __m256i n2 = _mm256_sub_epi32(ni, n1);
        const __m256i bias = _mm256_set1_epi32(127);
        y = mul(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23)));
        return mul(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23)));
    }
};

#include "core/cpu/kernels_impl.h"

}  // namespace

const Kernels& table() { return table_impl(Isa::avx2); }

}  // namespace cc::cpu::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
