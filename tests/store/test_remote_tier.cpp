// The shared remote tier (core/store/remote_tier.h) through the engine, against a real
// redis-server this test starts on 127.0.0.1 (skipped, saying why, where none is installed).
// Every fault (a chunk missing or corrupted, the manifest missing or damaged, Redis flushed or
// gone) must be a miss and a recompile whose answer is bit-identical to a full prefill
// (compare mode's `identical`, and the same tokens as a cache-free engine).
#include "core/engine/engine.h"
#include "core/store/group_file.h"
#include "core/store/group_store.h"
#include "core/store/remote_tier.h"
#include "tests/redis_server.h"
#include "tests/test_support.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <future>
#include <random>
#include <thread>

namespace {

namespace fs = std::filesystem;
using cc::test::RedisServer;

// Small chunks, so that even the test model's groups span several of them.
constexpr size_t kChunkBytes = size_t(64) << 10;

cc::ToolSet tools_from(const std::vector<int>& indices) {
    const auto path = cc::test::source_dir() / "resources" / "toolsets" / "tools_20.json";
    auto arr = nlohmann::ordered_json::parse(cc::test::read_file(path));
    nlohmann::ordered_json subset = nlohmann::ordered_json::array();
    for (int i : indices) subset.push_back(arr[static_cast<size_t>(i)]);
    return cc::ToolSet::from_json_text(subset.dump(), "subset");
}

std::unique_ptr<cc::Engine> make_engine(const fs::path& cache_dir, const std::string& remote_url, int wait_ms = 20000) {
    cc::EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    o.cache.dir = cache_dir;
    o.cache.remote.url = remote_url;
    o.cache.remote.chunk_bytes = kChunkBytes;
    o.cache.remote.wait_ms = wait_ms;
    o.cache.remote.io_timeout_ms = 2000;
    auto e = std::make_unique<cc::Engine>(o);
    e->load_model();
    return e;
}

cc::QueryResult ask(cc::Engine& e) {
    cc::QueryOptions o;
    o.mode = cc::QueryMode::compare;
    o.max_new_tokens = 5;
    o.ignore_eos = true;
    return e.query("What's the weather in Paris?", o);
}

// The answer of an engine with no cache at all.
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

// One replica compiles and publishes the group; returns its key.
std::string publish(const fs::path& dir, const std::string& url, const cc::ToolSet& tools, const std::string& system) {
    auto e = make_engine(dir, url);
    const auto c = e->set_tools(tools, system);
    EXPECT_EQ(c.tier, cc::Tier::miss);
    e->wait_for_persist();
    EXPECT_EQ(e->cache().remote()->counters().published, 1u);
    return c.group_key;
}

nlohmann::json manifest(const RedisServer& redis, const std::string& key) {
    const auto text = redis.get("cc:group:" + key);
    if (!text) return nullptr;
    return nlohmann::json::parse(*text);
}

class RemoteTier : public ::testing::Test {
protected:
    void SetUp() override {
        CC_REQUIRE_REDIS();
        redis_ = std::make_unique<RedisServer>(tmp_.path());
        ASSERT_TRUE(redis_->ok()) << "redis-server did not start: " << redis_->log();
    }
    fs::path dir(const std::string& name) const { return tmp_.path() / name; }
    std::string url() const { return redis_->url(); }

