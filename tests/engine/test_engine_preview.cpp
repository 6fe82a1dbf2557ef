// What the app shows before and during a compile: Engine::preview_tools (keys, prefix length and
// cache tier without computing anything) and compile progress with cancellation.
#include "core/engine/engine.h"
#include "core/model/builtin_model.h"
#include "tests/test_support.h"

#include <cstring>

namespace {

cc::ToolSet sample(const std::string& name) {
    return cc::ToolSet::from_file(cc::test::source_dir() / "resources" / "toolsets" / (name + ".json"));
}

std::unique_ptr<cc::Engine> make_engine(const std::filesystem::path& cache_dir) {
    cc::EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    o.cache_dir = cache_dir;
    o.cache.dir = cache_dir;
    auto engine = std::make_unique<cc::Engine>(o);
    engine->load_model();
    return engine;
}

TEST(EnginePreview, AgreesWithSetToolsAndFollowsTheTiers) {
    cc::test::TempDir dir;
    auto engine = make_engine(dir.path());
    const auto tools = sample("tools_10");
    const std::string system = "You are a helpful assistant.";

    const auto before = engine->preview_tools(tools, system);
    EXPECT_EQ(before.tier, cc::Tier::miss);
    const auto compiled = engine->set_tools(tools, system);
    engine->wait_for_persist();
    EXPECT_EQ(before.group_key, compiled.group_key);
    EXPECT_EQ(before.tools_hash, compiled.tools_hash);
    EXPECT_EQ(before.prefix_tokens, compiled.prefix_tokens);
    EXPECT_EQ(before.n_tools, compiled.n_tools);
    EXPECT_EQ(before.kv_bytes, compiled.kv_bytes);

    EXPECT_EQ(engine->preview_tools(tools, system).tier, cc::Tier::memory);
    ASSERT_TRUE(engine->cache().drop_from_memory(compiled.group_key));
    EXPECT_EQ(engine->preview_tools(tools, system).tier, cc::Tier::disk);
    ASSERT_TRUE(engine->cache().remove(compiled.group_key));
    EXPECT_EQ(engine->preview_tools(tools, system).tier, cc::Tier::miss);

    // Another system prompt is another group.
    EXPECT_NE(engine->preview_tools(tools, system + " ").group_key, compiled.group_key);
}

TEST(EnginePreview, CompileReportsProgressInChunksAndTheResultIsExact) {
    cc::test::TempDir dir;
    auto engine = make_engine(dir.path());
    std::vector<cc::EngineProgress> seen;
    engine->set_progress_handler([&](const cc::EngineProgress& p) { seen.push_back(p); });
    const auto tools = sample("tools_20");
    const auto compiled = engine->set_tools(tools, "");
    ASSERT_GT(compiled.prefix_tokens, 1024u) << "the test needs a prefix of several chunks";
    ASSERT_GE(seen.size(), 3u);
    for (size_t i = 0; i < seen.size(); ++i) {
        EXPECT_EQ(seen[i].stage, "compile");
        EXPECT_EQ(seen[i].total, compiled.prefix_tokens);
        if (i) {
            EXPECT_GT(seen[i].done, seen[i - 1].done);
        }
    }
    EXPECT_EQ(seen.back().done, compiled.prefix_tokens);

    // Chunked compile == one full prefill, bit for bit.
    cc::QueryOptions q;
    q.max_new_tokens = 4;
    q.mode = cc::QueryMode::compare;
    const auto result = engine->query("What's the weather in Lisbon?", q);
    ASSERT_TRUE(result.identical.has_value());
    EXPECT_TRUE(*result.identical);
}

TEST(EnginePreview, CancelFromTheProgressHandlerStopsTheCompileAndKeepsThePreviousSet) {
    cc::test::TempDir dir;
    auto engine = make_engine(dir.path());
    const auto first = engine->set_tools(sample("tools_5"), "");
    int calls = 0;
    engine->set_progress_handler([&](const cc::EngineProgress&) {
        ++calls;
        engine->cancel();
    });
    EXPECT_THROW(engine->set_tools(sample("tools_50"), ""), cc::Cancelled);
    EXPECT_EQ(calls, 1) << "the compile went on after the cancel";
    ASSERT_TRUE(engine->current_tools().has_value());
    EXPECT_EQ(engine->current_tools()->group_key, first.group_key);
    // Nothing half-computed was stored under the cancelled set's key.
    engine->set_progress_handler({});
    EXPECT_EQ(engine->preview_tools(sample("tools_50"), "").tier, cc::Tier::miss);
}

}  // namespace

namespace {

TEST(EngineLoad, CancelStopsBuiltinWeightGeneration) {
    const auto recipe = cc::find_builtin("qwen3-test");
    ASSERT_TRUE(recipe);
    std::atomic<bool> cancel{true};
    EXPECT_THROW(cc::generate_builtin_weights(*recipe, 1, &cancel), cc::Cancelled);
    cancel = false;
    EXPECT_NO_THROW(cc::generate_builtin_weights(*recipe, 1, &cancel));

    cc::EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    cc::Engine engine(o);
    engine.cancel();
    EXPECT_THROW(engine.load_model(), cc::Cancelled);
    EXPECT_FALSE(engine.loaded());
}

}  // namespace
