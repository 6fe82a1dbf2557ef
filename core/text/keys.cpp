#include "core/text/keys.h"

#include "core/base/sha256.h"

namespace cc {

std::string group_key_text(const GroupKeyInputs& in) {
    // One field per line, in a fixed order; the system prompt enters only as its hash so the
    // key text can be shown and logged without revealing it.
    std::string text = "contextcache-group-key\n";
    text += "format_version=" + std::to_string(in.format_version) + "\n";
    text += "model_fingerprint=" + in.model_fingerprint + "\n";
    text += "chat_format=" + in.chat_format + "\n";
    text += "backend_numerics=" + in.backend_numerics + "\n";
    text += "system_prompt_sha256=" + sha256_hex(in.system_prompt) + "\n";
    text += "tools_hash=" + in.tools_hash + "\n";
    return text;
}

std::string group_key(const GroupKeyInputs& inputs) { return sha256_hex(group_key_text(inputs)); }

}  // namespace cc
