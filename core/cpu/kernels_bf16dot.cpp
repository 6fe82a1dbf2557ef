// The bf16dot GEMM: BF16 weights times activations rounded to BF16, pairs of products summed into
// F32 by AVX-512 BF16's VDPBF16PS (kernels.h, WFormat::bf16dot). Chosen only when the CPU has the
// instruction (bf16dot::supported()); the weights were packed by pack_matrix into pair panels.
//
// The exactness contract holds as in the F32 GEMM: every output element y[m][n] is the chain
// acc = dpbf16(acc, x-pair kp, w-pair kp) over kp = 0, 1, ..., ceil(K/2)-1 from +0, whatever the
// block, tile, thread or batch size (k blocks store the running float in Y and reload it, which is
// exact), and the activations are rounded to BF16 (nearest even, as km::f32_to_bf16) the same way for
// one row (decode) and for many (prefill). So cached and full paths give the same bits.
#include "core/cpu/kernels.h"
#include "core/base/kernel_math.h"

#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593, as in kernels_avx512.cpp
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cpuid.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma")
#endif

namespace cc::cpu::bf16dot {
namespace {

constexpr int kW = 16;         // F32 lanes per register: one lane holds one feature's pair
constexpr int kNV = 2;         // vectors per micro-tile row
constexpr int kNR = kNV * kW;  // features per panel (pack_matrix's nr for this format)
constexpr int kMR = 12;        // tokens per micro-tile: 24 accumulators, 2 loads + 12 broadcasts per pair
constexpr int kKC = 256;       // pairs per k block: an X micro-panel (KC x MR x 4 bytes) stays in L1
constexpr int kNB = 4 * kNR;   // features per task: a W block (NB x KC x 4 bytes) stays in L2
constexpr int kGemvNP = 4;     // decode: 4 panels x 2 vectors = 8 chains in flight
constexpr int kPrefetchNear = 16, kPrefetchFar = 64;  // pairs ahead in a panel (micro's prefetch)

inline __m512 dp(__m512 acc, __m512i x, __m512i w) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(x), reinterpret_cast<__m512bh&>(w));
}

// The first cnt lanes of v to y (all 16 when cnt >= 16, none when cnt <= 0): a tile's last
// features may be past the matrix's.
inline void store_lanes(float* y, __m512 v, int cnt) {
    if (cnt >= kW)
        _mm512_storeu_ps(y, v);
    else if (cnt > 0)
        _mm512_mask_storeu_ps(y, __mmask16((1u << cnt) - 1u), v);
}

// BF16 of 16 floats, bit for bit km::f32_to_bf16 (nearest even; a NaN is quieted, its sign and
// upper payload kept), as 16 uint16.
inline __m256i to_bf16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

// A row of k activations as the k2 = ceil(k / 2) pairs VDPBF16PS reads: BF16 element 2kp in the
// low half, 2kp+1 in the high half (0 past k) — which is the BF16 row itself in memory order.
void row_pairs(const float* x, int k, uint32_t* out) {
    auto* h = reinterpret_cast<uint16_t*>(out);
    int i = 0;
    for (; i + kW <= k; i += kW) _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + i), to_bf16(_mm512_loadu_ps(x + i)));
    if (i < k) {
        const int n = k - i;
        _mm256_mask_storeu_epi16(h + i, __mmask16((1u << n) - 1u), to_bf16(_mm512_maskz_loadu_ps(__mmask16((1u << n) - 1u), x + i)));
    }
    if (k % 2 != 0) h[k] = 0;
}

// Xp panel tp: [K2][MR] pairs, tokens tp*MR.. (zeros past m); `pairs` is k2 words of scratch.
void pack_x_panel(const float* x, int m, int k, int k2, int tp, uint32_t* pairs, uint32_t* xp) {
    uint32_t* dst = xp + size_t(tp) * size_t(k2) * kMR;
    for (int r = 0; r < kMR; ++r) {
        const int row = tp * kMR + r;
        if (row < m) {
            row_pairs(x + size_t(row) * size_t(k), k, pairs);
            for (int kp = 0; kp < k2; ++kp) dst[size_t(kp) * kMR + r] = pairs[kp];
        } else {
            for (int kp = 0; kp < k2; ++kp) dst[size_t(kp) * kMR + r] = 0u;
        }
    }
}

