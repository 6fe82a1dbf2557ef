// Tool sets: parsing, validation errors, canonical order, tools_hash and group_key (DESIGN §3).
#include "core/text/keys.h"
#include "core/base/sha256.h"
#include "core/text/tool_set.h"
#include "tests/test_support.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <set>

namespace {

using cc::ToolSet;

const char* kThreeTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"name": "send_email", "description": "Send an email",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}}},
  {"type": "function", "function": {"name": "add", "description": "Add numbers",
    "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number", "default": 0.5}}}}}
])";

std::string error_of(const std::string& text, const std::string& source = "tools.json") {
    try {
        ToolSet::from_json_text(text, source);
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "<no error>";
}

TEST(ToolSet, ParsesBothFormatsAndNormalisesToOpenAI) {
    const auto set = ToolSet::from_json_text(kThreeTools, "t.json");
    ASSERT_EQ(set.size(), 3u);
    for (const auto& tool : set.tools()) {
        EXPECT_EQ(tool.schema["type"], "function");
        EXPECT_EQ(tool.schema["function"]["name"], tool.name);
        EXPECT_EQ(tool.canonical_text, cc::py_json_dumps(tool.schema));
    }
    const auto names = set.names();
    EXPECT_NE(std::find(names.begin(), names.end(), "send_email"), names.end());
    // The bare tool was wrapped in the OpenAI form with "type" first.
    for (const auto& tool : set.tools()) {
        if (tool.name == "send_email") {
            EXPECT_TRUE(tool.canonical_text.starts_with(R"({"type": "function", "function": {"name": "send_email")"))
                << tool.canonical_text;
        }
    }
}

TEST(ToolSet, AcceptsObjectWithToolsArray) {
    const auto set = ToolSet::from_json_text(std::string("{\"tools\": ") + kThreeTools + "}", "t.json");
    EXPECT_EQ(set.size(), 3u);
    EXPECT_EQ(set.tools_hash(), ToolSet::from_json_text(kThreeTools, "u.json").tools_hash());
}

TEST(ToolSet, CanonicalOrderIsSortedByCanonicalText) {
    const auto set = ToolSet::from_json_text(kThreeTools, "t.json");
    for (size_t i = 1; i < set.size(); ++i)
        EXPECT_LT(set.tools()[i - 1].canonical_text, set.tools()[i].canonical_text);
    std::string joined;
    for (size_t i = 0; i < set.size(); ++i) {
        if (i) joined.push_back('\n');
        joined.append(set.tools()[i].canonical_text);
    }
    EXPECT_EQ(set.tools_hash(), cc::sha256_hex(joined));
}

TEST(ToolSet, HashIsOrderInvariant) {
    auto arr = nlohmann::ordered_json::parse(kThreeTools);
    const std::string reference = ToolSet::from_json_text(arr.dump(), "a").tools_hash();
    std::mt19937 rng(1234);
    for (int trial = 0; trial < 10; ++trial) {
        std::vector<nlohmann::ordered_json> items(arr.begin(), arr.end());
        std::shuffle(items.begin(), items.end(), rng);
        EXPECT_EQ(ToolSet::from_json_text(nlohmann::ordered_json(items).dump(), "b").tools_hash(), reference);
    }
}

TEST(ToolSet, AnyChangedByteChangesTheHash) {
    const std::string reference = ToolSet::from_json_text(kThreeTools, "a").tools_hash();
    std::set<std::string> hashes{reference};
    const std::string text = kThreeTools;
    // Change one letter inside each string value in turn (names, descriptions, property names).
    int n_variants = 0;
    for (size_t pos = 0; pos < text.size(); ++pos) {
        if (text[pos] < 'a' || text[pos] > 'z') continue;
        std::string changed = text;
        changed[pos] = text[pos] == 'z' ? 'y' : static_cast<char>(text[pos] + 1);
        std::string hash;
        try {
            hash = ToolSet::from_json_text(changed, "v").tools_hash();
        } catch (const std::runtime_error&) {
            continue;  // the change broke validity (e.g. "type" became "typf"): an error, not a collision
        }
        EXPECT_TRUE(hashes.insert(hash).second) << "byte " << pos << " changed but the hash did not";
        ++n_variants;
    }
    EXPECT_GT(n_variants, 100);
}

TEST(ToolSet, KeyOrderInsideASchemaMatters) {
    // The prompt renders keys in the given order, so a reordered schema is a different prefix.
    const auto a = ToolSet::from_json_text(R"([{"name": "f", "description": "d", "parameters": {"type": "object"}}])", "a");
    const auto b = ToolSet::from_json_text(R"([{"description": "d", "name": "f", "parameters": {"type": "object"}}])", "b");
    EXPECT_NE(a.tools_hash(), b.tools_hash());
}

struct BadCase {
    const char* text;
    const char* expected;
};

class ToolSetErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ToolSetErrors, NameTheFileToolAndField) {
    EXPECT_EQ(error_of(GetParam().text), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Validation, ToolSetErrors,
    ::testing::Values(
        BadCase{R"([{"name": "a", "parameters": {}}, {"name": "b"}, {"name": "c"},
                    {"name": "get_wheather", "parameters": "city"}])",
                R"(tools.json: tool 3 ("get_wheather"): "parameters" must be an object)"},
        BadCase{R"([{"name": "f"}, {"name": "f"}])", R"(tools.json: tool 1 ("f"): duplicate name, already used by tool 0)"},
        BadCase{R"([{"description": "no name"}])", R"(tools.json: tool 0: "name" is missing)"},
        BadCase{R"([{"name": 5}])", R"(tools.json: tool 0: "name" must be a string)"},
        BadCase{R"([{"name": "9lives"}])", R"(tools.json: tool 0 ("9lives"): "name" must start with a letter or '_')"},
        BadCase{R"([{"name": "has space"}])",
                R"(tools.json: tool 0 ("has space"): "name" has a character that is not a letter, digit, '_', '.' or '-' at position 3)"},
        BadCase{R"([{"name": "f", "description": 1}])", R"(tools.json: tool 0 ("f"): "description" must be a string)"},
        BadCase{R"([{"type": "function", "function": "f"}])", R"(tools.json: tool 0: "function" must be an object)"},
        BadCase{R"([{"type": "retrieval", "function": {"name": "f"}}])", R"(tools.json: tool 0: "type" must be "function")"},
        BadCase{R"([{"name": "f", "parameters": {"type": "array"}}])",
                R"(tools.json: tool 0 ("f"): "parameters"."type" must be "object")"},
        BadCase{R"([{"name": "f", "parameters": {"type": "object", "properties": {"a": {}}, "required": ["b"]}}])",
                R"(tools.json: tool 0 ("f"): "parameters"."required" names "b", which is not in "properties")"},
        BadCase{R"([1])", R"(tools.json: tool 0: must be a JSON object, not number)"},
        BadCase{R"({"functions": []})",
                R"(tools.json: expected a JSON array of tools or an object with a "tools" array (or MCP tools/list pages, or {"servers": {NAME: tools/list result}}), not object)"},
        BadCase{R"("hello")",
                R"(tools.json: expected a JSON array of tools or an object with a "tools" array (or MCP tools/list pages, or {"servers": {NAME: tools/list result}}), not string)"},
        BadCase{R"({"tools": [{"name": "f", "inputSchema": []}]})", R"(tools.json: tool 0: "inputSchema" must be an object)"},
        BadCase{R"({"servers": [1]})", R"(tools.json: "servers" must be an object {NAME: tools/list result})"},
        BadCase{R"({"servers": {"gh": {"tools": [{"name": "f"}, {"name": "f"}]}}})",
                R"(tools.json: tool 1 ("gh__f"): duplicate name, already used by tool 0)"}));

