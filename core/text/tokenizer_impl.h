// Internals of cc::Tokenizer, shared by core/text/tokenizer*.cpp. Not part of the public API.
//
// The pipeline mirrors Hugging Face `tokenizers` step by step, because ids must match it exactly:
//   text -> [added-token split (template mode)] -> normalizer (per segment)
//        -> pre-tokenizer steps (per piece) -> BPE model (per piece) -> [post-processor]
// and for decoding: ids -> token strings -> decoder steps -> joined text.
#pragma once

#include "core/text/tokenizer.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace cc::tok {

// Transparent hashing so map lookups by string_view do not allocate a std::string.
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// Open-addressing token string -> id table. The vocab of Qwen3/Llama 3 holds ~150k entries and
// loading does ~4 lookups per entry; a flat probe array with stored hashes avoids a cache miss
// per chain node, which made std::unordered_map the largest cost of loading.
class VocabMap {
public:
    void reserve(size_t n_entries);
    void insert_or_assign(std::string key, token_id id);  // a repeated key keeps its last id
    std::optional<token_id> find(std::string_view key) const;
    size_t size() const { return keys_.size(); }
    const std::vector<std::string>& keys() const { return keys_; }
    const std::vector<token_id>& ids() const { return ids_; }

private:
    struct Slot {
        uint64_t hash = 0;
        uint32_t index_plus_1 = 0;  // 0: empty; else 1 + index into keys_/ids_
    };
    void rehash(size_t n_slots);
    std::vector<Slot> slots_;  // size is a power of two, at most half full
    std::vector<std::string> keys_;
    std::vector<token_id> ids_;
};

struct Merge {
    uint32_t rank = 0;
    token_id new_id = 0;
};

// Open-addressing (left id, right id) -> merge table; looked up for every adjacent symbol pair.
class MergeMap {
public:
    void reserve(size_t n_entries);
    void insert_or_assign(uint64_t key, Merge merge);
    const Merge* find(uint64_t key) const;

private:
    static constexpr uint64_t k_empty = ~uint64_t{0};  // never a key: ids are < 2^24
    struct Slot {
        uint64_t key = k_empty;
        Merge merge;
    };
    void rehash(size_t n_slots);
    std::vector<Slot> slots_;
    size_t n_entries_ = 0;
};

// A compiled PCRE2 pattern (UTF + UCP, JIT when available). Immutable after construction, so one
// instance is shared by all threads; match data is created per call.
class Regex {
public:
    // Throws std::runtime_error "<source>: <what> regex ... is invalid: <pcre2 message>".
    Regex(const std::string& pattern, const std::string& source, const std::string& what);
    ~Regex();
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    // Appends [start, end) byte ranges of all non-overlapping, non-empty matches in `text`.
    // `text` must be valid UTF-8 (checked once by the caller).
    void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

private:
    void* code_ = nullptr;  // pcre2_code_8*
    bool jit_ = false;
};

// ---- normalizer ----------------------------------------------------------------------------
struct NormalizerStep {
    enum class Kind { nfc, nfd, nfkc, nfkd, prepend, replace };
    Kind kind = Kind::nfc;
    std::string text;     // prepend: the prefix; replace: the pattern
    std::string content;  // replace: the replacement
};

// ---- pre-tokenizer -------------------------------------------------------------------------
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
enum class PrependScheme { always, first, never };

struct PreTokenizerStep {
    enum class Kind { split, byte_level, metaspace };
    Kind kind = Kind::split;
    // split
    std::shared_ptr<const Regex> regex;  // null: `literal` is the pattern
    std::string literal;
    SplitBehavior behavior = SplitBehavior::isolated;
    bool invert = false;
    // byte_level
    bool add_prefix_space = false;
    bool use_regex = false;  // the GPT-2 regex, compiled in `regex`
    // metaspace
    std::string replacement;  // one character, UTF-8
    PrependScheme prepend_scheme = PrependScheme::always;
    bool split_on_replacement = true;
};

// ---- decoder -------------------------------------------------------------------------------
struct DecoderStep {
    enum class Kind { byte_level, replace, byte_fallback, fuse, strip, metaspace };
    Kind kind = Kind::byte_level;
    std::string pattern;  // replace
    std::string content;  // replace: replacement; strip: the character; metaspace: replacement
    size_t n_start = 0;   // strip: how many leading `content` chars to remove
    size_t n_stop = 0;    // strip: how many trailing
    bool metaspace_strip_first = true;  // metaspace: prepend_scheme != never
};

// ---- post-processor ------------------------------------------------------------------------
struct TemplatePiece {
    bool is_sequence = false;     // $A
    std::vector<token_id> ids;    // a special token's ids
};

