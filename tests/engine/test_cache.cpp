// The persistent group cache through the engine: restart persistence, damaged or foreign files
// (each a real fault in a real file), longest-prefix reuse after tool-set edits, budgets, unusable directories.
// Every damaged case must still give the exact answer (compare mode: identical to a full prefill).
#include "core/engine/engine.h"
#include "core/research/tool_edits.h"
#include "core/store/group_file.h"
#include "core/store/group_index.h"
#include "core/store/group_store.h"
#include "tests/test_support.h"

#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

namespace {

namespace fs = std::filesystem;

cc::ToolSet tools_from(const std::vector<int>& indices) {
    const auto path = cc::test::source_dir() / "resources" / "toolsets" / "tools_20.json";
    auto arr = nlohmann::ordered_json::parse(cc::test::read_file(path));
    nlohmann::ordered_json subset = nlohmann::ordered_json::array();
    for (int i : indices) subset.push_back(arr[static_cast<size_t>(i)]);
    return cc::ToolSet::from_json_text(subset.dump(), "subset");
}

std::unique_ptr<cc::Engine> make_engine(const fs::path& cache_dir, size_t disk_budget = size_t(1) << 34,
                                        size_t host_budget = size_t(1) << 34) {
    cc::EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    o.cache.dir = cache_dir;
    o.cache.disk_budget_bytes = disk_budget;
    o.cache.host_budget_bytes = host_budget;
    auto e = std::make_unique<cc::Engine>(o);
    e->load_model();
    return e;
}

cc::QueryResult ask(cc::Engine& e, const std::string& q = "What's the weather in Paris?") {
    cc::QueryOptions o;
    o.mode = cc::QueryMode::compare;
    o.max_new_tokens = 5;
    o.ignore_eos = true;
    return e.query(q, o);
}

// The answer a cache-free engine gives: the reference every damaged-cache run must reproduce.
std::vector<cc::token_id> reference_tokens(const cc::ToolSet& tools, const std::string& system) {
    cc::EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    cc::Engine e(o);
    e.load_model();
    e.set_tools(tools, system);
    cc::QueryOptions q;
    q.mode = cc::QueryMode::full;
    q.max_new_tokens = 5;
    q.ignore_eos = true;
    return e.query("What's the weather in Paris?", q).tokens;
}

size_t count_files(const fs::path& dir) {
    size_t n = 0;
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(dir, ec))
        if (f.is_regular_file()) ++n;
    return n;
}

TEST(Cache, CompiledGroupIsADiskHitAfterARestart) {
    cc::test::TempDir tmp;
    const fs::path cache_dir = tmp.path() / "cache";  // created by the store: mode 0700
    struct {
        fs::path p;
        const fs::path& path() const { return p; }
    } dir{cache_dir};
    const auto tools = tools_from({0, 1, 2});
    std::string key;
    std::vector<cc::token_id> first_answer;
    {
        auto e = make_engine(dir.path());
        const auto c = e->set_tools(tools, "sys");
        EXPECT_EQ(c.tier, cc::Tier::miss);
        key = c.group_key;
        first_answer = ask(*e).tokens;
        e->wait_for_persist();
        EXPECT_TRUE(e->current_tools()->persisted) << e->current_tools()->persist_error;
        EXPECT_GT(e->current_tools()->persist_ms, 0.0);
    }
    EXPECT_TRUE(fs::exists(dir.path() / "groups" / (key + ".kv")));
    EXPECT_TRUE(fs::exists(dir.path() / "index.sqlite"));
    EXPECT_EQ(fs::status(dir.path()).permissions() & fs::perms::all, fs::perms::owner_all);  // mode 0700

    auto e = make_engine(dir.path());
    const auto c = e->set_tools(tools, "sys");
    EXPECT_TRUE(c.cache_hit);
    EXPECT_EQ(c.tier, cc::Tier::disk);
    EXPECT_EQ(c.compile_ms, 0.0);
    const auto r = ask(*e);
    EXPECT_TRUE(*r.identical);
    EXPECT_EQ(r.tokens, first_answer);
    EXPECT_EQ(r.tier, cc::Tier::memory);  // promoted on use
}

