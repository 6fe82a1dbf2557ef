// Conversations: whole multi-turn prompts of every chat format, byte-exact against the official
// templates (goldens rendered by Jinja2, tools/gen_chat_goldens.py, conversations.jsonl); one user
// message renders as prefix + suffix piece for piece; no special-token injection from content; the
// OpenAI `messages` reader and its errors; reply parsing.
#include "core/base/embedded_resources.h"
#include "core/text/chat_format.h"
#include "core/text/conversation.h"

#include "tests/test_support.h"

#include <map>

namespace {

using cc::ChatFormat;
using cc::ChatMessage;
using cc::ChatToolCall;
using cc::Piece;
using cc::RenderOptions;
using cc::token_id;
using cc::Tokenizer;
using cc::ToolSet;
using Role = ChatMessage::Role;

const std::vector<std::string> k_formats = {"qwen3", "qwen2.5", "llama3", "mistral", "plain"};

const Tokenizer& qwen3_tokenizer() {
    static const Tokenizer tok =
        Tokenizer::from_json(cc::embedded::qwen3_tokenizer_json(), "qwen3/tokenizer.json");  // stored as .tar.xz
    return tok;
}

const Tokenizer& mistral_tokenizer() {
    static const Tokenizer tok = Tokenizer::from_file(cc::test::data_dir() / "mistral_test" / "tokenizer.json");
    return tok;
}

const ToolSet& tool_set(const std::string& file) {
    static std::map<std::string, ToolSet> sets;
    auto it = sets.find(file);
    if (it == sets.end())
        it = sets.emplace(file, file.empty() ? ToolSet{} : ToolSet::from_file(cc::test::source_dir() / file)).first;
    return it->second;
}

std::string describe(const std::vector<Piece>& pieces) {
    std::string out;
    for (const auto& p : pieces) {
        out += p.kind == Piece::Kind::special ? "[S:" : p.kind == Piece::Kind::bos ? "[BOS" : "[T:";
        out += p.text + "]";
    }
    return out;
}

bool same_pieces(const std::vector<Piece>& a, const std::vector<Piece>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].kind != b[i].kind || a[i].text != b[i].text) return false;
    return true;
}

struct ConversationRow {
    size_t line = 0;
    std::string format;
    std::string tools_file;
    std::string system;
    nlohmann::ordered_json messages;
    RenderOptions options;
    std::optional<std::string> text;
    std::optional<std::string> error;
};

std::vector<ConversationRow> load_rows() {
    std::istringstream in(cc::test::read_file(cc::test::data_dir() / "chat_goldens" / "conversations.jsonl"));
    std::vector<ConversationRow> rows;
    std::string line;
    size_t n = 0;
    while (std::getline(in, line)) {
        ++n;
        if (line.empty()) continue;
        auto j = nlohmann::ordered_json::parse(line);
        ConversationRow r;
        r.line = n;
        r.format = j.at("format").get<std::string>();
        r.tools_file = j.at("tools_file").get<std::string>();
        r.system = j.at("system").get<std::string>();
        r.messages = j.at("messages");
        r.options.enable_thinking = j.at("enable_thinking").get<bool>();
        r.options.add_generation_prompt = j.at("add_generation_prompt").get<bool>();
        if (j.contains("text")) r.text = j["text"].get<std::string>();
        if (j.contains("error")) r.error = j["error"].get<std::string>();
        rows.push_back(std::move(r));
    }
    return rows;
}

// Each special token appears in the ids exactly as often as the template put it there: content
// that spells "<|im_end|>" or "[/TOOL_RESULTS]" stays text.
void expect_no_injection(const Tokenizer& tok, const std::vector<Piece>& pieces, size_t line) {
    const auto ids = cc::tokenize_pieces(tok, pieces);
    std::map<token_id, size_t> expected;
    for (const auto& p : pieces)
        if (p.kind == Piece::Kind::special) ++expected[*tok.token_to_id(p.text)];
    for (const auto& [id, count] : expected)
        EXPECT_EQ(static_cast<size_t>(std::count(ids.begin(), ids.end(), id)), count)
            << "line " << line << ": token " << tok.id_to_token(id);
}

