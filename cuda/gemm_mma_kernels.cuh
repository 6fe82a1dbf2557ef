// Our own BF16 GEMM family on tensor cores (CudaBackendOptions::own_gemm; issue 35): Y[m][n] (f32,
// row-major) = X[m][k] (bf16, row-major) · W[n][k]ᵀ (bf16, row-major as torch's Linear weight).
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

// The rows kernel (m <= 16 * MT): warp w of block b owns outputs n0 .. n0 + 7, n0 = 8 (b * warps +
// w); lane (g, t) reads weight row n0 + g, 4 values a step, and each m-tile's A fragment from the X
// rows (zeros past m). U steps of weights are loaded before their mma's, so that many loads are in
// flight per lane (the kernel is bound by reading W).
template <int MT>
__global__ void __launch_bounds__(32 * geom::kGemmRowsWarps)
    gemm_mma_rows_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w, float* __restrict__ y, int m,
                         int n, int k) {
    constexpr int U = 8;
    const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
    const int g = lane / 4, t = lane % 4;
    const int n0 = (int(blockIdx.x) * geom::kGemmRowsWarps + warp) * 8;
    if (n0 >= n) return;  // whole warps leave: no warp-wide instruction is cut short
    const int steps = k / 16;
    const bool w_in = n0 + g < n;
    const uint16_t* wrow = w + size_t(w_in ? n0 + g : 0) * size_t(k) + size_t(4 * t);
    float acc[MT][4];
    for (int mt = 0; mt < MT; ++mt)
        for (int i = 0; i < 4; ++i) acc[mt][i] = 0.0f;
    for (int s0 = 0; s0 < steps; s0 += U) {
        Bf16x4 b[U];
        if (w_in && s0 + U <= steps) {  // the common case: U loads issued back to back
            for (int u = 0; u < U; ++u) b[u] = ld_k4(wrow + size_t(s0 + u) * 16);
        } else {
            for (int u = 0; u < U; ++u)
                if (w_in && s0 + u < steps) b[u] = ld_k4(wrow + size_t(s0 + u) * 16);
        }
        for (int u = 0; u < U; ++u) {
            if (s0 + u >= steps) break;
            const size_t kofs = size_t(s0 + u) * 16 + size_t(4 * t);
            for (int mt = 0; mt < MT; ++mt) {
                const int r0 = 16 * mt + g, r1 = r0 + 8;
                Bf16x4 a0, a1;
                if (r0 < m) a0 = ld_k4(x + size_t(r0) * size_t(k) + kofs);
                if (r1 < m) a1 = ld_k4(x + size_t(r1) * size_t(k) + kofs);
                const uint32_t af[4] = {a0.lo, a1.lo, a0.hi, a1.hi};
                mma_16816(acc[mt], af, b[u].lo, b[u].hi);
            }
        }
    }
    const int c0 = n0 + 2 * t;
    for (int mt = 0; mt < MT; ++mt)
        for (int i = 0; i < 4; ++i) {
            const int r = 16 * mt + g + (i >= 2 ? 8 : 0), c = c0 + (i & 1);
            if (r < m && c < n) y[size_t(r) * size_t(n) + size_t(c)] = acc[mt][i];
        }
}

// The tiled kernel: a block of 4 warps computes 64 x 64 outputs, warp (wm, wn) 32 x 32 of them (2
// m-tiles x 4 n-tiles); K goes through shared memory 32 at a time (rows padded by 8 values against
// bank conflicts), the next tile read from global memory into registers while this one is used.
__global__ void __launch_bounds__(geom::kGemmMmaThreads)
    gemm_mma_tiled_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w, float* __restrict__ y, int m,
                          int n, int k) {
    constexpr int T = geom::kGemmMmaTile, KT = geom::kGemmMmaKTile, LD = KT + 8;
    constexpr int kLoads = T * KT / 8 / geom::kGemmMmaThreads;  // 16-byte pieces per thread per operand
    CC_DYNAMIC_SMEM(uint16_t, smem);  // geom::gemm_mma_tiled's smem_bytes: X tile, then W tile
    uint16_t* xs = smem;
    uint16_t* ws = smem + T * LD;
    const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t = lane % 4, wm = warp / 2, wn = warp % 2;
    const int m0 = int(blockIdx.y) * T, n0 = int(blockIdx.x) * T;

    uint4 rx[kLoads], rw[kLoads];
    auto fetch = [&](int k0) {  // zeros outside the matrices (K is a multiple of 16: whole pieces)
        for (int i = 0; i < kLoads; ++i) {
            const int e = tid + i * geom::kGemmMmaThreads, row = e / (KT / 8), col = (e % (KT / 8)) * 8;
            const bool kin = k0 + col < k;
            rx[i] = {0u, 0u, 0u, 0u};
            rw[i] = {0u, 0u, 0u, 0u};
            if (kin && m0 + row < m)
                rx[i] = *reinterpret_cast<const uint4*>(x + size_t(m0 + row) * size_t(k) + size_t(k0 + col));
            if (kin && n0 + row < n)
                rw[i] = *reinterpret_cast<const uint4*>(w + size_t(n0 + row) * size_t(k) + size_t(k0 + col));
        }
    };
    float acc[2][4][4];
    for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 4; ++b)
            for (int i = 0; i < 4; ++i) acc[a][b][i] = 0.0f;
    fetch(0);
    for (int k0 = 0; k0 < k; k0 += KT) {
        for (int i = 0; i < kLoads; ++i) {
            const int e = tid + i * geom::kGemmMmaThreads, row = e / (KT / 8), col = (e % (KT / 8)) * 8;
            *reinterpret_cast<uint4*>(xs + row * LD + col) = rx[i];
            *reinterpret_cast<uint4*>(ws + row * LD + col) = rw[i];
        }
        __syncthreads();
        if (k0 + KT < k) fetch(k0 + KT);
        const int steps = min(KT, k - k0) / 16;  // the last tile may hold one step
        for (int s = 0; s < steps; ++s) {
            Bf16x4 a0[2], a1[2], b[4];
            for (int mt = 0; mt < 2; ++mt) {
                const int r = wm * 32 + mt * 16 + g;
                a0[mt] = ld_k4(xs + r * LD + 16 * s + 4 * t);
                a1[mt] = ld_k4(xs + (r + 8) * LD + 16 * s + 4 * t);
            }
            for (int nt = 0; nt < 4; ++nt) b[nt] = ld_k4(ws + (wn * 32 + nt * 8 + g) * LD + 16 * s + 4 * t);
            for (int mt = 0; mt < 2; ++mt) {
                const uint32_t af[4] = {a0[mt].lo, a1[mt].lo, a0[mt].hi, a1[mt].hi};
                for (int nt = 0; nt < 4; ++nt) mma_16816(acc[mt][nt], af, b[nt].lo, b[nt].hi);
            }
        }
        __syncthreads();
    }
    for (int mt = 0; mt < 2; ++mt)
        for (int nt = 0; nt < 4; ++nt)
            for (int i = 0; i < 4; ++i) {
                const int r = m0 + wm * 32 + mt * 16 + g + (i >= 2 ? 8 : 0);
                const int c = n0 + wn * 32 + nt * 8 + 2 * t + (i & 1);
                if (r < m && c < n) y[size_t(r) * size_t(n) + size_t(c)] = acc[mt][nt][i];
            }
}

}  // namespace cc::cuda::kern::detail
