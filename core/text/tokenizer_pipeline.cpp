// Encoding and decoding: the added-token split, normalizer, pre-tokenizer, model, post-processor
// and decoder steps, in the order and with the semantics of HF `tokenizers`.
#include "core/text/tokenizer_impl.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace cc {

namespace {

bool is_ascii(std::string_view s) {
    for (char c : s) {
        if (static_cast<unsigned char>(c) >= 0x80) return false;
    }
    return true;
}

std::string unicode_normalize(std::string_view text, utf8proc_option_t options) {
    if (is_ascii(text)) return std::string(text);  // ASCII is invariant under every normal form
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                            static_cast<utf8proc_ssize_t>(text.size()), &mapped, options);
    if (n < 0) throw std::runtime_error(std::string("unicode normalization failed: ") + utf8proc_errmsg(n));
    std::string out(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
    std::free(mapped);
    return out;
}

void replace_all(std::string& s, std::string_view pattern, std::string_view content) {
    if (pattern.empty() || s.find(pattern) == std::string::npos) return;
    std::string out;
    out.reserve(s.size());
    size_t pos = 0;
    while (true) {
        const size_t hit = s.find(pattern, pos);
        if (hit == std::string::npos) break;
        out.append(s, pos, hit - pos);
        out.append(content);
        pos = hit + pattern.size();
    }
    out.append(s, pos);
    s = std::move(out);
}

// Unicode White_Space, which is what Rust's regex `\s` matches (used for lstrip/rstrip).
bool is_white_space(char32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

// Rust regex `\w`: alphabetic, marks, decimal digits, connector punctuation (single_word tokens).
bool is_word_char(char32_t cp) {
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
        case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
            return true;
        default:
            return false;
    }
}

char32_t last_code_point(std::string_view s) {
    size_t i = s.size();
    while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i;
    char32_t cp = 0;
    if (i > 0) utf8_decode(s, i - 1, cp);
    return cp;
}

struct AddedSplit {
    size_t start = 0, end = 0;
    std::optional<token_id> id;  // set when the range is an added token
};

// HF AddedVocabulary::find_matches: leftmost-longest matches over the whole text, then the
// single_word / lstrip / rstrip adjustments. The splits cover the text.
std::vector<AddedSplit> find_added(const Tokenizer::Impl& impl, const Tokenizer::Impl::Matcher& matcher,
                                   std::string_view s) {
    std::vector<AddedSplit> splits;
    size_t start_offset = 0;
    size_t pos = 0;
    while (pos < s.size()) {
        const auto& bucket = matcher.by_first_byte[static_cast<unsigned char>(s[pos])];
        const std::string* hit = nullptr;
        size_t hit_index = 0;
        for (size_t p : bucket) {  // longest first, so the first hit is the longest
            const std::string& pattern = matcher.patterns[p];
            if (s.compare(pos, pattern.size(), pattern) == 0) {
                hit = &pattern;
                hit_index = p;
                break;
            }
        }
        if (hit == nullptr) {
            ++pos;
            continue;
        }
        size_t start = pos, stop = pos + hit->size();
        pos = stop;  // matches never overlap, even a discarded one
        const AddedToken& token = impl.added_tokens[matcher.token_index[hit_index]];
        if (token.single_word) {
            const bool start_ok = start == 0 || !is_word_char(last_code_point(s.substr(0, start)));
            char32_t next_cp = 0;
            if (stop < s.size()) utf8_decode(s, stop, next_cp);
            const bool stop_ok = stop == s.size() || !is_word_char(next_cp);
            if (!start_ok || !stop_ok) continue;
        }
        if (token.lstrip) {
            // Start of the whitespace run that ends at `start`, not before the previous match.
            size_t run_start = start_offset, i = start_offset;
            while (i < start) {
                char32_t cp = 0;
                const size_t len = utf8_decode(s, i, cp);
                if (!is_white_space(cp)) run_start = i + len;
                i += len;
            }
            start = run_start;
        }
        if (token.rstrip) {
            while (stop < s.size()) {
                char32_t cp = 0;
                const size_t len = utf8_decode(s, stop, cp);
                if (!is_white_space(cp)) break;
                stop += len;
            }
            pos = stop;
        }
        if (start_offset < start) splits.push_back({start_offset, start, std::nullopt});
        splits.push_back({start, stop, token.id});
        start_offset = stop;
    }
    if (start_offset < s.size()) splits.push_back({start_offset, s.size(), std::nullopt});
    return splits;
}

struct Range {
    size_t start, end;
    bool is_match;
};

// HF NormalizedString::split: `ranges` cover the piece; returns the pieces to keep.
std::vector<std::pair<size_t, size_t>> apply_split_behavior(const std::vector<Range>& ranges,
                                                            tok::SplitBehavior behavior) {
    std::vector<std::pair<size_t, size_t>> out;
    switch (behavior) {
        case tok::SplitBehavior::isolated:
            for (const Range& r : ranges) out.emplace_back(r.start, r.end);
            break;
        case tok::SplitBehavior::removed:
            for (const Range& r : ranges) {
                if (!r.is_match) out.emplace_back(r.start, r.end);
            }
            break;
        case tok::SplitBehavior::contiguous: {
            bool previous_match = false;
            for (const Range& r : ranges) {
                if (r.is_match == previous_match && !out.empty()) {
                    out.back().second = r.end;
                } else {
                    out.emplace_back(r.start, r.end);
                }
                previous_match = r.is_match;
            }
            break;
        }
        case tok::SplitBehavior::merged_with_previous: {
            bool previous_match = false;
            for (const Range& r : ranges) {
                if (r.is_match && !previous_match && !out.empty()) {
                    out.back().second = r.end;
                } else {
                    out.emplace_back(r.start, r.end);
                }
                previous_match = r.is_match;
            }
            break;
        }
        case tok::SplitBehavior::merged_with_next: {
            bool previous_match = false;
            for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
                if (it->is_match && !previous_match && !out.empty()) {
                    out.back().first = it->start;
                } else {
                    out.emplace_back(it->start, it->end);
                }
                previous_match = it->is_match;
            }
            std::reverse(out.begin(), out.end());
            break;
        }
    }
    return out;
}

