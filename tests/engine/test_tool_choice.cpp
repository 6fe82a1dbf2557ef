// tool_choice required / a named function (core/engine/tool_choice.h): the reply opens with a call
// to an offered tool (that very tool when named), on the built-in test model and on the trained
// toolcaller; the cached path and a full prefill still give == tokens and logits with the
// constraint on; errors name what is wrong. Also the engine's per-request cancel tokens: a cancel
// that comes before the request's call starts is kept, and never reaches the next request.
#include "core/engine/engine.h"
#include "tests/test_support.h"

#include <algorithm>
#include <map>

namespace {

using cc::ChatMessage;
using cc::ChatRequest;
using cc::Engine;
using cc::QueryMode;
using cc::QueryOptions;
using cc::QueryResult;
using cc::ToolChoice;
using cc::ToolSet;

ToolSet first_tools(size_t n) {
    const auto path = cc::test::source_dir() / "resources" / "toolsets" / "tools_20.json";
    auto arr = nlohmann::ordered_json::parse(cc::test::read_file(path));
    nlohmann::ordered_json subset = nlohmann::ordered_json::array();
    for (size_t i = 0; i < n; ++i) subset.push_back(arr[i]);
    return ToolSet::from_json_text(subset.dump(), "subset");
}

std::string toolcaller_spec() { return (cc::test::source_dir() / "resources" / "models" / "toolcaller").string(); }

// One engine per model for the whole program.
Engine& engine_for(const std::string& spec) {
    static std::map<std::string, std::unique_ptr<Engine>> engines;
    auto& slot = engines[spec];
    if (!slot) {
        cc::EngineOptions o;
        o.model_spec = spec;
        o.n_threads = 2;
        slot = std::make_unique<Engine>(o);
        slot->load_model();
    }
    return *slot;
}

QueryOptions compare_options(ToolChoice choice, int max_new = 24) {
    QueryOptions q;
    q.mode = QueryMode::compare;
    q.max_new_tokens = max_new;
    q.tool_choice = std::move(choice);
    return q;
}

void expect_exact(const QueryResult& r, const std::string& label) {
    ASSERT_TRUE(r.identical.has_value()) << label;
    EXPECT_TRUE(*r.identical) << label;
    ASSERT_TRUE(r.full) << label;
    EXPECT_EQ(r.tokens, r.full->tokens) << label;
    EXPECT_EQ(r.forced_tokens, r.full->forced_tokens) << label;
    ASSERT_EQ(r.step_logits.size(), r.full->step_logits.size()) << label;
    ASSERT_EQ(r.step_logits.size(), r.tokens.size()) << label << ": one logits row per token, forced ones too";
    for (size_t i = 0; i < r.step_logits.size(); ++i)
        EXPECT_TRUE(r.step_logits[i] == r.full->step_logits[i]) << label << ": logits differ at token " << i;
}

const std::vector<std::string> kQueries = {"What is the weather in Oslo?", "Send an email to Ana about lunch.",
                                           "go", "Convert 20 euros to dollars, please."};

TEST(ToolChoice, ParsesTheCliForm) {
    EXPECT_EQ(ToolChoice::parse("auto").mode, ToolChoice::Mode::auto_);
    EXPECT_EQ(ToolChoice::parse("none").mode, ToolChoice::Mode::none);
    EXPECT_EQ(ToolChoice::parse("required").mode, ToolChoice::Mode::required);
    EXPECT_EQ(ToolChoice::parse("get_weather"), ToolChoice::named("get_weather"));
    EXPECT_EQ(ToolChoice::parse("get_weather").text(), "get_weather");
    EXPECT_THROW(ToolChoice::parse(""), std::invalid_argument);
    EXPECT_FALSE(ToolChoice::parse("auto").forces_call());
    EXPECT_TRUE(ToolChoice::parse("required").forces_call());
}

class ForcedCall : public ::testing::TestWithParam<std::string> {};

// query(): every reply parses as a call to an offered tool (named: that tool), and compare mode
// finds the cached path == the full prefill.
TEST_P(ForcedCall, QueryOpensWithACallToAnOfferedToolAndStaysExact) {
    Engine& engine = engine_for(GetParam());
    const ToolSet tools = first_tools(6);
    engine.set_tools(tools, "");
    const auto names = tools.names();
    for (const auto& query : kQueries) {
        const auto r = engine.query(query, compare_options(ToolChoice::parse("required")));
        const std::string label = GetParam() + " required: " + query + " -> " + r.text;
        expect_exact(r, label);
        EXPECT_GT(r.forced_tokens, 0u) << label;
        EXPECT_LT(r.forced_tokens, r.tokens.size()) << label << ": the name is sampled";
        EXPECT_EQ(r.text.rfind("<tool_call>\n{\"name\": \"", 0), 0u) << label;
        ASSERT_TRUE(r.tool_call) << label;
        EXPECT_NE(std::find(names.begin(), names.end(), r.tool_call->name), names.end()) << label;
        for (const size_t pick : {size_t(0), size_t(3), names.size() - 1}) {
            const auto named = engine.query(query, compare_options(ToolChoice::named(names[pick])));
            const std::string nlabel = GetParam() + " " + names[pick] + ": " + query + " -> " + named.text;
            expect_exact(named, nlabel);
            ASSERT_TRUE(named.tool_call) << nlabel;
            EXPECT_EQ(named.tool_call->name, names[pick]) << nlabel;
            EXPECT_EQ(named.text.rfind("<tool_call>\n{\"name\": \"" + names[pick] + "\", \"arguments\": ", 0), 0u) << nlabel;
        }
    }
}

// Sampling: the mask holds whatever the draw (seeded, so reproducible).
TEST_P(ForcedCall, SampledNamesStayAmongTheOfferedTools) {
    Engine& engine = engine_for(GetParam());
    const ToolSet tools = first_tools(6);
    engine.set_tools(tools, "");
    const auto names = tools.names();
    for (uint64_t seed = 1; seed <= 6; ++seed) {
        QueryOptions q;
        q.max_new_tokens = 16;
        q.temperature = 1.5f;
        q.seed = seed;
        q.tool_choice = ToolChoice::parse("required");
        const auto r = engine.query("Which tool fits?", q);
        ASSERT_TRUE(r.tool_call) << r.text;
        EXPECT_NE(std::find(names.begin(), names.end(), r.tool_call->name), names.end()) << r.text;
        EXPECT_EQ(engine.query("Which tool fits?", q).tokens, r.tokens) << "seed " << seed;
    }
}

// chat(): the same constraint on a conversation, cached (group + conversation state) == full.
TEST_P(ForcedCall, ChatOpensWithACallAndStaysExact) {
    Engine& engine = engine_for(GetParam());
    const ToolSet tools = first_tools(4);
    const auto names = tools.names();
    ChatRequest req{tools, "You are terse.", {ChatMessage::user("Book a table for two.")}, {}};
    for (const auto& choice : {ToolChoice::parse("required"), ToolChoice::named(names[1])}) {
        const auto r = engine.chat(req, compare_options(choice, 20));
        const std::string label = GetParam() + " chat " + choice.text() + " -> " + r.text;
        expect_exact(r, label);
        ASSERT_TRUE(r.reply) << label;
        ASSERT_FALSE(r.reply->tool_calls.empty()) << label;
        const std::string& name = r.reply->tool_calls.front().name;
        if (choice.mode == ToolChoice::Mode::function) EXPECT_EQ(name, names[1]) << label;
        else EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << label;
    }
    // A second turn after a forced call reuses the stored state and is still exact.
    const auto first = engine.chat(req, compare_options(ToolChoice::named(names[0]), 20));
    ASSERT_TRUE(first.reply);
    req.messages.push_back(cc::assistant_message(*first.reply));
    req.messages.push_back(ChatMessage::tool_result("call_1", "{\"ok\": true}"));
    expect_exact(engine.chat(req, compare_options(ToolChoice::parse("required"), 12)), GetParam() + " second turn");
}

INSTANTIATE_TEST_SUITE_P(Models, ForcedCall, ::testing::Values("builtin:qwen3-test", toolcaller_spec()),
                         [](const auto& info) { return info.param.rfind("builtin:", 0) == 0 ? "qwen3_test" : "toolcaller"; });

TEST(ToolChoiceErrors, NameWhatCannotBeMet) {
    Engine& engine = engine_for("builtin:qwen3-test");
    engine.set_tools(first_tools(3), "");
    const auto message = [&](ToolChoice choice, const ToolSet* chat_tools) -> std::string {
        QueryOptions q;
        q.max_new_tokens = 4;
        q.tool_choice = std::move(choice);
        try {
            if (chat_tools) engine.chat(ChatRequest{*chat_tools, "", {ChatMessage::user("hi")}, {}}, q);
            else engine.query("hi", q);
        } catch (const std::invalid_argument& e) {
            return e.what();
        }
        return "<no error>";
    };
    EXPECT_NE(message(ToolChoice::named("launch_rocket"), nullptr).find("no tool of that name"), std::string::npos);
    const ToolSet none;
    EXPECT_NE(message(ToolChoice::parse("required"), &none).find("needs tools"), std::string::npos);
    EXPECT_EQ(message(ToolChoice::parse("none"), &none), "<no error>");
}

// A forced call still stops at max_new_tokens, cutting the forced span if it must.
TEST(ToolChoiceErrors, MaxNewTokensCutsTheForcedSpan) {
    Engine& engine = engine_for("builtin:qwen3-test");
    const ToolSet tools = first_tools(3);
    engine.set_tools(tools, "");
    QueryOptions q;
    q.mode = QueryMode::compare;
    q.max_new_tokens = 2;
    q.tool_choice = ToolChoice::named(tools.names()[0]);
    const auto r = engine.query("hi", q);
    expect_exact(r, "two tokens");
    EXPECT_EQ(r.tokens.size(), 2u);
    EXPECT_EQ(r.forced_tokens, 2u);
    EXPECT_EQ(r.stop_reason, cc::StopReason::max_new_tokens);
}

// A stop string inside the forced span ends the reply there; the KV keeps only what was emitted,
// so the conversation state stored for the next turn is the reply's ids (the next turn is exact).
TEST(ToolChoiceErrors, AStopStringInsideTheForcedSpanEndsTheReplyThere) {
    Engine& engine = engine_for("builtin:qwen3-test");
    const ToolSet tools = first_tools(3);
    QueryOptions q = compare_options(ToolChoice::named(tools.names()[2]), 16);
    q.stop = {"\"arguments\""};
    ChatRequest req{tools, "", {ChatMessage::user("hi")}, {}};
    const auto r = engine.chat(req, q);
    expect_exact(r, "stop inside the span");
    EXPECT_EQ(r.stop_reason, cc::StopReason::stop_string);
    EXPECT_EQ(r.forced_tokens, r.tokens.size());
    EXPECT_EQ(r.text.find("arguments"), std::string::npos) << r.text;
    req.messages.push_back(ChatMessage::assistant(r.text));
    req.messages.push_back(ChatMessage::user("again"));
    const auto next = engine.chat(req, compare_options(ToolChoice::parse("required"), 8));
    expect_exact(next, "the turn after");
    EXPECT_GT(next.conversation_reused_tokens, 0u);
}

// ---- cancelling ----------------------------------------------------------------------------------

TEST(EngineRequests, ACancelBeforeTheCallStartsIsKeptAndEndsWithTheRequest) {
    Engine& engine = engine_for("builtin:qwen3-test");
    engine.set_tools(first_tools(2), "");
    QueryOptions q;
    q.max_new_tokens = 8;
    q.ignore_eos = true;

    cc::CancelToken token;
    token.cancel();  // e.g. a client that hung up while its job was about to start
    engine.begin_request(token);
    EXPECT_THROW(engine.query("go", q), cc::Cancelled);
    EXPECT_THROW(engine.chat(ChatRequest{first_tools(2), "", {ChatMessage::user("go")}, {}}, q), cc::Cancelled);
    engine.end_request();

    // The next request has its own token: it runs to the end.
    engine.begin_request(cc::CancelToken{});
    EXPECT_EQ(engine.query("go", q).stop_reason, cc::StopReason::max_new_tokens);
    // Engine::cancel() inside a request cancels that request's token, at the next token ...
    cc::CancelToken second;
    engine.end_request();
    engine.begin_request(second);
    const auto r = engine.query("go", q, [&](const cc::TokenEvent& e) {
        if (e.index == 2) engine.cancel();
    });
    EXPECT_EQ(r.stop_reason, cc::StopReason::cancelled);
    EXPECT_EQ(r.tokens.size(), 3u);
    EXPECT_TRUE(second.cancelled());
    // ... and for the rest of the request (a later call of the same job stops at once)
    EXPECT_THROW(engine.query("go", q), cc::Cancelled);
    engine.end_request();

    // Outside a request each call is its own: a cancel() between calls stops neither.
    engine.cancel();
    EXPECT_EQ(engine.query("go", q).stop_reason, cc::StopReason::max_new_tokens);
}

}  // namespace
