// The tensor-core attention's kernels (cuda/attention_mma_kernels.cuh, AttnKernel::mma) run on the
// CPU, their CUDA code unchanged, through tests/cuda/warp_emulation.h: a block's 128 threads as
// std::threads, warp shuffles and mma.sync from the PTX ISA's fragment layouts. No GPU has run
// this kernel yet (issue 34); what runs here is its logic, on every machine and in CI:
// - against a float64 reference (bf16 operands: the relative error of the whole output);
// - the split launch (one block per chunk, then the combine) gives the tiled launch's bits;
// - the keys split into prefix and suffix blocks anywhere give the same bits;
// - every row gets the same bits whether it runs alone, in launches of 3 rows, or in the batch
//   (its (row, head) pairs then sit elsewhere in the mma tiles and blocks);
// - graph replay's form of the batch launch (the batch read from a table in memory, the grid sized
//   for a KV-length bucket larger than the step needs) gives the batch launch's bits.
// The instruction's own rounding on a tensor core is not modelled: the device's self-test rows
// (cuda/selftest.cu) check the same properties on the hardware.
#include "tests/cuda/warp_emulation.h"

#include "cuda/attention_mma_kernels.cuh"
#include "cuda/attention_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace cc::cuda;
using kern::AttnArgs;
namespace km = cc::km;

struct Case {
    int heads, kv, hd, window, n_before, rows;
    bool bf16;
};

std::string describe(const Case& c) {
    return "heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv) + " hd " + std::to_string(c.hd) + " rows " +
           std::to_string(c.rows) + " at " + std::to_string(c.n_before) + " window " + std::to_string(c.window) +
           (c.bf16 ? " kv bf16" : " kv f32");
}

// Queries and the keys and values of every position ([kv][N][hd], rounded through bf16 for a
// bf16 block, so the reference sees the stored values).
struct Data {
    Case c;
    int N = 0, qd = 0;
    std::vector<float> q, k, v;
};

Data make_data(const Case& c, uint32_t seed) {
    Data d{c, c.n_before + c.rows, c.heads * c.hd, {}, {}, {}};
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    d.q.resize(size_t(c.rows) * d.qd);
    d.k.resize(size_t(c.kv) * d.N * c.hd);
    d.v.resize(d.k.size());
    for (auto* vec : {&d.q, &d.k, &d.v})
        for (float& x : *vec) x = nd(rng);
    if (c.bf16)
        for (auto* vec : {&d.k, &d.v})
            for (float& x : *vec) x = km::bf16_to_f32(km::f32_to_bf16(x));
    return d;
}

template <int HD>
void launch_rows(const AttnArgs& a, bool split) {
    const int n_positions = a.first_pos + a.n_rows;
    const geom::Launch l = geom::attn_mma(a.n_rows, a.n_heads, a.n_kv_heads, a.head_dim, n_positions, split);
    const cc_emu::Dim grid{l.grid.x, l.grid.y, l.grid.z}, block{l.block.x, 1, 1};
    if (!split) {
        cc_emu::launch(grid, block, l.smem_bytes, [&] { kern::detail::attn_mma_kernel<HD, false>(a, nullptr, 0); });
        return;
    }
    std::vector<float> partial(geom::attn_partial_floats(a.n_rows, a.n_heads, a.head_dim, n_positions), NAN);
    const int n_chunks = int(l.grid.x);
    cc_emu::launch(grid, block, l.smem_bytes,
                   [&] { kern::detail::attn_mma_kernel<HD, true>(a, partial.data(), n_chunks); });
    const geom::Launch lc = geom::attn_combine(a.n_rows, a.n_heads, a.head_dim);
    cc_emu::launch({lc.grid.x, lc.grid.y, lc.grid.z}, {lc.block.x, 1, 1}, 0,
                   [&] { kern::detail::attn_combine_kernel<true>(a, partial.data(), n_chunks); });
}

// The keys and values of d in two blocks split at position P (caps past the keys; slots past n are
// NaN, never valid keys), and the arguments every launch over them shares.
struct View {
    std::vector<float> kf[2], vf[2];
    std::vector<uint16_t> kb[2], vb[2];
    AttnArgs a;
};