// Turns match ranges into ranges covering all of `piece` (matches and the gaps between them).
std::vector<Range> cover(size_t n, const std::vector<std::pair<size_t, size_t>>& matches, bool invert) {
    std::vector<Range> ranges;
    size_t prev = 0;
    for (const auto& [start, end] : matches) {
        if (prev < start) ranges.push_back({prev, start, invert});
        ranges.push_back({start, end, !invert});
        prev = end;
    }
    if (prev < n) ranges.push_back({prev, n, invert});
    return ranges;
}

void find_literal(std::string_view s, std::string_view literal, std::vector<std::pair<size_t, size_t>>& out) {
    if (literal.empty()) return;
    size_t pos = 0;
    while ((pos = s.find(literal, pos)) != std::string_view::npos) {
        out.emplace_back(pos, pos + literal.size());
        pos += literal.size();
    }
}

bool ends_with_replacement_char(std::string_view s) {
    return s.size() >= 3 && s.substr(s.size() - 3) == "\xEF\xBF\xBD";
}

}  // namespace

// ---- Impl: encoding ------------------------------------------------------------------------

std::string Tokenizer::Impl::normalize(std::string_view text) const {
    std::string s(text);
    for (const tok::NormalizerStep& step : normalizer) {
        switch (step.kind) {
            case tok::NormalizerStep::Kind::nfc:
                s = unicode_normalize(s, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
                break;
            case tok::NormalizerStep::Kind::nfd:
                s = unicode_normalize(s, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE));
                break;
            case tok::NormalizerStep::Kind::nfkc:
                s = unicode_normalize(
                    s, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT));
                break;
            case tok::NormalizerStep::Kind::nfkd:
                s = unicode_normalize(
                    s, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT));
                break;
            case tok::NormalizerStep::Kind::prepend:
                if (!s.empty()) s.insert(0, step.text);  // HF: empty text stays empty
                break;
            case tok::NormalizerStep::Kind::replace:
                replace_all(s, step.text, step.content);
                break;
        }
    }
    return s;
}

