// Our own tensor-core GEMMs (cuda/gemm_mma_kernels.cuh, CudaBackendOptions::own_gemm) run on the
// CPU, their CUDA code unchanged, through tests/cuda/warp_emulation.h. No GPU has run them yet
// (issue 35); what runs here is their logic, on every machine and in CI:
// - both kernels against a float64 reference (bf16 operands, f32 accumulation);
// - the rows kernel (decode steps, m <= 64) gives every row the tiled kernel's bits (prefill), at
//   every row count: the exactness the backend needs (a decode row == that row inside a prefill);
// - the tiled kernel's 64-row blocks (for grids that 128-row blocks leave too small) give every row
//   the bits of its 128-row blocks;
// - edges: m and n not multiples of the tiles, K a multiple of 16 but not of the 32 of a tile.
// The instruction's own rounding on a tensor core is not modelled (the emulated mma rounds its 16
// products once, in any slot order): the device's self-test rows check the same on the hardware.
#include "tests/cuda/warp_emulation.h"

#include "cuda/gemm_mma_kernels.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace cc::cuda;
namespace km = cc::km;

struct Problem {
    int m, n, k;
    std::vector<uint16_t> x, w;  // bf16
};

Problem make_problem(int m, int n, int k, uint32_t seed) {
    Problem p{m, n, k, std::vector<uint16_t>(size_t(m) * k), std::vector<uint16_t>(size_t(n) * k)};
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& v : p.x) v = km::f32_to_bf16(nd(rng));
    for (auto& v : p.w) v = km::f32_to_bf16(nd(rng) * 0.1f);
    return p;
}

// The rows kernel's body (one thread's share) for mt m-tiles, loads in batches of U steps.
template <int U>
void rows_kernel(int mt, const uint16_t* x, const kern::GemmGroup& g, int m, int k) {
    using namespace kern::detail;
    if (mt == 1)
        gemm_mma_rows_kernel<1, U>(x, g, m, k);
    else if (mt == 2)
        gemm_mma_rows_kernel<2, U>(x, g, m, k);
    else if (mt == 3)
        gemm_mma_rows_kernel<3, U>(x, g, m, k);
    else
        gemm_mma_rows_kernel<4, U>(x, g, m, k);
}

// Y of rows [0, m) of X through one launch of `kernel` for a group of weights (each y holds NaN
// where nothing was written).
void launch_group(const uint16_t* x, std::span<const kern::GemmOut> outs, int m, int k, kern::GemmKernel kernel) {
    using namespace kern::detail;
    const kern::GemmGroup g = kern::make_gemm_group(outs, kernel);
    const geom::Launch l = kern::gemm_group_launch(g, m, kernel);
    const int mt = (m + 15) / 16;
    cc_emu::launch({l.grid.x, l.grid.y, 1}, {l.block.x, 1, 1}, l.smem_bytes, [&] {
        if (kernel == kern::GemmKernel::tiled)
            gemm_mma_tiled_kernel<4>(x, g, m, k);
        else if (kernel == kern::GemmKernel::tiled_half)
            gemm_mma_tiled_kernel<2>(x, g, m, k);
        else if (kernel == kern::GemmKernel::rows)
            rows_kernel<geom::kGemmRowsBatch>(mt, x, g, m, k);
        else
            rows_kernel<geom::kGemmRowsBatchDeep>(mt, x, g, m, k);
    });
}

// y for rows [0, m) of p (X from row0) through one kernel (NaN where nothing was written).
std::vector<float> run_kernel(const Problem& p, int m, kern::GemmKernel kernel, int row0 = 0) {
    std::vector<float> y(size_t(m) * p.n, NAN);
    const kern::GemmOut out{p.w.data(), y.data(), p.n};
    launch_group(p.x.data() + size_t(row0) * p.k, std::span(&out, 1), m, p.k, kernel);
    return y;
}
std::vector<float> run_tiled(const Problem& p, int m) {
    return run_kernel(p, m, kern::GemmKernel::tiled);
}
std::vector<float> run_tiled_half(const Problem& p, int m) {
    return run_kernel(p, m, kern::GemmKernel::tiled_half);
}
std::vector<float> run_rows(const Problem& p, int m, int row0 = 0) {
    return run_kernel(p, m, kern::GemmKernel::rows, row0);
}

