// The group cache (DESIGN §7): compiled prefixes (K/V of the system prompt + tool schemas) keyed by
// group_key, in tiers: host memory (shared KvBlocks, LRU within a byte budget) and disk (one
// immutable file per group, groups/<group_key>.kv, with an SQLite index of usage; LRU within a
// byte budget). A group found on disk is mapped and verified in place (header, size, checksums,
// stored prefix token ids) before any byte reaches the model, then promoted to memory, where the
// CPU backend attends to the mapping itself (zero copy). Anything that does not verify
// is reported, moved to groups/quarantine/ and treated as a miss.
//
// With a backend that keeps KV on the device (Backend::kv_on_device, set_backend), a third tier
// comes first: "gpu" holds the device KvBlocks (own budget, LRU; a hit copies nothing). A group
// evicted from it is demoted to the host tier ("memory") as canonical bytes (export_kv) when the
// host budget allows; a host hit uploads them (import_kv, timed as upload_ms / upload_gb_s) and
// promotes the group to the GPU again; a disk hit uploads (link_kv) and promotes too. With a CPU
// backend there is no GPU tier: "memory" holds the KvBlocks, then "disk".
#pragma once

#include "core/backend/backend.h"
#include "core/base/sha256.h"
#include "core/base/timings.h"
#include "core/store/group_file.h"
#include "core/store/group_meta.h"
#include "core/store/remote_tier.h"
#include "core/store/tier.h"
#include "core/text/tokenizer.h"

#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace cc {

class GroupIndex;

// One compiled prefix: its record (what the file header holds) and its K/V. Immutable once
// inserted; shared read-only by every query that links it.
struct Group : GroupMeta {
    Group() = default;
    explicit Group(GroupMeta meta) : GroupMeta(std::move(meta)) {}

    std::unique_ptr<KvBlock> kv;   // kv->n_tokens() == n_tokens()
    size_t kv_bytes = 0;           // canonical bytes (Backend::kv_bytes)
};

// A row of the cache listing.
struct GroupInfo : GroupSummary {
    size_t kv_bytes = 0;
    size_t file_bytes = 0;         // 0 when not on disk
    Tier tier = Tier::disk;        // gpu or memory (also on disk when file_bytes > 0), or disk
    int64_t last_used_unix_ms = 0;
    uint64_t hits = 0;
    bool in_use = false;
};

struct GroupStoreOptions {
    std::filesystem::path dir;                     // empty = memory tier only (no files)
    size_t host_budget_bytes = size_t(4) << 30;    // memory tier
    size_t gpu_budget_bytes = size_t(8) << 30;     // gpu tier (device KV; used with a kv_on_device backend)
    size_t disk_budget_bytes = size_t(32) << 30;   // group files
    RemoteTierOptions remote;                      // remote.url empty = no remote tier (remote_tier.h)
};

struct PersistResult {
    bool ok = false;
    double persist_ms = 0;
    std::string error;   // why the write failed (disk full, read-only directory, ...); a warning
};

class GroupStore {
public:
    explicit GroupStore(GroupStoreOptions options = {});
    ~GroupStore();
    GroupStore(const GroupStore&) = delete;
    GroupStore& operator=(const GroupStore&) = delete;

    struct Lookup {
        std::shared_ptr<const Group> group;  // null on a miss
        Tier tier = Tier::miss;
        std::string problem;                 // why a stored entry was refused, if one was
        double lookup_ms = 0;
        double disk_load_ms = 0;             // map + checksum verification in place (the file's pages)
        double upload_ms = 0;                // the mapping or host bytes -> a KV block (link_kv / import_kv;
                                             // ~0 when linked in place)
        double disk_load_gb_s = 0;           // file bytes / disk_load_ms
        double remote_load_ms = 0;           // the remote tier's fetch (manifest + chunks + checksums) + verification
        double remote_load_gb_s = 0;         // file bytes / remote_load_ms
        double upload_gb_s = 0;              // KV bytes / upload_ms when they were copied (0 when linked in place)
    };
    // A hit needs the key AND the stored prefix ids to equal `prefix_ids` AND the stored group to
    // match `expected`'s model fingerprint, chat format and numerics (fail closed). A disk hit
    // is linked into `backend` (Backend::link_kv) and promoted to memory (the GPU tier with a device
    // backend, which must be the one given to set_backend).
    Lookup find(const std::string& group_key, std::span<const token_id> prefix_ids, const GroupMeta& expected,
                Backend& backend);
    // Memory (or GPU) tier insert, then LRU eviction (never of an entry a query holds).
    void insert(std::shared_ptr<const Group> group);

