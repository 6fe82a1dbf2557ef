#include "core/model/bundled_models.h"

#include "core/base/incbin.h"

#include <cstddef>

CC_INCBIN(cc_toolcaller_safetensors, CC_TOOLCALLER_SAFETENSORS)
CC_INCBIN(cc_toolcaller_config, CC_TOOLCALLER_CONFIG)
CC_INCBIN(cc_toolcaller_generation_config, CC_TOOLCALLER_GENERATION_CONFIG)
CC_INCBIN(cc_toolcaller_tokenizer, CC_TOOLCALLER_TOKENIZER)
CC_INCBIN(cc_toolcaller_tokenizer_config, CC_TOOLCALLER_TOKENIZER_CONFIG)

namespace cc::embedded {

std::string_view toolcaller_safetensors() { return CC_INCBIN_VIEW(cc_toolcaller_safetensors); }
std::string_view toolcaller_config_json() { return CC_INCBIN_VIEW(cc_toolcaller_config); }
std::string_view toolcaller_generation_config_json() { return CC_INCBIN_VIEW(cc_toolcaller_generation_config); }
std::string_view toolcaller_tokenizer_json() { return CC_INCBIN_VIEW(cc_toolcaller_tokenizer); }
std::string_view toolcaller_tokenizer_config_json() { return CC_INCBIN_VIEW(cc_toolcaller_tokenizer_config); }

}  // namespace cc::embedded
