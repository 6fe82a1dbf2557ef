// The launcher of the tensor-core attention (AttnKernel::mma, issue 34); the kernels, and why their
// bits do not depend on the batch, are in attention_mma_kernels.cuh.
#include "cuda/attention_mma.h"

#include "cuda/attention_mma_kernels.cuh"
#include "cuda/context.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace cc::cuda::kern {
namespace {

using detail::attn_mma_kernel;

void check_aligned(const AttnArgs& a) {
    for (const AttnSeg& sg : a.seg)  // load8's 16-byte loads
        if (sg.n > 0 && ((reinterpret_cast<uintptr_t>(sg.k) | reinterpret_cast<uintptr_t>(sg.v)) & 15u) != 0)
            throw CudaError("attention (mma): a K/V block is not 16-byte aligned");
}

template <int HD>
void launch(const AttnArgs& a, float* partial, size_t partial_floats, bool split, cudaStream_t stream) {
    check_aligned(a);
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

// One launch of the split kernel and one of the combine for every sequence of `b`.
template <int HD>
void launch_batch(const AttnBatch& b, float* partial, size_t partial_floats, cudaStream_t stream) {
    const AttnArgs& a0 = b.seq[0];
    const geom::Launch l =
        geom::attn_mma_batch(b.n_seqs, b.max_rows, b.total_rows, a0.n_heads, a0.n_kv_heads, HD, b.max_positions);
    const size_t need = geom::attn_partial_floats(b.total_rows, a0.n_heads, HD, b.max_positions);
    if (partial == nullptr || partial_floats < need)
        throw CudaError("attention (mma batch): split scratch holds " + std::to_string(partial_floats) + " floats, " +
                        std::to_string(need) + " needed");
    if (l.smem_bytes > geom::kSmemDefaultBytes)
        CC_CUDA_CHECK(cudaFuncSetAttribute(detail::attn_mma_batch_kernel<HD>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, int(l.smem_bytes)));
    const int n_chunks = int(l.grid.x);
    detail::attn_mma_batch_kernel<HD>
        <<<dim3(l.grid.x, l.grid.y, l.grid.z), dim3(l.block.x, l.block.y, l.block.z), l.smem_bytes, stream>>>(
            b, partial, n_chunks);
    CC_CUDA_CHECK_LAUNCH("attn_mma_batch_kernel");
    const geom::Launch lc = geom::attn_combine_batch(b.n_seqs, b.max_rows, a0.n_heads, HD);
    detail::attn_combine_batch_kernel<true>
        <<<dim3(lc.grid.x, lc.grid.y, lc.grid.z), dim3(lc.block.x, lc.block.y, lc.block.z), 0, stream>>>(b, partial,
                                                                                                         n_chunks);
    CC_CUDA_CHECK_LAUNCH("attn_combine_batch_kernel");
}

}  // namespace

void attention_mma_batch(std::span<const AttnArgs> seqs, float* partial, size_t partial_floats, cudaStream_t stream) {
    std::vector<int> rows;
    for (const AttnArgs& a : seqs) {
        if (a.n_heads != seqs[0].n_heads || a.n_kv_heads != seqs[0].n_kv_heads || a.head_dim != seqs[0].head_dim ||
            a.window != seqs[0].window || a.kv_bf16 != seqs[0].kv_bf16 || a.scale != seqs[0].scale)
            throw CudaError("attention (mma batch): the sequences differ in heads, head_dim, window or KV width");
        check_aligned(a);
        rows.push_back(a.n_rows);
    }
    for (const auto& [begin, end] : geom::attn_mma_batches(rows)) {
        AttnBatch b;
        for (int i = begin; i < end; ++i) b.add(seqs[size_t(i)]);
        b.pair_blocks = geom::attn_mma_pair_blocks(b.max_rows, b.seq[0].n_heads, b.seq[0].n_kv_heads);
        switch (b.seq[0].head_dim) {
            case 32:
                launch_batch<32>(b, partial, partial_floats, stream);
                break;
            case 64:
                launch_batch<64>(b, partial, partial_floats, stream);
                break;
            case 128:
                launch_batch<128>(b, partial, partial_floats, stream);
                break;
            default:
                throw CudaError("attention (mma batch): head_dim " + std::to_string(b.seq[0].head_dim) +
                                " is not built");
        }
    }
}

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
