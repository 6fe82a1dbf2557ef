// The files of the trained built-in model embedded in the program (resources/models/toolcaller):
// no file is needed at run time. Its tokenizer is its own (derived from Qwen3's by
// tools/train_toolcaller/derive_tokenizer.py, resources/tokenizers/toolcaller).
#pragma once

#include <string_view>

namespace cc::embedded {

std::string_view toolcaller_safetensors();            // resources/models/toolcaller/model.safetensors
std::string_view toolcaller_config_json();            // resources/models/toolcaller/config.json
std::string_view toolcaller_generation_config_json(); // resources/models/toolcaller/generation_config.json
std::string_view toolcaller_tokenizer_json();         // resources/models/toolcaller/tokenizer.json
std::string_view toolcaller_tokenizer_config_json();  // resources/models/toolcaller/tokenizer_config.json

}  // namespace cc::embedded
