// The shared remote tier (DESIGN §11): group files kept in Redis, below every local tier, so that
// many replicas (or machines) compile a tool set once and link it everywhere.
//
// A group is stored as its group file's bytes (group_file.h, unchanged) cut into fixed-size
// chunks, plus a small JSON manifest that makes it visible:
//   <prefix>chunk:<xxh3-128 of the chunk, 32 hex>   one chunk (chunk_bytes, the last one shorter)
//   <prefix>group:<group_key>                        the manifest, written LAST
//   <prefix>lock:<group_key>                         "compiling": SET NX PX, a token, an expiry
// Chunks are named by their content, so a chunk is never overwritten with other bytes and two
// replicas publishing the same group at once cannot mix their chunks: whichever manifest lands
// last names chunks that all exist with exactly the bytes it lists. Every key stands alone (no
// MULTI, no multi-key command), so the layout works on Redis Cluster, where each key hashes to
// its own slot. Bounded values: Redis copies a reply into the client's buffer, so never one
// 400 MB value.
//
// Reads: GET the manifest, validate it, GET the chunks pipelined, each read from the socket straight
// into its place in one huge-page buffer, check each chunk's size and XXH3-128 (every byte lies in
// exactly one chunk, so the manifest's whole-file checksum is not recomputed); the caller verifies the bytes as a group file (header,
// layer checksums, key, prefix token ids). Anything absent, missing, evicted or damaged is a miss
// (counted and reported), never a wrong answer; the manifest of a damaged or incomplete group is
// deleted (only if it is still the one read) so the next compile republishes the group. Eviction is Redis's (maxmemory +
// allkeys-lru): a chunk evicted under a manifest makes that group a miss.
//
// Compile once per cluster: a replica that misses takes the lock (SET NX PX) and compiles, or
// polls for the manifest while another holds it, up to wait_ms, then compiles locally. The lock
// expires by itself (lock_ttl_ms) if its holder dies; it is released (compare-and-delete) after
// the publish.
//
// Thread-safe: each call takes a connection from a small pool (one per concurrent caller); one
// idle for over a second is checked (PING) first, so a Redis restart costs a reconnect, not a miss.
#pragma once

#include "core/base/warm_pages.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

struct redisContext;

namespace cc {

// A chunk's Redis key: KEY_PREFIX "chunk:" + its XXH3-128 in hex (content-addressed).
inline std::string remote_chunk_key(std::string_view key_prefix, std::string_view xxh128_hex) {
    return std::string(key_prefix) + "chunk:" + std::string(xxh128_hex);
}

struct RemoteTierOptions {
    std::string url;                           // redis://[[user]:password@]host[:port][/db]; empty = none
    // Per chunk value (tests use small ones). 1 MiB: Redis copies each reply into a buffer of
    // its size, and its first replies of 4 MiB and more (every one from 8 MiB) are page-faulted
    // afresh on its side; 48 MB fetched in 21-24 ms with 1-2 MiB chunks against 100-193 ms with
    // 4 MiB in the same sitting, and a cold Redis is fast from its second fetch (bench_remote_tier,
    // docs/deploy.md). A 400 MB group is 400 chunks (a 40 KB manifest).
    size_t chunk_bytes = size_t(1) << 20;
    std::string key_prefix = "cc:";            // every key this tier writes starts with it
    int io_timeout_ms = 10000;                 // connect and each reply
    int lock_ttl_ms = 120000;                  // the compile lock's expiry: longer than a compile
    int wait_ms = 30000;                       // how long a replica waits for another's compile
    int poll_ms = 20;                          // how often it looks for the manifest meanwhile
    // Resident memory kept for fetched groups (core/base/warm_pages.h): touched on a background
    // thread when the tier is made, refilled by the groups the memory tier lets go. A fetch into
    // it skips the first-touch page faults that bound a fresh process's fetches on the VMs we
    // measure on (docs/deploy.md). Costs this much RSS beyond the memory tier. 0 = none.
    size_t warm_bytes = 0;
};

struct RedisEndpoint {
    std::string host = "127.0.0.1";
    int port = 6379;
    int db = 0;
    std::string user;       // ACL user (Redis 6+); empty = "default"
    std::string password;   // empty = no AUTH
};
// Throws std::invalid_argument naming the URL and the problem.
RedisEndpoint parse_redis_url(std::string_view url);

// What the tier did since it was made (this process only).
struct RemoteCounters {
    uint64_t hits = 0;             // groups fetched and verified
    uint64_t misses = 0;           // no manifest
    uint64_t incomplete = 0;       // a chunk was missing (evicted, flushed)
    uint64_t damaged = 0;          // a manifest, chunk or file that did not verify
    uint64_t errors = 0;           // Redis unreachable or answering errors
    uint64_t published = 0;        // groups written
    uint64_t publish_errors = 0;
    uint64_t bytes_read = 0;
    uint64_t bytes_written = 0;
    uint64_t locks_taken = 0;      // compiles this process did for the cluster
    uint64_t waited = 0;           // another replica's compile waited for (and published)
    uint64_t wait_timeouts = 0;    // waited wait_ms, then compiled locally
    // The warm pool (RemoteTierOptions::warm_bytes; all 0 without one).
    uint64_t warm_capacity_bytes = 0;
    uint64_t warm_held_bytes = 0;      // resident, waiting for a fetch
    uint64_t warm_fetched_bytes = 0;   // fetched into the pool's pages
    uint64_t cold_fetched_bytes = 0;   // fetched into fresh pages (the pool was empty)
};

class RemoteTier {
public:
    explicit RemoteTier(RemoteTierOptions options);  // parses the URL (throws); connects lazily
    ~RemoteTier();
    RemoteTier(const RemoteTier&) = delete;
    RemoteTier& operator=(const RemoteTier&) = delete;

