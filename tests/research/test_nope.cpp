// The per-tool NoPE experiment (core/research/nope.h, paper §3.2–3.3): the RoPE algebra it rests on
// (a deferred rotation of captured pre-RoPE keys reproduces the forward pass's keys bit for bit
// with f32 KV), the logit metrics on hand-made vectors, the prefix layout, and the experiment end
// to end on the built-in test model, through the engine's public API. Quality figures from the synthetic model are meaningless; what
// is tested is that the experiment is computed as described and that a one-tool composition is
// exact (so any difference with more tools comes from the composition itself).
#include "core/model/builtin_model.h"
#include "core/text/chat_format.h"
#include "core/backend/deferred_rope.h"
#include "core/cpu/cpu_backend.h"
#include "core/engine/engine.h"
#include "core/engine/logit_metrics.h"
#include "core/research/nope.h"
#include "core/engine/result_json.h"
#include "tests/research/engine_fixture.h"
#include "tests/synthetic_checkpoint.h"
#include "tests/test_support.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>

using namespace cc;

namespace {

// ---- synthetic models of each family ----------------------------------------------------------

ModelConfig family_config(ModelFamily family) {
    ModelConfig c;
    c.family = family;
    c.n_layers = 3;
    c.dim = 64;
    c.ffn_dim = 96;
    c.vocab_size = 211;
    c.max_position_embeddings = 4096;
    c.rms_norm_eps = 1e-6;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 16;
    switch (family) {
        case ModelFamily::qwen3:  // q/k-norm before RoPE: the captured keys are the normed ones
            c.model_type = "qwen3";
            c.head_dim = 24;
            c.qk_norm = true;
            c.tie_word_embeddings = true;
            c.rope_theta = 1e6;
            break;
        case ModelFamily::llama:  // llama3 scaling, all three frequency bands in use (orig max 32)
            c.model_type = "llama";
            c.rope_theta = 500000.0;
            c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 32};
            break;
        case ModelFamily::mistral:
            c.model_type = "mistral";
            c.n_kv_heads = 1;
            c.sliding_window = 9;
            break;
        case ModelFamily::qwen2:  // not in these sweeps: its q/k/v biases are not generated synthetically
            c.model_type = "qwen2";
            c.qkv_bias = true;
            break;
    }
    return c;
}

const char* family_str(ModelFamily f) {
    return f == ModelFamily::qwen3 ? "qwen3" : f == ModelFamily::llama ? "llama" : "mistral";
}

std::vector<token_id> random_tokens(int n, int vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<token_id> t(static_cast<size_t>(n));
    for (auto& x : t) x = token_id(rng() % uint32_t(vocab));
    return t;
}

std::vector<int> iota_from(int first, int n) {
    std::vector<int> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), first);
    return v;
}

KvImageShape shape_of(const Backend& be) {
    const auto& c = be.config();
    return {c.n_layers, c.n_kv_heads, c.head_dim, be.kv_dtype() == KvDType::bf16 ? size_t(2) : size_t(4)};
}

std::vector<std::byte> exported(const Backend& be, const KvBlock& b) {
    std::vector<std::byte> out(be.kv_bytes(b.n_tokens()));
    be.export_kv(b, b.n_tokens(), out);
    return out;
}

double max_of(const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m = std::max(m, x);
    return m;
}

}  // namespace

// ---- the RoPE algebra -------------------------------------------------------------------------