double max_rel_error(const Problem& p, const std::vector<float>& y, int m) {
    double worst = 0;
    for (int r = 0; r < m; ++r)
        for (int c = 0; c < p.n; ++c) {
            double ref = 0, mag = 0;
            for (int i = 0; i < p.k; ++i) {
                const double prod = double(km::bf16_to_f32(p.x[size_t(r) * p.k + i])) *
                                    double(km::bf16_to_f32(p.w[size_t(c) * p.k + i]));
                ref += prod;
                mag += std::abs(prod);
            }
            const double got = y[size_t(r) * p.n + c];
            if (!std::isfinite(got)) return INFINITY;
            worst = std::max(worst, std::abs(got - ref) / std::max(mag, 1e-30));
        }
    return worst;
}

bool same_bits(const float* a, const float* b, size_t n) {
    return std::memcmp(a, b, n * sizeof(float)) == 0;
}

TEST(GemmMmaEmulated, BothKernelsMatchFloat64) {
    // m over two block rows, n over two blocks and a partial one, k = 3 steps of 16 (the last tile
    // holds one step)
    const Problem p = make_problem(70, 72, 48, 1);
    const auto tiled = run_tiled(p, p.m);
    // K/16 roundings of a chain of f32 sums: a few ulps of the sum of magnitudes
    EXPECT_LT(max_rel_error(p, tiled, p.m), 1e-5);
    const auto rows = run_rows(p, 37);
    EXPECT_LT(max_rel_error(p, rows, 37), 1e-5);
    // k = 17 steps: the rows kernel's batches of 8 weight loads, full twice, then a tail of one
    const Problem q = make_problem(20, 24, 272, 3);
    const auto q_tiled = run_tiled(q, q.m), q_rows = run_rows(q, q.m);
    EXPECT_LT(max_rel_error(q, q_tiled, q.m), 1e-5);
    EXPECT_TRUE(same_bits(q_rows.data(), q_tiled.data(), q_rows.size()));
}

TEST(GemmMmaEmulated, TheTiledPipelineCoversBlocksEdgesAndTheRing) {
    // two block rows and two block columns, both partial; K = 11 steps: six tiles through the ring
    // of four stages (every stage refilled), the last tile holding one step. A tile used before its
    // copies were waited for would hold the previous tile's values (or NaN) and miss float64.
    const Problem p = make_problem(130, 136, 176, 4);
    const auto tiled = run_tiled(p, p.m);
    EXPECT_LT(max_rel_error(p, tiled, p.m), 1e-5);
    // the rows kernel gives the last block row's rows the same bits
    const auto rows = run_rows(p, 2, 128);
    EXPECT_TRUE(same_bits(rows.data(), tiled.data() + size_t(128) * p.n, size_t(2) * p.n));
    // an odd n: the stores of the last column one value at a time
    const Problem q = make_problem(9, 131, 32, 5);
    const auto q_tiled = run_tiled(q, q.m);
    EXPECT_LT(max_rel_error(q, q_tiled, q.m), 1e-5);
    EXPECT_TRUE(same_bits(run_rows(q, q.m).data(), q_tiled.data(), q_tiled.size()));
}

TEST(GemmMmaEmulated, SixtyFourRowBlocksGiveTheBitsOfHundredTwentyEightRowBlocks) {
    // three block rows of 64 (the last partial) over two partial column blocks, K through the whole
    // ring (11 steps): each row's bits those of the 128-row blocks, and of the rows kernel where it
    // runs, and near float64
    const Problem p = make_problem(150, 136, 176, 9);
    const auto tall = run_tiled(p, p.m), half = run_tiled_half(p, p.m);
    EXPECT_LT(max_rel_error(p, half, p.m), 1e-5);
    EXPECT_TRUE(same_bits(half.data(), tall.data(), half.size()));
    const auto rows = run_rows(p, 21, 60);  // rows 60..80: across the first 64-row block's edge
    EXPECT_TRUE(same_bits(rows.data(), half.data() + size_t(60) * p.n, size_t(21) * p.n));
    // a single partial block row, an odd n, a K of one step
    const Problem q = make_problem(65, 131, 16, 10);
    const auto q_half = run_tiled_half(q, q.m);
    EXPECT_LT(max_rel_error(q, q_half, q.m), 1e-5);
    EXPECT_TRUE(same_bits(q_half.data(), run_tiled(q, q.m).data(), q_half.size()));
}

