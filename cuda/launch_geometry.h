// Launch geometry of every CUDA kernel, as plain C++ (no CUDA types), so it is unit-tested on the
// CPU (tests/cuda/test_launch_geometry.cpp) and every launcher in cuda/kernels.cu uses it.
//
// The attention constants here are part of the numerics (DESIGN §6, README "CUDA backend"):
// keys are visited in tiles of kAttnKeyTile positions and grouped in chunks of kAttnChunk
// positions, both aligned to ABSOLUTE positions 0, T, 2T, ... of the logical sequence
// [prefix | suffix]. A query's result then depends only on its position and the key values, never
// on where the prefix ends, how many rows share the launch or which kernel (tiled or split) ran.
// Changing any of these constants changes the bits: it must change cuda_numerics_id too.
#pragma once

#include "core/base/kernel_math.h"  // CC_HD: the position rules below are used by the kernels too
#include "core/model/model_config.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cc::cuda::geom {

struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
};
struct Launch {
    Dim3 grid;
    Dim3 block;
    size_t smem_bytes = 0;  // dynamic shared memory
};

// CUDA limits (compute capability 8.0 and 9.0).
inline constexpr uint64_t kMaxGridX = 2147483647u;
inline constexpr uint64_t kMaxGridYZ = 65535u;
inline constexpr unsigned kMaxBlockThreads = 1024;
inline constexpr size_t kSmemDefaultBytes = 48 * 1024;  // without cudaFuncAttributeMaxDynamicSharedMemorySize
inline constexpr size_t kSmemOptinSm80Bytes = 166912;   // 163 KiB per block on sm_80
inline constexpr size_t kSmemOptinSm90Bytes = 232448;   // 227 KiB per block on sm_90
// What our kernels may ask for: the smaller of the two, so one build runs on both.
inline constexpr size_t kSmemMaxBytes = kSmemOptinSm80Bytes;

// ---- attention numerics constants -----------------------------------------------------------------
inline constexpr int kAttnKeyTile = 32;       // keys per tile, tiles start at multiples of 32
inline constexpr int kAttnChunk = 256;        // keys per chunk (8 tiles), chunks start at multiples of 256
inline constexpr int kAttnRowsPerBlock = 16;  // query rows per block in the tiled (prefill) kernel
inline constexpr int kAttnThreads = 128;
inline constexpr int kAttnSplitMaxRows = 4;  // batches of at most this many rows use the split kernel
inline constexpr int kMaxHeadDim = 256;
static_assert(kAttnChunk % kAttnKeyTile == 0, "a chunk is whole tiles");

inline void require(bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("cuda launch geometry: " + what);
}

inline uint64_t ceil_div(uint64_t a, uint64_t b) {
    return (a + b - 1) / b;
}

inline void check_grid(const Launch& l, const char* kernel) {
    require(l.grid.x >= 1 && l.grid.x <= kMaxGridX, std::string(kernel) + ": grid.x out of range");
    require(l.grid.y >= 1 && l.grid.y <= kMaxGridYZ, std::string(kernel) + ": grid.y out of range");
    require(l.grid.z >= 1 && l.grid.z <= kMaxGridYZ, std::string(kernel) + ": grid.z out of range");
    require(uint64_t(l.block.x) * l.block.y * l.block.z <= kMaxBlockThreads,
            std::string(kernel) + ": too many threads");
    require(l.smem_bytes <= kSmemMaxBytes, std::string(kernel) + ": shared memory " + std::to_string(l.smem_bytes) +
                                               " bytes exceeds " + std::to_string(kSmemMaxBytes));
}

// First key position a query at `pos` sees: key j is seen iff first_key <= j <= pos.
CC_HD inline int attn_first_key(int pos, int window) {
    const int lo = pos - window + 1;
    return window > 0 && lo > 0 ? lo : 0;
}
CC_HD inline int attn_chunk_of(int pos) {
    return pos / kAttnChunk;
}
// Chunks covering positions [0, n_positions).
inline int attn_n_chunks(int n_positions) {
    return int(ceil_div(uint64_t(std::max(n_positions, 1)), kAttnChunk));
}
// Chunk c covers positions [attn_chunk_begin(c), attn_chunk_begin(c) + kAttnChunk): aligned to 0.
inline int64_t attn_chunk_begin(int c) {
    return int64_t(c) * kAttnChunk;
}

