// The RMSNorm kernels (cuda/row_kernels.cuh) run on the CPU, their CUDA code unchanged, through
// tests/cuda/warp_emulation.h: every machine and CI, no GPU. What runs here is their logic:
// - rmsnorm_kernel against float64 (the strided sums and the block's tree add up every element once);
// - the fused residual add + RMSNorm (CudaBackendOptions::fused_kernels) gives x and the normalised
//   row exactly the bits of the add followed by rmsnorm_kernel, at dims below, at and above the
//   block's 256 threads and not multiples of it;
// - the row indirection of the final norm (rows may repeat), and a row's bits alone == in a batch;
// - argmax_kernel (greedy tokens on the device) picks what the host's km::argmax_row picks, for
//   ties within and across threads' strides, ±0, NaN, infinities and rows shorter than the block;
//   its Gumbel-max sampling picks the largest km::gumbel_score, lowest index on ties.
// The device's self-test rows check the same on the hardware.
#include "tests/cuda/warp_emulation.h"

#include "cuda/launch_geometry.h"
#include "cuda/row_kernels.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace cc::cuda;
namespace km = cc::km;

constexpr float kEps = 1e-6f;

std::vector<float> normals(std::mt19937& rng, size_t n, float scale) {
    std::normal_distribution<float> nd(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

// rmsnorm_kernel<kOutBf16> over n_rows rows (rows: the source row of each, or empty for 0..n-1)
template <bool kOutBf16, class T>
std::vector<T> run_rmsnorm(const std::vector<float>& x, const std::vector<int32_t>& rows, const std::vector<float>& w,
                           int n_rows, int dim) {
    std::vector<T> y(size_t(n_rows) * dim);
    std::memset(y.data(), 0xff, y.size() * sizeof(T));  // NaN where nothing was written
    const geom::Launch l = geom::row_blocks(n_rows);
    cc_emu::launch({l.grid.x, 1, 1}, {l.block.x, 1, 1}, l.smem_bytes, [&] {
        kern::detail::rmsnorm_kernel<kOutBf16>(x.data(), rows.empty() ? nullptr : rows.data(), w.data(), y.data(), dim,
                                               kEps);
    });
    return y;
}

// add_rmsnorm_kernel: x += y in place, returns the bf16 rows
std::vector<uint16_t> run_add_rmsnorm(std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& w,
                                      int n_rows, int dim) {
    std::vector<uint16_t> out(size_t(n_rows) * dim, 0xffff);
    const geom::Launch l = geom::row_blocks(n_rows);
    cc_emu::launch({l.grid.x, 1, 1}, {l.block.x, 1, 1}, l.smem_bytes,
                   [&] { kern::detail::add_rmsnorm_kernel(x.data(), y.data(), w.data(), out.data(), dim, kEps); });
    return out;
}

// argmax_kernel over n_rows rows of `vocab` logits (sample: Gumbel-max at `temperature`)
std::vector<int32_t> run_argmax(const std::vector<float>& logits, int n_rows, int vocab, bool sample = false,
                                float temperature = 1.0f, uint64_t seed = 0, uint64_t step = 0) {
    std::vector<int32_t> out(size_t(n_rows), -7);  // not an index: shows a row not written
    const geom::Launch l = geom::argmax_blocks(n_rows);
    cc_emu::launch({l.grid.x, 1, 1}, {l.block.x, 1, 1}, l.smem_bytes, [&] {
        kern::detail::argmax_kernel(logits.data(), vocab, out.data(), sample ? 1 : 0, temperature, seed, step);
    });
    return out;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST(RowKernelsEmulated, RmsnormMatchesFloat64) {
    std::mt19937 rng(1);
    for (int dim : {64, 1000, 2560}) {
        SCOPED_TRACE("dim=" + std::to_string(dim));
        const int rows = 3;
        const auto x = normals(rng, size_t(rows) * dim, 3.0f), w = normals(rng, size_t(dim), 1.0f);
        const auto y = run_rmsnorm<false, float>(x, {}, w, rows, dim);
        double worst = 0;
        for (int r = 0; r < rows; ++r) {
            double ss = 0;
            for (int i = 0; i < dim; ++i) ss += double(x[size_t(r) * dim + i]) * x[size_t(r) * dim + i];
            const double inv = 1.0 / std::sqrt(ss / dim + kEps);
            for (int i = 0; i < dim; ++i) {
                const double ref = double(w[size_t(i)]) * (double(x[size_t(r) * dim + i]) * inv);
                const double got = y[size_t(r) * dim + i];
                ASSERT_TRUE(std::isfinite(got)) << "row " << r << " element " << i << " not written";
                worst = std::max(worst, std::abs(got - ref) / std::max(1.0, std::abs(ref)));
            }
        }
        // a strided f32 sum per thread then an 8-level tree: a few ulps (the device's bound)
        EXPECT_LT(worst, 4 * 1.2e-7 * (double(dim) / geom::kRowThreads + 8 + 4));
        // the bf16 output is the f32 output rounded
        const auto yb = run_rmsnorm<true, uint16_t>(x, {}, w, rows, dim);
        for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(yb[i], km::f32_to_bf16(y[i])) << i;
    }
}

TEST(RowKernelsEmulated, FusedResidualAddAndNormGiveTheUnfusedBits) {
    std::mt19937 rng(2);
    for (int dim : {64, 256, 1000, 4096}) {
        SCOPED_TRACE("dim=" + std::to_string(dim));
        const int rows = 3;
        const auto x0 = normals(rng, size_t(rows) * dim, 3.0f), y = normals(rng, size_t(rows) * dim, 1.0f);
        const auto w = normals(rng, size_t(dim), 1.0f);
        // unfused: add_kernel's x[i] = x[i] + y[i], then rmsnorm_kernel<true>
        std::vector<float> x_unfused = x0;
        for (size_t i = 0; i < x_unfused.size(); ++i) x_unfused[i] = x_unfused[i] + y[i];
        const auto want = run_rmsnorm<true, uint16_t>(x_unfused, {}, w, rows, dim);
        std::vector<float> x_fused = x0;
        const auto got = run_add_rmsnorm(x_fused, y, w, rows, dim);
        EXPECT_TRUE(same_bits(x_fused, x_unfused)) << "the residual stream differs";
        EXPECT_TRUE(same_bits(got, want)) << "the normalised rows differ";
        // and the rows were all written (a bf16 NaN is 0xffff before the launch)
        for (uint16_t v : got) ASSERT_TRUE(std::isfinite(km::bf16_to_f32(v)));
    }
}

TEST(RowKernelsEmulated, ARowsBitsDoNotDependOnItsNeighboursOrItsIndex) {
    std::mt19937 rng(3);
    const int dim = 1000, rows = 4;
    const auto x = normals(rng, size_t(rows) * dim, 3.0f), w = normals(rng, size_t(dim), 1.0f);
    const auto all = run_rmsnorm<false, float>(x, {}, w, rows, dim);
    // the final norm's indirection: rows repeat and come in any order
    const std::vector<int32_t> pick = {2, 0, 2};
    const auto picked = run_rmsnorm<false, float>(x, pick, w, int(pick.size()), dim);
    for (size_t j = 0; j < pick.size(); ++j)
        EXPECT_EQ(0, std::memcmp(picked.data() + j * dim, all.data() + size_t(pick[j]) * dim, size_t(dim) * 4)) << j;
    // row 3 alone
    const std::vector<float> x3(x.begin() + 3 * dim, x.end());
    const auto alone = run_rmsnorm<false, float>(x3, {}, w, 1, dim);
    EXPECT_EQ(0, std::memcmp(alone.data(), all.data() + size_t(3) * dim, size_t(dim) * 4));
    // fused too: row 1 alone == row 1 of the batch
    std::vector<float> xb = x, x1(x.begin() + dim, x.begin() + 2 * dim);
    const auto y = normals(rng, size_t(rows) * dim, 1.0f);
    const std::vector<float> y1(y.begin() + dim, y.begin() + 2 * dim);
    const auto batch = run_add_rmsnorm(xb, y, w, rows, dim);
    const auto one = run_add_rmsnorm(x1, y1, w, 1, dim);
    EXPECT_EQ(0, std::memcmp(one.data(), batch.data() + dim, size_t(dim) * 2));
    EXPECT_EQ(0, std::memcmp(x1.data(), xb.data() + dim, size_t(dim) * 4));
}

// Greedy tokens on the device are the host's: the kernel's pick == km::argmax_row for every row.
TEST(RowKernelsEmulated, ArgmaxPicksTheHostsToken) {
    std::mt19937 rng(4);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const int T = int(geom::kRowThreads);
    for (int vocab : {1, 5, T - 1, T, T + 1, 1000, 151936}) {
        SCOPED_TRACE("vocab=" + std::to_string(vocab));
        std::vector<std::vector<float>> rows;
        auto row = [&] { return normals(rng, size_t(vocab), 3.0f); };
        rows.push_back(row());  // plain
        auto set = [&](std::vector<float> r, std::initializer_list<std::pair<int, float>> at) {
            for (auto [i, v] : at)
                if (i < vocab) r[size_t(i)] = v;
            rows.push_back(std::move(r));
        };
        set(row(), {{vocab - 1, 50.0f}});                                        // the last index
        set(row(), {{0, 50.0f}});                                                // the first
        set(row(), {{3, 50.0f}, {3 + T, 50.0f}});                                // a tie inside one thread's stride
        set(row(), {{T + 7, 50.0f}, {9, 50.0f}});                                // a tie across threads: 9 wins
        set(row(), {{vocab - 1, 50.0f}, {vocab / 2, 50.0f}});                    // the lower of two
        set(row(), {{1, 0.0f}, {0, -0.0f}});                                     // not the max: ±0 elsewhere
        set(std::vector<float>(size_t(vocab), -1.0f), {{2, -0.0f}, {1, 0.0f}});  // -0 == +0: index 1
        set(row(), {{0, nan}, {4, nan}, {6, 60.0f}});                            // NaN never wins
        set(std::vector<float>(size_t(vocab), nan), {});                         // all NaN: 0
        set(std::vector<float>(size_t(vocab), nan), {{vocab - 1, -inf}});        // NaN and one -inf: the -inf
        set(std::vector<float>(size_t(vocab), -inf), {});                        // all -inf: 0
        set(row(), {{vocab / 3, inf}, {vocab - 1, inf}});                        // +inf ties
        std::vector<float> all;
        for (const auto& r : rows) all.insert(all.end(), r.begin(), r.end());
        const auto got = run_argmax(all, int(rows.size()), vocab);
        for (size_t r = 0; r < rows.size(); ++r)
            EXPECT_EQ(got[r], km::argmax_row(rows[r].data(), vocab)) << "row " << r;
        // a row alone gets its pick in the batch
        const auto alone = run_argmax(rows[3], 1, vocab);
        EXPECT_EQ(alone[0], got[3]);
    }
}

// Gumbel-max sampling (not used by the engine yet: the self-test checks its frequencies on the
// device): the kernel picks the largest km::gumbel_score of its row's logits, the lowest index on
// ties, and the draw is a function of (seed, step, row, index) only.
TEST(RowKernelsEmulated, SamplingPicksTheLargestGumbelScore) {
    std::mt19937 rng(5);
    const int rows = 4, vocab = 3000;
    const float temperature = 0.7f;
    const auto logits = normals(rng, size_t(rows) * vocab, 2.0f);
    const auto got = run_argmax(logits, rows, vocab, true, temperature, 1234, 9);
    for (int r = 0; r < rows; ++r) {
        std::vector<float> scores(static_cast<size_t>(vocab));
        for (int i = 0; i < vocab; ++i)
            scores[size_t(i)] = km::gumbel_score(logits[size_t(r) * vocab + i], temperature,
                                                 km::uniform01(1234, 9, size_t(r) * vocab + size_t(i)));
        EXPECT_EQ(got[size_t(r)], km::argmax_row(scores.data(), vocab)) << "row " << r;
    }
    EXPECT_EQ(run_argmax(logits, rows, vocab, true, temperature, 1234, 9), got) << "same seed and step: same draw";
    EXPECT_NE(run_argmax(logits, rows, vocab, true, temperature, 1234, 10), got) << "another step: another draw";
}

}  // namespace
