// Our own BF16 GEMM family on tensor cores (CudaBackendOptions::own_gemm; issue 35): Y[m][n] (f32,
// row-major) = X[m][k] (bf16, row-major) · W[n][k]ᵀ (bf16, row-major as torch's Linear weight), for
// one weight or a group of up to three that read the same X (gemm_args.h) in one launch.
// Opt-in and not yet run on a device: cuBLASLt's pinned algorithms (gemm.cu) stay the default until
// a device run shows the self-test's rows green and the figures (docs/cuda.md, "Our own GEMMs").
//
// Why a decode step and a prefill give a row the same bits although they run different kernels:
// - every output element is ONE chain of mma.sync m16n8k16 over K in ascending steps of 16,
//   starting from +0, in both kernels; a tensor core computes an output element from its own row
//   of A and column of B only, so the other rows of the m-tile (other requests, or zero padding)
//   and which kernel ran change nothing;
// - inside a step of 16, the 16 k values sit in the instruction's k slots by one fixed rule, the
//   same in both kernels: lane t's slots 2t, 2t+1, 2t+8, 2t+9 hold k = 4t .. 4t+3 of the step (so a
//   lane reads 8 contiguous bytes of a row);
// - no split of K, no reduction across warps or blocks; the step count is K / 16 exactly (K is a
//   multiple of 16), never a padded step.
// Compiled by nvcc (gemm_mma.cu) and by the CPU emulation (tests/cuda/test_gemm_mma_emulated.cpp).
#pragma once

#include "core/base/kernel_math.h"
#include "cuda/gemm_args.h"
#include "cuda/launch_geometry.h"
#include "cuda/mma_sync.cuh"

#include <cstdint>

namespace cc::cuda::kern::detail {

struct Bf16x4 {  // 4 consecutive bf16 values: k = 4t .. 4t+3 of a step, as the two words lo | hi
    uint32_t lo = 0, hi = 0;
};

__device__ __forceinline__ Bf16x4 ld_k4(const uint16_t* p) {  // one 8-byte load (p is 8-byte aligned)
    const uint2 q = *reinterpret_cast<const uint2*>(p);
    Bf16x4 r;
    r.lo = q.x;
    r.hi = q.y;
    return r;
}

// Which weight of the group block `block` (along x) works for, and its block within that weight's
// own launch. (Static indices only: a run-time index into the kernel's parameters would copy them
// to local memory.)
__device__ __forceinline__ GemmOut gemm_group_find(const GemmGroup& g, int block, int& local) {
    GemmOut o = g.out[0];
    local = block;
    if (g.count > 1 && block >= g.first_block[1]) {
        o = g.out[1];
        local = block - g.first_block[1];
    }
    if (g.count > 2 && block >= g.first_block[2]) {
        o = g.out[2];
        local = block - g.first_block[2];
    }
    return o;
}

// The rows kernel's chains (m <= 16 * MT): lane (g, t) of a warp reads weight row wrow[j] (row
// n0 + g of weight j: NW weights a warp, one for a GEMM, gate and up for the SwiGLU kernel), 4
// values a step, and each m-tile's A fragment from the X rows (zeros past m); acc[j][mt] ends as
// the warp's outputs of weight j. The kernel is bound by reading W, so the weights come in batches
// of U steps (geom::kGemmRowsBatch, or kGemmRowsBatchDeep: geom::gemm_rows_deep), two batches
// deep: the next batch's loads are issued before this batch's mma's, so that between U and 2U
// loads a lane (a weight) are always in flight. The mma's still run in ascending steps, and every
// output is its own chain: neither NW nor U changes anything in any output's bits.
template <int MT, int NW, int U>
__device__ __forceinline__ void gemm_rows_chains(const uint16_t* __restrict__ x, const uint16_t* const (&wrow)[NW],
                                                 bool w_in, int m, int k, float (&acc)[NW][MT][4]) {
    const int lane = int(threadIdx.x) % 32;
    const int g = lane / 4, t = lane % 4;
    const int steps = k / 16;
#pragma unroll
    for (int j = 0; j < NW; ++j)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[j][mt][i] = 0.0f;
    auto load = [&](Bf16x4(&b)[NW][U], int s0) {
        if (w_in && s0 + U <= steps) {  // the common case: U loads a weight issued back to back
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int j = 0; j < NW; ++j) b[j][u] = ld_k4(wrow[j] + size_t(s0 + u) * 16);
        } else {
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int j = 0; j < NW; ++j)
                    if (w_in && s0 + u < steps) b[j][u] = ld_k4(wrow[j] + size_t(s0 + u) * 16);
        }
    };
    auto use = [&](const Bf16x4(&b)[NW][U], int s0) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (s0 + u >= steps) break;
            const size_t kofs = size_t(s0 + u) * 16 + size_t(4 * t);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                const int r0 = 16 * mt + g, r1 = r0 + 8;
                // rows past m read row 0 (always there) and use zeros: no branch around the loads
                const Bf16x4 a0 = ld_k4(x + size_t(r0 < m ? r0 : 0) * size_t(k) + kofs);
                const Bf16x4 a1 = ld_k4(x + size_t(r1 < m ? r1 : 0) * size_t(k) + kofs);
                const uint32_t af[4] = {r0 < m ? a0.lo : 0u, r1 < m ? a1.lo : 0u, r0 < m ? a0.hi : 0u,
                                        r1 < m ? a1.hi : 0u};