std::unique_ptr<View> make_view(const Data& d, int P) {
    const Case& c = d.c;
    auto view = std::make_unique<View>();
    View& w = *view;
    const int caps[2] = {P + 5, d.N - P + 3}, firsts[2] = {0, P}, ns[2] = {P, d.N - P};
    AttnArgs& a = w.a;
    a.kernel = kern::AttnKernel::mma;
    for (int s = 0; s < 2; ++s) {
        w.kf[s].assign(size_t(c.kv) * caps[s] * c.hd, NAN);
        w.vf[s].assign(w.kf[s].size(), NAN);
        for (int h = 0; h < c.kv; ++h)
            for (int j = 0; j < ns[s]; ++j)
                for (int e = 0; e < c.hd; ++e) {
                    w.kf[s][(size_t(h) * caps[s] + j) * c.hd + e] = d.k[(size_t(h) * d.N + firsts[s] + j) * c.hd + e];
                    w.vf[s][(size_t(h) * caps[s] + j) * c.hd + e] = d.v[(size_t(h) * d.N + firsts[s] + j) * c.hd + e];
                }
        if (c.bf16) {
            for (float x : w.kf[s]) w.kb[s].push_back(km::f32_to_bf16(x));
            for (float x : w.vf[s]) w.vb[s].push_back(km::f32_to_bf16(x));
            a.seg[s] = {w.kb[s].data(), w.vb[s].data(), caps[s], ns[s]};
        } else {
            a.seg[s] = {w.kf[s].data(), w.vf[s].data(), caps[s], ns[s]};
        }
    }
    a.kv_bf16 = c.bf16;
    a.n_heads = c.heads;
    a.n_kv_heads = c.kv;
    a.head_dim = c.hd;
    a.window = c.window;
    a.scale = float(1.0 / std::sqrt(double(c.hd)));
    return view;
}

// The output of every row, with the keys split into blocks at P and the rows run in launches of
// `group` rows (tiled or split); with out_bf16, the launches write bf16 there (AttnArgs::out_bf16,
// no f32 output) and the f32 output stays NaN.
std::vector<float> run(const Data& d, int P, bool split, int group, std::vector<uint16_t>* out_bf16 = nullptr) {
    const Case& c = d.c;
    const auto view = make_view(d, P);
    AttnArgs a = view->a;
    std::vector<float> out(d.q.size(), NAN);  // a row never written stays NaN
    if (out_bf16 != nullptr) out_bf16->assign(d.q.size(), 0xffff);
    for (int r0 = 0; r0 < c.rows; r0 += group) {
        a.q = d.q.data() + size_t(r0) * d.qd;
        a.out = out_bf16 != nullptr ? nullptr : out.data() + size_t(r0) * d.qd;
        if (out_bf16 != nullptr) a.out_bf16 = out_bf16->data() + size_t(r0) * d.qd;
        a.n_rows = std::min(group, c.rows - r0);
        a.first_pos = c.n_before + r0;
        switch (c.hd) {
            case 32:
                launch_rows<32>(a, split);
                break;
            case 64:
                launch_rows<64>(a, split);
                break;
            case 128:
                launch_rows<128>(a, split);
                break;
            default:
                ADD_FAILURE() << "head_dim " << c.hd << " is not built";
        }
    }
    return out;
}

size_t bit_mismatches(const std::vector<float>& a, const std::vector<float>& b) {
    size_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], 4) != 0;
    return n;
}
// elements of the bf16 output that are not the f32 output rounded
size_t bf16_mismatches(const std::vector<uint16_t>& got, const std::vector<float>& f32) {
    size_t n = 0;
    for (size_t i = 0; i < got.size(); ++i) n += got[i] != km::f32_to_bf16(f32[i]);
    return n + (got.size() != f32.size());
}

double relative_error_vs_float64(const Data& d, const std::vector<float>& got) {
    const Case& c = d.c;
    const std::vector<double> ref = attention_reference(d.q, d.k, d.v, c.heads, c.kv, c.hd, c.window, c.n_before,
                                                        c.rows, 1.0 / std::sqrt(double(c.hd)));
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return std::sqrt(num / den);
}

class MmaAttentionEmulated : public ::testing::TestWithParam<Case> {};

