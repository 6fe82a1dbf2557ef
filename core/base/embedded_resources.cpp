#include "core/base/embedded_resources.h"

// .incbin keeps the build fast for an 11 MB file; each blob is followed by a NUL byte that is
// not part of the view. The section is read-only data, so the bytes are shared between processes.
#define CC_INCBIN(sym, path)                                                              \
    __asm__(".section .rodata\n"                                                          \
            ".global " #sym "_begin\n.balign 16\n" #sym "_begin:\n.incbin \"" path "\"\n" \
            ".global " #sym "_end\n" #sym "_end:\n.byte 0\n.previous\n");                 \
    extern "C" const char sym##_begin[];                                                  \
    extern "C" const char sym##_end[];

CC_INCBIN(cc_qwen3_tokenizer_json, CC_QWEN3_TOKENIZER_JSON)
CC_INCBIN(cc_qwen3_tokenizer_config, CC_QWEN3_TOKENIZER_CONFIG)
CC_INCBIN(cc_sample_tools_100, CC_SAMPLE_TOOLS_100)
CC_INCBIN(cc_sample_queries, CC_SAMPLE_QUERIES)
CC_INCBIN(cc_system_prompt, CC_SYSTEM_PROMPT)

namespace cc::embedded {

std::string_view qwen3_tokenizer_json() {
    return {cc_qwen3_tokenizer_json_begin, static_cast<size_t>(cc_qwen3_tokenizer_json_end - cc_qwen3_tokenizer_json_begin)};
}

std::string_view qwen3_tokenizer_config_json() {
    return {cc_qwen3_tokenizer_config_begin,
            static_cast<size_t>(cc_qwen3_tokenizer_config_end - cc_qwen3_tokenizer_config_begin)};
}

#define CC_VIEW(sym) std::string_view(sym##_begin, static_cast<size_t>(sym##_end - sym##_begin))
std::string_view sample_tools_100_json() { return CC_VIEW(cc_sample_tools_100); }
std::string_view sample_queries_json() { return CC_VIEW(cc_sample_queries); }
std::string_view default_system_prompt() { return CC_VIEW(cc_system_prompt); }
#undef CC_VIEW

}  // namespace cc::embedded
