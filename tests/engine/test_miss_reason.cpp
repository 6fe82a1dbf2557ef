// Why a tool set missed: for edits of every kind to a stored set, the nearest stored
// group, what differs, and the reusable prefix tokens checked against the actual token ids; in
// compile and query results, after a restart (from the group file) and for files without tool texts.
#include "core/engine/engine.h"
#include "core/engine/miss_reason.h"
#include "core/engine/result_json.h"
#include "core/text/tool_set_diff.h"
#include "tests/test_support.h"

#include <algorithm>

namespace {

namespace fs = std::filesystem;
using J = nlohmann::ordered_json;

J tools_20() {
    static const J arr =
        J::parse(cc::test::read_file(cc::test::source_dir() / "resources" / "toolsets" / "tools_20.json"));
    return arr;
}

cc::ToolSet set_of(const J& arr) { return cc::ToolSet::from_json(arr, "test"); }

J pick(const std::vector<int>& indices) {
    J out = J::array();
    for (int i : indices) out.push_back(tools_20()[static_cast<size_t>(i)]);
    return out;
}

J& function_named(J& arr, const std::string& name) {
    for (auto& t : arr)
        if (t["function"]["name"] == name) return t["function"];
    throw std::runtime_error("no tool " + name);
}

std::unique_ptr<cc::Engine> make_engine(const fs::path& cache_dir) {
    cc::EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    o.backend = "cpu";  // the tiers named below are the CPU's ("memory", "disk")
    o.cache.dir = cache_dir;
    auto e = std::make_unique<cc::Engine>(o);
    e->load_model();
    return e;
}

std::vector<cc::token_id> prefix_ids(cc::Engine& e, const cc::ToolSet& tools, const std::string& system) {
    return cc::tokenize_pieces(e.tokenizer(), e.chat_format().prefix_pieces(tools, system));
}

size_t common_prefix(const std::vector<cc::token_id>& a, const std::vector<cc::token_id>& b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

const std::string kSystem = "You are a helpful assistant with tools.";
const std::vector<int> kBase = {0, 3, 5, 8, 11, 14};

// One engine and one stored group (kBase under kSystem) for the whole suite.
class MissReason : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        tmp_ = new cc::test::TempDir;
        engine_ = make_engine(tmp_->path() / "cache").release();
        base_ = new cc::CompileResult(engine_->set_tools(set_of(pick(kBase)), kSystem));
        base_ids_ = new std::vector<cc::token_id>(prefix_ids(*engine_, set_of(pick(kBase)), kSystem));
        engine_->wait_for_persist();
    }
    static void TearDownTestSuite() {
        delete base_ids_;
        delete base_;
        delete engine_;
        delete tmp_;
    }
    static cc::test::TempDir* tmp_;
    static cc::Engine* engine_;
    static cc::CompileResult* base_;
    static std::vector<cc::token_id>* base_ids_;

    // The stored base group's token index where its k-th tool (canonical order) starts.
    static int boundary_of(const std::string& tool_name) {
        cc::GroupMeta probe;
        probe.model_fingerprint = engine_->model_info().fingerprint;
        probe.chat_format = engine_->model_info().chat_format;
        probe.backend_numerics = engine_->model_info().numerics;
        for (const auto& s : engine_->cache().comparable(probe)) {
            if (s.meta.group_key != base_->group_key) continue;
            const auto& names = s.meta.tool_names;
            const auto it = std::find(names.begin(), names.end(), tool_name);
            EXPECT_NE(it, names.end()) << tool_name;
            if (it == names.end() || s.meta.tool_token_boundaries.empty()) return -1;
            return s.meta.tool_token_boundaries[static_cast<size_t>(it - names.begin())];
        }
        ADD_FAILURE() << "the base group is not stored";
        return -1;
    }

