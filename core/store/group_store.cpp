#include "core/store/group_store.h"

#include "core/store/group_file.h"
#include "core/store/group_index.h"
#include "core/base/mapped_file.h"
#include "core/base/paths.h"
#include "core/base/timings.h"
#include "core/text/token_prefix.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace cc {
namespace fs = std::filesystem;

namespace {

// A row of the listing: the group's summary and where it is.
GroupInfo listing_row(const GroupSummary& summary, size_t kv_bytes, Tier tier, int64_t last_used_unix_ms,
                      uint64_t hits) {
    GroupInfo info;
    static_cast<GroupSummary&>(info) = summary;
    info.kv_bytes = kv_bytes;
    info.tier = tier;
    info.last_used_unix_ms = last_used_unix_ms;
    info.hits = hits;
    return info;
}

}  // namespace

GroupStore::GroupStore(GroupStoreOptions options) : options_(std::move(options)) {
    if (!options_.remote.url.empty()) remote_ = std::make_unique<RemoteTier>(options_.remote);
    if (options_.dir.empty()) return;
    ensure_private_dir(options_.dir);
    ensure_private_dir(options_.dir / "groups");
    index_ = std::make_unique<GroupIndex>(options_.dir);
    for (const auto& line : index_->open_report()) warnings_.push_back(line);
    for (auto& p : index_->reconcile()) warnings_.push_back(std::move(p));
}

GroupStore::~GroupStore() { wait_for_promotions(); }

void GroupStore::wait_for_promotions() {
    std::vector<std::future<void>> pending;
    {
        std::lock_guard lock(promotions_mutex_);
        pending = std::exchange(promotions_, {});
    }
    for (auto& f : pending) f.wait();
}

RemoteTier::Claim GroupStore::claim_compile(const std::string& group_key) {
    return remote_ ? remote_->claim_compile(group_key) : RemoteTier::Claim::mine;
}

void GroupStore::release_compile(const std::string& group_key) {
    if (remote_) remote_->release_compile(group_key);
}

fs::path GroupStore::group_path(const std::string& group_key) const { return options_.dir / "groups" / (group_key + ".kv"); }

std::vector<std::string> GroupStore::take_warnings() {
    std::lock_guard lock(mutex_);
    return std::exchange(warnings_, {});
}

fs::path GroupStore::quarantine(const std::string& group_key, const std::string& reason) {
    const fs::path from = group_path(group_key);
    const fs::path dir = options_.dir / "groups" / "quarantine";
    std::error_code ec;
    fs::create_directories(dir, ec);
    const fs::path to = dir / (group_key + "." + std::to_string(unix_ms_now()) + ".kv");
    fs::rename(from, to, ec);
    if (ec) fs::remove(from, ec);  // could not move it aside: at least never read it again
    std::lock_guard lock(mutex_);
    warnings_.push_back(reason + " (moved to " + to.string() + ")");
    if (index_) {
        try {
            index_->remove(group_key);
        } catch (const std::exception&) {
        }
    }
    return to;
}