// One segment computed normally and the same segment's captured pre-RoPE keys rotated afterwards
// at the same positions: equal bit for bit with f32 KV, per layer, for every family (Qwen3 k_norm,
// llama3 scaling, Mistral's sliding window), from position 0 and after a prefix.
TEST(NopeRope, DeferredRopeEqualsStandardRopeExactlyWithF32Kv) {
    for (ModelFamily fam : {ModelFamily::qwen3, ModelFamily::llama, ModelFamily::mistral}) {
        const auto weights = generate_synthetic_weights(family_config(fam), 5, DType::bf16, 1);
        CpuBackendOptions o;
        o.n_threads = 2;
        auto be = make_cpu_backend(weights, o);
        const int n = 45, V = weights.config.vocab_size;
        const auto tokens = random_tokens(n, V, 3);
        const std::span<const token_id> all(tokens);
        for (int first : {0, 17}) {  // the segment starts at position 0, or after a prefix of 17
            auto prefix = be->allocate_kv(first);
            if (first > 0) be->forward(all.first(size_t(first)), {nullptr, 0, prefix.get()}, {});
            const int L = n - first;
            auto plain = be->allocate_kv(L);
            const auto want = be->forward(all.subspan(size_t(first)), {prefix.get(), first, plain.get()}, iota_from(0, L));
            auto rotated = be->allocate_kv(L);
            auto unrotated = be->allocate_kv(L);
            const auto got = require_deferred_rope(*be).forward_capture_unrotated(all.subspan(size_t(first)), {prefix.get(), first, rotated.get()},
                                                           iota_from(0, L), *unrotated);
            const std::string ctx = std::string(family_str(fam)) + " first position " + std::to_string(first);
            // capturing changes nothing the pass computes
            ASSERT_EQ(got.size(), size_t(L) * size_t(V)) << ctx;
            EXPECT_TRUE(got == want) << ctx;
            EXPECT_EQ(unrotated->n_tokens(), L) << ctx;
            const auto rot = exported(*be, *rotated);
            auto deferred = exported(*be, *unrotated);
            EXPECT_NE(deferred, rot) << ctx << ": the captured keys must be the un-rotated ones";
            require_deferred_rope(*be).rope_rotate_kv(deferred, L, iota_from(first, L));
            const auto diff = kv_image_max_abs_diff_per_layer(deferred, rot, L, shape_of(*be), false);
            ASSERT_EQ(diff.size(), size_t(weights.config.n_layers));
            for (size_t l = 0; l < diff.size(); ++l) EXPECT_EQ(diff[l], 0.0) << ctx << " layer " << l;
            EXPECT_TRUE(deferred == rot) << ctx << ": deferred RoPE is not bit-identical";
            std::printf("[ rope check ] %s: max |diff| across %zu layers = %g (f32 KV)\n", ctx.c_str(), diff.size(),
                        max_of(diff));
            // The check can fail: rotating at positions one off is visibly different.
            auto shifted = exported(*be, *unrotated);
            require_deferred_rope(*be).rope_rotate_kv(shifted, L, iota_from(first + 1, L));
            EXPECT_GT(max_of(kv_image_max_abs_diff_per_layer(shifted, rot, L, shape_of(*be), false)), 1e-3) << ctx;
        }
    }
}

// With bf16 KV the captured keys are rounded to bf16 before the deferred rotation and again
// after it, where the forward pass rounds once: not bit-identical. The difference is measured and
// printed, and bounded by a few bf16 ulps of the keys' magnitude.
TEST(NopeRope, DeferredRopeWithBf16KvIsMeasured) {
    for (ModelFamily fam : {ModelFamily::qwen3, ModelFamily::llama}) {
        const auto weights = generate_synthetic_weights(family_config(fam), 5, DType::bf16, 1);
        CpuBackendOptions o;
        o.n_threads = 2;
        o.kv_dtype = KvDType::bf16;
        auto be = make_cpu_backend(weights, o);
        const int n = 40;
        const auto tokens = random_tokens(n, weights.config.vocab_size, 4);
        auto rotated = be->allocate_kv(n);
        auto unrotated = be->allocate_kv(n);
        require_deferred_rope(*be).forward_capture_unrotated(tokens, {nullptr, 0, rotated.get()}, {}, *unrotated);
        const auto rot = exported(*be, *rotated);
        auto deferred = exported(*be, *unrotated);
        require_deferred_rope(*be).rope_rotate_kv(deferred, n, iota_from(0, n));
        const auto diff = kv_image_max_abs_diff_per_layer(deferred, rot, n, shape_of(*be), true);
        // the largest |K or V| element, for the bound
        std::vector<std::byte> zero(rot.size(), std::byte{0});
        const double magnitude = max_of(kv_image_max_abs_diff_per_layer(rot, zero, n, shape_of(*be), true));
        std::printf("[ rope check ] %s: max |diff| across layers = %g with bf16 KV (largest |element| %g)\n",
                    family_str(fam), max_of(diff), magnitude);
        EXPECT_TRUE(std::isfinite(max_of(diff)));
        EXPECT_LE(max_of(diff), magnitude * std::ldexp(1.0, -6)) << family_str(fam);
    }
}

