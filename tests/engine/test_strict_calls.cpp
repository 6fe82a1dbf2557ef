// Strict tool calls in the engine (ToolChoice::strict, "strict": true on a tool;
// core/engine/json_schema_constraint.h): with the mask on, every call's arguments are JSON that
// the tool's schema accepts -- on the built-in test model, whose random weights write no valid
// arguments without it, and on the trained toolcaller -- the cached path stays == a full prefill,
// and a schema the matcher cannot follow is refused by tool and keyword.
#include "core/engine/engine.h"
#include "tests/synthetic_checkpoint.h"
#include "tests/test_support.h"

#include <chrono>
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
using json = nlohmann::ordered_json;

std::string toolcaller_spec() { return (cc::test::source_dir() / "resources" / "models" / "toolcaller").string(); }

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

// Schemas whose every value is bounded (enums, booleans, bounded integers, closed objects, short
// arrays), so even a model with random weights finishes a masked call within a few dozen tokens.
const char* const kBoundedTools = R"([
 {"type": "function", "function": {"name": "set_thermostat", "description": "Set the heating.",
  "parameters": {"type": "object", "properties": {
     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
     "level": {"type": "integer", "minimum": 1, "maximum": 5},
     "eco": {"type": "boolean"}},
   "required": ["unit", "level", "eco"], "additionalProperties": false}}},
 {"type": "function", "function": {"name": "toggle_lights", "description": "Lights on or off.",
  "parameters": {"type": "object", "properties": {
     "room": {"enum": ["kitchen", "hall", null]},
     "on": {"type": "boolean"},
     "modes": {"type": "array", "items": {"enum": ["dim", "warm"]}, "maxItems": 2}},
   "required": ["room", "on"], "additionalProperties": false}}},
 {"type": "function", "function": {"name": "grant", "description": "Grant a role.",
  "parameters": {"type": "object", "properties": {
     "target": {"type": "object", "properties": {"kind": {"const": "user"}, "admin": {"type": ["boolean", "null"]}},
                "required": ["kind", "admin"], "additionalProperties": false}},
   "required": ["target"], "additionalProperties": false}}}
])";

ToolSet bounded_tools() { return ToolSet::from_json_text(kBoundedTools, "bounded"); }

ToolSet tools_file(const std::string& name) {
    return ToolSet::from_file(cc::test::source_dir() / "resources" / "toolsets" / name);
}

// The call's arguments parse and the tool's schema accepts them.
bool schema_valid(const ToolSet& tools, const std::optional<cc::ToolCall>& call) {
    if (!call || !call->arguments_valid) return false;
    for (const auto& t : tools.tools())
        if (t.name == call->name) return cc::json_schema_valid(cc::strict_arguments_schema(t), call->arguments);
    return false;
}

void expect_exact(const QueryResult& r, const std::string& label) {
    ASSERT_TRUE(r.identical.has_value()) << label;
    EXPECT_TRUE(*r.identical) << label;
    ASSERT_TRUE(r.full) << label;
    EXPECT_EQ(r.tokens, r.full->tokens) << label;
    ASSERT_EQ(r.step_logits.size(), r.full->step_logits.size()) << label;
    for (size_t i = 0; i < r.step_logits.size(); ++i)
        EXPECT_TRUE(r.step_logits[i] == r.full->step_logits[i]) << label << ": logits differ at token " << i;
}

const std::vector<std::string> kQueries = {"Make it warmer, level 3, eco on.", "Give Ana admin rights.", "go"};

