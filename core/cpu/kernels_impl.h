// The kernels, written once over a vector type V and compiled once per instruction set:
// kernels_<isa>.cpp defines `struct V` (width W, load/store/fma/exp/...) inside its own namespace
// cc::cpu::<isa> and includes this file there, under a `#pragma GCC target` for that ISA. Each
// copy is a distinct set of functions, so no inline function compiled for AVX-512 can be picked by
// the linker for a CPU without it. (No include guard: each ISA file includes it once.)
//
// Requires, before inclusion: kernels.h, kernel_math.h, <algorithm>, <cstring>, <cstdint>, <numeric>.
//
// V provides: reg, W, n_regs, gemm_mr, gemm_nrv, gemm_tall_r2, qk_r, qk_tt, pv_rows, has_transpose16 (and transpose16),
// transpose_w (a W x W block in W registers); zero, set1, load, load_n, store,
// store_n (float and, for loads, uint16_t bf16), fma(a, b, c) = a*b+c, add, sub, mul, div, max,
// keep_lanes(v, first, n, fill), hsum (a fixed tree), hmax, exp.

// ---- GEMM ----------------------------------------------------------------------------------------
//
// Goto/BLIS structure with the roles chosen so that each output element is one FMA chain over k:
// features (rows of W) sit in vector lanes, tokens (rows of X) are broadcast. Both operands are
// packed: X once per call into panels [K][MR] (MR tokens per panel), W per task block and k block
// into panels [KC][NR] (NR features per panel; converting BF16 on the way, which is exact).
// A micro-tile keeps MR x NR running sums in registers; between k blocks they rest in Y itself.

constexpr int kMR = V::gemm_mr;             // tokens per micro-tile
constexpr int kNR = V::gemm_nrv * V::W;     // features per micro-tile
constexpr int kKC = 256;                    // k per block: an X micro-panel (KC x MR) stays in L1
// BF16 panel streams read from memory (the GEMV, and the first row tile down the whole of K)
// prefetch each panel 4 KiB ahead: with the hardware prefetcher alone one 6-row tile (one panel
// at a time) drew 7-8 GB/s a core, half what two rows (3 panels side by side) drew, and 6 rows took
// longer than 8. bench_gemm, the 0.6B shapes, 2 threads, AMD EPYC Zen 5, time of one layer: AVX2
// kernels 0.84x at 1 row, 0.83x at 8, 0.92x at 24; AVX-512 0.94x, 0.78x, 0.88x (docs/benchmarks.md,
// "Panel prefetch"). Not for F32 panels (24 rows on AVX-512 took 1.1x). No bit changes.
template <class WT>
constexpr int panel_prefetch_k() {
    return std::is_same_v<WT, uint16_t> ? 4096 / int(kNR * sizeof(WT)) : 0;
}
constexpr int kNB = 4 * kNR;                // features per task: W block (NB x KC) stays in L2

// Xp panel tp: [K][MR], tokens tp*MR.. (zeros past M).
inline void pack_x_panel(const float* x, int m, int k, int tp, float* xp) {
    float* dst = xp + size_t(tp) * size_t(k) * kMR;
    for (int r = 0; r < kMR; ++r) {
        const int row = tp * kMR + r;
        if (row < m) {
            const float* src = x + size_t(row) * size_t(k);
            for (int kk = 0; kk < k; ++kk) dst[size_t(kk) * kMR + r] = src[kk];
        } else {
            for (int kk = 0; kk < k; ++kk) dst[size_t(kk) * kMR + r] = 0.0f;
        }
    }
}

// Wp: panels [n_panels][kc][NR] for features f0..f0+nb and k0..k0+kc (zeros past nb).
// Scalar copy of columns [c_begin, c_end) of one panel, k in [k_begin, kc).
template <class T>
inline void pack_w_columns(const T* w, int64_t k_total, int64_t f0, int nb, int k0, int kc, int p, int c_begin, int c_end,
                           int k_begin, float* panel) {
    for (int c = c_begin; c < c_end; ++c) {
        const int f = p * kNR + c;
        float* dst = panel + c;
        if (f < nb) {
            const T* src = w + size_t(f0 + f) * size_t(k_total) + size_t(k0);
            if constexpr (std::is_same_v<T, float>) {
                for (int kk = k_begin; kk < kc; ++kk) dst[size_t(kk) * kNR] = src[kk];
            } else {
                for (int kk = k_begin; kk < kc; ++kk) dst[size_t(kk) * kNR] = km::bf16_to_f32(src[kk]);
            }
        } else {
            for (int kk = k_begin; kk < kc; ++kk) dst[size_t(kk) * kNR] = 0.0f;
        }
    }
}

// 16 features (one full column group c0 of panel p) x 16 k at a time through an in-register
// transpose (decode is bound by this copy: every weight passes through it once per token); returns
// the k where the scalar tail starts.
template <class VV, class T>
inline int pack_w_transposed(const T* w, int64_t k_total, size_t row0, int k0, int kc, int c0, float* panel) {
    int kk = 0;
    for (; kk + 16 <= kc; kk += 16) {
        typename VV::reg r[16];
        for (int i = 0; i < 16; ++i) r[i] = VV::load(w + (row0 + size_t(i)) * size_t(k_total) + size_t(k0 + kk));
        VV::transpose16(r);
        for (int i = 0; i < 16; ++i) VV::store(panel + size_t(kk + i) * kNR + c0, r[i]);
    }
    return kk;
}

template <class T>
inline void pack_w_block(const T* w, int64_t k_total, int64_t f0, int nb, int k0, int kc, float* wp) {
    const int n_panels = (nb + kNR - 1) / kNR;
    for (int p = 0; p < n_panels; ++p) {
        float* panel = wp + size_t(p) * size_t(kc) * kNR;
        int c_done = 0;
        if constexpr (V::has_transpose16) {
            for (; c_done + 16 <= kNR && p * kNR + c_done + 16 <= nb; c_done += 16) {
                const int k_tail = pack_w_transposed<V>(w, k_total, size_t(f0 + p * kNR + c_done), k0, kc, c_done, panel);
                pack_w_columns(w, k_total, f0, nb, k0, kc, p, c_done, c_done + 16, k_tail, panel);
            }
        }
        pack_w_columns(w, k_total, f0, nb, k0, kc, p, c_done, kNR, 0, panel);
    }
}

// Weight vector at p of a panel: F32, BF16 (widened, exact) or int8 times its block's scale (exact).
template <class WT>
inline typename V::reg load_w(const WT* p, typename V::reg scale) {
    if constexpr (std::is_same_v<WT, int8_t>) return V::mul(V::load(p), scale);
    else return V::load(p);
}

// The scales of one q8 block for NV vectors of a panel (sc: the block's row of nr scales).
template <class WT, int NV>
inline void load_scales(const uint16_t* sc, typename V::reg* s) {
    if constexpr (std::is_same_v<WT, int8_t>) {
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) s[v] = V::load_f16(sc + v * V::W);
    } else {
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) s[v] = V::zero();
    }
}

// R token rows x NR features; y points at (row 0, feature 0) of the tile; n_valid features stored.
// wp: kc rows of kNR weights (a packed block in F32, or a prepacked panel read in place in any
// format; for q8, sc points at the scales of the block holding wp's first row, a block boundary).
template <int R, class WT = float>
void gemm_micro(const float* xp, const WT* wp, const uint16_t* sc, int kc, float* y, int64_t ldy, int n_valid,
                bool accumulate) {
    constexpr int NV = V::gemm_nrv;
    typename V::reg acc[R][NV];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) {
            const int cnt = n_valid - v * V::W;
            if (!accumulate || cnt <= 0)
                acc[r][v] = V::zero();
            else
                acc[r][v] = cnt >= V::W ? V::load(y + r * ldy + v * V::W) : V::load_n(y + r * ldy + v * V::W, cnt);
        }
    }
    constexpr bool q8 = std::is_same_v<WT, int8_t>;
    for (int kb = 0; kb < kc; kb += q8 ? kQ8Block : kc) {
        typename V::reg sv[NV];
        load_scales<WT, NV>(q8 ? sc + (kb / kQ8Block) * kNR : nullptr, sv);
        const int ke = q8 ? std::min(kc, kb + kQ8Block) : kc;
        for (int kk = kb; kk < ke; ++kk) {
            typename V::reg wv[NV];
#pragma GCC unroll 8
            for (int v = 0; v < NV; ++v) wv[v] = load_w(wp + kk * kNR + v * V::W, sv[v]);
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r) {
                const typename V::reg b = V::set1(xp[kk * kMR + r]);
#pragma GCC unroll 8
                for (int v = 0; v < NV; ++v) acc[r][v] = V::fma(b, wv[v], acc[r][v]);
            }
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) {
            const int cnt = n_valid - v * V::W;
            if (cnt >= V::W)
                V::store(y + r * ldy + v * V::W, acc[r][v]);
            else if (cnt > 0)
                V::store_n(y + r * ldy + v * V::W, acc[r][v], cnt);
        }
    }
}