// R token rows x kNR features over kc pairs; y points at (row 0, feature 0) of the tile.
// Prefetch: the first row tile of a block, which reads the weights from memory (the others find
// them in L2).
template <int R, bool Prefetch>
void micro(const uint32_t* xp, const uint32_t* wp, int kc, float* y, int64_t ldy, int n_valid, bool accumulate) {
    __m512 acc[R][kNV];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int v = 0; v < kNV; ++v) {
            const int cnt = n_valid - v * kW;
            if (!accumulate || cnt <= 0)
                acc[r][v] = _mm512_setzero_ps();
            else
                acc[r][v] = _mm512_maskz_loadu_ps(__mmask16(cnt >= kW ? 0xffffu : (1u << cnt) - 1u), y + r * ldy + v * kW);
        }
    for (int kk = 0; kk < kc; ++kk) {
        __m512i wv[kNV];
        // the panel 16 and 64 pairs (2 and 8 KiB) ahead: with a few rows (decode steps of a few
        // sequences, a cache hit's suffix) the hardware prefetcher alone does not keep the memory
        // busy while the arithmetic runs, and the time is the sum of the two instead of the larger
        // (measured in docs/benchmarks.md, "A fourth sitting"); past the panel's
        // end the far line is the next panel's (the next block's at the last: harmless)
        if constexpr (Prefetch)
#pragma GCC unroll 2
            for (int v = 0; v < kNV; ++v) {
                _mm_prefetch(reinterpret_cast<const char*>(wp + size_t(kk + kPrefetchNear) * kNR + v * kW), _MM_HINT_T0);
                _mm_prefetch(reinterpret_cast<const char*>(wp + size_t(kk + kPrefetchFar) * kNR + v * kW), _MM_HINT_T0);
            }
#pragma GCC unroll 2
        for (int v = 0; v < kNV; ++v) wv[v] = _mm512_loadu_si512(wp + size_t(kk) * kNR + v * kW);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const __m512i b = _mm512_set1_epi32(int(xp[size_t(kk) * kMR + r]));
#pragma GCC unroll 2
            for (int v = 0; v < kNV; ++v) acc[r][v] = dp(acc[r][v], b, wv[v]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int v = 0; v < kNV; ++v) store_lanes(y + r * ldy + v * kW, acc[r][v], n_valid - v * kW);
}

template <int R>
void micro_rows(int rows, const uint32_t* xp, const uint32_t* wp, int kc, float* y, int64_t ldy, int n_valid, bool accumulate,
                bool prefetch) {
    if constexpr (R > 1) {
        if (rows < R) return micro_rows<R - 1>(rows, xp, wp, kc, y, ldy, n_valid, accumulate, prefetch);
    }
    if (prefetch)
        micro<R, true>(xp, wp, kc, y, ldy, n_valid, accumulate);
    else
        micro<R, false>(xp, wp, kc, y, ldy, n_valid, accumulate);
}

// A decode step of a few sequences (R <= kFewRows rows): NP panels side by side over the whole of
// K, so NP weight streams are in flight on each core. micro's one stream at a time leaves the
// memory idle while the arithmetic runs: its time is the sum of the two. Each element's chain is
// micro's (every pair in order from +0), so the bits are the same. xp: the X panel ([k2][kMR]
// pairs); wp: the first panel; y: (row 0, the first panel's feature 0); n_valid: features of the
// NP panels that exist.
constexpr int kFewRows = 6;
constexpr int few_rows_panels(int rows) { return rows <= 3 ? 4 : rows == 4 ? 3 : 2; }  // 24 accumulators at most

