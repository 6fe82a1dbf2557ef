#include "core/embedded_resources.h"

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

namespace cc::embedded {

std::string_view qwen3_tokenizer_json() {
    return {cc_qwen3_tokenizer_json_begin, static_cast<size_t>(cc_qwen3_tokenizer_json_end - cc_qwen3_tokenizer_json_begin)};
}

std::string_view qwen3_tokenizer_config_json() {
    return {cc_qwen3_tokenizer_config_begin,
            static_cast<size_t>(cc_qwen3_tokenizer_config_end - cc_qwen3_tokenizer_config_begin)};
}

}  // namespace cc::embedded
