// Launchers of our CUDA kernels (internal to cuda/; CUDA types appear here). Each launcher takes
// its grid/block/shared-memory sizes from cuda/launch_geometry.h and checks the launch.
//
// Per-element arithmetic goes through core/base/kernel_math.h (km::), shared with the CPU backend, and
// cuda/ is compiled with --fmad=false: an `a * b + c` is never fused behind our back, so the same
// formula gives the same bits in every kernel that uses it (FMAs we want are written as fmaf).
#pragma once

#include "cuda/attention_args.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace cc::cuda::kern {

// x[r][i] = table[tokens[r]][i] widened to f32. table: (vocab, dim) bf16; x: (n_rows, dim) f32.
void embed(const uint16_t* table, const int32_t* tokens, float* x, int n_rows, int dim, cudaStream_t stream);

// y[r] = rmsnorm(x[rows ? rows[r] : r]) * w over dim elements; y: (n_rows, dim), bf16 or f32.
void rmsnorm(const float* x, const int32_t* rows, const float* w, void* y, bool y_bf16, int n_rows, int dim, float eps,
             cudaStream_t stream);

// x[r] += y[r], then out[r] = bf16(rmsnorm(x[r]) * w), for rows [0, n_rows): the bits of add_inplace
// followed by rmsnorm(..., y_bf16 = true) in one launch (cuda/row_kernels.cuh).
void add_rmsnorm(float* x, const float* y, const float* w, uint16_t* out, int n_rows, int dim, float eps,
                 cudaStream_t stream);

void f32_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);
void bf16_to_f32(const uint16_t* x, float* y, int64_t n, cudaStream_t stream);
void add_inplace(float* x, const float* y, int64_t n, cudaStream_t stream);                      // x += y
// x[r][i] += bias[i] for each of n_rows rows of n_cols (q/k/v/o_proj biases after their GEMM).
void add_bias_rows(float* x, const float* bias, int n_rows, int n_cols, cudaStream_t stream);
void swiglu(const float* gate, const float* up, uint16_t* out, int64_t n, cudaStream_t stream);  // bf16(silu(g) * u)

// Per row: Qwen3 q/k RMSNorm per head (when q_norm/k_norm are set), RoPE on q and k, then this
// row's K and V into the KV block at slot first_slot + row.
struct QkRopeArgs {
    float* q = nullptr;        // (n_rows, n_heads * head_dim) f32, in place
    float* k = nullptr;        // (n_rows, n_kv_heads * head_dim) f32, in place
    const float* v = nullptr;  // (n_rows, n_kv_heads * head_dim) f32
    int n_rows = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    const float* q_norm = nullptr;  // (head_dim) or null
    const float* k_norm = nullptr;  // (head_dim) or null
    float eps = 0;
    const float* cos_t = nullptr;  // (table positions, head_dim / 2)
    const float* sin_t = nullptr;
    int first_pos = 0;     // position of row 0 (row r uses table row first_pos + r)
    void* kv_k = nullptr;  // this layer's K in the block: [n_kv_heads][kv_cap][head_dim]
    void* kv_v = nullptr;  // this layer's V, same layout
    int kv_cap = 0;
    int first_slot = 0;  // block slot of row 0
    bool kv_bf16 = false;
};
void qk_rope_store(const QkRopeArgs& args, cudaStream_t stream);
// The same for rows of several sequences in one launch (a multi-sequence step): row r's position,
// slot and KV block come from rows[r] (device memory), its block's parts for `layer` at
// base + (2 * layer) * part_bytes (K) and base + (2 * layer + 1) * part_bytes (V); args' first_pos,
// kv_k, kv_v, kv_cap and first_slot are not used.
struct RopeRow {
    std::byte* base = nullptr;  // the block's memory: per layer K then V, each part_bytes
    size_t part_bytes = 0;
    int cap = 0;   // the block's positions per head
    int slot = 0;  // the row's slot in the block
    int pos = 0;   // the row's position (RoPE table row)
};
void qk_rope_store_rows(const QkRopeArgs& args, const RopeRow* rows, int layer, cudaStream_t stream);

// `partial`: scratch for the split path, geom::attn_partial_floats(n_rows, ...) floats. With
// AttnKernel::mma and a head_dim that geom::attn_mma_head_dim_ok refuses, the scalar kernel runs.
void attention(const AttnArgs& args, float* partial, size_t partial_floats, AttnPath path, cudaStream_t stream);
// The attention of several sequences (a step's pieces, each its own view), AttnPath::automatic:
// with AttnKernel::mma the sequences that take the split launch share launches
// (attention_mma_batch); every other sequence, and the scalar kernels, one attention() each.
void attention_batch(std::span<const AttnArgs> seqs, float* partial, size_t partial_floats, cudaStream_t stream);

// out[r] = the index of the largest logit of row r (the lowest index among equal maxima; never a
// NaN's; 0 for a row of NaN): km::argmax_row's pick.
void argmax_rows(const float* logits, int n_rows, int vocab, int32_t* out, cudaStream_t stream);
// out[r] = a sample of softmax(logits[r] / temperature) by Gumbel-max with km::uniform01(seed,
// step, r * vocab + i); deterministic for a given (seed, step).
void sample_rows(const float* logits, int n_rows, int vocab, float temperature, uint64_t seed, uint64_t step,
                 int32_t* out, cudaStream_t stream);

}  // namespace cc::cuda::kern
