// Conversations through the engine: every turn of a tool-using conversation, answered with the
// group prefix and the stored KV of the turns before, is bit-identical (==) to a full prefill of
// the same rendered conversation -- on every chat format, with tool results holding unicode, JSON
// and special-token strings, thinking on and off, an edited history, and generated ids that
// re-tokenise differently (the seam). Also: where a request's prefix came from (tier, disk load
// inside its TTFT), and the conversation cache's own bookkeeping.
#include "core/engine/engine.h"
#include "core/cpu/cpu_backend.h"
#include "core/model/builtin_model.h"
#include "tests/synthetic_checkpoint.h"
#include "tests/test_support.h"

#include <algorithm>
#include <map>

namespace {

namespace fs = std::filesystem;
using cc::ChatMessage;
using cc::ChatRequest;
using cc::QueryResult;

cc::ToolSet sample_tools(size_t n) {
    const auto path = cc::test::source_dir() / "resources" / "toolsets" / "tools_20.json";
    auto arr = nlohmann::ordered_json::parse(cc::test::read_file(path));
    nlohmann::ordered_json subset = nlohmann::ordered_json::array();
    for (size_t i = 0; i < n; ++i) subset.push_back(arr[i]);
    return cc::ToolSet::from_json_text(subset.dump(), "subset");
}

size_t common_prefix(const std::vector<cc::token_id>& a, const std::vector<cc::token_id>& b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

cc::ChatToolCall call(std::string id, std::string name, nlohmann::ordered_json args) {
    cc::ChatToolCall c;
    c.id = std::move(id);
    c.name = std::move(name);
    c.arguments_text = args.dump();
    c.arguments = std::move(args);
    return c;
}

ChatMessage tool_call_message(cc::ChatToolCall c) {
    ChatMessage m = ChatMessage::assistant("");
    m.tool_calls.push_back(std::move(c));
    return m;
}

void expect_exact(const QueryResult& r, const std::string& label) {
    ASSERT_TRUE(r.identical.has_value()) << label;
    EXPECT_TRUE(*r.identical) << label << ": first difference at " << (r.first_difference ? *r.first_difference : 0);
    ASSERT_TRUE(r.full) << label;
    EXPECT_EQ(r.tokens, r.full->tokens) << label;
    ASSERT_EQ(r.step_logits.size(), r.full->step_logits.size()) << label;
    for (size_t i = 0; i < r.step_logits.size(); ++i)
        EXPECT_TRUE(r.step_logits[i] == r.full->step_logits[i]) << label << ": logits differ at generated token " << i;
    EXPECT_EQ(r.prompt_tokens, r.group_reused_tokens + r.conversation_reused_tokens + r.prefilled_tokens) << label;
    EXPECT_EQ(r.full->prefilled_tokens, r.full->prompt_tokens) << label;
    EXPECT_EQ(r.prompt_tokens, r.full->prompt_tokens) << label;
}

cc::QueryOptions compare_options(int max_new = 5) {
    cc::QueryOptions q;
    q.mode = cc::QueryMode::compare;
    q.max_new_tokens = max_new;
    q.ignore_eos = true;
    return q;
}

// Six requests of an agent loop: a question, two tool calls with their results, an answer, a
// follow-up, a third call. The tool results hold unicode, JSON and strings that look like every
// format's special tokens (they must stay text). Returns each turn's result.
std::vector<QueryResult> six_turns(cc::Engine& engine, const cc::ToolSet& tools, const std::string& system,
                                   const cc::RenderOptions& render, bool nine_char_ids, const std::string& label) {
    const auto id = [&](int n) { return nine_char_ids ? "call" + std::to_string(10000 + n) : "call_" + std::to_string(n); };
    ChatRequest req{tools, system, {ChatMessage::user("What's the weather in Zürich, and should I cycle?")}, render};
    std::vector<QueryResult> turns;
    const auto turn = [&]() {
        turns.push_back(engine.chat(req, compare_options()));
        expect_exact(turns.back(), label + " turn " + std::to_string(turns.size()));
    };
    turn();
    req.messages.push_back(tool_call_message(call(id(1), "get_weather", {{"city", "Zürich"}, {"unit", "celsius"}})));
    req.messages.push_back(ChatMessage::tool_result(id(1), R"({"temp": 21.5, "sky": "☀️ sunny", "wind_kmh": 12})"));
    turn();
    req.messages.push_back(tool_call_message(call(id(2), "get_air_quality", {{"city", "Zürich"}})));
    req.messages.push_back(ChatMessage::tool_result(
        id(2), "AQI 17 </tool_response><|im_end|> <|eot_id|> [/TOOL_RESULTS] </s> — 東京 too"));
    turn();
    req.messages.push_back(ChatMessage::assistant("It is 21.5 °C and sunny with clean air: a good day to cycle."));
    req.messages.push_back(ChatMessage::user("And tomorrow?"));
    turn();
    req.messages.push_back(tool_call_message(call(id(3), "get_weather", {{"city", "Zürich"}, {"day", "tomorrow"}})));
    req.messages.push_back(ChatMessage::tool_result(id(3), "{\"temp\": 14, \"sky\": \"rain\"}"));
    turn();
    req.messages.push_back(ChatMessage::assistant("Rain and 14 °C tomorrow."));
    req.messages.push_back(ChatMessage::user("Thanks!"));
    turn();
    return turns;
}

size_t reused(const QueryResult& r) { return r.group_reused_tokens + r.conversation_reused_tokens; }

// Reuse grows turn by turn where the template keeps earlier turns in front.
void expect_growing_reuse(const std::vector<QueryResult>& turns, const std::string& label) {
    ASSERT_EQ(turns.size(), 6u);
    EXPECT_EQ(turns[0].conversation_reused_tokens, 0u) << label;
    for (size_t i = 1; i < turns.size(); ++i) {
        EXPECT_EQ(turns[i].conversation_tier, cc::Tier::memory) << label << " turn " << i + 1;
        EXPECT_GT(reused(turns[i]), reused(turns[i - 1])) << label << " turn " << i + 1;
        // Everything up to the previous request's generation prompt was stored and is reused.
        EXPECT_GE(reused(turns[i]), turns[i - 1].prompt_tokens - 8) << label << " turn " << i + 1;
    }
}

cc::Engine& qwen3_engine() {
    static std::unique_ptr<cc::Engine> engine = [] {
        cc::EngineOptions o;
        o.model_spec = "builtin:qwen3-test";
        o.n_threads = 2;
        auto e = std::make_unique<cc::Engine>(o);
        e->load_model();
        return e;
    }();
    return *engine;
}

TEST(ConversationEngine, Qwen3SixTurnsExactWithGrowingReuse) {
    auto& engine = qwen3_engine();
    engine.clear_conversations();
    const auto turns = six_turns(engine, sample_tools(5), "You are a weather assistant.", {}, false, "qwen3");
    expect_growing_reuse(turns, "qwen3");
    EXPECT_TRUE(turns[0].group_reused_tokens > 0 || turns[0].tier == cc::Tier::miss);
    for (const auto& t : turns) EXPECT_EQ(t.prefix_tokens, turns[0].prefix_tokens);
    // Qwen3's template re-renders the earlier assistant turns without the empty <think> block the
    // model saw when it generated them: the stored state diverges right after that turn's header.
    for (size_t i = 1; i < turns.size(); ++i) EXPECT_TRUE(turns[i].diverged_at.has_value()) << "turn " << i + 1;
}

TEST(ConversationEngine, Qwen3ThinkingOnIsExact) {
    auto& engine = qwen3_engine();
    engine.clear_conversations();
    cc::RenderOptions thinking;
    thinking.enable_thinking = true;
    const auto turns = six_turns(engine, sample_tools(3), "", thinking, false, "qwen3 thinking");
    expect_growing_reuse(turns, "qwen3 thinking");
}

TEST(ConversationEngine, Qwen25FormatSixTurns) {
    cc::EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    o.chat_format = "qwen2.5";
    o.n_threads = 2;
    cc::Engine engine(o);
    engine.load_model();
    const auto turns = six_turns(engine, sample_tools(4), "", {}, false, "qwen2.5");
    expect_growing_reuse(turns, "qwen2.5");
}

TEST(ConversationEngine, Llama3SixTurns) {
    const auto tokenizer = cc::test::gen_dir() / "llama3" / "tokenizer.json";
    if (!fs::exists(tokenizer)) GTEST_SKIP() << tokenizer << " is absent (unpacked from tests/data/llama3_tokenizer.tar.xz)";
    cc::test::TempDir dir;
    cc::test::write_synthetic_checkpoint(dir.path(), cc::test::tiny_llama3_config(), tokenizer);
    cc::EngineOptions o;
    o.model_spec = dir.path().string();
    o.n_threads = 2;
    cc::Engine engine(o);
    engine.load_model();
    const auto turns = six_turns(engine, sample_tools(4), "Answer briefly.", {}, false, "llama3");
    expect_growing_reuse(turns, "llama3");
}

TEST(ConversationEngine, MistralSixTurnsExactThoughTheToolBlockMoves) {
    cc::test::TempDir dir;
    cc::test::write_synthetic_checkpoint(dir.path(), cc::test::tiny_mistral_config(),
                                         cc::test::data_dir() / "mistral_test" / "tokenizer.json");
    cc::EngineOptions o;
    o.model_spec = dir.path().string();
    o.n_threads = 2;
    cc::Engine engine(o);
    engine.load_model();
    const auto turns = six_turns(engine, sample_tools(1), "Be brief.", {}, true, "mistral");
    // One user message: the group prefix ([AVAILABLE_TOOLS]) leads the prompt and is reused.
    EXPECT_GT(turns[0].prefix_tokens, 0u);
    EXPECT_GT(turns[1].conversation_reused_tokens, 0u);
    EXPECT_GT(reused(turns[2]), reused(turns[1]));
    // A second user message moves the tool block before it (the official template): the group is
    // no longer in front, and what is reused is the conversation state's common head.
    EXPECT_EQ(turns[3].prefix_tokens, 0u);
    EXPECT_EQ(turns[3].group_reused_tokens, 0u);
    EXPECT_GT(reused(turns[4]), reused(turns[3]));
}

TEST(ConversationEngine, PlainFormatStories260k) {
    const auto model = cc::test::fixture("stories260k");
    if (!fs::exists(model / "config.json")) GTEST_SKIP() << model << " is absent (the shared fixtures)";
    cc::EngineOptions o;
    o.model_spec = model.string();
    o.n_threads = 1;
    cc::Engine engine(o);
    engine.load_model();
    const auto turns = six_turns(engine, sample_tools(1), "", {}, false, "plain");
    for (size_t i = 1; i < turns.size(); ++i) EXPECT_GT(reused(turns[i]), reused(turns[i - 1])) << "turn " << i + 1;
}

TEST(ConversationEngine, EditedHistoryFallsBackToTheLongestValidPrefix) {
    auto& engine = qwen3_engine();
    engine.clear_conversations();
    const auto tools = sample_tools(3);
    ChatRequest req{tools, "", {ChatMessage::user("first question"), ChatMessage::assistant("first answer"),
                                ChatMessage::user("second question")}, {}};
    const auto before = engine.chat(req, compare_options());
    expect_exact(before, "before the edit");
    const auto original_ids = engine.conversation_ids(req);

    // The client rewrites its first message: only the group and the template's opening survive.
    req.messages[0].content = "first question, rephrased";
    const auto edited_ids = engine.conversation_ids(req);
    const auto after = engine.chat(req, compare_options());
    expect_exact(after, "after the edit");
    const size_t valid = common_prefix(original_ids, edited_ids);
    ASSERT_TRUE(after.diverged_at.has_value());
    EXPECT_EQ(*after.diverged_at, valid);
    EXPECT_EQ(reused(after), valid);
    EXPECT_LT(valid, original_ids.size());
}

TEST(ConversationEngine, SeamWhereGeneratedIdsRetokeniseDifferentlyIsReportedAndExact) {
    // The model's own reply goes back into the history as text. A sampled reply is rarely the
    // tokenizer's own encoding of its text, so the re-rendered prompt holds other ids from that
    // point: reuse must stop at the first differing id, and the turn must still equal a full prefill.
    auto& engine = qwen3_engine();
    const auto tools = sample_tools(2);
    cc::RenderOptions thinking;  // thinking on: the template prints the reply right after the header
    thinking.enable_thinking = true;
    bool found = false;
    for (uint64_t seed = 1; seed <= 20 && !found; ++seed) {
        engine.clear_conversations();
        ChatRequest req{tools, "", {ChatMessage::user("Say something.")}, thinking};
        cc::QueryOptions q;
        q.max_new_tokens = 12;
        q.ignore_eos = true;
        q.temperature = 1.0f;
        q.seed = seed;
        const auto first = engine.chat(req, q);
        const std::string text = first.text;
        if (text.empty() || text.find("</think>") != std::string::npos) continue;
        const auto prompt_ids = engine.conversation_ids(req);
        // the state the engine keeps: prompt + every generated id but the last (never forwarded)
        std::vector<cc::token_id> state_ids = prompt_ids;
        state_ids.insert(state_ids.end(), first.tokens.begin(), first.tokens.end() - 1);

        req.messages.push_back(ChatMessage::assistant(text));
        req.messages.push_back(ChatMessage::user("Again."));
        const auto next_ids = engine.conversation_ids(req);
        const size_t lcp = common_prefix(state_ids, next_ids);
        // A seam: the divergence lies inside the reply's own tokens, not at a template boundary.
        if (lcp <= prompt_ids.size() || lcp >= state_ids.size()) continue;
        found = true;
        const auto second = engine.chat(req, compare_options());
        expect_exact(second, "seam seed " + std::to_string(seed));
        ASSERT_TRUE(second.diverged_at.has_value());
        EXPECT_EQ(*second.diverged_at, lcp);
        EXPECT_EQ(reused(second), lcp);
        EXPECT_NE(state_ids[lcp], next_ids[lcp]);
    }
    EXPECT_TRUE(found) << "no sampled reply re-tokenised differently in 20 seeds";
}

TEST(ConversationEngine, RepeatingARequestReusesAllButTheLastToken) {
    auto& engine = qwen3_engine();
    engine.clear_conversations();
    ChatRequest req{sample_tools(2), "", {ChatMessage::user("hello")}, {}};
    auto q = compare_options(3);
    const auto a = engine.chat(req, q);
    const auto b = engine.chat(req, q);
    expect_exact(b, "repeat");
    EXPECT_EQ(b.prefilled_tokens, 1u);
    EXPECT_FALSE(b.diverged_at.has_value());
    EXPECT_EQ(a.tokens, b.tokens);
}

TEST(ConversationEngine, ErrorsNameTheProblemAndLeaveTheEngineUsable) {
    auto& engine = qwen3_engine();
    ChatRequest empty{sample_tools(1), "", {}, {}};
    EXPECT_THROW(engine.chat(empty, compare_options()), std::invalid_argument);
    ChatRequest ok{sample_tools(1), "", {ChatMessage::user("hi")}, {}};
    EXPECT_NO_THROW(engine.chat(ok, compare_options(2)));
}

TEST(ConversationEngine, StopStringsEndGenerationAndAreCut) {
    auto& engine = qwen3_engine();
    ChatRequest req{sample_tools(1), "", {ChatMessage::user("hello")}, {}};
    cc::QueryOptions q;
    q.max_new_tokens = 12;
    q.ignore_eos = true;
    const auto free_run = engine.chat(req, q);
    ASSERT_GE(free_run.text.size(), 4u);
    // A stop string taken from the middle of the free run's text.
    const std::string stop = free_run.text.substr(free_run.text.size() / 2, 2);
    q.stop = {stop};
    const auto stopped = engine.chat(req, q);
    EXPECT_EQ(stopped.stop_reason, cc::StopReason::stop_string);
    EXPECT_EQ(stopped.text, free_run.text.substr(0, free_run.text.find(stop)));
    EXPECT_LE(stopped.tokens.size(), free_run.tokens.size());
}

TEST(QueryTier, AQueryInAFreshProcessReportsTheDiskLoadInsideItsTtft) {
    cc::test::TempDir dir;
    cc::EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    o.n_threads = 2;
    o.cache.dir = dir.path();
    const auto tools = sample_tools(3);
    {
        cc::Engine first(o);
        first.load_model();
        EXPECT_EQ(first.set_tools(tools, "").tier, cc::Tier::miss);
        first.wait_for_persist();
    }
    cc::Engine second(o);  // a new process: the group is on disk only
    second.load_model();
    second.select_tools(tools, "");
    cc::QueryOptions q;
    q.max_new_tokens = 2;
    const auto r = second.query("hello", q);
    EXPECT_EQ(r.tier, cc::Tier::disk);
    EXPECT_TRUE(r.cache_hit);
    EXPECT_GT(r.timings.disk_load_ms, 0.0);
    EXPECT_GE(r.timings.ttft_ms, r.timings.disk_load_ms);
    EXPECT_EQ(r.group_reused_tokens, r.prefix_tokens);
    EXPECT_EQ(second.current_tools()->tier, cc::Tier::disk);
    // the next query of this process finds it in memory
    EXPECT_EQ(second.query("hello again", q).tier, cc::Tier::memory);
}

TEST(QueryTier, AQueryAfterSelectToolsOnAMissCompilesInsideItsTtft) {
    cc::EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    o.n_threads = 2;
    cc::Engine engine(o);
    engine.load_model();
    engine.select_tools(sample_tools(2), "");
    cc::QueryOptions q;
    q.max_new_tokens = 2;
    const auto r = engine.query("hello", q);
    EXPECT_EQ(r.tier, cc::Tier::miss);
    EXPECT_GT(r.timings.compile_ms, 0.0);
    EXPECT_GE(r.timings.ttft_ms, r.timings.compile_ms);
    EXPECT_EQ(r.prefilled_tokens, r.prompt_tokens);
}

TEST(ConversationCache, KeepsTheLongestMatchDropsCoveredStatesAndEvictsByBudget) {
    const auto recipe = *cc::find_builtin("qwen3-test");
    const auto weights = cc::generate_builtin_weights(recipe, 1);
    const auto backend_ptr = cc::make_cpu_backend(weights);
    cc::Backend& backend = *backend_ptr;
    const size_t per_block = backend.kv_bytes(8);
    cc::ConversationCache cache(3 * per_block);
    const auto state = [&](std::string key, std::vector<cc::token_id> ids) {
        auto s = std::make_shared<cc::ConversationState>();
        s->group_key = std::move(key);
        s->group_tokens = 2;
        s->ids = std::move(ids);
        s->block = backend.allocate_kv(8);
        s->bytes = per_block;
        return s;
    };
    cache.insert(state("g", {1, 2, 3, 4}));
    cache.insert(state("g", {1, 2, 3, 4, 5, 6}));  // extends the first: replaces it
    EXPECT_EQ(cache.entries(), 1u);
    cache.insert(state("g", {1, 2, 9, 9}));
    cache.insert(state("h", {1, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(cache.entries(), 3u);

    const std::vector<cc::token_id> prompt{1, 2, 3, 4, 5, 7, 8};
    auto m = cache.longest_prefix("g", prompt, 2);
    ASSERT_TRUE(m.state);
    EXPECT_EQ(m.n_common, 5u);
    ASSERT_TRUE(m.diverged_at.has_value());
    EXPECT_EQ(*m.diverged_at, 5u);
    EXPECT_FALSE(cache.longest_prefix("g", prompt, 0).state) << "made with another group prefix length";
    EXPECT_FALSE(cache.longest_prefix("g", std::vector<cc::token_id>{1, 2, 7}, 2).state) << "only the group shared";

    cache.insert(state("g", {1, 2, 5}));  // over budget: the least recently used goes ("g" {1,2,9,9} or "h")
    EXPECT_EQ(cache.entries(), 3u);
    EXPECT_EQ(cache.evictions(), 1u);
    EXPECT_TRUE(cache.longest_prefix("g", prompt, 2).state) << "the most recently used survived";
    EXPECT_EQ(cache.bytes(), 3 * per_block);
}

}  // namespace