    // explain_miss for an edited set: the base group is the nearest, and its reusable tokens are
    // the actual common token prefix of the two prefixes.
    static cc::NearestGroup nearest_for(const J& tools_json, const std::string& system) {
        const auto tools = set_of(tools_json);
        const auto reason = engine_->explain_miss(tools, system);
        EXPECT_TRUE(reason.has_value());
        if (!reason || reason->nearest.empty()) {
            ADD_FAILURE() << "no nearest group";
            return {};
        }
        const auto& n = reason->nearest.front();
        EXPECT_EQ(n.group_key, base_->group_key);
        EXPECT_EQ(n.tier, cc::Tier::memory);
        EXPECT_TRUE(n.tools_compared);
        EXPECT_EQ(n.prefix_tokens, base_ids_->size());
        const auto ids = prefix_ids(*engine_, tools, system);
        EXPECT_EQ(n.reusable_tokens, common_prefix(*base_ids_, ids));
        // ... and that is where the ids part: the token after it differs (or one prefix ends)
        if (n.reusable_tokens < std::min(ids.size(), base_ids_->size())) {
            EXPECT_NE(ids[n.reusable_tokens], (*base_ids_)[n.reusable_tokens]);
        }
        return n;
    }
};
cc::test::TempDir* MissReason::tmp_ = nullptr;
cc::Engine* MissReason::engine_ = nullptr;
cc::CompileResult* MissReason::base_ = nullptr;
std::vector<cc::token_id>* MissReason::base_ids_ = nullptr;

TEST_F(MissReason, BaseWasAMissWithNothingStored) {
    ASSERT_EQ(base_->tier, cc::Tier::miss);
    ASSERT_TRUE(base_->miss_reason.has_value());
    EXPECT_EQ(base_->miss_reason->n_stored, 0u);
    EXPECT_TRUE(base_->miss_reason->nearest.empty());
    EXPECT_EQ(cc::miss_reason_text(*base_->miss_reason, base_->prefix_tokens),
              "no stored group for this model, chat format and numerics");
}

TEST_F(MissReason, IdenticalSetInAnotherOrderIsAHitWithoutMissReason) {
    J reordered = pick(kBase);
    std::reverse(reordered.begin(), reordered.end());
    EXPECT_FALSE(engine_->explain_miss(set_of(reordered), kSystem).has_value());
    const auto c = engine_->set_tools(set_of(reordered), kSystem);
    EXPECT_TRUE(c.cache_hit);
    EXPECT_EQ(c.group_key, base_->group_key);
    EXPECT_FALSE(c.miss_reason.has_value());
    EXPECT_TRUE(cc::to_json(c)["miss_reason"].is_null());
}

TEST_F(MissReason, AddedTool) {
    const J tools = pick({0, 3, 5, 8, 11, 14, 17});
    const auto n = nearest_for(tools, kSystem);
    const std::string added = tools[6]["function"]["name"];
    EXPECT_EQ(n.tools.added, std::vector<std::string>{added});
    EXPECT_TRUE(n.tools.removed.empty());
    EXPECT_TRUE(n.tools.changed.empty());
    EXPECT_FALSE(n.system_prompt_changed);
    EXPECT_EQ(n.n_differences(), 1u);
}

TEST_F(MissReason, RemovedToolReusesTheToolsBeforeIt) {
    J tools = pick(kBase);
    const std::string removed = tools[3]["function"]["name"];
    tools.erase(3);
    const auto n = nearest_for(tools, kSystem);
    EXPECT_EQ(n.tools.removed, std::vector<std::string>{removed});
    EXPECT_TRUE(n.tools.added.empty());
    EXPECT_TRUE(n.tools.changed.empty());
    // Canonical order: every tool before the removed one is the same text at the same position.
    const int start = boundary_of(removed);
    ASSERT_GT(start, 0);
    EXPECT_GE(n.reusable_tokens, static_cast<size_t>(start));
    EXPECT_LT(n.reusable_tokens, base_ids_->size());
}

TEST_F(MissReason, ChangedDescription) {
    J tools = pick(kBase);
    const std::string name = tools[2]["function"]["name"];
    function_named(tools, name)["description"] = "A rewritten description.";
    const auto n = nearest_for(tools, kSystem);
    ASSERT_EQ(n.tools.changed.size(), 1u);
    EXPECT_EQ(n.tools.changed[0].name, name);
    EXPECT_EQ(n.tools.changed[0].field, "description");
    EXPECT_TRUE(n.tools.added.empty() && n.tools.removed.empty());
    EXPECT_GE(n.reusable_tokens, static_cast<size_t>(boundary_of(name)));
}

