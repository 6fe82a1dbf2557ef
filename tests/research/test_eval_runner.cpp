// core/research/eval_runner on the built-in test model: modes, the group cache across examples, identical
// outputs in both mode, progress and cancellation, and records scored with core/research/eval's metrics.
#include "core/engine/engine.h"
#include "core/research/eval.h"
#include "core/research/eval_runner.h"
#include "tests/test_support.h"

#include <atomic>
#include <memory>

namespace {

cc::Engine& test_engine() {
    static std::unique_ptr<cc::Engine> engine;
    if (!engine) {
        cc::EngineOptions o;
        o.model_spec = "builtin:qwen3-test";  // memory tier only: no cache dir
        engine = std::make_unique<cc::Engine>(o);
        engine->load_model();
    }
    return *engine;
}

cc::EvalDataset dataset() {
    const std::string text =
        R"({"id": "a", "tools_file": "resources/toolsets/tools_5.json", "query": "Weather in Oslo?", "expected": {"name": "get_current_weather", "arguments": {"location": "Oslo"}}})"
        "\n"
        R"({"id": "b", "tools_file": "resources/toolsets/tools_5.json", "query": "Hello there", "expected": null})"
        "\n"
        R"({"id": "c", "tools_file": "resources/toolsets/tools_10.json", "system": "Be brief.", "query": "Refund order 7", "expected": {"name": "process_refund", "arguments": {"order_id": "7"}}})"
        "\n";
    return cc::parse_eval_dataset(text, "runner.jsonl", cc::test::source_dir());
}

cc::EvalRunOptions options(const std::string& mode) {
    cc::EvalRunOptions o;
    o.mode = mode;
    o.query.max_new_tokens = 4;
    return o;
}

TEST(EvalRunner, BothModeScoresCachedAndFullAndCountsIdenticalOutputs) {
    auto& engine = test_engine();
    const auto ds = dataset();
    std::vector<size_t> seen;
    const auto r = cc::run_eval(engine, ds, options("both"), [&](const cc::EvalProgress& p) {
        EXPECT_EQ(p.total, 3u);
        ASSERT_NE(p.last, nullptr);
        seen.push_back(p.done);
    });
    EXPECT_EQ(seen, (std::vector<size_t>{1, 2, 3}));
    EXPECT_TRUE(r.synthetic_weights);
    EXPECT_FALSE(r.cancelled);
    ASSERT_EQ(r.records.size(), 3u);
    EXPECT_EQ(r.n_compared, 3u);
    EXPECT_EQ(r.n_identical_tokens, 3u);
    EXPECT_EQ(r.n_identical_logits, 3u);
    // the second example reuses the first one's tool set: a cache hit
    EXPECT_TRUE(r.records[1].compile_hit);
    for (const auto& rec : r.records) {
        ASSERT_EQ(rec.outputs.size(), 2u);
        EXPECT_EQ(rec.outputs[0].mode, "cached");
        EXPECT_EQ(rec.outputs[1].mode, "full");
        EXPECT_EQ(rec.outputs[0].tokens, rec.outputs[1].tokens);
        EXPECT_EQ(rec.identical_tokens, true);
        // each output is scored against its example as core/research/eval defines it
        for (const auto& o : rec.outputs) {
            const auto expect = cc::score_example(rec.expected, o.tool_call);
            EXPECT_EQ(o.score.false_negative, expect.false_negative);
            EXPECT_EQ(o.score.false_positive, expect.false_positive);
            EXPECT_EQ(o.score.correct_tool, expect.correct_tool);
        }
    }
    ASSERT_EQ(r.summaries.size(), 2u);
    EXPECT_EQ(r.summaries[0].mode, "cached");
    EXPECT_EQ(r.summaries[0].metrics.n_tool_call, 2u);
    EXPECT_EQ(r.summaries[0].metrics.n_no_call, 1u);
    const auto j = cc::eval_summary_json(r);
    EXPECT_EQ(j["identical_tokens"], 3);
    EXPECT_EQ(j["warning"], cc::kSyntheticEvalWarning);
}

TEST(EvalRunner, SingleModesAndLimit) {
    auto& engine = test_engine();
    const auto ds = dataset();
    for (const std::string mode : {"cached", "full"}) {
        auto o = options(mode);
        o.limit = 2;
        const auto r = cc::run_eval(engine, ds, o);
        ASSERT_EQ(r.records.size(), 2u) << mode;
        ASSERT_EQ(r.summaries.size(), 1u);
        EXPECT_EQ(r.summaries[0].mode, mode);
        EXPECT_EQ(r.records[0].outputs.size(), 1u);
        EXPECT_FALSE(r.records[0].identical_tokens.has_value());
        EXPECT_EQ(r.n_compared, 0u);
    }
    // the engine's own name for both mode is accepted too
    EXPECT_EQ(cc::eval_query_mode("compare"), cc::QueryMode::compare);
    EXPECT_EQ(cc::eval_query_mode("both"), cc::QueryMode::compare);
    EXPECT_THROW(cc::eval_query_mode("sideways"), std::invalid_argument);
}

// The per-tool NoPE experiment (core/research/nope.h) as an evaluation mode: the composed run is
// the primary output, the full prefill the second, and the pair is counted as compared. Each
// record carries the experiment's report; its verdict is the record's identical_logits. With one
// tool the composition is the full prefill's own computation (exact with f32 KV); with five on
// synthetic weights the logits differ from the first token (NopeEngine tests), so the two
// verdicts must differ, and the summary's means are those of the records.
TEST(EvalRunner, PerToolNopeModeRecordsTheComposedAndTheFullRun) {
    auto& engine = test_engine();
    const std::string text =
        R"({"id": "five", "tools_file": "resources/toolsets/tools_5.json", "query": "Weather in Oslo?", "expected": {"name": "get_current_weather", "arguments": {"location": "Oslo"}}})"
        "\n"
        R"({"id": "one", "tools": [{"type": "function", "function": {"name": "get_time", "description": "The current time", "parameters": {"type": "object", "properties": {}}}}], "query": "What time is it?", "expected": {"name": "get_time", "arguments": {}}})"
        "\n";
    const auto ds = cc::parse_eval_dataset(text, "nope.jsonl", cc::test::source_dir());
    const auto r = cc::run_eval(engine, ds, options("per_tool_nope"));
    ASSERT_EQ(r.records.size(), 2u);
    for (const auto& rec : r.records) {
        ASSERT_EQ(rec.outputs.size(), 2u);
        EXPECT_EQ(rec.outputs[0].mode, "per_tool_nope");
        EXPECT_EQ(rec.outputs[1].mode, "full");
        EXPECT_FALSE(rec.outputs[0].tokens.empty());
        EXPECT_FALSE(rec.outputs[1].tokens.empty());
        ASSERT_TRUE(rec.identical_tokens.has_value());
        ASSERT_TRUE(rec.nope.has_value()) << rec.id;
        EXPECT_EQ(rec.identical_logits, rec.nope->identical_logits) << rec.id;
        EXPECT_EQ(rec.first_difference, rec.nope->first_difference) << rec.id;
        EXPECT_EQ(cc::to_json(rec)["nope"]["logit_cosine_first"], rec.nope->logit_cosine_first);
    }
    const auto& five = *r.records[0].nope;
    const auto& one = *r.records[1].nope;
    EXPECT_EQ(five.n_tools, 5u);
    EXPECT_EQ(r.records[0].identical_logits, false);
    EXPECT_EQ(r.records[0].first_difference, 0u);
    EXPECT_EQ(one.n_tools, 1u);
    EXPECT_EQ(r.records[1].identical_logits, true);
    EXPECT_EQ(r.records[1].outputs[0].tokens, r.records[1].outputs[1].tokens);
    EXPECT_EQ(one.kl_first, 0.0);
    EXPECT_EQ(r.n_compared, 2u);
    EXPECT_EQ(r.n_identical_logits, 1u);

    const auto m = cc::nope_means(r.records);
    EXPECT_EQ(m.n, 2u);
    EXPECT_EQ(m.nan_figures, 0u);
    EXPECT_DOUBLE_EQ(m.logit_cosine_first, (five.logit_cosine_first + one.logit_cosine_first) / 2);
    EXPECT_DOUBLE_EQ(m.kl_first, five.kl_first / 2);
    EXPECT_DOUBLE_EQ(m.top1_agreement, (five.top1_agreement + one.top1_agreement) / 2);
    const auto j = cc::eval_summary_json(r);
    EXPECT_EQ(j["identical_logits"], 1);
    EXPECT_EQ(j["nope"]["n"], 2);
    EXPECT_DOUBLE_EQ(j["nope"]["mean_kl_first"].get<double>(), m.kl_first);
    // the other modes carry no report
    EXPECT_FALSE(cc::eval_summary_json(cc::run_eval(engine, ds, options("full"))).contains("nope"));
    EXPECT_EQ(cc::eval_query_mode("per_tool_nope"), cc::QueryMode::full);
}

TEST(EvalRunner, CancelStopsBetweenExamples) {
    auto& engine = test_engine();
    const auto ds = dataset();
    std::atomic<bool> cancel{false};
    const auto r = cc::run_eval(
        engine, ds, options("cached"), [&](const cc::EvalProgress&) { cancel = true; }, &cancel);
    EXPECT_TRUE(r.cancelled);
    EXPECT_EQ(r.records.size(), 1u);
    ASSERT_EQ(r.summaries.size(), 1u);
    EXPECT_EQ(r.summaries[0].metrics.n_examples, 1u);
    EXPECT_TRUE(cc::eval_summary_json(r)["cancelled"].get<bool>());
}

TEST(EvalRunner, EngineErrorsNameTheExample) {
    cc::EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    cc::Engine engine(o);
    EXPECT_THROW(cc::run_eval(engine, dataset(), options("cached")), std::logic_error);  // no model loaded
    auto bad = options("cached");
    bad.query.max_new_tokens = 0;  // the engine refuses it
    try {
        cc::run_eval(test_engine(), dataset(), bad);
        ADD_FAILURE() << "no error";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("runner.jsonl:1 (example \"a\")"), std::string::npos) << e.what();
    }
}

}  // namespace
