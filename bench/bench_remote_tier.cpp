// The remote tier's load speed (docs/deploy.md, "Remote load speed"): a group-sized blob published
// to Redis as chunks and fetched back with RemoteTier::fetch (manifest, chunks, every checksum),
// against the machine's ceilings on the same bytes: one plain GET per chunk through hiredis's own
// reply reader, and one XXH3-128 and one memcpy pass. Uses a redis-server it starts on 127.0.0.1
// (ephemeral port, its own temp dir, stopped on exit), or --url. The blob's bytes are not a group
// file (the engine verifies those after the fetch: `contextcache-cli query` reports the whole
// remote_load_ms). Prints one JSON object; not a ctest (its figures are measurements).
//
// --warm-mb N gives the tier a warm pool of N MiB (RemoteTierOptions::warm_bytes, as `serve` has by
// default) and waits for it to fill before the first fetch; the first fetch is reported apart (a
// fresh process's first fetch pays the first touch of its memory unless a pool has).
//
//   bench_remote_tier [--mb 48] [--chunk-mib 4] [--repeat 7] [--warm-mb 0] [--url redis://127.0.0.1:PORT]
#include "bench/bench_common.h"
#include "core/base/timings.h"
#include "core/research/sample_stats.h"
#include "core/store/remote_tier.h"
#include "tests/redis_server.h"

#include <hiredis/hiredis.h>
#include <xxhash.h>
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>  // the same dispatched XXH3 as core/store/remote_tier.cpp
#endif

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>

namespace {

using nlohmann::ordered_json;
namespace fs = std::filesystem;
using cc::median;

}  // namespace

