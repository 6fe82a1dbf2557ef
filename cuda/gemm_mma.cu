// Launches our own tensor-core GEMMs (the kernels and why a row's bits do not depend on which of
// them ran are in gemm_mma_kernels.cuh).
#include "cuda/gemm.h"
#include "cuda/gemm_mma_kernels.cuh"

namespace cc::cuda {

void gemm_mma_group(const uint16_t* x, std::span<const kern::GemmOut> outs, int m, int k, cudaStream_t stream) {
    if (m == 0) return;
    for (const kern::GemmOut& o : outs)
        if (!geom::gemm_mma_shape_ok(o.n, k))
            throw CudaError("gemm_mma: k=" + std::to_string(k) + " is not a multiple of 16 (n=" + std::to_string(o.n) +
                            ")");
    using namespace kern::detail;
    const kern::GemmKernel kernel = kern::gemm_kernel_for(m);
    const kern::GemmGroup g = kern::make_gemm_group(outs, kernel);
    const geom::Launch l = kern::gemm_group_launch(g, m, kernel);
    if (kernel == kern::GemmKernel::rows) {
        const dim3 grid(l.grid.x), block(l.block.x);
        switch ((m + 15) / 16) {
            case 1:
                gemm_mma_rows_kernel<1><<<grid, block, 0, stream>>>(x, g, m, k);
                break;
            case 2:
                gemm_mma_rows_kernel<2><<<grid, block, 0, stream>>>(x, g, m, k);
                break;
            case 3:
                gemm_mma_rows_kernel<3><<<grid, block, 0, stream>>>(x, g, m, k);
                break;
            default:
                gemm_mma_rows_kernel<4><<<grid, block, 0, stream>>>(x, g, m, k);
                break;
        }
        CC_CUDA_CHECK_LAUNCH("gemm_mma_rows_kernel");
        return;
    }
    if (l.smem_bytes > geom::kSmemDefaultBytes)
        CC_CUDA_CHECK(cudaFuncSetAttribute(gemm_mma_tiled_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(l.smem_bytes)));
    gemm_mma_tiled_kernel<<<dim3(l.grid.x, l.grid.y), dim3(l.block.x), l.smem_bytes, stream>>>(x, g, m, k);
    CC_CUDA_CHECK_LAUNCH("gemm_mma_tiled_kernel");
}

void gemm_mma(const uint16_t* x, const uint16_t* w, float* y, int m, int n, int k, cudaStream_t stream) {
    const kern::GemmOut one{w, y, n};
    gemm_mma_group(x, std::span<const kern::GemmOut>(&one, 1), m, k, stream);
}

}  // namespace cc::cuda
