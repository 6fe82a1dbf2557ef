// Embeds a file's bytes in the program with the assembler's .incbin (fast to build, even for tens
// of megabytes, where an array literal would slow the compiler to a crawl). Each blob is 16-byte
// aligned, read-only data shared between processes, and followed by a NUL byte that is not part of
// it. `path` is a string literal (the build passes absolute paths as compile definitions).
#pragma once

#define CC_INCBIN(sym, path)                                                              \
    __asm__(".section .rodata\n"                                                          \
            ".global " #sym "_begin\n.balign 16\n" #sym "_begin:\n.incbin \"" path "\"\n" \
            ".global " #sym "_end\n" #sym "_end:\n.byte 0\n.previous\n");                 \
    extern "C" const char sym##_begin[];                                                  \
    extern "C" const char sym##_end[];

#define CC_INCBIN_VIEW(sym) std::string_view(sym##_begin, static_cast<size_t>(sym##_end - sym##_begin))
