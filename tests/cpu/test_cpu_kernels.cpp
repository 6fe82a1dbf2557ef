// The CPU kernels of every instruction-set path this machine has, against float64 references
// (tolerances scale with the reduction length), and their exactness properties (bit-equal
// results whatever the batch, blocking, threads or prefix/suffix split).
#include "core/cpu/kernels.h"
#include "core/base/kernel_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <limits>
#include <vector>

using namespace cc::cpu;

namespace {

std::vector<Isa> available_isas() {
    std::vector<Isa> out;
    for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
        if (isa_supported(i)) out.push_back(i);
    return out;
}

std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

bool bits_equal(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

class CpuKernels : public ::testing::TestWithParam<Isa> {};

std::string isa_param_name(const ::testing::TestParamInfo<Isa>& info) { return isa_name(info.param); }

}  // namespace

TEST(cpu_isa, names_and_resolution) {
    EXPECT_EQ(parse_isa("avx2"), Isa::avx2);
    EXPECT_THROW(parse_isa("sse9"), std::runtime_error);
    EXPECT_TRUE(isa_supported(Isa::scalar));
    EXPECT_EQ(resolve_isa("scalar"), Isa::scalar);
    EXPECT_THROW(resolve_isa("neon"), std::runtime_error);
}

TEST_P(CpuKernels, gemm_matches_float64_for_odd_shapes) {
    const Kernels& k = kernels_for(GetParam());
    ThreadPool pool(2);
    Workspace ws(pool.n_threads());
    for (int m : {1, 3, 17})
        for (int n : {1, 5, 33})
            for (int kk : {1, 7, 172, 1000})
                for (bool bf16 : {false, true}) {
                    auto x = random_vec(size_t(m) * kk, 10 + m + kk);
                    auto wf = random_vec(size_t(n) * kk, 20 + n + kk);
                    std::vector<uint16_t> wb(wf.size());
                    for (size_t i = 0; i < wf.size(); ++i) {
                        wb[i] = cc::km::f32_to_bf16(wf[i]);
                        if (bf16) wf[i] = cc::km::bf16_to_f32(wb[i]);
                    }
                    Matrix w{bf16 ? static_cast<const void*>(wb.data()) : wf.data(), bf16, n, kk};
                    std::vector<float> y(size_t(m) * n + 1, 12345.0f);
                    k.gemm(pool, ws, x.data(), m, w, y.data());
                    ASSERT_EQ(y.back(), 12345.0f) << "wrote past the output";
                    for (int i = 0; i < m; ++i)
                        for (int j = 0; j < n; ++j) {
                            double ref = 0, mag = 0;
                            for (int t = 0; t < kk; ++t) {
                                ref += double(x[size_t(i) * kk + t]) * wf[size_t(j) * kk + t];
                                mag += std::abs(double(x[size_t(i) * kk + t]) * wf[size_t(j) * kk + t]);
                            }
                            const double tol = 2e-7 * std::sqrt(double(kk)) * mag + 1e-30;
                            ASSERT_NEAR(y[size_t(i) * n + j], ref, tol)
                                << "m=" << m << " n=" << n << " k=" << kk << " bf16=" << bf16 << " at (" << i << ", " << j << ")";
                        }
                }
}

// A row's GEMM result depends on nothing but the row: every batch size, row offset and thread
// count gives the same bits.
TEST_P(CpuKernels, gemm_row_is_independent_of_batch_and_threads) {
    const Kernels& k = kernels_for(GetParam());
    const int m = 37, n = 70, kk = 600;
    auto x = random_vec(size_t(m) * kk, 1);
    auto wf = random_vec(size_t(n) * kk, 2);
    Matrix w{wf.data(), false, n, kk};
    ThreadPool pool1(1);
    Workspace ws1(1);
    std::vector<float> full(size_t(m) * n);
    k.gemm(pool1, ws1, x.data(), m, w, full.data());
    for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        Workspace ws(threads);
        for (int start : {0, 5, 13})
            for (int rows : {1, 2, 11, 24}) {
                if (start + rows > m) continue;
                std::vector<float> part(size_t(rows) * n);
                k.gemm(pool, ws, x.data() + size_t(start) * kk, rows, w, part.data());
                ASSERT_TRUE(bits_equal(part.data(), full.data() + size_t(start) * n, part.size()))
                    << "threads=" << threads << " start=" << start << " rows=" << rows;
            }
    }
}