TEST(ToolSet, NameLengthLimit) {
    const std::string ok = "[{\"name\": \"" + std::string(128, 'a') + "\"}]";
    EXPECT_NO_THROW(ToolSet::from_json_text(ok, "t"));
    const std::string bad = "[{\"name\": \"" + std::string(129, 'a') + "\"}]";
    EXPECT_NE(error_of(bad).find("is longer than 128 characters"), std::string::npos);
}

TEST(ToolSet, LimitsGiveClearErrorsNotCrashes) {
    // Depth: 100 nested objects inside parameters.
    std::string deep = "[{\"name\": \"f\", \"parameters\": ";
    for (int i = 0; i < 100; ++i) deep += "{\"a\": ";
    deep += "1";
    for (int i = 0; i < 100; ++i) deep += "}";
    deep += "}]";
    EXPECT_NE(error_of(deep).find("tools.json: JSON nesting deeper than 64 levels"), std::string::npos) << error_of(deep);

    std::string many = "[";
    for (int i = 0; i < 4097; ++i) {
        if (i) many.push_back(',');
        many.append("{\"name\": \"t").append(std::to_string(i)).append("\"}");
    }
    many += "]";
    EXPECT_EQ(error_of(many), "tools.json: 4097 tools, more than the limit of 4096");
    many.replace(many.rfind(",{"), std::string::npos, "]");
    EXPECT_EQ(ToolSet::from_json_text(many, "t").size(), 4096u);

    cc::ToolSetLimits small;
    small.max_file_bytes = 10;
    EXPECT_THROW(ToolSet::from_json_text(kThreeTools, "big.json", small), std::runtime_error);

    EXPECT_NE(error_of("[{\"name\": \"f\"").find("tools.json: invalid JSON"), std::string::npos);
    EXPECT_NE(error_of("").find("tools.json: invalid JSON"), std::string::npos);
}

