// Files compiled into cc_core so the built-in model runs with no file on disk.
#pragma once

#include <string_view>

namespace cc::embedded {

std::string_view qwen3_tokenizer_json();         // resources/tokenizers/qwen3/tokenizer.json
std::string_view qwen3_tokenizer_config_json();  // resources/tokenizers/qwen3/tokenizer_config.json
// The bundled sample sets, so the CLI's benchmark runs with no files (tools_N.json = its first N tools).
std::string_view sample_tools_100_json();        // resources/toolsets/tools_100.json
std::string_view sample_queries_json();          // resources/toolsets/sample_queries.json
std::string_view default_system_prompt();        // resources/system_prompt.txt

}  // namespace cc::embedded