namespace {
// A backend that implements only the required interface: the experiment's methods must refuse.
class BareBackend final : public Backend {
public:
    std::string name() const override { return "bare"; }
    std::string numerics_id() const override { return "bare/f32"; }
    const ModelConfig& config() const override { return cfg_; }
    KvDType kv_dtype() const override { return KvDType::f32; }
    std::unique_ptr<KvBlock> allocate_kv(int) override { return nullptr; }
    std::vector<float> forward(std::span<const token_id>, const KvView&, std::span<const int>,
                               const std::atomic<bool>*) override {
        return {};
    }
    void export_kv(const KvBlock&, int, std::span<std::byte>) const override {}
    std::unique_ptr<KvBlock> import_kv(std::span<const std::byte>, int, int, int) override { return nullptr; }

private:
    ModelConfig cfg_;
};

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST(NopeRope, BackendsWithoutTheExperimentRefuseByName) {
    BareBackend be;
    const std::string what = error_of([&] { require_deferred_rope(be); });
    EXPECT_NE(what.find("not supported by the bare backend"), std::string::npos) << what;
    // the CPU backend, the reference, has the capability
    const auto weights = generate_builtin_weights(*find_builtin("qwen3-test"), 1);
    auto cpu = make_cpu_backend(weights);
    EXPECT_NO_THROW(require_deferred_rope(*cpu));
}

// ---- metrics on hand-made vectors ---------------------------------------------------------------

TEST(NopeMetrics, CosineSimilarity) {
    const std::vector<float> x{1, 0}, y{0, 1}, a{1, 2, 3}, b{4, 5, 6};
    EXPECT_DOUBLE_EQ(cosine_similarity(x, y), 0.0);
    EXPECT_DOUBLE_EQ(cosine_similarity(x, x), 1.0);
    const std::vector<float> a2{2, 4, 6}, neg{-1, -2, -3};
    EXPECT_NEAR(cosine_similarity(a, a2), 1.0, 1e-15);
    EXPECT_NEAR(cosine_similarity(a, neg), -1.0, 1e-15);
    EXPECT_NEAR(cosine_similarity(a, b), 32.0 / (std::sqrt(14.0) * std::sqrt(77.0)), 1e-15);
    const std::vector<float> zero{0, 0, 0};
    EXPECT_TRUE(std::isnan(cosine_similarity(a, zero)));
    EXPECT_THROW(cosine_similarity(a, x), std::invalid_argument);
    EXPECT_THROW(cosine_similarity(std::vector<float>{}, std::vector<float>{}), std::invalid_argument);
}

TEST(NopeMetrics, LogSoftmaxIsStable) {
    const auto two = log_softmax(std::vector<float>{0, 0});
    EXPECT_DOUBLE_EQ(two[0], -std::log(2.0));
    EXPECT_DOUBLE_EQ(two[1], -std::log(2.0));
    // exp(1000) overflows a double: the max is subtracted first
    const auto big = log_softmax(std::vector<float>{1000, 1000, -1000});
    EXPECT_NEAR(big[0], -std::log(2.0), 1e-12);
    EXPECT_NEAR(big[1], -std::log(2.0), 1e-12);
    EXPECT_LT(big[2], -1999);
    EXPECT_TRUE(std::isfinite(big[2]));
    EXPECT_THROW(log_softmax(std::vector<float>{}), std::invalid_argument);
}

TEST(NopeMetrics, KlDivergence) {
    const std::vector<float> p{0, 0}, q{0, float(std::log(3.0))};  // P = (1/2, 1/2), Q = (1/4, 3/4)
    const double want = 0.5 * std::log(0.5 / 0.25) + 0.5 * std::log(0.5 / 0.75);
    EXPECT_NEAR(kl_divergence(p, q), want, 1e-7);  // q's log 3 is rounded to float
    EXPECT_EQ(kl_divergence(q, q), 0.0);
    // shifting all logits does not change the distribution
    const std::vector<float> p_shift{100, 100};
    EXPECT_NEAR(kl_divergence(p_shift, q), want, 1e-7);
    // asymmetric: KL(Q || P) is a different number
    const double reverse = 0.25 * std::log(0.25 / 0.5) + 0.75 * std::log(0.75 / 0.5);
    EXPECT_NEAR(kl_divergence(q, p), reverse, 1e-7);
    // P puts ~all mass where Q puts ~none: large, finite
    const std::vector<float> sharp{50, -50}, other{-50, 50};
    EXPECT_NEAR(kl_divergence(sharp, other), 100.0, 1e-6);
    EXPECT_THROW(kl_divergence(p, std::vector<float>{1, 2, 3}), std::invalid_argument);
}

TEST(NopeMetrics, Top1TakesTheFirstMaximum) {
    EXPECT_EQ(top1(std::vector<float>{1, 3, 2}), 1u);
    EXPECT_EQ(top1(std::vector<float>{5, 5, 1}), 0u);
    EXPECT_EQ(top1(std::vector<float>{-1, -0.5f, -0.5f}), 1u);
    EXPECT_THROW(top1(std::vector<float>{}), std::invalid_argument);
}

TEST(NopeImage, SliceAndConcatAreInverse) {
    const KvImageShape s{2, 3, 4, 4};
    std::vector<std::byte> img(s.bytes(5));
    for (size_t i = 0; i < img.size(); ++i) img[i] = std::byte(i * 7 % 251);
    const auto a = kv_image_slice(img, 5, 0, 2, s);
    const auto b = kv_image_slice(img, 5, 2, 3, s);
    const std::vector<std::vector<std::byte>> parts{a, b};
    const std::vector<int> counts{2, 3};
    EXPECT_EQ(kv_image_concat(parts, counts, s), img);
    EXPECT_THROW(kv_image_slice(img, 5, 4, 2, s), std::invalid_argument);
    EXPECT_THROW(kv_image_slice(img, 6, 0, 1, s), std::invalid_argument);
}

// ---- the engine mode ---------------------------------------------------------------------------

namespace {

ToolSet first_tools(size_t n) {
    const auto path = test::source_dir() / "resources" / "toolsets" / "tools_20.json";
    auto arr = nlohmann::ordered_json::parse(test::read_file(path));
    nlohmann::ordered_json subset = nlohmann::ordered_json::array();
    for (size_t i = 0; i < n; ++i) subset.push_back(arr[i]);
    return ToolSet::from_json_text(subset.dump(), "subset");
}

Engine& test_engine(KvDType kv = KvDType::f32) { return test::builtin_test_engine(kv); }

QueryOptions nope_options(int max_new_tokens = 8) {
    QueryOptions q;
    q.max_new_tokens = max_new_tokens;
    q.ignore_eos = true;
    q.keep_logits = true;
    return q;
}

// A run as the CLI and the app see it: the composed run's result with the full prefill attached,
// and the report. One experiment per engine (it keeps the composed prefix between queries).
struct NopeOut : QueryResult {
    std::optional<NopeReport> nope;
};

NopeOut nope_query(Engine& engine, const std::string& query, const QueryOptions& q,
                   const std::function<void(const TokenEvent&)>& on_token = {}) {
    static std::map<Engine*, std::unique_ptr<NopeExperiment>> experiments;
    auto& x = experiments[&engine];
    if (!x) x = std::make_unique<NopeExperiment>();
    NopeRun run = x->run(engine, query, q, on_token);
    NopeOut out;
    static_cast<QueryResult&>(out) = std::move(run.composed);
    out.full = std::make_shared<QueryResult>(std::move(run.full));
    out.nope = std::move(run.report);
    return out;
}

}  // namespace

// The experiment is not a mode of the product's engine: it lives in core/research on the
// engine's public API.
TEST(NopeEngine, IsNotAnEngineMode) {
    try {
        parse_query_mode("per_tool_nope");
        FAIL() << "per_tool_nope must not parse as an engine mode";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("cached, full or compare"), std::string::npos) << e.what();
    }
}

