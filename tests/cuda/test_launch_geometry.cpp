// cuda/launch_geometry.h on the CPU (no CUDA needed): grid/block sizes within CUDA's limits,
// shared memory within sm_80/sm_90's, split boundaries at absolute positions, edge shapes.
#include "cuda/launch_geometry.h"

#include "core/model/model_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

namespace geom = cc::cuda::geom;

namespace {

void expect_within_limits(const geom::Launch& l) {
    EXPECT_GE(l.grid.x, 1u);
    EXPECT_LE(uint64_t(l.grid.x), geom::kMaxGridX);
    EXPECT_GE(l.grid.y, 1u);
    EXPECT_LE(uint64_t(l.grid.y), geom::kMaxGridYZ);
    EXPECT_GE(l.grid.z, 1u);
    EXPECT_LE(uint64_t(l.grid.z), geom::kMaxGridYZ);
    EXPECT_LE(l.block.x * l.block.y * l.block.z, geom::kMaxBlockThreads);
    EXPECT_EQ(l.block.x * l.block.y * l.block.z % 32, 0u) << "whole warps";
    EXPECT_LE(l.smem_bytes, geom::kSmemOptinSm80Bytes);
    EXPECT_LE(l.smem_bytes, geom::kSmemOptinSm90Bytes);
}

cc::ModelConfig qwen3_8b() {
    cc::ModelConfig c;
    c.n_layers = 36;
    c.dim = 4096;
    c.ffn_dim = 12288;
    c.n_heads = 32;
    c.n_kv_heads = 8;
    c.head_dim = 128;
    c.vocab_size = 151936;
    c.max_position_embeddings = 40960;
    c.qk_norm = true;
    return c;
}

}  // namespace

TEST(launch_geometry, attention_tiled_covers_every_row_once) {
    for (int rows : {1, 2, 15, 16, 17, 100, 512, 3000, 100000})
        for (int hd : {64, 128, 256})
            for (auto [h, kv] : {std::pair{7, 1}, std::pair{32, 8}, std::pair{1, 1}, std::pair{40, 40}}) {
                const geom::Launch l = geom::attn_tiled(rows, h, kv, hd);
                expect_within_limits(l);
                EXPECT_EQ(l.grid.y, unsigned(h));
                // blocks of 16 rows: the last block holds the remainder, none is empty
                EXPECT_GE(uint64_t(l.grid.x) * geom::kAttnRowsPerBlock, uint64_t(rows));
                EXPECT_LT(uint64_t(l.grid.x - 1) * geom::kAttnRowsPerBlock, uint64_t(rows));
                EXPECT_EQ(l.smem_bytes, geom::attn_smem_bytes(geom::kAttnRowsPerBlock, hd, true));
            }
}

TEST(launch_geometry, attention_shared_memory_fits_sm80_and_sm90) {
    // head_dim 128 (Qwen3, Llama 3): over the 48 KiB default, so the launcher opts in.
    const size_t tiled128 = geom::attn_smem_bytes(geom::kAttnRowsPerBlock, 128, true);
    EXPECT_GT(tiled128, geom::kSmemDefaultBytes);
    EXPECT_LE(tiled128, geom::kSmemOptinSm80Bytes);
    EXPECT_LE(geom::attn_smem_bytes(geom::kAttnRowsPerBlock, geom::kMaxHeadDim, true), geom::kSmemOptinSm80Bytes);
    EXPECT_LE(geom::attn_smem_bytes(1, 128, false), geom::kSmemDefaultBytes);  // split, head_dim 128: no opt-in
    EXPECT_GT(geom::attn_smem_bytes(1, geom::kMaxHeadDim, false),
              geom::kSmemDefaultBytes);  // 256: the launcher opts in
    EXPECT_LE(geom::attn_smem_bytes(1, geom::kMaxHeadDim, false), geom::kSmemOptinSm80Bytes);
    // exact layout: q, k (padded), v, p, acc_c, acc_t, state
    EXPECT_EQ(geom::attn_smem_bytes(16, 64, true), (16 * 64 + 32 * 65 + 32 * 64 + 16 * 32 + 16 * 64 * 2 + 16 * 8) * 4u);
    EXPECT_EQ(geom::attn_smem_bytes(1, 64, false), (64 + 32 * 65 + 32 * 64 + 32 + 64 + 8) * 4u);
}