template <int R, int NP>
void micro_panels(const uint32_t* xp, const uint32_t* wp, size_t panel_stride, int k2, float* y, int64_t ldy, int n_valid) {
    __m512 acc[R][NP][kNV];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
            for (int v = 0; v < kNV; ++v) acc[r][p][v] = _mm512_setzero_ps();
    for (int kk = 0; kk < k2; ++kk) {
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p) {
            const uint32_t* w = wp + size_t(p) * panel_stride + size_t(kk) * kNR;
            _mm_prefetch(reinterpret_cast<const char*>(w + size_t(kPrefetchFar) * kNR), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(w + size_t(kPrefetchFar) * kNR + kW), _MM_HINT_T0);
            const __m512i w0 = _mm512_loadu_si512(w), w1 = _mm512_loadu_si512(w + kW);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                const __m512i b = _mm512_set1_epi32(int(xp[size_t(kk) * kMR + r]));
                acc[r][p][0] = dp(acc[r][p][0], b, w0);
                acc[r][p][1] = dp(acc[r][p][1], b, w1);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
            for (int v = 0; v < kNV; ++v)
                store_lanes(y + r * ldy + p * kNR + v * kW, acc[r][p][v], n_valid - p * kNR - v * kW);
}

template <int R, int NP>
void micro_panels_n(int np, const uint32_t* xp, const uint32_t* wp, size_t panel_stride, int k2, float* y, int64_t ldy,
                    int n_valid) {
    if constexpr (NP > 1) {
        if (np < NP) return micro_panels_n<R, NP - 1>(np, xp, wp, panel_stride, k2, y, ldy, n_valid);
    }
    micro_panels<R, NP>(xp, wp, panel_stride, k2, y, ldy, n_valid);
}

template <int R>
void few_rows(int rows, int np, const uint32_t* xp, const uint32_t* wp, size_t panel_stride, int k2, float* y, int64_t ldy,
              int n_valid) {
    if constexpr (R > 1) {
        if (rows < R) return few_rows<R - 1>(rows, np, xp, wp, panel_stride, k2, y, ldy, n_valid);
    }
    micro_panels_n<R, few_rows_panels(R)>(np, xp, wp, panel_stride, k2, y, ldy, n_valid);
}

// y[f] for the features of np panels from w0 on, one token (its pairs at xq): every pair in one
// chain per element, np * kNV chains in flight.
template <int NP>
void gemv_panels(int np, const uint32_t* xq, int k2, const uint32_t* w0, size_t panel_stride, float* y, int n_valid) {
    if constexpr (NP > 1) {
        if (np < NP) return gemv_panels<NP - 1>(np, xq, k2, w0, panel_stride, y, n_valid);
    }
    __m512 acc[NP][kNV];
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
        for (int v = 0; v < kNV; ++v) acc[p][v] = _mm512_setzero_ps();
    for (int kk = 0; kk < k2; ++kk) {
        const __m512i b = _mm512_set1_epi32(int(xq[kk]));
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
            for (int v = 0; v < kNV; ++v)
                acc[p][v] = dp(acc[p][v], b, _mm512_loadu_si512(w0 + size_t(p) * panel_stride + size_t(kk) * kNR + v * kW));
    }
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
        for (int v = 0; v < kNV; ++v) store_lanes(y + p * kNR + v * kW, acc[p][v], n_valid - p * kNR - v * kW);
}

// ---- attention (AttentionArgs::bf16_dot; kernels_impl.h's AttentionTask drives these) ----------

// Scores of R vrows x TT key tiles: acc = dpbf16(acc, k-pair, q-pair) over the pairs of head_dim in
// order from +0, then * scale. A key tile is [head_dim][16]: BF16 as the backend stores it (rows 2p
// and 2p+1 are 64 contiguous bytes, interleaved by one permute) or F32 holding BF16 values (a
// linked group's keys moved into scratch; the upper halves are the BF16 bits, taken exactly).
template <int R, int TT, bool F32K>
void qk_tiles(const uint32_t* qp, int q_stride, const void* k, int hd, float scale, float* const* out) {
    static const uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                             8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i idx = _mm512_loadu_si512(kInterleave);
    const __m512i high = _mm512_set1_epi32(int(0xffff0000u));
    __m512 acc[R][TT];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_setzero_ps();
    const size_t tile_elems = size_t(hd) * kKeyTile;
    for (int p = 0; p < hd / 2; ++p) {
        __m512i kp[TT];
#pragma GCC unroll 2
        for (int t = 0; t < TT; ++t) {
            if constexpr (F32K) {
                const float* f = static_cast<const float*>(k) + t * tile_elems + size_t(2 * p) * kKeyTile;
                const __m512i lo = _mm512_srli_epi32(_mm512_castps_si512(_mm512_loadu_ps(f)), 16);
                kp[t] = _mm512_or_si512(lo, _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(f + kKeyTile)), high));
            } else {
                const uint16_t* h = static_cast<const uint16_t*>(k) + t * tile_elems + size_t(2 * p) * kKeyTile;
                // the next call's tiles (the keys stream from memory on a long prefix; a prefetch
                // past the keys is harmless)
                _mm_prefetch(reinterpret_cast<const char*>(h + TT * tile_elems), _MM_HINT_T0);
                kp[t] = _mm512_permutexvar_epi16(idx, _mm512_loadu_si512(h));
            }
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const __m512i b = _mm512_set1_epi32(int(qp[size_t(p) * size_t(q_stride) + r]));
#pragma GCC unroll 2
            for (int t = 0; t < TT; ++t) acc[r][t] = dp(acc[r][t], kp[t], b);
        }
    }
    const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int t = 0; t < TT; ++t) _mm512_storeu_ps(out[r] + t * kKeyTile, _mm512_mul_ps(acc[r][t], sc));
}

