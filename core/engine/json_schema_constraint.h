// Schema-constrained JSON for strict tool calls (`strict: true`, the CLI's --strict): a JSON Schema
// compiled into a character-level pushdown matcher, and the token mask it gives over a vocabulary
// (like llama.cpp's grammars or vLLM's guided decoding). The decode loop masks every token whose
// text cannot extend the text so far to a prefix of a schema-valid value (followed by a fixed
// tail, e.g. the call's "}\n</tool_call>"); a state never reached a dead end, so a masked
// reply can always be completed.
//
// Supported keywords (docs/server.md, "Strict tool calls"): type (string, number, integer, boolean,
// null, object, array, or a list of them), properties, required, additionalProperties (false,
// true or a schema), items, minItems, maxItems, enum, const, anyOf, minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, multipleOf (numbers), minLength, maxLength, pattern (an
// ECMA-262 regular expression: schema_pattern.h), oneOf of branches that compiling proves no value
// can match twice (by kind, enum/const values, number ranges, or a required tag property:
// pydantic's discriminated unions), and $ref to a JSON
// pointer within the schema ("#/$defs/Name", "#/definitions/Name", "#": pydantic's and FastMCP's
// form; recursive definitions too, each compiled once), allOf (one schema: that schema, pydantic
// v1's wrapper of a described $ref; several, and keywords beside allOf/anyOf/oneOf: merged into
// one schema that means the same, or refused); annotations that do not constrain a value
// (description, title, default, examples, $comment, $schema, deprecated, readOnly, writeOnly,
// discriminator, a format other than SchemaPattern::format_regex's, which are checked as patterns
// are) are read past. An enum or const keeps the values the other keywords
// accept. Any other keyword (not, uniqueItems, ...), a oneOf that may match twice,
// a $ref outside the schema or beside a constraining keyword, a schema that reaches itself through
// anyOf/$ref alone or has no finite value is refused by name: compile throws std::invalid_argument.
//
// An object that lists `properties` and does not say `additionalProperties` takes only the listed
// properties (as llama.cpp's grammars and OpenAI's strict mode): still JSON the schema accepts.
//
// What the matcher writes: JSON as json.dumps would (", " and ": " fit, as do compact and
// pretty-printed forms) with each whitespace run limited to nothing, one space, or a newline plus
// up to 20 spaces or tabs, so a masked model cannot spin on whitespace; an object at most 64
// properties (refused by name otherwise); keys of an object that allows extra properties without
// backslash escapes; enum and const values as py_json_dumps prints them; strings valid UTF-8 (no
// overlong form, no surrogate, raw or \u-escaped), without \u escapes under a pattern;
// an exponent of at most two digits (every number reads as a finite double); a number with bounds
// without an exponent and with at most 15 digits, and a digit is allowed only
// while some completion still lies within the bounds.
#pragma once

#include "core/base/json_text.h"
#include "core/text/tokenizer.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cc {

// One level of the matcher's stack (kinds and stages in json_schema_constraint.cpp). Trivially
// copyable, so a state is copied with memcpy while a mask is computed.
struct SchemaFrame {
    uint64_t used = 0;   // object: the properties seen (bit i = property i); string with a length
                         // bound: characters so far; bounded number: its digits as an integer
    uint32_t node = 0;   // schema node (value, string, number, object, array)
    uint32_t a = 0;      // per kind: literal / key trie node, tail position, current property,
                         // string with a pattern: the pattern's state
    uint32_t count = 0;  // array: items so far; string, key: UTF-8 continuation bytes still due
    uint32_t cp = 0;     // string: the bits of the UTF-8 sequence read so far
    uint8_t kind = 0;
    uint8_t stage = 0;
    uint8_t ws = 0;      // the whitespace run before the next token of this frame
    uint8_t aux = 0;     // bounded number: digits after the point; string: the UTF-8 sequence's length
    bool operator==(const SchemaFrame&) const = default;
};
using SchemaStack = std::vector<SchemaFrame>;  // bottom: the tail after the value

// Where the matcher is: every parse still alive (more than one only under anyOf or a type list).
struct SchemaState {
    std::vector<SchemaStack> stacks;
    bool dead() const { return stacks.empty(); }
    std::string key() const;  // the bytes of every frame: equal keys, equal futures
};

// A plain validator for the same keywords (the reference the matcher is tested against, and how
// a reply's arguments are checked after the fact): true when `value` satisfies `schema`. Keywords
// outside the supported set are not checked here (compile refuses them).
bool json_schema_valid(const ordered_json& schema, const ordered_json& value);

