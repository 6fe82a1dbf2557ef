// Fuzz entry point: tokenizer.json files (outside input). Any input must give a Tokenizer or a
// std::runtime_error; a Tokenizer that loads must then encode and decode without crashing.
#include "core/text/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const auto tokenizer = cc::Tokenizer::from_json(text, "fuzz/tokenizer.json");
        for (const auto mode : {cc::EncodeMode::plain, cc::EncodeMode::template_}) {
            const auto ids = tokenizer.encode("Hello the world <|end|> <call> caf\xC3\xA9 \xF0\x9F\x98\x80 12345\n", mode, true);
            tokenizer.decode(ids);
            cc::IncrementalDecoder decoder(tokenizer);
            for (const auto id : ids) decoder.push(id);
            decoder.flush();
        }
    } catch (const std::runtime_error&) {
    }
    return 0;
}
