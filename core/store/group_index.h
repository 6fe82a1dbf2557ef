// The cache index (DESIGN §7): derived metadata about the group files in SQLite (WAL mode, busy
// timeout), so the app and several CLI processes update usage counters safely. It is only a cache of
// the group files' headers plus usage counters: when index.sqlite is missing or damaged it is
// rebuilt from groups/*.kv.
#pragma once

#include "core/store/group_meta.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cc {

// One row: the group's summary (prefix_ids for longest-prefix reuse) and the file's usage.
struct IndexEntry : GroupSummary {
    uint64_t kv_bytes = 0;             // canonical payload bytes
    uint64_t file_bytes = 0;           // size of groups/<key>.kv
    int64_t last_used_unix_ms = 0;
    uint64_t hits = 0;
};

// The index entry a group file's header describes (hits 0; last_used = created).
IndexEntry index_entry_from_header(const GroupMeta& header, uint64_t file_bytes);

class GroupIndex {
public:
    // Opens (creating when missing) `cache_dir`/index.sqlite. A file that is not a usable SQLite
    // database, or has another schema version, is moved aside (index.sqlite.damaged-<unix ms>) and
    // rebuilt from `cache_dir`/groups/*.kv. Throws std::runtime_error naming the file when the
    // directory cannot be used at all.
    explicit GroupIndex(const std::filesystem::path& cache_dir);
    ~GroupIndex();
    GroupIndex(const GroupIndex&) = delete;
    GroupIndex& operator=(const GroupIndex&) = delete;

    // Inserts or replaces the metadata of one group; keeps its hits and last_used when it exists. A new
    // entry starts with entry.hits and entry.last_used_unix_ms (created_unix_ms when that is 0).
    void upsert(const IndexEntry& entry);
    // last_used = now, or just past the latest use of any entry if that reads later (the same
    // millisecond, a clock stepped back), hits += 1 (one statement: safe against concurrent
    // processes). Returns false (and changes nothing) when there is no entry for `group_key`.
    bool touch(const std::string& group_key);
    std::optional<IndexEntry> get(const std::string& group_key) const;
    std::vector<IndexEntry> list() const;  // most recently used first
    // Entries that could share a prefix with a group of this model/format/numerics.
    std::vector<IndexEntry> candidates(const std::string& model_fingerprint, const std::string& chat_format,
                                       const std::string& backend_numerics) const;
    void remove(const std::string& group_key);
    void clear();
    // Drops every entry, then re-reads each groups/*.kv header (bad files are skipped and reported).
    // Returns the problems found, one line each, naming the file.
    std::vector<std::string> rebuild();
    // Entries whose file is gone (or no longer reads) are dropped; files without an entry, or whose
    // size differs from the entry's, are read and added with their counters kept. Returns problems.
    std::vector<std::string> reconcile();
    uint64_t total_file_bytes() const;

    const std::filesystem::path& path() const;  // index.sqlite
    bool was_rebuilt() const;                   // true when opening found it missing/damaged and rebuilt
    // What opening found, one line each, for the log: why a damaged index was moved aside (and where
    // to), and the problems the rebuild on open reported. Empty after an ordinary open.
    const std::vector<std::string>& open_report() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace cc