template <int R, bool F32K>
void qk_rows(int rows, int tiles, const uint32_t* qp, int q_stride, const void* k, int hd, float scale, float* const* out) {
    if constexpr (R > 1) {
        if (rows < R) return qk_rows<R - 1, F32K>(rows, tiles, qp, q_stride, k, hd, scale, out);
    }
    if (tiles == 2)
        qk_tiles<R, 2, F32K>(qp, q_stride, k, hd, scale, out);
    else
        qk_tiles<R, 1, F32K>(qp, q_stride, k, hd, scale, out);
}

// acc rows (R) += sum over pairs i in [i0, i1) of e-pair(i) · (v row 2i, v row 2i+1), for NG groups
// of 32 columns from c0 (the last possibly partial). A group's two V vectors are interleaved by
// unpacklo/hi: the accumulator lanes hold the columns in that order (unpermute restores them).
template <int R, int NG>
void pv_tile(const uint32_t* const* ep, int i0, int i1, const uint16_t* v, int hd, int c0, float* const* acc) {
    __m512 a[R][2 * NG];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int q = 0; q < 2 * NG; ++q) a[r][q] = _mm512_loadu_ps(acc[r] + c0 + q * kW);
    __mmask32 m[NG];
#pragma GCC unroll 4
    for (int g = 0; g < NG; ++g) {
        const int n = std::min(32, hd - c0 - 32 * g);
        m[g] = n >= 32 ? ~__mmask32(0) : __mmask32((1u << n) - 1u);
    }
    for (int i = i0; i < i1; ++i) {
        const uint16_t* r0 = v + size_t(i - i0) * 2 * size_t(hd) + c0;
        const uint16_t* r1 = r0 + hd;
        __m512i lo[NG], hi[NG];
#pragma GCC unroll 4
        for (int g = 0; g < NG; ++g) {
            // rows 4 pairs ahead (V streams from memory on a long prefix; past the keys is harmless)
            _mm_prefetch(reinterpret_cast<const char*>(r0 + 8 * size_t(hd) + 32 * g), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(r1 + 8 * size_t(hd) + 32 * g), _MM_HINT_T0);
            const __m512i x = _mm512_maskz_loadu_epi16(m[g], r0 + 32 * g), y = _mm512_maskz_loadu_epi16(m[g], r1 + 32 * g);
            lo[g] = _mm512_unpacklo_epi16(x, y);
            hi[g] = _mm512_unpackhi_epi16(x, y);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const __m512i b = _mm512_set1_epi32(int(ep[r][i]));
#pragma GCC unroll 4
            for (int g = 0; g < NG; ++g) {
                a[r][2 * g] = dp(a[r][2 * g], lo[g], b);
                a[r][2 * g + 1] = dp(a[r][2 * g + 1], hi[g], b);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int q = 0; q < 2 * NG; ++q) _mm512_storeu_ps(acc[r] + c0 + q * kW, a[r][q]);
}

template <int R, int NG>
void pv_rows(int rows, const uint32_t* const* ep, int i0, int i1, const uint16_t* v, int hd, int c0, float* const* acc) {
    if constexpr (R > 1) {
        if (rows < R) return pv_rows<R - 1, NG>(rows, ep, i0, i1, v, hd, c0, acc);
    }
    pv_tile<R, NG>(ep, i0, i1, v, hd, c0, acc);
}

constexpr int kPvRows2 = 6;  // rows per pass with 2 column groups: 24 accumulators, 4 V pairs, 1 broadcast
constexpr int kPvRows1 = 8;
constexpr int kPvRows4 = 2;  // with 4 column groups: 16 accumulators, 8 V pairs

}  // namespace

