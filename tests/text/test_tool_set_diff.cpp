// diff_tool_sets and first_differing_field: every kind of edit a researcher makes to a tool set,
// on canonical tool texts as ToolSet produces them.
#include "core/text/tool_set_diff.h"
#include "tests/test_support.h"

namespace {

using J = nlohmann::ordered_json;

J weather() {
    return J::parse(R"({"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
        "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}})");
}
J email() {
    return J::parse(R"({"type": "function", "function": {"name": "send_email", "description": "Send an email.",
        "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
        "required": ["to", "body"]}}})");
}
J search() {
    return J::parse(R"({"type": "function", "function": {"name": "search", "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"q": {"anyOf": [{"type": "string"}, {"type": "array",
        "items": {"type": "string"}}]}}, "required": ["q"]}}})");
}

std::vector<std::string> texts(const std::vector<J>& tools) {
    J arr = J::array();
    for (const auto& t : tools) arr.push_back(t);
    return cc::canonical_texts(cc::ToolSet::from_json(arr, "test"));
}

const std::vector<std::string>& base() {
    static const auto b = texts({weather(), email(), search()});
    return b;
}

TEST(ToolSetDiff, IdenticalSetInAnotherOrderIsNoDifference) {
    const auto d = cc::diff_tool_sets(base(), texts({search(), weather(), email()}));
    EXPECT_TRUE(d.empty());
    EXPECT_EQ(d.n_unchanged, 3u);
    EXPECT_EQ(cc::tool_set_diff_text(d), "same tools");
}

TEST(ToolSetDiff, AddedTool) {
    J extra = weather();
    extra["function"]["name"] = "get_time";
    extra["function"]["description"] = "Time in a city.";
    const auto d = cc::diff_tool_sets(base(), texts({weather(), email(), search(), extra}));
    EXPECT_EQ(d.added, std::vector<std::string>{"get_time"});
    EXPECT_TRUE(d.removed.empty());
    EXPECT_TRUE(d.changed.empty());
    EXPECT_EQ(d.n_unchanged, 3u);
    EXPECT_EQ(cc::tool_set_diff_text(d), "+get_time");
}

TEST(ToolSetDiff, RemovedTool) {
    const auto d = cc::diff_tool_sets(base(), texts({weather(), search()}));
    EXPECT_EQ(d.removed, std::vector<std::string>{"send_email"});
    EXPECT_TRUE(d.added.empty());
    EXPECT_TRUE(d.changed.empty());
    EXPECT_EQ(d.n_differences(), 1u);
}

TEST(ToolSetDiff, ChangedDescription) {
    J w = weather();
    w["function"]["description"] = "Current weather for a city.";
    const auto d = cc::diff_tool_sets(base(), texts({w, email(), search()}));
    ASSERT_EQ(d.changed.size(), 1u);
    EXPECT_EQ(d.changed[0].name, "get_weather");
    EXPECT_EQ(d.changed[0].renamed_to, "");
    EXPECT_EQ(d.changed[0].field, "description");
    EXPECT_EQ(d.changed[0].change, "changed");
    EXPECT_EQ(cc::tool_set_diff_text(d), "~get_weather (description)");
}