#pragma unroll
                for (int j = 0; j < NW; ++j) mma_16816(acc[j][mt], af, b[j][u].lo, b[j][u].hi);
            }
        }
    };
    Bf16x4 b0[NW][U], b1[NW][U];  // two named batches (not b[2]...: a run-time index would put them in memory)
    load(b0, 0);
    for (int s0 = 0; s0 < steps; s0 += 2 * U) {
        if (s0 + U < steps) load(b1, s0 + U);
        use(b0, s0);
        if (s0 + 2 * U < steps) load(b0, s0 + 2 * U);
        if (s0 + U < steps) use(b1, s0 + U);
    }
}

// The rows kernel (m <= 16 * MT): warp w of block b owns outputs n0 .. n0 + 7, n0 = 8 (b * warps +
// w), of the group's weight that block b works for; U: its loads' batch (gemm_rows_chains).
template <int MT, int U>
__global__ void __launch_bounds__(32 * geom::kGemmRowsWarps)
    gemm_mma_rows_kernel(const uint16_t* __restrict__ x, const GemmGroup grp, int m, int k) {
    int block = 0;
    const GemmOut o = gemm_group_find(grp, int(blockIdx.x), block);
    float* __restrict__ y = o.y;
    const int n = o.n;
    const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
    const int g = lane / 4, t = lane % 4;
    const int n0 = (block * geom::kGemmRowsWarps + warp) * 8;
    if (n0 >= n) return;  // whole warps leave: no warp-wide instruction is cut short
    const bool w_in = n0 + g < n;
    const uint16_t* const wrow[1] = {o.w + size_t(w_in ? n0 + g : 0) * size_t(k) + size_t(4 * t)};
    float acc[1][MT][4];
    gemm_rows_chains<MT, 1, U>(x, wrow, w_in, m, k, acc);
    const int c0 = n0 + 2 * t;
    for (int mt = 0; mt < MT; ++mt)
        for (int i = 0; i < 4; ++i) {
            const int r = 16 * mt + g + (i >= 2 ? 8 : 0), c = c0 + (i & 1);
            if (r < m && c < n) y[size_t(r) * size_t(n) + size_t(c)] = acc[0][mt][i];
        }
}