TEST(ConversationGoldens, EveryRowMatchesTheOfficialTemplate) {
    const auto rows = load_rows();
    ASSERT_GE(rows.size(), 50u);
    size_t n_text = 0;
    size_t n_error = 0;
    std::map<std::string, size_t> per_format;
    for (const auto& row : rows) {
        SCOPED_TRACE("conversations.jsonl line " + std::to_string(row.line) + " (" + row.format + ")");
        const auto format = cc::make_chat_format(row.format);
        const auto conv = cc::parse_openai_messages(row.messages);
        ASSERT_TRUE(conv.system_prompt.empty() || row.system.empty());  // the generator gives one or the other
        const std::string system = row.system.empty() ? conv.system_prompt : row.system;
        const auto& tools = tool_set(row.tools_file);
        if (row.error) {
            try {
                format->conversation_pieces(tools, system, conv.messages, row.options);
                ADD_FAILURE() << "expected the template's error: " << *row.error;
            } catch (const std::invalid_argument& e) {
                EXPECT_NE(std::string(e.what()).find(*row.error), std::string::npos) << e.what();
                EXPECT_EQ(std::string(e.what()).rfind("messages[", 0), 0u) << e.what();
            }
            ++n_error;
            continue;
        }
        ASSERT_TRUE(row.text.has_value());
        const auto pieces = format->conversation_pieces(tools, system, conv.messages, row.options);
        EXPECT_EQ(cc::pieces_text(pieces), *row.text);
        if (row.format == "qwen3" || row.format == "qwen2.5") expect_no_injection(qwen3_tokenizer(), pieces, row.line);
        if (row.format == "mistral") expect_no_injection(mistral_tokenizer(), pieces, row.line);
        ++n_text;
        ++per_format[row.format];
    }
    EXPECT_GE(n_error, 5u);
    for (const char* f : {"qwen3", "qwen2.5", "llama3", "mistral"}) EXPECT_GE(per_format[f], 4u) << f;
    std::cout << "[ conversation goldens ] " << n_text << " prompts, " << n_error << " errors\n";
}

// One user message, no thinking, with the generation prompt: exactly prefix + suffix.
TEST(ConversationPieces, OneUserMessageIsPrefixPlusSuffix) {
    const std::vector<std::string> tools_files = {"", "tests/data/chat_goldens/tools_1.json",
                                                  "resources/toolsets/tools_5.json"};
    const std::vector<std::string> systems = {"", "You are terse.", "  padded\u3000\n"};
    const std::vector<std::string> queries = {"What's the weather?", "", "  <|im_end|> [INST] <|eot_id|> \n"};
    size_t n = 0;
    for (const auto& id : k_formats) {
        const auto format = cc::make_chat_format(id);
        for (const auto& tf : tools_files)
            for (const auto& system : systems)
                for (const auto& query : queries) {
                    const auto& tools = tool_set(tf);
                    auto expected = format->prefix_pieces(tools, system);
                    const auto suffix = format->suffix_pieces(query, system);
                    expected.insert(expected.end(), suffix.begin(), suffix.end());
                    const std::vector<ChatMessage> messages = {ChatMessage::user(query)};
                    const auto got = format->conversation_pieces(tools, system, messages, RenderOptions{});
                    EXPECT_TRUE(same_pieces(got, expected))
                        << id << " tools=" << tf << " system=" << system << "\n got:      " << describe(got)
                        << "\n expected: " << describe(expected);
                    ++n;
                }
    }
    EXPECT_EQ(n, k_formats.size() * 27);
}

std::vector<ChatMessage> agent_loop() {
    ChatToolCall call{"call00001", "get_current_weather", cc::ordered_json{{"location", "Paris"}}, std::nullopt};
    ChatMessage a = ChatMessage::assistant("");
    a.tool_calls.push_back(call);
    return {ChatMessage::user("Weather in Paris?"), a, ChatMessage::tool_result("call00001", "sunny"),
            ChatMessage::assistant("Sunny."), ChatMessage::user("Thanks")};
}

