// The launcher of the tensor-core attention (AttnKernel::mma, issue 34); the kernels, and why their
// bits do not depend on the batch, are in attention_mma_kernels.cuh.
#include "cuda/attention_mma.h"

#include "cuda/attention_mma_kernels.cuh"
#include "cuda/context.h"

#include <cstdint>
#include <string>

namespace cc::cuda::kern {
namespace {

using detail::attn_mma_kernel;

template <int HD>
void launch(const AttnArgs& a, float* partial, size_t partial_floats, bool split, cudaStream_t stream) {
    for (const AttnSeg& sg : a.seg)  // load8's 16-byte loads
        if (sg.n > 0 && ((reinterpret_cast<uintptr_t>(sg.k) | reinterpret_cast<uintptr_t>(sg.v)) & 15u) != 0)
            throw CudaError("attention (mma): a K/V block is not 16-byte aligned");
    const int n_positions = a.first_pos + a.n_rows;
    const geom::Launch l = geom::attn_mma(a.n_rows, a.n_heads, a.n_kv_heads, a.head_dim, n_positions, split);
    const dim3 grid(l.grid.x, l.grid.y, l.grid.z), block(l.block.x, l.block.y, l.block.z);
    if (!split) {
        if (l.smem_bytes > geom::kSmemDefaultBytes)
            CC_CUDA_CHECK(cudaFuncSetAttribute(attn_mma_kernel<HD, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               int(l.smem_bytes)));
        attn_mma_kernel<HD, false><<<grid, block, l.smem_bytes, stream>>>(a, nullptr, 0);
        CC_CUDA_CHECK_LAUNCH("attn_mma_kernel (tiled)");
        return;
    }
    const size_t need = geom::attn_partial_floats(a.n_rows, a.n_heads, a.head_dim, n_positions);
    if (partial == nullptr || partial_floats < need)
        throw CudaError("attention (mma): split scratch holds " + std::to_string(partial_floats) + " floats, " +
                        std::to_string(need) + " needed");
    if (l.smem_bytes > geom::kSmemDefaultBytes)
        CC_CUDA_CHECK(cudaFuncSetAttribute(attn_mma_kernel<HD, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(l.smem_bytes)));
    attn_mma_kernel<HD, true><<<grid, block, l.smem_bytes, stream>>>(a, partial, int(l.grid.x));
    CC_CUDA_CHECK_LAUNCH("attn_mma_kernel (split)");
    combine_partials(a, partial, int(l.grid.x), true, stream);
}

}  // namespace

void attention_mma(const AttnArgs& a, float* partial, size_t partial_floats, bool split, cudaStream_t stream) {
    switch (a.head_dim) {
        case 32:
            return launch<32>(a, partial, partial_floats, split, stream);
        case 64:
            return launch<64>(a, partial, partial_floats, split, stream);
        case 128:
            return launch<128>(a, partial, partial_floats, split, stream);
        default:
            throw CudaError("attention (mma): head_dim " + std::to_string(a.head_dim) +
                            " is not built (32, 64 or 128; the scalar kernel takes the others)");
    }
}

}  // namespace cc::cuda::kern