// Prepacked weights (pack_matrix) in F32 and BF16 give the very bits the row-major GEMM gives for
// the same values, for every batch size (the single-row decode path, one micro-tile read in
// place, several tiles through converted scratch; on AVX2 and AVX-512 the row tiles down the whole
// of K up to kRowsWholeKMax rows, with 1-14 panels side by side and a short last group: 5 and 13
// panels of 16, 3 and 7 of 32; the blocked GEMM past them: 1,025 rows, on small shapes), thread
// count (fewer panel groups than threads: a task per row tile) and ragged shape.
TEST_P(CpuKernels, packed_gemm_equals_row_major_gemm_bit_for_bit) {
    const Kernels& k = kernels_for(GetParam());
    for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        Workspace ws(threads);
        for (int n : {1, 5, 33, 80, 200})
            for (int kk : {1, 7, 33, 300, 1000})
                for (WFormat f : {WFormat::f32, WFormat::bf16}) {
                    auto wf = random_vec(size_t(n) * kk, 30 + n + kk);
                    Matrix src{wf.data(), false, n, kk};
                    const PackedMatrix packed = pack_matrix(pool, src, f, k.gemm_nr);
                    if (f == WFormat::bf16)  // the values the packed matrix holds
                        for (auto& v : wf) v = cc::km::bf16_to_f32(cc::km::f32_to_bf16(v));
                    std::vector<int> ms{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 23, 24, 40};
                    if (n <= 33 && kk <= 33) ms.push_back(1025);
                    for (int m : ms) {
                        auto x = random_vec(size_t(m) * kk, 40 + m);
                        std::vector<float> ref(size_t(m) * n), got(size_t(m) * n + 1, 12345.0f);
                        k.gemm(pool, ws, x.data(), m, src, ref.data());
                        k.gemm(pool, ws, x.data(), m, packed.view, got.data());
                        ASSERT_EQ(got.back(), 12345.0f) << "wrote past the output";
                        ASSERT_TRUE(bits_equal(got.data(), ref.data(), ref.size()))
                            << wformat_name(f) << " m=" << m << " n=" << n << " k=" << kk << " threads=" << threads;
                    }
                }
    }
}

// q8 holds, per feature and block of 32 inputs, scale = f16(max |w| / 127) and q = round(w / scale):
// the packed GEMM equals the row-major GEMM over exactly those dequantised values (float(q) * scale,
// exact), so the format changes the weights but never the per-element FMA chain.
TEST_P(CpuKernels, q8_gemm_equals_gemm_over_dequantised_weights) {
    const Kernels& k = kernels_for(GetParam());
    ThreadPool pool(2);
    Workspace ws(2);
    for (int n : {3, 70})
        for (int kk : {5, 32, 33, 100, 600}) {
            auto wf = random_vec(size_t(n) * kk, 50 + n + kk, 0.05f);
            std::fill(wf.begin() + kk, wf.begin() + 2 * kk, 0.0f);  // row 1 all zero: scale 0, q 0
            const PackedMatrix packed = pack_matrix(pool, Matrix{wf.data(), false, n, kk}, WFormat::q8, k.gemm_nr);
            std::vector<float> deq(wf.size());
            for (int r = 0; r < n; ++r)
                for (int b0 = 0; b0 < kk; b0 += 32) {
                    const int len = std::min(32, kk - b0);
                    const float* w = &wf[size_t(r) * kk + b0];
                    float amax = 0.0f;
                    for (int i = 0; i < len; ++i) amax = std::max(amax, std::fabs(w[i]));
                    const float scale = cc::km::f16_to_f32(cc::km::f32_to_f16(amax / 127.0f));
                    for (int i = 0; i < len; ++i) {
                        const float q = scale > 0 ? std::clamp(std::nearbyint(w[i] / scale), -127.0f, 127.0f) : 0.0f;
                        deq[size_t(r) * kk + b0 + i] = q * scale;
                        ASSERT_LE(std::fabs(q * scale - w[i]), 0.5f * scale * (1 + 1e-6f) + 1e-30f);
                    }
                }
            for (int m : {1, 4, 7, 8, 12, 13, 30}) {
                auto x = random_vec(size_t(m) * kk, 60 + m);
                std::vector<float> ref(size_t(m) * n), got(size_t(m) * n);
                k.gemm(pool, ws, x.data(), m, Matrix{deq.data(), false, n, kk}, ref.data());
                k.gemm(pool, ws, x.data(), m, packed.view, got.data());
                ASSERT_TRUE(bits_equal(got.data(), ref.data(), ref.size())) << "m=" << m << " n=" << n << " k=" << kk;
            }
        }
}