template <int R, class WT = float>
inline void gemm_micro_rows(int rows, const float* xp, const WT* wp, const uint16_t* sc, int kc, float* y, int64_t ldy,
                            int n_valid, bool accumulate) {
    if constexpr (R > 1) {
        if (rows < R) return gemm_micro_rows<R - 1, WT>(rows, xp, wp, sc, kc, y, ldy, n_valid, accumulate);
    }
    gemm_micro<R, WT>(xp, wp, sc, kc, y, ldy, n_valid, accumulate);
}

template <class T>
void gemm_block(const float* xp, int m, int k, const T* w, int64_t n, int64_t f0, float* wp, float* y) {
    const int nb = int(std::min<int64_t>(kNB, n - f0));
    const int n_panels = (nb + kNR - 1) / kNR;
    const int n_tp = (m + kMR - 1) / kMR;
    for (int k0 = 0; k0 < k; k0 += kKC) {
        const int kc = std::min(kKC, k - k0);
        pack_w_block(w, k, f0, nb, k0, kc, wp);
        for (int tp = 0; tp < n_tp; ++tp) {
            const int rows = std::min(kMR, m - tp * kMR);
            const float* xpanel = xp + (size_t(tp) * size_t(k) + size_t(k0)) * kMR;
            for (int p = 0; p < n_panels; ++p) {
                float* ytile = y + size_t(tp) * kMR * size_t(n) + size_t(f0) + size_t(p) * kNR;
                gemm_micro_rows<kMR>(rows, xpanel, wp + size_t(p) * size_t(kc) * kNR, nullptr, kc, ytile, n,
                                     std::min(kNR, nb - p * kNR), k0 > 0);
            }
        }
    }
}

// The multi-row GEMM's frame, shared by row-major and prepacked weights: X packed once into token
// panels, then block(xp, f0, wp) for every block of kNB features on the pool, wp being that
// thread's (kNB x kKC) weight scratch.
template <class Block>
void gemm_blocks(ThreadPool& pool, Workspace& ws, const float* x, int m, int k, int64_t n, const Block& block) {
    const int n_tp = (m + kMR - 1) / kMR;
    float* xp = ws.shared(size_t(n_tp) * size_t(k) * kMR);
    pool.parallel_for(n_tp, [&](int64_t tp, int) { pack_x_panel(x, m, k, int(tp), xp); });
    const int64_t n_blocks = (n + kNB - 1) / kNB;
    // Grow every thread's buffer before the parallel loop (the pool may give any task to any thread).
    for (int t = 0; t < pool.n_threads(); ++t) ws.per_thread(t, size_t(kNB) * kKC);
    pool.parallel_for(n_blocks, [&](int64_t b, int thread) { block(xp, b * kNB, ws.per_thread(thread, size_t(kNB) * kKC)); });
}

// ---- GEMM over prepacked panels (pack_matrix) ------------------------------------------------------
//
// The panels already have the layout the micro-kernel reads, so nothing is packed per call: F32
// panels are read in place; BF16 and q8 panels are read in place when all the tokens fit one
// micro-tile (decode and short suffixes: each weight is converted once either way), else each
// k block is converted once into F32 scratch and reused by every token panel. (On AVX2, F32 and
// BF16 panels take the row tiles down the whole of K instead: gemm_rows.) The converted value
// is the same exact F32 on both routes, so the FMA chain per element is the one above.

// y[f] for the features of np panels (from panel w0 on, panel_stride elements apart), one token:
// every k in one chain per element, np * NV chains in flight.
template <int NP, class WT>
void gemv_panels(int np, const float* x, int k, const WT* w0, size_t panel_stride, const uint16_t* s0,
                 size_t scale_stride, float* y, int n_valid) {
    if constexpr (NP > 1) {
        if (np < NP) return gemv_panels<NP - 1, WT>(np, x, k, w0, panel_stride, s0, scale_stride, y, n_valid);
    }
    constexpr int NV = V::gemm_nrv;
    constexpr bool q8 = std::is_same_v<WT, int8_t>;
    typename V::reg acc[NP][NV];
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[p][v] = V::zero();
    for (int kb = 0; kb < k; kb += q8 ? kQ8Block : k) {
        typename V::reg sv[NP][NV];
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p)
            load_scales<WT, NV>(q8 ? s0 + size_t(p) * scale_stride + size_t(kb / kQ8Block) * kNR : nullptr, sv[p]);
        const int ke = q8 ? std::min(k, kb + kQ8Block) : k;
        for (int kk = kb; kk < ke; ++kk) {
            if constexpr (panel_prefetch_k<WT>() > 0) {
#pragma GCC unroll 8
                for (int p = 0; p < NP; ++p)
                    __builtin_prefetch(w0 + size_t(p) * panel_stride + size_t(kk + panel_prefetch_k<WT>()) * kNR);
            }
            const typename V::reg b = V::set1(x[kk]);
#pragma GCC unroll 8
            for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
                for (int v = 0; v < NV; ++v)
                    acc[p][v] = V::fma(b, load_w(w0 + size_t(p) * panel_stride + size_t(kk) * kNR + v * V::W, sv[p][v]), acc[p][v]);
        }
    }
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) {
            const int cnt = n_valid - p * kNR - v * V::W;
            if (cnt >= V::W)
                V::store(y + p * kNR + v * V::W, acc[p][v]);
            else if (cnt > 0)
                V::store_n(y + p * kNR + v * V::W, acc[p][v], cnt);
        }
}

// Converts kc rows of one packed panel (from a q8 block boundary) into F32 scratch [kc][kNR].
template <class WT>
void convert_panel_rows(const WT* src, const uint16_t* sc, int kc, float* dst) {
    constexpr bool q8 = std::is_same_v<WT, int8_t>;
    constexpr int NV = kNR / V::W;
    for (int kb = 0; kb < kc; kb += q8 ? kQ8Block : kc) {
        typename V::reg sv[NV];
        load_scales<WT, NV>(q8 ? sc + (kb / kQ8Block) * kNR : nullptr, sv);
        const int ke = q8 ? std::min(kc, kb + kQ8Block) : kc;
        for (int kk = kb; kk < ke; ++kk)
#pragma GCC unroll 8
            for (int v = 0; v < NV; ++v) V::store(dst + kk * kNR + v * V::W, load_w(src + kk * kNR + v * V::W, sv[v]));
    }
}

