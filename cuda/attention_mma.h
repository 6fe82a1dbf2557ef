// Internal to cuda/: the tensor-core attention (attention_mma.cu) and the combine of split partial
// states that it shares with the scalar kernels (kernels.cu).
#pragma once

#include "cuda/kernels.h"

#include <cstddef>

namespace cc::cuda::kern {

// AttnKernel::mma for a head_dim that geom::attn_mma_head_dim_ok accepts: the tiled launch (each
// block merges its chunks in order) or the split launch (one block per chunk writes its partial
// state, then combine_partials); the two give the same bits.
void attention_mma(const AttnArgs& a, float* partial, size_t partial_floats, bool split, cudaStream_t stream);

// out[row][head] = the partial states of the row's chunks (partial[row][head][chunk] = m, l,
// acc[head_dim]) merged in chunk order with km::softmax_merge, divided by l. canonical_zero: + 0.0f
// on each output, as the mma kernel's tiled launch writes it.
void combine_partials(const AttnArgs& a, const float* partial, int n_chunks, bool canonical_zero, cudaStream_t stream);

}  // namespace cc::cuda::kern