namespace {

bool same_ids(std::span<const token_id> a, std::span<const token_id> b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

double gb_per_s(size_t bytes, double ms) { return ms > 0 ? double(bytes) / (ms * 1e6) : 0; }

}  // namespace

GroupStore::Lookup GroupStore::find(const std::string& group_key, std::span<const token_id> prefix_ids,
                                    const GroupMeta& expected, Backend& backend) {
    Stopwatch clock;
    Lookup result;
    std::optional<HostEntry> from_host;
    {
        std::lock_guard lock(mutex_);
        if (backend.kv_on_device() && &backend != backend_)
            throw std::logic_error("GroupStore::find: a device backend must be given to set_backend() first");
        if (find_in_first_tier_locked(group_key, prefix_ids, result)) {
            result.lookup_ms = clock.elapsed_ms();
            return result;
        }
        from_host = take_from_host_tier_locked(group_key, prefix_ids, result);
    }
    result.lookup_ms = clock.elapsed_ms();
    if (from_host)
        upload_from_host_tier(group_key, std::move(*from_host), backend, result);
    else
        link_from_disk(group_key, prefix_ids, expected, backend, result);
    if (!result.group && remote_) fetch_from_remote(group_key, prefix_ids, expected, backend, result);
    return result;
}

// The first tier (gpu, or memory with a CPU backend): the block is where the backend reads it, so
// a hit copies nothing. An entry whose ids differ is dropped (the group is recompiled).
bool GroupStore::find_in_first_tier_locked(const std::string& group_key, std::span<const token_id> prefix_ids,
                                           Lookup& result) {
    auto it = entries_.find(group_key);
    if (it == entries_.end()) return false;
    const Group& g = *it->second.group;
    if (!same_ids(g.prefix_ids, prefix_ids)) {
        result.problem = "group " + group_key.substr(0, 12) + ": stored prefix token ids differ from the rendered prefix (" +
                         std::to_string(g.prefix_ids.size()) + " vs " + std::to_string(prefix_ids.size()) +
                         " tokens); entry dropped and recompiled";
        bytes_ -= g.kv_bytes;
        entries_.erase(it);
        return false;
    }
    it->second.last_used_unix_ms = unix_ms_now();
    it->second.use_tick = ++tick_;
    it->second.hits += 1;
    result.group = it->second.group;
    result.tier = first_tier();
    touch_index_locked(group_key);
    // Eviction skips the groups requests hold; those held when the last insert came stay over the
    // budget until something evicts again. Without this, after concurrent use and then only hits,
    // the tier would stay over its budget for good (the soak found 15 MB under a 6 MB budget).
    evict_memory_locked(group_key);
    return true;
}

// The host tier behind "gpu" (device backends only): the entry is taken out, matching or not; a
// matching one is uploaded and moves to the GPU tier.
std::optional<GroupStore::HostEntry> GroupStore::take_from_host_tier_locked(const std::string& group_key,
                                                                          std::span<const token_id> prefix_ids,
                                                                          Lookup& result) {
    auto it = host_.find(group_key);
    if (it == host_.end()) return std::nullopt;
    HostEntry entry = std::move(it->second);
    host_bytes_ -= entry.bytes->size();
    host_.erase(it);
    if (same_ids(entry.meta.prefix_ids, prefix_ids)) return entry;
    if (result.problem.empty())
        result.problem = "group " + group_key.substr(0, 12) +
                         ": stored prefix token ids differ from the rendered prefix; entry dropped and recompiled";
    return std::nullopt;
}

// Host tier -> GPU: one upload of the canonical bytes, then the group lives on the device.
void GroupStore::upload_from_host_tier(const std::string& group_key, HostEntry entry, Backend& backend,
                                       Lookup& result) {
    Stopwatch upload_clock;
    const size_t n_bytes = entry.bytes->size();
    std::unique_ptr<KvBlock> kv;
    try {
        const int n = static_cast<int>(entry.meta.n_tokens());
        kv = backend.import_kv(*entry.bytes, n, n, n);
    } catch (...) {
        std::lock_guard lock(mutex_);  // e.g. out of device memory: the bytes stay in the host tier
        host_bytes_ += n_bytes;
        host_.emplace(group_key, std::move(entry));
        throw;
    }
    auto group = std::make_shared<Group>(std::move(entry.meta));
    group->kv = std::move(kv);
    group->kv_bytes = n_bytes;
    result.upload_ms = upload_clock.elapsed_ms();
    result.upload_gb_s = gb_per_s(n_bytes, result.upload_ms);
    result.group = group;
    result.tier = Tier::memory;
    std::lock_guard lock(mutex_);
    insert_locked(std::move(group), entry.hits + 1);
    touch_index_locked(group_key);
}

// Disk: map the file and verify its checksums in place, then check that it is the group we
// rendered. Nothing is copied: a backend that links in place (CPU) attends to the mapping
// itself, and the Group's KV block keeps the mapping alive for as long as any query holds it.
// (Replacing the file by rename or removing it leaves this mapping valid; see mapped_file.h
// for an outside program truncating it in place.) A file that does not verify is quarantined.
void GroupStore::link_from_disk(const std::string& group_key, std::span<const token_id> prefix_ids,
                                const GroupMeta& expected, Backend& backend, Lookup& result) {
    if (!index_) return;
    const fs::path path = group_path(group_key);
    std::error_code ec;
    if (!fs::exists(path, ec)) return;

    Stopwatch load_clock;
    MappedGroupFile mapped;
    try {
        mapped = map_group_file(path);
        const std::string mismatch = disk_mismatch(mapped.header, group_key, prefix_ids, expected, backend);
        if (!mismatch.empty()) throw std::runtime_error(path.string() + ": " + mismatch);
    } catch (const std::exception& e) {
        // Removed by another process (gc, rm) since the exists() above: a plain miss, not damage.
        if (!fs::exists(path, ec)) return;
        const auto moved = quarantine(group_key, e.what());
        result.problem = std::string(e.what()) + "; moved to " + moved.string() + " and recompiled";
        return;
    }
    result.disk_load_ms = load_clock.elapsed_ms();
    result.disk_load_gb_s = gb_per_s(mapped.file->size(), result.disk_load_ms);

    Stopwatch upload_clock;
    auto group = std::make_shared<Group>(std::move(mapped.header));
    // In place (CPU: ~0 ms) or a copy into the backend's memory (the default import_kv).
    group->kv = backend.link_kv(mapped.payload, static_cast<int>(group->n_tokens()), mapped.file);
    // The memory tier counts a linked group's bytes like an imported one's: they are the mapped
    // file's pages, resident while the group is used.
    group->kv_bytes = mapped.payload.size();
    result.upload_ms = upload_clock.elapsed_ms();
    if (!backend.links_in_place()) result.upload_gb_s = gb_per_s(mapped.payload.size(), result.upload_ms);
    result.group = group;
    result.tier = Tier::disk;
    IndexEntry entry = index_entry_from_header(*group, mapped.file->size());
    std::lock_guard lock(mutex_);
    insert_locked(std::move(group), 0);
    try {
        // A file the index lacks (its writer was killed between the rename and the upsert) would
        // stay outside the disk budget, where no gc sees it: it is indexed again when it is used.
        if (!index_->touch(group_key)) {
            entry.last_used_unix_ms = unix_ms_now();
            entry.hits = 1;
            index_->upsert(entry);
        }
    } catch (const std::exception&) {
        // usage counters only: a busy or read-only index does not fail a lookup
    }
}

// The remote tier: fetch the group file's bytes (chunk checksums checked there), verify them as a
// group file (header, size, layer checksums) and as the group looked up (key, model, numerics,
// prefix token ids), link them (in place on the CPU: the block keeps the bytes alive), promote
// to memory now and to the disk tier in the background. Anything else is a miss.
void GroupStore::fetch_from_remote(const std::string& group_key, std::span<const token_id> prefix_ids,
                                   const GroupMeta& expected, Backend& backend, Lookup& result) {
    Stopwatch load_clock;
    RemoteTier::Fetch fetched = remote_->fetch(group_key);
    if (fetched.status != RemoteTier::Status::hit) {
        if (!fetched.problem.empty() && result.problem.empty()) result.problem = fetched.problem + "; recompiled";
        if (!fetched.problem.empty()) {
            std::lock_guard lock(mutex_);
            warnings_.push_back(fetched.problem);
        }
        return;
    }
    auto bytes = std::make_shared<const RemoteTier::Bytes>(std::move(fetched.bytes));
    VerifiedGroupBytes verified;
    const std::string source = remote_->describe() + " group " + group_key.substr(0, 12);
    try {
        verified = verify_group_bytes(*bytes, source);
        const std::string mismatch = disk_mismatch(verified.header, group_key, prefix_ids, expected, backend);
        if (!mismatch.empty()) throw std::runtime_error(source + ": " + mismatch);
    } catch (const std::exception& e) {
        remote_->count_damaged();
        result.problem = std::string(e.what()) + "; not used, recompiled";
        std::lock_guard lock(mutex_);
        warnings_.push_back(result.problem);
        return;
    }
    result.remote_load_ms = load_clock.elapsed_ms();
    result.remote_load_gb_s = gb_per_s(bytes->size(), result.remote_load_ms);

    Stopwatch upload_clock;
    const GroupMeta header = verified.header;
    auto group = std::make_shared<Group>(std::move(verified.header));
    group->kv = backend.link_kv(verified.payload, static_cast<int>(group->n_tokens()), bytes);
    group->kv_bytes = verified.payload.size();
    result.upload_ms = upload_clock.elapsed_ms();
    if (!backend.links_in_place()) result.upload_gb_s = gb_per_s(verified.payload.size(), result.upload_ms);
    result.group = group;
    result.tier = Tier::remote;
    {
        std::lock_guard lock(mutex_);
        insert_locked(std::move(group), 0);
    }
    if (!index_) return;
    // Promotion to the disk tier off the query's path: the file is written atomically (a reader
    // sees it whole or not at all) and indexed; a failure is a warning (the group is in memory).
    std::lock_guard lock(promotions_mutex_);
    promotions_.erase(std::remove_if(promotions_.begin(), promotions_.end(),
                                     [](const std::future<void>& f) {
                                         return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
                                     }),
                      promotions_.end());
    promotions_.push_back(std::async(std::launch::async, [this, group_key, header, bytes] {
        try {
            const fs::path path = group_path(group_key);
            write_group_file_bytes(path, *bytes);
            auto entry = index_entry_from_header(header, bytes->size());
            entry.last_used_unix_ms = unix_ms_now();
            std::lock_guard lock(mutex_);
            index_->upsert(entry);
            gc_locked(options_.disk_budget_bytes);
        } catch (const std::exception& e) {
            std::lock_guard lock(mutex_);
            warnings_.push_back("group " + group_key.substr(0, 12) + ": fetched from the remote tier but not written to disk: " +
                                e.what());
        }
    }));
}

// Why a verified group file is not the group looked up ("" when it is).
std::string GroupStore::disk_mismatch(const GroupMeta& h, const std::string& group_key,
                                      std::span<const token_id> prefix_ids, const GroupMeta& expected,
                                      const Backend& backend) {
    const auto& c = backend.config();
    if (h.group_key != group_key) return "header group_key " + h.group_key.substr(0, 12) + " differs from the file name";
    if (h.model_fingerprint != expected.model_fingerprint) return "written for another model fingerprint";
    if (h.backend_numerics != backend.numerics_id()) return "written by backend " + h.backend_numerics;
    if (h.chat_format != expected.chat_format) return "written for chat format " + h.chat_format;
    if (h.n_layers != c.n_layers || h.n_kv_heads != c.n_kv_heads || h.head_dim != c.head_dim ||
        h.kv_dtype != backend.kv_dtype())
        return "KV shape or dtype differs from this model's";
    if (!same_ids(h.prefix_ids, prefix_ids)) return "stored prefix token ids differ from the rendered prefix";
    return "";
}

void GroupStore::touch_index_locked(const std::string& group_key) {
    if (!index_) return;
    try {
        index_->touch(group_key);
    } catch (const std::exception&) {
        // usage counters only: a busy or read-only index does not fail a lookup
    }
}

void GroupStore::insert(std::shared_ptr<const Group> group) {
    std::lock_guard lock(mutex_);
    insert_locked(std::move(group), 0);
}

void GroupStore::insert_locked(std::shared_ptr<const Group> group, uint64_t hits) {
    const std::string key = group->group_key;
    if (auto it = entries_.find(key); it != entries_.end()) {  // e.g. inserted meanwhile by another thread
        bytes_ -= it->second.group->kv_bytes;
        entries_.erase(it);
    }
    bytes_ += group->kv_bytes;
    entries_[key] = Entry{std::move(group), unix_ms_now(), hits, ++tick_};
    evict_memory_locked(key);
}

size_t GroupStore::first_budget() const { return on_device_ ? options_.gpu_budget_bytes : options_.host_budget_bytes; }

Tier GroupStore::first_tier() const { return on_device_ ? Tier::gpu : Tier::memory; }

void GroupStore::evict_memory_locked(const std::string& keep) {
    while (bytes_ > first_budget()) {
        // The least recently used entry that no query holds (use_count 1 = only this map).
        auto victim = entries_.end();
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if (it->first == keep || it->second.group.use_count() > 1) continue;
            if (victim == entries_.end() || it->second.use_tick < victim->second.use_tick) victim = it;
        }
        if (victim == entries_.end()) return;  // everything left is in use: over budget until released
        bytes_ -= victim->second.group->kv_bytes;
        const Entry entry = std::move(victim->second);
        const std::string key = victim->first;
        entries_.erase(victim);
        if (on_device_) demote_locked(key, entry);
    }
}