// Qwen3: header = "<|im_start|>system\n...<tools>\n", tool i = its JSON line + "\n", footer =
// "</tools>\n\n...<|im_end|>\n"; the spans tile the prefix and each decodes to exactly its text.
TEST(NopeEngine, Qwen3LayoutTilesThePrefix) {
    Engine& engine = test_engine();
    const auto tools = first_tools(5);
    const auto format = make_chat_format("qwen3");
    for (const std::string system : {"", "You are a careful assistant."}) {
        const auto pieces = format->prefix_pieces(tools, system);
        const auto ids = tokenize_pieces(engine.tokenizer(), pieces);
        const auto text = pieces_text(pieces, &engine.tokenizer());
        const auto lay = nope_layout(engine.tokenizer(), ids, text, tools, "qwen3");
        ASSERT_EQ(lay.tool_tokens.size(), 5u);
        EXPECT_EQ(lay.tool_begin[0], lay.header_tokens);
        for (size_t i = 0; i + 1 < 5; ++i) EXPECT_EQ(lay.tool_begin[i] + lay.tool_tokens[i], lay.tool_begin[i + 1]);
        EXPECT_EQ(lay.footer_begin + lay.footer_tokens, ids.size());
        const std::span<const token_id> all(ids);
        const std::string header = engine.tokenizer().decode(all.first(lay.header_tokens));
        EXPECT_TRUE(header.ends_with("<tools>\n")) << header;
        EXPECT_TRUE(header.starts_with("<|im_start|>system\n")) << header;
        for (size_t i = 0; i < 5; ++i)
            EXPECT_EQ(engine.tokenizer().decode(all.subspan(lay.tool_begin[i], lay.tool_tokens[i])),
                      tools.tools()[i].canonical_text + "\n");
        const std::string footer = engine.tokenizer().decode(all.subspan(lay.footer_begin));
        EXPECT_TRUE(footer.starts_with("</tools>\n\n")) << footer;
        EXPECT_TRUE(footer.ends_with("<|im_end|>\n")) << footer;
    }
    EXPECT_THROW(nope_layout(engine.tokenizer(), {}, "", ToolSet(), "qwen3"), std::runtime_error);
}