// Shared memory of one attention block holding `rows` query rows:
//   q      [rows][head_dim]              the rows' queries (f32)
//   k      [kAttnKeyTile][head_dim + 1]  one key tile (padded: threads reading one key each hit different banks)
//   v      [kAttnKeyTile][head_dim]
//   p      [rows][kAttnKeyTile]          scores, then probabilities
//   acc_c  [rows][head_dim]              this chunk's weighted V sum
//   acc_t  [rows][head_dim]              the merged total (tiled kernel only)
//   state  [rows][8]                     m, l of chunk and total, rescale factors, flags
inline size_t attn_smem_bytes(int rows, int head_dim, bool with_total) {
    const size_t r = size_t(rows), d = size_t(head_dim), kt = size_t(kAttnKeyTile);
    const size_t floats = r * d + kt * (d + 1) + kt * d + r * kt + r * d + (with_total ? r * d : 0) + r * 8;
    return floats * sizeof(float);
}

inline void check_attention_shape(int n_heads, int n_kv_heads, int head_dim) {
    require(n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0,
            "attention: n_heads must be a multiple of n_kv_heads");
    require(head_dim > 0 && head_dim <= kMaxHeadDim && head_dim % 2 == 0,
            "attention: head_dim must be even and <= 256");
    require(uint64_t(n_heads) <= kMaxGridYZ, "attention: too many heads");
}

// Tiled kernel: one block per (16 query rows, head); it walks the chunks itself.
inline Launch attn_tiled(int n_rows, int n_heads, int n_kv_heads, int head_dim) {
    check_attention_shape(n_heads, n_kv_heads, head_dim);
    require(n_rows >= 1, "attention: no rows");
    Launch l;
    l.grid = {unsigned(ceil_div(uint64_t(n_rows), kAttnRowsPerBlock)), unsigned(n_heads), 1};
    l.block = {kAttnThreads, 1, 1};
    l.smem_bytes = attn_smem_bytes(kAttnRowsPerBlock, head_dim, true);
    check_grid(l, "attention_tiled");
    return l;
}

inline bool attn_use_split(int n_rows) {
    return n_rows <= kAttnSplitMaxRows;
}

// Split kernel: one block per (chunk, head, row), each writes a partial state; then the combine.
inline Launch attn_split(int n_rows, int n_heads, int n_kv_heads, int head_dim, int n_positions) {
    check_attention_shape(n_heads, n_kv_heads, head_dim);
    require(n_rows >= 1 && n_rows <= kAttnSplitMaxRows, "attention split: 1 to 4 rows");
    Launch l;
    l.grid = {unsigned(attn_n_chunks(n_positions)), unsigned(n_heads), unsigned(n_rows)};
    l.block = {kAttnThreads, 1, 1};
    l.smem_bytes = attn_smem_bytes(1, head_dim, false);
    check_grid(l, "attention_split");
    return l;
}
// ---- tensor-core attention (AttnKernel::mma; issue 34, not yet run on a device) ------------------
// The same chunks of kAttnChunk absolute positions and the same merge in chunk order as the scalar
// kernels, so its tiled and split launches give the same bits; inside a chunk, keys in tiles of
// kAttnMmaKeyTile absolute positions, QK^T and P.V as bf16 mma.sync m16n8k16 with f32 accumulation.
// A warp holds 16 (row, head) pairs of one KV head (GQA packing: pair p is row p / G, head
// kv_head * G + p % G); a block holds kAttnMmaWarps warps and shares one K/V tile among them.
inline constexpr int kAttnMmaKeyTile = 64;
inline constexpr int kAttnMmaWarps = 4;
inline constexpr int kAttnMmaPairsPerBlock = 16 * kAttnMmaWarps;
inline constexpr int kAttnMmaSplitMaxRows = 32;  // batches of at most this many rows use the split launch
static_assert(kAttnChunk % kAttnMmaKeyTile == 0, "a chunk is whole mma tiles");