// The random-weight test model: without strict its forced calls' arguments are not schema-valid;
// with strict every one is, and compare mode finds cached == full.
TEST(StrictCalls, TestModelWritesOnlySchemaValidArguments) {
    Engine& engine = engine_for("builtin:qwen3-test");
    const ToolSet tools = bounded_tools();
    engine.set_tools(tools, "");
    size_t n_valid_free = 0, n_valid_strict = 0, n = 0;
    for (const auto& query : kQueries) {
        for (const auto& name : std::vector<std::string>{"", "set_thermostat", "toggle_lights", "grant"}) {
            QueryOptions q;
            q.max_new_tokens = 160;
            q.tool_choice = name.empty() ? ToolChoice::parse("required") : ToolChoice::named(name);
            const auto free = engine.query(query, q);
            q.tool_choice.strict = true;
            q.mode = QueryMode::compare;
            const auto strict = engine.query(query, q);
            const std::string label = query + " / " + q.tool_choice.text() + " -> " + strict.text;
            expect_exact(strict, label);
            EXPECT_TRUE(schema_valid(tools, strict.tool_call)) << label;
            EXPECT_NE(strict.text.find("}\n</tool_call>"), std::string::npos) << label << ": the call is closed";
            n_valid_free += schema_valid(tools, free.tool_call);
            n_valid_strict += schema_valid(tools, strict.tool_call);
            ++n;
        }
    }
    std::printf("test model, forced calls: schema-valid %zu/%zu without strict, %zu/%zu with\n", n_valid_free, n,
                n_valid_strict, n);
    EXPECT_EQ(n_valid_strict, n);
    EXPECT_LT(n_valid_free, n);
}

// Sampling at a high temperature: the mask holds whatever the draw (seeded, reproducible).
TEST(StrictCalls, SampledArgumentsStayValid) {
    Engine& engine = engine_for("builtin:qwen3-test");
    const ToolSet tools = bounded_tools();
    engine.set_tools(tools, "");
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        QueryOptions q;
        q.max_new_tokens = 160;
        q.temperature = 1.5f;
        q.seed = seed;
        q.tool_choice = ToolChoice::parse("required");
        q.tool_choice.strict = true;
        const auto r = engine.query("Which tool fits?", q);
        EXPECT_TRUE(schema_valid(tools, r.tool_call)) << "seed " << seed << ": " << r.text;
        EXPECT_EQ(engine.query("Which tool fits?", q).tokens, r.tokens) << "seed " << seed;
    }
}

// The trained toolcaller on the bundled 5- and 20-tool sets: with strict, under auto (calls it
// opens itself) and required, every call it makes is schema-valid; cached == full.
TEST(StrictCalls, ToolcallerCallsAreSchemaValid) {
    Engine& engine = engine_for(toolcaller_spec());
    const std::vector<std::string> queries = {"What's the weather like in Austin, TX right now?",
                                              "Send an email to ana@example.com saying the report is late.",
                                              "Convert 20 euros to dollars, please.",
                                              "Create a calendar event called Standup tomorrow 9am to 9:15am."};
    for (const char* file : {"tools_5.json", "tools_20.json"}) {
        const ToolSet tools = tools_file(file);
        engine.set_tools(tools, "");
        size_t n_calls_free = 0, n_valid_free = 0, n_calls = 0, n_valid = 0;
        for (const auto& query : queries) {
            for (const char* choice : {"auto", "required"}) {
                QueryOptions q;
                q.max_new_tokens = 128;
                q.tool_choice = ToolChoice::parse(choice);
                const auto free = engine.query(query, q);
                n_calls_free += free.tool_call.has_value();
                n_valid_free += schema_valid(tools, free.tool_call);
                q.tool_choice.strict = true;
                q.mode = QueryMode::compare;
                const auto r = engine.query(query, q);
                const std::string label = std::string(file) + " " + choice + ": " + query + " -> " + r.text;
                expect_exact(r, label);
                if (!r.tool_call) {
                    EXPECT_STREQ(choice, "auto") << label;
                    EXPECT_EQ(r.text.find("<tool_call>"), std::string::npos) << label << ": an unparsed call";
                    continue;
                }
                ++n_calls;
                n_valid += schema_valid(tools, r.tool_call);
                EXPECT_TRUE(schema_valid(tools, r.tool_call)) << label;
            }
        }
        std::printf("toolcaller %s: schema-valid calls %zu/%zu without strict, %zu/%zu with\n", file, n_valid_free,
                    n_calls_free, n_valid, n_calls);
        EXPECT_EQ(n_valid, n_calls);
        EXPECT_GT(n_calls, 0u);
    }
}