// With one tool, the per-tool compile is the full prompt's own prefix computation (header + the
// only tool, same positions), and the deferred RoPE is exact with f32 KV: the composed run must
// give the full prefill's output bit for bit. If this fails, the construction is wrong.
TEST(NopeEngine, OneToolCompositionIsExactlyTheFullPrefill) {
    Engine& engine = test_engine();
    for (const std::string system : {"", "Answer with a tool call."}) {
        engine.set_tools(first_tools(1), system);
        for (const std::string query : {"What's the weather in Paris?", ""}) {
            const auto r = nope_query(engine, query, nope_options(10));
            ASSERT_TRUE(r.nope && r.full);
            EXPECT_FALSE(r.identical.has_value()) << "compare's fields stay unset in this mode";
            EXPECT_TRUE(r.nope->identical_logits) << "first difference at " << r.nope->first_difference.value_or(0);
            EXPECT_FALSE(r.nope->first_difference.has_value());
            EXPECT_EQ(r.nope->max_abs_logit_diff, 0.0);
            EXPECT_EQ(r.tokens, r.full->tokens);
            ASSERT_EQ(r.step_logits.size(), r.full->step_logits.size());
            for (size_t i = 0; i < r.step_logits.size(); ++i) EXPECT_TRUE(r.step_logits[i] == r.full->step_logits[i]) << i;
            EXPECT_EQ(r.nope->rope_check_max_abs_diff, 0.0);
            EXPECT_EQ(r.nope->kl_first, 0.0);
            EXPECT_NEAR(r.nope->logit_cosine_first, 1.0, 1e-12);
            EXPECT_EQ(r.nope->top1_agreement, 1.0);
            EXPECT_EQ(r.nope->compared_steps, r.full->tokens.size());
            EXPECT_NEAR(r.nope->logit_cosine_mean, 1.0, 1e-12);
            EXPECT_TRUE(r.nope->identical_tokens);
            EXPECT_EQ(r.nope->composed_tokens + r.nope->footer_tokens, r.full->prefix_tokens);
        }
    }
}