// The group prefix (tools + system) stays in front in every format but mistral with several user
// turns, so its KV is reused for every turn of a conversation.
TEST(ConversationPieces, GroupPrefixIsAPrefixOfEveryTurn) {
    const auto& tools = tool_set("resources/toolsets/tools_5.json");
    for (const auto& id : k_formats) {
        const auto format = cc::make_chat_format(id);
        const auto prefix = format->prefix_pieces(tools, "You are terse.");
        const auto loop = agent_loop();
        for (size_t n = 1; n <= loop.size(); ++n) {
            const auto pieces =
                format->conversation_pieces(tools, "You are terse.", std::span(loop).first(n), RenderOptions{});
            const bool expect_prefix = id != "mistral" || n < loop.size();  // mistral: one user turn up to n = 4
            ASSERT_GE(pieces.size(), prefix.size());
            const bool is_prefix = same_pieces(
                std::vector<Piece>(pieces.begin(), pieces.begin() + static_cast<std::ptrdiff_t>(prefix.size())),
                prefix);
            EXPECT_EQ(is_prefix, expect_prefix) << id << " n=" << n << "\n" << describe(pieces);
        }
    }
}

TEST(ConversationPieces, MistralMovesToolsAndSystemToTheLastUserMessage) {
    const auto format = cc::make_chat_format("mistral");
    const auto& tools = tool_set("resources/toolsets/tools_5.json");
    const auto loop = agent_loop();
    const std::string text = cc::pieces_text(format->conversation_pieces(tools, "SYS", loop, RenderOptions{}));
    EXPECT_EQ(text.rfind("<s>[INST] Weather in Paris?[/INST][TOOL_CALLS] [", 0), 0u) << text;
    EXPECT_NE(text.find("[/AVAILABLE_TOOLS][INST] SYS\n\nThanks[/INST]"), std::string::npos) << text;
    EXPECT_NE(text.find(R"([TOOL_RESULTS] {"content": sunny, "call_id": "call00001"}[/TOOL_RESULTS])"),
              std::string::npos);
    // Ending on a tool result: the last user message is not the last message, so no system prompt.
    const auto partial =
        cc::pieces_text(format->conversation_pieces(tools, "SYS", std::span(loop).first(3), RenderOptions{}));
    EXPECT_EQ(partial.find("SYS"), std::string::npos) << partial;
}

TEST(ConversationPieces, Qwen3DropsEarlierThinkingAndKeepsItAfterTheLastQuery) {
    const auto format = cc::make_chat_format("qwen3");
    std::vector<ChatMessage> m = {ChatMessage::user("a"), ChatMessage::assistant("<think>\nold\n</think>\n\nA1"),
                                  ChatMessage::user("b"), ChatMessage::assistant("<think>new</think>B1")};
    RenderOptions o;
    o.add_generation_prompt = false;
    const auto text = cc::pieces_text(format->conversation_pieces(ToolSet{}, "", m, o));
    EXPECT_EQ(text,
              "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
              "<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n<think>\nnew\n</think>\n\nB1<|im_end|>\n");
}

TEST(ConversationPieces, PlainRendering) {
    const auto format = cc::make_chat_format("plain");
    auto loop = agent_loop();
    loop.push_back(ChatMessage{Role::system, "Be nice.", {}, {}, {}, {}});
    const auto text = cc::pieces_text(format->conversation_pieces(ToolSet{}, "SYS", loop, RenderOptions{}));
    EXPECT_EQ(text,
              "SYS\n\nUser: Weather in Paris?\n"
              "Assistant: {\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris\"}}\n"
              "Tool result: sunny\nAssistant: Sunny.\nUser: Thanks\nSystem: Be nice.\nAssistant:");
}

TEST(ConversationPieces, EmptyConversationAndLeadingSystemMessage) {
    for (const auto& id : k_formats) {
        const auto format = cc::make_chat_format(id);
        EXPECT_THROW(format->conversation_pieces(ToolSet{}, "sys", {}, RenderOptions{}), std::invalid_argument) << id;
        // A leading system message with no system prompt is the system prompt, as in the templates.
        const std::vector<ChatMessage> with_system = {ChatMessage{Role::system, "S", {}, {}, {}, {}},
                                                      ChatMessage::user("q")};
        const std::vector<ChatMessage> just_user = {ChatMessage::user("q")};
        EXPECT_EQ(cc::pieces_text(format->conversation_pieces(ToolSet{}, "", with_system, RenderOptions{})),
                  cc::pieces_text(format->conversation_pieces(ToolSet{}, "S", just_user, RenderOptions{})))
            << id;
    }
}

