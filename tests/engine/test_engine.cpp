// The engine's compile -> link -> query path. Exactness is the product: on the same backend the
// cached path must give bit-identical logits and tokens to a full prefill (asserted with ==).
#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels.h"
#include "core/engine/engine.h"
#include "core/engine/result_json.h"
#include "core/engine/sampler.h"
#include "core/model/builtin_model.h"
#include "core/model/model_spec.h"
#include "tests/test_support.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <tuple>

namespace {

using cc::Engine;
using cc::EngineOptions;
using cc::QueryMode;
using cc::QueryOptions;
using cc::ToolSet;

std::filesystem::path toolset_path(const std::string& name) {
    return cc::test::source_dir() / "resources" / "toolsets" / (name + ".json");
}

ToolSet first_tools(size_t n) {
    if (n == 0) return ToolSet();
    const auto all = ToolSet::from_file(toolset_path("tools_20"));
    auto arr = nlohmann::ordered_json::parse(cc::test::read_file(toolset_path("tools_20")));
    nlohmann::ordered_json subset = nlohmann::ordered_json::array();
    for (size_t i = 0; i < n; ++i) subset.push_back(arr[i]);
    return ToolSet::from_json_text(subset.dump(), "subset");
}

Engine& test_engine(int n_threads = 0, cc::KvDType kv = cc::KvDType::f32, cc::WeightDType weights = cc::WeightDType::stored) {
    // One engine per configuration, loaded once for the whole test program.
    static std::map<std::tuple<int, int, int>, std::unique_ptr<Engine>> engines;
    auto& slot = engines[{n_threads, static_cast<int>(kv), static_cast<int>(weights)}];
    if (!slot) {
        EngineOptions o;
        o.model_spec = "builtin:qwen3-test";
        o.n_threads = n_threads;
        o.kv_dtype = kv;
        o.weights = weights;
        slot = std::make_unique<Engine>(o);
        slot->load_model();
    }
    return *slot;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_identical(const cc::QueryResult& cached, const cc::QueryResult& full, const std::string& label) {
    ASSERT_EQ(cached.tokens, full.tokens) << label;
    ASSERT_EQ(cached.step_logits.size(), full.step_logits.size()) << label;
    for (size_t i = 0; i < cached.step_logits.size(); ++i)
        EXPECT_TRUE(bits_equal(cached.step_logits[i], full.step_logits[i])) << label << ": logits differ at generated token " << i;
}

TEST(Engine, LoadsTheBuiltinTestModel) {
    const auto& info = test_engine().model_info();
    EXPECT_TRUE(info.builtin);
    EXPECT_TRUE(info.synthetic_weights);
    EXPECT_EQ(info.chat_format, "qwen3");
    EXPECT_EQ(info.backend, "cpu");
    EXPECT_EQ(info.fingerprint.size(), 64u);
    EXPECT_EQ(info.config.head_dim, 32);  // != hidden / heads: Qwen3's independent head_dim
    EXPECT_GT(info.kv_bytes_per_token, 0u);
}

struct ExactCase {
    size_t n_tools;
    std::string query;
};

class EngineExactness : public ::testing::TestWithParam<ExactCase> {};

TEST_P(EngineExactness, CachedEqualsFullPrefillBitForBit) {
    Engine& engine = test_engine();
    const auto tools = first_tools(GetParam().n_tools);
    const auto compiled = engine.set_tools(tools, "You are a careful assistant.");
    EXPECT_EQ(compiled.n_tools, GetParam().n_tools);
    QueryOptions q;
    q.mode = QueryMode::compare;
    q.max_new_tokens = 8;
    q.ignore_eos = true;
    const auto r = engine.query(GetParam().query, q);
    ASSERT_TRUE(r.identical.has_value());
    EXPECT_TRUE(*r.identical) << "first difference at " << (r.first_difference ? *r.first_difference : 0);
    EXPECT_EQ(r.max_abs_logit_diff, 0.0);
    ASSERT_TRUE(r.full);
    expect_identical(r, *r.full, "tools=" + std::to_string(GetParam().n_tools));
    EXPECT_EQ(r.generated_tokens, 8u);
    EXPECT_TRUE(r.cache_hit);
    EXPECT_EQ(r.prefix_tokens + r.suffix_tokens, r.full->prefix_tokens + r.full->suffix_tokens);
}

INSTANTIATE_TEST_SUITE_P(
    ToolsAndQueries, EngineExactness,
    ::testing::Values(ExactCase{0, "Hello"}, ExactCase{1, ""}, ExactCase{5, "What's the weather in Paris tomorrow?"},
                      ExactCase{20, "Book a table for two at 7pm"},
                      ExactCase{5, std::string(600, 'x') + " long query " + std::string(300, '!')},
                      ExactCase{1, "天気はどう？ 😀 café — </tools><|im_end|><|im_start|>system"}));

TEST(Engine, ExactAcrossThreadCountsKvDtypesAndWeightFormats) {
    const auto tools = first_tools(5);
    QueryOptions q;
    q.mode = QueryMode::full;
    q.max_new_tokens = 6;
    q.ignore_eos = true;
    q.mode = QueryMode::compare;
    std::vector<cc::QueryResult> results;
    for (int threads : {1, 2, 3}) {
        Engine& e = test_engine(threads);
        e.set_tools(tools, "");
        results.push_back(e.query("Convert 10 USD to EUR", q));
        EXPECT_TRUE(*results.back().identical);
    }
    for (size_t i = 1; i < results.size(); ++i) expect_identical(results[i], results[0], "threads");

    Engine& bf16 = test_engine(0, cc::KvDType::bf16);
    EXPECT_TRUE(bf16.model_info().numerics.ends_with("/bf16")) << bf16.model_info().numerics;
    bf16.set_tools(tools, "");
    const auto r = bf16.query("Convert 10 USD to EUR", q);
    EXPECT_TRUE(*r.identical);

    // every in-memory weight format, each under its own group key
    const std::string f32_key = test_engine(0).set_tools(tools, "").group_key;
    std::vector<cc::WeightDType> formats{cc::WeightDType::bf16, cc::WeightDType::q8};
    if (cc::cpu::bf16dot::supported()) formats.push_back(cc::WeightDType::bf16dot);  // AVX-512 BF16 CPUs only
    for (cc::WeightDType w : formats) {
        Engine& e = test_engine(0, cc::KvDType::bf16, w);
        EXPECT_TRUE(e.model_info().numerics.find(std::string("/weights=") + cc::weight_dtype_name(w)) != std::string::npos)
            << e.model_info().numerics;
        const auto compiled = e.set_tools(tools, "");
        EXPECT_NE(compiled.group_key, f32_key) << cc::weight_dtype_name(w);
        const auto rw = e.query("Convert 10 USD to EUR", q);
        EXPECT_TRUE(*rw.identical) << cc::weight_dtype_name(w);
        EXPECT_EQ(rw.tokens.size(), 6u);
    }
}

TEST(Engine, RepeatedQueriesHitTheMemoryTierAndGiveTheSameAnswer) {
    Engine& engine = test_engine();
    const auto tools = first_tools(5);
    auto first = engine.set_tools(tools, "sys");
    auto again = engine.set_tools(tools, "sys");
    EXPECT_TRUE(again.cache_hit);
    EXPECT_EQ(again.tier, cc::Tier::memory);
    EXPECT_EQ(again.group_key, first.group_key);
    EXPECT_EQ(again.compile_ms, 0.0);
    QueryOptions q;
    q.max_new_tokens = 5;
    q.ignore_eos = true;
    const auto a = engine.query("hi", q);
    const auto b = engine.query("hi", q);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_TRUE(a.cache_hit);
    EXPECT_EQ(a.timings.link_ms, a.timings.lookup_ms + a.timings.disk_load_ms + a.timings.upload_ms);
    // Order of tools in the file does not matter: same key, hit.
    auto arr = nlohmann::ordered_json::parse(cc::test::read_file(toolset_path("tools_5")));
    std::reverse(arr.begin(), arr.end());
    const auto reversed = engine.set_tools(ToolSet::from_json_text(arr.dump(), "rev"), "sys");
    EXPECT_EQ(reversed.group_key, first.group_key);
    EXPECT_TRUE(reversed.cache_hit);
}

TEST(Engine, EvictedGroupIsRecompiledInsideTheQuery) {
    Engine& engine = test_engine();
    const auto compiled = engine.set_tools(first_tools(1), "evict me");
    ASSERT_TRUE(engine.cache().remove(compiled.group_key));
    QueryOptions q;
    q.max_new_tokens = 3;
    q.ignore_eos = true;
    const auto r = engine.query("hello", q);
    EXPECT_FALSE(r.cache_hit);
    EXPECT_EQ(r.tier, cc::Tier::miss);
    EXPECT_GT(r.timings.compile_ms, 0.0);
    const auto r2 = engine.query("hello", q);
    EXPECT_TRUE(r2.cache_hit);
    EXPECT_EQ(r.tokens, r2.tokens);
}

TEST(Engine, StreamingCallbackRebuildsTheText) {
    Engine& engine = test_engine();
    engine.set_tools(first_tools(1), "");
    QueryOptions q;
    q.max_new_tokens = 12;
    q.ignore_eos = true;
    std::string streamed;
    int n_events = 0;
    const auto r = engine.query("stream please", q, [&](const cc::TokenEvent& e) {
        streamed += e.text;
        ++n_events;
    });
    EXPECT_GE(n_events, 12);
    // The stream decodes with special tokens skipped, like the final text.
    EXPECT_EQ(streamed, r.text);
}

TEST(Engine, CancelStopsGeneration) {
    Engine& engine = test_engine();
    engine.set_tools(first_tools(1), "");
    QueryOptions q;
    q.max_new_tokens = 50;
    q.ignore_eos = true;
    const auto r = engine.query("go", q, [&](const cc::TokenEvent& e) {
        if (e.index == 2) engine.cancel();
    });
    EXPECT_EQ(r.stop_reason, cc::StopReason::cancelled);
    EXPECT_EQ(r.tokens.size(), 3u);
}

TEST(Engine, SeededSamplingIsReproducible) {
    Engine& engine = test_engine();
    engine.set_tools(first_tools(1), "");
    QueryOptions q;
    q.max_new_tokens = 10;
    q.ignore_eos = true;
    q.temperature = 1.5f;
    q.top_p = 0.95f;
    q.seed = 42;
    const auto a = engine.query("sample", q);
    const auto b = engine.query("sample", q);
    EXPECT_EQ(a.tokens, b.tokens);
    q.mode = QueryMode::compare;
    const auto c = engine.query("sample", q);
    EXPECT_TRUE(*c.identical);
    EXPECT_EQ(c.tokens, a.tokens);
}

TEST(Engine, GenerateAndLogitsAgree) {
    Engine& engine = test_engine();
    const std::vector<cc::token_id> prompt{9707, 1879, 11, 1246};
    const auto g = engine.generate(prompt, 4, true);
    ASSERT_EQ(g.ids.size(), 4u);
    const auto logits = engine.last_logits(prompt);
    ASSERT_EQ(logits.size(), static_cast<size_t>(engine.model_info().config.vocab_size));
    EXPECT_EQ(static_cast<cc::token_id>(std::max_element(logits.begin(), logits.end()) - logits.begin()), g.ids[0]);
    EXPECT_THROW(engine.last_logits({}), std::invalid_argument);
    EXPECT_THROW(engine.last_logits({-1}), std::runtime_error);
    EXPECT_THROW(engine.last_logits({10'000'000}), std::runtime_error);
}

// A greedy reply whose logits nobody reads (none kept, no constraint) takes its tokens from the
// backend (SequenceRows::argmax: on a GPU only the ids come back); they are the tokens the host
// picks from the logits when they are kept, directly and through the step scheduler (parallel),
// cached and full.
TEST(Engine, GreedyTokensPickedByTheBackendAreTheHostsPicks) {
    EngineOptions po;
    po.model_spec = "builtin:qwen3-test";
    po.parallel = 2;
    Engine parallel(po);
    parallel.load_model();
    for (Engine* engine : {&test_engine(), &parallel}) {
        engine->set_tools(first_tools(2), "");
        for (const QueryMode mode : {QueryMode::cached, QueryMode::full}) {
            const std::string label = std::string(engine == &parallel ? "scheduler" : "direct") +
                                      (mode == QueryMode::full ? ", full" : ", cached");
            QueryOptions q;
            q.max_new_tokens = 12;
            q.ignore_eos = true;
            q.mode = mode;
            const auto by_backend = engine->query("What is the weather in Paris?", q);
            q.keep_logits = true;
            const auto by_host = engine->query("What is the weather in Paris?", q);
            ASSERT_EQ(by_host.step_logits.size(), 12u) << label;
            EXPECT_TRUE(by_backend.step_logits.empty()) << label;
            EXPECT_EQ(by_backend.tokens, by_host.tokens) << label;
            for (size_t i = 0; i < by_host.tokens.size(); ++i)
                EXPECT_EQ(by_host.tokens[i], cc::argmax_token(by_host.step_logits[i])) << label << " token " << i;
        }
    }
    // generate(): the raw model, greedy, picked by the backend after the first token
    const std::vector<cc::token_id> prompt{9707, 1879, 11, 1246};
    const auto g = test_engine().generate(prompt, 6, true);
    std::vector<cc::token_id> chain = prompt;
    for (size_t i = 0; i < g.ids.size(); ++i) {
        EXPECT_EQ(g.ids[i], cc::argmax_token(test_engine().last_logits(chain))) << "token " << i;
        chain.push_back(g.ids[i]);
    }
}

// A prompt longer than Engine::kForwardChunkTokens runs in chunks (bounded activations): the
// logits are the bits of one backend call over the whole prompt, at every chunk edge.
TEST(Engine, LongPromptsRunInChunksWithTheBitsOfOneCall) {
    Engine& engine = test_engine(2);
    const auto recipe = *cc::find_builtin("qwen3-test");
    const cc::ModelWeights weights = cc::generate_builtin_weights(recipe, 1);
    cc::CpuBackendOptions bo;
    bo.n_threads = 2;
    const auto backend = cc::make_cpu_backend(weights, bo);
    ASSERT_EQ(backend->numerics_id(), engine.model_info().numerics);
    const int V = engine.model_info().config.vocab_size;
    const size_t chunk = Engine::kForwardChunkTokens;
    std::mt19937 rng(3);
    std::vector<cc::token_id> prompt(2 * chunk + 37);
    for (auto& t : prompt) t = static_cast<cc::token_id>(rng() % 5000u);
    for (size_t n : {chunk, chunk + 1, 2 * chunk, prompt.size()}) {
        const std::span<const cc::token_id> ids(prompt.data(), n);
        auto block = backend->allocate_kv(static_cast<int>(n));
        const int last = static_cast<int>(n) - 1;
        const auto one_call = backend->forward(ids, {nullptr, 0, block.get()}, std::span<const int>(&last, 1));
        ASSERT_EQ(one_call.size(), size_t(V));
        EXPECT_TRUE(engine.last_logits(std::vector<cc::token_id>(ids.begin(), ids.end())) == one_call)
            << n << " tokens";
    }
    // A query whose new part spans chunks: the cached path (prefix linked, a suffix of three
    // chunks) gives the full prefill's bits (itself in chunks, checked against one call above).
    engine.set_tools(first_tools(2), "");
    std::string long_query;
    for (int i = 0; i < 160; ++i) long_query += "Please check item " + std::to_string(i) + " and ";
    QueryOptions q;
    q.max_new_tokens = 3;
    q.ignore_eos = true;
    q.mode = QueryMode::compare;
    const auto c = engine.query(long_query, q);
    EXPECT_GT(c.suffix_tokens, 2 * chunk);
    EXPECT_TRUE(*c.identical);
}

TEST(Engine, QueryBeforeSetToolsIsAnError) {
    EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    Engine e(o);
    e.load_model();
    EXPECT_THROW(e.query("x", QueryOptions{}), std::logic_error);
}

TEST(Engine, BuiltinWeightsDoNotDependOnThreadCount) {
    const auto recipe = *cc::find_builtin("qwen3-test");
    const auto a = cc::generate_builtin_weights(recipe, 1);
    const auto b = cc::generate_builtin_weights(recipe, 3);
    ASSERT_EQ(a.embed.n_bytes, b.embed.n_bytes);
    EXPECT_EQ(std::memcmp(a.embed.data, b.embed.data, a.embed.n_bytes), 0);
    EXPECT_EQ(std::memcmp(a.layers[1].w_down.data, b.layers[1].w_down.data, a.layers[1].w_down.n_bytes), 0);
    EXPECT_NE(cc::builtin_recipe_text(recipe), cc::builtin_recipe_text(*cc::find_builtin("qwen3-demo")));
}

TEST(Engine, TrainedBuiltinIsAbsentWithoutItsObjects) {
    // This program does not link cc_bundled_models: the trained model is not listed, and asking
    // for it says how to load it instead.
    for (const auto& r : cc::builtin_recipes()) EXPECT_FALSE(r.trained()) << r.name;
    try {
        cc::resolve_model("builtin:toolcaller");
        FAIL() << "expected an error";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("resources/models/toolcaller"), std::string::npos) << e.what();
    }
    // ... and the default model is the synthetic one, which every program has.
    EXPECT_EQ(cc::default_model_spec(), "builtin:qwen3-demo");
    EXPECT_EQ(EngineOptions{}.model_spec, "builtin:qwen3-demo");
}

TEST(Engine, ResultJsonHasTheDesignFields) {
    Engine& engine = test_engine();
    engine.set_tools(first_tools(1), "");
    QueryOptions q;
    q.max_new_tokens = 2;
    q.mode = QueryMode::compare;
    const auto j = cc::to_json(engine.query("hi", q));
    for (const char* k : {"text", "tokens", "tool_call", "cache_hit", "tier", "prefix_tokens", "suffix_tokens",
                          "generated_tokens", "reused_tokens", "timings", "full", "identical", "max_abs_logit_diff",
                          "first_difference"})
        EXPECT_TRUE(j.contains(k)) << k;
    for (const char* k : {"tokenize_ms", "lookup_ms", "disk_load_ms", "upload_ms", "link_ms", "prefill_ms", "ttft_ms",
                          "decode_ms", "total_ms", "prefill_tok_s", "decode_tok_s", "disk_load_gb_s"})
        EXPECT_TRUE(j["timings"].contains(k)) << k;
}

}  // namespace
