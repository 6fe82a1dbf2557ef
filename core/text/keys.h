// group_key: the identity of a cached prefix (DESIGN §3).
#pragma once

#include <string>

namespace cc {

inline constexpr int kGroupFormatVersion = 1;

struct GroupKeyInputs {
    int format_version = kGroupFormatVersion;
    std::string model_fingerprint;  // hex SHA-256 of the model (weights, config, tokenizer)
    std::string chat_format;        // e.g. "qwen3"
    std::string backend_numerics;   // backend + KV dtype, e.g. "cpu/f32"
    std::string system_prompt;      // hashed, never stored in the key text itself
    std::string tools_hash;
};

// The small canonical text the key is the hash of (one "field=value" line each), shown by
// `contextcache-cli key --json` so a user can see exactly what the key covers.
std::string group_key_text(const GroupKeyInputs& inputs);
// SHA-256 (hex) of group_key_text.
std::string group_key(const GroupKeyInputs& inputs);

}  // namespace cc