TEST_P(MmaAttentionEmulated, NearFloat64AndEveryRowsBitsIndependentOfLaunchAndBoundary) {
    const Case c = GetParam();
    const Data d = make_data(c, 1234u + uint32_t(c.hd * 7 + c.rows));
    const std::vector<float> tiled = run(d, c.n_before, false, c.rows);
    size_t nan = 0;
    for (float x : tiled) nan += std::isnan(x);
    ASSERT_EQ(nan, 0u) << describe(c) << ": outputs not written";
    // q, k, v and the probabilities rounded to bf16 (2^-9 relative each), f32 state
    const double err = relative_error_vs_float64(d, tiled);
    RecordProperty("relative_error_vs_float64", std::to_string(err));
    EXPECT_LT(err, 2e-2) << describe(c);

    const int split_group = std::min(c.rows, geom::kAttnMmaSplitMaxRows);
    EXPECT_EQ(bit_mismatches(run(d, c.n_before, true, split_group), tiled), 0u) << describe(c) << ": split != tiled";
    for (int P : {0, 1, 63, 64, 65, 256, c.n_before / 2}) {
        if (P > c.n_before) continue;
        EXPECT_EQ(bit_mismatches(run(d, P, false, c.rows), tiled), 0u) << describe(c) << ": prefix " << P << " (tiled)";
        EXPECT_EQ(bit_mismatches(run(d, P, true, split_group), tiled), 0u)
            << describe(c) << ": prefix " << P << " (split)";
    }
    for (int group : {1, 3}) {
        EXPECT_EQ(bit_mismatches(run(d, c.n_before, false, group), tiled), 0u)
            << describe(c) << ": rows in launches of " << group << " (tiled)";
        EXPECT_EQ(bit_mismatches(run(d, c.n_before, true, group), tiled), 0u)
            << describe(c) << ": rows in launches of " << group << " (split)";
    }
    // the output written as bf16 for o_proj (CudaBackendOptions::fused_kernels): the f32 output
    // rounded, element for element, from both launches; nothing written as f32
    std::vector<uint16_t> b16;
    const std::vector<float> untouched = run(d, c.n_before, false, c.rows, &b16);
    EXPECT_EQ(bf16_mismatches(b16, tiled), 0u) << describe(c) << ": bf16 output (tiled)";
    EXPECT_TRUE(std::all_of(untouched.begin(), untouched.end(), [](float x) { return std::isnan(x); }));
    run(d, c.n_before, true, split_group, &b16);
    EXPECT_EQ(bf16_mismatches(b16, tiled), 0u) << describe(c) << ": bf16 output (split)";
}

// Small shapes (each block's threads are OS threads here): 4 heads per KV head over three chunks
// (the merge order matters from three on); 7 per KV head (pairs straddle warps and blocks); a sliding window
// with bf16 KV; head_dim 128 with bf16 KV.
INSTANTIATE_TEST_SUITE_P(Shapes, MmaAttentionEmulated,
                         ::testing::Values(Case{4, 1, 32, 0, 530, 9, false}, Case{7, 1, 64, 0, 42, 19, false},
                                           Case{2, 2, 32, 40, 100, 20, true}, Case{4, 2, 128, 0, 61, 5, true}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                             const Case& c = i.param;
                             return "heads" + std::to_string(c.heads) + "_kv" + std::to_string(c.kv) + "_hd" +
                                    std::to_string(c.hd) + "_rows" + std::to_string(c.rows) + "_at" +
                                    std::to_string(c.n_before) + (c.window ? "_window" : "") + (c.bf16 ? "_bf16" : "");
                         });

