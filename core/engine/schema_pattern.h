// A JSON Schema `pattern` for strict tool calls: an ECMA-262 regular expression compiled into a
// deterministic automaton over Unicode code points, which the strict-call matcher
// (json_schema_constraint.h) steps one character of a string at a time, and which tells it
// whether a match can still end, so that a masked string never reaches a dead end.
//
// Syntax (ECMA-262 with the u flag, as JSON Schema validators such as ajv read it: a character is
// a code point): literal characters; `.` (any but \n \r \u2028 \u2029); classes `[...]`, `[^...]`
// with ranges; \d \D \w \W \s \S; escapes \t \n \v \f \r \0 \cX \xHH \uHHHH (a surrogate pair
// joins) \u{H...} and a backslash before punctuation; groups `(...)`, `(?:...)`, `(?<name>...)`;
// alternation; quantifiers `*` `+` `?` `{n}` `{n,}` `{n,m}`, greedy or lazy (the same language);
// anchors `^` `$`. As JSON Schema says, a pattern is searched for, not matched whole: unanchored
// unless it anchors itself. Refused by name (std::invalid_argument saying what and where):
// backreferences, lookahead and lookbehind, word boundaries \b \B, property escapes \p{...},
// repetitions past 1,000, and a pattern whose automaton passes 4,096 states.
//
// The strings a strict call writes hold no \u escapes (json_schema_constraint.h), so the only
// characters below U+0020 they hold are \b \t \n \f \r, and never a lone surrogate: "can still
// end" counts only such writable characters; step() and matches() take any code point.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cc {

struct PatternNode;  // the pattern's syntax tree (schema_pattern.cpp)

class SchemaPattern {
public:
    static constexpr uint32_t k_none = std::numeric_limits<uint32_t>::max();

    // `min_len`, `max_len`: the string's minLength and maxLength in code points (k_none: none),
    // which can_end() and can_step() take into account. Throws std::invalid_argument.
    explicit SchemaPattern(std::string_view source, uint32_t min_len = 0, uint32_t max_len = k_none);
    // Several regular expressions a string must all match (a pattern and a format's); each error
    // starts with the label of the one at fault ("pattern \"^a$\"", "format \"date\"").
    struct Source {
        std::string regex;
        std::string label;
    };
    // `max_work`: the steps compiling may take (states visited, edges walked) before it refuses the
    // expressions as too complex; work() says how many it took, so a caller can share one budget.
    static constexpr uint64_t k_max_work = 5'000'000;  // about 0.15 s
    SchemaPattern(const std::vector<Source>& sources, uint32_t min_len, uint32_t max_len,
                  uint64_t max_work = k_max_work);
    uint64_t work() const { return max_work_ - work_left_; }

    // The regular expression of a string format strict calls check, as OpenAI's strict mode does
    // (date, time, date-time, duration, email, hostname, ipv4, uuid); nullopt for any other format
    // (an annotation, as JSON Schema has it by default).
    static std::optional<std::string> format_regex(std::string_view format);

    uint32_t start() const { return 0; }
    uint32_t n_states() const { return static_cast<uint32_t>(states_.size()); }
    // The state after `cp`, or k_none when no match can contain the text so far.
    uint32_t step(uint32_t state, char32_t cp) const;
    // The text so far contains a match (the string may end here, lengths aside).
    bool accepting(uint32_t state) const { return states_[state].accepting; }
    // A string that has `used` characters and is in `state` can still be completed, with
    // writable characters, to a match whose length lies within [min_len, max_len].
    bool can_end(uint32_t state, uint32_t used) const;
    // Some writable code point in [lo, hi] leads to a state where can_end(target, used): `used`
    // counts the characters with this one.
    bool can_step(uint32_t state, char32_t lo, char32_t hi, uint32_t used) const;
    // The validator: `utf8` (a decoded string) contains a match. Lengths are not checked here.
    bool matches(std::string_view utf8) const;

private:
    struct Edge {
        char32_t lo, hi;  // a code point range, wholly writable or wholly not
        uint32_t to;
        bool writable;
    };
    struct State {
        std::vector<Edge> edges;  // sorted by lo, disjoint
        bool accepting = false;
    };
    static std::vector<State> build(const PatternNode& re, uint64_t& work_left);  // one expression's automaton
    static std::vector<State> intersect(const std::vector<State>& a, const std::vector<State>& b, uint64_t& work_left);
    void set_live();  // live_, from states_; throws when no string can match
    void compute_lengths(uint32_t min_len, uint32_t max_len);

    uint64_t work_left_ = 0, max_work_ = 0;
    std::vector<State> states_;
    // What can_end() reads. Without lengths: live[s], a match can still end from s. With them:
    // ends[s] is a bitset over L in [0, cap): a match can end after exactly L more characters;
    // cap = min_len + n_states suffices for any query (a shortest path of length >= lo is shorter
    // than lo + n_states: a longer one repeats a state within its last n_states steps).
    std::vector<uint8_t> live_;
    bool lengths_ = false;
    uint32_t min_len_ = 0, max_len_ = k_none, cap_ = 0, words_ = 0;
    std::vector<uint64_t> ends_;  // (n_states, words_)
};

}  // namespace cc