// "strict": true on one tool constrains that tool's calls without the option.
TEST(StrictCalls, PerToolStrictFlag) {
    Engine& engine = engine_for("builtin:qwen3-test");
    json arr = json::parse(kBoundedTools);
    arr[1]["function"]["strict"] = true;
    const ToolSet tools = ToolSet::from_json_text(arr.dump(), "marked");
    engine.set_tools(tools, "");
    QueryOptions q;
    q.max_new_tokens = 160;
    q.mode = QueryMode::compare;
    q.tool_choice = ToolChoice::named("toggle_lights");
    const auto marked = engine.query("Lights!", q);
    expect_exact(marked, "marked");
    EXPECT_TRUE(schema_valid(tools, marked.tool_call)) << marked.text;
    q.tool_choice = ToolChoice::named("grant");  // not marked: its arguments are the model's
    const auto unmarked = engine.query("Lights!", q);
    EXPECT_FALSE(schema_valid(tools, unmarked.tool_call)) << unmarked.text;
}

// chat(): a strict forced call, then a second turn, cached == full.
TEST(StrictCalls, ChatStaysExact) {
    Engine& engine = engine_for("builtin:qwen3-test");
    const ToolSet tools = bounded_tools();
    QueryOptions q;
    q.max_new_tokens = 160;
    q.mode = QueryMode::compare;
    q.tool_choice = ToolChoice::parse("required");
    q.tool_choice.strict = true;
    ChatRequest req{tools, "You are terse.", {ChatMessage::user("Heat, please.")}, {}};
    const auto first = engine.chat(req, q);
    expect_exact(first, "first turn");
    ASSERT_TRUE(first.reply);
    ASSERT_FALSE(first.reply->tool_calls.empty());
    EXPECT_TRUE(first.reply->tool_calls_valid) << first.text;
    EXPECT_TRUE(schema_valid(tools, first.tool_call)) << first.text;
    req.messages.push_back(cc::assistant_message(*first.reply));
    req.messages.push_back(ChatMessage::tool_result("call_1", "{\"ok\": true}"));
    expect_exact(engine.chat(req, q), "second turn");
}

// Every query with a forced strict call (160 tokens at most): cached == full, and the arguments
// satisfy the schema. The results, each with its call, for checks of the test's own.
std::vector<QueryResult> forced_strict_calls(Engine& engine, const ToolSet& tools) {
    EXPECT_NO_THROW(cc::check_strict_tools(tools, true));
    engine.set_tools(tools, "");
    std::vector<QueryResult> out;
    for (const auto& query : kQueries) {
        QueryOptions q;
        q.max_new_tokens = 160;
        q.tool_choice = ToolChoice::parse("required");
        q.tool_choice.strict = true;
        q.mode = QueryMode::compare;
        auto r = engine.query(query, q);
        expect_exact(r, query + " -> " + r.text);
        if (!schema_valid(tools, r.tool_call)) {
            ADD_FAILURE() << query << " -> " << r.text;
            continue;
        }
        out.push_back(std::move(r));
    }
    return out;
}

// A tool schema as pydantic's model_json_schema() (and so FastMCP) writes it: shared definitions
// under $defs, reached by $ref, one of them Optional (anyOf with null). Forced strict calls follow
// the referenced schemas; cached == full.
TEST(StrictCalls, ReferencedDefinitionsAreFollowed) {
    Engine& engine = engine_for("builtin:qwen3-test");
    const char* const text = R"([{"type": "function", "function": {"name": "route", "description": "Plan a route.",
      "parameters": {"$defs": {"Stop": {"properties": {"city": {"enum": ["Oslo", "Bergen"], "title": "City", "type": "string"},
        "nights": {"maximum": 3, "minimum": 0, "title": "Nights", "type": "integer"}}, "required": ["city", "nights"],
        "title": "Stop", "type": "object"}},
       "properties": {"start": {"$ref": "#/$defs/Stop"}, "end": {"anyOf": [{"$ref": "#/$defs/Stop"}, {"type": "null"}],
        "default": null}, "fast": {"title": "Fast", "type": "boolean"}},
       "required": ["start", "end", "fast"], "title": "Route", "type": "object"}}}])";
    for (const auto& r : forced_strict_calls(engine, ToolSet::from_json_text(text, "refs")))
        EXPECT_TRUE(r.tool_call->arguments["start"]["city"].is_string()) << r.text;
}