// Head dims the mma kernel is built for (its accumulators live in registers); others use the
// scalar kernels.
CC_HD inline bool attn_mma_head_dim_ok(int head_dim) {
    return head_dim == 32 || head_dim == 64 || head_dim == 128;
}
inline bool attn_mma_use_split(int n_rows) {
    return n_rows <= kAttnMmaSplitMaxRows;
}
// Rows the split scratch must hold: the most rows either kernel runs through its split launch.
inline int attn_split_rows(bool mma) {
    return mma ? kAttnMmaSplitMaxRows : kAttnSplitMaxRows;
}
// Shared memory (bf16): queries [pairs][hd + 8], one key tile [tile][hd + 8], the value tile
// transposed [hd][tile + 8]; the padding puts a warp's 32-bit fragment loads in 32 banks.
inline size_t attn_mma_smem_bytes(int head_dim) {
    const size_t d = size_t(head_dim), kt = size_t(kAttnMmaKeyTile), pairs = size_t(kAttnMmaPairsPerBlock);
    return (pairs * (d + 8) + kt * (d + 8) + d * (kt + 8)) * 2;
}
// grid = (chunks for the split launch else 1, KV heads, blocks of pairs); 32 * kAttnMmaWarps threads.
inline Launch attn_mma(int n_rows, int n_heads, int n_kv_heads, int head_dim, int n_positions, bool split) {
    check_attention_shape(n_heads, n_kv_heads, head_dim);
    require(attn_mma_head_dim_ok(head_dim), "attention mma: head_dim must be 32, 64 or 128");
    require(n_rows >= 1, "attention: no rows");
    require(!split || n_rows <= kAttnMmaSplitMaxRows, "attention mma split: 1 to 32 rows");
    const uint64_t pairs = uint64_t(n_rows) * uint64_t(n_heads / n_kv_heads);
    Launch l;
    l.grid = {split ? unsigned(attn_n_chunks(n_positions)) : 1u, unsigned(n_kv_heads),
              unsigned(std::min<uint64_t>(ceil_div(pairs, kAttnMmaPairsPerBlock), kMaxGridYZ + 1))};
    l.block = {32 * kAttnMmaWarps, 1, 1};
    l.smem_bytes = attn_mma_smem_bytes(head_dim);
    check_grid(l, "attention_mma");
    return l;
}

// Partial states of the split kernel: [n_rows][n_heads][n_chunks][head_dim + 2] floats (m, l, acc).
inline size_t attn_partial_floats(int n_rows, int n_heads, int head_dim, int n_positions) {
    return size_t(n_rows) * size_t(n_heads) * size_t(attn_n_chunks(n_positions)) * (size_t(head_dim) + 2);
}
inline Launch attn_combine(int n_rows, int n_heads, int head_dim) {
    Launch l;
    l.grid = {unsigned(n_heads), unsigned(n_rows), 1};
    l.block = {unsigned(std::min(256, int(ceil_div(uint64_t(head_dim), 32)) * 32)), 1, 1};
    check_grid(l, "attention_combine");
    return l;
}