TEST(launch_geometry, attention_refuses_bad_shapes) {
    EXPECT_THROW(geom::attn_tiled(1, 7, 2, 64), std::invalid_argument);   // 7 heads do not group into 2 kv heads
    EXPECT_THROW(geom::attn_tiled(1, 8, 8, 63), std::invalid_argument);   // odd head_dim (RoPE pairs)
    EXPECT_THROW(geom::attn_tiled(1, 8, 8, 512), std::invalid_argument);  // beyond kMaxHeadDim
    EXPECT_THROW(geom::attn_tiled(0, 8, 8, 64), std::invalid_argument);
    EXPECT_THROW(geom::attn_split(5, 8, 8, 64, 100), std::invalid_argument);
    EXPECT_THROW(geom::attn_tiled(1, 70000, 1, 64), std::invalid_argument);  // grid.y
}

TEST(launch_geometry, split_chunks_cover_positions_at_absolute_boundaries) {
    for (int n_positions : {1, 2, 255, 256, 257, 3000, 100000, 131072}) {
        const int chunks = geom::attn_n_chunks(n_positions);
        EXPECT_GE(int64_t(chunks) * geom::kAttnChunk, n_positions);
        EXPECT_LT(int64_t(chunks - 1) * geom::kAttnChunk, n_positions);
        for (int rows : {1, 4}) {
            const geom::Launch l = geom::attn_split(rows, 7, 1, 128, n_positions);
            expect_within_limits(l);
            EXPECT_EQ(l.grid.x, unsigned(chunks));
            EXPECT_EQ(l.grid.z, unsigned(rows));
            EXPECT_EQ(geom::attn_partial_floats(rows, 7, 128, n_positions), size_t(rows) * 7 * size_t(chunks) * 130);
        }
    }
    // The chunk of a position is a function of the position alone: the same for a query whose
    // prefix ends anywhere. Chunks start at multiples of kAttnChunk, tiles at multiples of kAttnKeyTile.
    for (int c = 0; c < 400; ++c) {
        EXPECT_EQ(geom::attn_chunk_begin(c) % geom::kAttnChunk, 0);
        EXPECT_EQ(geom::attn_chunk_of(int(geom::attn_chunk_begin(c))), c);
        EXPECT_EQ(geom::attn_chunk_of(int(geom::attn_chunk_begin(c)) + geom::kAttnChunk - 1), c);
    }
    EXPECT_EQ(geom::kAttnChunk % geom::kAttnKeyTile, 0);
}

