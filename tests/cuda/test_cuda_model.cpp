// The CUDA backend on whole models: the self-test's model checks (CPU parity of greedy tokens,
// cached == full, decode == prefill, export/import) plus direct checks of the Backend contract.
// Device tests skip without a device; the rest (errors, memory estimate) run everywhere.
#include "cuda/cuda_backend.h"

#include "core/model/builtin_model.h"
#include "core/cpu/cpu_backend.h"
#include "core/model/weights.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

namespace {

#define REQUIRE_DEVICE()                                                             \
    do {                                                                             \
        const auto probe_ = cc::cuda::probe();                                       \
        if (!probe_.available) GTEST_SKIP() << "no CUDA device: " << probe_.message; \
    } while (0)

cc::ModelWeights qwen3_test() {
    return cc::generate_builtin_weights(*cc::find_builtin("qwen3-test"));
}

std::vector<cc::token_id> seeded_tokens(int n, int vocab) {
    std::mt19937 rng(3);
    std::vector<cc::token_id> t(static_cast<size_t>(n));
    for (auto& x : t) x = cc::token_id(rng() % uint32_t(vocab));
    return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A prefill of positions [0, from) into `wk` (in `want_be`) and `gk` (in `got_be`), then decode steps
// at [from, to): `got_be` must give `want_be`'s bits at every step.
void expect_decode_agrees(cc::Backend& want_be, cc::KvBlock& wk, cc::Backend& got_be, cc::KvBlock& gk,
                          const std::vector<cc::token_id>& tokens, int from, int to) {
    const std::vector<int> row0{0};
    for (auto [be, kv] : {std::pair{&want_be, &wk}, std::pair{&got_be, &gk}})
        be->forward(std::span(tokens).first(size_t(from)), cc::KvView{nullptr, 0, kv}, {});
    for (int i = from; i < to; ++i) {
        const auto t = std::span(tokens).subspan(size_t(i), 1);
        const auto want = want_be.forward(t, cc::KvView{nullptr, 0, &wk}, row0);
        const auto got = got_be.forward(t, cc::KvView{nullptr, 0, &gk}, row0);
        EXPECT_TRUE(same_bits(got, want)) << "decode position " << i;
    }
}

// Rounds of three sequences decoding one token together (forward_batch), sequence s of round r at
// position at(s, r) over the first at(s, r) positions of a prefix block (`wk` in `want`'s backend,
// `gk` in `got`'s), each round on new suffix blocks: `got` must give `want`'s bits.
void expect_rounds_agree(cc::Backend& want_be, const cc::KvBlock& wk, cc::Backend& got_be, const cc::KvBlock& gk,
                         const std::vector<cc::token_id>& tokens, int rounds, int (*at)(int s, int round)) {
    const std::vector<int> row0{0};
    const size_t vocab = size_t(want_be.config().vocab_size);
    for (int round = 0; round < rounds; ++round) {
        std::vector<std::vector<float>> want(3, std::vector<float>(vocab, NAN)), got = want;
        std::vector<std::unique_ptr<cc::KvBlock>> ws, gs;
        std::vector<cc::SequenceRows> wstep, gstep;
        for (int s = 0; s < 3; ++s) {
            const int p = at(s, round);
            ws.push_back(want_be.allocate_kv(2));
            gs.push_back(got_be.allocate_kv(2));
            const auto t = std::span(tokens).subspan(size_t(p), 1);
            wstep.push_back({t, cc::KvView{&wk, p, ws.back().get()}, row0, want[size_t(s)]});
            gstep.push_back({t, cc::KvView{&gk, p, gs.back().get()}, row0, got[size_t(s)]});
        }
        want_be.forward_batch(wstep);
        got_be.forward_batch(gstep);
        for (int s = 0; s < 3; ++s) EXPECT_TRUE(same_bits(got[size_t(s)], want[size_t(s)])) << "round " << round;
    }
}

TEST(CudaModel, SelftestModelRowsPass) {
    REQUIRE_DEVICE();
    cc::cuda::SelftestOptions o;
    o.quick = true;
    o.ops = false;
    const std::filesystem::path stories = std::filesystem::path(CC_SHARED_DIR) / "fixtures" / "stories260k";
    if (std::filesystem::exists(stories / "config.json")) o.model_spec = stories.string();
    const auto rows = cc::cuda::run_selftest(o);
    ASSERT_FALSE(rows.empty());
    for (const auto& r : rows)
        EXPECT_TRUE(r.pass) << r.check << " [" << r.shape << "]: error " << r.max_error << " bound " << r.bound << " "
                            << r.note;
}

TEST(CudaModel, CachedEqualsFullBitForBit) {
    REQUIRE_DEVICE();
    const cc::ModelWeights w = qwen3_test();
    cc::cuda::CudaBackendOptions o;
    o.max_batch_tokens = 16;  // several chunks, with boundaries that differ between the two paths
    auto be = cc::cuda::make_cuda_backend(w, o);
    const int n = 90, vocab = w.config.vocab_size;
    const auto tokens = seeded_tokens(n, vocab);
    std::vector<int> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    auto kv = be->allocate_kv(n);
    const auto full = be->forward(tokens, cc::KvView{nullptr, 0, kv.get()}, all);
    for (int p : {1, 16, 17, 40, 89}) {
        auto prefix = be->allocate_kv(p);
        be->forward(std::span(tokens).first(size_t(p)), cc::KvView{nullptr, 0, prefix.get()}, {});
        auto suffix = be->allocate_kv(n - p);
        std::vector<int> rows(static_cast<size_t>(n - p));
        std::iota(rows.begin(), rows.end(), 0);
        const auto got =
            be->forward(std::span(tokens).subspan(size_t(p)), cc::KvView{prefix.get(), p, suffix.get()}, rows);
        const std::vector<float> want(full.begin() + ptrdiff_t(p) * vocab, full.end());
        EXPECT_TRUE(same_bits(got, want)) << "prefix " << p;
    }
}

TEST(CudaModel, CancelLeavesSuffixUnchanged) {
    REQUIRE_DEVICE();
    const cc::ModelWeights w = qwen3_test();
    auto be = cc::cuda::make_cuda_backend(w, {});
    const auto tokens = seeded_tokens(10, w.config.vocab_size);
    auto kv = be->allocate_kv(20);
    be->forward(std::span(tokens).first(4), cc::KvView{nullptr, 0, kv.get()}, {});
    std::atomic<bool> cancel{true};
    const std::vector<int> last = {5};
    EXPECT_THROW(be->forward(std::span(tokens).subspan(4), cc::KvView{nullptr, 0, kv.get()}, last, &cancel),
                 cc::Cancelled);
    EXPECT_EQ(kv->n_tokens(), 4);
}

TEST(CudaModel, StackedStepGivesEachSequenceItsOwnBitsAndFailsWhole) {
    // forward_batch with stacked_batch: every sequence gets the bits forward() gives it alone
    // (the self-test's "several sequences in one step" row checks the same against the full
    // prefill); a cancel or a bad sequence leaves every suffix block as it was.
    REQUIRE_DEVICE();
    const cc::ModelWeights w = qwen3_test();
    cc::cuda::CudaBackendOptions o;
    o.max_batch_tokens = 16;
    o.stacked_batch = true;
    auto be = cc::cuda::make_cuda_backend(w, o);
    const int vocab = w.config.vocab_size;
    const auto tokens = seeded_tokens(60, vocab);
    auto group = be->allocate_kv(20);
    be->forward(std::span(tokens).first(20), cc::KvView{nullptr, 0, group.get()}, {});
    const std::vector<int> lens{9, 1, 13};
    const std::vector<std::vector<int>> rows{{8, 0}, {0}, {12, 3, 12}};
    std::vector<std::unique_ptr<cc::KvBlock>> alone, stacked;
    std::vector<std::vector<float>> want, got;
    std::vector<cc::SequenceRows> step;
    for (size_t s = 0; s < lens.size(); ++s) {
        const cc::KvBlock* prefix = s == 2 ? nullptr : group.get();
        const int p = s == 2 ? 0 : 20 - int(s);  // two views of one block, one without a prefix
        const auto toks = std::span(tokens).subspan(size_t(p), size_t(lens[s]));
        alone.push_back(be->allocate_kv(lens[s]));
        stacked.push_back(be->allocate_kv(lens[s]));
        want.push_back(be->forward(toks, cc::KvView{prefix, p, alone.back().get()}, rows[s]));
        got.emplace_back(want.back().size(), NAN);
        step.push_back({toks, cc::KvView{prefix, p, stacked.back().get()}, rows[s], got.back()});
    }
    std::atomic<bool> cancel{true};
    EXPECT_THROW(be->forward_batch(step, &cancel), cc::Cancelled);
    for (const auto& b : stacked) EXPECT_EQ(b->n_tokens(), 0);
    auto cpu = cc::make_cpu_backend(w, {});
    auto foreign = cpu->allocate_kv(8);
    std::vector<cc::SequenceRows> bad = step;
    bad[1].kv.suffix = foreign.get();
    EXPECT_THROW(be->forward_batch(bad), std::runtime_error);
    for (const auto& b : stacked) EXPECT_EQ(b->n_tokens(), 0);
    be->forward_batch(step);
    for (size_t s = 0; s < lens.size(); ++s) {
        EXPECT_TRUE(same_bits(got[s], want[s])) << "sequence " << s;
        EXPECT_EQ(stacked[s]->n_tokens(), lens[s]);
    }
}

TEST(CudaModel, GraphsGiveTheEagerBitsAndCancelBetweenGroups) {
    // CudaBackendOptions::graphs: decode steps (each shape eager once, then captured, instantiated and
    // updated as the positions move) and a stacked step of three sequences give the bits of the
    // eager backend; a cancel leaves the suffix as it was.
    REQUIRE_DEVICE();
    const cc::ModelWeights w = qwen3_test();
    cc::cuda::CudaBackendOptions o;
    o.max_batch_tokens = 16;
    o.stacked_batch = true;
    auto eager = cc::cuda::make_cuda_backend(w, o);
    o.graphs = true;
    auto graphs = cc::cuda::make_cuda_backend(w, o);
    const auto tokens = seeded_tokens(40, w.config.vocab_size);
    const std::vector<int> row0{0};
    auto ek = eager->allocate_kv(40), gk = graphs->allocate_kv(40);
    expect_decode_agrees(*eager, *ek, *graphs, *gk, tokens, 30, 36);
    // three sequences decoding together over the first 20 positions of each backend's block
    expect_rounds_agree(*eager, *ek, *graphs, *gk, tokens, 3, [](int s, int round) { return 20 + s + round; });
    std::atomic<bool> cancel{true};
    EXPECT_THROW(graphs->forward(std::span(tokens).subspan(36, 1), cc::KvView{nullptr, 0, gk.get()}, row0, &cancel),
                 cc::Cancelled);
    EXPECT_EQ(gk->n_tokens(), 36);
}

TEST(CudaModel, GraphReplayGivesTheEagerBitsAcrossStepsAndBuckets) {
    // CudaBackendOptions::graph_replay (with the tensor-core attention it needs): decode steps that
    // cross a KV-length bucket (256 -> 512 positions: each bucket eager once, captured once, then
    // replayed), and rounds of three sequences decoding together, each round over new suffix blocks
    // at new positions (a replayed graph reads them from the tables written before its launch),
    // give the bits of the eager backend; a cancel before the step leaves the suffix as it was.
    REQUIRE_DEVICE();
    const cc::ModelWeights w = qwen3_test();
    cc::cuda::CudaBackendOptions o;
    o.stacked_batch = true;
    o.mma_attention = true;
    o.kv_dtype = cc::KvDType::bf16;
    auto eager = cc::cuda::make_cuda_backend(w, o);
    o.graphs = true;
    o.graph_replay = true;
    auto replay = cc::cuda::make_cuda_backend(w, o);
    const auto tokens = seeded_tokens(280, w.config.vocab_size);
    const std::vector<int> row0{0};
    auto ek = eager->allocate_kv(280), rk = replay->allocate_kv(280);
    expect_decode_agrees(*eager, *ek, *replay, *rk, tokens, 248, 264);
    expect_rounds_agree(*eager, *ek, *replay, *rk, tokens, 5, [](int s, int round) { return 20 + 40 * s + 7 * round; });
    std::atomic<bool> cancel{true};
    EXPECT_THROW(replay->forward(std::span(tokens).subspan(264, 1), cc::KvView{nullptr, 0, rk.get()}, row0, &cancel),
                 cc::Cancelled);
    EXPECT_EQ(rk->n_tokens(), 264);
}

TEST(CudaModel, FusedKernelsGiveTheUnfusedBits) {
    // CudaBackendOptions::fused_kernels (add + RMSNorm in one launch, attention writing bf16 for
    // o_proj; with our own GEMMs, gate, up and SwiGLU in one launch): a chunked prefill, decode
    // steps and a stacked step of three sequences, eager and as graphs, give every logit of the
    // unfused backend; the K/V stored are the same bytes.
    REQUIRE_DEVICE();
    const cc::ModelWeights w = qwen3_test();
    for (int variant = 0; variant < 3; ++variant) {
        const bool mma = variant > 0, own_gemm = variant == 2;
        SCOPED_TRACE(std::string(mma ? "mma attention" : "scalar attention") + (own_gemm ? ", own gemm" : ""));
        cc::cuda::CudaBackendOptions o;
        o.max_batch_tokens = 16;
        o.stacked_batch = true;
        o.mma_attention = mma;
        o.own_gemm = own_gemm;
        o.kv_dtype = mma ? cc::KvDType::bf16 : cc::KvDType::f32;
        auto plain = cc::cuda::make_cuda_backend(w, o);
        o.fused_kernels = true;
        auto fused = cc::cuda::make_cuda_backend(w, o);
        o.graphs = true;
        auto fused_graphs = cc::cuda::make_cuda_backend(w, o);
        const auto tokens = seeded_tokens(40, w.config.vocab_size);
        std::vector<int> all(30);
        for (int i = 0; i < 30; ++i) all[size_t(i)] = i;
        auto pk = plain->allocate_kv(40);
        const auto want = plain->forward(std::span(tokens).first(30), cc::KvView{nullptr, 0, pk.get()}, all);
        for (cc::Backend* be : {fused.get(), fused_graphs.get()}) {
            auto kv = be->allocate_kv(40);
            EXPECT_TRUE(
                same_bits(be->forward(std::span(tokens).first(30), cc::KvView{nullptr, 0, kv.get()}, all), want));
            std::vector<std::byte> a(plain->kv_bytes(30)), b(be->kv_bytes(30));
            plain->export_kv(*pk, 30, a);
            be->export_kv(*kv, 30, b);
            EXPECT_EQ(a, b) << "the stored K/V";
            // decode steps against the unfused backend's, each on its own copy of the block
            auto pk2 = plain->import_kv(a, 30, 40, 30);
            const std::vector<int> row0{0};
            for (int i = 30; i < 34; ++i) {
                const auto t = std::span(tokens).subspan(size_t(i), 1);
                const auto d_want = plain->forward(t, cc::KvView{nullptr, 0, pk2.get()}, row0);
                EXPECT_TRUE(same_bits(be->forward(t, cc::KvView{nullptr, 0, kv.get()}, row0), d_want)) << i;
            }
            // three sequences in one step over the first 20 positions of each block
            std::vector<std::vector<float>> sw(3, std::vector<float>(size_t(w.config.vocab_size), NAN)), sg = sw;
            std::vector<std::unique_ptr<cc::KvBlock>> ps, fs;
            std::vector<cc::SequenceRows> pstep, fstep;
            for (int s = 0; s < 3; ++s) {
                ps.push_back(plain->allocate_kv(2));
                fs.push_back(be->allocate_kv(2));
                const auto t = std::span(tokens).subspan(size_t(20 + s), 1);
                pstep.push_back({t, cc::KvView{pk.get(), 20 + s, ps.back().get()}, row0, sw[size_t(s)]});
                fstep.push_back({t, cc::KvView{kv.get(), 20 + s, fs.back().get()}, row0, sg[size_t(s)]});
            }
            plain->forward_batch(pstep);
            be->forward_batch(fstep);
            for (int s = 0; s < 3; ++s) EXPECT_TRUE(same_bits(sg[size_t(s)], sw[size_t(s)])) << "sequence " << s;
        }
    }
}

TEST(CudaModel, KvExportImportRoundTripAndForeignBlocks) {
    REQUIRE_DEVICE();
    const cc::ModelWeights w = qwen3_test();
    auto be = cc::cuda::make_cuda_backend(w, {});
    EXPECT_EQ(be->name(), "cuda");
    EXPECT_TRUE(be->kv_on_device());
    EXPECT_EQ(be->numerics_id().rfind("cuda/sm", 0), 0u) << be->numerics_id();
    const auto tokens = seeded_tokens(33, w.config.vocab_size);
    auto kv = be->allocate_kv(40);
    be->forward(tokens, cc::KvView{nullptr, 0, kv.get()}, {});
    std::vector<std::byte> a(be->kv_bytes(33)), b(be->kv_bytes(33));
    be->export_kv(*kv, 33, a);
    auto imported = be->import_kv(a, 33, 50, 33);
    EXPECT_EQ(imported->n_tokens(), 33);
    EXPECT_EQ(imported->capacity_tokens(), 50);
    be->export_kv(*imported, 33, b);
    EXPECT_TRUE(a == b);
    // A CPU block is not ours: a clear error, not a crash.
    auto cpu = cc::make_cpu_backend(w, {});
    auto cpu_kv = cpu->allocate_kv(8);
    EXPECT_THROW(be->forward(std::span(tokens).first(2), cc::KvView{nullptr, 0, cpu_kv.get()}, {}), std::runtime_error);
}

TEST(CudaModel, WithoutDeviceMakeBackendSaysWhy) {
    const auto p = cc::cuda::probe();
    if (p.available) GTEST_SKIP() << "a CUDA device is present (" << p.message << ")";
    const cc::ModelWeights w = qwen3_test();
    try {
        cc::cuda::make_cuda_backend(w, {});
        FAIL() << "make_cuda_backend succeeded without a device";
    } catch (const cc::cuda::CudaError& e) {
        EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
    }
}

TEST(CudaModel, RequiredBytesCoverWeightsActivationsAndWorkspace) {
    // Plain arithmetic: runs without a device.
    const cc::ModelConfig c = cc::find_builtin("qwen3-8b")->config;
    cc::cuda::CudaBackendOptions o;
    const size_t small = cc::cuda::cuda_required_bytes(c, o);
    EXPECT_GT(small, size_t(16'000'000'000));  // BF16 weights alone are ~16.4 GB
    EXPECT_LT(small, size_t(18'000'000'000));
    o.max_batch_tokens = 4096;
    EXPECT_GT(cc::cuda::cuda_required_bytes(c, o), small);  // activations grow with the batch
    o = {};
    o.workspace_bytes = size_t(1) << 30;
    EXPECT_EQ(cc::cuda::cuda_required_bytes(c, o) - small, (size_t(1) << 30) - (size_t(64) << 20));
}

TEST(CudaModel, NumericsIdNamesArchitectureAndKvDtype) {
    // Plain string arithmetic: runs without a device. The id keeps GPU groups from linking on the
    // CPU or on another architecture.
    cc::cuda::DeviceInfo d;
    d.compute_major = 9;
    d.compute_minor = 0;
    cc::cuda::CudaBackendOptions o;
    EXPECT_EQ(cc::cuda::cuda_numerics_id(d, o), "cuda/sm90/bf16/f32");
    o.kv_dtype = cc::KvDType::bf16;
    d.compute_major = 8;
    EXPECT_EQ(cc::cuda::cuda_numerics_id(d, o), "cuda/sm80/bf16/bf16");
    o.mma_attention = true;  // another attention arithmetic: its groups never link with the scalar kernel's
    EXPECT_EQ(cc::cuda::cuda_numerics_id(d, o), "cuda/sm80/bf16/bf16/attn-mma");
    o.own_gemm = true;  // another GEMM arithmetic too
    EXPECT_EQ(cc::cuda::cuda_numerics_id(d, o), "cuda/sm80/bf16/bf16/attn-mma/gemm-own");
    o.graphs = true;  // the same kernels and arguments: the same numerics
    EXPECT_EQ(cc::cuda::cuda_numerics_id(d, o), "cuda/sm80/bf16/bf16/attn-mma/gemm-own");
}

TEST(CudaModel, UnverifiedPathsAreOptInThroughTheEnvironment) {
    // The tensor-core attention, the stacked multi-sequence step, the CUDA graphs, our own GEMMs,
    // the upload ring, greedy tokens picked on the device and the fused kernels have not run on a device yet:
    // off unless asked for, and a value the variable does not take is an error that names the
    // variable and its values (runs without a device).
    struct Switch {
        const char* name;
        const char* off;
        const char* on;
        bool (*read)();
        bool default_option;
    };
    const Switch switches[] = {
        {"CONTEXTCACHE_CUDA_ATTENTION", "scalar", "mma", cc::cuda::mma_attention_from_env,
         cc::cuda::CudaBackendOptions{}.mma_attention},
        {"CONTEXTCACHE_CUDA_BATCH", "serial", "stacked", cc::cuda::stacked_batch_from_env,
         cc::cuda::CudaBackendOptions{}.stacked_batch},
        {"CONTEXTCACHE_CUDA_GRAPHS", "off", "on", cc::cuda::graphs_from_env, cc::cuda::CudaBackendOptions{}.graphs},
        {"CONTEXTCACHE_CUDA_GRAPHS", "off", "replay", cc::cuda::graph_replay_from_env,
         cc::cuda::CudaBackendOptions{}.graph_replay},
        {"CONTEXTCACHE_CUDA_GEMM", "cublaslt", "own", cc::cuda::own_gemm_from_env,
         cc::cuda::CudaBackendOptions{}.own_gemm},
        {"CONTEXTCACHE_CUDA_UPLOAD", "staged", "ring", cc::cuda::upload_ring_from_env,
         cc::cuda::CudaBackendOptions{}.upload_ring},
        {"CONTEXTCACHE_CUDA_GREEDY", "host", "device", cc::cuda::device_greedy_from_env,
         cc::cuda::CudaBackendOptions{}.device_greedy},
        {"CONTEXTCACHE_CUDA_FUSED", "off", "on", cc::cuda::fused_kernels_from_env,
         cc::cuda::CudaBackendOptions{}.fused_kernels},
    };
    for (const Switch& sw : switches) {
        SCOPED_TRACE(sw.name);
        unsetenv(sw.name);
        EXPECT_FALSE(sw.read());
        EXPECT_FALSE(sw.default_option);
        setenv(sw.name, sw.off, 1);
        EXPECT_FALSE(sw.read());
        setenv(sw.name, sw.on, 1);
        EXPECT_TRUE(sw.read());
        setenv(sw.name, "flash", 1);
        try {
            sw.read();
            ADD_FAILURE() << "an unknown value was accepted";
        } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find(std::string(sw.name) + "=flash"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("\"" + std::string(sw.on) + "\""), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("\"" + std::string(sw.off) + "\""), std::string::npos) << e.what();
        }
        unsetenv(sw.name);
    }
    // replay needs graphs and the tensor-core attention: named before any device is touched
    {
        cc::cuda::CudaBackendOptions o;
        o.graphs = true;
        o.graph_replay = true;
        try {
            cc::cuda::make_cuda_backend(qwen3_test(), o);
            ADD_FAILURE() << "graph replay without the tensor-core attention was accepted";
        } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find("CONTEXTCACHE_CUDA_ATTENTION=mma"), std::string::npos) << e.what();
        }
    }
    // graphs "on" are captured every step, "replay" once per shape and bucket: both are graphs
    setenv("CONTEXTCACHE_CUDA_GRAPHS", "replay", 1);
    EXPECT_TRUE(cc::cuda::graphs_from_env());
    setenv("CONTEXTCACHE_CUDA_GRAPHS", "on", 1);
    EXPECT_FALSE(cc::cuda::graph_replay_from_env());
    unsetenv("CONTEXTCACHE_CUDA_GRAPHS");
}

// Attention biases on the device (Qwen2 q/k/v; Llama attention_bias q/k/v/o): the tiny reference
// checkpoints, cached == full bit for bit, and logits near the CPU backend's. The bound is for bf16
// GEMM inputs (8 bits of mantissa) over reductions of 32-64 terms with logits of std ~3; it was set
// without a GPU to run on, so a failure prints the observed error.
TEST(CudaModel, AttentionBiasesCachedEqualsFullAndNearCpu) {
    REQUIRE_DEVICE();
    for (const char* name : {"qwen2_tiny", "llama_bias_sharded_tiny"}) {
        const auto dir = std::filesystem::path(CC_TEST_DATA_DIR) / "reference_models" / name;
        std::ifstream in(dir / "config.json");
        const cc::ModelConfig c = cc::ModelConfig::from_json(nlohmann::json::parse(in), (dir / "config.json").string());
        ASSERT_TRUE(c.qkv_bias) << name;
        const cc::ModelWeights w = cc::load_weights(dir, c);
        auto gpu = cc::cuda::make_cuda_backend(w, cc::cuda::CudaBackendOptions{});
        auto cpu = cc::make_cpu_backend(w, cc::CpuBackendOptions{});
        const int n = 40, vocab = c.vocab_size;
        const auto tokens = seeded_tokens(n, vocab);
        std::vector<int> all(static_cast<size_t>(n));
        std::iota(all.begin(), all.end(), 0);
        auto kv = gpu->allocate_kv(n);
        const auto full = gpu->forward(tokens, cc::KvView{nullptr, 0, kv.get()}, all);
        auto cpu_kv = cpu->allocate_kv(n);
        const auto ref = cpu->forward(tokens, cc::KvView{nullptr, 0, cpu_kv.get()}, all);
        ASSERT_EQ(full.size(), ref.size());
        float worst = 0;
        for (size_t i = 0; i < full.size(); ++i) worst = std::max(worst, std::abs(full[i] - ref[i]));
        EXPECT_LE(worst, 0.25f) << name << ": max |cuda - cpu| logit " << worst;
        for (int p : {1, 17, 39}) {
            auto prefix = gpu->allocate_kv(p);
            gpu->forward(std::span(tokens).first(size_t(p)), cc::KvView{nullptr, 0, prefix.get()}, {});
            auto suffix = gpu->allocate_kv(n - p);
            std::vector<int> rows(static_cast<size_t>(n - p));
            std::iota(rows.begin(), rows.end(), 0);
            const auto got =
                gpu->forward(std::span(tokens).subspan(size_t(p)), cc::KvView{prefix.get(), p, suffix.get()}, rows);
            const std::vector<float> want(full.begin() + ptrdiff_t(p) * vocab, full.end());
            EXPECT_TRUE(same_bits(got, want)) << name << " prefix " << p;
        }
    }
}

}  // namespace