// Two token panels (kMR + R2 tokens, 0 < R2 <= V::gemm_tall_r2) x one vector of features at a time,
// the weights read in place (BF16 and q8 panels; F32 panels are read in place by the usual tiles,
// which measured faster). With 16 registers the usual tile is kMR x 2 vectors; 7-8 tokens would
// then be a full tile plus a short one, with each k block of the panels first converted into F32
// scratch that both read: measured on AVX2, 7 tokens cost 1.8x six (bench_gemm, 0.6B layer
// shapes). Here each weight vector is loaded and widened once for all the tokens: 7 and 8 tokens
// measured 13-16% faster; from 10 tokens on the conversion pays for itself and this tile (one
// broadcast per FMA) was 3-10% slower. The chain per element is gemm_micro's (every k in order,
// from Y between k blocks), so the bits are those of any other tile.
template <int R2, class WT>
void gemm_tall(const float* xp0, const float* xp1, const WT* wp, const uint16_t* sc, int kc, float* y, int64_t ldy,
               int n_valid, bool accumulate) {
    constexpr int R = kMR + R2;
    constexpr bool q8 = std::is_same_v<WT, int8_t>;
    for (int v = 0; v < V::gemm_nrv; ++v) {
        const int cnt = n_valid - v * V::W;
        if (cnt <= 0) break;
        typename V::reg acc[R];
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            float* yr = y + r * ldy + v * V::W;
            acc[r] = !accumulate ? V::zero() : cnt >= V::W ? V::load(yr) : V::load_n(yr, cnt);
        }
        for (int kb = 0; kb < kc; kb += q8 ? kQ8Block : kc) {
            typename V::reg sv[1];
            load_scales<WT, 1>(q8 ? sc + (kb / kQ8Block) * kNR + v * V::W : nullptr, sv);
            const int ke = q8 ? std::min(kc, kb + kQ8Block) : kc;
            for (int kk = kb; kk < ke; ++kk) {
                const typename V::reg wv = load_w(wp + kk * kNR + v * V::W, sv[0]);
#pragma GCC unroll 16
                for (int r = 0; r < kMR; ++r) acc[r] = V::fma(V::set1(xp0[kk * kMR + r]), wv, acc[r]);
#pragma GCC unroll 16
                for (int r = 0; r < R2; ++r) acc[kMR + r] = V::fma(V::set1(xp1[kk * kMR + r]), wv, acc[kMR + r]);
            }
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            float* yr = y + r * ldy + v * V::W;
            if (cnt >= V::W)
                V::store(yr, acc[r]);
            else
                V::store_n(yr, acc[r], cnt);
        }
    }
}

template <int R2, class WT>
inline void gemm_tall_rows(int rows2, const float* xp0, const float* xp1, const WT* wp, const uint16_t* sc, int kc,
                           float* y, int64_t ldy, int n_valid, bool accumulate) {
    if constexpr (R2 > 1) {
        if (rows2 < R2) return gemm_tall_rows<R2 - 1, WT>(rows2, xp0, xp1, wp, sc, kc, y, ldy, n_valid, accumulate);
    }
    gemm_tall<R2, WT>(xp0, xp1, wp, sc, kc, y, ldy, n_valid, accumulate);
}

// Row tiles over prepacked panels, the whole of K in one pass (V::gemm_rows_whole_k: AVX2 and
// AVX-512, where it was measured). The blocked GEMM below cuts K into blocks of kKC, keeps MR x NR
// sums per tile and reads a task's 4 panels a block at a time; with R < MR rows its tile holds
// R x NR sums, too few FMA chains to cover the FMA latency (4 at 2 rows on AVX2: 2 rows cost 1.8x
// one). Here a tile of R rows (one packed X panel, [K][MR]) takes NP panels side by side, so up to
// n_regs - 4 sums are in flight, and runs down the whole of K, so each panel is one contiguous
// stream. bench_gemm, the 0.6B shapes, BF16 panels, 2 threads, time against the blocked GEMM's: on
// a Zen 2 (AVX2) 2 rows 0.6-0.7x, 8 rows 0.69x, 23 rows 0.83x, 512 rows 0.95x; on AVX-512 (AMD EPYC
// with AVX-512 BF16) 2 rows 0.54x, 8 rows 0.58x, 23 rows 0.68x, 512 rows 0.82x (docs/benchmarks.md,
// "Row tiles down the whole of K"). Each element's chain is the usual one (every k in order from
// +0; the blocked GEMM parks the sums in Y between k blocks, exactly), so the bits are those of
// any other tile.
// A row tile's shape: NP panels side by side, NVT of each panel's NV vectors at a time (a tile of
// fewer vectors per panel runs again for the panels' other vectors, from L2 if the NP panels fit
// there, else from memory). At most n_regs - 4 sums; whole panels unless one vector of more panels
// gives at least 1.5x the FMA chains (4 rows on AVX2: 3 panels x 1 vector, 12 chains, rather than
// 1 panel x 2 vectors, 8). On AVX-512, 4 rows take 3 whole panels (24 chains), not 7 x 1 (28): the
// 7 F32 panels of a K = 1024 matrix (0.9 MB) left L2 between the passes, and 4 rows cost up to
// 1.2x what the blocked GEMM did.
struct RowsShape {
    int np, nvt;
};
constexpr RowsShape rows_shape(int rows) {
    const int budget = V::n_regs - 4;
    const int np_whole = std::max(1, budget / (rows * V::gemm_nrv));
    const int np_one = std::max(1, budget / rows);
    if (2 * np_one * rows >= 3 * np_whole * rows * V::gemm_nrv) return {np_one, 1};
    return {np_whole, V::gemm_nrv};
}

template <int R, int NP, int NVT, bool PF, class WT>
void gemm_rows_panels(int np, int v0, const float* xp, int k, const WT* w0, size_t panel_stride, float* y, int64_t ldy,
                      int n_valid) {
    if constexpr (NP > 1) {  // the last panels of a range: fewer side by side
        if (np < NP) return gemm_rows_panels<R, NP - 1, NVT, PF, WT>(np, v0, xp, k, w0, panel_stride, y, ldy, n_valid);
    }
    const WT* wv = w0 + v0 * V::W;  // vector v0 of each panel
    typename V::reg acc[R][NP][NVT];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
            for (int v = 0; v < NVT; ++v) acc[r][p][v] = V::zero();
    for (int kk = 0; kk < k; ++kk) {
        const WT* wk = wv + size_t(kk) * kNR;
        const float* xk = xp + size_t(kk) * kMR;
        if constexpr (PF && panel_prefetch_k<WT>() > 0) {
#pragma GCC unroll 8
            for (int p = 0; p < NP; ++p)
                __builtin_prefetch(wk + size_t(p) * panel_stride + panel_prefetch_k<WT>() * kNR);
        }
        if constexpr (R <= NP * NVT) {  // the row broadcasts stay in registers, each weight vector passes through
            typename V::reg b[R];
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r) b[r] = V::set1(xk[r]);
#pragma GCC unroll 8
            for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
                for (int v = 0; v < NVT; ++v) {
                    const typename V::reg w = V::load(wk + size_t(p) * panel_stride + v * V::W);
#pragma GCC unroll 16
                    for (int r = 0; r < R; ++r) acc[r][p][v] = V::fma(b[r], w, acc[r][p][v]);
                }
        } else {  // the weight vectors stay in registers, each row's broadcast passes through
            typename V::reg w[NP][NVT];
#pragma GCC unroll 8
            for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
                for (int v = 0; v < NVT; ++v) w[p][v] = V::load(wk + size_t(p) * panel_stride + v * V::W);
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r) {
                const typename V::reg b = V::set1(xk[r]);
#pragma GCC unroll 8
                for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
                    for (int v = 0; v < NVT; ++v) acc[r][p][v] = V::fma(b, w[p][v], acc[r][p][v]);
            }
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
            for (int v = 0; v < NVT; ++v) {
                const int f = p * kNR + (v0 + v) * V::W;
                const int cnt = n_valid - f;
                float* yr = y + r * ldy + f;
                if (cnt >= V::W)
                    V::store(yr, acc[r][p][v]);
                else if (cnt > 0)
                    V::store_n(yr, acc[r][p][v], cnt);
            }
}

// Rows `rows` (<= MR) of one X panel over panels [p_begin, p_end) of the matrix, NP at a time.
template <int R, bool PF, class WT>
void gemm_rows_over(int rows, const float* xp, int k, const WT* panels, size_t panel_stride, int64_t p_begin,
                    int64_t p_end, int64_t n, float* y) {
    if constexpr (R > 1) {
        if (rows < R) return gemm_rows_over<R - 1, PF, WT>(rows, xp, k, panels, panel_stride, p_begin, p_end, n, y);
    }
    constexpr RowsShape shape = rows_shape(R);
    for (int64_t p = p_begin; p < p_end; p += shape.np) {
        const int np = int(std::min<int64_t>(shape.np, p_end - p));
        const int n_valid = int(std::min<int64_t>(int64_t(np) * kNR, n - p * kNR));
        for (int v0 = 0; v0 < V::gemm_nrv; v0 += shape.nvt)
            gemm_rows_panels<R, shape.np, shape.nvt, PF, WT>(np, v0, xp, k, panels + size_t(p) * panel_stride,
                                                             panel_stride, y + p * kNR, n, n_valid);
    }
}

