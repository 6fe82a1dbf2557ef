// The chat-completions protocol on its own (core/serve/openai_chat.h): request validation with
// OpenAI's error shape, the response and chunk shapes, SSE framing, tool-call ids, the content
// holdback that keeps tool-call markup out of streamed content.
#include "core/serve/openai_chat.h"

#include <gtest/gtest.h>

#include <cctype>

namespace {

using cc::ordered_json;
using namespace cc::serve;

ordered_json body(const std::string& extra = "") {
    return ordered_json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}])" + extra + "}");
}

ApiError error_of(const ordered_json& b) {
    try {
        parse_chat_request(b, 4096);
    } catch (const ApiError& e) {
        return e;
    }
    return ApiError(0, "<no error>");
}

TEST(ChatRequest, ReadsTheOpenAIFields) {
    const auto r = parse_chat_request(
        body(R"(, "max_completion_tokens": 7, "max_tokens": 3, "temperature": 0.5, "top_p": 0.9, "seed": 42,
              "stop": ["a", "b"], "stream": true, "stream_options": {"include_usage": true}, "tool_choice": "none",
              "tools": [{"type": "function", "function": {"name": "f"}}], "unknown_field": {"x": 1}, "user": "u")"),
        4096);
    EXPECT_EQ(r.model, "m");
    EXPECT_EQ(r.max_tokens, 7);  // max_completion_tokens wins
    EXPECT_FLOAT_EQ(*r.temperature, 0.5f);
    EXPECT_FLOAT_EQ(*r.top_p, 0.9f);
    EXPECT_EQ(r.seed, 42u);
    EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
    EXPECT_TRUE(r.stream);
    EXPECT_TRUE(r.include_usage);
    EXPECT_EQ(r.tool_choice.mode, cc::ToolChoice::Mode::none);
    ASSERT_TRUE(r.tools);
    EXPECT_EQ((*r.tools)[0]["function"]["name"], "f");
    EXPECT_EQ(parse_chat_request(body(R"(, "stop": "x")"), 10).stop, std::vector<std::string>{"x"});
    EXPECT_FALSE(parse_chat_request(body(), 10).temperature);  // absent = greedy
}

struct BadField {
    const char* extra;
    const char* param;
    const char* code;
};

class ChatRequestErrors : public ::testing::TestWithParam<BadField> {};

TEST_P(ChatRequestErrors, NameTheField) {
    const auto e = error_of(body(GetParam().extra));
    EXPECT_EQ(e.status, 400) << GetParam().extra << ": " << e.what();
    EXPECT_EQ(e.param, GetParam().param);
    EXPECT_EQ(e.code, GetParam().code);
    const auto j = error_json(e);
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_EQ(j["error"]["param"], GetParam().param);
    EXPECT_TRUE(j["error"]["message"].is_string());
}

INSTANTIATE_TEST_SUITE_P(
    Fields, ChatRequestErrors,
    ::testing::Values(BadField{R"(, "max_tokens": "5")", "max_tokens", "invalid_type"},
                      BadField{R"(, "max_tokens": 0)", "max_tokens", "invalid_value"},
                      BadField{R"(, "max_completion_tokens": 1.5)", "max_completion_tokens", "invalid_type"},
                      BadField{R"(, "temperature": "hot")", "temperature", "invalid_type"},
                      BadField{R"(, "temperature": 3)", "temperature", "invalid_value"},
                      BadField{R"(, "top_p": 2)", "top_p", "invalid_value"},
                      BadField{R"(, "seed": "s")", "seed", "invalid_type"},
                      BadField{R"(, "stop": 5)", "stop", "invalid_type"},
                      BadField{R"(, "stop": ["a", 1])", "stop[1]", "invalid_type"},
                      BadField{R"(, "stop": ["a", "b", "c", "d", "e"])", "stop", "invalid_value"},
                      BadField{R"(, "stream": "yes")", "stream", "invalid_type"},
                      BadField{R"(, "stream_options": {"include_usage": 1})", "stream_options.include_usage", "invalid_type"},
                      BadField{R"(, "tools": "f")", "tools", "invalid_type"},
                      // tool_choice without tools, whatever its value (as OpenAI)
                      BadField{R"(, "tool_choice": "required")", "tool_choice", "invalid_value"},
                      BadField{R"(, "tool_choice": "auto")", "tool_choice", "invalid_value"},
                      BadField{R"(, "tool_choice": {"type": "function", "function": {"name": "f"}})", "tool_choice",
                               "invalid_value"},
                      BadField{R"(, "tools": [], "tool_choice": "sometimes")", "tool_choice", "invalid_value"},
                      BadField{R"(, "tools": [], "tool_choice": 3)", "tool_choice", "invalid_type"},
                      BadField{R"(, "tools": [], "tool_choice": {"type": "file_search"})", "tool_choice.type",
                               "invalid_value"},
                      BadField{R"(, "tools": [], "tool_choice": {"type": "function"})", "tool_choice.function",
                               "missing_required_parameter"},
                      BadField{R"(, "tools": [], "tool_choice": {"type": "function", "function": {}})",
                               "tool_choice.function.name", "missing_required_parameter"},
                      BadField{R"(, "tools": [], "tool_choice": {"type": "function", "function": {"name": 5}})",
                               "tool_choice.function.name", "invalid_type"},
                      BadField{R"(, "n": 2)", "n", "unsupported_value"},
                      BadField{R"(, "model": 5)", "model", "invalid_type"}));