// The MLP's gate and up GEMMs with SwiGLU after them (CudaBackendOptions::fused_kernels, decode):
// act[r][c] = bf16(swiglu(gate[r][c], up[r][c])) for m <= 16 * MT rows, both weights (n, k). Warp w
// of block b computes gate and up outputs n0 .. n0 + 7 side by side (the rows kernel's chains, one
// a weight), so the f32 gate and up never leave the registers; each is the bits the rows kernel
// gives it, and swiglu is swiglu_kernel's formula: act has the unfused bits.
template <int MT, int U>
__global__ void __launch_bounds__(32 * geom::kGemmRowsWarps)
    gemm_mma_rows_swiglu_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w_gate,
                                const uint16_t* __restrict__ w_up, uint16_t* __restrict__ act, int m, int n, int k) {
    const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
    const int g = lane / 4, t = lane % 4;
    const int n0 = (int(blockIdx.x) * geom::kGemmRowsWarps + warp) * 8;
    if (n0 >= n) return;
    const bool w_in = n0 + g < n;
    const size_t row = size_t(w_in ? n0 + g : 0) * size_t(k) + size_t(4 * t);
    const uint16_t* const wrow[2] = {w_gate + row, w_up + row};
    float acc[2][MT][4];
    gemm_rows_chains<MT, 2, U>(x, wrow, w_in, m, k, acc);
    const int c0 = n0 + 2 * t;
    for (int mt = 0; mt < MT; ++mt)
        for (int i = 0; i < 4; ++i) {
            const int r = 16 * mt + g + (i >= 2 ? 8 : 0), c = c0 + (i & 1);
            if (r < m && c < n)
                act[size_t(r) * size_t(n) + size_t(c)] = km::f32_to_bf16(km::swiglu(acc[0][mt][i], acc[1][mt][i]));
        }
}

// Where the 16-byte piece `chunk` (0..3) of row `row` of a shared-memory tile lives: rows are 64
// bytes (32 bf16 of K), and rows 2, 3 (mod 4) swap their halves. A half-warp's 8-byte fragment loads
// (lanes g = 0..3 reading rows r0 + g, all at step s: bytes 32 s .. 32 s + 31 of each row) then fall
// into four different 32-byte bank groups: no bank conflict.
__device__ __forceinline__ int gemm_tile_chunk(int row, int chunk) {
    return chunk ^ (((row >> 1) & 1) << 1);
}

