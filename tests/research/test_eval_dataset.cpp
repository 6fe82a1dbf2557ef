// The bundled evaluation sets (resources/eval/tool_calls.jsonl and the held-out tool families,
// resources/eval/tool_families.jsonl): they parse, have the advertised shape, and every expected
// call is valid for its tool's JSON schema (required keys, known property names, types, enums and
// bounds, at every nesting level).
#include "core/research/eval.h"
#include "tests/test_support.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

using cc::ordered_json;

bool has_type(const ordered_json& v, const std::string& type) {
    if (type == "string") return v.is_string();
    if (type == "integer") return v.is_number_integer();
    if (type == "number") return v.is_number();
    if (type == "boolean") return v.is_boolean();
    if (type == "array") return v.is_array();
    if (type == "object") return v.is_object();
    if (type == "null") return v.is_null();
    return false;
}

// The problems of `value` against the JSON Schema subset the sample tool sets use.
void validate(const ordered_json& value, const ordered_json& schema, const std::string& path,
              std::vector<std::string>& problems) {
    if (auto t = schema.find("type"); t != schema.end() && !has_type(value, t->get<std::string>())) {
        problems.push_back(path + ": not of type " + t->get<std::string>());
        return;
    }
    if (auto e = schema.find("enum"); e != schema.end()) {
        bool found = false;
        for (const auto& option : *e) found = found || option == value;
        if (!found) problems.push_back(path + ": " + value.dump() + " is not in the enum");
    }
    if (value.is_number()) {
        if (auto m = schema.find("minimum"); m != schema.end() && value.get<double>() < m->get<double>())
            problems.push_back(path + ": below the minimum");
        if (auto m = schema.find("maximum"); m != schema.end() && value.get<double>() > m->get<double>())
            problems.push_back(path + ": above the maximum");
    }
    if (value.is_object()) {
        const auto props = schema.value("properties", ordered_json::object());
        for (const auto& [key, v] : value.items()) {
            if (!props.contains(key))
                problems.push_back(path + ": unknown property \"" + key + "\"");
            else
                validate(v, props[key], path + "." + key, problems);
        }
        for (const auto& req : schema.value("required", ordered_json::array()))
            if (!value.contains(req.get<std::string>()))
                problems.push_back(path + ": missing required \"" + req.get<std::string>() + "\"");
    }
    if (value.is_array()) {
        if (auto m = schema.find("minItems"); m != schema.end() && value.size() < m->get<size_t>())
            problems.push_back(path + ": fewer items than minItems");
        if (auto items = schema.find("items"); items != schema.end())
            for (size_t i = 0; i < value.size(); ++i)
                validate(value[i], *items, path + "[" + std::to_string(i) + "]", problems);
    }
}

std::vector<std::string> problems_of(const cc::EvalExample& ex) {
    std::vector<std::string> problems;
    for (const auto& tool : ex.tools.tools())
        if (tool.name == ex.expected->name)
            validate(ex.expected->arguments, tool.schema["function"]["parameters"], "arguments", problems);
    return problems;
}

std::filesystem::path bundled() {
    return cc::test::source_dir() / "resources" / "eval" / "tool_calls.jsonl";
}

TEST(BundledEvalSet, BundledSetHasTheAdvertisedShape) {
    const auto ds = cc::load_eval_dataset(bundled());
    EXPECT_EQ(ds.n_tool_call(), 100u);
    EXPECT_EQ(ds.n_no_call(), 20u);
    std::map<std::string, size_t> per_set;
    std::set<std::string> tools_used, queries;
    for (const auto& ex : ds.examples) {
        ++per_set[ex.tools_label];
        if (ex.expected) tools_used.insert(ex.expected->name);
        EXPECT_TRUE(queries.insert(ex.query).second) << ex.source << ": the same query twice";
    }
    for (int n : {5, 10, 20, 50}) EXPECT_GE(per_set["../toolsets/tools_" + std::to_string(n) + ".json"], 25u) << n;
    EXPECT_GE(tools_used.size(), 40u);  // most of the 50 tools are exercised
}