    cc::test::TempDir tmp_;
    std::unique_ptr<RedisServer> redis_;
};

TEST(RemoteTierUrl, ParsesHostPortDbAndCredentials) {
    auto ep = cc::parse_redis_url("redis://127.0.0.1:6390/2");
    EXPECT_EQ(ep.host, "127.0.0.1");
    EXPECT_EQ(ep.port, 6390);
    EXPECT_EQ(ep.db, 2);
    ep = cc::parse_redis_url("redis://cache.internal");
    EXPECT_EQ(ep.port, 6379);
    EXPECT_EQ(ep.db, 0);
    ep = cc::parse_redis_url("redis://replica:s3cret@10.0.0.5:6379/0");
    EXPECT_EQ(ep.user, "replica");
    EXPECT_EQ(ep.password, "s3cret");
    ep = cc::parse_redis_url("redis://:s3cret@10.0.0.5");
    EXPECT_EQ(ep.user, "");
    EXPECT_EQ(ep.password, "s3cret");
    for (const char* bad : {"http://x:1", "redis://", "redis://h:0", "redis://h:99999", "redis://h:1/x", "redis://h:1/-1"})
        EXPECT_THROW(cc::parse_redis_url(bad), std::invalid_argument) << bad;
}

// The manifest parser alone (no Redis): what a replica publishes parses back; every field of the
// wrong type, size or content is refused naming it, never cast (fuzz/fuzz_remote_manifest.cpp
// covers the rest).
TEST(RemoteManifest, ParsesAGoodOneAndRefusesEveryBadFieldByName) {
    const std::string key(64, 'a'), h1(32, '1'), h2(32, '2'), whole(32, 'f');
    auto manifest = [&](const std::string& file_bytes, const std::string& b1, const std::string& version = "1",
                        const std::string& k1 = "cc:chunk:" + std::string(32, '1')) {
        return "{\"format\":\"contextcache-remote-group\",\"version\":" + version + ",\"group_key\":\"" + key +
               "\",\"file_bytes\":" + file_bytes + ",\"file_xxh3_128\":\"" + whole + "\",\"chunks\":[{\"key\":\"" + k1 +
               "\",\"bytes\":" + b1 + ",\"xxh3_128\":\"" + h1 + "\"},{\"key\":\"cc:chunk:" + h2 +
               "\",\"bytes\":10,\"xxh3_128\":\"" + h2 + "\"}]}";
    };
    const auto m = cc::parse_remote_manifest(manifest("30", "20"), key, "cc:");
    EXPECT_EQ(m.file_bytes, 30u);
    ASSERT_EQ(m.chunks.size(), 2u);
    EXPECT_EQ(m.chunks[0].key, "cc:chunk:" + h1);
    EXPECT_EQ(m.chunks[1].bytes, 10u);
    auto refused = [&](const std::string& text, const std::string& why, const std::string& group = "") {
        try {
            cc::parse_remote_manifest(text, group.empty() ? key : group, "cc:");
            ADD_FAILURE() << "accepted: " << text;
        } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
        }
    };
    refused(manifest("1e300", "20"), "file_bytes is not an unsigned integer");  // a float is not cast
    refused(manifest("30", "-1.5"), "bytes is not an unsigned integer");
    refused(manifest("30", "-20"), "bytes is not an unsigned integer");
    refused(manifest("30", "20", "1.0"), "manifest version");
    refused(manifest("30", "20", "2"), "manifest version 2");
    refused(manifest("31", "20"), "do not add up");
    refused(manifest("30", "25"), "do not add up");
    refused(manifest("30", "0"), "do not add up");
    refused(manifest("30", "20", "1", "cc:chunk:" + h2), "not its content's");
    refused(manifest("30", "20"), "another group_key", std::string(64, 'b'));
    refused("{\"fo", "not JSON");
    refused("[1]", "format");
}