TEST(GemmMmaEmulated, BlocksOfSixtyFourRowsOnlyWhereOneHundredTwentyEightLeaveSmsIdle) {
    const int sms = 132;  // an H100 SXM
    auto kernel = [&](int m, std::vector<int> ns, int sm_count) {
        std::vector<kern::GemmOut> outs;
        for (int n : ns) outs.push_back({nullptr, nullptr, n});
        return kern::gemm_kernel_for(m, outs, sm_count);
    };
    // the 8B shape's 512-row prefill chunk: o_proj and down_proj (n 4096) have 4 x 32 = 128 blocks
    // of 128 rows for 132 SMs that hold two each, q | k | v (4096 + 1024 + 1024) 4 x 48 = 192
    EXPECT_EQ(kernel(512, {4096}, sms), kern::GemmKernel::tiled_half);
    EXPECT_EQ(kernel(512, {4096, 1024, 1024}, sms), kern::GemmKernel::tiled_half);
    // gate | up (2 x 12288): 4 x 192 = 768 blocks; a 3,000-row chunk: 24 x 32 = 768
    EXPECT_EQ(kernel(512, {12288, 12288}, sms), kern::GemmKernel::tiled);
    EXPECT_EQ(kernel(3000, {4096}, sms), kern::GemmKernel::tiled);
    EXPECT_EQ(geom::gemm_mma_block_rows(1024, 33, sms), geom::kGemmMmaTile);  // 8 x 33 = 264: exactly full
    EXPECT_EQ(geom::gemm_mma_block_rows(1024, 32, sms), geom::kGemmMmaTileHalf);
    // decode and short suffixes: the rows kernel, its loads in deep batches where the launch has
    // under 8 warps an SM: o_proj and down_proj (512 warps), q | k | v (768); gate | up (3,072) and
    // the lm_head (18,992) keep the shallow ones; no device count: 128 rows, never deep
    EXPECT_EQ(kernel(64, {4096}, sms), kern::GemmKernel::rows_deep);
    EXPECT_EQ(kernel(1, {4096, 1024, 1024}, sms), kern::GemmKernel::rows_deep);
    EXPECT_EQ(kernel(1, {12288, 12288}, sms), kern::GemmKernel::rows);
    EXPECT_EQ(kernel(16, {151936}, sms), kern::GemmKernel::rows);
    EXPECT_EQ(kernel(1, {4096}, 0), kern::GemmKernel::rows);
    EXPECT_TRUE(geom::gemm_rows_deep(1055, sms));
    EXPECT_FALSE(geom::gemm_rows_deep(1056, sms));
    EXPECT_EQ(kernel(65, {4096}, sms), kern::GemmKernel::tiled_half);
    EXPECT_EQ(kernel(512, {4096}, 0), kern::GemmKernel::tiled);
    // the launch: rows of 64, the same columns, less shared memory
    const geom::Launch half = geom::gemm_mma_tiled(512, 4096, geom::kGemmMmaTileHalf);
    EXPECT_EQ(half.grid.y, 8u);
    EXPECT_EQ(half.grid.x, 32u);
    EXPECT_EQ(half.smem_bytes, size_t(48) << 10);
    EXPECT_THROW(geom::gemm_mma_tiled(512, 4096, 32), std::invalid_argument);
}

TEST(GemmMmaEmulated, AGroupOfWeightsInOneLaunchGivesEachItsOwnBits) {
    // q | k | v or gate | up: three weights of different n (not multiples of either kernel's
    // blocks) read the same X in one launch; each Y == that weight's launch alone, in both kernels
    const int k = 48;
    const Problem a = make_problem(70, 72, k, 6), b = make_problem(70, 24, k, 7), c = make_problem(70, 40, k, 8);
    struct Case {
        int m;
        kern::GemmKernel kernel;
    };
    for (const Case cs :
         {Case{1, kern::GemmKernel::rows}, Case{19, kern::GemmKernel::rows}, Case{19, kern::GemmKernel::rows_deep},
          Case{70, kern::GemmKernel::tiled}, Case{70, kern::GemmKernel::tiled_half}}) {
        const int m = cs.m;
        SCOPED_TRACE("m " + std::to_string(m) + " kernel " + std::to_string(int(cs.kernel)));
        std::vector<float> ya(size_t(m) * a.n, NAN), yb(size_t(m) * b.n, NAN), yc(size_t(m) * c.n, NAN);
        const kern::GemmOut outs[] = {
            {a.w.data(), ya.data(), a.n}, {b.w.data(), yb.data(), b.n}, {c.w.data(), yc.data(), c.n}};
        launch_group(a.x.data(), outs, m, k, cs.kernel);
        for (const auto* p : {&a, &b, &c}) {
            Problem alone = *p;
            alone.x = a.x;  // the group's X
            const auto want = run_kernel(alone, m, cs.kernel);
            const auto& got = p == &a ? ya : p == &b ? yb : yc;
            EXPECT_TRUE(same_bits(got.data(), want.data(), want.size())) << "weight of n " << p->n;
        }
    }
    EXPECT_THROW(kern::make_gemm_group({}, kern::GemmKernel::rows), std::invalid_argument);
}