void GroupStore::demote_locked(const std::string& key, const Entry& entry) {
    const Group& g = *entry.group;
    // A group larger than the whole host budget is not copied just to be evicted again.
    if (!g.kv || !backend_ || g.kv_bytes > options_.host_budget_bytes) return;
    const int n = static_cast<int>(g.prefix_ids.size());
    auto bytes = std::make_shared<std::vector<std::byte>>(backend_->kv_bytes(n));
    try {
        backend_->export_kv(*g.kv, n, *bytes);
    } catch (const std::exception& e) {
        warnings_.push_back("group " + key.substr(0, 12) + ": not demoted to host memory: " + e.what());
        return;
    }
    host_bytes_ += bytes->size();
    host_[key] = HostEntry{GroupMeta(g), std::move(bytes), entry.last_used_unix_ms, entry.hits, entry.use_tick};
    evict_host_locked();
}

void GroupStore::evict_host_locked() {
    // Host entries are plain bytes no query holds (a query holds the GPU block made from them).
    while (host_bytes_ > options_.host_budget_bytes && !host_.empty()) {
        auto victim = host_.begin();
        for (auto it = host_.begin(); it != host_.end(); ++it)
            if (it->second.use_tick < victim->second.use_tick) victim = it;
        host_bytes_ -= victim->second.bytes->size();
        host_.erase(victim);
    }
}