void Tokenizer::Impl::pre_tokenize(std::string_view segment, bool at_text_start,
                                   std::vector<std::string>& pieces) const {
    pieces.clear();
    if (segment.empty()) return;
    pieces.emplace_back(segment);
    // Whether pieces[0] begins at offset 0 of the original text (Metaspace prepend_scheme first).
    bool first_at_origin = at_text_start;
    std::vector<std::string> next;
    std::vector<std::pair<size_t, size_t>> matches;
    const auto& byte_map = byte_to_unicode();
    for (const tok::PreTokenizerStep& step : pre_tokenizer) {
        next.clear();
        bool next_first_at_origin = false;
        for (size_t p = 0; p < pieces.size(); ++p) {
            std::string& piece = pieces[p];
            const bool piece_at_origin = p == 0 && first_at_origin;
            switch (step.kind) {
                case tok::PreTokenizerStep::Kind::split: {
                    matches.clear();
                    if (step.regex) {
                        step.regex->find_all(piece, matches);
                    } else {
                        find_literal(piece, step.literal, matches);
                    }
                    const auto kept = apply_split_behavior(cover(piece.size(), matches, step.invert), step.behavior);
                    for (const auto& [start, end] : kept) {
                        if (end <= start) continue;
                        if (next.empty()) next_first_at_origin = piece_at_origin && start == 0;
                        next.emplace_back(piece.substr(start, end - start));
                    }
                    break;
                }
                case tok::PreTokenizerStep::Kind::byte_level: {
                    if (step.add_prefix_space && piece.front() != ' ') piece = " " + piece;  // not insert(0, ...): GCC 12 -Wrestrict false positive
                    matches.clear();
                    if (step.use_regex) {
                        step.regex->find_all(piece, matches);
                    } else {
                        matches.emplace_back(0, piece.size());
                    }
                    for (const Range& r : cover(piece.size(), matches, false)) {
                        std::string mapped;
                        mapped.reserve((r.end - r.start) * 2);
                        for (size_t i = r.start; i < r.end; ++i) {
                            append_utf8(mapped, byte_map[static_cast<unsigned char>(piece[i])]);
                        }
                        if (next.empty()) next_first_at_origin = piece_at_origin && r.start == 0;
                        next.push_back(std::move(mapped));
                    }
                    break;
                }
                case tok::PreTokenizerStep::Kind::metaspace: {
                    replace_all(piece, " ", step.replacement);
                    const bool starts_with_rep = piece.compare(0, step.replacement.size(), step.replacement) == 0;
                    if (!starts_with_rep && (step.prepend_scheme == tok::PrependScheme::always ||
                                             (step.prepend_scheme == tok::PrependScheme::first && piece_at_origin))) {
                        piece.insert(0, step.replacement);
                    }
                    if (!step.split_on_replacement) {
                        if (next.empty()) next_first_at_origin = piece_at_origin;
                        next.push_back(std::move(piece));
                        break;
                    }
                    matches.clear();
                    find_literal(piece, step.replacement, matches);
                    const auto kept = apply_split_behavior(cover(piece.size(), matches, false),
                                                           tok::SplitBehavior::merged_with_next);
                    for (const auto& [start, end] : kept) {
                        if (end <= start) continue;
                        if (next.empty()) next_first_at_origin = piece_at_origin && start == 0;
                        next.emplace_back(piece.substr(start, end - start));
                    }
                    break;
                }
            }
        }
        pieces.swap(next);
        first_at_origin = next_first_at_origin;
    }
}

void Tokenizer::Impl::encode_segment(std::string_view raw_segment, bool at_text_start, bool match_normalized_added,
                                     std::vector<token_id>& out) const {
    const std::string normalized = normalize(raw_segment);
    if (normalized.empty()) return;
    std::vector<std::string> pieces;
    auto encode_normalized = [&](std::string_view text, bool at_start) {
        pre_tokenize(text, at_start, pieces);
        for (const std::string& piece : pieces) model.tokenize(piece, out);
    };
    if (!match_normalized_added || normalized_matcher.empty()) {
        encode_normalized(normalized, at_text_start);
        return;
    }
    for (const AddedSplit& split : find_added(*this, normalized_matcher, normalized)) {
        if (split.id) {
            out.push_back(*split.id);
        } else {
            encode_normalized(std::string_view(normalized).substr(split.start, split.end - split.start),
                              at_text_start && split.start == 0);
        }
    }
}