int main(int argc, char** argv) {
    size_t mb = 48, chunk_mib = 4, repeat = 7, warm_mb = 0;
    std::string url;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::cerr << a << " needs a value\n";
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--mb") mb = std::stoull(next());
        else if (a == "--chunk-mib") chunk_mib = std::stoull(next());
        else if (a == "--repeat") repeat = std::stoull(next());
        else if (a == "--warm-mb") warm_mb = std::stoull(next());
        else if (a == "--url") url = next();
        else {
            std::cerr << "usage: bench_remote_tier [--mb N] [--chunk-mib N] [--repeat N] [--warm-mb N] [--url redis://...]\n";
            return 2;
        }
    }

    const fs::path dir = fs::temp_directory_path() / ("cc-bench-remote-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::unique_ptr<cc::test::RedisServer> redis;
    if (url.empty()) {
        if (cc::test::RedisServer::binary().empty()) {
            std::cerr << "no redis-server on PATH; pass --url\n";
            return 1;
        }
        redis = std::make_unique<cc::test::RedisServer>(dir);
        if (!redis->ok()) {
            std::cerr << "redis-server did not start: " << redis->log() << "\n";
            return 1;
        }
        url = redis->url();
    }

    // Seeded, incompressible bytes (KV-like values would not compress either).
    std::vector<std::byte> blob(mb << 20);
    std::mt19937_64 rng(1);
    for (size_t i = 0; i + 8 <= blob.size(); i += 8) {
        const uint64_t x = rng();
        std::memcpy(blob.data() + i, &x, 8);
    }

    cc::RemoteTierOptions o;
    o.url = url;
    o.chunk_bytes = chunk_mib << 20;
    o.key_prefix = "ccbench:";
    const std::string key(64, 'b');
    std::vector<double> redis_warmup_ms;
    {
        // A redis-server started here is cold too: its first replies page-fault its own output
        // buffers. A few fetches first, so what follows measures this side (a cluster's Redis has
        // served many fetches).
        cc::RemoteTier publisher(o);
        publisher.publish(key, blob, {"bench", 0});
        for (int r = 0; r < 3; ++r) redis_warmup_ms.push_back(publisher.fetch(key).load_ms);
    }
    cc::RemoteTierOptions warm_options = o;
    warm_options.warm_bytes = warm_mb << 20;
    cc::RemoteTier tier(warm_options);
    cc::Stopwatch fill_clock;   // the pool fills in the background from the tier's construction
    while (tier.counters().warm_held_bytes < tier.counters().warm_capacity_bytes && fill_clock.elapsed_ms() < 60000)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const double fill_wait_ms = fill_clock.elapsed_ms();

    auto rate = [&](double ms) { return ms > 0 ? double(blob.size()) / (ms * 1e6) : 0; };
    ordered_json runs = ordered_json::array();
    std::vector<double> load_ms, gb_s;
    for (size_t r = 0; r < repeat; ++r) {
        const auto f = tier.fetch(key);
        if (f.status != cc::RemoteTier::Status::hit || !std::equal(f.bytes.begin(), f.bytes.end(), blob.begin(), blob.end())) {
            std::cerr << "fetch " << r << ": " << cc::remote_status_name(f.status) << " " << f.problem << "\n";
            return 1;
        }
        load_ms.push_back(f.load_ms);
        gb_s.push_back(f.gb_s);
        runs.push_back({{"load_ms", f.load_ms}, {"gb_s", f.gb_s}});
    }

    const cc::RemoteCounters warm_counters = tier.counters();

    // The same on a new connection each time (a new tier: its pool is empty; no warm pool), as a short-lived
    // process such as `contextcache-cli query` fetches.
    ordered_json fresh_runs = ordered_json::array();
    std::vector<double> fresh_ms;
    for (size_t r = 0; r < repeat; ++r) {
        cc::RemoteTier fresh(o);
        const auto f = fresh.fetch(key);
        if (f.status != cc::RemoteTier::Status::hit) {
            std::cerr << "fresh fetch " << r << ": " << f.problem << "\n";
            return 1;
        }
        fresh_ms.push_back(f.load_ms);
        fresh_runs.push_back({{"load_ms", f.load_ms}, {"gb_s", f.gb_s}});
    }

    // Ceilings on the same bytes. A plain GET per chunk through hiredis's reply reader (what a
    // client gets without reading into its own buffer).
    const cc::RedisEndpoint ep = cc::parse_redis_url(url);
    std::unique_ptr<redisContext, void (*)(redisContext*)> c(redisConnect(ep.host.c_str(), ep.port), redisFree);
    std::vector<double> hiredis_ms;
    for (size_t r = 0; r < repeat; ++r) {
        cc::Stopwatch clock;
        for (size_t off = 0; off < blob.size(); off += o.chunk_bytes) {
            const auto chunk = std::span(blob).subspan(off, std::min(o.chunk_bytes, blob.size() - off));
            const XXH128_hash_t h = XXH3_128bits(chunk.data(), chunk.size());
            char hex[33];
            std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                          static_cast<unsigned long long>(h.low64));
            const std::string k = tier.chunk_key(hex);
            auto* reply = static_cast<redisReply*>(redisCommand(c.get(), "GET %b", k.data(), k.size()));
            if (!reply || reply->type != REDIS_REPLY_STRING || reply->len != chunk.size()) {
                std::cerr << "plain GET failed\n";
                return 1;
            }
            freeReplyObject(reply);
        }
        hiredis_ms.push_back(clock.elapsed_ms());  // (hashing the keys above is ~1 % of this)
    }
    std::vector<double> xxh_ms, copy_ms;
    std::vector<std::byte> dst(blob.size());
    for (size_t r = 0; r < repeat; ++r) {
        cc::Stopwatch h;
        volatile uint64_t sink = XXH3_128bits(blob.data(), blob.size()).low64;
        (void)sink;
        xxh_ms.push_back(h.elapsed_ms());
        cc::Stopwatch m;
        std::memcpy(dst.data(), blob.data(), blob.size());
        copy_ms.push_back(m.elapsed_ms());
    }

    ordered_json out;
    out["benchmark"] = "remote_tier";
    out["machine"] = cc::bench::machine_json();
    out["redis"] = redis ? "started by the benchmark (127.0.0.1)" : url;
    out["bytes"] = blob.size();
    out["chunk_bytes"] = o.chunk_bytes;
    out["n_chunks"] = (blob.size() + o.chunk_bytes - 1) / o.chunk_bytes;
    out["repeat"] = repeat;
    out["warm_pool"] = {{"capacity_bytes", warm_counters.warm_capacity_bytes},
                        {"fill_wait_ms", fill_wait_ms},
                        {"warm_fetched_bytes", warm_counters.warm_fetched_bytes},
                        {"cold_fetched_bytes", warm_counters.cold_fetched_bytes}};
    out["redis_warmup_fetch_ms"] = redis_warmup_ms;
    out["first_fetch"] = runs.front();
    out["fetch"] = {{"load_ms_median", median(load_ms)}, {"gb_s_median", median(gb_s)}, {"runs", runs}};
    out["fetch_new_connection"] = {{"load_ms_median", median(fresh_ms)},
                                   {"gb_s_median", rate(median(fresh_ms))},
                                   {"runs", fresh_runs}};
    out["ceilings"] = {{"hiredis_plain_get_ms_median", median(hiredis_ms)},
                       {"hiredis_plain_get_gb_s", rate(median(hiredis_ms))},
                       {"xxh3_128_ms_median", median(xxh_ms)},
                       {"xxh3_128_gb_s", rate(median(xxh_ms))},
                       {"memcpy_ms_median", median(copy_ms)},
                       {"memcpy_gb_s", rate(median(copy_ms))}};
    std::cout << out.dump(1) << "\n";
    redis.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
    return 0;
}