// A decode step of several sequences in one launch (attn_mma_batch_kernel + attn_combine_batch_kernel):
// sequences of 1 to 17 rows at different depths, one over three chunks, one needing two blocks of
// pairs (the others' second blocks return at once), each with its own keys and prefix boundary.
// Every sequence gets the bits of its own split launch.
TEST(MmaAttentionEmulatedBatch, EverySequenceGetsTheBitsOfItsOwnSplitLaunch) {
    constexpr int kHd = 64;
    const std::vector<std::pair<int, int>> shapes{{300, 1}, {10, 1}, {0, 17}, {530, 3}, {64, 1}, {255, 2}, {5, 1}};
    std::vector<Data> data;
    std::vector<std::unique_ptr<View>> views;
    std::vector<std::vector<float>> alone, together;
    kern::AttnBatch b;
    for (size_t i = 0; i < shapes.size(); ++i) {
        const auto [n_before, rows] = shapes[i];
        data.push_back(make_data(Case{8, 2, kHd, 0, n_before, rows, true}, 77u + uint32_t(i)));
    }
    for (size_t i = 0; i < shapes.size(); ++i) {
        const Data& d = data[i];
        views.push_back(make_view(d, d.c.n_before / 2));
        AttnArgs a = views.back()->a;
        a.q = d.q.data();
        a.n_rows = d.c.rows;
        a.first_pos = d.c.n_before;
        alone.emplace_back(d.q.size(), NAN);
        a.out = alone.back().data();
        launch_rows<kHd>(a, true);
        together.emplace_back(d.q.size(), NAN);
        a.out = together.back().data();
        b.add(a);
    }
    ASSERT_EQ(geom::attn_mma_batches({1, 1, 17, 3, 1, 2, 1}).size(), 1u) << "one launch for the whole step";
    b.pair_blocks = geom::attn_mma_pair_blocks(b.max_rows, 8, 2);
    const geom::Launch l = geom::attn_mma_batch(b.n_seqs, b.max_rows, b.total_rows, 8, 2, kHd, b.max_positions);
    std::vector<float> partial(geom::attn_partial_floats(b.total_rows, 8, kHd, b.max_positions), NAN);
    const int n_chunks = int(l.grid.x);
    cc_emu::launch({l.grid.x, l.grid.y, l.grid.z}, {l.block.x, 1, 1}, l.smem_bytes,
                   [&] { kern::detail::attn_mma_batch_kernel<kHd>(b, partial.data(), n_chunks); });
    const geom::Launch lc = geom::attn_combine_batch(b.n_seqs, b.max_rows, 8, kHd);
    cc_emu::launch({lc.grid.x, lc.grid.y, lc.grid.z}, {lc.block.x, 1, 1}, 0,
                   [&] { kern::detail::attn_combine_batch_kernel<true>(b, partial.data(), n_chunks); });
    for (size_t i = 0; i < shapes.size(); ++i) {
        size_t nan = 0;
        for (float x : together[i]) nan += std::isnan(x);
        EXPECT_EQ(nan, 0u) << "sequence " << i << ": outputs not written";
        EXPECT_EQ(bit_mismatches(together[i], alone[i]), 0u) << "sequence " << i << " (" << describe(data[i].c) << ")";
    }
    // the same launch writing bf16 (the fused path): each sequence's f32 output rounded
    std::vector<std::vector<uint16_t>> b16(shapes.size());
    for (int i = 0; i < b.n_seqs; ++i) {
        b16[size_t(i)].assign(data[size_t(i)].q.size(), 0xffff);
        b.seq[i].out = nullptr;
        b.seq[i].out_bf16 = b16[size_t(i)].data();
    }
    partial.assign(partial.size(), NAN);
    cc_emu::launch({l.grid.x, l.grid.y, l.grid.z}, {l.block.x, 1, 1}, l.smem_bytes,
                   [&] { kern::detail::attn_mma_batch_kernel<kHd>(b, partial.data(), n_chunks); });
    cc_emu::launch({lc.grid.x, lc.grid.y, lc.grid.z}, {lc.block.x, 1, 1}, 0,
                   [&] { kern::detail::attn_combine_batch_kernel<true>(b, partial.data(), n_chunks); });
    for (size_t i = 0; i < shapes.size(); ++i)
        EXPECT_EQ(bf16_mismatches(b16[i], alone[i]), 0u) << "sequence " << i << ": bf16 output";

    // Graph replay's form (attn_mma_batch_table_kernel + attn_combine_batch_table_kernel): the batch
    // read from a table of layers (layer 1 here; layer 0 holds another step's batch, with every
    // sequence one position earlier), the grid and the scratch sized for the KV-length bucket
    // (a power of two: 4 chunks where the longest view needs 3): the bits of the launch above.
    kern::AttnBatch tables[2] = {b, b};
    for (int i = 0; i < b.n_seqs; ++i) {
        tables[1].seq[i].out = together[size_t(i)].data();
        tables[1].seq[i].out_bf16 = nullptr;
        together[size_t(i)].assign(together[size_t(i)].size(), NAN);
        if (tables[0].seq[i].first_pos > 0) --tables[0].seq[i].first_pos;
        tables[0].seq[i].out = nullptr;
        tables[0].seq[i].out_bf16 = nullptr;  // a launch reading layer 0 would fault here
    }
    const int positions = geom::graph_positions_bucket(b.max_positions, 8192);
    ASSERT_GT(geom::attn_n_chunks(positions), n_chunks) << "the bucket's grid is larger than the step needs";
    const geom::Launch lt = geom::attn_mma_batch(b.n_seqs, b.max_rows, b.total_rows, 8, 2, kHd, positions);
    std::vector<float> scratch(geom::attn_partial_floats(b.total_rows, 8, kHd, positions), NAN);
    const int bucket_chunks = int(lt.grid.x);
    cc_emu::launch({lt.grid.x, lt.grid.y, lt.grid.z}, {lt.block.x, 1, 1}, lt.smem_bytes,
                   [&] { kern::detail::attn_mma_batch_table_kernel<kHd>(tables, 1, scratch.data(), bucket_chunks); });
    cc_emu::launch({lc.grid.x, lc.grid.y, lc.grid.z}, {lc.block.x, 1, 1}, 0, [&] {
        kern::detail::attn_combine_batch_table_kernel<true>(tables, 1, scratch.data(), bucket_chunks);
    });
    for (size_t i = 0; i < shapes.size(); ++i)
        EXPECT_EQ(bit_mismatches(together[i], alone[i]), 0u)
            << "replay: sequence " << i << " (" << describe(data[i].c) << ")";
}

}  // namespace