TEST(Cache, QueryLinkingFromDiskReportsLoadAndUpload) {
    cc::test::TempDir dir;
    const auto tools = tools_from({3, 4});
    {
        auto e = make_engine(dir.path());
        e->set_tools(tools, "");
    }
    auto e = make_engine(dir.path());
    const auto c = e->set_tools(tools, "");
    EXPECT_EQ(c.tier, cc::Tier::disk);
    ASSERT_TRUE(e->cache().drop_from_memory(c.group_key));  // the query must now link from disk
    const auto r = ask(*e);
    EXPECT_TRUE(r.cache_hit);
    EXPECT_EQ(r.tier, cc::Tier::disk);
    EXPECT_TRUE(*r.identical);
    EXPECT_GT(r.timings.disk_load_ms, 0.0);
    EXPECT_GT(r.timings.disk_load_gb_s, 0.0);
    EXPECT_EQ(r.timings.link_ms, r.timings.lookup_ms + r.timings.disk_load_ms + r.timings.upload_ms);
}

bool is_mapped(const fs::path& file) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line))
        if (line.find(file.string()) != std::string::npos) return true;
    return false;
}

// Zero copy: a disk hit maps the group file, verifies it in place and attends to the mapping.
// Its logits equal a full prefill's and a memory hit's (the compiled, tiled block) bit for bit;
// the mapping lives exactly as long as the group is held, also after the file is unlinked.
TEST(Cache, DiskHitIsServedZeroCopyWithTheBitsOfAFullPrefillAndAMemoryHit) {
    cc::test::TempDir dir;
    const auto tools = tools_from({5, 6, 7});
    const fs::path file = [&] {
        auto e = make_engine(dir.path());
        return dir.path() / "groups" / (e->set_tools(tools, "sys").group_key + ".kv");
    }();
    cc::QueryResult memory_hit;
    {
        auto e = make_engine(dir.path());  // a fresh compile would be a miss: build the memory hit from it
        e->cache().clear();
        EXPECT_EQ(e->set_tools(tools, "sys").tier, cc::Tier::miss);
        memory_hit = ask(*e);
        EXPECT_EQ(memory_hit.tier, cc::Tier::memory);
        e->wait_for_persist();
    }
    auto e = make_engine(dir.path());
    const auto c = e->set_tools(tools, "sys");
    EXPECT_EQ(c.tier, cc::Tier::disk);
    ASSERT_TRUE(e->cache().drop_from_memory(c.group_key));
    EXPECT_FALSE(is_mapped(file));
    const auto disk_hit = ask(*e);
    EXPECT_EQ(disk_hit.tier, cc::Tier::disk);
    ASSERT_TRUE(disk_hit.identical.has_value());
    EXPECT_TRUE(*disk_hit.identical) << "max |d logit| " << disk_hit.max_abs_logit_diff;
    EXPECT_EQ(disk_hit.max_abs_logit_diff, 0.0);
    ASSERT_EQ(disk_hit.step_logits.size(), memory_hit.step_logits.size());
    for (size_t i = 0; i < disk_hit.step_logits.size(); ++i) {
        ASSERT_EQ(disk_hit.step_logits[i].size(), memory_hit.step_logits[i].size());
        EXPECT_EQ(std::memcmp(disk_hit.step_logits[i].data(), memory_hit.step_logits[i].data(),
                              disk_hit.step_logits[i].size() * sizeof(float)),
                  0)
            << "step " << i;
    }
    EXPECT_EQ(disk_hit.tokens, memory_hit.tokens);
    EXPECT_TRUE(is_mapped(file)) << "the linked group reads the file's mapping";
    EXPECT_GT(disk_hit.timings.disk_load_gb_s, 0.0);

    // Removed from disk while linked: the mapping stays valid, the answer stays exact.
    ASSERT_TRUE(fs::remove(file));
    const auto after_unlink = ask(*e);
    EXPECT_EQ(after_unlink.tier, cc::Tier::memory);
    EXPECT_TRUE(*after_unlink.identical);
    EXPECT_EQ(after_unlink.tokens, memory_hit.tokens);
    // Evicted and no longer held: unmapped.
    ASSERT_TRUE(e->cache().drop_from_memory(c.group_key));
    e->set_tools(tools_from({8}), "sys");  // the engine lets go of the old group
    EXPECT_FALSE(is_mapped(file));
}