// The tiled kernel: a block of 4 warps computes TM x 128 outputs, TM = 32 MW (128 or 64 rows),
// warp (wm, wn) 16 MW x 64 of them (MW m-tiles x 8 n-tiles: 8 MW mma's for 2 MW + 8 fragment loads
// a step). K goes through shared memory 32 at a time in a ring of kGemmMmaStages tiles filled by
// cp.async: while the block multiplies tile kt, tiles kt+1 .. kt+3 are on their way (outside the
// matrices they are zeros; the last tile may hold one step, and only the steps that exist are run).
// The height only shares the outputs out differently: each is still one chain over K, so a row
// gets the same bits from either (64-row blocks are for grids that 128-row ones leave too small).
template <int MW>
__global__ void __launch_bounds__(geom::kGemmMmaThreads, MW == 4 ? 2 : 3)
    gemm_mma_tiled_kernel(const uint16_t* __restrict__ x, const GemmGroup grp, int m, int k) {
    constexpr int T = geom::kGemmMmaTile, TM = 32 * MW, KT = geom::kGemmMmaKTile, S = geom::kGemmMmaStages;
    constexpr int NT = geom::kGemmMmaThreads, CH = KT / 8;  // 16-byte pieces per tile row
    constexpr int kCopiesX = TM * CH / NT, kCopiesW = T * CH / NT;  // pieces per thread and tile
    static_assert(MW == 4 || MW == 2, "blocks of 128 or 64 rows (geom::gemm_mma_tiled)");
    static_assert(KT == 32, "gemm_tile_chunk's swizzle is for 64-byte rows");
    static_assert(TM * CH % NT == 0 && T * CH % NT == 0, "every thread copies whole pieces");
    CC_DYNAMIC_SMEM(uint16_t, smem);  // stage s: its X tile at smem + s * (TM + T) * KT, then its W tile
    const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t = lane % 4, wm = warp / 2, wn = warp % 2;
    int block = 0;
    const GemmOut o = gemm_group_find(grp, int(blockIdx.x), block);
    const uint16_t* __restrict__ w = o.w;
    float* __restrict__ y = o.y;
    const int n = o.n;
    const int m0 = int(blockIdx.y) * TM, n0 = block * T;
    const int steps = k / 16, tiles = (steps + 1) / 2;

    auto fill = [&](int stage, int kt) {  // issue the copies of tile kt into `stage`
        uint16_t* xs = smem + size_t(stage) * (TM + T) * KT;
        uint16_t* ws = xs + TM * KT;
        const int k0 = kt * KT;
        for (int i = 0; i < kCopiesW; ++i) {
            const int e = tid + i * NT, row = e / CH, c = e % CH;
            const bool kin = k0 + 8 * c < k;  // K is a multiple of 16: a piece is wholly in or out
            const int dst = row * KT + 8 * gemm_tile_chunk(row, c);
            if (i < kCopiesX) {
                const bool xin = kin && m0 + row < m;
                cp_async_16(xs + dst, xin ? x + size_t(m0 + row) * size_t(k) + size_t(k0 + 8 * c) : x, xin);
            }
            const bool win = kin && n0 + row < n;
            cp_async_16(ws + dst, win ? w + size_t(n0 + row) * size_t(k) + size_t(k0 + 8 * c) : w, win);
        }
    };
    // lane (g, t)'s 4 values of step s (k = 16 s + 4t .. +3) in tile row `row`
    auto frag = [&](const uint16_t* tile, int row, int s) {
        return ld_k4(tile + row * KT + 8 * gemm_tile_chunk(row, 2 * s + t / 2) + 4 * (t % 2));
    };

    float acc[MW][8][4];
#pragma unroll
    for (int a = 0; a < MW; ++a)
#pragma unroll
        for (int b = 0; b < 8; ++b)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[a][b][i] = 0.0f;

    for (int st = 0; st < S - 1; ++st) {  // the first S - 1 tiles (a group each, empty past the end)
        if (st < tiles) fill(st, st);
        cp_async_commit();
    }
    for (int kt = 0; kt < tiles; ++kt) {
        cp_async_wait<S - 2>();  // this thread's copies of tile kt have landed,
        __syncthreads();         // everyone's too; and everyone is done with tile kt - 1
        if (kt + S - 1 < tiles) fill((kt + S - 1) % S, kt + S - 1);  // into tile kt - 1's stage
        cp_async_commit();
        const uint16_t* xs = smem + size_t(kt % S) * (TM + T) * KT;
        const uint16_t* ws = xs + TM * KT;
#pragma unroll
        for (int s = 0; s < KT / 16; ++s) {
            if (2 * kt + s >= steps) break;
            Bf16x4 a0[MW], a1[MW], b[8];
#pragma unroll
            for (int mt = 0; mt < MW; ++mt) {
                const int r = wm * 16 * MW + mt * 16 + g;
                a0[mt] = frag(xs, r, s);
                a1[mt] = frag(xs, r + 8, s);
            }
#pragma unroll
            for (int nt = 0; nt < 8; ++nt) b[nt] = frag(ws, wn * 64 + nt * 8 + g, s);
#pragma unroll
            for (int mt = 0; mt < MW; ++mt) {
                const uint32_t af[4] = {a0[mt].lo, a1[mt].lo, a0[mt].hi, a1[mt].hi};
#pragma unroll
                for (int nt = 0; nt < 8; ++nt) mma_16816(acc[mt][nt], af, b[nt].lo, b[nt].hi);
            }
        }
    }
    cp_async_wait<0>();  // no copy outlives the block (the trailing groups are empty)

    const bool pairs = n % 2 == 0;  // then (c, c + 1) is one 8-byte store
#pragma unroll
    for (int mt = 0; mt < MW; ++mt)
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = m0 + wm * 16 * MW + mt * 16 + g + 8 * h;
                const int c = n0 + wn * 64 + nt * 8 + 2 * t;
                if (r >= m) continue;
                float* out = y + size_t(r) * size_t(n) + size_t(c);
                const float v0 = acc[mt][nt][2 * h], v1 = acc[mt][nt][2 * h + 1];
                if (pairs && c + 1 < n) {
                    *reinterpret_cast<float2*>(out) = float2{v0, v1};
                } else {
                    if (c < n) out[0] = v0;
                    if (c + 1 < n) out[1] = v1;
                }
            }
}

}  // namespace cc::cuda::kern::detail