// The GEMM of two or more rows over BF16 or F32 panels: X packed into panels of MR rows; a task is
// a group of G panels (a multiple of every row tile's NP, so no tile is cut short inside a task)
// that every row tile runs over in turn, the second and later from L2; where there are fewer
// groups than threads, a task is one row tile over one group.
template <class WT>
void gemm_rows(ThreadPool& pool, Workspace& ws, const float* x, int m, const Matrix& w, float* y) {
    const int k = int(w.cols);
    const int64_t n = w.rows;
    const int64_t n_panels = (n + kNR - 1) / kNR;
    const int n_tp = (m + kMR - 1) / kMR;
    float* xp = ws.shared(size_t(n_tp) * size_t(k) * kMR);
    for (int tp = 0; tp < n_tp; ++tp) pack_x_panel(x, m, k, tp, xp);
    int group = 1;
    for (int tp = 0; tp < n_tp; ++tp) group = std::lcm(group, rows_shape(std::min(kMR, m - tp * kMR)).np);
    const size_t panel_stride = size_t(k) * kNR;
    const auto* panels = static_cast<const WT*>(w.panels);
    const int64_t n_groups = (n_panels + group - 1) / group;
    const int split = n_groups < pool.n_threads() ? n_tp : 1;  // row tiles per task: n_tp / split
    pool.parallel_for(n_groups * split, [&](int64_t t, int) {
        const int64_t p0 = (t / split) * group, p1 = std::min<int64_t>(n_panels, p0 + group);
        const int tp_begin = split == 1 ? 0 : int(t % split), tp_end = split == 1 ? n_tp : tp_begin + 1;
        for (int tp = tp_begin; tp < tp_end; ++tp) {
            const int rows = std::min(kMR, m - tp * kMR);
            const float* xt = xp + size_t(tp) * size_t(k) * kMR;
            float* yt = y + size_t(tp) * kMR * size_t(n);
            if (tp == tp_begin)  // the tile that streams the panels from memory
                gemm_rows_over<kMR, true, WT>(rows, xt, k, panels, panel_stride, p0, p1, n, yt);
            else
                gemm_rows_over<kMR, false, WT>(rows, xt, k, panels, panel_stride, p0, p1, n, yt);
        }
    });
}

template <class WT>
void gemm_packed_block(const float* xp, int m, int k, const Matrix& w, int64_t f0, float* wp, float* y) {
    const int64_t n = w.rows;
    const int nb = int(std::min<int64_t>(kNB, n - f0));
    const int n_panels = (nb + kNR - 1) / kNR;
    const int n_tp = (m + kMR - 1) / kMR;
    const size_t panel_stride = size_t(k) * kNR;
    const size_t scale_stride = size_t((k + kQ8Block - 1) / kQ8Block) * kNR;
    const int64_t p0 = f0 / kNR;
    const WT* panels = static_cast<const WT*>(w.panels) + size_t(p0) * panel_stride;
    const uint16_t* scales = w.scales != nullptr ? w.scales + size_t(p0) * scale_stride : nullptr;
    const bool tall = !std::is_same_v<WT, float> && n_tp == 2 && m - kMR <= V::gemm_tall_r2;
    const bool in_place = std::is_same_v<WT, float> || n_tp == 1 || tall;
    for (int k0 = 0; k0 < k; k0 += kKC) {
        const int kc = std::min(kKC, k - k0);
        const auto panel_at = [&](int p) { return panels + size_t(p) * panel_stride + size_t(k0) * kNR; };
        const auto scales_at = [&](int p) {
            return scales != nullptr ? scales + size_t(p) * scale_stride + size_t(k0 / kQ8Block) * kNR : nullptr;
        };
        if (!in_place)
            for (int p = 0; p < n_panels; ++p) convert_panel_rows(panel_at(p), scales_at(p), kc, wp + size_t(p) * size_t(kc) * kNR);
        if constexpr (V::gemm_tall_r2 > 0) {
            if (tall) {
                const float* xp0 = xp + size_t(k0) * kMR;
                const float* xp1 = xp + (size_t(k) + size_t(k0)) * kMR;
                for (int p = 0; p < n_panels; ++p)
                    gemm_tall_rows<V::gemm_tall_r2, WT>(m - kMR, xp0, xp1, panel_at(p), scales_at(p), kc,
                                                        y + size_t(f0) + size_t(p) * kNR, n,
                                                        std::min(kNR, nb - p * kNR), k0 > 0);
                continue;
            }
        }
        for (int tp = 0; tp < n_tp; ++tp) {
            const int rows = std::min(kMR, m - tp * kMR);
            const float* xpanel = xp + (size_t(tp) * size_t(k) + size_t(k0)) * kMR;
            for (int p = 0; p < n_panels; ++p) {
                float* ytile = y + size_t(tp) * kMR * size_t(n) + size_t(f0) + size_t(p) * kNR;
                const int n_valid = std::min(kNR, nb - p * kNR);
                if (in_place)
                    gemm_micro_rows<kMR, WT>(rows, xpanel, panel_at(p), scales_at(p), kc, ytile, n, n_valid, k0 > 0);
                else
                    gemm_micro_rows<kMR>(rows, xpanel, wp + size_t(p) * size_t(kc) * kNR, nullptr, kc, ytile, n, n_valid, k0 > 0);
            }
        }
    }
}

// Row tiles for up to this many rows (the engine forwards at most 512 at a time): past it every
// panel runs over all of X's packed rows, which leave the caches (3,000 rows: 1-4% slower than the
// blocked GEMM on AVX-512, 1,024 rows 0.84-0.93x its time).
constexpr int kRowsWholeKMax = 1024;

template <class WT>
void gemm_packed(ThreadPool& pool, Workspace& ws, const float* x, int m, const Matrix& w, float* y) {
    const int k = int(w.cols);
    const int64_t n = w.rows;
    const int64_t n_panels = (n + kNR - 1) / kNR;
    if (m == 1) {
        constexpr int NP = V::gemv_np;
        const size_t panel_stride = size_t(k) * kNR;
        const size_t scale_stride = size_t((k + kQ8Block - 1) / kQ8Block) * kNR;
        const auto* panels = static_cast<const WT*>(w.panels);
        pool.parallel_for((n_panels + NP - 1) / NP, [&](int64_t g, int) {
            const int64_t p0 = g * NP;
            const int np = int(std::min<int64_t>(NP, n_panels - p0));
            gemv_panels<NP, WT>(np, x, k, panels + size_t(p0) * panel_stride, panel_stride,
                                w.scales != nullptr ? w.scales + size_t(p0) * scale_stride : nullptr, scale_stride,
                                y + p0 * kNR, int(std::min<int64_t>(int64_t(np) * kNR, n - p0 * kNR)));
        });
        return;
    }
    if constexpr (V::gemm_rows_whole_k && !std::is_same_v<WT, int8_t>) {
        if (m <= kRowsWholeKMax) return gemm_rows<WT>(pool, ws, x, m, w, y);
    }
    gemm_blocks(pool, ws, x, m, k, n,
                [&](const float* xp, int64_t f0, float* wp) { gemm_packed_block<WT>(xp, m, k, w, f0, wp, y); });
}

void gemm(ThreadPool& pool, Workspace& ws, const float* x, int m, const Matrix& w, float* y) {
    if (m <= 0 || w.rows <= 0) return;
    const int k = int(w.cols);
    const int64_t n = w.rows;
    if (k == 0) {
        std::fill(y, y + size_t(m) * size_t(n), 0.0f);
        return;
    }
    if (w.panels != nullptr) {
        if (w.nr != kNR && w.format != WFormat::bf16dot)
            throw std::logic_error("gemm: the matrix was packed for panels of " + std::to_string(w.nr) +
                                   " features, this kernel reads " + std::to_string(kNR));
        switch (w.format) {
            case WFormat::f32: return gemm_packed<float>(pool, ws, x, m, w, y);
            case WFormat::bf16: return gemm_packed<uint16_t>(pool, ws, x, m, w, y);
            case WFormat::q8: return gemm_packed<int8_t>(pool, ws, x, m, w, y);
            case WFormat::bf16dot: return bf16dot::gemm(pool, ws, x, m, w, y);
        }
    }
    gemm_blocks(pool, ws, x, m, k, n, [&](const float* xp, int64_t f0, float* wp) {
        if (w.bf16)
            gemm_block(xp, m, k, static_cast<const uint16_t*>(w.data), n, f0, wp, y);
        else
            gemm_block(xp, m, k, static_cast<const float*>(w.data), n, f0, wp, y);
    });
}