void GroupStore::set_backend(Backend* backend) {
    std::lock_guard lock(mutex_);
    if (backend == backend_) return;
    const bool next_on_device = backend && backend->kv_on_device();
    if (on_device_) {
        // Leaving a device backend: its blocks become host bytes while it still exists.
        std::vector<std::pair<std::string, Entry>> all(entries_.begin(), entries_.end());
        std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.second.use_tick < b.second.use_tick; });
        entries_.clear();
        bytes_ = 0;
        for (const auto& [key, entry] : all) demote_locked(key, entry);
    } else if (next_on_device) {
        // CPU blocks cannot be handed to a device backend (other numerics: never a hit there).
        entries_.clear();
        bytes_ = 0;
    }
    if (backend && !next_on_device) {
        host_.clear();  // canonical bytes of device numerics: a CPU backend never hits them
        host_bytes_ = 0;
    }
    backend_ = backend;
    on_device_ = next_on_device;
}

bool GroupStore::on_device() const {
    std::lock_guard lock(mutex_);
    return on_device_;
}

PersistResult GroupStore::persist(const std::shared_ptr<const Group>& group, std::vector<std::byte> canonical_kv) {
    const size_t layer_bytes = canonical_kv.size() / static_cast<size_t>(std::max(group->n_layers, 1));
    if (canonical_kv.size() != group_payload_bytes(*group)) {
        PersistResult r;
        r.error = "payload is " + std::to_string(canonical_kv.size()) + " bytes, the header's shape needs " +
                  std::to_string(group_payload_bytes(*group));
        if (remote_) remote_->release_compile(group->group_key);
        return r;
    }
    return persist(group, [&](int layer, std::span<std::byte> out) {
        if (!out.empty())  // memcpy of nothing from a null pointer is still undefined
            std::memcpy(out.data(), canonical_kv.data() + static_cast<size_t>(layer) * layer_bytes, out.size());
    });
}