    // The backend whose KvBlocks the first tier holds (null = none yet: a CPU-style memory tier).
    // A backend with kv_on_device() makes that tier "gpu" and adds the host tier of canonical
    // bytes. Leaving a device backend demotes its blocks to the host tier (the old backend must
    // still exist during the call); blocks or bytes another kind of backend cannot use are dropped
    // (their numerics differ, so they could never be hit).
    void set_backend(Backend* backend);
    bool on_device() const;
    // Writes the group file (temp + fsync + rename) and its index entry, then keeps the disk tier
    // within budget; with a remote tier, publishes the group there too and releases the compile
    // lock claim_compile took. Safe to call from a background thread; never throws.
    PersistResult persist(const std::shared_ptr<const Group>& group, std::vector<std::byte> canonical_kv);
    // The same from the canonical KV a layer at a time (group_file.h's GroupLayerSource): the file
    // is written without a second copy of the whole KV in memory.
    PersistResult persist(const std::shared_ptr<const Group>& group, const GroupLayerSource& layers);

    // The stored group (memory or disk) sharing the longest run of leading token ids with
    // `prefix_ids` (same model, chat format and numerics), if it shares at least one token.
    struct PrefixMatch {
        std::string group_key;
        std::vector<token_id> prefix_ids;
        size_t n_common = 0;
    };
    std::optional<PrefixMatch> longest_prefix(std::span<const token_id> prefix_ids, const GroupMeta& expected) const;

    // Every stored group of `expected`'s model, chat format and numerics (gpu, memory and disk
    // tiers, each key once, most recently used first), described without its KV: what `why`
    // compares a missing tool set with. A disk group's description is its file header (read, not
    // verified: nothing of it reaches the model); a file that does not read is skipped.
    struct StoredGroup {
        GroupMeta meta;
        Tier tier = Tier::disk;              // gpu, memory or disk
        int64_t last_used_unix_ms = 0;
    };
    std::vector<StoredGroup> comparable(const GroupMeta& expected) const;

    // The tier holding the group: gpu, memory, disk (a file exists; not verified until used), or
    // miss (not cached).
    Tier tier_of(const std::string& group_key) const;
    std::vector<GroupInfo> list() const;          // gpu, memory and disk, most recently used first
    // Reads every group file in full (header, size, checksums); bad ones are quarantined. Returns
    // one line per problem (empty when all are good). A file another process removes meanwhile
    // (gc, rm) is not a problem.
    std::vector<std::string> verify();
    // Removes the temp files of writers that died before their rename (remove_stale_temp_files in
    // group_file.h); also done by every gc. Returns their names.
    std::vector<std::string> remove_stale_temp_files();
    bool remove(const std::string& group_key);    // from every tier
    bool drop_from_memory(const std::string& group_key);  // evict from the gpu and memory tiers (disk stays)
    void clear();                                 // every tier
    // Removes least-recently-used group files (not in use here) until they total <= max_bytes.
    // Returns the keys removed.
    std::vector<std::string> gc(size_t max_bytes);

    size_t memory_bytes() const;                  // the host tier ("memory")
    size_t memory_size() const;
    size_t gpu_bytes() const;                     // the GPU tier (0 without a device backend)
    size_t gpu_size() const;
    uint64_t disk_bytes() const;
    bool persistent() const { return !options_.dir.empty(); }