// ---- elementwise ---------------------------------------------------------------------------------

void rmsnorm(const float* x, const float* w, float* y, int n, float eps) {
    typename V::reg acc = V::zero();
    int i = 0;
    for (; i + V::W <= n; i += V::W) {
        const typename V::reg v = V::load(x + i);
        acc = V::fma(v, v, acc);
    }
    if (i < n) {
        const typename V::reg v = V::load_n(x + i, n - i);
        acc = V::fma(v, v, acc);
    }
    const float inv = km::rms_inv(V::hsum(acc), n, eps);
    for (int j = 0; j < n; ++j) y[j] = km::rms_apply(x[j], inv, w[j]);
}

inline typename V::reg swiglu_v(typename V::reg g, typename V::reg u) {
    const typename V::reg e = V::exp(V::sub(V::zero(), g));
    return V::mul(V::div(g, V::add(V::set1(1.0f), e)), u);
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
    int64_t i = 0;
    for (; i + V::W <= n; i += V::W) V::store(out + i, swiglu_v(V::load(gate + i), V::load(up + i)));
    if (i < n) {
        const int r = int(n - i);
        V::store_n(out + i, swiglu_v(V::load_n(gate + i, r), V::load_n(up + i, r)), r);
    }
}

void exp_n(const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + V::W <= n; i += V::W) V::store(y + i, V::exp(V::load(x + i)));
    if (i < n) V::store_n(y + i, V::exp(V::load_n(x + i, int(n - i))), int(n - i));
}

// ---- attention -----------------------------------------------------------------------------------
//
// A task is (kv head g, a block of consecutive query rows); its "vrows" are those rows times the
// G = n_heads / n_kv_heads query heads that share g, so each loaded key serves all of them.
// 1. scores S[vrow][j] = (q · k_j) * scale for the keys the block can see, j = absolute position;
//    16 keys per vector, FMA chain over head_dim. Blocks (prefix/suffix) are visited in order, so
//    the tail of a prefix tile is overwritten by the suffix's scores.
// 2. per vrow over its own range [lo, hi]: m = max (exact in any order), e_j = exp(s_j - m),
//    l = sum of e_j with lane = j mod W, then a fixed tree.
// 3. P·V: acc[d] = fma(e_j, v_j[d], acc[d]) for j = lo..hi in order. Several vrows run together
//    over the keys they all see; each vrow's keys before and after that common range run alone
//    with the same instruction, so the chain per element does not depend on the grouping.
// 4. out = acc / l.

constexpr int kNT = kKeyTile / V::W;  // vectors per key tile

// q: the vrows' query vectors transposed, element (r, d) at q[d * q_stride + r] (one pointer for
// all the rows, so the loop keeps its registers for the accumulators).
template <int R, int TT, class KT>
void qk_tiles(const float* q, int q_stride, const KT* ktile, int hd, float scale, float* const* out) {
    typename V::reg acc[R][TT][kNT];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int t = 0; t < TT; ++t)
#pragma GCC unroll 16
            for (int v = 0; v < kNT; ++v) acc[r][t][v] = V::zero();
    const size_t tile_elems = size_t(hd) * kKeyTile;
    for (int d = 0; d < hd; ++d) {
        typename V::reg kv[TT][kNT];
#pragma GCC unroll 4
        for (int t = 0; t < TT; ++t) {  // and the next call's tiles (as in pv_rows_t)
            __builtin_prefetch(ktile + (t + TT) * tile_elems + size_t(d) * kKeyTile);
#pragma GCC unroll 16
            for (int v = 0; v < kNT; ++v) kv[t][v] = V::load(ktile + t * tile_elems + size_t(d) * kKeyTile + v * V::W);
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const typename V::reg b = V::set1(q[size_t(d) * size_t(q_stride) + r]);
#pragma GCC unroll 4
            for (int t = 0; t < TT; ++t)
#pragma GCC unroll 16
                for (int v = 0; v < kNT; ++v) acc[r][t][v] = V::fma(b, kv[t][v], acc[r][t][v]);
        }
    }
    const typename V::reg s = V::set1(scale);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int t = 0; t < TT; ++t)
#pragma GCC unroll 16
            for (int v = 0; v < kNT; ++v) V::store(out[r] + t * kKeyTile + v * V::W, V::mul(acc[r][t][v], s));
}

// Keys stored as canonical rows ([n][head_dim], a group file read in place) into the tile layout
// qk_tiles reads: key i of tile t, dimension d at out[(t * hd + d) * kKeyTile + i]; keys at or past
// n_rows read as 0 (they lie outside the block: their scores are never used). The values are only
// moved (bf16 widening is exact), so qk_tiles then runs the very FMA chains it runs on a tiled
// block: a linked group's scores are the bits a full prefill computes. W x W blocks go through an
// in-register transpose; the ragged edges element by element.
template <class KT>
void k_rows_to_tiles(const KT* rows, int n_rows, int n_tiles, int hd, float* out) {
    for (int t = 0; t < n_tiles; ++t) {
        float* tile = out + size_t(t) * size_t(hd) * kKeyTile;
        for (int i0 = 0; i0 < kKeyTile; i0 += V::W) {
            const int key0 = t * kKeyTile + i0;
            const int valid = std::clamp(n_rows - key0, 0, V::W);
            const KT* src = rows + size_t(key0) * size_t(hd);
            int d0 = 0;
            if (valid == V::W) {
                for (; d0 + V::W <= hd; d0 += V::W) {
                    typename V::reg r[V::W];
#pragma GCC unroll 16
                    for (int i = 0; i < V::W; ++i) r[i] = V::load(src + size_t(i) * size_t(hd) + size_t(d0));
                    V::transpose_w(r);
#pragma GCC unroll 16
                    for (int j = 0; j < V::W; ++j) V::store(tile + size_t(d0 + j) * kKeyTile + i0, r[j]);
                }
            }
            for (; d0 < hd; ++d0)
                for (int i = 0; i < V::W; ++i) {
                    float x = 0.0f;
                    if (i < valid) {
                        if constexpr (std::is_same_v<KT, float>) x = src[size_t(i) * size_t(hd) + size_t(d0)];
                        else x = km::bf16_to_f32(src[size_t(i) * size_t(hd) + size_t(d0)]);
                    }
                    tile[size_t(d0) * kKeyTile + i0 + i] = x;
                }
        }
    }
}

template <int R, class KT>
void qk_rows(int rows, int tiles, const float* q, int q_stride, const KT* ktile, int hd, float scale, float* const* out) {
    if constexpr (R > 1) {
        if (rows < R) return qk_rows<R - 1>(rows, tiles, q, q_stride, ktile, hd, scale, out);
    }
    if (tiles == V::qk_tt)
        qk_tiles<R, V::qk_tt>(q, q_stride, ktile, hd, scale, out);
    else
        qk_tiles<R, 1>(q, q_stride, ktile, hd, scale, out);
}

// acc rows (R of them, ND vectors wide: `width` columns, the last vector possibly partial) +=
// e_j * v_j for j in [j0, j1); v points at row j0 (rows `stride` elements apart), acc at the same column.
template <int ND, int R, class KT>
void pv_rows_t(const float* const* e, int j0, int j1, const KT* v, int stride, int width, float* const* acc) {
    typename V::reg a[R][ND];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int d = 0; d < ND; ++d) a[r][d] = V::load(acc[r] + d * V::W);
    const int tail = width - (ND - 1) * V::W;  // lanes of the last vector, 1..W
    for (int j = j0; j < j1; ++j, v += stride) {
        typename V::reg vv[ND];
        // the row 16 keys ahead, a line per vector (V streams from memory on a long prefix; a
        // prefetch past the keys is harmless). 16 rather than 4: the 23-row attention of a cache
        // hit 5% faster with the AVX2 kernels, faster in 14 of 16 interleaved pairs
        // (docs/benchmarks.md, "A fifteenth sitting")
#pragma GCC unroll 8
        for (int d = 0; d < ND; ++d) __builtin_prefetch(v + 16 * size_t(stride) + d * V::W);
#pragma GCC unroll 8
        for (int d = 0; d < ND - 1; ++d) vv[d] = V::load(v + d * V::W);
        vv[ND - 1] = tail == V::W ? V::load(v + (ND - 1) * V::W) : V::load_n(v + (ND - 1) * V::W, tail);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const typename V::reg b = V::set1(e[r][j]);
#pragma GCC unroll 8
            for (int d = 0; d < ND; ++d) a[r][d] = V::fma(b, vv[d], a[r][d]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int d = 0; d < ND; ++d) V::store(acc[r] + d * V::W, a[r][d]);
}

