#include "core/engine/tool_call_ids.h"

namespace cc {

std::string ToolCallIds::next(std::string_view chat_format) {
    static constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const bool mistral = chat_format == "mistral";
    std::string id = mistral ? "" : "call_";
    std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
    for (int i = 0; i < (mistral ? 9 : 24); ++i) id += alphabet[pick(rng_)];
    return id;
}

}  // namespace cc