// ---- Impl: decoding ------------------------------------------------------------------------

std::string Tokenizer::Impl::decode(std::span<const token_id> ids, bool skip_special_tokens) const {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (token_id id : ids) {
        const std::string* text = nullptr;
        if (auto it = added_by_id.find(id); it != added_by_id.end()) {
            text = &added_decode_text[it->second];
        } else {
            text = model.token_of(id);  // null: HF skips ids it does not know (padded embedding rows)
        }
        if (text == nullptr || (skip_special_tokens && special_contents.count(*text))) continue;
        tokens.push_back(*text);
    }
    if (!has_decoder) {
        std::string joined;
        for (size_t i = 0; i < tokens.size(); ++i) {
            if (i > 0) joined += ' ';
            joined += tokens[i];
        }
        return joined;
    }
    for (const tok::DecoderStep& step : decoder) {
        switch (step.kind) {
            case tok::DecoderStep::Kind::byte_level: {
                // One output string: bytes of all tokens together, then lossy UTF-8, so a
                // character split over several tokens is rebuilt. A token with a character outside
                // the byte alphabet (an added token, say) contributes its own UTF-8 bytes.
                std::string bytes;
                for (const std::string& t : tokens) {
                    const size_t mark = bytes.size();
                    bool all_mapped = true;
                    for (size_t i = 0; i < t.size();) {
                        char32_t cp = 0;
                        i += utf8_decode(t, i, cp);
                        const int b = unicode_to_byte(cp);
                        if (b < 0) {
                            all_mapped = false;
                            break;
                        }
                        bytes += static_cast<char>(b);
                    }
                    if (!all_mapped) {
                        bytes.resize(mark);
                        bytes += t;
                    }
                }
                tokens.assign(1, utf8_lossy(bytes));
                break;
            }
            case tok::DecoderStep::Kind::replace:
                for (std::string& t : tokens) replace_all(t, step.pattern, step.content);
                break;
            case tok::DecoderStep::Kind::byte_fallback: {
                std::vector<std::string> out;
                out.reserve(tokens.size());
                std::string pending;  // consecutive <0xNN> bytes
                size_t n_pending = 0;
                auto flush = [&] {
                    if (n_pending == 0) return;
                    if (is_valid_utf8(pending)) {
                        out.push_back(pending);
                    } else {
                        for (size_t k = 0; k < n_pending; ++k) out.emplace_back("\xEF\xBF\xBD");
                    }
                    pending.clear();
                    n_pending = 0;
                };
                for (std::string& t : tokens) {
                    unsigned value = 0;
                    bool is_byte = t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>';
                    for (size_t k = 3; is_byte && k < 5; ++k) {
                        const char c = t[k];
                        unsigned digit = 0;
                        if (c >= '0' && c <= '9') digit = c - '0';
                        else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
                        else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
                        else is_byte = false;
                        value = value * 16 + digit;
                    }
                    if (is_byte) {
                        pending += static_cast<char>(value);
                        ++n_pending;
                    } else {
                        flush();
                        out.push_back(std::move(t));
                    }
                }
                flush();
                tokens.swap(out);
                break;
            }
            case tok::DecoderStep::Kind::fuse: {
                std::string fused;
                for (const std::string& t : tokens) fused += t;
                tokens.assign(1, std::move(fused));
                break;
            }
            case tok::DecoderStep::Kind::strip:
                for (std::string& t : tokens) {
                    const std::string& c = step.content;
                    size_t begin = 0, end = t.size();
                    for (size_t k = 0; k < step.n_start && t.compare(begin, c.size(), c) == 0 && begin < end; ++k) {
                        begin += c.size();
                    }
                    for (size_t k = 0; k < step.n_stop && end - begin >= c.size() &&
                                       t.compare(end - c.size(), c.size(), c) == 0;
                         ++k) {
                        end -= c.size();
                    }
                    t = t.substr(begin, end - begin);
                }
                break;
            case tok::DecoderStep::Kind::metaspace:
                for (size_t i = 0; i < tokens.size(); ++i) {
                    replace_all(tokens[i], step.content, (i == 0 && step.metaspace_strip_first) ? "" : " ");
                }
                break;
        }
    }
    std::string text;
    for (const std::string& t : tokens) text += t;
    return text;
}