// P·V tiles: R rows x ND vectors of a column chunk, R * ND accumulators beside the chunk's ND
// loaded V vectors and a broadcast. A wider head runs in column chunks; each element's chain over
// j is the same whatever the chunk and the rows, so neither changes a bit.
constexpr int kPvChunk = 8;  // the widest chunk, in vectors

constexpr int pv_max_rows(int nd) {
    const int r = (V::n_regs - nd - 2) / nd;
    return r < 1 ? 1 : (r > 8 ? 8 : r);
}

// The widest chunk whose tile holds `rows` rows: fewer vectors for more rows, so each loaded (and
// widened) V vector feeds more FMA chains. With 16 registers (AVX2) one row takes 8 vectors, two
// take 4, three 3, four to six 2: a 6 x 2 tile does 12 FMAs per 2 V loads and 6 broadcasts, the
// ratio of qk_tiles' 6 x 2, where one row of 8 vectors did 8 per 8 loads and 8 widenings.
constexpr int pv_chunk_for(int rows) {
    int nd = kPvChunk;
    while (nd > 1 && pv_max_rows(nd) < rows) --nd;
    return nd;
}

template <int ND, int R, class KT>
void pv_rows_n(int rows, const float* const* e, int j0, int j1, const KT* v, int stride, int width, float* const* acc) {
    if constexpr (R > 1) {
        if (rows < R) return pv_rows_n<ND, R - 1>(rows, e, j0, j1, v, stride, width, acc);
    }
    pv_rows_t<ND, R>(e, j0, j1, v, stride, width, acc);
}

// rows <= pv_group_rows(hd). Dispatches each column chunk on its vector count.
template <class KT>
void pv_rows(int rows, const float* const* e, int j0, int j1, const KT* v, int hd, float* const* acc) {
    if (j0 >= j1) return;
    float* acc_c[8];
    const int chunk = pv_chunk_for(rows) * V::W;
    for (int c0 = 0; c0 < hd; c0 += chunk) {
        const int width = std::min(chunk, hd - c0);
        const int nd = (width + V::W - 1) / V::W;
        for (int r = 0; r < rows; ++r) acc_c[r] = acc[r] + c0;
        switch (nd) {
#define CC_PV_CASE(N) \
    case N: pv_rows_n<N, pv_max_rows(N)>(rows, e, j0, j1, v + c0, hd, width, acc_c); break;
            CC_PV_CASE(1)
            CC_PV_CASE(2)
            CC_PV_CASE(3)
            CC_PV_CASE(4)
            CC_PV_CASE(5)
            CC_PV_CASE(6)
            CC_PV_CASE(7)
            CC_PV_CASE(8)
#undef CC_PV_CASE
        }
    }
}

// Rows per P·V group: V::pv_rows where the instruction set names it (measured there), else as
// many as a chunk of the whole head (at most kPvChunk vectors) holds.
inline int pv_group_rows(int hd) {
    if constexpr (V::pv_rows > 0) return V::pv_rows;
    return pv_max_rows(std::min(kPvChunk, (hd + V::W - 1) / V::W));
}

constexpr int kPvBlock = 64;  // keys per P·V block (a block of V rows stays in L1 across the groups)

// The order of step 3 below, over units u (key positions, or pairs of them for bf16_dot): rows
// [lo[r], hi[r]] each, in groups of `group` rows. Per group: the units before the group's common
// range row by row, then the common range in blocks of `block` units with the groups innermost (a
// block of V rows stays in L1 across groups; the running sums rest in acc between blocks), then the
// units after it row by row. Each row sees its units in ascending order throughout.
// pv(rows, first_row, u0, u1) accumulates rows [first_row, first_row + rows) over [u0, u1).
template <class Pv>
void pv_grouped(int nvr, const int* lo, const int* hi, int group, int block, const Pv& pv) {
    constexpr int kMaxVrows = 64;
    const int n_groups = (nvr + group - 1) / group;
    int glo[kMaxVrows], ghi[kMaxVrows];
    int common_lo = INT32_MAX, common_hi = -1;
    for (int gi = 0; gi < n_groups; ++gi) {
        const int c0 = gi * group, cn = std::min(group, nvr - c0);
        glo[gi] = *std::max_element(lo + c0, lo + c0 + cn);
        ghi[gi] = *std::min_element(hi + c0, hi + c0 + cn);
        if (glo[gi] > ghi[gi]) {  // no common range: the group's rows run alone
            glo[gi] = hi[c0] + 1;
            ghi[gi] = hi[c0];
            for (int r = c0; r < c0 + cn; ++r) pv(1, r, lo[r], hi[r] + 1);
            continue;
        }
        for (int r = c0; r < c0 + cn; ++r) pv(1, r, lo[r], glo[gi]);
        common_lo = std::min(common_lo, glo[gi]);
        common_hi = std::max(common_hi, ghi[gi]);
    }
    for (int jb = common_lo; jb <= common_hi; jb += block) {
        const int je = std::min(jb + block, common_hi + 1);
        for (int gi = 0; gi < n_groups; ++gi) {
            const int c0 = gi * group, cn = std::min(group, nvr - c0);
            const int j0 = std::max(jb, glo[gi]), j1 = std::min(je, ghi[gi] + 1);
            if (j0 < j1) pv(cn, c0, j0, j1);
        }
    }
    for (int gi = 0; gi < n_groups; ++gi) {
        const int c0 = gi * group, cn = std::min(group, nvr - c0);
        if (glo[gi] > ghi[gi]) continue;
        for (int r = c0; r < c0 + cn; ++r) pv(1, r, ghi[gi] + 1, hi[r] + 1);
    }
}

static_assert(V::qk_r <= bf16dot::kQkRows, "bf16dot::qk takes at most kQkRows vrows");

// The rows of one attention call, one sequence or several over a shared prefix (AttentionArgs):
// row t's sequence, position, query and output, and each sequence's suffix segment.
struct AttentionRows {
    std::vector<int> seq, pos;
    std::vector<const float*> q;
    std::vector<float*> out;
    const KvSegment* suffixes = nullptr;

    explicit AttentionRows(const AttentionArgs& a) {
        if (a.suffixes != nullptr) {
            seq.assign(a.row_seq, a.row_seq + a.n_rows);
            pos.assign(a.row_pos, a.row_pos + a.n_rows);
            q.assign(a.row_q, a.row_q + a.n_rows);
            out.assign(a.row_out, a.row_out + a.n_rows);
            suffixes = a.suffixes;
            return;
        }
        const size_t row = size_t(a.n_heads) * size_t(a.head_dim);
        seq.assign(size_t(a.n_rows), 0);
        for (int t = 0; t < a.n_rows; ++t) {
            pos.push_back(a.first_pos + t);
            q.push_back(a.q + size_t(t) * row);
            out.push_back(a.out + size_t(t) * row);
        }
        suffixes = &a.seg[1];
    }
    int n_seqs() const { return seq.empty() ? 0 : *std::max_element(seq.begin(), seq.end()) + 1; }
};

// Dot: the bf16_dot variant (KT = uint16_t): q and the softmax weights in BF16, VDPBF16PS chains
// (bf16dot::qk / pv), pairs of key positions (2i, 2i+1) counted from position 0.
template <class KT, bool Dot>
struct AttentionTask {
    const AttentionArgs& a;
    const AttentionRows& rows;
    int g, t0, nq, G, hd, hd_pad;
    size_t s_stride;
    float* buf;

    int vrow_seq(int r) const { return rows.seq[size_t(t0 + r / G)]; }
    // The end of the run of vrows from r (of `n` from the task's first) that share r's sequence.
    int run_end(int r, int n) const {
        int e = r + 1;
        while (e < n && vrow_seq(e) == vrow_seq(r)) ++e;
        return e;
    }