// Several sequences' split launches in one (kern::AttnBatch): grid = (the chunks of the longest view,
// KV heads, sequences x the blocks of pairs of the sequence with the most rows). Sequences: at most
// kAttnBatchMaxSeqs (attention_args.h), their rows together at most kAttnMmaSplitMaxRows.
inline int attn_mma_pair_blocks(int n_rows, int n_heads, int n_kv_heads) {
    return int(ceil_div(uint64_t(n_rows) * uint64_t(n_heads / n_kv_heads), kAttnMmaPairsPerBlock));
}
inline Launch attn_mma_batch(int n_seqs, int max_rows, int total_rows, int n_heads, int n_kv_heads, int head_dim,
                             int max_positions) {
    require(n_seqs >= 1 && n_seqs <= 16, "attention mma batch: 1 to 16 sequences");
    require(total_rows <= kAttnMmaSplitMaxRows, "attention mma batch: at most 32 rows in all");
    Launch l = attn_mma(max_rows, n_heads, n_kv_heads, head_dim, max_positions, true);
    l.grid.z = unsigned(n_seqs * attn_mma_pair_blocks(max_rows, n_heads, n_kv_heads));
    check_grid(l, "attention_mma_batch");
    return l;
}
// The sequences (each 1 to kAttnMmaSplitMaxRows rows, in order) cut into consecutive runs that
// share one batch launch: at most 16 sequences and kAttnMmaSplitMaxRows rows each. [begin, end).
inline std::vector<std::pair<int, int>> attn_mma_batches(const std::vector<int>& rows) {
    std::vector<std::pair<int, int>> out;
    int total = 0;
    for (int i = 0; i < int(rows.size()); ++i) {
        require(rows[size_t(i)] >= 1 && rows[size_t(i)] <= kAttnMmaSplitMaxRows,
                "attention mma batch: a sequence must have 1 to 32 rows");
        if (out.empty() || out.back().second - out.back().first == 16 || total + rows[size_t(i)] > kAttnMmaSplitMaxRows) {
            out.push_back({i, i});
            total = 0;
        }
        ++out.back().second;
        total += rows[size_t(i)];
    }
    return out;
}
inline Launch attn_combine_batch(int n_seqs, int max_rows, int n_heads, int head_dim) {
    Launch l = attn_combine(max_rows, n_heads, head_dim);
    l.grid.z = unsigned(n_seqs);
    check_grid(l, "attention_combine_batch");
    return l;
}

// ---- row kernels ---------------------------------------------------------------------------------
inline constexpr unsigned kRowThreads = 256;  // RMSNorm / embedding / argmax: one block per row

// RMSNorm, one block per row: each thread sums a strided slice in index order, then a fixed tree
// over kRowThreads partial sums in shared memory (the same order for every row and batch).
inline Launch row_blocks(int n_rows) {
    require(n_rows >= 1, "row kernel: no rows");
    Launch l;
    l.grid = {unsigned(n_rows), 1, 1};
    l.block = {kRowThreads, 1, 1};
    l.smem_bytes = kRowThreads * sizeof(float);
    check_grid(l, "row");
    return l;
}

// argmax / sampling, one block per row: a strided (value, index) per thread, then a fixed tree
// over the kRowThreads pairs in shared memory (the values, then the indices).
inline Launch argmax_blocks(int n_rows) {
    Launch l = row_blocks(n_rows);
    l.smem_bytes = kRowThreads * (sizeof(float) + sizeof(int32_t));
    return l;
}

// Q/K norm + RoPE + KV store: one block per row, one warp per head (warps loop over heads).
inline constexpr unsigned kHeadWarps = 8;
inline Launch heads_per_row(int n_rows, int head_dim) {
    require(n_rows >= 1, "qk/rope: no rows");
    require(head_dim > 0 && head_dim <= kMaxHeadDim && head_dim % 2 == 0, "qk/rope: head_dim must be even and <= 256");
    Launch l;
    l.grid = {unsigned(n_rows), 1, 1};
    l.block = {32 * kHeadWarps, 1, 1};
    check_grid(l, "qk_rope");
    return l;
}

// Elementwise kernels: grid-stride loops, at most 65535 * 16 blocks of 256.
inline constexpr unsigned kElemThreads = 256;
inline Launch elementwise(int64_t n) {
    require(n >= 1, "elementwise: no elements");
    Launch l;
    l.grid = {unsigned(std::min<uint64_t>(ceil_div(uint64_t(n), kElemThreads), 65535u * 16u)), 1, 1};
    l.block = {kElemThreads, 1, 1};
    check_grid(l, "elementwise");
    return l;
}

// ---- fallback GEMM (used only when cuBLASLt offers no batch-invariant algorithm) -------------------
// Block = 64 x 64 outputs, 16 x 16 threads of 4 x 4 outputs each; K in steps of 16 through shared
// memory. Each output is one fmaf chain over k = 0..K-1: batch-invariant by construction.
inline constexpr int kGemmTile = 64;
inline constexpr int kGemmKStep = 16;
inline Launch gemm_fallback(int m, int n) {
    require(m >= 1 && n >= 1, "gemm: empty output");
    Launch l;
    l.grid = {unsigned(ceil_div(uint64_t(n), kGemmTile)), unsigned(ceil_div(uint64_t(m), kGemmTile)), 1};
    l.block = {16, 16, 1};
    check_grid(l, "gemm_fallback");
    return l;
}