TEST_F(RemoteTier, AGroupCompiledByOneReplicaIsARemoteHitForAnotherAndPromotedToItsDisk) {
    const auto tools = tools_from({0, 1, 2});
    const std::string key = publish(dir("a"), url(), tools, "sys");
    const auto m = manifest(*redis_, key);
    ASSERT_FALSE(m.is_null());
    EXPECT_EQ(m["group_key"], key);
    EXPECT_GT(m["chunks"].size(), 1u);  // several chunks, each under its content's key
    for (const auto& c : m["chunks"]) {
        EXPECT_LE(c["bytes"].get<size_t>(), kChunkBytes);
        EXPECT_TRUE(redis_->get(c["key"].get<std::string>()));
    }

    const auto expected = reference_tokens(tools, "sys");
    {
        auto b = make_engine(dir("b"), url());
        cc::ToolsPreview preview = b->select_tools(tools, "sys");
        (void)preview;
        const auto r = ask(*b);  // the query links the group itself: its timings show the fetch
        EXPECT_TRUE(r.cache_hit);
        EXPECT_EQ(r.tier, cc::Tier::remote);
        EXPECT_EQ(r.timings.compile_ms, 0.0);
        EXPECT_GT(r.timings.remote_load_ms, 0.0);
        EXPECT_GT(r.timings.remote_load_gb_s, 0.0);
        EXPECT_GE(r.timings.link_ms, r.timings.remote_load_ms);
        ASSERT_TRUE(r.identical.has_value());
        EXPECT_TRUE(*r.identical);
        EXPECT_EQ(r.tokens, expected);
        EXPECT_EQ(b->cache().remote()->counters().hits, 1u);
        EXPECT_EQ(b->cache().remote()->counters().locks_taken, 0u);  // nothing compiled here
        b->cache().wait_for_promotions();
        EXPECT_TRUE(fs::exists(dir("b") / "groups" / (key + ".kv")));
        const auto again = ask(*b);
        EXPECT_EQ(again.tier, cc::Tier::memory);
    }
    // Promoted to b's disk tier: a restart finds it there, even with Redis gone.
    redis_->stop();
    auto b = make_engine(dir("b"), url());
    const auto c = b->set_tools(tools, "sys");
    EXPECT_EQ(c.tier, cc::Tier::disk);
    const auto r = ask(*b);
    EXPECT_TRUE(*r.identical);
    EXPECT_EQ(r.tokens, expected);
}

TEST_F(RemoteTier, AMissingChunkIsAMissThatRecompilesAndRepublishes) {
    const auto tools = tools_from({3, 4});
    const std::string key = publish(dir("a"), url(), tools, "");
    const auto m = manifest(*redis_, key);
    ASSERT_FALSE(m.is_null());
    EXPECT_EQ(redis_->integer({"DEL", m["chunks"][1]["key"].get<std::string>()}), 1);

    auto b = make_engine(dir("b"), url());
    const auto c = b->set_tools(tools, "");
    EXPECT_FALSE(c.cache_hit);
    EXPECT_EQ(c.tier, cc::Tier::miss);
    EXPECT_NE(c.problem.find("missing"), std::string::npos) << c.problem;
    EXPECT_EQ(b->cache().remote()->counters().incomplete, 1u);
    const auto r = ask(*b);
    EXPECT_TRUE(*r.identical);
    EXPECT_EQ(r.tokens, reference_tokens(tools, ""));
    b->wait_for_persist();
    EXPECT_EQ(b->cache().remote()->counters().published, 1u);

    auto c2 = make_engine(dir("c"), url());
    EXPECT_EQ(c2->set_tools(tools, "").tier, cc::Tier::remote);  // whole again
}

TEST_F(RemoteTier, ACorruptedChunkIsDetectedCountedAndRecompiled) {
    const auto tools = tools_from({5, 6, 7});
    const std::string key = publish(dir("a"), url(), tools, "sys");
    const auto m = manifest(*redis_, key);
    ASSERT_FALSE(m.is_null());
    const std::string chunk = m["chunks"][m["chunks"].size() - 1]["key"].get<std::string>();
    auto r0 = redis_->command({"SETRANGE", chunk, "17", std::string("\xff\x00\x13", 3)});
    ASSERT_TRUE(r0);

    auto b = make_engine(dir("b"), url());
    const auto c = b->set_tools(tools, "sys");
    EXPECT_EQ(c.tier, cc::Tier::miss);
    EXPECT_NE(c.problem.find("checksum mismatch"), std::string::npos) << c.problem;
    EXPECT_EQ(b->cache().remote()->counters().damaged, 1u);
    EXPECT_FALSE(redis_->get("cc:group:" + key));  // the damaged manifest is withdrawn
    const auto r = ask(*b);
    EXPECT_TRUE(*r.identical);
    EXPECT_EQ(r.tokens, reference_tokens(tools, "sys"));
}