TEST(ChatRequest, ToolChoiceRequiredAndANamedFunction) {
    const char* tools = R"(, "tools": [{"type": "function", "function": {"name": "f"}}])";
    const auto required = parse_chat_request(body(std::string(tools) + R"(, "tool_choice": "required")"), 10);
    EXPECT_EQ(required.tool_choice.mode, cc::ToolChoice::Mode::required);
    const auto named = parse_chat_request(
        body(std::string(tools) + R"(, "tool_choice": {"type": "function", "function": {"name": "f"}})"), 10);
    EXPECT_EQ(named.tool_choice, cc::ToolChoice::named("f"));
    // Against the tools: a name that is not offered is refused naming tool_choice.function.name.
    EXPECT_NO_THROW(check_tool_choice(named.tool_choice, {"g", "f"}));
    try {
        check_tool_choice(cc::ToolChoice::named("h"), {"g", "f"});
        ADD_FAILURE() << "no error for a function that is not offered";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.param, "tool_choice.function.name");
        EXPECT_NE(std::string(e.what()).find("'h'"), std::string::npos) << e.what();
    }
    // required with an empty tool list
    EXPECT_THROW(check_tool_choice(required.tool_choice, {}), ApiError);
    EXPECT_NO_THROW(check_tool_choice(cc::ToolChoice::parse("none"), {}));
}

TEST(ChatRequest, MessagesAreRequiredAndAnArrayOfObjects) {
    EXPECT_EQ(error_of(ordered_json::parse(R"({"model": "m"})")).param, "messages");
    EXPECT_EQ(error_of(ordered_json::parse(R"({"messages": {}})")).code, "invalid_type");
    EXPECT_EQ(error_of(ordered_json::parse(R"({"messages": []})")).code, "invalid_value");
    EXPECT_EQ(error_of(ordered_json::parse(R"({"messages": [1]})")).param, "messages[0]");
    EXPECT_EQ(error_of(ordered_json::parse("[]")).status, 400);
}

TEST(ChatResponse, CompletionShape) {
    ChatOutcome o;
    o.tool_calls.push_back({"call_abc", "get_weather", R"({"city": "Paris"})"});
    o.finish_reason = "tool_calls";
    o.prompt_tokens = 100;
    o.completion_tokens = 12;
    o.cached_tokens = 90;
    o.contextcache = {{"tier", "memory"}};
    const auto j = completion_json("chatcmpl-1", 123, "model-x", "cc-fp", o);
    EXPECT_EQ(j["object"], "chat.completion");
    EXPECT_EQ(j["created"], 123);
    const auto& c = j["choices"][0];
    EXPECT_EQ(c["index"], 0);
    EXPECT_EQ(c["finish_reason"], "tool_calls");
    EXPECT_TRUE(c["message"]["content"].is_null());  // only tool calls: content null
    EXPECT_EQ(c["message"]["role"], "assistant");
    const auto& call = c["message"]["tool_calls"][0];
    EXPECT_EQ(call["id"], "call_abc");
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_TRUE(call["function"]["arguments"].is_string());  // a JSON string, as OpenAI sends it
    EXPECT_EQ(j["usage"]["total_tokens"], 112);
    EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 90);
    EXPECT_EQ(j["contextcache"]["tier"], "memory");
}