void gemm(ThreadPool& pool, Workspace& ws, const float* x, int m, const Matrix& w, float* y) {
    if (w.format != WFormat::bf16dot || w.panels == nullptr)
        throw std::logic_error("bf16dot::gemm: the matrix is not packed as bf16dot");
    if (w.nr != kNR)
        throw std::logic_error("bf16dot::gemm: the matrix was packed for panels of " + std::to_string(w.nr) + " features, not " +
                               std::to_string(kNR));
    if (!supported()) throw std::runtime_error("bf16dot::gemm: this CPU has no AVX-512 BF16 (vdpbf16ps)");
    if (m <= 0 || w.rows <= 0) return;
    const int k = int(w.cols);
    const int k2 = (k + 1) / 2;
    const int64_t n = w.rows;
    const int64_t n_panels = (n + kNR - 1) / kNR;
    const size_t panel_stride = size_t(k2) * kNR;  // uint32 pairs per panel
    const auto* panels = static_cast<const uint32_t*>(w.panels);
    if (k2 == 0) {
        std::fill(y, y + size_t(m) * size_t(n), 0.0f);
        return;
    }
    if (m == 1) {
        auto* xq = reinterpret_cast<uint32_t*>(ws.shared(size_t(k2)));
        row_pairs(x, k, xq);
        pool.parallel_for((n_panels + kGemvNP - 1) / kGemvNP, [&](int64_t g, int) {
            const int64_t p0 = g * kGemvNP;
            const int np = int(std::min<int64_t>(kGemvNP, n_panels - p0));
            gemv_panels<kGemvNP>(np, xq, k2, panels + size_t(p0) * panel_stride, panel_stride, y + p0 * kNR,
                                 int(std::min<int64_t>(int64_t(np) * kNR, n - p0 * kNR)));
        });
        return;
    }
    const int n_tp = (m + kMR - 1) / kMR;
    auto* xp = reinterpret_cast<uint32_t*>(ws.shared(size_t(n_tp) * size_t(k2) * kMR));
    for (int t = 0; t < pool.n_threads(); ++t) ws.per_thread(t, size_t(k2));
    pool.parallel_for(n_tp, [&](int64_t tp, int thread) {
        pack_x_panel(x, m, k, k2, int(tp), reinterpret_cast<uint32_t*>(ws.per_thread(thread, size_t(k2))), xp);
    });
    if (m <= kFewRows) {
        // tasks of a few groups of NP panels (qkv of a 0.6B model: 32 tasks at NP 2)
        const int np_group = few_rows_panels(m);
        const int64_t per_task = np_group == 4 ? 4 : 2 * np_group;
        pool.parallel_for((n_panels + per_task - 1) / per_task, [&](int64_t t, int) {
            const int64_t end = std::min(n_panels, (t + 1) * per_task);
            for (int64_t p = t * per_task; p < end; p += np_group) {
                const int np = int(std::min<int64_t>(np_group, end - p));
                few_rows<kFewRows>(m, np, xp, panels + size_t(p) * panel_stride, panel_stride, k2, y + p * kNR, n,
                                   int(std::min<int64_t>(int64_t(np) * kNR, n - p * kNR)));
            }
        });
        return;
    }
    const int64_t n_blocks = (n + kNB - 1) / kNB;
    // One row tile (a decode step of a few sequences): no k blocks, so a block's panels are one
    // contiguous stream from memory (the X panel, 12 rows x K/2 pairs, stays in L1 or L2). With
    // several tiles the later ones find the block's weights in L2, which k blocks keep small.
    const int k_block = n_tp == 1 ? k2 : kKC;
    pool.parallel_for(n_blocks, [&](int64_t b, int) {
        const int64_t f0 = b * kNB;
        const int nb = int(std::min<int64_t>(kNB, n - f0));
        const int np = (nb + kNR - 1) / kNR;
        const uint32_t* block = panels + size_t(f0 / kNR) * panel_stride;
        for (int k0 = 0; k0 < k2; k0 += k_block) {
            const int kc = std::min(k_block, k2 - k0);
            for (int tp = 0; tp < n_tp; ++tp) {
                const int rows = std::min(kMR, m - tp * kMR);
                const uint32_t* xpanel = xp + (size_t(tp) * size_t(k2) + size_t(k0)) * kMR;
                for (int p = 0; p < np; ++p) {
                    float* ytile = y + size_t(tp) * kMR * size_t(n) + size_t(f0) + size_t(p) * kNR;
                    micro_rows<kMR>(rows, xpanel, block + size_t(p) * panel_stride + size_t(k0) * kNR, kc, ytile, n,
                                    std::min(kNR, nb - p * kNR), k0 > 0, tp == 0);
                }
            }
        }
    });
}

