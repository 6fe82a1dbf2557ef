// The group cache (DESIGN §7): compiled prefixes (K/V of the system prompt + tool schemas) keyed by
// group_key. This is the memory tier; the disk tier and the index come with the persistent-cache
// work and plug in behind the same find/insert calls.
#pragma once

#include "core/backend.h"
#include "core/tokenizer.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace cc {

// One compiled prefix. Immutable once inserted; shared read-only by every query that links it.
struct Group {
    std::string group_key;
    std::string tools_hash;
    std::vector<std::string> tool_names;
    std::vector<token_id> prefix_ids;
    std::unique_ptr<KvBlock> kv;   // n_tokens() == prefix_ids.size()
    size_t kv_bytes = 0;           // canonical bytes (Backend::kv_bytes)
    int64_t created_unix_ms = 0;
};

struct GroupInfo {
    std::string group_key;
    std::string tools_hash;
    std::vector<std::string> tool_names;
    size_t n_tokens = 0;
    size_t kv_bytes = 0;
    std::string tier;              // "memory"
    int64_t created_unix_ms = 0;
    int64_t last_used_unix_ms = 0;
    uint64_t hits = 0;
    bool in_use = false;
};

struct GroupStoreOptions {
    size_t host_budget_bytes = size_t(4) << 30;  // memory tier budget
};

class GroupStore {
public:
    explicit GroupStore(GroupStoreOptions options = {});

    struct Lookup {
        std::shared_ptr<const Group> group;  // null on a miss
        std::string tier = "miss";           // "memory" or "miss"
        std::string problem;                 // why a stored entry was refused (e.g. token-id mismatch)
    };
    // A hit needs the key AND the stored prefix ids to equal `prefix_ids` (fail closed: a
    // mismatching entry is dropped and reported, never used).
    Lookup find(const std::string& group_key, std::span<const token_id> prefix_ids);
    // Inserts (or replaces) a group, then evicts least-recently-used entries not in use until the
    // memory tier is within budget. The entry just inserted is never evicted by its own insert.
    void insert(std::shared_ptr<const Group> group);

    std::vector<GroupInfo> list() const;  // most recently used first
    bool remove(const std::string& group_key);
    void clear();
    size_t bytes() const;
    size_t size() const;
    const GroupStoreOptions& options() const { return options_; }

private:
    struct Entry {
        std::shared_ptr<const Group> group;
        int64_t last_used_unix_ms = 0;
        uint64_t hits = 0;
        uint64_t use_tick = 0;  // LRU order (a clock's milliseconds can tie)
    };
    void evict_locked(const std::string& keep);

    GroupStoreOptions options_;
    mutable std::mutex mutex_;
    std::unordered_map<std::string, Entry> entries_;
    size_t bytes_ = 0;
    uint64_t tick_ = 0;
};

int64_t unix_ms_now();

}  // namespace cc