enum class Damage { truncate, flip_payload, flip_header, bad_magic, bad_version, foreign_key, token_ids };

class CacheDamage : public ::testing::TestWithParam<Damage> {};

TEST_P(CacheDamage, IsDetectedQuarantinedAndRecompiledWithTheExactAnswer) {
    cc::test::TempDir dir;
    const auto tools = tools_from({0, 1});
    std::string key;
    {
        auto e = make_engine(dir.path());
        key = e->set_tools(tools, "sys").group_key;
    }
    const fs::path file = dir.path() / "groups" / (key + ".kv");
    ASSERT_TRUE(fs::exists(file));
    std::string bytes = cc::test::read_file(file);
    switch (GetParam()) {
        case Damage::truncate: bytes.resize(bytes.size() - 1000); break;
        case Damage::flip_payload: bytes[bytes.size() - 5000] ^= 0x01; break;
        case Damage::flip_header: bytes[60] ^= 0x20; break;
        case Damage::bad_magic: bytes[0] = 'X'; break;
        case Damage::bad_version: bytes[8] = 9; break;
        case Damage::foreign_key: {
            // A valid file of another tool set, renamed to this key.
            auto e = make_engine(dir.path() / "other");
            const auto other = e->set_tools(tools_from({7}), "sys").group_key;
            e->wait_for_persist();
            bytes = cc::test::read_file(dir.path() / "other" / "groups" / (other + ".kv"));
            break;
        }
        case Damage::token_ids: {
            // A well-formed file (valid checksums) whose stored prefix ids differ from the rendered ones.
            std::vector<std::byte> payload;
            auto h = cc::read_group_file(file, payload);
            h.prefix_ids[3] += 1;
            fs::remove(file);
            cc::write_group_file(file, h, payload);
            bytes = cc::test::read_file(file);
            break;
        }
    }
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;

    auto e = make_engine(dir.path());
    const auto c = e->set_tools(tools, "sys");
    EXPECT_FALSE(c.cache_hit);
    EXPECT_EQ(c.tier, cc::Tier::miss);
    EXPECT_FALSE(c.problem.empty());
    EXPECT_NE(c.problem.find(file.filename().string()), std::string::npos) << c.problem;
    EXPECT_EQ(count_files(dir.path() / "groups" / "quarantine"), 1u);
    const auto r = ask(*e);
    EXPECT_TRUE(*r.identical);
    EXPECT_EQ(r.tokens, reference_tokens(tools, "sys"));
    e->wait_for_persist();
    // The rebuilt file is good again.
    std::vector<std::byte> payload;
    EXPECT_NO_THROW(cc::read_group_file(file, payload));
}

INSTANTIATE_TEST_SUITE_P(Faults, CacheDamage,
                         ::testing::Values(Damage::truncate, Damage::flip_payload, Damage::flip_header, Damage::bad_magic,
                                           Damage::bad_version, Damage::foreign_key, Damage::token_ids));

// Exact tool-set edits: a stored group of ten tools, then one edit. The edited
// compile reuses exactly the token prefix it shares with the stored group (computed here from the
// two renders, independently of the store), and its KV image and a query's logits are the bits of
// a from-scratch compile of the edited set.
struct ToolSetEdit {
    const char* name;
    std::function<std::vector<cc::Tool>(const std::vector<cc::Tool>& canonical)> apply;
};

class CacheToolEdit : public ::testing::TestWithParam<ToolSetEdit> {};

