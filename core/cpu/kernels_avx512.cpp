// The AVX-512 kernels (F, BW, VL, DQ + FMA), chosen at run time when the CPU has them.
#include "core/cpu/kernels.h"
#include "core/base/kernel_math.h"

// GCC 12's AVX-512 intrinsics initialise their "undefined" operand as `__m512i __Y = __Y;`, which
// -Wmaybe-uninitialized reports once inlined (GCC bug 105593, fixed in GCC 13); not our code.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
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
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")
#endif

namespace cc::cpu::avx512 {
namespace {

struct V {
    using reg = __m512;
    static constexpr int W = 16;
    static constexpr int n_regs = 32;
    static constexpr int gemm_mr = 12;  // 12 x 32 tile: 24 accumulators, 2 loads + 12 broadcasts per k
    static constexpr bool gemm_rows_whole_k = true;  // row tiles down the whole of K (measured: kernels_impl.h)
    static constexpr int gemm_nrv = 2;
    static constexpr int gemm_tall_r2 = 0;  // no tall tile: not measured on an AVX-512 machine
    static constexpr int qk_r = 8;      // 8 vrows x 2 key tiles: 16 accumulators
    static constexpr bool has_transpose16 = true;
    static constexpr int qk_tt = 2;
    // P·V: as many vrows as a whole-head chunk holds (narrower chunks not measured on AVX-512)
    static constexpr int pv_rows = 0;
    static constexpr int gemv_np = 4;   // decode: 4 panels x 2 vectors = 8 FMA chains in flight

    static __mmask16 mask(int n) { return __mmask16((1u << n) - 1u); }
    static reg zero() { return _mm512_setzero_ps(); }
    static reg set1(float f) { return _mm512_set1_ps(f); }
    static reg load(const float* p) { return _mm512_loadu_ps(p); }
    static reg load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
    static reg widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
    static reg load(const uint16_t* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
    static reg load_n(const uint16_t* p, int n) { return widen(_mm256_maskz_loadu_epi16(mask(n), p)); }
    static reg load(const int8_t* p) {
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    }
    static reg load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
    static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
    static void store_n(float* p, reg v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
    static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
    static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
    static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
    static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
    static reg div(reg a, reg b) { return _mm512_div_ps(a, b); }
    static reg max(reg a, reg b) { return _mm512_max_ps(a, b); }
    static reg keep_lanes(reg v, int first, int n, float fill) {
        return _mm512_mask_blend_ps(__mmask16(mask(n) << first), set1(fill), v);
    }
    // Fixed tree: lanes i + i+8, then + i+4, + i+2, + i+1.
    static float hsum(reg v) {
        const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
        const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
        const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
        return _mm_cvtss_f32(s1);
    }
    static float hmax(reg v) { return _mm512_reduce_max_ps(v); }
    // r[i][j] -> r[j][i] for a 16 x 16 block (unpack, 4x4 shuffles, then 128-bit lane shuffles).
    static void transpose16(reg* r) {
        reg t[16], u[16];
        for (int i = 0; i < 16; i += 2) {
            t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
        }
        for (int g = 0; g < 4; ++g) {  // u[4g + c]: column 4L + c of rows 4g..4g+3 in lane L
            u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
            u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
            u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
            u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
        }
        for (int c = 0; c < 4; ++c) {  // t[c]: columns c, c+8 of row groups 0,1; t[8+c]: groups 2,3
            t[c] = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
            t[4 + c] = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
            t[8 + c] = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
            t[12 + c] = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
        }
        for (int c = 0; c < 4; ++c) {
            r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
            r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xDD);
            r[4 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);
            r[12 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xDD);
        }
    }
    static void transpose_w(reg* r) { transpose16(r); }
    // exp(x) = 2^n e^r, n = round(x log2 e), r = x - n ln 2 (Cody-Waite), Cephes polynomial; about
    // 1 ulp. scalef handles overflow to inf and gradual underflow.
    static reg exp(reg x) {
        x = _mm512_max_ps(_mm512_min_ps(x, set1(88.8f)), set1(-104.0f));
        const reg n = _mm512_roundscale_ps(mul(x, set1(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
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
        return _mm512_scalef_ps(y, n);
    }
};

#include "core/cpu/kernels_impl.h"

}  // namespace

const Kernels& table() { return table_impl(Isa::avx512); }

}  // namespace cc::cpu::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop
