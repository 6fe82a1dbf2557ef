// The attention kernels' arguments, as plain C++ (no CUDA types), so that the kernels' code can
// also be compiled for the CPU: tests/cuda/test_attention_mma_emulated.cpp runs it there.
#pragma once

#include <cstdint>

namespace cc::cuda::kern {

// Attention over the two-segment view (DESIGN §6): positions [0, seg[0].n) in seg[0] (the prefix
// block), then [seg[0].n, seg[0].n + seg[1].n) in seg[1] (the suffix block). Row r is the query at
// position first_pos + r and sees keys j with first_key(pos) <= j <= pos.
struct AttnSeg {
    const void* k = nullptr;  // [n_kv_heads][cap][head_dim], f32 or bf16
    const void* v = nullptr;
    int cap = 0;
    int n = 0;
};
// scalar: f32 fmaf chains (the verified kernels, the default). mma: tensor cores, bf16 operands
// (q, k, v and the probabilities rounded to bf16), f32 accumulation (attention_mma_kernels.cuh); another
// numerics, so cuda_numerics_id names it. Not yet run on a device (issue 34): opt-in only.
enum class AttnKernel { scalar, mma };

struct AttnArgs {
    AttnKernel kernel = AttnKernel::scalar;
    AttnSeg seg[2];
    bool kv_bf16 = false;
    int n_heads = 0, n_kv_heads = 0, head_dim = 0;
    int window = 0;  // sliding window (0 = none)
    float scale = 1.0f;
    const float* q = nullptr;  // (n_rows, n_heads * head_dim) f32
    int n_rows = 0;
    int first_pos = 0;
    float* out = nullptr;  // (n_rows, n_heads * head_dim) f32
    // When set, the output goes here instead, each value rounded to bf16 (km::f32_to_bf16 of what
    // `out` would hold): o_proj's input without a conversion launch (CudaBackendOptions::fused_kernels).
    uint16_t* out_bf16 = nullptr;
};
// tiled and split give the same bits (chunks merged in the same order); automatic picks by rows.
enum class AttnPath { automatic, tiled, split };

// Several sequences' split launches of the mma kernel in one launch (a decode step of many
// sequences): each sequence with its own view, rows, positions, queries and outputs; the same
// heads, head_dim, KV width and window for all. Sequence i's partial states start at row
// partial_row0[i] of the scratch ([row][head][chunk][head_dim + 2], one n_chunks for all).
inline constexpr int kAttnBatchMaxSeqs = 16;
struct AttnBatch {
    AttnArgs seq[kAttnBatchMaxSeqs];
    int partial_row0[kAttnBatchMaxSeqs] = {};
    int n_seqs = 0;
    int pair_blocks = 1;                                  // blocks of pairs per sequence: grid.z = n_seqs * pair_blocks
    int max_rows = 0, total_rows = 0, max_positions = 0;  // what the launch is sized for

    // Appends a sequence (the caller keeps to kAttnBatchMaxSeqs and 32 rows: geom::attn_mma_batches).
    void add(const AttnArgs& a) {
        seq[n_seqs] = a;
        partial_row0[n_seqs] = total_rows;
        ++n_seqs;
        max_rows = max_rows > a.n_rows ? max_rows : a.n_rows;
        total_rows += a.n_rows;
        max_positions = max_positions > a.first_pos + a.n_rows ? max_positions : a.first_pos + a.n_rows;
    }
};

}  // namespace cc::cuda::kern