    const KT* k_tiles(const KvSegment& s) const {
        return static_cast<const KT*>(s.k) + size_t(g) * size_t(s.capacity) * size_t(hd);
    }
    const KT* v_rows(const KvSegment& s) const {
        return static_cast<const KT*>(s.v) + size_t(g) * size_t(s.capacity) * size_t(hd);
    }

    // e_j * v_j over key positions [j0, j1) for vrows [r0, r0 + n), split where the prefix segment
    // ends: the prefix's V rows for all of them, then each sequence's run over its own suffix.
    void pv(int n, int r0, const float* const* e, int j0, int j1, float* const* acc) const {
        const KvSegment& p = a.seg[0];
        int lo = std::max(j0, p.first_pos), hi = std::min(j1, p.first_pos + p.n_tokens);
        if (lo < hi) pv_rows(n, e, lo, hi, v_rows(p) + size_t(lo - p.first_pos) * size_t(hd), hd, acc);
        for (int r = 0; r < n;) {
            const int e_end = run_end(r0 + r, r0 + n) - r0;
            const KvSegment& s = rows.suffixes[vrow_seq(r0 + r)];
            lo = std::max(j0, s.first_pos), hi = std::min(j1, s.first_pos + s.n_tokens);
            if (lo < hi) pv_rows(e_end - r, e + r, lo, hi, v_rows(s) + size_t(lo - s.first_pos) * size_t(hd), hd, acc + r);
            r = e_end;
        }
    }

    // bf16_dot: e-pair · V over the pairs [i0, i1) for vrows [r0, r0 + n): the pairs wholly in the
    // prefix for all of them, the rest for each sequence's run (pv_dot_seq).
    void pv_dot(int n, int r0, const uint32_t* const* ep, int i0, int i1, float* const* acc, uint16_t* pair_rows) const {
        const KvSegment& p = a.seg[0];
        const int shared_end = std::min(i1, (p.first_pos + p.n_tokens) / 2);
        if (shared_end > i0) {
            bf16dot::pv(n, ep, i0, shared_end, v_pair_rows(p, 2 * i0), hd, acc);
            i0 = shared_end;
        }
        if (i0 >= i1) return;
        for (int r = 0; r < n;) {
            const int e_end = run_end(r0 + r, r0 + n) - r0;
            pv_dot_seq(e_end - r, rows.suffixes[vrow_seq(r0 + r)], ep + r, i0, i1, acc + r, pair_rows);
            r = e_end;
        }
    }
    const uint16_t* v_pair_rows(const KvSegment& s, int pos) const {
        return reinterpret_cast<const uint16_t*>(v_rows(s)) + size_t(pos - s.first_pos) * size_t(hd);
    }
    // One sequence's rows over [prefix | suffix]. A pair split between the segments, or whose
    // second row lies past the keys, runs from pair_rows (its two rows, zeros past the keys).
    void pv_dot_seq(int n, const KvSegment& suffix, const uint32_t* const* ep, int i0, int i1, float* const* acc,
                    uint16_t* pair_rows) const {
        for (int i = i0; i < i1;) {
            const int j = 2 * i;
            const KvSegment& s = j < a.seg[0].first_pos + a.seg[0].n_tokens ? a.seg[0] : suffix;
            const int whole_end = std::min(i1, (s.first_pos + s.n_tokens) / 2);  // pairs with both rows in s
            if (whole_end > i) {
                bf16dot::pv(n, ep, i, whole_end, v_pair_rows(s, j), hd, acc);
                i = whole_end;
                continue;
            }
            std::memcpy(pair_rows, v_pair_rows(s, j), size_t(hd) * sizeof(uint16_t));
            if (&s != &suffix && j + 1 >= suffix.first_pos && j + 1 < suffix.first_pos + suffix.n_tokens)
                std::memcpy(pair_rows + hd, v_pair_rows(suffix, j + 1), size_t(hd) * sizeof(uint16_t));
            else
                std::fill(pair_rows + hd, pair_rows + 2 * hd, uint16_t(0));
            bf16dot::pv(n, ep, i, i + 1, pair_rows, hd, acc);
            ++i;
        }
    }