// Scratch stacks reused across steps (n live of v.size(), so their buffers are kept).
struct SchemaStackBuf {
    std::vector<SchemaStack> v;
    size_t n = 0;
    size_t push(const SchemaStack& s);  // copies s into the next slot, returns its index
};

// A JSON Schema compiled for matching, followed by a fixed tail text. Immutable once built.
class JsonSchemaGrammar {
public:
    // `where` names the schema in errors ("tool \"get_weather\""); the error also says where in
    // the schema the keyword is, e.g. `tool "f": strict: keyword "pattern" at
    // parameters.properties.zip is not supported (supported: ...)`.
    JsonSchemaGrammar(const ordered_json& schema, std::string tail, const std::string& where);
    ~JsonSchemaGrammar();
    JsonSchemaGrammar(const JsonSchemaGrammar&) = delete;
    JsonSchemaGrammar& operator=(const JsonSchemaGrammar&) = delete;

    SchemaState start() const;
    // Advances by `text`, byte by byte; false (and a dead state) once a byte leaves the language.
    bool advance(SchemaState& state, std::string_view text) const;
    // The value and the whole tail have been read (with an empty tail: a number or literal that
    // could still grow counts as read).
    bool complete(const SchemaState& state) const;
    // Whole-text checks, for tests and callers that validate after the fact.
    bool accepts(std::string_view text) const;   // a complete value (+ tail), nothing after
    bool is_prefix(std::string_view text) const; // can still be completed

    struct Impl;
    const Impl& impl() const { return *impl_; }

private:
    std::unique_ptr<Impl> impl_;
};

// Every token's text in one byte trie, flattened in pre-order so that a mask is a single scan
// that skips whole subtrees a state cannot enter.
class TokenTrie {
public:
    // `texts[id]`: the token's decoded text; empty texts (special tokens) are never allowed.
    explicit TokenTrie(const std::vector<std::string>& texts);
    size_t vocab_size() const { return vocab_size_; }
    size_t n_nodes() const { return byte_.size(); }

    std::vector<uint8_t> byte_;    // (n_nodes) the byte that leads into the node
    std::vector<uint16_t> depth_;  // (n_nodes) 1 = a first byte
    std::vector<uint32_t> skip_;   // (n_nodes) the index after the node's subtree
    std::vector<uint32_t> tok_off_;  // (n_nodes + 1) CSR into tok_ids_: the tokens whose text ends here
    std::vector<uint32_t> tok_ids_;

private:
    size_t vocab_size_ = 0;
};

// The token mask of a grammar over a trie, one bit per token id, memoised per state (a string's
// inside, for example, is one state however long the string grows).
class SchemaMasker {
public:
    SchemaMasker(std::shared_ptr<const JsonSchemaGrammar> grammar, std::shared_ptr<const TokenTrie> trie);
    const JsonSchemaGrammar& grammar() const { return *grammar_; }
    // (ceil(vocab / 64)) bit id%64 of word id/64: the token keeps the state alive. A masker is
    // shared by every request that constrains to its schema (the server runs several at once),
    // so allowed() and mask() take its lock; allowed() returns a copy.
    std::vector<uint64_t> allowed(const SchemaState& state);
    // Sets every token the state does not allow to -inf (ids past the trie's vocabulary too).
    // Throws std::runtime_error when no token is allowed.
    void mask(const SchemaState& state, std::vector<float>& logits);
    size_t cached_states() const {
        std::lock_guard lock(mutex_);
        return cache_.size();
    }

private:
    const std::vector<uint64_t>& allowed_locked(const SchemaState& state);  // valid until the next call
    mutable std::mutex mutex_;
    std::shared_ptr<const JsonSchemaGrammar> grammar_;
    std::shared_ptr<const TokenTrie> trie_;
    std::unordered_map<std::string, std::vector<uint64_t>> cache_;
    std::vector<SchemaStackBuf> levels_;  // scratch: the state after each depth of the trie
};

// The maskers of one vocabulary, by schema and tail, kept across requests so that each state's
// mask is computed once (an engine owns one; clear() when the tokenizer changes).
class SchemaMaskerCache {
public:
    // `where` names the schema in a compile error (see JsonSchemaGrammar).
    std::shared_ptr<SchemaMasker> get(const ordered_json& schema, const std::string& tail, const std::string& where,
                                      const std::vector<std::string>& token_texts);
    void clear();

private:
    std::mutex mutex_;  // requests on several threads share the cache
    std::shared_ptr<const TokenTrie> trie_;
    std::unordered_map<std::string, std::shared_ptr<SchemaMasker>> maskers_;
};

}  // namespace cc
