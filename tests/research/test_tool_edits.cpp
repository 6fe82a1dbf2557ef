// The tool-edit and render-order study's pieces (core/research/tool_edits.h): the orders, rendering
// in a given order, the edits, BFCL pooling, and the study's reused fractions on a real tool set.
#include "core/base/embedded_resources.h"
#include "core/research/paper_bench.h"
#include "core/research/tool_edits.h"
#include "tests/test_support.h"

#include <algorithm>
#include <fstream>
#include <set>

namespace {

const cc::Tokenizer& qwen3_tokenizer() {
    static const cc::Tokenizer tok =
        cc::Tokenizer::from_json(cc::embedded::qwen3_tokenizer_json(), "qwen3/tokenizer.json");  // stored as .tar.xz
    return tok;
}

const cc::ChatFormat& qwen3() {
    static const auto format = cc::make_chat_format("qwen3");
    return *format;
}

std::vector<cc::Tool> bundled(int n) { return cc::bundled_tool_set(n).tools.tools(); }

cc::Tool tool_named(const std::string& name, const std::string& description = "d") {
    return cc::make_tool(nlohmann::ordered_json{{"name", name}, {"description", description},
                                                {"parameters", {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}}}},
                         0, "test");
}

std::vector<std::string> names(const std::vector<cc::Tool>& tools) {
    std::vector<std::string> out;
    for (const auto& t : tools) out.push_back(t.name);
    return out;
}

TEST(ToolEdits, CanonicalOrderIsNameOrderForTheBundledSets) {
    for (const int n : {20, 50, 100}) {
        const auto tools = bundled(n);
        auto sorted = names(tools);
        std::sort(sorted.begin(), sorted.end());
        EXPECT_EQ(names(tools), sorted) << n << " tools";
        EXPECT_EQ(names(cc::order_tools(tools, cc::RenderOrder::canonical)), sorted) << n << " tools";
    }
}

TEST(ToolEdits, CanonicalRenderIsWhatTheEngineRenders) {
    const auto set = cc::bundled_tool_set(20).tools;
    const auto rendered = cc::render_prompt(qwen3(), qwen3_tokenizer(), set, "sys", "q");
    EXPECT_EQ(cc::prefix_ids_in_order(qwen3(), qwen3_tokenizer(), set.tools(), "sys"), rendered.prefix_ids);
}

TEST(ToolEdits, ReorderedRenderMovesTheToolsOnly) {
    const auto tools = bundled(20);
    std::vector<cc::Tool> reversed(tools.rbegin(), tools.rend());
    const auto canonical = cc::prefix_ids_in_order(qwen3(), qwen3_tokenizer(), tools, "sys");
    const auto other = cc::prefix_ids_in_order(qwen3(), qwen3_tokenizer(), reversed, "sys");
    EXPECT_NE(canonical, other);
    // The same text before the tools block, and the same template after it.
    const size_t common = cc::common_prefix_tokens(canonical, other);
    EXPECT_GT(common, 32u);
    EXPECT_LT(common, canonical.size());
    const size_t tail = 20;
    ASSERT_GT(other.size(), tail);
    EXPECT_TRUE(std::equal(canonical.end() - tail, canonical.end(), other.end() - tail));
}

TEST(ToolEdits, ContentOrdersDoNotDependOnTheOrderGiven) {
    auto tools = bundled(50);
    auto shuffled = tools;
    std::reverse(shuffled.begin(), shuffled.end());
    std::rotate(shuffled.begin(), shuffled.begin() + 17, shuffled.end());
    for (const auto order : cc::all_render_orders()) {
        if (order == cc::RenderOrder::history) {
            EXPECT_EQ(names(cc::order_tools(shuffled, order)), names(shuffled));
            continue;
        }
        EXPECT_EQ(names(cc::order_tools(tools, order)), names(cc::order_tools(shuffled, order)))
            << cc::render_order_name(order);
    }
}

TEST(ToolEdits, FamilyOrderPutsLargerFamiliesFirst) {
    EXPECT_EQ(cc::tool_family("triangle_properties.get"), "triangle");
    EXPECT_EQ(cc::tool_family("math.factorial"), "math");
    EXPECT_EQ(cc::tool_family("lookup"), "lookup");
    const std::vector<cc::Tool> tools{tool_named("c"), tool_named("b_z"), tool_named("a_y"), tool_named("b.x")};
    EXPECT_EQ(names(cc::order_tools(tools, cc::RenderOrder::family)),
              (std::vector<std::string>{"b.x", "b_z", "a_y", "c"}));
    const std::vector<cc::Tool> lengths{tool_named("a", "short"), tool_named("b", "a much longer description")};
    EXPECT_EQ(names(cc::order_tools(lengths, cc::RenderOrder::longest_first)), (std::vector<std::string>{"b", "a"}));
}