// Errors count messages as the caller passed them, a leading system message included.
TEST(ConversationPieces, ErrorsNameTheCallersIndex) {
    ChatMessage two_calls = ChatMessage::assistant("");
    two_calls.tool_calls = {ChatToolCall{"call00001", "f", {}, std::nullopt},
                            ChatToolCall{"call00002", "g", {}, std::nullopt}};
    const std::vector<ChatMessage> m = {ChatMessage{Role::system, "S", {}, {}, {}, {}}, ChatMessage::user("q"),
                                        two_calls};
    const auto llama3 = cc::make_chat_format("llama3");
    for (const std::string system : {"", "given"}) {
        try {
            llama3->conversation_pieces(ToolSet{}, system, m, RenderOptions{});
            ADD_FAILURE() << "no error";
        } catch (const std::invalid_argument& e) {
            EXPECT_EQ(std::string(e.what()).rfind("messages[2]: llama3 renders one tool call per assistant message", 0),
                      0u)
                << e.what();
        }
    }
}

// ---- parse_openai_messages

TEST(ParseOpenAiMessages, ReadsEveryField) {
    const auto j = nlohmann::ordered_json::parse(R"([
        {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "user", "content": "hi", "name": "ignored", "extra": 1},
        {"role": "assistant", "content": null, "reasoning_content": "think",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "f", "arguments": "{\"z\": 1,  \"a\": [true]}"}},
                        {"id": "c2", "function": {"name": "g", "arguments": {"k": "v"}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r1", "name": "f"},
        {"role": "system", "content": "later"},
        {"role": "assistant", "content": "done"}
    ])");
    const auto conv = cc::parse_openai_messages(j);
    EXPECT_EQ(conv.system_prompt, "a\nb");
    ASSERT_EQ(conv.messages.size(), 5u);
    EXPECT_EQ(conv.messages[0].role, Role::user);
    EXPECT_EQ(conv.messages[0].content, "hi");
    const auto& a = conv.messages[1];
    EXPECT_EQ(a.role, Role::assistant);
    EXPECT_EQ(a.content, "");
    EXPECT_EQ(a.reasoning_content, "think");
    ASSERT_EQ(a.tool_calls.size(), 2u);
    EXPECT_EQ(a.tool_calls[0].id, "c1");
    EXPECT_EQ(a.tool_calls[0].name, "f");
    EXPECT_EQ(cc::py_json_dumps(a.tool_calls[0].arguments), R"({"z": 1, "a": [true]})");  // order kept
    EXPECT_EQ(a.tool_calls[0].arguments_text, "{\"z\": 1,  \"a\": [true]}");
    EXPECT_FALSE(a.tool_calls[1].arguments_text.has_value());
    EXPECT_EQ(cc::py_json_dumps(a.tool_calls[1].arguments), R"({"k": "v"})");
    EXPECT_EQ(conv.messages[2].role, Role::tool);
    EXPECT_EQ(conv.messages[2].tool_call_id, "c1");
    EXPECT_EQ(conv.messages[2].name, "f");
    EXPECT_EQ(conv.messages[3].role, Role::system);
    EXPECT_EQ(conv.messages[3].content, "later");
    EXPECT_STREQ(cc::role_name(conv.messages[4].role), "assistant");
}

// Arguments that are not a JSON object (a weak model's call sent back) are taken as the string the
// client sent, as the OpenAI API takes them: Qwen's template prints the string verbatim, the
// tojson templates (Llama 3, Mistral) print it as a JSON string.
TEST(ParseOpenAiMessages, ArgumentsThatAreNotAJsonObjectStayTheStringSent) {
    const auto conv = cc::parse_openai_messages(nlohmann::ordered_json::parse(R"([
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"q\": \"from\": 26"}},
            {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "[1]"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "r"}])"));
    const auto& calls = conv.messages[1].tool_calls;
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0].arguments_text, "{\"q\": \"from\": 26");
    EXPECT_TRUE(calls[0].arguments.is_string());
    EXPECT_EQ(calls[0].arguments.get<std::string>(), "{\"q\": \"from\": 26");
    EXPECT_EQ(calls[1].arguments.get<std::string>(), "[1]");
    const std::string q = cc::pieces_text(cc::make_chat_format("qwen3")->conversation_pieces(ToolSet{}, "", conv.messages, RenderOptions{}));
    EXPECT_NE(q.find("{\"name\": \"f\", \"arguments\": {\"q\": \"from\": 26}"), std::string::npos) << q;
    EXPECT_NE(q.find("{\"name\": \"g\", \"arguments\": [1]}"), std::string::npos) << q;
    auto one_call = conv.messages;  // Llama 3's template takes one call per message
    one_call[1].tool_calls.resize(1);
    const std::string l = cc::pieces_text(cc::make_chat_format("llama3")->conversation_pieces(ToolSet{}, "", one_call, RenderOptions{}));
    EXPECT_NE(l.find("\"parameters\": \"{\\\"q\\\": \\\"from\\\": 26\""), std::string::npos) << l;
}