// ---- public API ----------------------------------------------------------------------------

std::vector<token_id> Tokenizer::encode(std::string_view text, EncodeMode mode, bool add_special_tokens) const {
    const Impl& impl = *impl_;
    if (!is_valid_utf8(text)) throw std::runtime_error(impl.source_name + ": encode: the text is not valid UTF-8");
    std::vector<token_id> ids;
    ids.reserve(text.size() / 3 + 8);
    if (mode == EncodeMode::plain || impl.raw_matcher.empty()) {
        impl.encode_segment(text, true, mode == EncodeMode::template_, ids);
    } else {
        for (const AddedSplit& split : find_added(impl, impl.raw_matcher, text)) {
            if (split.id) {
                ids.push_back(*split.id);
            } else {
                impl.encode_segment(text.substr(split.start, split.end - split.start), split.start == 0, true, ids);
            }
        }
    }
    if (add_special_tokens && impl.has_template) {
        std::vector<token_id> wrapped;
        wrapped.reserve(ids.size() + 4);
        for (const tok::TemplatePiece& piece : impl.template_single) {
            if (piece.is_sequence) {
                wrapped.insert(wrapped.end(), ids.begin(), ids.end());
            } else {
                wrapped.insert(wrapped.end(), piece.ids.begin(), piece.ids.end());
            }
        }
        ids.swap(wrapped);
    }
    return ids;
}

std::vector<size_t> Tokenizer::token_end_offsets(std::span<const token_id> ids) const {
    std::vector<size_t> end;
    end.reserve(ids.size());
    size_t offset = 0;
    for (const token_id id : ids) {
        offset += decode(std::span<const token_id>(&id, 1)).size();
        end.push_back(offset);
    }
    return end;
}

std::string Tokenizer::decode(std::span<const token_id> ids, bool skip_special_tokens) const {
    return impl_->decode(ids, skip_special_tokens);
}

// ---- IncrementalDecoder --------------------------------------------------------------------
//
// The window holds the ids already emitted ("prefix", decoded as prefix_text_) plus the ids not
// yet emitted. Decoding the window and dropping prefix_text_ gives the new text. Keeping the
// emitted ids in the window makes position-dependent decoder steps (Strip of the first space,
// Metaspace's first token) treat the new ids exactly as a decode of the whole sequence would.
// Text ending in U+FFFD is held back: the next token may complete the character.

namespace {
constexpr size_t k_max_pending_ids = 16;  // a character is at most 4 bytes; beyond this it is final

// Longest common prefix of a and b that ends on a UTF-8 character boundary of b.
size_t common_prefix(std::string_view a, std::string_view b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    while (n > 0 && n < b.size() && (static_cast<unsigned char>(b[n]) & 0xC0) == 0x80) --n;
    return n;
}
}  // namespace

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {}

std::string IncrementalDecoder::push(token_id id) {
    ids_.push_back(id);
    const std::string text = tokenizer_.decode(ids_, skip_special_);
    const size_t n_pending = ids_.size() - n_prefix_ids_;
    if (text.size() <= prefix_text_.size()) return {};
    if (ends_with_replacement_char(text) && n_pending < k_max_pending_ids) return {};
    const size_t keep = text.compare(0, prefix_text_.size(), prefix_text_) == 0 ? prefix_text_.size()
                                                                              : common_prefix(prefix_text_, text);
    std::string out = text.substr(keep);
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(n_prefix_ids_));
    n_prefix_ids_ = ids_.size();
    prefix_text_ = tokenizer_.decode(ids_, skip_special_);
    return out;
}

std::string IncrementalDecoder::flush() {
    const std::string text = tokenizer_.decode(ids_, skip_special_);
    if (text.size() <= prefix_text_.size() && text == prefix_text_) return {};
    const size_t keep = text.compare(0, prefix_text_.size(), prefix_text_) == 0 ? prefix_text_.size()
                                                                              : common_prefix(prefix_text_, text);
    std::string out = text.substr(keep);
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(n_prefix_ids_));
    n_prefix_ids_ = ids_.size();
    prefix_text_ = tokenizer_.decode(ids_, skip_special_);
    return out;
}

}  // namespace cc
