// Launches our own tensor-core GEMMs (the kernels and why a row's bits do not depend on which of
// them ran are in gemm_mma_kernels.cuh).
#include "cuda/gemm.h"
#include "cuda/gemm_mma_kernels.cuh"

#include <type_traits>

namespace cc::cuda {

namespace {

template <int MW>
void launch_tiled(const geom::Launch& l, const uint16_t* x, const kern::GemmGroup& g, int m, int k,
                  cudaStream_t stream) {
    using kern::detail::gemm_mma_tiled_kernel;
    if (l.smem_bytes > geom::kSmemDefaultBytes)
        CC_CUDA_CHECK(cudaFuncSetAttribute(gemm_mma_tiled_kernel<MW>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(l.smem_bytes)));
    gemm_mma_tiled_kernel<MW><<<dim3(l.grid.x, l.grid.y), dim3(l.block.x), l.smem_bytes, stream>>>(x, g, m, k);
    CC_CUDA_CHECK_LAUNCH("gemm_mma_tiled_kernel");
}

// Calls f(std::integral_constant<int, MT>) for the m-tiles (1..4) that m rows need: the rows
// kernels' template argument.
template <class F>
void with_m_tiles(int m, F&& f) {
    switch ((m + 15) / 16) {
        case 1:
            return f(std::integral_constant<int, 1>{});
        case 2:
            return f(std::integral_constant<int, 2>{});
        case 3:
            return f(std::integral_constant<int, 3>{});
        default:
            return f(std::integral_constant<int, 4>{});
    }
}

// The rows kernel for m rows, loads in batches of U steps.
template <int U>
void launch_rows(const geom::Launch& l, const uint16_t* x, const kern::GemmGroup& g, int m, int k,
                 cudaStream_t stream) {
    with_m_tiles(m, [&](auto mt) {
        kern::detail::gemm_mma_rows_kernel<mt(), U><<<dim3(l.grid.x), dim3(l.block.x), 0, stream>>>(x, g, m, k);
    });
    CC_CUDA_CHECK_LAUNCH("gemm_mma_rows_kernel");
}

template <int U>
void launch_rows_swiglu(const geom::Launch& l, const uint16_t* x, const uint16_t* w_gate, const uint16_t* w_up,
                        uint16_t* act, int m, int n, int k, cudaStream_t stream) {
    with_m_tiles(m, [&](auto mt) {
        kern::detail::gemm_mma_rows_swiglu_kernel<mt(), U>
            <<<dim3(l.grid.x), dim3(l.block.x), 0, stream>>>(x, w_gate, w_up, act, m, n, k);
    });
    CC_CUDA_CHECK_LAUNCH("gemm_mma_rows_swiglu_kernel");
}

}  // namespace

void gemm_mma_group(const uint16_t* x, std::span<const kern::GemmOut> outs, int m, int k, int sm_count,
                    cudaStream_t stream) {
    gemm_mma_launch(x, outs, m, k, kern::gemm_kernel_for(m, outs, sm_count), stream);
}

void gemm_mma_launch(const uint16_t* x, std::span<const kern::GemmOut> outs, int m, int k, kern::GemmKernel kernel,
                     cudaStream_t stream) {
    if (m == 0) return;
    for (const kern::GemmOut& o : outs)
        if (!geom::gemm_mma_shape_ok(o.n, k))
            throw CudaError("gemm_mma: k=" + std::to_string(k) + " is not a multiple of 16 (n=" + std::to_string(o.n) +
                            ")");
    const kern::GemmGroup g = kern::make_gemm_group(outs, kernel);
    const geom::Launch l = kern::gemm_group_launch(g, m, kernel);
    if (kernel == kern::GemmKernel::rows) return launch_rows<geom::kGemmRowsBatch>(l, x, g, m, k, stream);
    if (kernel == kern::GemmKernel::rows_deep) return launch_rows<geom::kGemmRowsBatchDeep>(l, x, g, m, k, stream);
    if (kernel == kern::GemmKernel::tiled)
        launch_tiled<4>(l, x, g, m, k, stream);
    else
        launch_tiled<2>(l, x, g, m, k, stream);
}

void gemm_mma_swiglu(const uint16_t* x, const uint16_t* w_gate, const uint16_t* w_up, uint16_t* act, int m, int n,
                     int k, int sm_count, cudaStream_t stream) {
    if (m == 0) return;
    if (!geom::gemm_mma_shape_ok(n, k))
        throw CudaError("gemm_mma_swiglu: k=" + std::to_string(k) + " is not a multiple of 16 (n=" + std::to_string(n) +
                        ")");
    const geom::Launch l = geom::gemm_mma_rows(m, n);  // m <= kGemmRowsMax, or it throws
    if (geom::gemm_rows_deep(uint64_t(l.grid.x) * geom::kGemmRowsWarps, sm_count))
        launch_rows_swiglu<geom::kGemmRowsBatchDeep>(l, x, w_gate, w_up, act, m, n, k, stream);
    else
        launch_rows_swiglu<geom::kGemmRowsBatch>(l, x, w_gate, w_up, act, m, n, k, stream);
}

void gemm_mma(const uint16_t* x, const uint16_t* w, float* y, int m, int n, int k, int sm_count, cudaStream_t stream) {
    const kern::GemmOut one{w, y, n};
    gemm_mma_group(x, std::span<const kern::GemmOut>(&one, 1), m, k, sm_count, stream);
}

}  // namespace cc::cuda