// ---- our own tensor-core GEMM family (CudaBackendOptions::own_gemm, cuda/gemm_mma_kernels.cuh) ----
// Every output is one chain of mma.sync m16n8k16 over K in ascending steps of 16 from +0, in both
// kernels, so a row gets the same bits from either, whatever the row count:
//   rows:  m <= kGemmRowsMax (decode steps, small chunks): a warp per 8 outputs of n, reading its
//          8 weight rows once for every m-tile (the weights streamed at the memory bandwidth);
//   tiled: larger m (prefill): blocks of kGemmMmaTile columns of n and kGemmMmaTile rows (or
//          kGemmMmaTileHalf, where blocks of 128 rows would leave SMs idle), 4 warps of 64 x 64 (or
//          32 x 64), K through a pipeline of kGemmMmaStages shared-memory tiles of kGemmMmaKTile
//          (cp.async). A block's height changes how the outputs are shared out, not a chain.
inline constexpr int kGemmRowsMax = 64;        // 4 m-tiles of 16
inline constexpr int kGemmRowsWarps = 4;       // warps per block of the rows kernel
inline constexpr int kGemmRowsBatch = 8;       // rows kernel: weight loads a lane issues together (k16 steps)...
inline constexpr int kGemmRowsBatchDeep = 16;  // ... or this many, where few warps share the device (below)
inline constexpr int kGemmRowsDeepWarpsPerSm = 8;
inline constexpr int kGemmMmaTile = 128;       // tiled kernel: 128 x 128 outputs per block
inline constexpr int kGemmMmaTileHalf = 64;    // ... or 64 x 128 where the grid is small
inline constexpr int kGemmMmaBlocksPerSm = 2;  // 128-row blocks an SM holds (64 KiB, 227 registers each)
inline constexpr int kGemmMmaKTile = 32;       // two k16 steps per shared-memory tile (64-byte rows)
inline constexpr int kGemmMmaStages = 4;       // tiles in flight: three being copied while one is used
inline constexpr int kGemmMmaThreads = 128;
inline bool gemm_mma_shape_ok(int n, int k) {
    return n >= 1 && k >= 16 && k % 16 == 0;
}
inline Launch gemm_mma_rows(int m, int n) {
    require(m >= 1 && m <= kGemmRowsMax && n >= 1,
            "gemm (rows kernel): m must be 1.." + std::to_string(kGemmRowsMax) + " and n >= 1");
    Launch l;
    l.grid = {unsigned(ceil_div(uint64_t(n), 8 * kGemmRowsWarps)), 1, 1};
    l.block = {32 * kGemmRowsWarps, 1, 1};
    check_grid(l, "gemm_mma_rows");
    return l;
}
inline Launch gemm_mma_tiled(int m, int n, int block_rows = kGemmMmaTile) {
    require(m >= 1 && n >= 1, "gemm (tiled kernel): empty output");
    require(block_rows == kGemmMmaTile || block_rows == kGemmMmaTileHalf,
            "gemm (tiled kernel): blocks of 128 or 64 rows");
    Launch l;
    l.grid = {unsigned(ceil_div(uint64_t(n), kGemmMmaTile)), unsigned(ceil_div(uint64_t(m), block_rows)), 1};
    l.block = {kGemmMmaThreads, 1, 1};
    // every stage holds an X tile of block_rows rows and a W tile of kGemmMmaTile rows, each row
    // kGemmMmaKTile bf16 (64 KiB for 128-row blocks, 48 KiB for 64-row ones)
    l.smem_bytes = size_t(kGemmMmaStages) * size_t(block_rows + kGemmMmaTile) * kGemmMmaKTile * 2;
    check_grid(l, "gemm_mma_tiled");
    return l;
}