TEST(launch_geometry, mma_attention_packs_the_heads_of_a_kv_head) {
    // Qwen3-8B: 32 query heads over 8 KV heads, 4 pairs a row; a block holds 64 pairs (16 rows).
    for (int rows : {1, 16, 17, 23, 32, 512}) {
        const geom::Launch tiled = geom::attn_mma(rows, 32, 8, 128, 3000 + rows, false);
        expect_within_limits(tiled);
        EXPECT_EQ(tiled.grid.x, 1u);
        EXPECT_EQ(tiled.grid.y, 8u);
        EXPECT_EQ(tiled.grid.z, unsigned((rows * 4 + 63) / 64));
        EXPECT_EQ(tiled.block.x, 128u);
        if (rows > geom::kAttnMmaSplitMaxRows) {
            EXPECT_THROW(geom::attn_mma(rows, 32, 8, 128, 3000 + rows, true), std::invalid_argument);
            EXPECT_FALSE(geom::attn_mma_use_split(rows));
            continue;
        }
        EXPECT_TRUE(geom::attn_mma_use_split(rows));
        const geom::Launch split = geom::attn_mma(rows, 32, 8, 128, 3000 + rows, true);
        expect_within_limits(split);
        EXPECT_EQ(split.grid.x, unsigned(geom::attn_n_chunks(3000 + rows)));  // one block per chunk
        EXPECT_EQ(split.grid.z, tiled.grid.z);
    }
    // a group that does not divide 16 (7 heads per KV head): pairs straddle warps and blocks
    EXPECT_EQ(geom::attn_mma(19, 7, 1, 64, 61, false).grid.z, unsigned((19 * 7 + 63) / 64));
    // shared memory: queries and one key tile [64][hd + 8], the value tile transposed [hd][72], bf16
    EXPECT_EQ(geom::attn_mma_smem_bytes(128), (64u * 136 + 64 * 136 + 128 * 72) * 2);
    EXPECT_GT(geom::attn_mma_smem_bytes(128), geom::kSmemDefaultBytes);  // the launcher opts in
    EXPECT_LE(geom::attn_mma_smem_bytes(128), geom::kSmemOptinSm80Bytes);
    EXPECT_LE(geom::attn_mma_smem_bytes(64), geom::kSmemDefaultBytes);
    for (int hd : {32, 64, 128}) EXPECT_TRUE(geom::attn_mma_head_dim_ok(hd));
    for (int hd : {8, 16, 48, 96, 256}) {
        EXPECT_FALSE(geom::attn_mma_head_dim_ok(hd));
        EXPECT_THROW(geom::attn_mma(1, 8, 8, hd, 10, false), std::invalid_argument);
    }
    EXPECT_EQ(geom::kAttnChunk % geom::kAttnMmaKeyTile, 0);  // the scalar kernels' chunks, whole mma tiles
    EXPECT_EQ(geom::attn_split_rows(false), geom::kAttnSplitMaxRows);
    EXPECT_EQ(geom::attn_split_rows(true), geom::kAttnMmaSplitMaxRows);
}

TEST(launch_geometry, first_key_with_and_without_window) {
    EXPECT_EQ(geom::attn_first_key(0, 0), 0);
    EXPECT_EQ(geom::attn_first_key(99999, 0), 0);
    EXPECT_EQ(geom::attn_first_key(0, 4096), 0);
    EXPECT_EQ(geom::attn_first_key(4095, 4096), 0);
    EXPECT_EQ(geom::attn_first_key(4096, 4096), 1);  // p - window < j <= p, as the CPU backend
    EXPECT_EQ(geom::attn_first_key(100000, 4096), 100000 - 4095);
    EXPECT_EQ(geom::attn_first_key(5, 1), 5);  // window 1: only itself
}

TEST(launch_geometry, split_path_only_for_small_batches) {
    EXPECT_TRUE(geom::attn_use_split(1));
    EXPECT_TRUE(geom::attn_use_split(geom::kAttnSplitMaxRows));
    EXPECT_FALSE(geom::attn_use_split(geom::kAttnSplitMaxRows + 1));
    const geom::Launch c = geom::attn_combine(4, 7, 64);
    expect_within_limits(c);
    EXPECT_GE(c.block.x, 64u);
    const geom::Launch c2 = geom::attn_combine(1, 32, 256);
    EXPECT_EQ(c2.block.x, 256u);
}