TEST(GemmMmaEmulated, EveryRowCountGivesEachRowTheTiledKernelsBits) {
    // decode steps (1 row), a few sequences, and up to the rows kernel's 64: each row's bits equal
    // that row of the tiled kernel over all 70 rows, whichever rows share its m-tile
    const Problem p = make_problem(70, 40, 64, 2);
    const auto tiled = run_tiled(p, p.m);
    for (int m : {1, 2, 5, 16, 17, 33, 64}) {
        SCOPED_TRACE("m " + std::to_string(m));
        for (int row0 : {0, 3}) {
            if (row0 + m > p.m) continue;
            const auto rows = run_rows(p, m, row0);
            EXPECT_TRUE(same_bits(rows.data(), tiled.data() + size_t(row0) * p.n, size_t(m) * p.n))
                << "from row " << row0;
        }
    }
    // and the tiled kernel at another row count: the rows it shares, the same bits
    const auto tiled_few = run_tiled(p, 21);
    EXPECT_TRUE(same_bits(tiled_few.data(), tiled.data(), size_t(21) * p.n));
}

TEST(GemmMmaEmulated, DeepLoadBatchesGiveTheShallowOnesBits) {
    // the rows kernel's loads in batches of 16 steps (few warps an SM) against batches of 8, and
    // the tiled kernel: K = 37 steps (two deep batches, then a tail of 5; four shallow ones and 5),
    // 1 to 4 m-tiles, a partial warp of outputs (n = 44)
    const Problem p = make_problem(64, 44, 16 * 37, 9);
    const auto tiled = run_tiled(p, p.m);
    EXPECT_LT(max_rel_error(p, tiled, p.m), 1e-5);
    for (int m : {1, 17, 37, 64}) {
        SCOPED_TRACE("m " + std::to_string(m));
        const auto deep = run_kernel(p, m, kern::GemmKernel::rows_deep);
        EXPECT_TRUE(same_bits(deep.data(), run_rows(p, m).data(), deep.size()));
        EXPECT_TRUE(same_bits(deep.data(), tiled.data(), deep.size()));
    }
}

// Shared-memory banks are 32 words of 4 bytes; an 8-byte load per lane is served half a warp at a
// time, a 16-byte store (cp.async) a quarter at a time. Without bank conflicts each such group
// touches every bank at most once. (How fast the kernel is, only a device can say; whether its
// shared-memory layout makes the hardware serialize is arithmetic.)
TEST(GemmMmaEmulated, TiledKernelSharedMemoryHasNoBankConflicts) {
    constexpr int KT = geom::kGemmMmaKTile;
    auto byte_of = [&](int row, int chunk) { return 2 * (row * KT + 8 * kern::detail::gemm_tile_chunk(row, chunk)); };
    // fragment loads: lane (g, t) reads 8 bytes of row r0 + g at k = 16 s + 4t (r0 a multiple of 8)
    for (int r0 = 0; r0 < geom::kGemmMmaTile; r0 += 8)
        for (int s = 0; s < KT / 16; ++s)
            for (int half = 0; half < 2; ++half) {
                int uses[32] = {};
                for (int lane = 16 * half; lane < 16 * half + 16; ++lane) {
                    const int g = lane / 4, t = lane % 4;
                    const int byte = byte_of(r0 + g, 2 * s + t / 2) + 8 * (t % 2);
                    ++uses[(byte / 4) % 32];
                    ++uses[(byte / 4 + 1) % 32];
                }
                for (int b = 0; b < 32; ++b) EXPECT_EQ(uses[b], 1) << "rows " << r0 << " step " << s << " bank " << b;
            }
    // the copies: thread e's piece is row e / 4, piece e % 4; 8 threads a phase
    for (int e0 = 0; e0 < geom::kGemmMmaThreads; e0 += 8) {
        int uses[32] = {};
        for (int e = e0; e < e0 + 8; ++e)
            for (int word = 0; word < 4; ++word) ++uses[(byte_of(e / 4, e % 4) / 4 + word) % 32];
        for (int b = 0; b < 32; ++b) EXPECT_EQ(uses[b], 1) << "copies from thread " << e0 << " bank " << b;
    }
}