std::vector<cc::token_id> prefix_ids(cc::Engine& e, const cc::ToolSet& tools) {
    return cc::render_prompt(e.chat_format(), e.tokenizer(), tools, "sys", "q").prefix_ids;
}

std::vector<std::byte> group_payload(const fs::path& cache_dir, const std::string& group_key) {
    std::vector<std::byte> payload;
    cc::read_group_file(cache_dir / "groups" / (group_key + ".kv"), payload);
    return payload;
}

std::vector<float> first_token_logits(cc::Engine& e) {
    cc::QueryOptions o;
    o.mode = cc::QueryMode::cached;
    o.max_new_tokens = 1;
    o.keep_logits = true;
    const auto r = e.query("What's the weather in Paris?", o);
    EXPECT_TRUE(r.cache_hit);
    return r.step_logits.at(0);
}

TEST_P(CacheToolEdit, ReusesTheCommonPrefixAndEqualsAFromScratchCompile) {
    const auto base = tools_from({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    const auto edited = cc::ToolSet::from_tools(GetParam().apply(base.tools()), "edited");
    ASSERT_NE(edited.tools_hash(), base.tools_hash());

    cc::test::TempDir dir;
    auto e = make_engine(dir.path());
    const auto stored = e->set_tools(base, "sys");
    ASSERT_EQ(stored.tier, cc::Tier::miss);
    const size_t common = cc::common_prefix_tokens(prefix_ids(*e, base), prefix_ids(*e, edited));
    ASSERT_GE(common, 32u) << "the system turn and the tools intro are shared";

    const auto b = e->set_tools(edited, "sys");
    EXPECT_EQ(b.tier, cc::Tier::miss);
    EXPECT_EQ(b.reused_tokens, common);
    EXPECT_LT(b.reused_tokens, b.prefix_tokens);
    EXPECT_TRUE(*ask(*e).identical);  // cached == full prefill in the same engine
    const auto logits = first_token_logits(*e);
    e->wait_for_persist();

    cc::test::TempDir scratch_dir;
    auto scratch = make_engine(scratch_dir.path());
    const auto fresh = scratch->set_tools(edited, "sys");
    EXPECT_EQ(fresh.reused_tokens, 0u);
    EXPECT_EQ(fresh.group_key, b.group_key);
    EXPECT_EQ(first_token_logits(*scratch), logits);
    scratch->wait_for_persist();

    // The reused + computed KV equals the from-scratch KV, byte for byte (the group files' payloads).
    const auto reused_payload = group_payload(dir.path(), b.group_key);
    const auto scratch_payload = group_payload(scratch_dir.path(), b.group_key);
    ASSERT_EQ(reused_payload.size(), scratch_payload.size());
    EXPECT_EQ(std::memcmp(reused_payload.data(), scratch_payload.data(), reused_payload.size()), 0);
}

// Edits in canonical order (base has ten tools, sorted by name).
cc::Tool extra_tool(int index) { return tools_from({index}).tools().front(); }

INSTANTIATE_TEST_SUITE_P(
    Edits, CacheToolEdit,
    ::testing::Values(
        ToolSetEdit{"add", [](const auto& t) { auto out = t; out.push_back(extra_tool(15)); return out; }},
        ToolSetEdit{"add_sorting_last", [](const auto& t) { auto out = t; out.push_back(cc::renamed_tool(extra_tool(15), "zz_last")); return out; }},
        ToolSetEdit{"remove_first", [](const auto& t) { return cc::without_tool(t, 0); }},
        ToolSetEdit{"remove_middle", [](const auto& t) { return cc::without_tool(t, 5); }},
        ToolSetEdit{"remove_last", [](const auto& t) { return cc::without_tool(t, 9); }},
        ToolSetEdit{"replace_middle", [](const auto& t) { auto out = cc::without_tool(t, 4); out.push_back(extra_tool(12)); return out; }},
        ToolSetEdit{"change_description", [](const auto& t) { auto out = t; out[3] = cc::with_changed_description(out[3], "Edited."); return out; }}),
    [](const ::testing::TestParamInfo<ToolSetEdit>& info) { return std::string(info.param.name); });

TEST(Cache, DiskBudgetEvictsLeastRecentlyUsed) {
    cc::test::TempDir dir;
    std::vector<std::string> keys;
    size_t one_file = 0;
    {
        auto e = make_engine(dir.path());
        keys.push_back(e->set_tools(tools_from({0}), "").group_key);
        e->wait_for_persist();
        one_file = fs::file_size(dir.path() / "groups" / (keys[0] + ".kv"));
    }
    // Budget for about two files of this size.
    auto e = make_engine(dir.path(), one_file * 2 + one_file / 2);
    keys.push_back(e->set_tools(tools_from({0}), "b").group_key);
    e->wait_for_persist();
    e->set_tools(tools_from({0}), "");  // touch the first: now the second is the least recently used
    keys.push_back(e->set_tools(tools_from({0}), "c").group_key);
    e->wait_for_persist();
    EXPECT_TRUE(fs::exists(dir.path() / "groups" / (keys[0] + ".kv")));
    EXPECT_FALSE(fs::exists(dir.path() / "groups" / (keys[1] + ".kv")));
    EXPECT_TRUE(fs::exists(dir.path() / "groups" / (keys[2] + ".kv")));
    EXPECT_LE(e->cache().disk_bytes(), one_file * 2 + one_file / 2);
}

// A process killed between its rename and its index upsert leaves a group file that the index
// lacks. Opening a store reconciles the index with the files, but a server opened earlier would
// not count that file in its disk budget nor evict it: linking it indexes it again.
TEST(Cache, AGroupFileTheIndexLacksIsIndexedAgainWhenLinked) {
    cc::test::TempDir dir;
    const auto tools = tools_from({0, 1});
    auto e = make_engine(dir.path());  // opened (and reconciled) before the file appears
    std::string key;
    {
        auto writer = make_engine(dir.path());
        key = writer->set_tools(tools, "").group_key;
        writer->wait_for_persist();
    }
    const fs::path file = dir.path() / "groups" / (key + ".kv");
    ASSERT_TRUE(fs::exists(file));
    {
        cc::GroupIndex index(dir.path());
        index.remove(key);  // what the killed writer left: the file, no entry
    }
    EXPECT_EQ(e->cache().disk_bytes(), 0u);
    const auto c = e->set_tools(tools, "");
    EXPECT_EQ(c.tier, cc::Tier::disk);
    EXPECT_EQ(e->cache().disk_bytes(), fs::file_size(file));
    cc::GroupIndex index(dir.path());
    const auto entry = index.get(key);
    ASSERT_TRUE(entry.has_value());
    EXPECT_EQ(entry->file_bytes, fs::file_size(file));
    EXPECT_EQ(entry->hits, 1u);
    EXPECT_TRUE(*ask(*e).identical);
}

// A server never calls wait_for_persist. The background write of a group must not keep it in use
// once it has ended, or the group is exempt from the memory budget and from disk gc for the
// engine's lifetime (found by the soak: 48 MB in memory and on disk under 6 and 12 MB budgets).
TEST(Cache, AWrittenGroupIsNotHeldInUseByItsEndedWrite) {
    cc::test::TempDir dir;
    auto e = make_engine(dir.path());
    const std::string first = e->set_tools(tools_from({0}), "a").group_key;
    e->set_tools(tools_from({0}), "b");  // the current group is now another one
    bool released = false;
    for (int i = 0; i < 600 && !released; ++i) {  // bounded: the write of a small group
        for (const auto& g : e->cache().list())
            if (g.group_key == first && fs::exists(dir.path() / "groups" / (first + ".kv"))) released = !g.in_use;
        if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(released) << "group " << first.substr(0, 12) << " is still held after its write ended";
    EXPECT_TRUE(e->cache().drop_from_memory(first));  // evictable, then linked again from disk
    EXPECT_EQ(e->set_tools(tools_from({0}), "a").tier, cc::Tier::disk);
}

TEST(Cache, MemoryBudgetKeepsGroupsInUse) {
    cc::GroupStoreOptions o;
    o.host_budget_bytes = 10;
    cc::GroupStore store(o);
    auto g1 = std::make_shared<cc::Group>();
    g1->group_key = std::string(64, 'a');
    g1->kv_bytes = 8;
    auto g2 = std::make_shared<cc::Group>();
    g2->group_key = std::string(64, 'b');
    g2->kv_bytes = 8;
    store.insert(g1);  // g1 is held here: "in use"
    store.insert(g2);
    EXPECT_EQ(store.memory_size(), 2u);  // over budget, but g1 is in use and g2 was just inserted
    std::shared_ptr<const cc::Group> keep = g2;
    g1.reset();
    auto g3 = std::make_shared<cc::Group>();
    g3->group_key = std::string(64, 'c');
    g3->kv_bytes = 8;
    store.insert(g3);
    const auto list = store.list();
    std::set<std::string> left;
    for (const auto& g : list) left.insert(g.group_key);
    EXPECT_FALSE(left.count(std::string(64, 'a')));  // the only one nobody held
    EXPECT_TRUE(left.count(std::string(64, 'b')));
    EXPECT_TRUE(left.count(std::string(64, 'c')));
}

TEST(Cache, UnusableDirectoryIsAWarningNotAnError) {
    cc::test::TempDir dir;
    const fs::path not_a_dir = dir.path() / "file";
    std::ofstream(not_a_dir) << "x";
    auto e = make_engine(not_a_dir / "cache");  // parent is a regular file: cannot be created
    const auto warnings = e->cache_warnings();
    ASSERT_FALSE(warnings.empty());
    EXPECT_NE(warnings[0].find("memory only"), std::string::npos) << warnings[0];
    const auto tools = tools_from({0});
    e->set_tools(tools, "sys");
    const auto r = ask(*e);
    EXPECT_TRUE(*r.identical);
    EXPECT_EQ(r.tokens, reference_tokens(tools, "sys"));
}

TEST(Cache, FailedWriteIsAWarningAndTheAnswerIsGiven) {
    cc::test::TempDir dir;
    auto e = make_engine(dir.path());
    // Replace groups/ with a regular file after the store opened: every write now fails.
    fs::remove_all(dir.path() / "groups");
    std::ofstream(dir.path() / "groups") << "not a directory";
    const auto tools = tools_from({0, 1});
    e->set_tools(tools, "sys");
    const auto r = ask(*e);
    EXPECT_TRUE(*r.identical);
    EXPECT_EQ(r.tokens, reference_tokens(tools, "sys"));
    e->wait_for_persist();
    EXPECT_FALSE(e->current_tools()->persisted);
    EXPECT_FALSE(e->current_tools()->persist_error.empty());
    const auto warnings = e->cache_warnings();
    ASSERT_FALSE(warnings.empty());
    EXPECT_NE(warnings.back().find("not written"), std::string::npos) << warnings.back();
}

}  // namespace

namespace {

TEST(Cache, PlainFormatGroupsPersistToo) {
    CC_REQUIRE_FIXTURE("stories260k");
    cc::test::TempDir dir;
    cc::EngineOptions o;
    o.model_spec = cc::test::fixture("stories260k").string();
    o.cache.dir = dir.path();
    std::string key;
    {
        cc::Engine e(o);
        e.load_model();
        key = e.set_tools(tools_from({0}), "Once upon a time").group_key;
        e.wait_for_persist();
        EXPECT_TRUE(e.current_tools()->persisted) << e.current_tools()->persist_error;
    }
    cc::Engine e(o);
    e.load_model();
    const auto c = e.set_tools(tools_from({0}), "Once upon a time");
    EXPECT_EQ(c.tier, cc::Tier::disk);
    EXPECT_EQ(c.group_key, key);
}

}  // namespace