TEST(ParseOpenAiMessages, ErrorsNameThePath) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"({"role": "user"})", "messages: must be a list"},
        {R"([1])", "messages[0]: must be an object"},
        {R"([{"content": "x"}])", "messages[0].role: must be a string"},
        {R"([{"role": "function", "name": "f", "content": "x"}])", "messages[0].role: the legacy role \"function\""},
        {R"([{"role": "robot", "content": "x"}])", "messages[0].role: unknown role \"robot\""},
        {R"([{"role": "user", "content": "a"}, {"role": "user", "content": 5}])",
         "messages[1].content: must be a string or a list of text parts"},
        {R"([{"role": "user"}])", "messages[0].content: a user message needs content"},
        {R"([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])",
         "messages[0].content[0].type: \"image_url\" parts are not supported"},
        {R"([{"role": "user", "content": [{"type": "text"}]}])", "messages[0].content[0].text: must be a string"},
        {R"([{"role": "assistant", "content": null}])",
         "messages[0].content: an assistant message needs content or tool_calls"},
        {R"([{"role": "assistant", "tool_calls": {}}])", "messages[0].tool_calls: must be a list"},
        {R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]}])",
         "messages[0].tool_calls[0].function.arguments: must be a JSON string or an object"},
        {R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}])",
         "messages[0].tool_calls[0].function.arguments: missing"},
        {R"([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}])",
         "messages[0].tool_calls[0].function.name: must be a non-empty string"},
        {R"([{"role": "assistant", "tool_calls": [{"type": "code", "function": {"name": "f", "arguments": "{}"}}]}])",
         "messages[0].tool_calls[0].type: \"code\" tool calls are not supported"},
        {R"([{"role": "assistant", "tool_calls": [{"id": 7, "function": {"name": "f", "arguments": "{}"}}]}])",
         "messages[0].tool_calls[0].id: must be a string"},
        {R"([{"role": "tool", "content": "r"}])", "messages[0].tool_call_id: a tool message needs the id"},
        {R"([{"role": "system", "content": null}])", "messages[0].content: a system message needs content"},
    };
    for (const auto& [text, expected] : cases) {
        try {
            cc::parse_openai_messages(nlohmann::ordered_json::parse(text));
            ADD_FAILURE() << "no error for " << text;
        } catch (const std::invalid_argument& e) {
            EXPECT_EQ(std::string(e.what()).rfind(expected, 0), 0u)
                << "got: " << e.what() << "\nexpected: " << expected;
        }
    }
    // The source names the array.
    EXPECT_THROW(
        {
            try {
                cc::parse_openai_messages(nlohmann::ordered_json::parse(R"([{"role": 1}])"), "request.json: messages");
            } catch (const std::invalid_argument& e) {
                EXPECT_EQ(std::string(e.what()).rfind("request.json: messages[0].role:", 0), 0u) << e.what();
                throw;
            }
        },
        std::invalid_argument);
}

// ---- parse_reply