// The rows kernel is bound by reading the weights, and a warp owns 8 outputs of n: a launch for
// n = 4096 (o_proj, down_proj of the 8B shape) has 512 warps, under 4 an SM. With batches of
// kGemmRowsBatch 8-byte loads, two deep, an SM then has at most 4 x 32 x 16 x 8 = 16 KiB of loads in
// flight, while 3.35 TB/s at ~0.7 us of latency wants about 18 KiB an SM (Little's law). So where a
// launch has fewer than kGemmRowsDeepWarpsPerSm warps an SM, its lanes load kGemmRowsBatchDeep steps
// at a time (twice the bytes in flight, 32 more registers). The mma's run in the same ascending
// steps either way: the bits do not depend on the depth. sm_count 0 (unknown): never deep.
inline bool gemm_rows_deep(uint64_t warps, int sm_count) {
    return sm_count > 0 && warps < uint64_t(kGemmRowsDeepWarpsPerSm) * uint64_t(sm_count);
}

// The tiled kernel's block height for m rows over `column_blocks` blocks of 128 columns (every
// weight of a grouped launch together) on a device of sm_count SMs: 128 rows, unless that gives
// fewer blocks than the SMs hold (kGemmMmaBlocksPerSm each), e.g. a 512-row prefill chunk through
// o_proj or down_proj of the 8B shape: 4 x 32 = 128 blocks for 132 SMs, one block and 4 warps an
// SM; 64-row blocks make 256. sm_count 0 (unknown) keeps 128.
inline int gemm_mma_block_rows(int m, int column_blocks, int sm_count) {
    const uint64_t blocks = ceil_div(uint64_t(m), kGemmMmaTile) * uint64_t(column_blocks);
    return sm_count > 0 && blocks < uint64_t(kGemmMmaBlocksPerSm) * uint64_t(sm_count) ? kGemmMmaTileHalf
                                                                                       : kGemmMmaTile;
}

// ---- uploads through the pinned staging buffer (Context::upload_pieces) ------------------------
// The pieces' bytes, in order, are cut into slices of at most slice_bytes of the staging buffer. A
// slice is filled by the host (by several threads when it is large: each copies its share of the
// slice's bytes), then its parts go to the device as one DMA each, and the slice is refilled only
// when those have left it. Plain C++, so that the cutting and the shares are tested on the CPU.
struct UploadPart {
    size_t piece = 0;         // index into the pieces
    size_t piece_offset = 0;  // first byte of the piece in this part
    size_t slice_offset = 0;  // where it sits in the slice
    size_t bytes = 0;
};
struct UploadSlice {
    std::vector<UploadPart> parts;
    size_t bytes = 0;
};
inline std::vector<UploadSlice> plan_upload_slices(const std::vector<size_t>& piece_bytes, size_t slice_bytes) {
    require(slice_bytes > 0, "plan_upload_slices: empty slices");
    std::vector<UploadSlice> slices;
    for (size_t i = 0; i < piece_bytes.size(); ++i)
        for (size_t done = 0; done < piece_bytes[i];) {
            if (slices.empty() || slices.back().bytes == slice_bytes) slices.emplace_back();
            UploadSlice& sl = slices.back();
            const size_t n = std::min(piece_bytes[i] - done, slice_bytes - sl.bytes);
            sl.parts.push_back({i, done, sl.bytes, n});
            sl.bytes += n;
            done += n;
        }
    return slices;
}
// How many threads fill a slice of `bytes`: one below kUploadShareMin per thread (a thread's
// hand-off costs microseconds), at most max_threads.
inline constexpr size_t kUploadShareMin = size_t(1) << 20;
inline int upload_copy_threads(size_t bytes, int max_threads) {
    return int(std::clamp<size_t>(bytes / kUploadShareMin, 1, size_t(std::max(max_threads, 1))));
}
// Thread t of n copies the slice bytes [begin, end): equal shares on 64-byte boundaries (no two
// threads write one cache line), the last share up to the end.
struct ByteRange {
    size_t begin = 0, end = 0;
};
inline ByteRange upload_share(size_t bytes, int t, int n) {
    require(n >= 1 && t >= 0 && t < n, "upload_share: thread out of range");
    auto cut = [&](int i) { return i == n ? bytes : std::min(bytes, (bytes / size_t(n) * size_t(i)) & ~size_t(63)); };
    return {cut(t), cut(t + 1)};
}
// Calls copy(part, from, n) for every part of `slice` that overlaps [r.begin, r.end): bytes
// [from, from + n) of that part (from counted from the part's start).
template <class Copy>
void for_each_part_in(const UploadSlice& slice, ByteRange r, Copy&& copy) {
    for (const UploadPart& p : slice.parts) {
        const size_t b = std::max(r.begin, p.slice_offset), e = std::min(r.end, p.slice_offset + p.bytes);
        if (b < e) copy(p, b - p.slice_offset, e - b);
    }
}