TEST(NopeEngine, FiveToolsRunEndToEndAndReportEveryField) {
    Engine& engine = test_engine();
    const auto compiled = engine.set_tools(first_tools(5), "");
    auto q = nope_options(12);
    std::string streamed;
    const auto r = nope_query(engine, "Book a table for two tomorrow at 8pm", q, [&](const TokenEvent& e) { streamed += e.text; });
    ASSERT_TRUE(r.nope.has_value());
    const NopeReport& n = *r.nope;
    EXPECT_EQ(r.mode, "per_tool_nope");
    EXPECT_EQ(n.n_tools, 5u);
    ASSERT_EQ(n.tool_tokens.size(), 5u);
    EXPECT_EQ(n.header_tokens + std::accumulate(n.tool_tokens.begin(), n.tool_tokens.end(), size_t(0)), n.composed_tokens);
    EXPECT_EQ(n.composed_tokens + n.footer_tokens, compiled.prefix_tokens);
    EXPECT_EQ(r.prefix_tokens, n.composed_tokens);
    EXPECT_EQ(r.suffix_tokens + r.prefix_tokens, r.full->prefix_tokens + r.full->suffix_tokens);  // same prompt length
    EXPECT_EQ(n.kv_dtype, "f32");
    EXPECT_EQ(n.rope_check_max_abs_diff, 0.0);
    EXPECT_EQ(n.rope_check_per_layer.size(), size_t(engine.model_info().config.n_layers));
    EXPECT_FALSE(n.reused);
    EXPECT_GT(n.build_ms, 0.0);
    EXPECT_EQ(n.compared_steps, r.full->tokens.size());  // teacher-forced over every step of the full run
    EXPECT_GE(n.logit_cosine_first, -1.0);
    EXPECT_LE(n.logit_cosine_first, 1.0);
    EXPECT_GE(n.kl_first, 0.0);
    EXPECT_GE(n.top1_agreement, 0.0);
    EXPECT_LE(n.top1_agreement, 1.0);
    EXPECT_EQ(n.identical_tokens, r.tokens == r.full->tokens);
    // The negative result's mechanism: tools 1..4 were compiled without the tools before them, so
    // the composed K/V, and with them the logits, are not the full prefill's.
    EXPECT_GT(n.max_abs_logit_diff, 0.0);
    EXPECT_FALSE(n.identical_logits);
    ASSERT_TRUE(n.first_difference.has_value());
    EXPECT_EQ(*n.first_difference, 0u);  // the first token's logits already differ
    EXPECT_FALSE(r.identical.has_value());
    EXPECT_LT(n.logit_cosine_first, 1.0);
    EXPECT_GT(n.kl_first, 0.0);
    // text and tokens are the NoPE run's (streamed), `full` is the full prefill
    EXPECT_EQ(streamed, r.text);
    ASSERT_TRUE(r.full);
    EXPECT_EQ(r.full->tokens.size(), r.full->generated_tokens);

    auto j = to_json(r);
    j["nope"] = to_json(n);  // as the CLI prints it
    for (const char* key : {"n_tools", "header_tokens", "tool_tokens", "footer_tokens", "composed_tokens", "kv_dtype",
                            "rope_check_max_abs_diff", "rope_check_per_layer", "logit_cosine_first", "logit_cosine_mean",
                            "kl_first", "compared_steps", "top1_agreement", "identical_tokens", "identical_logits",
                            "max_abs_logit_diff", "first_difference", "tool_name_match",
                            "build_ms", "reused"})
        EXPECT_TRUE(j["nope"].contains(key)) << key;
    EXPECT_TRUE(j.contains("full"));
    EXPECT_FALSE(j.contains("identical"));
    const std::string human = nope_report_text(n);
    EXPECT_NE(human.find("RoPE check"), std::string::npos) << human;
    EXPECT_NE(human.find("logit cosine"), std::string::npos) << human;
    EXPECT_EQ(j["mode"], "per_tool_nope");

    // the composed block is kept for the same tool set, and rebuilt for another
    const auto again = nope_query(engine, "Book a table for two tomorrow at 8pm", q);
    ASSERT_TRUE(again.nope);
    EXPECT_TRUE(again.nope->reused);
    EXPECT_EQ(again.nope->build_ms, 0.0);
    EXPECT_EQ(again.tokens, r.tokens);
    EXPECT_TRUE(again.step_logits == r.step_logits);
    engine.set_tools(first_tools(4), "");
    const auto other = nope_query(engine, "Book a table", q);
    EXPECT_FALSE(other.nope->reused);
    EXPECT_EQ(other.nope->n_tools, 4u);
}