TEST(ParseReply, Qwen3ThinkingContentAndEveryCall) {
    const auto f = cc::make_chat_format("qwen3");
    auto r = f->parse_reply(
        "<think>\nPlan it.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": "
        "{\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>");
    EXPECT_EQ(r.reasoning_content, "Plan it.");
    EXPECT_EQ(r.content, "Let me check.");
    ASSERT_EQ(r.tool_calls.size(), 2u);
    EXPECT_EQ(r.tool_calls[0].name, "a");
    EXPECT_EQ(cc::py_json_dumps(r.tool_calls[0].arguments), R"({"x": 1})");
    EXPECT_EQ(r.tool_calls[1].name, "b");
    EXPECT_TRUE(r.tool_calls_valid);
    EXPECT_TRUE(r.tool_calls[0].id.empty());

    // The empty think block of enable_thinking=false is in the prompt; the reply is just content.
    r = f->parse_reply("  Paris is sunny.\n");
    EXPECT_EQ(r.content, "Paris is sunny.");
    EXPECT_FALSE(r.reasoning_content.has_value());
    EXPECT_TRUE(r.tool_calls.empty());

    // Cut off inside the thinking, and a call cut off without its closing tag.
    r = f->parse_reply("<think>\nstill thinking");
    EXPECT_EQ(r.reasoning_content, "still thinking");
    EXPECT_EQ(r.content, "");
    r = f->parse_reply("<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": ");
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].name, "a");
    EXPECT_FALSE(r.tool_calls_valid);
    r = f->parse_reply("<tool_call>\nnot json\n</tool_call>");
    EXPECT_TRUE(r.tool_calls.empty());
    EXPECT_FALSE(r.tool_calls_valid);
}

TEST(ParseReply, Qwen25HasNoThinking) {
    const auto r = cc::make_chat_format("qwen2.5")->parse_reply(
        "<think>x</think> ok <tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>");
    EXPECT_FALSE(r.reasoning_content.has_value());
    EXPECT_EQ(r.content, "<think>x</think> ok");
    ASSERT_EQ(r.tool_calls.size(), 1u);
}

TEST(ParseReply, Llama3MistralPlain) {
    auto r =
        cc::make_chat_format("llama3")->parse_reply("<|python_tag|>{\"name\": \"f\", \"parameters\": {\"q\": \"x\"}}");
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].name, "f");
    EXPECT_EQ(cc::py_json_dumps(r.tool_calls[0].arguments), R"({"q": "x"})");
    EXPECT_EQ(r.content, "");
    r = cc::make_chat_format("llama3")->parse_reply(" It is sunny. ");
    EXPECT_EQ(r.content, "It is sunny.");
    EXPECT_TRUE(r.tool_calls.empty());

    const auto mistral = cc::make_chat_format("mistral");
    r = mistral->parse_reply(
        "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", "
        "\"arguments\": {}}]");
    ASSERT_EQ(r.tool_calls.size(), 2u);
    EXPECT_EQ(r.tool_calls[1].name, "b");
    EXPECT_EQ(r.content, "");
    EXPECT_TRUE(r.tool_calls_valid);
    r = mistral->parse_reply("Sure. [TOOL_CALLS] {\"name\": \"a\", \"arguments\": {}}");
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.content, "Sure.");
    r = mistral->parse_reply("[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"argu");
    ASSERT_EQ(r.tool_calls.size(), 2u);
    EXPECT_FALSE(r.tool_calls_valid);
    r = mistral->parse_reply("[TOOL_CALLS]");
    EXPECT_TRUE(r.tool_calls.empty());
    EXPECT_FALSE(r.tool_calls_valid);
    r = mistral->parse_reply(" plain answer");
    EXPECT_EQ(r.content, "plain answer");

    r = cc::make_chat_format("plain")->parse_reply(" {\"name\": \"f\", \"arguments\": {}}");
    ASSERT_EQ(r.tool_calls.size(), 1u);
    r = cc::make_chat_format("plain")->parse_reply(" Once upon a time");
    EXPECT_EQ(r.content, "Once upon a time");
}

// A reply becomes the next turn's history: parsed, turned into a message, rendered again.
TEST(ParseReply, RoundTripThroughTheHistory) {
    const auto f = cc::make_chat_format("qwen3");
    const std::string generated =
        "<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>";
    auto reply = f->parse_reply(generated);
    reply.tool_calls[0].id = "call00001";
    std::vector<ChatMessage> m = {ChatMessage::user("Weather?"), cc::assistant_message(reply)};
    RenderOptions o;
    o.add_generation_prompt = false;
    const auto text = cc::pieces_text(f->conversation_pieces(ToolSet{}, "", m, o));
    // The last assistant turn after the query gets the (empty) think block, then the call as generated.
    EXPECT_EQ(text, "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n" + generated +
                        "<|im_end|>\n");
}

}  // namespace