PersistResult GroupStore::persist(const std::shared_ptr<const Group>& group, const GroupLayerSource& layers) {
    PersistResult r;
    if (!index_ && !remote_) {
        r.error = "no cache directory";
        return r;
    }
    Stopwatch clock;
    bool written = false;
    if (index_) {
        try {
            const fs::path path = group_path(group->group_key);
            write_group_file(path, *group, layers);
            auto entry = index_entry_from_header(*group, fs::file_size(path));
            entry.last_used_unix_ms = unix_ms_now();
            std::lock_guard lock(mutex_);
            index_->upsert(entry);
            gc_locked(options_.disk_budget_bytes);
            written = true;
        } catch (const std::exception& e) {
            r.error = e.what();
        }
    }
    if (remote_) publish_to_remote(*group, layers, written, r);
    r.ok = index_ ? written : r.error.empty();
    r.persist_ms = clock.elapsed_ms();
    return r;
}

// The group file's bytes go to the remote tier: read back from the file just written (the page
// cache's copy, mapped), or encoded in memory when there is no file. Then the compile lock is
// released whatever happened (a failed publish leaves the group a miss for the others).
void GroupStore::publish_to_remote(const Group& group, const GroupLayerSource& layers, bool file_written,
                                   PersistResult& r) {
    try {
        const RemoteTier::ManifestInfo info{group.model_fingerprint, group.n_tokens()};
        if (file_written) {
            const MappedFile file(group_path(group.group_key));
            remote_->publish(group.group_key, file.bytes(), info);
        } else {
            std::vector<std::byte> canonical_kv(group_payload_bytes(group));
            const size_t layer_bytes = group_layer_bytes(group);
            for (int l = 0; l < group.n_layers; ++l)
                layers(l, std::span<std::byte>(canonical_kv).subspan(static_cast<size_t>(l) * layer_bytes, layer_bytes));
            remote_->publish(group.group_key, encode_group_file(group, canonical_kv), info);
        }
    } catch (const std::exception& e) {
        const std::string problem = "group " + group.group_key.substr(0, 12) + ": not published to the remote tier: " + e.what();
        if (!index_ && r.error.empty()) r.error = problem;
        std::lock_guard lock(mutex_);
        warnings_.push_back(problem);
    }
    remote_->release_compile(group.group_key);
}

}  // namespace cc