// ---- BPE model -----------------------------------------------------------------------------
// Words (pre-tokens) already merged, shared by all threads. Read-mostly, so a shared_mutex.
// Once full it stops growing (like HF's cache), which bounds memory on adversarial input.
class WordCache {
public:
    static constexpr size_t k_max_entries = 1 << 17;
    static constexpr size_t k_max_word_bytes = 256;  // longer words are not worth caching
    bool get(std::string_view word, std::vector<token_id>& out) const;
    void put(std::string_view word, const std::vector<token_id>& ids) const;

private:
    mutable std::shared_mutex mutex_;
    mutable std::unordered_map<std::string, std::vector<token_id>, StringHash, std::equal_to<>> map_;
};

struct BpeModel {
    VocabMap vocab;                      // token string -> id
    std::vector<int32_t> id_to_key;      // id -> index into vocab.keys(), -1 where the id is unused

    // The vocab string of `id`, or null when the model has no such id.
    const std::string* token_of(token_id id) const {
        if (id < 0 || static_cast<size_t>(id) >= id_to_key.size() || id_to_key[id] < 0) return nullptr;
        return &vocab.keys()[static_cast<size_t>(id_to_key[id])];
    }
    MergeMap merges;                     // key: pair_key(left, right)
    std::optional<token_id> unk_id;
    bool fuse_unk = false;
    bool byte_fallback = false;
    bool ignore_merges = false;
    std::array<token_id, 256> byte_fallback_ids{};  // <0xNN> ids; -1 where the vocab lacks that byte token
    // Fast path: id of the vocab entry that is exactly one code point, for code points < 2^16.
    std::vector<token_id> single_char_ids;
    WordCache cache;

    static uint64_t pair_key(token_id left, token_id right) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    }
    // Appends the ids of one pre-token.
    void tokenize(std::string_view word, std::vector<token_id>& out) const;
    void merge_word(std::string_view word, std::vector<token_id>& out) const;
};

}  // namespace cc::tok

namespace cc {

struct Tokenizer::Impl {
    std::string source_name;
    std::string model_kind;  // "byte_level_bpe" or "sentencepiece_bpe"

    std::vector<tok::NormalizerStep> normalizer;
    std::vector<tok::PreTokenizerStep> pre_tokenizer;
    tok::BpeModel model;
    std::vector<tok::DecoderStep> decoder;
    bool has_decoder = false;  // without one, HF joins tokens with " "
    bool has_template = false;
    std::vector<tok::TemplatePiece> template_single;

    std::vector<AddedToken> added_tokens;  // as listed in the file
    // What decode() and id_to_token() give for each added token. HF stores a `normalized` token's
    // content after normalization (Qwen3: NFC; Llama 2: "▁" prepended), so that is what it decodes.
    std::vector<std::string> added_decode_text;
    // HF's skip_special_tokens drops a token whose *string* is a special token's content.
    std::unordered_set<std::string, tok::StringHash, std::equal_to<>> special_contents;
    std::unordered_map<token_id, size_t> added_by_id;  // id -> index in added_tokens
    // Added tokens bucketed by first byte, longest first, for leftmost-longest matching.
    // Two sets: tokens matched on the raw text and those matched on the normalized text.
    struct Matcher {
        std::array<std::vector<size_t>, 256> by_first_byte;  // indices into `patterns`
        std::vector<std::string> patterns;
        std::vector<size_t> token_index;  // pattern -> index in added_tokens
        bool empty() const { return patterns.empty(); }
    };
    Matcher raw_matcher;
    Matcher normalized_matcher;

    size_t vocab_size = 0;
    std::optional<token_id> bos_id;

    // ---- pipeline (tokenizer_pipeline.cpp) ----
    std::string normalize(std::string_view text) const;
    // Splits one normalized segment into pre-tokens. `at_text_start`: the segment begins at
    // offset 0 of the original text (Metaspace prepend_scheme "first" depends on it).
    void pre_tokenize(std::string_view segment, bool at_text_start, std::vector<std::string>& pieces) const;
    void encode_segment(std::string_view raw_segment, bool at_text_start, bool match_normalized_added,
                        std::vector<token_id>& out) const;
    std::string decode(std::span<const token_id> ids, bool skip_special_tokens) const;
};

// Byte-level (GPT-2) alphabet: every byte maps to one printable code point.
const std::array<char32_t, 256>& byte_to_unicode();
// Inverse: code point -> byte, or -1; indexed by code point up to 0x143.
int unicode_to_byte(char32_t cp);

// UTF-8 helpers used across the tokenizer files.
bool is_valid_utf8(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
// Decodes the code point starting at s[i] (valid UTF-8 assumed) and returns its byte length.
size_t utf8_decode(std::string_view s, size_t i, char32_t& cp);
// Lossy conversion like Rust's String::from_utf8_lossy: each maximal invalid subsequence -> U+FFFD.
std::string utf8_lossy(std::string_view bytes);

}  // namespace cc
