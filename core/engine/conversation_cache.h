// The memory tier of conversation states (DESIGN §8, Conversations): the KV of a rendered
// conversation and of the reply generated after it, kept so that the next turn reuses it exactly.
//
// A state holds the ids of every position it covers, from position 0 of the prompt, and the K/V of
// the positions after the first `group_tokens` in a block of its own; the first `group_tokens`
// positions are the group prefix (whose K/V lives in the group store), or none (group_tokens 0)
// when the request's group prefix was not a prefix of its prompt. Lookups are by group key and
// the longest common token-id prefix; the ids decide, never the text, so reuse stops at the first
// differing id.
#pragma once

#include "core/backend/backend.h"

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cc {

struct ConversationState {
    std::string group_key;
    size_t group_tokens = 0;            // leading positions that come from the group prefix (0 or its length)
    std::vector<token_id> ids;          // ids of positions [0, ids.size())
    std::unique_ptr<KvBlock> block;     // K/V of positions [group_tokens, ids.size())
    size_t bytes = 0;                   // what the block holds in memory (its storage_tokens)
};

struct ConversationMatch {
    std::shared_ptr<const ConversationState> state;  // null when no state shares a token
    size_t n_common = 0;                // leading ids the state and the prompt share
    // The prompt position where the state stopped matching, when it covers more than the shared
    // part and the prompt goes on (a real divergence, not just a longer prompt).
    std::optional<size_t> diverged_at;
};

class ConversationCache {
public:
    explicit ConversationCache(size_t budget_bytes) : budget_bytes_(budget_bytes) {}

    // The state of this group sharing the most leading ids with `ids` among those made by requests
    // whose group prefix covered the same `group_tokens` leading positions, when it shares more
    // than those. Counts a lookup and, when found, a hit.
    ConversationMatch longest_prefix(const std::string& group_key, std::span<const token_id> ids,
                                     size_t group_tokens);
    // Keeps `state` (most recently used); drops the states of the same group whose ids it extends
    // (it covers them) and then the least recently used ones until the budget holds. A state larger
    // than the whole budget is not kept.
    void insert(std::shared_ptr<ConversationState> state);
    void clear();

    size_t entries() const;
    size_t bytes() const;
    size_t budget_bytes() const { return budget_bytes_; }
    size_t lookups() const;
    size_t hits() const;
    size_t evictions() const;

private:
    mutable std::mutex mutex_;
    size_t budget_bytes_;
    size_t bytes_ = 0;
    size_t lookups_ = 0;
    size_t hits_ = 0;
    size_t evictions_ = 0;
    std::list<std::shared_ptr<const ConversationState>> lru_;  // front = most recently used
};

}  // namespace cc