// bf16dot: the activations rounded to BF16, pairs multiplied by VDPBF16PS into F32. Every row's
// bits are those of the single-row (decode) path, whatever the batch, ragged shape or threads, and
// the result is the float64 dot product of the BF16-rounded operands to within F32 summation.
TEST(cpu_bf16dot, gemm_rows_equal_the_decode_path_and_match_float64) {
    if (!bf16dot::supported()) GTEST_SKIP() << "this CPU has no AVX-512 BF16 (vdpbf16ps): the bf16dot GEMM cannot run here";
    const auto round = [](float v) { return cc::km::bf16_to_f32(cc::km::f32_to_bf16(v)); };
    for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        Workspace ws(threads);
        for (int n : {1, 5, 33, 200})
            for (int kk : {1, 2, 7, 33, 300, 1000}) {
                auto wf = random_vec(size_t(n) * kk, 70 + n + kk);
                const PackedMatrix packed = pack_matrix(pool, Matrix{wf.data(), false, n, kk}, WFormat::bf16dot, bf16dot::panel_width());
                for (int m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 23, 24, 40}) {
                    auto x = random_vec(size_t(m) * kk, 80 + m);
                    std::vector<float> got(size_t(m) * n + 1, 12345.0f);
                    bf16dot::gemm(pool, ws, x.data(), m, packed.view, got.data());
                    ASSERT_EQ(got.back(), 12345.0f) << "wrote past the output";
                    for (int i = 0; i < m; ++i) {
                        std::vector<float> one(static_cast<size_t>(n));
                        bf16dot::gemm(pool, ws, x.data() + size_t(i) * kk, 1, packed.view, one.data());
                        ASSERT_TRUE(bits_equal(one.data(), got.data() + size_t(i) * n, size_t(n)))
                            << "row " << i << " of m=" << m << " n=" << n << " k=" << kk << " threads=" << threads;
                        for (int j = 0; j < n; ++j) {
                            double ref = 0, mag = 0;
                            for (int t = 0; t < kk; ++t) {
                                const double p = double(round(x[size_t(i) * kk + t])) * round(wf[size_t(j) * kk + t]);
                                ref += p;
                                mag += std::abs(p);
                            }
                            ASSERT_NEAR(got[size_t(i) * n + j], ref, 2e-7 * std::sqrt(double(kk)) * mag + 1e-30)
                                << "m=" << m << " n=" << n << " k=" << kk << " at (" << i << ", " << j << ")";
                        }
                    }
                }
            }
    }
}

