// Files compiled into cc_core so the built-in model runs with no file on disk.
#pragma once

#include <string_view>

namespace cc::embedded {

std::string_view qwen3_tokenizer_json();         // resources/tokenizers/qwen3/tokenizer.json
std::string_view qwen3_tokenizer_config_json();  // resources/tokenizers/qwen3/tokenizer_config.json

}  // namespace cc::embedded