TEST_F(RemoteTier, AMissingOrDamagedManifestIsAMiss) {
    const auto tools = tools_from({8, 9});
    const std::string key = publish(dir("a"), url(), tools, "");
    const auto expected = reference_tokens(tools, "");
    EXPECT_EQ(redis_->integer({"DEL", "cc:group:" + key}), 1);
    {
        auto b = make_engine(dir("b"), url());
        const auto c = b->set_tools(tools, "");
        EXPECT_EQ(c.tier, cc::Tier::miss);
        EXPECT_EQ(b->cache().remote()->counters().misses, 1u);
        EXPECT_EQ(ask(*b).tokens, expected);
        b->wait_for_persist();
    }
    // A manifest that is not ours (or cut short) is damage, withdrawn, recompiled.
    for (const std::string& bad : {std::string("{\"format\":\"contextcache-remote-group\",\"version\":1}"), std::string("{\"fo")}) {
        ASSERT_TRUE(redis_->command({"SET", "cc:group:" + key, bad}));
        auto e = make_engine(dir("c" + std::to_string(bad.size())), url());
        const auto c = e->set_tools(tools, "");
        EXPECT_EQ(c.tier, cc::Tier::miss) << bad;
        EXPECT_EQ(e->cache().remote()->counters().damaged, 1u) << bad;
        const auto r = ask(*e);
        EXPECT_TRUE(*r.identical);
        EXPECT_EQ(r.tokens, expected);
        e->wait_for_persist();
    }
}

TEST_F(RemoteTier, FlushallMidRunLeavesMissesAndExactAnswers) {
    const auto tools_a = tools_from({0, 5});
    const auto tools_b = tools_from({1, 6});
    publish(dir("a"), url(), tools_a, "");
    auto b = make_engine(dir("b"), url());
    EXPECT_EQ(b->set_tools(tools_a, "").tier, cc::Tier::remote);
    ASSERT_TRUE(redis_->command({"FLUSHALL"}));
    // b's own tiers still hold tools_a; a fresh replica finds nothing remote and recompiles.
    EXPECT_EQ(b->set_tools(tools_a, "").tier, cc::Tier::memory);
    auto c = make_engine(dir("c"), url());
    EXPECT_EQ(c->set_tools(tools_a, "").tier, cc::Tier::miss);
    const auto r = ask(*c);
    EXPECT_TRUE(*r.identical);
    EXPECT_EQ(r.tokens, reference_tokens(tools_a, ""));
    EXPECT_EQ(c->set_tools(tools_b, "").tier, cc::Tier::miss);
    EXPECT_TRUE(*ask(*c).identical);
}

TEST_F(RemoteTier, RedisGoneIsAMissNotAnError) {
    const auto tools = tools_from({2, 3});
    redis_->stop();
    auto e = make_engine(dir("a"), url());
    const auto c = e->set_tools(tools, "");
    EXPECT_EQ(c.tier, cc::Tier::miss);
    const auto r = ask(*e);
    EXPECT_TRUE(*r.identical);
    EXPECT_EQ(r.tokens, reference_tokens(tools, ""));
    e->wait_for_persist();
    EXPECT_TRUE(e->current_tools()->persisted);  // the disk tier still works
    const auto counters = e->cache().remote()->counters();
    EXPECT_GE(counters.errors, 1u);
    EXPECT_EQ(counters.publish_errors, 1u);
}

// Redis restarted (empty) under a running replica: its pooled connections are dead; the next
// lookup reconnects (no error, no spurious miss), misses, recompiles and republishes.
TEST_F(RemoteTier, ARedisRestartCostsAReconnectNotAnError) {
    const auto tools_a = tools_from({4, 9});
    const auto tools_b = tools_from({7, 12});
    auto e = make_engine(dir("a"), url());
    EXPECT_EQ(e->set_tools(tools_a, "").tier, cc::Tier::miss);
    e->wait_for_persist();
    ASSERT_TRUE(redis_->restart()) << redis_->log();
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the pooled connections are idle
    EXPECT_EQ(e->set_tools(tools_b, "").tier, cc::Tier::miss);
    e->wait_for_persist();
    const auto n = e->cache().remote()->counters();
    EXPECT_EQ(n.errors, 0u);
    EXPECT_EQ(n.publish_errors, 0u);
    EXPECT_EQ(n.published, 2u);
    EXPECT_EQ(ask(*e).tokens, reference_tokens(tools_b, ""));
    auto f = make_engine(dir("b"), url());
    EXPECT_EQ(f->set_tools(tools_b, "").tier, cc::Tier::remote);
    EXPECT_EQ(f->set_tools(tools_a, "").tier, cc::Tier::miss);  // gone with the restart
}