// Llama 3's call is the reply itself ({"name": ..., "parameters": {...}}), so under auto a strict
// call is watched for at the reply's start. Driven token by token (the lowest id the mask leaves,
// the forced spans fed), a reply that opens with "{" becomes a call the llama3 parser reads, to an
// offered tool, with schema-valid arguments; whitespace and <|python_tag|> keep the watch open;
// prose ends it. Then the engine: strict under auto on synthetic Llama 3 weights, cached == full.
TEST(StrictCalls, Llama3CallsTheModelOpensUnderAutoAreMasked) {
    const auto tokenizer_path = cc::test::gen_dir() / "llama3" / "tokenizer.json";
    if (!std::filesystem::exists(tokenizer_path))
        GTEST_SKIP() << tokenizer_path << " is absent (unpacked from tests/data/llama3_tokenizer.tar.xz)";
    const cc::Tokenizer tok = cc::Tokenizer::from_file(tokenizer_path);
    std::vector<std::string> texts(tok.vocab_size());
    for (size_t id = 0; id < texts.size(); ++id) {
        const cc::token_id one = static_cast<cc::token_id>(id);
        texts[id] = tok.decode(std::span<const cc::token_id>(&one, 1), /*skip_special_tokens=*/true);
    }
    const auto format = cc::make_chat_format("llama3");
    const auto markup = *format->tool_call_markup();
    ASSERT_TRUE(cc::ToolCallConstraint::can_watch(markup, tok));
    const ToolSet tools = bounded_tools();
    cc::SchemaMaskerCache maskers;
    std::vector<std::shared_ptr<cc::SchemaMasker>> schemas;
    for (const auto& t : tools.tools())
        schemas.push_back(maskers.get(cc::strict_arguments_schema(t), "}" + markup.close, t.name, texts));
    const auto make = [&] {
        return cc::ToolCallConstraint(markup, tok, tools.names(), texts, schemas, /*forced=*/false);
    };
    const auto id_of = [&](const std::string& text) {
        const auto ids = tok.encode(text);
        EXPECT_EQ(ids.size(), 1u) << text;
        return ids.front();
    };
    const auto allowed = [&](cc::ToolCallConstraint& c, cc::token_id id) {
        std::vector<float> logits(texts.size(), 0.0f);
        c.mask(logits);
        return logits[static_cast<size_t>(id)] == 0.0f;
    };

    // At the reply's start: prose, whitespace and the call's opening pass; "{" into anything but a
    // call head does not.
    auto c = make();
    EXPECT_TRUE(allowed(c, id_of("Hello")));
    EXPECT_TRUE(allowed(c, id_of("{\"")));
    EXPECT_TRUE(allowed(c, id_of(" {")));
    EXPECT_FALSE(allowed(c, id_of("{\n")));
    EXPECT_FALSE(allowed(c, id_of("{}")));
    c.accept(id_of("\n\n"));
    // <|python_tag|> is 128010 in Llama 3.1's tokenizer; the test's (Llama 3's) has a reserved special token there.
    const cc::token_id tag = tok.token_to_id("<|python_tag|>").value_or(128010);
    ASSERT_TRUE(tok.is_special(tag));
    c.accept(tag);
    EXPECT_FALSE(allowed(c, id_of("{\n")));  // still at the reply's start
    c.accept(id_of("{\""));
    EXPECT_FALSE(allowed(c, id_of("Hello")));  // the head is masked now

    // Drive it to the call's end.
    std::vector<cc::token_id> reply{id_of("\n\n"), id_of("{\"")};
    for (int step = 0; step < 300 && c.strict_calls() == 0; ++step) {
        const auto forced = c.take_forced();
        if (!forced.empty()) {
            reply.insert(reply.end(), forced.begin(), forced.end());
            continue;
        }
        std::vector<float> logits(texts.size(), 0.0f);
        c.mask(logits);
        const auto pick = std::find(logits.begin(), logits.end(), 0.0f);
        ASSERT_NE(pick, logits.end()) << "a dead end";
        const auto id = static_cast<cc::token_id>(pick - logits.begin());
        c.accept(id);
        reply.push_back(id);
    }
    ASSERT_EQ(c.strict_calls(), 1u);
    const std::string text = tok.decode(reply, /*skip_special_tokens=*/true);
    const auto call = format->parse_tool_call(text);
    ASSERT_TRUE(call) << text;
    EXPECT_TRUE(schema_valid(tools, call)) << text;

    // Prose first: no call can follow in this format, nothing more is masked.
    auto prose = make();
    prose.accept(id_of("Hello"));
    EXPECT_TRUE(allowed(prose, id_of("{}")));

    // The engine: strict under auto runs (it was refused before), and stays exact.
    cc::test::TempDir dir;
    cc::test::write_synthetic_checkpoint(dir.path(), cc::test::tiny_llama3_config(), tokenizer_path);
    Engine& engine = engine_for(dir.path().string());
    engine.set_tools(tools, "");
    for (const auto& query : kQueries) {
        QueryOptions q;
        q.max_new_tokens = 24;
        q.tool_choice.strict = true;
        q.mode = QueryMode::compare;
        const auto r = engine.query(query, q);
        expect_exact(r, query + " -> " + r.text);
        if (r.tool_call) {
            EXPECT_TRUE(schema_valid(tools, r.tool_call)) << r.text;
        }
    }
}

