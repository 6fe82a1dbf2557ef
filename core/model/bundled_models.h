// The files of the trained built-in model embedded in the program (resources/models/toolcaller):
// no file is needed at run time. Its tokenizer is the bundled Qwen3 one (core/base/embedded_resources.h).
#pragma once

#include <string_view>

namespace cc::embedded {

std::string_view toolcaller_safetensors();            // resources/models/toolcaller/model.safetensors
std::string_view toolcaller_config_json();            // resources/models/toolcaller/config.json
std::string_view toolcaller_generation_config_json(); // resources/models/toolcaller/generation_config.json

}  // namespace cc::embedded