TEST(ToolSet, FromFileNamesThePath) {
    cc::test::TempDir dir;
    const auto missing = dir.path() / "nope.json";
    try {
        ToolSet::from_file(missing);
        FAIL();
    } catch (const std::runtime_error& e) {
        EXPECT_TRUE(std::string(e.what()).starts_with(missing.string() + ": cannot read")) << e.what();
    }
    const auto file = dir.path() / "tools.json";
    std::ofstream(file) << kThreeTools;
    EXPECT_EQ(ToolSet::from_file(file).size(), 3u);
}

TEST(ToolSet, SampleSetsInResourcesAreValid) {
    const auto dir = cc::test::source_dir() / "resources" / "toolsets";
    if (!std::filesystem::exists(dir / "tools_20.json")) GTEST_SKIP() << "sample tool sets not present in " << dir;
    size_t previous = 0;
    for (int n : {5, 10, 20, 50, 100}) {
        const auto set = ToolSet::from_file(dir / ("tools_" + std::to_string(n) + ".json"));
        EXPECT_EQ(set.size(), static_cast<size_t>(n));
        EXPECT_GT(set.size(), previous);
        previous = set.size();
    }
}

// ---- group_key ------------------------------------------------------------------------------

cc::GroupKeyInputs base_inputs() {
    cc::GroupKeyInputs in;
    in.model_fingerprint = std::string(64, 'a');
    in.chat_format = "qwen3";
    in.backend_numerics = "cpu/f32";
    in.system_prompt = "You are a helpful assistant.";
    in.tools_hash = ToolSet::from_json_text(kThreeTools, "t").tools_hash();
    return in;
}

TEST(GroupKey, EveryInputChangesTheKey) {
    const auto base = base_inputs();
    const std::string key = cc::group_key(base);
    EXPECT_EQ(key.size(), 64u);
    EXPECT_EQ(key, cc::group_key(base_inputs()));
    std::vector<cc::GroupKeyInputs> variants(6, base);
    variants[0].format_version += 1;
    variants[1].model_fingerprint[0] = 'b';
    variants[2].chat_format = "llama3";
    variants[3].backend_numerics = "cpu/bf16";
    variants[4].system_prompt += " ";
    variants[5].tools_hash = ToolSet::from_json_text(R"([{"name": "other"}])", "t").tools_hash();
    std::set<std::string> keys{key};
    for (const auto& v : variants) EXPECT_TRUE(keys.insert(cc::group_key(v)).second);
}

