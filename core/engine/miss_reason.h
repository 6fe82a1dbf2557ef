// Why a tool set missed the group cache: the nearest stored groups of the same model,
// chat format and numerics, what differs from each (tools added / removed / renamed / changed
// with the first differing field, the system prompt), and how many prefix tokens each could give
// (the longest common token prefix: what compile reuses exactly).
#pragma once

#include "core/store/group_store.h"
#include "core/text/tokenizer.h"
#include "core/text/tool_set.h"
#include "core/text/tool_set_diff.h"

#include <span>
#include <string>
#include <vector>

namespace cc {

struct NearestGroup {
    std::string group_key;
    Tier tier = Tier::disk;            // gpu, memory or disk
    size_t n_tools = 0;
    size_t prefix_tokens = 0;
    size_t reusable_tokens = 0;        // leading token ids shared with the new prefix
    bool system_prompt_changed = false;
    // false when the stored group recorded no tool texts (a file from before they were kept):
    // tools are then compared by name only, and a changed tool with the same name is not seen.
    bool tools_compared = true;
    ToolSetDiff tools;                 // stored group -> the new set
    // tool differences + 1 for a changed system prompt: what "nearest" ranks by
    size_t n_differences() const { return tools.n_differences() + (system_prompt_changed ? 1 : 0); }
};

struct MissReason {
    size_t n_stored = 0;               // stored groups of this model, chat format and numerics
    std::vector<NearestGroup> nearest; // best first: fewest differences, then most reusable tokens
};

// What is being looked up: the group the tool set would make.
struct MissQuery {
    std::string group_key;
    std::vector<std::string> tool_texts;   // canonical texts (canonical_texts(tools))
    std::vector<std::string> tool_names;
    std::string system_prompt_sha256;
    std::span<const token_id> prefix_ids;
};

// Pure: ranks `stored` (the group with query.group_key itself is left out) and keeps the best
// `max_nearest`. Ties keep `stored`'s order (most recently used first).
MissReason explain_miss(std::span<const GroupStore::StoredGroup> stored, const MissQuery& query,
                        size_t max_nearest = 3);
// The same over the store's groups of `expected`'s model, format and numerics.
MissReason explain_miss(const GroupStore& store, const GroupMeta& expected, size_t max_nearest = 3);

// Human text, one line per nearest group, e.g.
// "nearest 3f2a9c01 (disk, 20 tools): +get_time, ~get_weather (parameters.properties.unit.enum);
//  system prompt changed; 412 of 2851 prefix tokens reusable".
std::string miss_reason_text(const MissReason& reason, size_t prefix_tokens);

}  // namespace cc
