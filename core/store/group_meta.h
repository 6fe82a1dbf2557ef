// The record of one compiled prefix (DESIGN §7), declared once for every place that keeps it:
//   GroupSummary  what the SQLite index keeps (group_index.h) and the cache listing shows;
//   GroupMeta     the summary plus what only the group file's header records (group_file.h);
//   Group         the meta plus its K/V (group_store.h).
// A new field goes into one of the two structs here and into the reader and writer of the file
// header (group_file.cpp) or the index row (group_index.cpp); copies between the records slice
// (GroupSummary s = meta), so they need no change.
#pragma once

#include "core/backend/backend.h"
#include "core/text/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cc {

struct GroupSummary {
    std::string group_key;
    std::string model_fingerprint;
    std::string chat_format;
    std::string backend_numerics;
    std::string tools_hash;
    std::vector<std::string> tool_names;  // canonical order
    std::vector<token_id> prefix_ids;     // the rendered prefix whose K/V the group holds
    int64_t created_unix_ms = 0;

    size_t n_tokens() const { return prefix_ids.size(); }
    bool operator==(const GroupSummary&) const = default;
};

struct GroupMeta : GroupSummary {
    std::string system_prompt_sha256;
    int n_layers = 0;                        // the K/V's shape and dtype (canonical layout)
    int n_kv_heads = 0;
    int head_dim = 0;
    KvDType kv_dtype = KvDType::f32;
    std::vector<int> tool_token_boundaries;  // token index where each tool's text starts (canonical order); empty = not known
    std::vector<std::string> tool_texts;     // Tool::canonical_text of each tool (canonical order); empty = not recorded
    bool operator==(const GroupMeta&) const = default;
};

}  // namespace cc