namespace cc {

std::optional<GroupStore::PrefixMatch> GroupStore::longest_prefix(std::span<const token_id> prefix_ids,
                                                                  const GroupMeta& expected) const {
    std::optional<PrefixMatch> best;
    auto consider = [&](const std::string& key, const std::vector<token_id>& ids) {
        const size_t common = common_prefix_tokens(ids, prefix_ids);
        if (common == 0 || (best && best->n_common >= common)) return;
        best = PrefixMatch{key, ids, common};
    };
    std::lock_guard lock(mutex_);
    for (const auto& [key, e] : entries_) {
        const Group& g = *e.group;
        if (g.model_fingerprint == expected.model_fingerprint && g.chat_format == expected.chat_format &&
            g.backend_numerics == expected.backend_numerics)
            consider(key, g.prefix_ids);
    }
    for (const auto& [key, h] : host_) {
        const GroupMeta& g = h.meta;
        if (g.model_fingerprint == expected.model_fingerprint && g.chat_format == expected.chat_format &&
            g.backend_numerics == expected.backend_numerics)
            consider(key, g.prefix_ids);
    }
    if (index_) {
        try {
            for (const auto& e : index_->candidates(expected.model_fingerprint, expected.chat_format, expected.backend_numerics))
                consider(e.group_key, e.prefix_ids);
        } catch (const std::exception&) {
        }
    }
    return best;
}

std::vector<GroupStore::StoredGroup> GroupStore::comparable(const GroupMeta& expected) const {
    auto same_kind = [&](const GroupMeta& g) {
        return g.model_fingerprint == expected.model_fingerprint && g.chat_format == expected.chat_format &&
               g.backend_numerics == expected.backend_numerics;
    };
    std::vector<StoredGroup> out;
    std::unordered_map<std::string, bool> seen;
    std::vector<IndexEntry> on_disk;
    {
        std::lock_guard lock(mutex_);
        for (const auto& [key, e] : entries_)
            if (same_kind(*e.group)) {
                out.push_back({GroupMeta(*e.group), first_tier(), e.last_used_unix_ms});
                seen[key] = true;
            }
        for (const auto& [key, h] : host_)
            if (same_kind(h.meta) && !seen.count(key)) {
                out.push_back({h.meta, Tier::memory, h.last_used_unix_ms});
                seen[key] = true;
            }
        if (index_) {
            try {
                on_disk = index_->candidates(expected.model_fingerprint, expected.chat_format, expected.backend_numerics);
            } catch (const std::exception&) {
            }
        }
    }
    // The headers are read outside the lock: file I/O.
    for (const auto& e : on_disk) {
        if (seen.count(e.group_key)) continue;
        try {
            GroupMeta h = read_group_header(group_path(e.group_key));
            if (h.group_key != e.group_key) continue;
            if (same_kind(h)) out.push_back({std::move(h), Tier::disk, e.last_used_unix_ms});
        } catch (const std::exception&) {
            // a damaged or vanished file: find() reports and quarantines it when it is used
        }
    }
    std::stable_sort(out.begin(), out.end(), [](const StoredGroup& a, const StoredGroup& b) {
        return a.last_used_unix_ms > b.last_used_unix_ms;
    });
    return out;
}

Tier GroupStore::tier_of(const std::string& group_key) const {
    {
        std::lock_guard lock(mutex_);
        if (entries_.count(group_key)) return first_tier();
        if (host_.count(group_key)) return Tier::memory;
    }
    if (!persistent() || !is_group_key(group_key)) return Tier::miss;
    std::error_code ec;
    return fs::is_regular_file(group_path(group_key), ec) ? Tier::disk : Tier::miss;
}

std::vector<GroupInfo> GroupStore::list() const {
    std::lock_guard lock(mutex_);
    std::vector<std::pair<int64_t, GroupInfo>> rows;
    std::unordered_map<std::string, size_t> position;
    for (const auto& [key, e] : entries_) {
        GroupInfo info = listing_row(*e.group, e.group->kv_bytes, first_tier(), e.last_used_unix_ms, e.hits);
        info.in_use = e.group.use_count() > 1;
        position[key] = rows.size();
        rows.emplace_back(e.last_used_unix_ms, std::move(info));
    }
    for (const auto& [key, h] : host_) {
        position[key] = rows.size();
        rows.emplace_back(h.last_used_unix_ms, listing_row(h.meta, h.bytes->size(), Tier::memory, h.last_used_unix_ms, h.hits));
    }
    if (index_) {
        try {
            for (const auto& e : index_->list()) {
                if (auto it = position.find(e.group_key); it != position.end()) {
                    auto& info = rows[it->second].second;
                    info.file_bytes = e.file_bytes;
                    info.hits = std::max<uint64_t>(info.hits, e.hits);
                    continue;
                }
                GroupInfo info = listing_row(e, e.kv_bytes, Tier::disk, e.last_used_unix_ms, e.hits);
                info.file_bytes = e.file_bytes;
                rows.emplace_back(e.last_used_unix_ms, std::move(info));
            }
        } catch (const std::exception&) {
        }
    }
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<GroupInfo> out;
    for (auto& r : rows) out.push_back(std::move(r.second));
    return out;
}

std::vector<std::string> GroupStore::verify() {
    std::vector<std::string> problems;
    if (!index_) return problems;
    std::vector<std::string> keys;
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(options_.dir / "groups", ec)) {
        if (!f.is_regular_file()) continue;
        const std::string name = f.path().filename().string();
        if (name.starts_with(".") || f.path().extension() != ".kv") continue;
        keys.push_back(f.path().stem().string());
    }
    std::sort(keys.begin(), keys.end());
    for (const auto& key : keys) {
        const fs::path path = group_path(key);
        try {
            if (!is_group_key(key)) throw std::runtime_error(path.string() + ": file name is not a group key");
            const auto h = map_group_file(path).header;  // verified in place, unmapped again
            if (h.group_key != key) throw std::runtime_error(path.string() + ": header group_key differs from the file name");
        } catch (const std::exception& e) {
            // Listed, then removed by another process (gc, rm) before it was read: not damage.
            std::error_code gone;
            if (!fs::exists(path, gone) && !gone) continue;
            const auto moved = quarantine(key, e.what());
            problems.push_back(std::string(e.what()) + " (moved to " + moved.string() + ")");
        }
    }
    std::lock_guard lock(mutex_);
    try {
        for (auto& p : index_->reconcile()) problems.push_back(std::move(p));
    } catch (const std::exception& e) {
        problems.push_back(e.what());
    }
    return problems;
}