TEST(launch_geometry, row_and_elementwise_kernels) {
    for (int rows : {1, 7, 512, 100000}) {
        const geom::Launch l = geom::row_blocks(rows);
        expect_within_limits(l);
        EXPECT_EQ(l.grid.x, unsigned(rows));
        EXPECT_EQ(l.smem_bytes, geom::kRowThreads * sizeof(float));
        EXPECT_EQ(geom::kRowThreads & (geom::kRowThreads - 1), 0u) << "the reduction tree halves the block";
        const geom::Launch a = geom::argmax_blocks(rows);
        expect_within_limits(a);
        EXPECT_EQ(a.grid.x, unsigned(rows));
        EXPECT_EQ(a.smem_bytes, a.block.x * (sizeof(float) + sizeof(int32_t))) << "a value and an index a thread";
        const geom::Launch h = geom::heads_per_row(rows, 128);
        expect_within_limits(h);
        EXPECT_EQ(h.block.x, 32 * geom::kHeadWarps);
    }
    EXPECT_THROW(geom::row_blocks(0), std::invalid_argument);
    EXPECT_THROW(geom::argmax_blocks(0), std::invalid_argument);
    EXPECT_THROW(geom::heads_per_row(1, 127), std::invalid_argument);
    for (int64_t n :
         {int64_t(1), int64_t(255), int64_t(256), int64_t(257), int64_t(100000) * 151936, int64_t(1) << 40}) {
        const geom::Launch l = geom::elementwise(n);
        expect_within_limits(l);
        // grid-stride loop: enough threads or the cap
        EXPECT_TRUE(uint64_t(l.grid.x) * l.block.x >= uint64_t(n) || l.grid.x == 65535u * 16u) << n;
    }
}