// pattern (pydantic's constr(pattern=...), zod's .regex()): the two of tools_100.json, one with a
// length bound, and a format; every string of the call matches, cached == full.
TEST(StrictCalls, PatternsAreFollowed) {
    Engine& engine = engine_for("builtin:qwen3-test");
    const char* const text =
        R"([{"type": "function", "function": {"name": "book_slot", "description": "Book a call slot.",
      "parameters": {"type": "object", "properties": {"time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"},
        "phone": {"type": "string", "pattern": "^\\+[1-9][0-9]{6,14}$"},
        "room": {"type": "string", "pattern": "^[A-Z]{1,3}-\\d+$", "maxLength": 6},
        "day": {"type": "string", "format": "date"}},
       "required": ["time", "phone", "room", "day"], "additionalProperties": false}}}])";
    for (const auto& r : forced_strict_calls(engine, ToolSet::from_json_text(text, "patterns"))) {
        const std::string room = r.tool_call->arguments["room"];
        EXPECT_LE(room.size(), 6u) << r.text;
        EXPECT_NE(room.find('-'), std::string::npos) << r.text;
    }
}

TEST(StrictCalls, UnsupportedKeywordsAreRefusedByToolAndKeyword) {
    Engine& engine = engine_for("builtin:qwen3-test");
    json arr = json::parse(kBoundedTools);
    arr[0]["function"]["parameters"]["properties"]["zip"] = {{"type", "string"}, {"not", {{"const", "00000"}}}};
    const ToolSet tools = ToolSet::from_json_text(arr.dump(), "not");
    engine.set_tools(tools, "");
    QueryOptions q;
    q.max_new_tokens = 8;
    q.tool_choice.strict = true;
    try {
        engine.query("hi", q);
        ADD_FAILURE() << "not refused";
    } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("tool \"set_thermostat\""), std::string::npos) << what;
        EXPECT_NE(what.find("\"not\" at parameters.properties.zip"), std::string::npos) << what;
    }
    EXPECT_THROW(cc::check_strict_tools(tools, true), std::invalid_argument);
    EXPECT_NO_THROW(cc::check_strict_tools(tools, false));  // no tool is marked
    // Without strict the same tools work as before.
    q.tool_choice.strict = false;
    EXPECT_NO_THROW(engine.query("hi", q));
}

// The mask over the real 151,936-token vocabulary: the first mask inside a string walks the whole
// token trie; later steps in the same state are cached.
TEST(StrictCalls, MaskCostOnTheFullVocabulary) {
    Engine& engine = engine_for("builtin:qwen3-test");
    const ToolSet tools = tools_file("tools_5.json");
    engine.set_tools(tools, "");
    QueryOptions q;
    q.max_new_tokens = 48;
    q.tool_choice = ToolChoice::named("get_current_weather");
    q.tool_choice.strict = true;
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = engine.query("Weather in Oslo?", q);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    q.tool_choice.strict = false;
    const auto t1 = std::chrono::steady_clock::now();
    engine.query("Weather in Oslo?", q);
    const double free_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    std::printf("48 tokens on tools_5: %.0f ms strict (first use: trie + masks), %.0f ms without\n", ms, free_ms);
    EXPECT_EQ(r.tokens.size(), 48u);
}

}  // namespace