// The activations are rounded as km::f32_to_bf16 rounds (nearest, ties to even), for one row and
// for many: through an identity matrix each output is the rounded input itself.
TEST(cpu_bf16dot, activations_round_to_nearest_even_as_the_scalar_helper) {
    if (!bf16dot::supported()) GTEST_SKIP() << "this CPU has no AVX-512 BF16 (vdpbf16ps): the bf16dot GEMM cannot run here";
    const int k = 37;  // odd: the last pair is half padding
    std::vector<float> eye(size_t(k) * k, 0.0f);
    for (int i = 0; i < k; ++i) eye[size_t(i) * k + i] = 1.0f;
    ThreadPool pool(2);
    Workspace ws(2);
    const PackedMatrix packed = pack_matrix(pool, Matrix{eye.data(), false, k, k}, WFormat::bf16dot, bf16dot::panel_width());
    const float tie = 1.0f + std::ldexp(1.0f, -8);  // halfway between two BF16 values: to even (1.0)
    const std::vector<float> special{tie, 1.0f + 3 * std::ldexp(1.0f, -8), -tie, 0.0f, -0.0f, 6.0e37f, -1.0e-30f,
                                     1.0f / 3.0f, 65504.0f, 1.00390625f, 255.5f};
    for (int m : {1, 3, 13}) {
        std::vector<float> x(size_t(m) * k);
        for (size_t i = 0; i < x.size(); ++i) x[i] = special[i % special.size()] * float(1 + int(i % 5));
        std::vector<float> y(size_t(m) * k);
        bf16dot::gemm(pool, ws, x.data(), m, packed.view, y.data());
        for (size_t i = 0; i < x.size(); ++i) {
            const float want = cc::km::bf16_to_f32(cc::km::f32_to_bf16(x[i])) + 0.0f;  // the chain starts at +0: -0 sums to +0
            ASSERT_TRUE(bits_equal(&y[i], &want, 1)) << "m=" << m << " x=" << x[i] << " got " << y[i] << " want " << want;
        }
    }
}

// unpack_row reads back the values pack_matrix stored, every row (full and partial panels, odd K
// for bf16dot's pairs), from BF16 and F32 sources, for each panel width in use; holds_exactly says
// which formats store a source's values unchanged. No instruction is needed: it runs everywhere,
// bf16dot included (the CPU backend reads a tied embedding this way, bf16dot::gemm aside).
TEST(cpu_pack, unpack_row_reads_back_every_value_the_panels_hold) {
    ThreadPool pool(2);
    for (int nr : {8, 16, 32})
        for (int n : {1, 7, 33, 97})
            for (int kk : {1, 2, 7, 64, 129})
                for (bool src_bf16 : {false, true})
                    for (WFormat f : {WFormat::f32, WFormat::bf16, WFormat::bf16dot}) {
                        auto wf = random_vec(size_t(n) * kk, 7 * n + kk);
                        std::vector<uint16_t> wb(wf.size());
                        for (size_t i = 0; i < wf.size(); ++i) {
                            wb[i] = cc::km::f32_to_bf16(wf[i]);
                            if (src_bf16) wf[i] = cc::km::bf16_to_f32(wb[i]);  // the source's values
                        }
                        const Matrix src = src_bf16 ? Matrix{wb.data(), true, n, kk} : Matrix{wf.data(), false, n, kk};
                        const PackedMatrix packed = pack_matrix(pool, src, f, nr);
                        const bool exact = holds_exactly(f, src_bf16);
                        EXPECT_EQ(exact, f == WFormat::f32 || src_bf16);
                        std::vector<float> row(size_t(kk) + 1, 12345.0f);
                        for (int r = 0; r < n; ++r) {
                            unpack_row(packed.view, r, row.data());
                            ASSERT_EQ(row.back(), 12345.0f) << "wrote past the row";
                            for (int i = 0; i < kk; ++i) {
                                const float v = wf[size_t(r) * kk + size_t(i)];
                                const float want = exact ? v : cc::km::bf16_to_f32(cc::km::f32_to_bf16(v));
                                ASSERT_EQ(row[size_t(i)], want) << wformat_name(f) << " nr=" << nr << " n=" << n
                                                                << " k=" << kk << " row " << r << " element " << i;
                            }
                        }
                    }
    auto wf = random_vec(64, 3);
    const PackedMatrix q8 = pack_matrix(pool, Matrix{wf.data(), false, 8, 8}, WFormat::q8, 16);
    std::vector<float> row(8);
    EXPECT_FALSE(holds_exactly(WFormat::q8, true));
    EXPECT_THROW(unpack_row(q8.view, 0, row.data()), std::logic_error);
    EXPECT_THROW(unpack_row(Matrix{wf.data(), false, 8, 8}, 0, row.data()), std::logic_error);  // not packed
}