TEST(ToolEdits, EditsChangeOneThing) {
    const auto tools = bundled(20);
    const auto removed = cc::without_tool(tools, 3);
    ASSERT_EQ(removed.size(), 19u);
    EXPECT_EQ(removed[3].name, tools[4].name);
    EXPECT_THROW(cc::without_tool(tools, 20), std::out_of_range);

    const auto changed = cc::with_changed_description(tools[0], "Now cached.");
    EXPECT_EQ(changed.name, tools[0].name);
    EXPECT_EQ(changed.schema["function"]["description"], tools[0].schema["function"]["description"].get<std::string>() + " Now cached.");
    EXPECT_EQ(changed.schema["function"]["parameters"], tools[0].schema["function"]["parameters"]);

    const auto renamed = cc::renamed_tool(tools[0], "zz_new");
    EXPECT_EQ(renamed.name, "zz_new");
    EXPECT_EQ(renamed.schema["function"]["parameters"], tools[0].schema["function"]["parameters"]);
    try {
        cc::renamed_tool(tools[0], "bad name");
        FAIL() << "a name with a space was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("\"name\""), std::string::npos) << e.what();
    }
}

TEST(ToolEdits, RemovingALaterToolReusesMore) {
    const auto tools = bundled(20);
    const auto full = cc::prefix_ids_in_order(qwen3(), qwen3_tokenizer(), tools, "sys");
    size_t last_common = 0;
    for (const size_t k : {0u, 5u, 10u, 19u}) {
        const auto edited = cc::prefix_ids_in_order(qwen3(), qwen3_tokenizer(), cc::without_tool(tools, k), "sys");
        const size_t common = cc::common_prefix_tokens(full, edited);
        EXPECT_GT(common, last_common) << "removing tool " << k;
        EXPECT_LT(common, edited.size()) << "removing tool " << k;
        last_common = common;
    }
}

TEST(ToolEdits, StudyMeasuresEveryOrderAndEditKind) {
    cc::OrderStudyOptions options;
    options.n_edits = 20;
    options.seed = 7;
    const auto start = cc::bundled_tool_set(20).tools.tools();
    const auto cells = cc::run_order_study(qwen3(), qwen3_tokenizer(), start, "sys", options);
    ASSERT_EQ(cells.size(), cc::all_render_orders().size() * cc::all_edit_kinds().size());
    auto mean = [](const cc::OrderStudyCell& c) {
        double s = 0;
        for (double v : c.reused_percent) s += v;
        return s / double(c.reused_percent.size());
    };
    for (const auto& c : cells) {
        ASSERT_EQ(c.reused_percent.size(), 20u);
        for (double v : c.reused_percent) {
            EXPECT_GT(v, 0.0);
            EXPECT_LT(v, 100.0);  // every edit changes the prefix
        }
        // Appending to the list the user grew keeps every tool before it: more than any edit in
        // the middle of a sorted order can keep.
        if (c.order == cc::RenderOrder::history && c.kind == cc::EditKind::add) {
            for (double v : c.reused_percent) EXPECT_GT(v, 90.0);
        }
        if (c.order == cc::RenderOrder::canonical && c.kind == cc::EditKind::add) {
            EXPECT_LT(mean(c), 90.0);
        }
    }
    // Seeded: the same options give the same figures.
    const auto again = cc::run_order_study(qwen3(), qwen3_tokenizer(), start, "sys", options);
    for (size_t i = 0; i < cells.size(); ++i) EXPECT_EQ(cells[i].reused_percent, again[i].reused_percent);
}

TEST(ToolEdits, BfclFunctionsPoolIntoValidTools) {
    const auto dir = cc::test::shared_dir() / "data" / "bfcl";
    const std::vector<std::filesystem::path> files{dir / "BFCL_v4_multiple.json", dir / "BFCL_v4_live_multiple.json"};
    for (const auto& f : files) {
        if (!std::filesystem::exists(f)) GTEST_SKIP() << "BFCL data not found: " << f << " (CONTEXTCACHE_SHARED_DIR)";
    }
    const auto pooled = cc::pool_bfcl_functions(files);
    EXPECT_GT(pooled.tools.size(), 200u);
    std::set<std::string> unique;
    for (const auto& t : pooled.tools) {
        EXPECT_TRUE(unique.insert(t.name).second) << t.name;
        EXPECT_EQ(t.canonical_text.find("\"type\": \"dict\""), std::string::npos) << t.name;
    }
}

TEST(ToolEdits, BfclFileThatIsNotJsonLinesIsNamed) {
    cc::test::TempDir dir;
    const auto bad = dir.path() / "bad.json";
    std::ofstream(bad) << "{\"function\": []}\nnot json\n";
    const std::vector<std::filesystem::path> files{bad};
    try {
        cc::pool_bfcl_functions(files);
        FAIL() << "a line that is not JSON was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("bad.json:2"), std::string::npos) << e.what();
    }
}

}  // namespace