// bf16 KV: the RoPE check is reported, not assumed to be 0.
TEST(NopeEngine, Bf16KvReportsTheMeasuredRopeCheck) {
    Engine& engine = test_engine(KvDType::bf16);
    engine.set_tools(first_tools(3), "");
    const auto r = nope_query(engine, "hello", nope_options(4));
    ASSERT_TRUE(r.nope);
    EXPECT_EQ(r.nope->kv_dtype, "bf16");
    EXPECT_TRUE(std::isfinite(r.nope->rope_check_max_abs_diff));
    std::printf("[ rope check ] engine, bf16 KV: max |diff| across layers = %g\n", r.nope->rope_check_max_abs_diff);
}

TEST(NopeEngine, CancelStopsTheComposedRunAndThePerToolCompile) {
    Engine& engine = test_engine();
    engine.set_tools(first_tools(3), "");
    // during the composed run's decoding (its tokens are the ones streamed)
    auto q = nope_options(40);
    const auto r = nope_query(engine, "go", q, [&](const TokenEvent& e) {
        if (e.index == 2) engine.cancel();
    });
    EXPECT_EQ(r.stop_reason, StopReason::cancelled);
    EXPECT_EQ(r.tokens.size(), 3u);
    ASSERT_TRUE(r.nope);
    EXPECT_EQ(r.nope->compared_steps, 0u);  // no teacher-forced comparison after a cancel

    // during the composition (a new tool set, so it is composed anew)
    engine.set_tools(first_tools(2), "");
    size_t seen = 0;
    engine.set_progress_handler([&](const EngineProgress& p) {
        if (p.stage == "nope_compile") {
            ++seen;
            engine.cancel();
        }
    });
    EXPECT_THROW(nope_query(engine, "go", nope_options(4)), Cancelled);
    EXPECT_EQ(seen, 1u);
    engine.set_progress_handler({});
    // nothing half-built is kept: the next query builds and answers
    const auto after = nope_query(engine, "go", nope_options(4));
    ASSERT_TRUE(after.nope);
    EXPECT_FALSE(after.nope->reused);
    EXPECT_EQ(after.tokens.size(), 4u);
}

TEST(NopeEngine, RequiresTools) {
    Engine& engine = test_engine();
    engine.set_tools(ToolSet(), "system only");
    try {
        nope_query(engine, "hi", nope_options(2));
        FAIL() << "an empty tool set must be refused";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("tool set is empty"), std::string::npos) << e.what();
    }
}

// ---- other chat formats (synthetic checkpoints with real tokenizers, as test_engine_families) ----

namespace {

std::unique_ptr<Engine> checkpoint_engine(const std::filesystem::path& dir, const nlohmann::json& config_json,
                                          const std::filesystem::path& tokenizer_json) {
    test::write_synthetic_checkpoint(dir, config_json, tokenizer_json);
    EngineOptions o;
    o.model_spec = dir.string();
    o.n_threads = 2;
    auto engine = std::make_unique<Engine>(o);
    engine->load_model();
    return engine;
}

}  // namespace