bool GroupStore::remove(const std::string& group_key) {
    std::lock_guard lock(mutex_);
    bool found = drop_from_memory_locked(group_key);
    if (index_ && is_group_key(group_key)) {
        std::error_code ec;
        if (fs::remove(group_path(group_key), ec)) found = true;
        index_->remove(group_key);
    }
    return found;
}

bool GroupStore::drop_from_memory(const std::string& group_key) {
    std::lock_guard lock(mutex_);
    return drop_from_memory_locked(group_key);
}

bool GroupStore::drop_from_memory_locked(const std::string& group_key) {
    bool found = false;
    if (auto it = entries_.find(group_key); it != entries_.end()) {
        bytes_ -= it->second.group->kv_bytes;
        entries_.erase(it);
        found = true;
    }
    if (auto h = host_.find(group_key); h != host_.end()) {
        host_bytes_ -= h->second.bytes->size();
        host_.erase(h);
        found = true;
    }
    return found;
}

void GroupStore::clear() {
    std::lock_guard lock(mutex_);
    entries_.clear();
    bytes_ = 0;
    host_.clear();
    host_bytes_ = 0;
    if (!index_) return;
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(options_.dir / "groups", ec))
        if (f.is_regular_file() && f.path().extension() == ".kv" && is_group_key(f.path().stem().string()))
            fs::remove(f.path(), ec);
    index_->clear();
}