TEST(ToolSetDiff, ChangedNestedParameterIsNamedByItsPath) {
    J w = weather();
    w["function"]["parameters"]["properties"]["unit"]["enum"] = {"c", "f", "k"};
    auto d = cc::diff_tool_sets(base(), texts({w, email(), search()}));
    ASSERT_EQ(d.changed.size(), 1u);
    EXPECT_EQ(d.changed[0].field, "parameters.properties.unit.enum");
    EXPECT_EQ(d.changed[0].change, "changed");

    // a new property, a removed one, and a schema inside an array (anyOf)
    J e = email();
    e["function"]["parameters"]["properties"]["cc"] = {{"type", "string"}};
    J s = search();
    s["function"]["parameters"]["properties"]["q"]["anyOf"][1]["items"]["type"] = "integer";
    J w2 = weather();
    w2["function"]["parameters"]["properties"].erase("unit");
    d = cc::diff_tool_sets(base(), texts({w2, e, s}));
    ASSERT_EQ(d.changed.size(), 3u);
    for (const auto& c : d.changed) {
        if (c.name == "send_email") {
            EXPECT_EQ(c.field, "parameters.properties.cc");
            EXPECT_EQ(c.change, "added");
        } else if (c.name == "search") {
            EXPECT_EQ(c.field, "parameters.properties.q.anyOf[1].items.type");
            EXPECT_EQ(c.change, "changed");
        } else {
            EXPECT_EQ(c.name, "get_weather");
            EXPECT_EQ(c.field, "parameters.properties.unit");
            EXPECT_EQ(c.change, "removed");
        }
    }
}

TEST(ToolSetDiff, RenamedToolIsOneChangeOfItsName) {
    J e = email();
    e["function"]["name"] = "send_mail";
    const auto d = cc::diff_tool_sets(base(), texts({weather(), e, search()}));
    EXPECT_TRUE(d.added.empty());
    EXPECT_TRUE(d.removed.empty());
    ASSERT_EQ(d.changed.size(), 1u);
    EXPECT_EQ(d.changed[0].name, "send_email");
    EXPECT_EQ(d.changed[0].renamed_to, "send_mail");
    EXPECT_EQ(d.changed[0].field, "name");
    EXPECT_EQ(cc::tool_set_diff_text(d), "send_email -> send_mail");

    // renamed and edited: no longer the same tool
    e["function"]["description"] = "Mail someone.";
    const auto d2 = cc::diff_tool_sets(base(), texts({weather(), e, search()}));
    EXPECT_EQ(d2.added, std::vector<std::string>{"send_mail"});
    EXPECT_EQ(d2.removed, std::vector<std::string>{"send_email"});
    EXPECT_TRUE(d2.changed.empty());
}

TEST(ToolSetDiff, KeyOrderAloneIsAChange) {
    // The canonical text keeps the key order given (the template's tojson does), so the prompt differs.
    J w = weather();
    J props = J::object();
    props["unit"] = w["function"]["parameters"]["properties"]["unit"];
    props["city"] = w["function"]["parameters"]["properties"]["city"];
    w["function"]["parameters"]["properties"] = props;
    const auto d = cc::diff_tool_sets(base(), texts({w, email(), search()}));
    ASSERT_EQ(d.changed.size(), 1u);
    EXPECT_EQ(d.changed[0].field, "parameters.properties");
    EXPECT_EQ(d.changed[0].change, "reordered");
}

TEST(ToolSetDiff, FirstDifferingFieldOnValues) {
    EXPECT_EQ(cc::first_differing_field(J::parse("{\"a\": 1}"), J::parse("{\"a\": 1}"), ""), std::nullopt);
    // 1 and 1.0 render differently, so they are different prompts
    std::string change;
    EXPECT_EQ(cc::first_differing_field(J::parse("{\"a\": 1}"), J::parse("{\"a\": 1.0}"), "", &change), "a");
    EXPECT_EQ(change, "changed");
    EXPECT_EQ(cc::first_differing_field(J::parse("[1, 2]"), J::parse("[1, 2, 3]"), "x"), "x");
    EXPECT_EQ(cc::first_differing_field(J::parse("{\"a\": {\"b\": [1]}}"), J::parse("{\"a\": {\"b\": \"1\"}}"), ""), "a.b");
}

TEST(ToolSetDiff, StoredTextThatIsNotAToolNamesTheSourceAndIndex) {
    const std::vector<std::string> bad = {"[1, 2]"};
    try {
        cc::diff_tool_sets(bad, base(), "group abc");
        FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("group abc: tool 0"), std::string::npos) << e.what();
    }
}

}  // namespace