void round_row(const float* x, int n, uint16_t* out) { row_pairs(x, n, reinterpret_cast<uint32_t*>(out)); }

void qk(int rows, int tiles, const uint32_t* q_pairs, int q_stride, const void* k, bool k_f32, int hd, float scale,
        float* const* out) {
    if (rows < 1 || rows > kQkRows || tiles < 1 || tiles > 2) throw std::logic_error("bf16dot::qk: rows or tiles out of range");
    if (k_f32)
        qk_rows<kQkRows, true>(rows, tiles, q_pairs, q_stride, k, hd, scale, out);
    else
        qk_rows<kQkRows, false>(rows, tiles, q_pairs, q_stride, k, hd, scale, out);
}

int pv_group_rows(int hd) { return hd > 32 ? kPvRows2 : kPvRows1; }

void pv(int rows, const uint32_t* const* e_pairs, int i0, int i1, const uint16_t* v, int hd, float* const* acc) {
    if (i0 >= i1) return;
    if (rows < 1 || rows > pv_group_rows(hd)) throw std::logic_error("bf16dot::pv: too many rows");
    // One or two rows (decode) take 128 columns per pass: each V row is then read in one sweep,
    // which matters when the keys stream from memory. The chains are the same either way.
    for (int c0 = 0; c0 < hd;) {
        if (rows <= kPvRows4 && hd - c0 > 96) {
            pv_rows<kPvRows4, 4>(rows, e_pairs, i0, i1, v, hd, c0, acc);
            c0 += 128;
        } else {
            if (hd - c0 > 32)
                pv_rows<kPvRows2, 2>(rows, e_pairs, i0, i1, v, hd, c0, acc);
            else
                pv_rows<kPvRows1, 1>(rows, e_pairs, i0, i1, v, hd, c0, acc);
            c0 += 64;
        }
    }
}

void unpermute(float* acc, int hd) {
    static const int32_t kFirst[16] = {0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23};
    static const int32_t kSecond[16] = {8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31};
    const __m512i i0 = _mm512_loadu_si512(kFirst), i1 = _mm512_loadu_si512(kSecond);
    for (int c0 = 0; c0 < hd; c0 += 32) {
        const __m512 lo = _mm512_loadu_ps(acc + c0), hi = _mm512_loadu_ps(acc + c0 + kW);
        _mm512_storeu_ps(acc + c0, _mm512_permutex2var_ps(lo, i0, hi));
        _mm512_storeu_ps(acc + c0 + kW, _mm512_permutex2var_ps(lo, i1, hi));
    }
}

}  // namespace cc::cpu::bf16dot

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop

namespace cc::cpu::bf16dot {

bool supported() {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bf16");
}

int panel_width() { return kNR; }

std::string cpu_vendor() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return "other";
    char id[13];
    std::memcpy(id, &ebx, 4);
    std::memcpy(id + 4, &edx, 4);
    std::memcpy(id + 8, &ecx, 4);
    id[12] = '\0';
    const std::string s(id);
    if (s == "GenuineIntel") return "intel";
    if (s == "AuthenticAMD") return "amd";
    return "other";
}

}  // namespace cc::cpu::bf16dot
