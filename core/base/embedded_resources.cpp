#include "core/base/embedded_resources.h"

#include "core/base/incbin.h"

#include <cstddef>

CC_INCBIN(cc_qwen3_tokenizer_json, CC_QWEN3_TOKENIZER_JSON)
CC_INCBIN(cc_qwen3_tokenizer_config, CC_QWEN3_TOKENIZER_CONFIG)
CC_INCBIN(cc_sample_tools_100, CC_SAMPLE_TOOLS_100)
CC_INCBIN(cc_sample_queries, CC_SAMPLE_QUERIES)
CC_INCBIN(cc_system_prompt, CC_SYSTEM_PROMPT)

namespace cc::embedded {

std::string_view qwen3_tokenizer_json() { return CC_INCBIN_VIEW(cc_qwen3_tokenizer_json); }
std::string_view qwen3_tokenizer_config_json() { return CC_INCBIN_VIEW(cc_qwen3_tokenizer_config); }
std::string_view sample_tools_100_json() { return CC_INCBIN_VIEW(cc_sample_tools_100); }
std::string_view sample_queries_json() { return CC_INCBIN_VIEW(cc_sample_queries); }
std::string_view default_system_prompt() { return CC_INCBIN_VIEW(cc_system_prompt); }

}  // namespace cc::embedded