std::vector<std::string> GroupStore::gc(size_t max_bytes) {
    std::lock_guard lock(mutex_);
    return gc_locked(max_bytes);
}

std::vector<std::string> GroupStore::remove_stale_temp_files() {
    if (!index_) return {};
    return cc::remove_stale_temp_files(options_.dir / "groups");
}

std::vector<std::string> GroupStore::gc_locked(size_t max_bytes) {
    std::vector<std::string> removed;
    if (!index_) return removed;
    // Temp files of writers killed before their rename take disk the budget does not count.
    cc::remove_stale_temp_files(options_.dir / "groups");
    auto entries = index_->list();  // most recently used first
    uint64_t total = 0;
    for (const auto& e : entries) total += e.file_bytes;
    for (auto it = entries.rbegin(); it != entries.rend() && total > max_bytes; ++it) {
        // A group a query of this process holds stays (another process reading a file keeps its
        // open descriptor valid after the unlink, so removing it cannot disturb that reader).
        if (auto m = entries_.find(it->group_key); m != entries_.end() && m->second.group.use_count() > 1) continue;
        std::error_code ec;
        fs::remove(group_path(it->group_key), ec);
        index_->remove(it->group_key);
        total -= it->file_bytes;
        removed.push_back(it->group_key);
    }
    return removed;
}

size_t GroupStore::memory_bytes() const {
    std::lock_guard lock(mutex_);
    return (on_device_ ? 0 : bytes_) + host_bytes_;  // host_ is empty unless a device backend was used
}

size_t GroupStore::memory_size() const {
    std::lock_guard lock(mutex_);
    return (on_device_ ? 0 : entries_.size()) + host_.size();
}

size_t GroupStore::gpu_bytes() const {
    std::lock_guard lock(mutex_);
    return on_device_ ? bytes_ : 0;
}

size_t GroupStore::gpu_size() const {
    std::lock_guard lock(mutex_);
    return on_device_ ? entries_.size() : 0;
}

uint64_t GroupStore::disk_bytes() const {
    std::lock_guard lock(mutex_);
    return index_ ? index_->total_file_bytes() : 0;
}

}  // namespace cc