// gemm_mma_rows_swiglu_kernel's body for mt m-tiles, loads in batches of U steps.
template <int U>
void swiglu_kernel(int mt, const Problem& gate, const Problem& up, uint16_t* act, int m, int n, int k) {
    using namespace kern::detail;
    const uint16_t *x = gate.x.data(), *wg = gate.w.data(), *wu = up.w.data();
    if (mt == 1)
        gemm_mma_rows_swiglu_kernel<1, U>(x, wg, wu, act, m, n, k);
    else if (mt == 2)
        gemm_mma_rows_swiglu_kernel<2, U>(x, wg, wu, act, m, n, k);
    else if (mt == 3)
        gemm_mma_rows_swiglu_kernel<3, U>(x, wg, wu, act, m, n, k);
    else
        gemm_mma_rows_swiglu_kernel<4, U>(x, wg, wu, act, m, n, k);
}

TEST(GemmMmaEmulated, TheSwigluFormGivesTheBitsOfGateAndUpThenSwiglu) {
    // gemm_mma_rows_swiglu_kernel (CudaBackendOptions::fused_kernels, decode): gate and up side by
    // side in one warp, swiglu in the registers; act == bf16(swiglu(gate, up)) of the rows kernel's
    // gate and up, at 1..4 m-tiles, with a partial block and a partial warp of outputs (n = 44) and
    // K through full batches and a tail (17 steps).
    using namespace kern::detail;
    for (int n : {72, 44}) {
        const int k = 272;
        Problem gate = make_problem(64, n, k, 11), up = make_problem(64, n, k, 12);
        up.x = gate.x;  // both read the same rows
        for (int m : {1, 5, 17, 37, 64}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " m=" + std::to_string(m));
            const auto g = run_rows(gate, m), u = run_rows(up, m);
            std::vector<uint16_t> want(size_t(m) * n);
            for (size_t i = 0; i < want.size(); ++i) want[i] = km::f32_to_bf16(km::swiglu(g[i], u[i]));
            const geom::Launch l = geom::gemm_mma_rows(m, n);
            const int mt = (m + 15) / 16;
            for (bool deep : {false, true}) {
                std::vector<uint16_t> act(size_t(m) * n, 0xffff);  // a NaN where nothing was written
                cc_emu::launch({l.grid.x, 1, 1}, {l.block.x, 1, 1}, 0, [&] {
                    if (deep)
                        swiglu_kernel<geom::kGemmRowsBatchDeep>(mt, gate, up, act.data(), m, n, k);
                    else
                        swiglu_kernel<geom::kGemmRowsBatch>(mt, gate, up, act.data(), m, n, k);
                });
                EXPECT_EQ(act, want) << (deep ? "deep batches" : "shallow batches");
            }
            // and the gate really is a GEMM (not a vacuous comparison of two wrong things)
            EXPECT_LT(max_rel_error(gate, g, m), 1e-5);
        }
    }
}

TEST(GemmMmaEmulated, GeometryRefusesWhatTheKernelsCannotRun) {
    EXPECT_TRUE(geom::gemm_mma_shape_ok(4096, 4096));
    EXPECT_TRUE(geom::gemm_mma_shape_ok(151936, 4096));
    EXPECT_FALSE(geom::gemm_mma_shape_ok(64, 40));  // K not a multiple of 16
    EXPECT_FALSE(geom::gemm_mma_shape_ok(64, 8));
    EXPECT_THROW(geom::gemm_mma_rows(65, 64), std::invalid_argument);
    EXPECT_THROW(geom::gemm_mma_rows(0, 64), std::invalid_argument);
    EXPECT_EQ(geom::gemm_mma_rows(1, 4096).grid.x, 4096u / (8 * geom::kGemmRowsWarps));
    EXPECT_EQ(geom::gemm_mma_tiled(3000, 4096).grid.y, 24u);
    EXPECT_EQ(geom::gemm_mma_tiled(3000, 4096).grid.x, 32u);
    EXPECT_EQ(geom::gemm_mma_tiled(3000, 4096).smem_bytes, size_t(64) << 10);
    EXPECT_LE(geom::gemm_mma_tiled(3000, 4096).smem_bytes, geom::kSmemMaxBytes);
}

}  // namespace