    // The shared remote tier (null when none is configured). find() tries it after the disk tier;
    // a hit is verified as a group file, linked, and promoted to memory and (in the background) disk.
    RemoteTier* remote() const { return remote_.get(); }
    // Compile once per cluster (remote_tier.h): mine (compile, then persist() publishes and
    // releases), published (find() again), timed_out or unavailable (compile locally). Without a
    // remote tier: mine.
    RemoteTier::Claim claim_compile(const std::string& group_key);
    void release_compile(const std::string& group_key);   // after a compile that will not be persisted
    void wait_for_promotions();                           // remote hits still being written to disk
    const GroupStoreOptions& options() const { return options_; }
    std::filesystem::path group_path(const std::string& group_key) const;
    // Moves a bad file to groups/quarantine/ and drops its index entry; returns the new path.
    std::filesystem::path quarantine(const std::string& group_key, const std::string& reason);
    std::vector<std::string> take_warnings();     // problems met while opening (index rebuilt, ...)

private:
    struct Entry {
        std::shared_ptr<const Group> group;
        int64_t last_used_unix_ms = 0;
        uint64_t hits = 0;
        uint64_t use_tick = 0;
    };
    // A group demoted from the GPU tier: its record and canonical KV bytes.
    struct HostEntry {
        GroupMeta meta;
        std::shared_ptr<const std::vector<std::byte>> bytes;
        int64_t last_used_unix_ms = 0;
        uint64_t hits = 0;
        uint64_t use_tick = 0;
    };
    // find's steps, one per tier, in the order they are tried; each fills `result` (group, tier,
    // problem, timings). The _locked ones run under mutex_.
    bool find_in_first_tier_locked(const std::string& group_key, std::span<const token_id> prefix_ids, Lookup& result);
    std::optional<HostEntry> take_from_host_tier_locked(const std::string& group_key, std::span<const token_id> prefix_ids,
                                                        Lookup& result);
    void upload_from_host_tier(const std::string& group_key, HostEntry entry, Backend& backend, Lookup& result);
    void link_from_disk(const std::string& group_key, std::span<const token_id> prefix_ids, const GroupMeta& expected,
                        Backend& backend, Lookup& result);
    void fetch_from_remote(const std::string& group_key, std::span<const token_id> prefix_ids, const GroupMeta& expected,
                           Backend& backend, Lookup& result);
    void publish_to_remote(const Group& group, const GroupLayerSource& layers, bool file_written, PersistResult& r);
    static std::string disk_mismatch(const GroupMeta& header, const std::string& group_key,
                                     std::span<const token_id> prefix_ids, const GroupMeta& expected,
                                     const Backend& backend);
    void touch_index_locked(const std::string& group_key);  // usage counters; errors are ignored
    void insert_locked(std::shared_ptr<const Group> group, uint64_t hits);
    void evict_memory_locked(const std::string& keep);
    void demote_locked(const std::string& key, const Entry& entry);
    void evict_host_locked();
    bool drop_from_memory_locked(const std::string& key);  // the gpu and memory tiers' entries of key
    size_t first_budget() const;
    Tier first_tier() const;
    std::vector<std::string> gc_locked(size_t max_bytes);

    GroupStoreOptions options_;
    mutable std::mutex mutex_;
    std::unordered_map<std::string, Entry> entries_;   // the first tier: "memory" (CPU) or "gpu"
    size_t bytes_ = 0;
    Backend* backend_ = nullptr;                       // set_backend
    bool on_device_ = false;                           // backend_->kv_on_device()
    std::unordered_map<std::string, HostEntry> host_;  // the host tier behind "gpu" (device backends only)
    size_t host_bytes_ = 0;
    uint64_t tick_ = 0;
    std::unique_ptr<GroupIndex> index_;   // null for a memory-only store
    std::vector<std::string> warnings_;
    std::unique_ptr<RemoteTier> remote_;            // null = no remote tier
    std::mutex promotions_mutex_;
    std::vector<std::future<void>> promotions_;     // remote hits being written to the disk tier
};


}  // namespace cc