TEST_P(CpuKernels, packed_matrix_refuses_another_panel_width) {
    const Kernels& k = kernels_for(GetParam());
    ThreadPool pool(1);
    Workspace ws(1);
    std::vector<float> w(64, 1.0f), x(8, 1.0f), y(8);
    const PackedMatrix packed = pack_matrix(pool, Matrix{w.data(), false, 8, 8}, WFormat::f32, k.gemm_nr + 1);
    EXPECT_THROW(k.gemm(pool, ws, x.data(), 1, packed.view, y.data()), std::logic_error);
}

TEST_P(CpuKernels, exp_swiglu_rmsnorm_match_float64) {
    const Kernels& k = kernels_for(GetParam());
    std::vector<float> x;
    for (double v = -110.0; v <= 90.0; v += 0.0731) x.push_back(float(v));
    std::vector<float> y(x.size());
    k.exp(x.data(), y.data(), int64_t(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
        const double e = std::exp(double(x[i]));
        if (x[i] < -87.3f) {
            EXPECT_LE(y[i], 1.3e-38f) << x[i];  // (near) underflow: tiny, subnormal or 0
            EXPECT_GE(y[i], 0.0f) << x[i];
        } else if (x[i] > 88.72f) {
            EXPECT_TRUE(std::isinf(y[i])) << x[i];
        } else {
            ASSERT_NEAR(y[i], e, 3e-7 * e) << "x=" << x[i];
        }
    }
    auto g = random_vec(1003, 5, 4.0f), u = random_vec(1003, 6);
    std::vector<float> s(g.size());
    k.swiglu(g.data(), u.data(), s.data(), int64_t(g.size()));
    for (size_t i = 0; i < g.size(); ++i) {
        const double ref = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * u[i];
        ASSERT_NEAR(s[i], ref, 6e-7 * std::abs(ref) + 1e-30) << i;
    }
    for (int n : {1, 8, 64, 100, 1024}) {
        auto xv = random_vec(size_t(n), 7 + n, 2.0f), wv = random_vec(size_t(n), 8 + n);
        std::vector<float> out(static_cast<size_t>(n));
        k.rmsnorm(xv.data(), wv.data(), out.data(), n, 1e-6f);
        double ss = 0;
        for (float v : xv) ss += double(v) * v;
        const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
        for (int i = 0; i < n; ++i) {
            const double ref = double(wv[size_t(i)]) * xv[size_t(i)] * inv;
            ASSERT_NEAR(out[size_t(i)], ref, 3e-7 * std::sqrt(double(n)) * std::abs(ref) + 1e-30) << "n=" << n << " i=" << i;
        }
    }
}

// ---- attention ------------------------------------------------------------------------------

namespace {

// Keys and values of positions [first, first + n) of one layer in the kernel's layout.
struct Seg {
    int cap = 0;
    std::vector<float> k, v, krows;
    std::vector<uint16_t> kb, vb, krowsb;
    // rows: K in the canonical row layout (a group file linked in place) instead of tiles
    KvSegment view(bool bf16, int first, int n, bool rows = false) const {
        KvSegment s;
        if (rows)
            s.k = bf16 ? static_cast<const void*>(krowsb.data()) : krows.data();
        else
            s.k = bf16 ? static_cast<const void*>(kb.data()) : k.data();
        s.v = bf16 ? static_cast<const void*>(vb.data()) : v.data();
        s.k_rows = rows;
        s.capacity = cap;
        s.first_pos = first;
        s.n_tokens = n;
        return s;
    }
};

// kall/vall: [n_kv][n_total][hd] canonical, already bf16-rounded when bf16.
Seg make_seg(const std::vector<float>& kall, const std::vector<float>& vall, int n_kv, int n_total, int hd, int first, int n) {
    Seg s;
    s.cap = (n + kKeyTile - 1) / kKeyTile * kKeyTile + kKeyTile;
    s.k.assign(size_t(n_kv) * s.cap * hd, 0.0f);
    s.v.assign(size_t(n_kv) * s.cap * hd, 0.0f);
    for (int h = 0; h < n_kv; ++h)
        for (int t = 0; t < n; ++t)
            for (int d = 0; d < hd; ++d) {
                const size_t src = (size_t(h) * n_total + size_t(first + t)) * hd + size_t(d);
                s.k[size_t(h) * s.cap * hd + (size_t(t / kKeyTile) * hd + size_t(d)) * kKeyTile + size_t(t % kKeyTile)] = kall[src];
                s.v[(size_t(h) * s.cap + size_t(t)) * hd + size_t(d)] = vall[src];
            }
    // rows past n hold noise, as a reused or mapped block may: the kernels must never read them
    for (int h = 0; h < n_kv; ++h)
        for (int t = n; t < s.cap; ++t)
            for (int d = 0; d < hd; ++d) s.v[(size_t(h) * s.cap + size_t(t)) * hd + size_t(d)] = std::numeric_limits<float>::quiet_NaN();
    s.krows = s.v;  // same shape: [n_kv][cap][hd]
    for (int h = 0; h < n_kv; ++h)
        for (int t = 0; t < n; ++t)
            for (int d = 0; d < hd; ++d)
                s.krows[(size_t(h) * s.cap + size_t(t)) * hd + size_t(d)] = kall[(size_t(h) * n_total + size_t(first + t)) * hd + size_t(d)];
    const auto to_bf16 = [](const std::vector<float>& f) {
        std::vector<uint16_t> b(f.size());
        for (size_t i = 0; i < f.size(); ++i) b[i] = cc::km::f32_to_bf16(f[i]);
        return b;
    };
    s.kb = to_bf16(s.k);
    s.vb = to_bf16(s.v);
    s.krowsb = to_bf16(s.krows);
    return s;
}

}  // namespace

TEST_P(CpuKernels, attention_matches_float64_and_is_split_invariant) {
    const Kernels& k = kernels_for(GetParam());
    struct Case {
        int n_heads, n_kv, hd, window;
    };
    // dot: QK and P·V in BF16 dot products (AttentionArgs::bf16_dot, BF16 K/V only, AVX-512 BF16 only)
    struct Mode {
        bool bf16, dot;
    };
    std::vector<Mode> modes{{false, false}, {true, false}};
    if (bf16dot::supported()) modes.push_back({true, true});
    for (const Case& c : {Case{8, 4, 8, 0}, Case{4, 2, 64, 0}, Case{6, 2, 20, 9}, Case{2, 2, 128, 0}, Case{4, 1, 16, 37},
                          Case{4, 2, 80, 0}})
        for (const Mode mode : modes) {
            const bool bf16 = mode.bf16;
            const int n_total = 83;
            auto kall = random_vec(size_t(c.n_kv) * n_total * c.hd, 31, 1.0f);
            auto vall = random_vec(size_t(c.n_kv) * n_total * c.hd, 32, 1.0f);
            if (bf16) {
                for (auto& x : kall) x = cc::km::bf16_to_f32(cc::km::f32_to_bf16(x));
                for (auto& x : vall) x = cc::km::bf16_to_f32(cc::km::f32_to_bf16(x));
            }
            auto q = random_vec(size_t(n_total) * c.n_heads * c.hd, 33, 1.0f);
            const float scale = float(1.0 / std::sqrt(double(c.hd)));
            const int qd = c.n_heads * c.hd;

            // Full: all positions in one segment, all rows in one call.
            Seg all = make_seg(kall, vall, c.n_kv, n_total, c.hd, 0, n_total);
            AttentionArgs a;
            a.kv_bf16 = bf16;
            a.bf16_dot = mode.dot;
            a.n_heads = c.n_heads;
            a.n_kv_heads = c.n_kv;
            a.head_dim = c.hd;
            a.window = c.window;
            a.scale = scale;
            a.seg[0].first_pos = 0;
            a.seg[1] = all.view(bf16, 0, n_total);
            a.q = q.data();
            a.n_rows = n_total;
            a.first_pos = 0;
            std::vector<float> full(size_t(n_total) * qd);
            a.out = full.data();
            ThreadPool pool1(1);
            Workspace ws1(1);
            k.attention(pool1, ws1, a);

            // float64 reference (dot: of q rounded to BF16; the softmax weights' rounding to BF16
            // is what the looser bound allows for: 2^-9 relative per weight)
            const auto q_at = [&](size_t i) { return mode.dot ? cc::km::bf16_to_f32(cc::km::f32_to_bf16(q[i])) : q[i]; };
            const double tol = mode.dot ? 1.5e-2 : 2e-6;
            const int G = c.n_heads / c.n_kv;
            for (int t = 0; t < n_total; ++t)
                for (int h = 0; h < c.n_heads; ++h) {
                    const int g = h / G;
                    const int lo = c.window ? std::max(0, t - c.window + 1) : 0;
                    std::vector<double> s;
                    double m = -1e300;
                    for (int j = lo; j <= t; ++j) {
                        double d = 0;
                        for (int i = 0; i < c.hd; ++i)
                            d += double(q_at((size_t(t) * c.n_heads + h) * c.hd + i)) * kall[(size_t(g) * n_total + j) * c.hd + i];
                        s.push_back(d * scale);
                        m = std::max(m, s.back());
                    }
                    double l = 0;
                    for (double& x : s) l += (x = std::exp(x - m));
                    for (int i = 0; i < c.hd; ++i) {
                        double o = 0;
                        for (int j = lo; j <= t; ++j) o += s[size_t(j - lo)] * vall[(size_t(g) * n_total + j) * c.hd + i];
                        o /= l;
                        ASSERT_NEAR(full[size_t(t) * qd + size_t(h) * c.hd + i], o, tol * std::sqrt(double(c.hd + t + 1)))
                            << "hd=" << c.hd << " window=" << c.window << " bf16=" << bf16 << " dot=" << mode.dot << " t=" << t
                            << " h=" << h << " i=" << i;
                    }
                }

            // Split: keys [0, P) in a prefix segment (tiled, or K in canonical rows as a linked
            // group file), the rest in a suffix segment; rows [start, start+rows) only; 1-3
            // threads. Must be bit-equal to the full call.
            for (int P : {1, 16, 30, 37, 64})
                for (int threads : {1, 3})
                    for (bool prefix_rows : {false, true}) {
                    ThreadPool pool(threads);
                    Workspace ws(threads);
                    Seg pre = make_seg(kall, vall, c.n_kv, n_total, c.hd, 0, P);
                    Seg suf = make_seg(kall, vall, c.n_kv, n_total, c.hd, P, n_total - P);
                    for (int start : {P, P + 3})
                        for (int rows : {1, 5, n_total - P - 3}) {
                            if (start + rows > n_total || rows <= 0) continue;
                            AttentionArgs b = a;
                            b.seg[0] = pre.view(bf16, 0, P, prefix_rows);
                            b.seg[1] = suf.view(bf16, P, start + rows - P);
                            b.q = q.data() + size_t(start) * qd;
                            b.n_rows = rows;
                            b.first_pos = start;
                            std::vector<float> out(size_t(rows) * qd);
                            b.out = out.data();
                            k.attention(pool, ws, b);
                            ASSERT_TRUE(bits_equal(out.data(), full.data() + size_t(start) * qd, out.size()))
                                << "hd=" << c.hd << " window=" << c.window << " bf16=" << bf16 << " dot=" << mode.dot << " P=" << P
                                << " threads=" << threads << " prefix rows=" << prefix_rows << " start=" << start << " rows=" << rows;
                        }
                }
        }
}

INSTANTIATE_TEST_SUITE_P(isa, CpuKernels, ::testing::ValuesIn(available_isas()), isa_param_name);