// Llama 3 prints each tool with 4-space indentation followed by "\n\n", in the system turn; the
// config uses llama3 rope scaling with a short original context, so the deferred rotation runs
// through all three frequency bands.
TEST(NopeEngine, Llama3FormatOneToolExactAndThreeToolsRun) {
    const auto tokenizer = test::gen_dir() / "llama3" / "tokenizer.json";
    if (!std::filesystem::exists(tokenizer))
        GTEST_SKIP() << tokenizer << " is absent (unpacked from tests/data/llama3_tokenizer.tar.xz)";
    test::TempDir dir;
    const nlohmann::json config = test::tiny_llama3_config();
    auto engine = checkpoint_engine(dir.path(), config, tokenizer);
    ASSERT_EQ(engine->model_info().chat_format, "llama3");

    engine->set_tools(first_tools(1), "Answer briefly.");
    const auto one = nope_query(*engine, "What's the weather in Paris?", nope_options(6));
    ASSERT_TRUE(one.nope && one.full);
    EXPECT_TRUE(one.nope->identical_logits);
    EXPECT_EQ(one.tokens, one.full->tokens);
    EXPECT_EQ(one.nope->rope_check_max_abs_diff, 0.0);

    engine->set_tools(first_tools(3), "Answer briefly.");
    const auto three = nope_query(*engine, "What's the weather in Paris?", nope_options(6));
    ASSERT_TRUE(three.nope);
    EXPECT_EQ(three.nope->n_tools, 3u);
    EXPECT_EQ(three.nope->rope_check_max_abs_diff, 0.0);
    EXPECT_GT(three.nope->max_abs_logit_diff, 0.0);
    EXPECT_EQ(three.nope->compared_steps, three.full->tokens.size());
}

// Mistral renders the tools as one JSON array joined by ", ": with a BPE tokenizer the space
// merges with the next tool's "{", so spans do not fall on token boundaries; with the small test
// tokenizer the token texts do not even add up to the prompt (byte fallback). Either way the mode
// refuses, naming the format, rather than compiling spans the full prompt does not have.
TEST(NopeEngine, MistralFormatIsRefusedWithTheReason) {
    const auto tokenizer = test::data_dir() / "mistral_test" / "tokenizer.json";
    test::TempDir dir;
    const nlohmann::json config = test::tiny_mistral_config();
    auto engine = checkpoint_engine(dir.path(), config, tokenizer);
    ASSERT_EQ(engine->model_info().chat_format, "mistral");
    engine->set_tools(first_tools(3), "");
    try {
        nope_query(*engine, "hi", nope_options(2));
        FAIL() << "the mistral format cannot be split per tool";
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("per_tool_nope (mistral format)"), std::string::npos) << what;
    }
}

// ---- the CLI ------------------------------------------------------------------------------------

TEST(NopeCli, QueryPrintsTheReportAsTextAndJson) {
    const std::string tools = (test::source_dir() / "resources" / "toolsets" / "tools_5.json").string();
    const std::vector<std::string> common = {"--model", "builtin:qwen3-test", "--threads", "2", "query", "--tools", tools,
                                             "--query", "weather in Paris", "--mode", "per_tool_nope",
                                             "--max-new-tokens", "3", "--ignore-eos"};
    const auto human = test::run_cli(common);
    EXPECT_EQ(human.exit_code, 0) << human.out << human.err;  // a difference is the experiment's result, not an error
    for (const char* part : {"per-tool NoPE", "RoPE check", "max |diff| 0 across", "logit cosine", "KL(full || nope)",
                             "top-1 agreement", "synthetic weights"})
        EXPECT_NE(human.out.find(part), std::string::npos) << part << " missing in:\n" << human.out;

    std::vector<std::string> json_args{"--json"};
    json_args.insert(json_args.end(), common.begin(), common.end());
    const auto js = test::run_cli(json_args);
    ASSERT_EQ(js.exit_code, 0) << js.out;
    const auto j = nlohmann::json::parse(js.out);
    EXPECT_EQ(j["mode"], "per_tool_nope");
    EXPECT_EQ(j["nope"]["n_tools"], 5);
    EXPECT_EQ(j["nope"]["rope_check_max_abs_diff"], 0.0);
    EXPECT_EQ(j["nope"]["compared_steps"], 3);
    EXPECT_TRUE(j["full"].is_object());
    EXPECT_EQ(j["full"]["tokens"].size(), 3u);
}