// ---- a step's rows in chunks ---------------------------------------------------------------------

// forward() and forward_batch() stack the new rows of every sequence of a step, in sequence order,
// and run them in chunks of at most max_rows rows (the activation buffers' size). A chunk is made of
// pieces, each a run of consecutive rows of one sequence: the per-row kernels and the GEMMs run over
// the whole chunk (the weights read once for every row), RoPE + the K/V store and attention run per
// piece against that piece's sequence's own view. A row's result does not depend on where the cuts
// fall (DESIGN §6), so the cuts only bound memory.
struct StepPiece {
    int seq = 0;        // which sequence
    int seq_row = 0;    // its first row within that sequence's new rows
    int chunk_row = 0;  // its first row within the chunk
    int n = 0;          // rows
};
struct StepChunk {
    int first_row = 0;  // within the stacked rows of the step
    int n = 0;
    std::vector<StepPiece> pieces;
};

// seq_rows[s]: sequence s's new rows (0 allowed: it gets no piece). No rows at all: no chunks.
inline std::vector<StepChunk> plan_step_chunks(const std::vector<int>& seq_rows, int max_rows) {
    require(max_rows >= 1, "max_batch_tokens must be at least 1");
    std::vector<StepChunk> chunks;
    int stacked = 0;
    for (size_t s = 0; s < seq_rows.size(); ++s) {
        require(seq_rows[s] >= 0, "a sequence of a step has a negative row count");
        for (int done = 0; done < seq_rows[s];) {
            if (chunks.empty() || chunks.back().n == max_rows) chunks.push_back({stacked, 0, {}});
            StepChunk& c = chunks.back();
            const int n = std::min(seq_rows[s] - done, max_rows - c.n);
            c.pieces.push_back({int(s), done, c.n, n});
            c.n += n;
            done += n;
            stacked += n;
        }
    }
    return chunks;
}

// ---- CUDA graphs of small chunks (CudaBackendOptions::graphs, cuda/step_graphs.h) ----------------

// Chunks of at most this many rows (decode steps, short cached suffixes) run as graphs: that is
// where launch costs weigh; a long prefill chunk's kernels are long enough on their own.
constexpr int kGraphMaxRows = 64;
// Layers per graph: the host captures the next group while the GPU runs the one before.
constexpr int kGraphLayers = 4;

// What decides which kernels a chunk launches and in what order (its rows, and each piece's rows:
// attention's launch structure follows them); the positions, blocks and prefixes only change the
// kernels' arguments and grids, which a graph update takes.
inline std::vector<int> graph_key(const StepChunk& chunk) {
    std::vector<int> key{chunk.n, int(chunk.pieces.size())};
    for (const StepPiece& p : chunk.pieces) key.push_back(p.n);
    return key;
}

// Graph replay (CudaBackendOptions::graph_replay): a chunk is captured once per key and KV-length
// bucket and replayed, its positions and KV blocks read from tables in device memory, so its
// launches' grids must cover every length of the bucket. The split attention's grid is sized for
// the bucket's positions: a block of a chunk past a sequence's keys returns at once and the combine
// reads only the chunks a row sees, so the bits are those of a launch sized for the longest view
// (as a batch launch is for its shorter sequences). Buckets: powers of two of kAttnChunk
// positions, at most `limit` (the positions the split scratch and the RoPE table hold).
inline int graph_positions_bucket(int max_positions, int limit) {
    require(max_positions >= 1 && max_positions <= limit, "graph bucket: positions past the scratch");
    int chunks = 1;
    while (chunks < attn_n_chunks(max_positions)) chunks *= 2;
    return int(std::min<int64_t>(int64_t(chunks) * kAttnChunk, limit));
}

