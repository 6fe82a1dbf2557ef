// Fuzz entry point: tool calls in generated text (model output is outside input). Every format's
// parser must return a call or nullopt for any bytes: never throw, crash or hang, and a call it
// returns must have a name and object arguments.
#include "core/text/chat_format.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    for (const char* id : {"qwen3", "llama3", "mistral", "plain"}) {
        const auto format = cc::make_chat_format(id);
        const auto call = format->parse_tool_call(text);  // noexcept in practice: a throw ends the run
        if (call && (call->name.empty() || !call->arguments.is_object())) __builtin_trap();
    }
    return 0;
}
