// Fuzz entry point: POST /v1/chat/completions bodies (outside input). Any input must parse to a
// request or give ApiError (400) / std::runtime_error (not JSON, too deep), never a crash or
// another exception type.
#include "core/serve/openai_chat.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const auto body = cc::parse_json_text(text, "body");
        const auto request = cc::serve::parse_chat_request(body, 4096);
        if (request.max_tokens && (*request.max_tokens < 1 || *request.max_tokens > 4096)) __builtin_trap();
        if (request.stop.size() > 4) __builtin_trap();
    } catch (const cc::serve::ApiError& e) {
        if (e.status != 400) __builtin_trap();
    } catch (const std::runtime_error&) {
    }
    return 0;
}