TEST_F(MissReason, ChangedNestedParameter) {
    J tools = pick(kBase);
    const std::string name = tools[1]["function"]["name"];
    J& params = function_named(tools, name)["parameters"];
    ASSERT_TRUE(params["properties"].is_object() && !params["properties"].empty());
    const std::string prop = params["properties"].begin().key();
    params["properties"][prop]["description"] = "Changed in a test.";
    const auto n = nearest_for(tools, kSystem);
    ASSERT_EQ(n.tools.changed.size(), 1u);
    EXPECT_EQ(n.tools.changed[0].name, name);
    const bool had = pick(kBase)[1]["function"]["parameters"]["properties"][prop].contains("description");
    EXPECT_EQ(n.tools.changed[0].field, "parameters.properties." + prop + ".description");
    EXPECT_EQ(n.tools.changed[0].change, had ? "changed" : "added");
    EXPECT_GE(n.reusable_tokens, static_cast<size_t>(boundary_of(name)));
}

TEST_F(MissReason, RenamedTool) {
    J tools = pick(kBase);
    const std::string name = tools[4]["function"]["name"];
    function_named(tools, name)["name"] = name + "_v2";
    const auto n = nearest_for(tools, kSystem);
    ASSERT_EQ(n.tools.changed.size(), 1u);
    EXPECT_EQ(n.tools.changed[0].name, name);
    EXPECT_EQ(n.tools.changed[0].renamed_to, name + "_v2");
    EXPECT_EQ(n.tools.changed[0].field, "name");
    EXPECT_TRUE(n.tools.added.empty() && n.tools.removed.empty());
}

TEST_F(MissReason, ChangedSystemPromptReusesOnlyTheTemplateOpening) {
    const auto n = nearest_for(pick(kBase), kSystem + " Answer briefly.");
    EXPECT_TRUE(n.system_prompt_changed);
    EXPECT_TRUE(n.tools.empty());
    EXPECT_EQ(n.n_differences(), 1u);
    // the system prompt comes first: nothing of the first tool is reusable
    const std::string first_tool = set_of(pick(kBase)).names().front();
    EXPECT_LT(n.reusable_tokens, static_cast<size_t>(boundary_of(first_tool)));
    const auto text = cc::miss_reason_text(*engine_->explain_miss(set_of(pick(kBase)), kSystem + " Answer briefly."),
                                           prefix_ids(*engine_, set_of(pick(kBase)), kSystem + " Answer briefly.").size());
    EXPECT_NE(text.find("system prompt changed"), std::string::npos) << text;
}

TEST_F(MissReason, CompileAndQueryResultsCarryIt) {
    J tools = pick(kBase);
    const std::string removed = tools[5]["function"]["name"];
    tools.erase(5);
    const auto expected = nearest_for(tools, kSystem);

    // a query after select_tools does the link: the miss and its reason are in its result
    engine_->select_tools(set_of(tools), kSystem);
    cc::QueryOptions q;
    q.max_new_tokens = 2;
    q.ignore_eos = true;
    const auto r = engine_->query("What's the weather in Paris?", q);
    EXPECT_EQ(r.tier, cc::Tier::miss);
    ASSERT_TRUE(r.miss_reason.has_value());
    ASSERT_FALSE(r.miss_reason->nearest.empty());
    EXPECT_EQ(r.miss_reason->nearest[0].group_key, base_->group_key);
    EXPECT_EQ(r.miss_reason->nearest[0].tools.removed, std::vector<std::string>{removed});
    EXPECT_EQ(r.miss_reason->nearest[0].reusable_tokens, expected.reusable_tokens);
    ASSERT_TRUE(engine_->current_tools()->miss_reason.has_value());
    const J j = cc::to_json(r);
    EXPECT_EQ(j["miss_reason"]["nearest"][0]["tools_removed"], J::array({removed}));
    EXPECT_EQ(j["miss_reason"]["nearest"][0]["reusable_tokens"], expected.reusable_tokens);
    EXPECT_TRUE(j["miss_reason"]["text"].get<std::string>().starts_with("nearest " + base_->group_key.substr(0, 8)));
    // compile's own longest-prefix reuse took those tokens
    EXPECT_EQ(r.reused_tokens, expected.reusable_tokens);

    // the next query links the group it compiled: a hit, no reason
    const auto again = engine_->query("What's the weather in Paris?", q);
    EXPECT_TRUE(again.cache_hit);
    EXPECT_FALSE(again.miss_reason.has_value());
    EXPECT_TRUE(cc::to_json(again)["miss_reason"].is_null());
    // full mode does no lookup
    q.mode = cc::QueryMode::full;
    EXPECT_FALSE(engine_->query("What's the weather in Paris?", q).miss_reason.has_value());
}