TEST(BundledEvalSet, BundledExpectedCallsAreValidForTheirSchemas) {
    const auto ds = cc::load_eval_dataset(bundled());
    size_t n_checked = 0;
    for (const auto& ex : ds.examples) {
        if (!ex.expected) continue;
        const auto problems = problems_of(ex);
        for (const auto& p : problems) ADD_FAILURE() << ex.source << " (" << ex.id << "): " << p;
        ++n_checked;
    }
    EXPECT_EQ(n_checked, 100u);
}

std::filesystem::path families() {
    return cc::test::source_dir() / "resources" / "eval" / "tool_families.jsonl";
}

// Every string in `v`, at any depth.
void strings_of(const ordered_json& v, std::vector<std::string>& out) {
    if (v.is_string()) out.push_back(v.get<std::string>());
    if (v.is_object() || v.is_array())
        for (const auto& x : v) strings_of(x, out);
}

TEST(FamilyEvalSet, FamilySetHasTheAdvertisedShape) {
    // tools/train_toolcaller/make_family_eval.py: 42 tool sets of 5, 10 and 20 tools (14 each),
    // three queries per set, a no-call query in every other set
    const auto ds = cc::load_eval_dataset(families());
    EXPECT_EQ(ds.n_tool_call(), 105u);
    EXPECT_EQ(ds.n_no_call(), 21u);
    std::map<size_t, size_t> per_size;
    std::set<std::string> queries;
    for (const auto& ex : ds.examples) {
        ++per_size[ex.tools.size()];
        EXPECT_TRUE(queries.insert(ex.query).second) << ex.source << ": the same query twice";
    }
    EXPECT_EQ(per_size, (std::map<size_t, size_t>{{5, 42}, {10, 42}, {20, 42}}));
}

TEST(FamilyEvalSet, FamilyExpectedCallsAreValidForTheirSchemas) {
    const auto ds = cc::load_eval_dataset(families());
    size_t n_checked = 0;
    for (const auto& ex : ds.examples) {
        if (!ex.expected) continue;
        for (const auto& p : problems_of(ex)) ADD_FAILURE() << ex.source << " (" << ex.id << "): " << p;
        ++n_checked;
    }
    EXPECT_EQ(n_checked, 105u);
}

TEST(FamilyEvalSet, FamilyExpectedStringsAreCopiedFromTheQuery) {
    // the set measures reading: every string argument (ids, codes, e-mails, names, enum values)
    // appears in the query verbatim
    const auto ds = cc::load_eval_dataset(families());
    for (const auto& ex : ds.examples) {
        if (!ex.expected) continue;
        std::vector<std::string> values;
        strings_of(ex.expected->arguments, values);
        for (const auto& v : values)
            EXPECT_NE(ex.query.find(v), std::string::npos) << ex.source << ": \"" << v << "\" is not in the query";
    }
}

TEST(BundledEvalSet, SchemaCheckCatchesBadArguments) {
    // The validator above must be able to fail: a wrong call against the bundled 5-tool set.
    const std::string base =
        R"({"tools_file": "resources/toolsets/tools_5.json", "query": "q", "expected": {"name": "search_flights", "arguments": )";
    const std::vector<std::pair<std::string, std::string>> cases{
        {R"({"origin": "SFO", "destination": "LHR"})", "missing required \"departure_date\""},
        {R"({"origin": "SFO", "destination": "LHR", "departure_date": "2026-01-01", "seats": 2})",
         "unknown property \"seats\""},
        {R"({"origin": "SFO", "destination": "LHR", "departure_date": "2026-01-01", "adults": "2"})",
         "not of type integer"},
        {R"({"origin": "SFO", "destination": "LHR", "departure_date": "2026-01-01", "adults": 12})",
         "above the maximum"},
        {R"({"origin": "SFO", "destination": "LHR", "departure_date": "2026-01-01", "cabin_class": "coach"})",
         "not in the enum"},
    };
    for (const auto& [args, needle] : cases) {
        const auto ds = cc::parse_eval_dataset(base + args + "}}\n", "case.jsonl", cc::test::source_dir());
        const auto problems = problems_of(ds.examples[0]);
        ASSERT_EQ(problems.size(), 1u) << args;
        EXPECT_NE(problems[0].find(needle), std::string::npos) << problems[0];
    }
}

}  // namespace