    enum class Status { hit, absent, incomplete, damaged, unavailable };
    // A fetched group file (it becomes the group's storage): the warm pool's resident pages where
    // it has them, else fresh huge-page backed memory; never zero-filled before the socket reads
    // fill it. 4 KiB page faults alone cost ~0.8 ms per MB on the VMs we measure on.
    using Bytes = std::vector<std::byte, WarmAllocator<std::byte>>;
    struct Fetch {
        Status status = Status::absent;
        Bytes bytes;                    // the group file's bytes (hit only)
        std::string problem;            // why not a hit, for incomplete / damaged / unavailable
        double load_ms = 0;             // manifest + chunks + checksums
        double gb_s = 0;
        size_t n_chunks = 0;
    };
    Fetch fetch(const std::string& group_key);

    // Chunks, then the manifest. `info` is copied into the manifest (model fingerprint, token
    // count: what a person listing the keys wants to see). Throws std::runtime_error.
    struct ManifestInfo {
        std::string model_fingerprint;
        size_t n_tokens = 0;
    };
    void publish(const std::string& group_key, std::span<const std::byte> file_bytes, const ManifestInfo& info);

    enum class Claim {
        mine,          // this process holds the lock: compile, publish, release
        published,     // the group appeared (another replica published it): fetch it
        timed_out,     // another held the lock past wait_ms: compile locally
        unavailable    // Redis did not answer: compile locally
    };
    Claim claim_compile(const std::string& group_key);
    void release_compile(const std::string& group_key);  // no-op unless this process holds it

    // Whether Redis answers (PING, on a pooled or new connection): "" when it does, else why not
    // (the URL without its password and the error). Counts nothing; for a status line.
    std::string check();

    // Deletes the manifest (the chunks age out under LRU). False when there was none.
    bool remove(const std::string& group_key);

    RemoteCounters counters() const;
    void count_damaged() { counters_.damaged++; }   // bytes that passed the chunk checks but not the group file's
    std::string describe() const;   // the URL without its password
    const RemoteTierOptions& options() const { return options_; }

    std::string manifest_key(const std::string& group_key) const { return options_.key_prefix + "group:" + group_key; }
    std::string lock_key(const std::string& group_key) const { return options_.key_prefix + "lock:" + group_key; }
    std::string chunk_key(std::string_view xxh128_hex) const { return remote_chunk_key(options_.key_prefix, xxh128_hex); }

private:
    struct ConnDeleter {
        void operator()(redisContext* c) const;
    };
    using ConnPtr = std::unique_ptr<redisContext, ConnDeleter>;
    ConnPtr acquire();                 // from the pool or a new connection (throws)
    void release(ConnPtr conn);        // back to the pool unless it failed

    RemoteTierOptions options_;
    RedisEndpoint endpoint_;
    std::string owner_;                // this process's lock token prefix (host:pid:random)
    mutable std::mutex mutex_;
    struct Pooled {
        ConnPtr conn;
        std::chrono::steady_clock::time_point released;
    };
    std::vector<Pooled> pool_;
    std::map<std::string, std::string> held_locks_;  // group_key -> token
    uint64_t lock_serial_ = 0;

    std::shared_ptr<WarmPages> warm_;  // null without warm_bytes; buffers out hold it too
    std::thread warm_filler_;

    struct AtomicCounters {
        std::atomic<uint64_t> hits{0}, misses{0}, incomplete{0}, damaged{0}, errors{0}, published{0}, publish_errors{0},
            bytes_read{0}, bytes_written{0}, locks_taken{0}, waited{0}, wait_timeouts{0};
    } counters_;
};

// A group's manifest (docs/file-formats.md, "The remote tier's keys"), as parse_remote_manifest() checked it:
// the chunk keys are their contents' (KEY_PREFIX "chunk:" + XXH3-128), and the chunk sizes, each
// at least one byte, add up to file_bytes.
struct RemoteManifest {
    uint64_t file_bytes = 0;
    std::string file_xxh128;
    struct Chunk {
        std::string key;
        uint64_t bytes = 0;
        std::string xxh128;
    };
    std::vector<Chunk> chunks;
};

// Parses and checks a manifest read from Redis (outside input: anything could have written it)
// for `group_key`; throws std::runtime_error naming the problem.
RemoteManifest parse_remote_manifest(std::string_view text, std::string_view group_key, std::string_view key_prefix);

const char* remote_status_name(RemoteTier::Status status);  // "hit" | "absent" | "incomplete" | "damaged" | "unavailable"

}  // namespace cc