TEST(launch_geometry, buffer_plan_and_required_bytes) {
    const cc::ModelConfig c = qwen3_8b();
    const geom::ForwardBuffers b = geom::plan_buffers(c, 512, 40960);
    EXPECT_EQ(b.x, 512u * 4096 * 4);
    EXPECT_EQ(b.xn, 512u * 4096 * 2);  // max(dim, n_heads * head_dim) = 4096
    EXPECT_EQ(b.gate, 512u * 12288 * 4);
    EXPECT_EQ(b.logits, 32u * 151936 * 4);  // at most 32 logit rows per lm_head GEMM
    EXPECT_EQ(b.argmax, 32u * 4);           // and their greedy tokens
    EXPECT_EQ(b.partial, size_t(4) * 32 * 160 * 130 * 4);
    EXPECT_EQ(geom::plan_buffers(c, 512, 40960, true).partial, size_t(32) * 32 * 160 * 130 * 4);  // mma: 32 rows
    EXPECT_EQ(geom::max_logit_rows(1), 1);
    EXPECT_EQ(geom::max_logit_rows(7), 7);
    EXPECT_EQ(geom::max_logit_rows(4096), 32);
    // Qwen3-8B: 8.19e9 parameters in BF16 ~ 16.4 GB (untied lm_head)
    const size_t w = geom::weight_bytes(c);
    EXPECT_GT(w, size_t(16'000'000'000));
    EXPECT_LT(w, size_t(16'800'000'000));
    cc::ModelConfig tied = c;
    tied.tie_word_embeddings = true;
    EXPECT_EQ(geom::weight_bytes(c) - geom::weight_bytes(tied), size_t(151936) * 4096 * 2);
    EXPECT_THROW(geom::plan_buffers(c, 0, 1), std::invalid_argument);
    EXPECT_EQ(geom::rope_table_positions(1), geom::kRopeTableStep);
    EXPECT_EQ(geom::rope_table_positions(4097), 2 * geom::kRopeTableStep);
    EXPECT_EQ(geom::rope_table_positions(100000), 25 * geom::kRopeTableStep);
}

TEST(launch_geometry, fallback_gemm_tiles_cover_the_output) {
    for (auto [m, n] :
         {std::pair{1, 1}, std::pair{1, 151936}, std::pair{512, 4096}, std::pair{65, 63}, std::pair{4096, 12288}}) {
        const geom::Launch l = geom::gemm_fallback(m, n);
        expect_within_limits(l);
        EXPECT_EQ(l.block.x * l.block.y * 16, unsigned(geom::kGemmTile * geom::kGemmTile))
            << "4 x 4 outputs per thread";
        EXPECT_GE(uint64_t(l.grid.x) * geom::kGemmTile, uint64_t(n));
        EXPECT_LT(uint64_t(l.grid.x - 1) * geom::kGemmTile, uint64_t(n));
        EXPECT_GE(uint64_t(l.grid.y) * geom::kGemmTile, uint64_t(m));
    }
    EXPECT_THROW(geom::gemm_fallback(0, 5), std::invalid_argument);
}

TEST(launch_geometry, step_chunks_cover_every_row_of_every_sequence_once_in_order) {
    const std::vector<std::vector<int>> cases{
        {40, 1, 30, 70}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {0, 5, 0}, {64}, {65}, {128, 0, 1}, {}, {0}};
    for (int max_rows : {1, 7, 64, 512}) {
        for (const auto& seq_rows : cases) {
            const auto chunks = geom::plan_step_chunks(seq_rows, max_rows);
            std::vector<int> next(seq_rows.size(), 0);  // each sequence's next row, in order
            int stacked = 0;
            size_t last_seq = 0;
            for (const auto& c : chunks) {
                EXPECT_EQ(c.first_row, stacked);
                EXPECT_GE(c.n, 1);
                EXPECT_LE(c.n, max_rows);
                int in_chunk = 0;
                for (const auto& p : c.pieces) {
                    ASSERT_GE(p.seq, 0);
                    ASSERT_LT(size_t(p.seq), seq_rows.size());
                    EXPECT_GE(size_t(p.seq), last_seq) << "sequences stay in order";
                    last_seq = size_t(p.seq);
                    EXPECT_GE(p.n, 1);
                    EXPECT_EQ(p.seq_row, next[size_t(p.seq)]);
                    EXPECT_EQ(p.chunk_row, in_chunk);
                    next[size_t(p.seq)] += p.n;
                    in_chunk += p.n;
                }
                EXPECT_EQ(in_chunk, c.n);
                stacked += c.n;
            }
            EXPECT_EQ(next, seq_rows) << "max_rows " << max_rows;
            // full chunks except the last: the fewest launches the buffers allow
            for (size_t i = 0; i + 1 < chunks.size(); ++i) EXPECT_EQ(chunks[i].n, max_rows);
        }
    }
    const auto four = geom::plan_step_chunks({40, 1, 30, 70}, 64);
    ASSERT_EQ(four.size(), 3u);
    ASSERT_EQ(four[0].pieces.size(), 3u);  // 40 + 1 + 23 of the third
    EXPECT_EQ(four[0].pieces[2].n, 23);
    EXPECT_EQ(four[1].pieces[0].seq_row, 23);  // the rest of the third, then 57 of the fourth
    EXPECT_EQ(four[1].pieces[1].n, 57);
    EXPECT_EQ(four[2].pieces[0].seq_row, 57);
    EXPECT_THROW(geom::plan_step_chunks({1}, 0), std::invalid_argument);
    EXPECT_THROW(geom::plan_step_chunks({3, -1}, 8), std::invalid_argument);
}

// A CUDA graph is kept per chunk shape (CudaBackendOptions::graphs): chunks that launch different
// kernels must get different keys, and a decode step's shape must keep its key as positions move
// (that is what lets the graph be updated in place instead of instantiated anew).
TEST(launch_geometry, graph_keys_follow_the_chunk_shape) {
    const auto decode8 = geom::plan_step_chunks({1, 1, 1, 1, 1, 1, 1, 1}, 64);
    ASSERT_EQ(decode8.size(), 1u);
    EXPECT_EQ(geom::graph_key(decode8[0]), (std::vector<int>{8, 8, 1, 1, 1, 1, 1, 1, 1, 1}));
    const auto one = geom::plan_step_chunks({1}, 64);
    EXPECT_NE(geom::graph_key(one[0]), geom::graph_key(decode8[0]));
    // the same rows cut differently between sequences launch different attention: different keys
    const auto a = geom::plan_step_chunks({3, 1}, 64), b = geom::plan_step_chunks({1, 3}, 64),
               c = geom::plan_step_chunks({4}, 64);
    EXPECT_NE(geom::graph_key(a[0]), geom::graph_key(b[0]));
    EXPECT_NE(geom::graph_key(a[0]), geom::graph_key(c[0]));
    EXPECT_EQ(geom::graph_key(a[0]), geom::graph_key(geom::plan_step_chunks({3, 1}, 64)[0]));
    // which chunks run as graphs: up to kGraphMaxRows rows (decode steps, short suffixes)
    EXPECT_GE(geom::kGraphMaxRows, 16);
    EXPECT_GE(geom::kGraphLayers, 1);
}

// Graph replay's KV-length buckets: powers of two of the attention's chunks, never past the
// scratch, and always holding the chunk's longest view (its split grid covers every key).
TEST(launch_geometry, graph_buckets_hold_the_longest_view_in_powers_of_two_chunks) {
    const int C = geom::kAttnChunk;
    EXPECT_EQ(geom::graph_positions_bucket(1, 8192), C);
    EXPECT_EQ(geom::graph_positions_bucket(C, 8192), C);
    EXPECT_EQ(geom::graph_positions_bucket(C + 1, 8192), 2 * C);
    EXPECT_EQ(geom::graph_positions_bucket(2 * C + 1, 8192), 4 * C);
    EXPECT_EQ(geom::graph_positions_bucket(2985, 8192), 16 * C);
    EXPECT_EQ(geom::graph_positions_bucket(5000, 6000), 6000) << "cut to the scratch";
    EXPECT_THROW(geom::graph_positions_bucket(6001, 6000), std::invalid_argument);
    EXPECT_THROW(geom::graph_positions_bucket(0, 6000), std::invalid_argument);
    int buckets = 0;
    for (int p = 1, last = 0; p <= 8192; ++p) {
        const int b = geom::graph_positions_bucket(p, 8192);
        EXPECT_GE(b, p);
        EXPECT_GE(geom::attn_n_chunks(b), geom::attn_n_chunks(p));
        EXPECT_LE(geom::attn_n_chunks(b), 2 * geom::attn_n_chunks(p)) << "at most twice the blocks a launch needs";
        buckets += b != last;
        last = b;
    }
    EXPECT_EQ(buckets, 6) << "256 to 8,192 positions: six graphs a shape";
}

TEST(launch_geometry, mma_attention_batches_hold_16_sequences_and_32_rows) {
    const auto one = geom::attn_mma_batches(std::vector<int>(16, 1));
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0], std::make_pair(0, 16));
    const auto two = geom::attn_mma_batches(std::vector<int>(17, 1));
    ASSERT_EQ(two.size(), 2u);
    EXPECT_EQ(two[1], std::make_pair(16, 17));
    const auto rows = geom::attn_mma_batches({17, 15, 1, 32, 3, 30});
    ASSERT_EQ(rows.size(), 5u);  // 17+15 | 1 (1+32 > 32) | 32 | 3 (3+30 > 32) | 30
    EXPECT_EQ(rows[0], std::make_pair(0, 2));
    EXPECT_EQ(rows[1], std::make_pair(2, 3));
    EXPECT_EQ(rows[2], std::make_pair(3, 4));
    EXPECT_EQ(rows[3], std::make_pair(4, 5));
    EXPECT_EQ(rows[4], std::make_pair(5, 6));
    EXPECT_TRUE(geom::attn_mma_batches({}).empty());
    EXPECT_THROW(geom::attn_mma_batches({3, 33}), std::invalid_argument);
    EXPECT_THROW(geom::attn_mma_batches({0}), std::invalid_argument);
    // the launch: the longest view's chunks, every sequence's blocks of pairs
    const geom::Launch l = geom::attn_mma_batch(7, 17, 26, 8, 2, 64, 533);
    EXPECT_EQ(l.grid.x, 3u);
    EXPECT_EQ(l.grid.y, 2u);
    EXPECT_EQ(l.grid.z, 7u * 2u);  // 17 rows x 4 heads per KV head = 68 pairs: 2 blocks of 64
    EXPECT_THROW(geom::attn_mma_batch(17, 1, 17, 8, 2, 64, 10), std::invalid_argument);
    EXPECT_THROW(geom::attn_mma_batch(2, 20, 40, 8, 2, 64, 10), std::invalid_argument);
}

// Uploads through the staging ring (Context::upload_pieces): the pieces cut into slices, each slice
// filled by its threads' shares, then one copy per part. Done here with host memory standing in
// for the staging buffer and the device: every byte of every piece lands once, where it belongs.
TEST(launch_geometry, upload_slices_and_shares_move_every_byte_once) {
    std::mt19937 rng(21);
    for (const size_t slice_bytes : {size_t(64), size_t(1000), size_t(3) << 20}) {
        std::vector<size_t> sizes = {1, slice_bytes, 0, slice_bytes + 1, 7 * slice_bytes / 3, 5};
        for (int i = 0; i < 20; ++i) sizes.push_back(rng() % (2 * slice_bytes + 3));
        std::vector<std::vector<unsigned char>> host(sizes.size()), device(sizes.size());
        for (size_t i = 0; i < sizes.size(); ++i) {
            host[i].resize(sizes[i]);
            for (auto& b : host[i]) b = static_cast<unsigned char>(rng());
            device[i].assign(sizes[i], 0);
        }
        const auto slices = geom::plan_upload_slices(sizes, slice_bytes);
        std::vector<unsigned char> stage(slice_bytes);
        size_t total = 0;
        for (const auto& sl : slices) {
            ASSERT_LE(sl.bytes, slice_bytes);
            ASSERT_GT(sl.bytes, 0u);
            total += sl.bytes;
            for (const int max_threads : {1, 4}) {
                const int n = geom::upload_copy_threads(sl.bytes, max_threads);
                ASSERT_GE(n, 1);
                ASSERT_LE(n, max_threads);
                std::vector<int> written(sl.bytes, 0);
                std::fill(stage.begin(), stage.end(), 0);
                for (int t = 0; t < n; ++t) {
                    const geom::ByteRange r = geom::upload_share(sl.bytes, t, n);
                    if (t > 0) {
                        EXPECT_EQ(r.begin % 64, 0u);
                    }
                    geom::for_each_part_in(sl, r, [&](const geom::UploadPart& p, size_t from, size_t bytes) {
                        std::memcpy(stage.data() + p.slice_offset + from, host[p.piece].data() + p.piece_offset + from,
                                    bytes);
                        for (size_t b = 0; b < bytes; ++b) ++written[p.slice_offset + from + b];
                    });
                }
                EXPECT_EQ(std::count(written.begin(), written.end(), 1), std::ptrdiff_t(sl.bytes));
                for (const auto& p : sl.parts)  // the DMA of each part
                    std::memcpy(device[p.piece].data() + p.piece_offset, stage.data() + p.slice_offset, p.bytes);
            }
        }
        EXPECT_EQ(total, std::accumulate(sizes.begin(), sizes.end(), size_t(0)));
        for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(device[i], host[i]) << "piece " << i;
    }
    // a thread per MiB of the slice, at most the pool's
    EXPECT_EQ(geom::upload_copy_threads(100, 4), 1);
    EXPECT_EQ(geom::upload_copy_threads(size_t(2) << 20, 4), 2);
    EXPECT_EQ(geom::upload_copy_threads(size_t(8) << 20, 4), 4);
    EXPECT_THROW(geom::plan_upload_slices({1}, 0), std::invalid_argument);
}
