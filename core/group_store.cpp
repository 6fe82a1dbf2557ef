#include "core/group_store.h"

#include <algorithm>
#include <chrono>

namespace cc {

int64_t unix_ms_now() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

GroupStore::GroupStore(GroupStoreOptions options) : options_(options) {}

GroupStore::Lookup GroupStore::find(const std::string& group_key, std::span<const token_id> prefix_ids) {
    std::lock_guard lock(mutex_);
    Lookup result;
    auto it = entries_.find(group_key);
    if (it == entries_.end()) return result;
    const auto& stored = it->second.group->prefix_ids;
    if (!std::equal(stored.begin(), stored.end(), prefix_ids.begin(), prefix_ids.end())) {
        result.problem = "group " + group_key.substr(0, 12) + ": stored prefix token ids differ from the rendered prefix (" +
                         std::to_string(stored.size()) + " vs " + std::to_string(prefix_ids.size()) +
                         " tokens); entry dropped and recompiled";
        bytes_ -= it->second.group->kv_bytes;
        entries_.erase(it);
        return result;
    }
    it->second.last_used_unix_ms = unix_ms_now();
    it->second.use_tick = ++tick_;
    it->second.hits += 1;
    result.group = it->second.group;
    result.tier = "memory";
    return result;
}

void GroupStore::insert(std::shared_ptr<const Group> group) {
    std::lock_guard lock(mutex_);
    const std::string key = group->group_key;
    if (auto it = entries_.find(key); it != entries_.end()) {
        bytes_ -= it->second.group->kv_bytes;
        entries_.erase(it);
    }
    bytes_ += group->kv_bytes;
    entries_[key] = Entry{std::move(group), unix_ms_now(), 0, ++tick_};
    evict_locked(key);
}

void GroupStore::evict_locked(const std::string& keep) {
    while (bytes_ > options_.host_budget_bytes) {
        // The least recently used entry that no query holds (use_count 1 = only this map).
        auto victim = entries_.end();
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if (it->first == keep || it->second.group.use_count() > 1) continue;
            if (victim == entries_.end() || it->second.use_tick < victim->second.use_tick) victim = it;
        }
        if (victim == entries_.end()) return;  // everything left is in use: over budget until released
        bytes_ -= victim->second.group->kv_bytes;
        entries_.erase(victim);
    }
}

std::vector<GroupInfo> GroupStore::list() const {
    std::lock_guard lock(mutex_);
    std::vector<std::pair<uint64_t, GroupInfo>> rows;
    for (const auto& [key, e] : entries_) {
        GroupInfo info;
        info.group_key = key;
        info.tools_hash = e.group->tools_hash;
        info.tool_names = e.group->tool_names;
        info.n_tokens = e.group->prefix_ids.size();
        info.kv_bytes = e.group->kv_bytes;
        info.tier = "memory";
        info.created_unix_ms = e.group->created_unix_ms;
        info.last_used_unix_ms = e.last_used_unix_ms;
        info.hits = e.hits;
        info.in_use = e.group.use_count() > 1;
        rows.emplace_back(e.use_tick, std::move(info));
    }
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<GroupInfo> out;
    for (auto& r : rows) out.push_back(std::move(r.second));
    return out;
}

bool GroupStore::remove(const std::string& group_key) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(group_key);
    if (it == entries_.end()) return false;
    bytes_ -= it->second.group->kv_bytes;
    entries_.erase(it);
    return true;
}

void GroupStore::clear() {
    std::lock_guard lock(mutex_);
    entries_.clear();
    bytes_ = 0;
}

size_t GroupStore::bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

size_t GroupStore::size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
}

}  // namespace cc