// ---- buffers of one backend ----------------------------------------------------------------------

// Device activation buffers of a forward pass for `max_rows` rows (bytes; each a separate cudaMalloc).
struct ForwardBuffers {
    size_t x = 0;        // (rows, dim) f32       residual stream
    size_t xn = 0;       // (rows, max(dim, qd)) bf16  GEMM input (normed x, or attention output)
    size_t q = 0;        // (rows, n_heads * head_dim) f32
    size_t k = 0;        // (rows, n_kv_heads * head_dim) f32
    size_t v = 0;        // (rows, n_kv_heads * head_dim) f32
    size_t att = 0;      // (rows, n_heads * head_dim) f32
    size_t proj = 0;     // (rows, dim) f32
    size_t gate = 0;     // (rows, ffn_dim) f32
    size_t up = 0;       // (rows, ffn_dim) f32
    size_t act = 0;      // (rows, ffn_dim) bf16  silu(gate) * up
    size_t tokens = 0;   // (rows) int32
    size_t sel = 0;      // (logit_rows) int32   rows whose logits are wanted
    size_t logits = 0;   // (logit_rows, vocab) f32
    size_t argmax = 0;   // (logit_rows) int32   their greedy tokens (CudaBackendOptions::device_greedy)
    size_t partial = 0;  // split-attention partial states for max_positions
    size_t total() const {
        return x + xn + q + k + v + att + proj + gate + up + act + tokens + sel + logits + argmax + partial;
    }
};

// Logit rows per lm_head GEMM: (rows, vocab) f32 gets large (Qwen3: 600 KB a row), so at most 32.
inline int max_logit_rows(int max_rows) {
    return std::max(1, std::min(max_rows, 32));
}

// mma_attention: the backend runs AttnKernel::mma (a larger split scratch).
inline ForwardBuffers plan_buffers(const ModelConfig& c, int max_rows, int max_positions, bool mma_attention = false) {
    require(max_rows >= 1, "max_batch_tokens must be at least 1");
    const size_t r = size_t(max_rows), qd = size_t(c.n_heads) * c.head_dim, kvd = size_t(c.n_kv_heads) * c.head_dim;
    const size_t lr = size_t(max_logit_rows(max_rows));
    ForwardBuffers b;
    b.x = r * c.dim * 4;
    b.xn = r * std::max(size_t(c.dim), qd) * 2;
    b.q = r * qd * 4;
    b.k = r * kvd * 4;
    b.v = r * kvd * 4;
    b.att = r * qd * 4;
    b.proj = r * c.dim * 4;
    b.gate = r * c.ffn_dim * 4;
    b.up = r * c.ffn_dim * 4;
    b.act = r * c.ffn_dim * 2;
    b.tokens = r * 4;
    b.sel = lr * 4;
    b.logits = lr * c.vocab_size * 4;
    b.argmax = lr * 4;
    b.partial = attn_partial_floats(attn_split_rows(mma_attention), c.n_heads, c.head_dim, max_positions) * 4;
    return b;
}

// Weights as uploaded: matrices BF16, norm vectors F32.
inline size_t weight_bytes(const ModelConfig& c) {
    const size_t qd = size_t(c.n_heads) * c.head_dim, kvd = size_t(c.n_kv_heads) * c.head_dim, d = size_t(c.dim);
    const size_t per_layer = (qd * d + 2 * kvd * d + d * qd + 3 * size_t(c.ffn_dim) * d) * 2 + 2 * d * 4 +
                             (c.qk_norm ? 2 * size_t(c.head_dim) * 4 : 0);
    const size_t embed = size_t(c.vocab_size) * d * 2;
    return size_t(c.n_layers) * per_layer + embed + (c.tie_word_embeddings ? 0 : embed) + d * 4;
}

// RoPE tables grow in steps of this many positions (cos and sin, (positions, head_dim / 2) f32).
inline constexpr int kRopeTableStep = 4096;
inline int rope_table_positions(int needed) {
    return int(ceil_div(uint64_t(std::max(needed, 1)), kRopeTableStep)) * kRopeTableStep;
}

}  // namespace cc::cuda::geom