// Compile once per cluster: two replicas miss the same group at the same moment; one compiles
// (holding the lock), the other waits for its publish and fetches it.
TEST_F(RemoteTier, TwoReplicasMissingTheSameGroupCompileItOnce) {
    const auto tools = tools_from({10, 11, 12, 13});
    auto a = make_engine(dir("a"), url());
    auto b = make_engine(dir("b"), url());
    std::promise<void> go;
    std::shared_future<void> start = go.get_future().share();
    auto run = [&](cc::Engine& e) {
        start.wait();
        auto c = e.set_tools(tools, "sys");
        e.wait_for_persist();
        return c;
    };
    auto fa = std::async(std::launch::async, run, std::ref(*a));
    auto fb = std::async(std::launch::async, run, std::ref(*b));
    go.set_value();
    const auto ca = fa.get();
    const auto cb = fb.get();
    const auto na = a->cache().remote()->counters();
    const auto nb = b->cache().remote()->counters();
    EXPECT_EQ(na.locks_taken + nb.locks_taken, 1u);
    EXPECT_EQ(int(ca.tier == cc::Tier::miss) + int(cb.tier == cc::Tier::miss), 1)
        << cc::tier_name(ca.tier) << " " << cc::tier_name(cb.tier);
    EXPECT_EQ(int(ca.tier == cc::Tier::remote) + int(cb.tier == cc::Tier::remote), 1);
    EXPECT_EQ(na.published + nb.published, 1u);
    EXPECT_FALSE(redis_->get("cc:lock:" + ca.group_key));  // released after the publish
    const auto expected = reference_tokens(tools, "sys");
    EXPECT_EQ(ask(*a).tokens, expected);
    EXPECT_EQ(ask(*b).tokens, expected);
}

// A lock whose holder never publishes (it died): the waiter gives up after wait_ms and compiles.
TEST_F(RemoteTier, AStaleLockIsWaitedForBoundedThenCompiledLocally) {
    const auto tools = tools_from({14, 15});
    cc::Engine probe([&] {
        cc::EngineOptions o;
        o.model_spec = "builtin:qwen3-test";
        return o;
    }());
    probe.load_model();
    const std::string key = probe.set_tools(tools, "").group_key;
    ASSERT_TRUE(redis_->command({"SET", "cc:lock:" + key, "someone-else", "PX", "60000"}));

    auto e = make_engine(dir("a"), url(), /*wait_ms=*/300);
    cc::Stopwatch clock;
    const auto c = e->set_tools(tools, "");
    EXPECT_GE(clock.elapsed_ms(), 300.0);
    EXPECT_EQ(c.tier, cc::Tier::miss);
    EXPECT_EQ(e->cache().remote()->counters().wait_timeouts, 1u);
    EXPECT_EQ(ask(*e).tokens, reference_tokens(tools, ""));
    e->wait_for_persist();
    EXPECT_EQ(redis_->get("cc:lock:" + key), std::optional<std::string>("someone-else"));  // not ours to delete
}

// Without a cache directory the tier still works: the group file is encoded in memory, fetched
// bytes are verified and linked from memory.
TEST_F(RemoteTier, WorksWithoutACacheDirectory) {
    const auto tools = tools_from({16, 17});
    const auto expected = reference_tokens(tools, "");
    {
        auto a = make_engine(fs::path(), url());
        EXPECT_EQ(a->set_tools(tools, "").tier, cc::Tier::miss);
        a->wait_for_persist();
        EXPECT_EQ(a->cache().remote()->counters().published, 1u);
    }
    auto b = make_engine(fs::path(), url());
    EXPECT_EQ(b->set_tools(tools, "").tier, cc::Tier::remote);
    const auto r = ask(*b);
    EXPECT_TRUE(*r.identical);
    EXPECT_EQ(r.tokens, expected);
}


