// Reading tokenizer.json fast: a SAX pass that streams model.vocab and model.merges (about 300k
// entries for Qwen3/Llama 3) into flat vectors and builds an ordinary DOM for everything else.
// A full DOM of an 11 MB tokenizer.json costs ~4x the parse itself; this keeps loading near the
// cost of lexing. Internal to core/text/tokenizer*.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cc::tok {

struct TokenizerJson {
    nlohmann::json root;  // the whole file, minus model.vocab / model.merges when captured below
    bool vocab_captured = false;   // model.vocab was an object and is in `vocab`
    std::vector<std::pair<std::string, int64_t>> vocab;
    bool merges_captured = false;  // model.merges was an array and is in `merges`
    std::vector<std::pair<std::string, std::string>> merges;
};

// Throws std::runtime_error "<source>: <problem>" for invalid JSON, nesting deeper than
// `max_depth`, or a vocab/merges entry of the wrong shape.
TokenizerJson read_tokenizer_json(std::string_view text, const std::string& source, int max_depth = 64);

}  // namespace cc::tok
