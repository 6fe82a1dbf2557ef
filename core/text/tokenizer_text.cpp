// Text-level helpers of the tokenizer: UTF-8, the GPT-2 byte alphabet, and the PCRE2 wrapper.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/text/tokenizer_impl.h"

#include <stdexcept>

namespace cc {

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order, so every byte becomes a visible, non-whitespace character.
std::array<char32_t, 256> make_byte_to_unicode() {
    std::array<char32_t, 256> table{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        table[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return table;
}

constexpr size_t k_max_byte_level_cp = 0x143;  // 256 + 68 - 1

std::array<int16_t, k_max_byte_level_cp + 1> make_unicode_to_byte() {
    std::array<int16_t, k_max_byte_level_cp + 1> table{};
    table.fill(-1);
    const auto& fwd = byte_to_unicode();
    for (int b = 0; b < 256; ++b) table[fwd[b]] = static_cast<int16_t>(b);
    return table;
}

}  // namespace

const std::array<char32_t, 256>& byte_to_unicode() {
    static const std::array<char32_t, 256> table = make_byte_to_unicode();
    return table;
}

int unicode_to_byte(char32_t cp) {
    static const auto table = make_unicode_to_byte();
    return cp <= k_max_byte_level_cp ? table[cp] : -1;
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

size_t utf8_decode(std::string_view s, size_t i, char32_t& cp) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
        cp = b0;
        return 1;
    }
    auto cont = [&](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F); };
    if (b0 < 0xE0) {
        cp = (static_cast<char32_t>(b0 & 0x1F) << 6) | cont(1);
        return 2;
    }
    if (b0 < 0xF0) {
        cp = (static_cast<char32_t>(b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2);
        return 3;
    }
    cp = (static_cast<char32_t>(b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    return 4;
}

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 with `n_bad` set to the length of the maximal
// invalid subpart (the bytes one U+FFFD replaces, as in Rust's from_utf8_lossy).
size_t utf8_valid_len(std::string_view s, size_t i, size_t& n_bad) {
    const size_t n = s.size();
    const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char b0 = at(i);
    n_bad = 1;
    if (b0 < 0x80) return 1;
    size_t width = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        width = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        width = 3;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;  // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        width = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (i + 1 >= n || at(i + 1) < lo || at(i + 1) > hi) return 0;
    for (size_t k = 2; k < width; ++k) {
        if (i + k >= n || at(i + k) < 0x80 || at(i + k) > 0xBF) {
            n_bad = k;
            return 0;
        }
    }
    return width;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
    size_t i = 0, n_bad = 0;
    while (i < s.size()) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        const size_t len = utf8_valid_len(s, i, n_bad);
        if (len == 0) return false;
        i += len;
    }
    return true;
}

std::string utf8_lossy(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    size_t i = 0, n_bad = 0;
    while (i < bytes.size()) {
        const size_t len = utf8_valid_len(bytes, i, n_bad);
        if (len == 0) {
            out += "\xEF\xBF\xBD";
            i += n_bad;
        } else {
            out.append(bytes.substr(i, len));
            i += len;
        }
    }
    return out;
}

}  // namespace cc

namespace cc::tok {

Regex::Regex(const std::string& pattern, const std::string& source, const std::string& what) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
    if (code == nullptr) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error_code, message, sizeof(message));
        throw std::runtime_error(source + ": " + what + " regex \"" + pattern + "\" is invalid at offset " +
                                 std::to_string(error_offset) + ": " + reinterpret_cast<const char*>(message));
    }
    code_ = code;
    // JIT is a speed-up only: when the platform lacks it the interpreter gives the same matches.
    jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
    auto* code = static_cast<pcre2_code*>(code_);
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(code, nullptr);
    if (match == nullptr) throw std::bad_alloc();
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t pos = 0;
    while (pos <= text.size()) {
        // The caller validated the UTF-8 once; skipping the per-call check keeps matching linear.
        const int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match, nullptr)
                            : pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            pcre2_match_data_free(match);
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(rc, message, sizeof(message));
            throw std::runtime_error(std::string("tokenizer regex match failed: ") +
                                     reinterpret_cast<const char*>(message));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
        const size_t start = ovector[0], end = ovector[1];
        if (end > start) {
            out.emplace_back(start, end);
            pos = end;
        } else {
            // An empty match carries no text: step over one code point and search again.
            if (start >= text.size()) break;
            char32_t cp = 0;
            pos = start + utf8_decode(text, start, cp);
        }
    }
    pcre2_match_data_free(match);
}

}  // namespace cc::tok