// Splits an SSE body into its "data: " payloads, checking the framing.
std::vector<std::string> events(const std::string& sse) {
    std::vector<std::string> out;
    size_t at = 0;
    while (at < sse.size()) {
        const size_t end = sse.find("\n\n", at);
        EXPECT_NE(end, std::string::npos) << "unterminated event at " << at;
        if (end == std::string::npos) break;
        const std::string ev = sse.substr(at, end - at);
        EXPECT_TRUE(ev.starts_with("data: ")) << ev;
        out.push_back(ev.substr(6));
        at = end + 2;
    }
    return out;
}

TEST(ChatStreamTest, ChunksAndFraming) {
    ChatStream s("chatcmpl-1", 5, "m", "fp", /*include_usage=*/true);
    ChatOutcome o;
    o.tool_calls.push_back({"call_x", "f", "{}"});
    o.finish_reason = "tool_calls";
    o.prompt_tokens = 3;
    const std::string sse = s.begin() + s.content("Hel") + s.tool_calls(o.tool_calls) + s.finish(o);
    const auto ev = events(sse);
    ASSERT_EQ(ev.size(), 7u);
    const auto first = ordered_json::parse(ev[0]);
    EXPECT_EQ(first["object"], "chat.completion.chunk");
    EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
    EXPECT_TRUE(first["usage"].is_null());
    EXPECT_EQ(ordered_json::parse(ev[1])["choices"][0]["delta"]["content"], "Hel");
    const auto head = ordered_json::parse(ev[2])["choices"][0]["delta"]["tool_calls"][0];
    EXPECT_EQ(head["index"], 0);
    EXPECT_EQ(head["id"], "call_x");
    EXPECT_EQ(head["type"], "function");
    EXPECT_EQ(head["function"]["name"], "f");
    EXPECT_EQ(ordered_json::parse(ev[3])["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], "{}");
    const auto last = ordered_json::parse(ev[4]);
    EXPECT_EQ(last["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_TRUE(last.contains("contextcache"));
    const auto usage = ordered_json::parse(ev[5]);
    EXPECT_TRUE(usage["choices"].empty());
    EXPECT_EQ(usage["usage"]["prompt_tokens"], 3);
    EXPECT_EQ(ev[6], "[DONE]");
    // Without include_usage: no usage key, no usage chunk.
    ChatStream plain("c", 5, "m", "fp", false);
    const auto pev = events(plain.begin() + plain.finish(o));
    ASSERT_EQ(pev.size(), 3u);
    EXPECT_FALSE(ordered_json::parse(pev[0]).contains("usage"));
}

TEST(ChatIds, ShapesAndUniqueness) {
    const auto a = make_tool_call_id(false), b = make_tool_call_id(false);
    EXPECT_TRUE(a.starts_with("call_"));
    EXPECT_EQ(a.size(), 29u);
    EXPECT_NE(a, b);
    const auto m = make_tool_call_id(true);  // mistral: exactly 9 alphanumerics
    ASSERT_EQ(m.size(), 9u);
    for (char c : m) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << m;
    EXPECT_TRUE(make_completion_id().starts_with("chatcmpl-"));
}

TEST(ContentHoldbackTest, KeepsMarkupOutOfContent) {
    ContentHoldback h({"<tool_call>"});
    std::string sent;
    for (const char* piece : {"Let me ", "check.<", "tool", "_call>\n{\"name\"", ": \"f\"}"}) sent += h.push(piece);
    EXPECT_EQ(sent, "Let me check.");
    EXPECT_TRUE(h.in_tool_call());
    EXPECT_EQ(h.sent(), "Let me check.");
    // A '<' that does not become the marker is sent once it cannot.
    ContentHoldback g({"<tool_call>"});
    EXPECT_EQ(g.push("a <"), "a ");
    EXPECT_EQ(g.push("b"), "<b");
    EXPECT_FALSE(g.in_tool_call());
}

}  // namespace