TEST(GroupKey, KeyTextHidesTheSystemPrompt) {
    const auto text = cc::group_key_text(base_inputs());
    EXPECT_EQ(text.find("helpful"), std::string::npos);
    EXPECT_NE(text.find("system_prompt_sha256=" + cc::sha256_hex("You are a helpful assistant.")), std::string::npos);
    EXPECT_EQ(cc::group_key(base_inputs()), cc::sha256_hex(text));
}

TEST(Sha256, KnownVectors) {
    EXPECT_EQ(cc::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(cc::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    cc::Sha256 h;
    h.update("a");
    h.update("bc");
    EXPECT_EQ(cc::to_hex(h.finish()), cc::sha256_hex("abc"));
}

}  // namespace

// MCP tool lists (docs/server.md): keyed by the function form the model sees.
namespace {

const char* kMcpPage1 = R"({"tools": [
  {"name": "get_weather", "title": "Weather", "description": "Weather for a city",
   "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
   "outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}],
 "nextCursor": "page2"})";
const char* kMcpPage2 = R"({"tools": [
  {"name": "send_email", "description": "Send an email",
   "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}},
   "annotations": {"destructiveHint": false}, "_meta": {"x": 1}}]})";
const char* kFunctionForm = R"([
  {"type": "function", "function": {"name": "send_email", "description": "Send an email",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}}}},
  {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
])";

}  // namespace

TEST(ToolSetMcp, PagesGiveTheSameHashAsTheFunctionList) {
    const auto reference = ToolSet::from_json_text(kFunctionForm, "functions.json");
    const auto pages = ToolSet::from_json_text(std::string("[") + kMcpPage1 + "," + kMcpPage2 + "]", "pages.json");
    EXPECT_EQ(pages.tools_hash(), reference.tools_hash());
    EXPECT_EQ(pages.to_json(), reference.to_json());
    // One page (and the JSON-RPC envelope) gives the single tool's function form.
    const auto one = ToolSet::from_json_text(kMcpPage1, "page.json");
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one.tools()[0].canonical_text,
              R"({"type": "function", "function": {"name": "get_weather", "description": "Weather for a city", )"
              R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})");
    const auto rpc = ToolSet::from_json_text(std::string(R"({"jsonrpc": "2.0", "id": 1, "result": )") + kMcpPage1 + "}", "rpc");
    EXPECT_EQ(rpc.tools_hash(), one.tools_hash());
}

TEST(ToolSetMcp, TitlesAnnotationsAndOutputSchemaDoNotChangeTheKey) {
    auto page = nlohmann::ordered_json::parse(kMcpPage1);
    const auto a = ToolSet::from_json(page, "a").tools_hash();
    page["tools"][0]["title"] = "Another title";
    page["tools"][0]["annotations"] = {{"readOnlyHint", false}, {"openWorldHint", true}};
    page["tools"][0].erase("outputSchema");
    EXPECT_EQ(ToolSet::from_json(page, "b").tools_hash(), a);
    page["tools"][0]["description"] = "Changed";
    EXPECT_NE(ToolSet::from_json(page, "c").tools_hash(), a);
}

TEST(ToolSetMcp, MultiServerFormPrefixesNames) {
    const std::string text = std::string(R"({"servers": {"git.hub": )") + kMcpPage1 + R"(, "mail": [)" + kMcpPage2 + "]}}";
    const auto set = ToolSet::from_json_text(text, "servers.json");
    auto names = set.names();
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"git_hub__get_weather", "mail__send_email"}));
    // The same as the function list with those names, whatever the order of the servers.
    auto functions = nlohmann::ordered_json::parse(kFunctionForm);
    functions[0]["function"]["name"] = "mail__send_email";
    functions[1]["function"]["name"] = "git_hub__get_weather";
    EXPECT_EQ(set.tools_hash(), ToolSet::from_json(functions, "f").tools_hash());
    const std::string swapped = std::string(R"({"servers": {"mail": )") + kMcpPage2 + R"(, "git.hub": )" + kMcpPage1 + "}}";
    EXPECT_EQ(ToolSet::from_json_text(swapped, "s").tools_hash(), set.tools_hash());
}