// The tier's own read path, below the engine: chunk replies are read from the socket straight into
// the group's buffer (remote_tier.cpp, BulkReader). Seeded bytes of awkward sizes round-trip, with
// more chunks than are in flight at once and a last chunk that is one byte long.
std::vector<std::byte> seeded_bytes(size_t n, uint64_t seed) {
    std::vector<std::byte> v(n);
    std::mt19937_64 rng(seed);
    for (auto& b : v) b = static_cast<std::byte>(rng() & 0xff);
    return v;
}

bool same(const cc::RemoteTier::Bytes& got, const std::vector<std::byte>& want) {
    return std::equal(got.begin(), got.end(), want.begin(), want.end());
}

cc::RemoteTierOptions tier_options(const std::string& url, size_t chunk_bytes) {
    cc::RemoteTierOptions o;
    o.url = url;
    o.chunk_bytes = chunk_bytes;
    o.io_timeout_ms = 2000;
    return o;
}

TEST_F(RemoteTier, BytesRoundTripThroughTheSocketReaderAtEveryChunkShape) {
    struct Case {
        size_t n_bytes, chunk_bytes;
    };
    // one short chunk; exactly one chunk; 17 x 4 KiB + 1 byte (more than the 16 in flight);
    // 2.5 chunks of 3 MiB (2 in flight); a chunk smaller than a reply line's read
    const std::vector<Case> cases{Case{1000, 4096}, Case{4096, 4096}, Case{17 * 4096 + 1, 4096},
                                  Case{(size_t(15) << 19) + 7, size_t(3) << 20}, Case{100, 10}};
    for (size_t i = 0; i < cases.size(); ++i) {
        const Case c = cases[i];
        cc::RemoteTier tier(tier_options(url(), c.chunk_bytes));
        const std::string key = std::string(63, 'a') + std::to_string(i);
        const auto bytes = seeded_bytes(c.n_bytes, c.n_bytes);
        tier.publish(key, bytes, {"test", 0});
        for (int round = 0; round < 2; ++round) {  // the second on the pooled connection
            const auto f = tier.fetch(key);
            ASSERT_EQ(f.status, cc::RemoteTier::Status::hit) << c.n_bytes << " " << f.problem;
            EXPECT_EQ(f.n_chunks, (c.n_bytes + c.chunk_bytes - 1) / c.chunk_bytes);
            EXPECT_TRUE(same(f.bytes, bytes)) << c.n_bytes << " bytes in chunks of " << c.chunk_bytes;
            EXPECT_GT(f.gb_s, 0.0);
        }
        EXPECT_EQ(tier.counters().hits, 2u);
        EXPECT_EQ(tier.counters().errors, 0u);
    }
}

