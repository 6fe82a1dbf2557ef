// Our own GEMM kernels' arguments, as plain C++ (no CUDA types), so that the kernels' code can also
// be compiled for the CPU: tests/cuda/test_gemm_mma_emulated.cpp runs it there.
#pragma once

#include "cuda/launch_geometry.h"

#include <span>
#include <stdexcept>
#include <string>

namespace cc::cuda::kern {

// One weight of a GEMM: Y[m][n] (f32, row-major) = X[m][k] · W[n][k]ᵀ (bf16, row-major).
struct GemmOut {
    const uint16_t* w = nullptr;
    float* y = nullptr;
    int n = 0;
};

// Up to kGemmMaxGroup weights that read the same X (q | k | v, gate | up) in ONE launch: weight i
// takes the blocks [first_block[i], first_block[i + 1]) along x, and each of its blocks runs exactly
// what its block of a launch for that weight alone runs, so every output gets the same bits.
inline constexpr int kGemmMaxGroup = 3;
struct GemmGroup {
    GemmOut out[kGemmMaxGroup];
    int first_block[kGemmMaxGroup + 1] = {};
    int count = 0;
};

// Which kernel runs: the rows kernel up to geom::kGemmRowsMax rows (its loads in batches of
// geom::kGemmRowsBatch steps, or kGemmRowsBatchDeep where few warps share the device:
// geom::gemm_rows_deep), else the tiled one, in blocks of 128 rows or, where those would leave SMs
// idle, of 64 (geom::gemm_mma_block_rows). A row gets the same bits from all four, so a test may
// ask for any of them at any row count (the rows kernels up to kGemmRowsMax rows).
enum class GemmKernel { rows, rows_deep, tiled, tiled_half };

inline bool gemm_rows_kernel(GemmKernel k) {
    return k == GemmKernel::rows || k == GemmKernel::rows_deep;
}

inline GemmGroup make_gemm_group(std::span<const GemmOut> outs, GemmKernel kernel) {
    if (outs.empty() || outs.size() > size_t(kGemmMaxGroup))
        throw std::invalid_argument("gemm group: 1.." + std::to_string(kGemmMaxGroup) + " weights, got " +
                                    std::to_string(outs.size()));
    // columns of n per block: both tiled heights take 128 (only the rows per block differ)
    const int per_block = gemm_rows_kernel(kernel) ? 8 * geom::kGemmRowsWarps : geom::kGemmMmaTile;
    GemmGroup g;
    g.count = int(outs.size());
    for (int i = 0; i < g.count; ++i) {
        if (outs[size_t(i)].n < 1) throw std::invalid_argument("gemm group: a weight with no rows");
        g.out[i] = outs[size_t(i)];
        g.first_block[i + 1] = g.first_block[i] + int(geom::ceil_div(uint64_t(outs[size_t(i)].n), per_block));
    }
    return g;
}

// sm_count 0 (unknown, or a caller that wants the 128-row blocks): never the half-height blocks.
// Both heights share the columns of the tiled group, whose blocks along x the rule counts.
inline GemmKernel gemm_kernel_for(int m, std::span<const GemmOut> outs, int sm_count) {
    if (m <= geom::kGemmRowsMax) {
        const GemmGroup g = make_gemm_group(outs, GemmKernel::rows);
        const uint64_t warps = uint64_t(g.first_block[g.count]) * geom::kGemmRowsWarps;
        return geom::gemm_rows_deep(warps, sm_count) ? GemmKernel::rows_deep : GemmKernel::rows;
    }
    const GemmGroup g = make_gemm_group(outs, GemmKernel::tiled);
    return geom::gemm_mma_block_rows(m, g.first_block[g.count], sm_count) == geom::kGemmMmaTile ? GemmKernel::tiled
                                                                                                : GemmKernel::tiled_half;
}

// The launch of `kernel` for m rows of group g: every weight's blocks along x.
inline geom::Launch gemm_group_launch(const GemmGroup& g, int m, GemmKernel kernel) {
    geom::Launch l = gemm_rows_kernel(kernel)      ? geom::gemm_mma_rows(m, 1)
                     : kernel == GemmKernel::tiled ? geom::gemm_mma_tiled(m, 1, geom::kGemmMmaTile)
                                                   : geom::gemm_mma_tiled(m, 1, geom::kGemmMmaTileHalf);
    l.grid.x = unsigned(g.first_block[g.count]);
    geom::check_grid(l, gemm_rows_kernel(kernel) ? "gemm_mma_rows (group)" : "gemm_mma_tiled (group)");
    return l;
}

}  // namespace cc::cuda::kern