    void run() const {
        const int nvr = nq * G;
        constexpr int kMaxVrows = 64;
        int lo[kMaxVrows], hi[kMaxVrows];
        float* srow[kMaxVrows];
        float* acc[kMaxVrows];
        float l[kMaxVrows];
        for (int i = 0; i < nq; ++i) {
            const int pos = rows.pos[size_t(t0 + i)];
            for (int hh = 0; hh < G; ++hh) {
                const int r = i * G + hh;
                hi[r] = pos;
                lo[r] = a.window > 0 ? std::max(0, pos - a.window + 1) : 0;
                srow[r] = buf + size_t(r) * s_stride + kKeyTile;
                acc[r] = buf + size_t(nvr) * s_stride + size_t(r) * size_t(hd_pad);
            }
        }
        // Scratch after the scores and accumulators: a K tile pair as f32 (linked blocks), and the
        // vrows' q transposed, element (r, d) at qt[d * nvr + r].
        float* const tile_scratch = buf + size_t(nvr) * s_stride + size_t(nvr) * size_t(hd_pad);  // (qk_tt, hd, 16)
        float* const qt = tile_scratch + size_t(V::qk_tt) * size_t(hd) * kKeyTile;                 // (hd, nvr)
        // bf16_dot scratch after qt: each vrow's softmax weights in BF16 (s_stride per row, position
        // j at ebf[r][j], so pair i is the 32-bit word i), a pair of V rows, and a q row in BF16.
        [[maybe_unused]] uint16_t* const ebf = reinterpret_cast<uint16_t*>(qt + size_t(hd) * size_t(nvr));
        [[maybe_unused]] uint16_t* const pair_rows = ebf + size_t(nvr) * s_stride;
        [[maybe_unused]] uint32_t* const qp = reinterpret_cast<uint32_t*>(qt);  // bf16_dot: (hd / 2, nvr) q pairs
        for (int r = 0; r < nvr; ++r) {
            const float* qr = rows.q[size_t(t0 + r / G)] + size_t(g * G + r % G) * size_t(hd);
            if constexpr (Dot) {
                uint16_t* const qrow = pair_rows + 2 * size_t(hd);
                bf16dot::round_row(qr, hd, qrow);
                for (int p = 0; p < hd / 2; ++p)
                    std::memcpy(qp + size_t(p) * size_t(nvr) + size_t(r), qrow + 2 * p, sizeof(uint32_t));
            } else {
                for (int d = 0; d < hd; ++d) qt[size_t(d) * size_t(nvr) + size_t(r)] = qr[d];
            }
        }

        // 1. scores. Key tiles outermost, so each tile is loaded from memory once for all the
        //    vrows [v0, v1) (it stays in L1 across the vrow chunks): the prefix's for all the
        //    task's vrows, each sequence's suffix for its own run.
        //    A segment whose K is in canonical rows (a group file linked in place) is moved into
        //    the tile layout one tile pair at a time (k_rows_to_tiles, into L1 scratch), then
        //    scored by the same qk_rows.
        const auto score = [&](const KvSegment& s, int v0, int v1) {
            const int n_chunks = (v1 - v0 + V::qk_r - 1) / V::qk_r;
            int clo[kMaxVrows], chi[kMaxVrows];
            for (int c = 0; c < n_chunks; ++c) {
                const int c0 = v0 + c * V::qk_r, cn = std::min(V::qk_r, v1 - c0);
                clo[c] = *std::min_element(lo + c0, lo + c0 + cn);
                chi[c] = *std::max_element(hi + c0, hi + c0 + cn);
            }
            const int all_lo = *std::min_element(clo, clo + n_chunks), all_hi = *std::max_element(chi, chi + n_chunks);
            const int klo = std::max(all_lo, s.first_pos), khi = std::min(all_hi, s.first_pos + s.n_tokens - 1);
            if (klo > khi) return;
            const int ti0 = (klo - s.first_pos) / kKeyTile, ti1 = (khi - s.first_pos) / kKeyTile;
            const KT* kt = k_tiles(s);
            for (int ti = ti0; ti <= ti1; ti += V::qk_tt) {
                const int tiles = std::min(V::qk_tt, ti1 - ti + 1);
                const int tile_lo = s.first_pos + ti * kKeyTile, tile_hi = tile_lo + tiles * kKeyTile - 1;
                bool moved = false;
                for (int c = 0; c < n_chunks; ++c) {
                    if (tile_hi < clo[c] || tile_lo > chi[c]) continue;
                    const int c0 = v0 + c * V::qk_r, cn = std::min(V::qk_r, v1 - c0);
                    float* out[V::qk_r];
                    for (int r = 0; r < cn; ++r) out[r] = srow[c0 + r] + tile_lo;
                    if (s.k_rows) {
                        if (!moved) {
                            k_rows_to_tiles(kt + size_t(ti) * kKeyTile * size_t(hd), s.capacity - ti * kKeyTile, tiles, hd,
                                            tile_scratch);
                            moved = true;
                        }
                        if constexpr (Dot)
                            bf16dot::qk(cn, tiles, qp + c0, nvr, tile_scratch, true, hd, a.scale, out);
                        else
                            qk_rows<V::qk_r>(cn, tiles, qt + c0, nvr, static_cast<const float*>(tile_scratch), hd, a.scale, out);
                    } else if constexpr (Dot) {
                        bf16dot::qk(cn, tiles, qp + c0, nvr, kt + size_t(ti) * size_t(hd) * kKeyTile, false, hd, a.scale, out);
                    } else {
                        qk_rows<V::qk_r>(cn, tiles, qt + c0, nvr, kt + size_t(ti) * size_t(hd) * kKeyTile, hd, a.scale, out);
                    }
                }
            }
        };
        score(a.seg[0], 0, nvr);
        for (int r = 0; r < nvr;) {
            const int e = run_end(r, nvr);
            score(rows.suffixes[vrow_seq(r)], r, e);
            r = e;
        }

        // 2. softmax weights, lanes at absolute positions
        for (int r = 0; r < nvr; ++r) {
            float* s = srow[r];
            const int j_begin = lo[r] - lo[r] % V::W;
            typename V::reg mv = V::set1(-INFINITY);
            for (int j = j_begin; j <= hi[r]; j += V::W) {
                const int first = std::max(lo[r] - j, 0), last = std::min(hi[r] - j, V::W - 1);
                mv = V::max(mv, V::keep_lanes(V::load(s + j), first, last - first + 1, -INFINITY));
            }
            const typename V::reg m = V::set1(V::hmax(mv));
            typename V::reg sum = V::zero();
            for (int j = j_begin; j <= hi[r]; j += V::W) {
                const int first = std::max(lo[r] - j, 0), last = std::min(hi[r] - j, V::W - 1);
                const typename V::reg e = V::keep_lanes(V::exp(V::sub(V::load(s + j), m)), first, last - first + 1, 0.0f);
                V::store(s + j, e);
                sum = V::add(sum, e);
            }
            l[r] = V::hsum(sum);
            if constexpr (Dot) {  // the weights of pairs lo / 2 .. hi / 2, 0 for their positions outside [lo, hi]
                const int j0 = lo[r] & ~1, j1 = hi[r] | 1;
                s[j0] = j0 < lo[r] ? 0.0f : s[j0];
                s[j1] = j1 > hi[r] ? 0.0f : s[j1];
                bf16dot::round_row(s + j0, j1 + 1 - j0, ebf + size_t(r) * s_stride + size_t(j0));
            }
        }

        // 3. P·V in the order of pv_grouped: over key positions, or over pairs of them (bf16_dot).
        for (int r = 0; r < nvr; ++r) std::fill(acc[r], acc[r] + hd_pad, 0.0f);
        if constexpr (Dot) {
            const uint32_t* ep[kMaxVrows];
            int plo[kMaxVrows], phi[kMaxVrows];
            for (int r = 0; r < nvr; ++r) {
                ep[r] = reinterpret_cast<const uint32_t*>(ebf + size_t(r) * s_stride);
                plo[r] = lo[r] / 2;
                phi[r] = hi[r] / 2;
            }
            pv_grouped(nvr, plo, phi, bf16dot::pv_group_rows(hd), kPvBlock / 2, [&](int n, int r0, int i0, int i1) {
                pv_dot(n, r0, ep + r0, i0, i1, acc + r0, pair_rows);
            });
        } else {
            pv_grouped(nvr, lo, hi, pv_group_rows(hd), kPvBlock,
                       [&](int n, int r0, int j0, int j1) { pv(n, r0, srow + r0, j0, j1, acc + r0); });
        }

        // 4. normalise into the output rows
        for (int i = 0; i < nq; ++i) {
            for (int hh = 0; hh < G; ++hh) {
                const int r = i * G + hh;
                if constexpr (Dot) bf16dot::unpermute(acc[r], hd);
                float* o = rows.out[size_t(t0 + i)] + size_t(g * G + hh) * size_t(hd);
                const typename V::reg lv = V::set1(l[r]);
                for (int d = 0; d < hd; d += V::W) {
                    const typename V::reg y = V::div(V::load(acc[r] + d), lv);
                    if (hd - d >= V::W)
                        V::store(o + d, y);
                    else
                        V::store_n(o + d, y, hd - d);
                }
            }
        }
    }
};

void attention(ThreadPool& pool, Workspace& ws, const AttentionArgs& a) {
    if (a.n_rows <= 0) return;
    const int G = a.n_heads / a.n_kv_heads;
    // Query rows per task: all of them when their vrows fit one task (a short suffix over a long
    // prefix: each kv head's K and V then stream from memory once), else 32 vrows' worth.
    const int qb = a.n_rows * G <= 64 ? a.n_rows : std::max(1, std::min(a.n_rows, 32 / std::max(G, 1)));
    const int n_blocks = (a.n_rows + qb - 1) / qb;
    const int hd = a.head_dim;
    const int pad = a.bf16_dot ? 32 : V::W;  // bf16_dot: P·V's accumulators come in groups of 32 columns
    const int hd_pad = (hd + pad - 1) / pad * pad;
    const AttentionRows rows(a);
    int total_keys = a.seg[0].first_pos + a.seg[0].n_tokens;
    for (int i = 0; i < rows.n_seqs(); ++i)
        total_keys = std::max(total_keys, rows.suffixes[i].first_pos + rows.suffixes[i].n_tokens);
    // One row of scores: kKeyTile floats of slack before position 0 (the first softmax vector may
    // start below lo) and room for the last tile and vector past the end.
    const size_t s_stride = size_t((total_keys + kKeyTile - 1) / kKeyTile * kKeyTile + 3 * kKeyTile);
    const int nvr = qb * G;
    if (nvr > 64) throw std::runtime_error("attention: more than 64 query heads per kv head");
    if (a.bf16_dot && (!a.kv_bf16 || a.seg[0].first_pos % 2 != 0))
        throw std::logic_error("attention: bf16_dot needs BF16 K/V and the keys starting at an even position");
    // + bf16_dot: softmax weights in BF16 (s_stride uint16 per vrow), a pair of V rows and a q row
    const size_t per_thread = size_t(nvr) * s_stride + size_t(nvr) * size_t(hd_pad) + size_t(V::qk_tt) * size_t(hd) * kKeyTile +
                              size_t(hd) * size_t(nvr) +
                              (a.bf16_dot ? (size_t(nvr) * s_stride + 4 * size_t(hd) + 2) / 2 + 16 : 0);
    for (int t = 0; t < pool.n_threads(); ++t) ws.per_thread(t, per_thread);
    const int64_t n_tasks = int64_t(n_blocks) * a.n_kv_heads;
    pool.parallel_for(n_tasks, [&](int64_t task, int thread) {
        const int g = int(task % a.n_kv_heads);
        const int b = int(task / a.n_kv_heads);
        const int t0 = b * qb;
        const int nq = std::min(qb, a.n_rows - t0);
        float* buf = ws.per_thread(thread, per_thread);
        if (a.bf16_dot)
            AttentionTask<uint16_t, true>{a, rows, g, t0, nq, G, hd, hd_pad, s_stride, buf}.run();
        else if (a.kv_bf16)
            AttentionTask<uint16_t, false>{a, rows, g, t0, nq, G, hd, hd_pad, s_stride, buf}.run();
        else
            AttentionTask<float, false>{a, rows, g, t0, nq, G, hd, hd_pad, s_stride, buf}.run();
    });
}

const Kernels& table_impl(Isa isa) {
    static const Kernels k{isa, kNR, &gemm, &rmsnorm, &swiglu, &exp_n, &attention};
    return k;
}
