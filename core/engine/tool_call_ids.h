// Ids for the tool calls of a reply (the OpenAI `tool_calls[i].id`): "call_" + 24 alphanumerics,
// or 9 alphanumerics for the mistral format, whose official template refuses any other length.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>

namespace cc {

class ToolCallIds {
public:
    explicit ToolCallIds(uint64_t seed) : rng_(seed) {}
    std::string next(std::string_view chat_format);

private:
    std::mt19937_64 rng_;
};

}  // namespace cc