// The warm pool (RemoteTierOptions::warm_bytes): fetches take its resident pieces while it has
// them and fresh memory after, the bytes are right either way (also in pieces that held another
// group's bytes), and fetched groups give their pieces back when they are let go.
TEST_F(RemoteTier, FetchesUseTheWarmPoolAndGiveItBack) {
    constexpr size_t MiB = size_t(1) << 20;
    auto options = tier_options(url(), MiB);
    options.warm_bytes = 16 * MiB;   // 8 pieces of 2 MiB
    cc::RemoteTier tier(options);
    // filled in the background: wait 60 s at most
    for (int i = 0; i < 6000 && tier.counters().warm_held_bytes < 16 * MiB; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(tier.counters().warm_held_bytes, 16 * MiB);
    EXPECT_EQ(tier.counters().warm_capacity_bytes, 16 * MiB);

    const std::string key_a(64, 'a'), key_b(64, 'b');
    const auto a = seeded_bytes(5 * MiB + 3, 1), b = seeded_bytes(9 * MiB, 2);   // 3 and 5 pieces
    tier.publish(key_a, a, {"test", 0});
    tier.publish(key_b, b, {"test", 0});
    {
        const auto fa = tier.fetch(key_a);
        ASSERT_EQ(fa.status, cc::RemoteTier::Status::hit) << fa.problem;
        EXPECT_TRUE(same(fa.bytes, a));
        auto c = tier.counters();
        EXPECT_EQ(c.warm_fetched_bytes, 6 * MiB);
        EXPECT_EQ(c.warm_held_bytes, 10 * MiB);
        const auto fb = tier.fetch(key_b);
        ASSERT_EQ(fb.status, cc::RemoteTier::Status::hit) << fb.problem;
        EXPECT_TRUE(same(fb.bytes, b));
        const auto fa2 = tier.fetch(key_a);   // the pool is empty now: fresh pages
        ASSERT_EQ(fa2.status, cc::RemoteTier::Status::hit) << fa2.problem;
        EXPECT_TRUE(same(fa2.bytes, a));
        c = tier.counters();
        EXPECT_EQ(c.warm_fetched_bytes, 16 * MiB);
        EXPECT_EQ(c.cold_fetched_bytes, 6 * MiB);
        EXPECT_EQ(c.warm_held_bytes, 0u);
    }
    EXPECT_EQ(tier.counters().warm_held_bytes, 16 * MiB) << "let go: back to the pool, up to its capacity";
    const auto again = tier.fetch(key_a);   // into pieces that held b's and a's bytes
    ASSERT_EQ(again.status, cc::RemoteTier::Status::hit) << again.problem;
    EXPECT_TRUE(same(again.bytes, a));
    EXPECT_EQ(tier.counters().warm_fetched_bytes, 22 * MiB);
}

// Faults in the middle of a pipelined read: a chunk that is now another length, a chunk key that
// holds another type (Redis answers an error), a chunk gone. Each is reported as what it is, and
// the connection, with replies still unread, is closed: the next fetch on the same tier is a
// clean hit, never a read of the previous fetch's leftovers.
TEST_F(RemoteTier, AFaultMidReadLeavesNoReplyBehindForTheNextFetch) {
    cc::RemoteTier tier(tier_options(url(), 4096));
    const std::string good(64, 'c');
    const auto good_bytes = seeded_bytes(40 * 4096, 7);
    tier.publish(good, good_bytes, {"test", 0});
    struct Fault {
        std::string what;
        cc::RemoteTier::Status expected;
        std::function<void(const std::string& chunk_key)> apply;
    };
    const std::vector<Fault> faults{
        {"shorter", cc::RemoteTier::Status::damaged,
         [&](const std::string& k) { ASSERT_TRUE(redis_->command({"SET", k, "short"})); }},
        {"wrong type", cc::RemoteTier::Status::unavailable,
         [&](const std::string& k) {
             redis_->command({"DEL", k});
             ASSERT_TRUE(redis_->command({"HSET", k, "f", "v"}));
         }},
        {"gone", cc::RemoteTier::Status::incomplete, [&](const std::string& k) { redis_->command({"DEL", k}); }},
    };
    for (size_t i = 0; i < faults.size(); ++i) {
        const std::string key = std::string(63, 'd') + std::to_string(i);
        tier.publish(key, seeded_bytes(40 * 4096, 100 + i), {"test", 0});
        const auto m = manifest(*redis_, key);
        ASSERT_FALSE(m.is_null());
        faults[i].apply(m["chunks"][3]["key"].get<std::string>());  // with 16 in flight, 12 unread behind it
        const auto f = tier.fetch(key);
        EXPECT_EQ(f.status, faults[i].expected) << faults[i].what << ": " << f.problem;
        EXPECT_TRUE(f.bytes.empty());
        const auto g = tier.fetch(good);
        ASSERT_EQ(g.status, cc::RemoteTier::Status::hit) << "after " << faults[i].what << ": " << g.problem;
        EXPECT_TRUE(same(g.bytes, good_bytes));
    }
}

}  // namespace
