// Fuzz entry point: strict-call schemas and patterns (tool schemas come from clients). The input is
// a schema, a NUL, and text for the matcher (or, when the part before the NUL is no JSON, a pattern
// and a string). Compiling may refuse with std::invalid_argument and nothing else; a state the
// matcher keeps alive always has a byte that continues it; a value it completes parses and
// satisfies the schema by the plain validator; a pattern never throws past its constructor.
#include "core/engine/json_schema_constraint.h"
#include "core/engine/schema_pattern.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>

namespace {

// The value the text so far completes is one the schema accepts.
void check_complete(const cc::ordered_json& schema, std::string_view text) {
    const auto value = cc::ordered_json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded() || !cc::json_schema_valid(schema, value)) __builtin_trap();
}

// Some byte keeps a live state alive, unless the value is complete.
void check_no_dead_end(const cc::JsonSchemaGrammar& g, const cc::SchemaState& state) {
    if (g.complete(state)) return;
    for (int b = 0; b < 256; ++b) {
        cc::SchemaState next = state;
        const char c = static_cast<char>(b);
        if (g.advance(next, std::string_view(&c, 1))) return;
    }
    __builtin_trap();
}

void fuzz_schema(const cc::ordered_json& schema, std::string_view text, uint64_t seed) {
    std::unique_ptr<cc::JsonSchemaGrammar> g;
    try {
        g = std::make_unique<cc::JsonSchemaGrammar>(schema, "", "tool \"fuzz\"");
    } catch (const std::invalid_argument&) {
        return;  // refused by name
    }
    cc::SchemaState state = g->start();
    std::string read;
    for (const char c : text) {
        cc::SchemaState next = state;
        if (!g->advance(next, std::string_view(&c, 1))) continue;  // the mask would not offer it
        state = std::move(next);
        read += c;
        if (g->complete(state)) check_complete(schema, read);
    }
    check_no_dead_end(*g, state);
    // A random walk onwards, leaning to the bytes that close values, validating what completes.
    std::mt19937_64 rng(seed);
    static const char closing[] = "\"}]0a";
    for (int step = 0; step < 400 && !g->complete(state); ++step) {
        std::string options;
        for (int b = 0; b < 256; ++b) {
            cc::SchemaState next = state;
            const char c = static_cast<char>(b);
            if (g->advance(next, std::string_view(&c, 1))) options += c;
        }
        if (options.empty()) __builtin_trap();  // a dead end
        char pick = options[rng() % options.size()];
        for (const char c : closing)
            if (c && options.find(c) != std::string::npos && rng() % 3 == 0) pick = c;
        g->advance(state, std::string_view(&pick, 1));
        read += pick;
    }
    if (g->complete(state)) check_complete(schema, read);
}

void fuzz_pattern(std::string_view source, std::string_view text) {
    try {
        const cc::SchemaPattern p(source, static_cast<uint32_t>(text.size() % 4),
                                  4 + static_cast<uint32_t>(text.size() % 8));
        uint32_t state = p.start();
        uint32_t used = 0;
        for (const unsigned char c : text) {
            if (state == cc::SchemaPattern::k_none) break;
            const bool can = p.can_step(state, c, c, ++used);
            state = p.step(state, c);
            // can_step promises a state from which a match ends within the lengths.
            if (can && (state == cc::SchemaPattern::k_none || !p.can_end(state, used))) __builtin_trap();
        }
        (void)p.matches(text);
    } catch (const std::invalid_argument&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t nul = input.find('\0');
    const std::string_view head = input.substr(0, nul);
    const std::string_view tail = nul == std::string_view::npos ? std::string_view{} : input.substr(nul + 1);
    cc::ordered_json schema;
    try {
        schema = cc::parse_json_text(head, "fuzz");  // as the server reads a request: depth-limited
    } catch (const std::exception&) {
        fuzz_pattern(head, tail);
        return 0;
    }
    fuzz_schema(schema, tail, size);
    return 0;
}
