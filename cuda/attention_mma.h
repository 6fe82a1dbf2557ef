// Internal to cuda/: the tensor-core attention (attention_mma.cu) and the combine of split partial
// states that it shares with the scalar kernels (kernels.cu).
#pragma once

#include "cuda/kernels.h"

#include <cstddef>
#include <span>

namespace cc::cuda::kern {

// AttnKernel::mma for a head_dim that geom::attn_mma_head_dim_ok accepts: the tiled launch (each
// block merges its chunks in order) or the split launch (one block per chunk writes its partial
// state, then combine_partials); the two give the same bits.
void attention_mma(const AttnArgs& a, float* partial, size_t partial_floats, bool split, cudaStream_t stream);

// Several sequences' split launches (each at most 32 rows, head_dim 32, 64 or 128) in as few launches
// as fit kern::AttnBatch: every sequence gets the bits of its own split launch. `partial` holds the
// partial states of up to geom::kAttnMmaSplitMaxRows rows over the longest view.
void attention_mma_batch(std::span<const AttnArgs> seqs, float* partial, size_t partial_floats, cudaStream_t stream);

// The batch of one launch (what attention_mma_batch launches for each run of geom::attn_mma_batches):
// 1 to 16 sequences of 1 to 32 rows, 32 in all, with the same heads, head_dim, window and KV width,
// their rows inside their views and K/V blocks 16-byte aligned; throws CudaError otherwise.
AttnBatch attn_mma_batch_of(std::span<const AttnArgs> seqs);

// attention_mma_batch's launches for graph replay (CudaBackendOptions::graph_replay): the kernels
// read the batch from tables[layer] (device memory) when they run, so a captured graph serves
// every step whose batch has `b`'s shape (sequences and rows) and at most `positions` positions
// (geom::graph_positions_bucket); `b` (the host's copy) gives the launch's shape. The same bits as
// attention_mma_batch on the same batch.
void attention_mma_batch_table(const AttnBatch& b, const AttnBatch* tables, int layer, int positions, float* partial,
                               size_t partial_floats, cudaStream_t stream);

// out[row][head] = the partial states of the row's chunks (partial[row][head][chunk] = m, l,
// acc[head_dim]) merged in chunk order with km::softmax_merge, divided by l. canonical_zero: + 0.0f
// on each output, as the mma kernel's tiled launch writes it.
void combine_partials(const AttnArgs& a, const float* partial, int n_chunks, bool canonical_zero, cudaStream_t stream);

}  // namespace cc::cuda::kern
