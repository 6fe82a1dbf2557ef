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

// One launch of the split kernel and one of the combine for every sequence of `b`, its views from
// the launch's arguments, or (tables: graph replay) from tables[layer] on the device, which holds
// what `b` holds when the launch runs, with the grid and scratch sized for `positions`.
template <int HD>
void launch_batch(const AttnBatch& b, const AttnBatch* tables, int layer, int positions, float* partial,
                  size_t partial_floats, cudaStream_t stream) {
    const AttnArgs& a0 = b.seq[0];
    if (positions < b.max_positions) throw CudaError("attention (mma batch): the launch is sized for fewer positions");
    const geom::Launch l =
        geom::attn_mma_batch(b.n_seqs, b.max_rows, b.total_rows, a0.n_heads, a0.n_kv_heads, HD, positions);
    const size_t need = geom::attn_partial_floats(b.total_rows, a0.n_heads, HD, positions);
    if (partial == nullptr || partial_floats < need)
        throw CudaError("attention (mma batch): split scratch holds " + std::to_string(partial_floats) + " floats, " +
                        std::to_string(need) + " needed");
    const void* kernel = tables != nullptr ? reinterpret_cast<const void*>(detail::attn_mma_batch_table_kernel<HD>)
                                           : reinterpret_cast<const void*>(detail::attn_mma_batch_kernel<HD>);
    if (l.smem_bytes > geom::kSmemDefaultBytes)
        CC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(l.smem_bytes)));
    const int n_chunks = int(l.grid.x);
    const dim3 grid(l.grid.x, l.grid.y, l.grid.z), block(l.block.x, l.block.y, l.block.z);
    const geom::Launch lc = geom::attn_combine_batch(b.n_seqs, b.max_rows, a0.n_heads, HD);
    const dim3 grid_c(lc.grid.x, lc.grid.y, lc.grid.z), block_c(lc.block.x, lc.block.y, lc.block.z);
    if (tables != nullptr) {
        detail::attn_mma_batch_table_kernel<HD>
            <<<grid, block, l.smem_bytes, stream>>>(tables, layer, partial, n_chunks);
        CC_CUDA_CHECK_LAUNCH("attn_mma_batch_table_kernel");
        detail::attn_combine_batch_table_kernel<true><<<grid_c, block_c, 0, stream>>>(tables, layer, partial, n_chunks);
        CC_CUDA_CHECK_LAUNCH("attn_combine_batch_table_kernel");
        return;
    }
    detail::attn_mma_batch_kernel<HD><<<grid, block, l.smem_bytes, stream>>>(b, partial, n_chunks);
    CC_CUDA_CHECK_LAUNCH("attn_mma_batch_kernel");
    detail::attn_combine_batch_kernel<true><<<grid_c, block_c, 0, stream>>>(b, partial, n_chunks);
    CC_CUDA_CHECK_LAUNCH("attn_combine_batch_kernel");
}

void launch_batch_hd(const AttnBatch& b, const AttnBatch* tables, int layer, int positions, float* partial,
                     size_t partial_floats, cudaStream_t stream) {
    switch (b.seq[0].head_dim) {
        case 32:
            return launch_batch<32>(b, tables, layer, positions, partial, partial_floats, stream);
        case 64:
            return launch_batch<64>(b, tables, layer, positions, partial, partial_floats, stream);
        case 128:
            return launch_batch<128>(b, tables, layer, positions, partial, partial_floats, stream);
        default:
            throw CudaError("attention (mma batch): head_dim " + std::to_string(b.seq[0].head_dim) + " is not built");
    }
}

}  // namespace

AttnBatch attn_mma_batch_of(std::span<const AttnArgs> seqs) {
    if (seqs.empty() || seqs.size() > size_t(kAttnBatchMaxSeqs))
        throw CudaError("attention (mma batch): 1 to " + std::to_string(kAttnBatchMaxSeqs) + " sequences");
    AttnBatch b;
    for (const AttnArgs& a : seqs) {
        if (a.n_heads != seqs[0].n_heads || a.n_kv_heads != seqs[0].n_kv_heads || a.head_dim != seqs[0].head_dim ||
            a.window != seqs[0].window || a.kv_bf16 != seqs[0].kv_bf16 || a.scale != seqs[0].scale)
            throw CudaError("attention (mma batch): the sequences differ in heads, head_dim, window or KV width");
        if (a.n_rows < 1 || b.total_rows + a.n_rows > geom::kAttnMmaSplitMaxRows)
            throw CudaError("attention (mma batch): 1 to 32 rows a sequence, 32 in all");
        if (a.first_pos + a.n_rows > a.seg[0].n + a.seg[1].n)
            throw CudaError("attention (mma batch): rows past the view's " + std::to_string(a.seg[0].n + a.seg[1].n) +
                            " positions");
        check_aligned(a);
        b.add(a);
    }
    b.pair_blocks = geom::attn_mma_pair_blocks(b.max_rows, b.seq[0].n_heads, b.seq[0].n_kv_heads);
    return b;
}

void attention_mma_batch(std::span<const AttnArgs> seqs, float* partial, size_t partial_floats, cudaStream_t stream) {
    std::vector<int> rows;
    for (const AttnArgs& a : seqs) rows.push_back(a.n_rows);
    for (const auto& [begin, end] : geom::attn_mma_batches(rows)) {
        const AttnBatch b = attn_mma_batch_of(seqs.subspan(size_t(begin), size_t(end - begin)));
        launch_batch_hd(b, nullptr, 0, b.max_positions, partial, partial_floats, stream);
    }
}

void attention_mma_batch_table(const AttnBatch& b, const AttnBatch* tables, int layer, int positions, float* partial,
                               size_t partial_floats, cudaStream_t stream) {
    if (tables == nullptr) throw CudaError("attention (mma batch table): no tables");
    launch_batch_hd(b, tables, layer, positions, partial, partial_floats, stream);
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