TEST_F(MissReason, ExplainedFromTheGroupFileAfterARestart) {
    engine_->wait_for_persist();
    auto fresh = make_engine(tmp_->path() / "cache");
    J tools = pick(kBase);
    const std::string name = tools[0]["function"]["name"];
    function_named(tools, name)["description"] = "Edited after a restart.";
    const auto reason = fresh->explain_miss(set_of(tools), kSystem);
    ASSERT_TRUE(reason.has_value());
    ASSERT_FALSE(reason->nearest.empty());
    const auto& n = reason->nearest[0];
    EXPECT_EQ(n.group_key, base_->group_key);
    EXPECT_EQ(n.tier, cc::Tier::disk);
    EXPECT_TRUE(n.tools_compared);  // the file recorded the tool texts
    ASSERT_EQ(n.tools.changed.size(), 1u);
    EXPECT_EQ(n.tools.changed[0].field, "description");
    EXPECT_EQ(n.reusable_tokens, common_prefix(*base_ids_, prefix_ids(*fresh, set_of(tools), kSystem)));
}

// Pure ranking over stored groups, including one without tool texts (a file from before them).
TEST(MissReasonRanking, FewestDifferencesFirstThenMostReusableTokens) {
    const auto base = set_of(pick({0, 1, 2}));
    auto group = [](const std::string& key, const cc::ToolSet& t, std::vector<cc::token_id> ids, bool texts) {
        cc::GroupMeta g;
        g.group_key = key;
        g.tool_names = t.names();
        if (texts) g.tool_texts = cc::canonical_texts(t);
        g.system_prompt_sha256 = "s";
        g.prefix_ids = std::move(ids);
        return cc::GroupStore::StoredGroup{std::move(g), cc::Tier::disk, 0};
    };
    const std::vector<cc::GroupStore::StoredGroup> stored = {
        group("far", set_of(pick({5, 6})), {1, 2, 3, 9}, true),            // 2 removed + 3 added
        group("near_short", set_of(pick({0, 1})), {1, 2}, true),           // 1 added, 2 tokens
        group("near_long", set_of(pick({0, 2})), {1, 2, 3}, true),         // 1 added, 3 tokens
        group("self", base, {1, 2, 3, 4}, true),                           // the key looked up: left out
        group("old_file", set_of(pick({0, 1, 2, 7})), {1, 2, 3, 4, 5}, false),  // names only
    };
    cc::MissQuery q;
    q.group_key = "self";
    q.tool_texts = cc::canonical_texts(base);
    q.tool_names = base.names();
    q.system_prompt_sha256 = "s";
    const std::vector<cc::token_id> ids = {1, 2, 3, 4, 7};
    q.prefix_ids = ids;
    const auto r = cc::explain_miss(stored, q, 10);
    EXPECT_EQ(r.n_stored, 4u);
    ASSERT_EQ(r.nearest.size(), 4u);
    EXPECT_EQ(r.nearest[0].group_key, "old_file");  // 1 removed (by name), 4 tokens
    EXPECT_FALSE(r.nearest[0].tools_compared);
    EXPECT_EQ(r.nearest[0].tools.removed, std::vector<std::string>{pick({7})[0]["function"]["name"].get<std::string>()});
    EXPECT_EQ(r.nearest[0].reusable_tokens, 4u);
    EXPECT_EQ(r.nearest[1].group_key, "near_long");
    EXPECT_EQ(r.nearest[1].reusable_tokens, 3u);
    EXPECT_EQ(r.nearest[2].group_key, "near_short");
    EXPECT_EQ(r.nearest[3].group_key, "far");
    EXPECT_EQ(cc::explain_miss(stored, q, 2).nearest.size(), 2u);
    const auto text = cc::miss_reason_text(r, ids.size());
    EXPECT_NE(text.find("tool texts not recorded"), std::string::npos) << text;
    EXPECT_NE(text.find("4 of 5 prefix tokens reusable"), std::string::npos) << text;
}

}  // namespace
