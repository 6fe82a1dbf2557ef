#include "core/engine/schema_pattern.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

namespace cc {

using Ranges = std::vector<std::pair<char32_t, char32_t>>;  // closed ranges

// The pattern's syntax tree.
struct PatternNode {
    enum Kind { chars, cat, alt, repeat, bol, eol } kind = cat;
    Ranges set;                     // chars
    std::vector<PatternNode> kids;  // cat, alt; repeat: one
    uint32_t min = 0, max = 0;      // repeat; max == k_none: unbounded
};

namespace {

constexpr char32_t k_max_cp = 0x10FFFF;
constexpr uint32_t k_max_dfa_states = 4096;
constexpr uint32_t k_max_nfa_states = 20000;
constexpr uint32_t k_max_repeat = 1000;
// One step of compiling (a state visited, an edge walked): a hostile pattern is refused once the
// budget is spent, before it costs seconds.
void spend(uint64_t& left, uint64_t steps) {
    if (left < steps) throw std::invalid_argument("too complex to compile (not supported)");
    left -= steps;
}

constexpr uint64_t k_max_length_bits = uint64_t{1} << 25;  // the lengths table: 4 MiB

Ranges normalize(Ranges r) {
    std::sort(r.begin(), r.end());
    Ranges out;
    for (const auto& [lo, hi] : r) {
        if (!out.empty() && lo <= out.back().second + 1)
            out.back().second = std::max(out.back().second, hi);
        else
            out.push_back({lo, hi});
    }
    return out;
}

Ranges complement(const Ranges& normalized) {
    Ranges out;
    char32_t next = 0;
    for (const auto& [lo, hi] : normalized) {
        if (lo > next) out.push_back({next, lo - 1});
        next = hi + 1;
    }
    if (next <= k_max_cp) out.push_back({next, k_max_cp});
    return out;
}

bool contains(const Ranges& normalized, char32_t c) {
    const auto it = std::upper_bound(normalized.begin(), normalized.end(), c,
                                     [](char32_t x, const std::pair<char32_t, char32_t>& r) { return x < r.first; });
    return it != normalized.begin() && std::prev(it)->second >= c;
}

const Ranges k_digit = {{'0', '9'}};
const Ranges k_word = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges k_space = {{9, 13},          {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                        {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const Ranges k_line_ends = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};
const Ranges k_any = {{0, k_max_cp}};
// What a strict string can hold without \u escapes: \b \t \n, \f \r, U+0020 on, no surrogates.
const Ranges k_writable = {{8, 10}, {12, 13}, {0x20, 0xD7FF}, {0xE000, k_max_cp}};

// Decodes UTF-8 (already checked by the JSON parser; a stray byte reads as itself).
std::vector<char32_t> code_points(std::string_view s) {
    std::vector<char32_t> out;
    for (size_t i = 0; i < s.size();) {
        const auto b = static_cast<uint8_t>(s[i]);
        const size_t n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
        if (n == 1 || i + n > s.size()) {
            out.push_back(b);
            ++i;
            continue;
        }
        char32_t c = b & (0x7F >> n);
        for (size_t k = 1; k < n; ++k) c = c << 6 | (static_cast<uint8_t>(s[i + k]) & 0x3F);
        out.push_back(c);
        i += n;
    }
    return out;
}

class Parser {
public:
    explicit Parser(std::string_view source) : source_(source), cps_(code_points(source)) {}

    PatternNode parse() {
        PatternNode r = alternation();
        if (more()) fail(peek() == ')' ? "\")\" without a \"(\"" : "unexpected character");
        return r;
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw std::invalid_argument(what + " (at character " + std::to_string(at_ + 1) + ")");
    }
    [[noreturn]] void unsupported(const std::string& what) const { fail(what + " are not supported"); }
    bool more() const { return at_ < cps_.size(); }
    char32_t peek(size_t ahead = 0) const { return at_ + ahead < cps_.size() ? cps_[at_ + ahead] : 0; }
    bool eat(char32_t c) {
        if (!more() || peek() != c) return false;
        ++at_;
        return true;
    }
    static bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }
    static bool is_alnum(char32_t c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
    static PatternNode chars(Ranges set) {
        PatternNode r;
        r.kind = PatternNode::chars;
        r.set = normalize(std::move(set));
        return r;
    }

    PatternNode alternation() {
        PatternNode first = sequence();
        if (!more() || peek() != '|') return first;
        PatternNode r;
        r.kind = PatternNode::alt;
        r.kids.push_back(std::move(first));
        while (eat('|')) r.kids.push_back(sequence());
        return r;
    }

    PatternNode sequence() {
        PatternNode r;
        r.kind = PatternNode::cat;
        while (more() && peek() != '|' && peek() != ')') {
            PatternNode a = atom();
            uint32_t min = 0, max = 0;
            if (quantifier(min, max)) {
                if (a.kind == PatternNode::bol || a.kind == PatternNode::eol) fail("an anchor cannot be repeated");
                PatternNode q;
                q.kind = PatternNode::repeat;
                q.min = min;
                q.max = max;
                q.kids.push_back(std::move(a));
                a = std::move(q);
                uint32_t m2 = 0, x2 = 0;
                if (quantifier(m2, x2)) fail("a quantifier after a quantifier (nothing to repeat)");
            }
            r.kids.push_back(std::move(a));
        }
        return r;
    }

    // A quantifier at the cursor, consumed; `{` that does not form one is a literal (Annex B).
    bool quantifier(uint32_t& min, uint32_t& max) {
        if (!more()) return false;
        const char32_t c = peek();
        if (c == '*' || c == '+' || c == '?') {
            ++at_;
            min = c == '+' ? 1 : 0;
            max = c == '?' ? 1 : SchemaPattern::k_none;
        } else if (c == '{') {
            size_t i = at_ + 1;
            const auto number = [&](uint32_t& into) {
                const size_t from = i;
                uint64_t v = 0;
                while (i < cps_.size() && is_digit(cps_[i]))
                    v = std::min<uint64_t>(v * 10 + (cps_[i++] - '0'), 1u << 30);
                into = static_cast<uint32_t>(v);
                return i > from;
            };
            if (!number(min)) return false;
            max = min;
            if (i < cps_.size() && cps_[i] == ',') {
                ++i;
                if (!number(max)) max = SchemaPattern::k_none;
            }
            if (i >= cps_.size() || cps_[i] != '}') return false;
            at_ = i + 1;
            if (max != SchemaPattern::k_none && min > max) fail("a repetition {n,m} with n greater than m");
            if (min > k_max_repeat || (max != SchemaPattern::k_none && max > k_max_repeat))
                fail("a repetition past " + std::to_string(k_max_repeat) + " is not supported");
        } else {
            return false;
        }
        eat('?');  // lazy: the same language
        return true;
    }

    PatternNode atom() {
        const char32_t c = peek();
        ++at_;
        switch (c) {
            case '^':
                return PatternNode{PatternNode::bol, {}, {}, 0, 0};
            case '$':
                return PatternNode{PatternNode::eol, {}, {}, 0, 0};
            case '.':
                return chars(complement(k_line_ends));
            case '[':
                return chars(class_body());
            case '\\':
                return chars(escape(false));
            case '*':
            case '+':
            case '?': {
                --at_;
                fail("nothing to repeat");
            }
            case '{': {
                --at_;
                uint32_t a = 0, b = 0;
                if (quantifier(a, b)) fail("nothing to repeat");
                ++at_;
                return chars({{c, c}});
            }
            case '(': {
                const size_t open = at_ - 1;  // errors point at the group
                if (eat('?')) {
                    if (eat(':')) {
                    } else if (peek() == '=' || peek() == '!') {
                        at_ = open;
                        unsupported("lookahead groups (?= (?!");
                    } else if (eat('<')) {
                        if (peek() == '=' || peek() == '!') {
                            at_ = open;
                            unsupported("lookbehind groups (?<= (?<!");
                        }
                        while (more() && peek() != '>') ++at_;  // a group name
                        if (!eat('>')) fail("a group name without \">\"");
                    } else {
                        at_ = open;
                        fail("an unknown group \"(?" +
                             std::string(1, static_cast<char>(peek(2) < 0x80 ? peek(2) : '?')) + "\"");
                    }
                }
                PatternNode inner = alternation();
                if (!eat(')')) fail("\"(\" without a \")\"");
                return inner;
            }
            default:
                return chars({{c, c}});
        }
    }

    uint32_t hex(size_t n) {
        uint32_t v = 0;
        for (size_t k = 0; k < n; ++k) {
            const char32_t h = peek();
            int d = h >= '0' && h <= '9'   ? int(h - '0')
                    : h >= 'a' && h <= 'f' ? int(h - 'a' + 10)
                    : h >= 'A' && h <= 'F' ? int(h - 'A' + 10)
                                           : -1;
            if (d < 0) fail("a hexadecimal escape needs " + std::to_string(n) + " hex digits");
            v = v * 16 + static_cast<uint32_t>(d);
            ++at_;
        }
        return v;
    }

    // After a backslash: the characters it stands for.
    Ranges escape(bool in_class) {
        if (!more()) fail("a pattern cannot end with a backslash");
        const char32_t c = peek();
        ++at_;
        switch (c) {
            case 'd':
                return k_digit;
            case 'D':
                return complement(k_digit);
            case 'w':
                return k_word;
            case 'W':
                return complement(k_word);
            case 's':
                return k_space;
            case 'S':
                return complement(normalize(k_space));
            case 't':
                return {{9, 9}};
            case 'n':
                return {{10, 10}};
            case 'v':
                return {{11, 11}};
            case 'f':
                return {{12, 12}};
            case 'r':
                return {{13, 13}};
            case 'b':
                if (in_class) return {{8, 8}};
                --at_;
                unsupported("word boundaries (\\b)");
            case 'B': {
                --at_;
                unsupported("word boundaries (\\B)");
            }
            case 'p':
            case 'P': {
                --at_;
                unsupported("Unicode property escapes (\\p{...})");
            }
            case 'k': {
                --at_;
                unsupported("backreferences (\\k<name>)");
            }
            case '0':
                if (is_digit(peek())) fail("octal escapes are not supported");
                return {{0, 0}};
            case 'c': {
                const char32_t l = peek();
                if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) fail("\\c needs a letter");
                ++at_;
                return {{l % 32, l % 32}};
            }
            case 'x': {
                const char32_t v = hex(2);
                return {{v, v}};
            }
            case 'u': {
                char32_t v = 0;
                if (eat('{')) {
                    while (more() && peek() != '}') {
                        v = v * 16 + hex(1);
                        if (v > k_max_cp) fail("\\u{...} past U+10FFFF");
                    }
                    if (!eat('}')) fail("\\u{ without a \"}\"");
                } else {
                    v = hex(4);
                    // A surrogate pair, written as two escapes, is one character.
                    if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
                        const size_t back = at_;
                        at_ += 2;
                        const char32_t low = hex(4);
                        if (low >= 0xDC00 && low <= 0xDFFF)
                            v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
                        else
                            at_ = back;
                    }
                }
                return {{v, v}};
            }
            default:
                --at_;
                if (is_digit(c)) unsupported("backreferences (\\1)");
                // Other letters and digits have no meaning (Python's \A, \Z would be misread).
                if (is_alnum(c)) fail("an unknown escape \\" + std::string(1, static_cast<char>(c)));
                ++at_;
                return {{c, c}};  // \. \- \/ \\ \( ...
        }
    }

    Ranges class_body() {
        const bool negated = eat('^');
        Ranges set;
        const auto class_atom = [&](bool& single) -> Ranges {
            if (!more()) fail("\"[\" without a \"]\"");
            const char32_t c = peek();
            ++at_;
            single = true;
            if (c != '\\') return Ranges{{c, c}};
            const char32_t letter = peek();
            single = letter != 'd' && letter != 'D' && letter != 'w' && letter != 'W' && letter != 's' && letter != 'S';
            return escape(true);
        };
        while (!eat(']')) {
            bool single = false;
            Ranges a = class_atom(single);
            if (peek() == '-' && peek(1) != ']' && at_ + 1 < cps_.size()) {
                ++at_;
                bool single_b = false;
                Ranges b = class_atom(single_b);
                if (!single || !single_b) fail("a range in a class must join two characters");
                if (a[0].first > b[0].first) fail("a class range out of order");
                set.push_back({a[0].first, b[0].first});
                continue;
            }
            set.insert(set.end(), a.begin(), a.end());
        }
        set = normalize(std::move(set));
        return negated ? complement(set) : set;
    }

    std::string_view source_;
    std::vector<char32_t> cps_;
    size_t at_ = 0;
};

// Thompson's construction: each state has at most one character edge, and edges that read
// nothing (always, at the text's start, at its end).
struct Nfa {
    struct State {
        Ranges set;
        uint32_t to = SchemaPattern::k_none;
        std::vector<uint32_t> eps, bol, eol;
    };
    std::vector<State> s;
    mutable std::vector<uint32_t> seen;  // closure's scratch: == stamp when visited
    mutable uint32_t stamp = 0;
    uint64_t* work_left = nullptr;  // the compile's budget (steps), shared by every part

    uint32_t add() {
        if (s.size() >= k_max_nfa_states)
            throw std::invalid_argument("the pattern's repetitions make it too large (more than " +
                                        std::to_string(k_max_nfa_states) + " automaton states)");
        s.emplace_back();
        return static_cast<uint32_t>(s.size() - 1);
    }

    std::pair<uint32_t, uint32_t> emit(const PatternNode& r) {
        switch (r.kind) {
            case PatternNode::chars: {
                const uint32_t a = add(), b = add();
                s[a].set = r.set;
                s[a].to = b;
                return {a, b};
            }
            case PatternNode::bol:
            case PatternNode::eol: {
                const uint32_t a = add(), b = add();
                (r.kind == PatternNode::bol ? s[a].bol : s[a].eol).push_back(b);
                return {a, b};
            }
            case PatternNode::cat: {
                const uint32_t a = add();
                uint32_t end = a;
                for (const PatternNode& k : r.kids) {
                    const auto [ks, ke] = emit(k);
                    s[end].eps.push_back(ks);
                    end = ke;
                }
                return {a, end};
            }
            case PatternNode::alt: {
                const uint32_t a = add(), b = add();
                for (const PatternNode& k : r.kids) {
                    const auto [ks, ke] = emit(k);
                    s[a].eps.push_back(ks);
                    s[ke].eps.push_back(b);
                }
                return {a, b};
            }
            case PatternNode::repeat: {
                const uint32_t a = add();
                uint32_t cur = a;
                for (uint32_t i = 0; i < r.min; ++i) {
                    const auto [ks, ke] = emit(r.kids[0]);
                    s[cur].eps.push_back(ks);
                    cur = ke;
                }
                const uint32_t end = add();
                if (r.max == SchemaPattern::k_none) {
                    const uint32_t loop = add();
                    const auto [ks, ke] = emit(r.kids[0]);
                    s[cur].eps.push_back(loop);
                    s[loop].eps.push_back(ks);
                    s[loop].eps.push_back(end);
                    s[ke].eps.push_back(loop);
                    return {a, end};
                }
                for (uint32_t i = r.min; i < r.max; ++i) {
                    const auto [ks, ke] = emit(r.kids[0]);
                    s[cur].eps.push_back(ks);
                    s[cur].eps.push_back(end);
                    cur = ke;
                }
                s[cur].eps.push_back(end);
                return {a, end};
            }
        }
        return {0, 0};
    }

    // The states reachable from `set` without reading a character, sorted. Every state it visits
    // counts against `work`, so that a hostile pattern is refused before it costs seconds.
    std::vector<uint32_t> closure(std::vector<uint32_t> set, bool at_start, bool at_end) const {
        if (seen.size() != s.size()) seen.assign(s.size(), 0);
        if (++stamp == 0) std::fill(seen.begin(), seen.end(), 0), stamp = 1;
        std::vector<uint32_t> todo = set;
        for (const uint32_t x : set) seen[x] = stamp;
        set.clear();
        while (!todo.empty()) {
            const uint32_t x = todo.back();
            todo.pop_back();
            set.push_back(x);
            spend(*work_left, 1);
            const auto follow = [&](const std::vector<uint32_t>& to) {
                for (const uint32_t y : to)
                    if (seen[y] != stamp) seen[y] = stamp, todo.push_back(y);
            };
            follow(s[x].eps);
            if (at_start) follow(s[x].bol);
            if (at_end) follow(s[x].eol);
        }
        std::sort(set.begin(), set.end());
        return set;
    }
};

}  // namespace

SchemaPattern::SchemaPattern(std::string_view source, uint32_t min_len, uint32_t max_len)
    : SchemaPattern({{std::string(source), "pattern \"" + std::string(source) + "\""}}, min_len, max_len) {}

SchemaPattern::SchemaPattern(const std::vector<Source>& sources, uint32_t min_len, uint32_t max_len, uint64_t max_work)
    : work_left_(max_work), max_work_(max_work) {
    std::string all;  // what an error names when the sources together are at fault
    for (const Source& source : sources) {
        all += (all.empty() ? "" : " and ") + source.label;
        try {
            std::vector<State> one = build(Parser(source.regex).parse(), work_left_);
            states_ = states_.empty() ? std::move(one) : intersect(states_, one, work_left_);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument((&source == &sources.front() ? source.label : all) + ": " + e.what());
        }
    }
    try {
        set_live();
        compute_lengths(min_len, max_len);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(all + ": " + e.what());
    }
}

// The product automaton: a string matches both (each is searched for on its own).
std::vector<SchemaPattern::State> SchemaPattern::intersect(const std::vector<State>& a, const std::vector<State>& b,
                                                           uint64_t& work_left) {
    std::vector<State> out;
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> ids{{{0, 0}, 0}};
    std::vector<std::pair<uint32_t, uint32_t>> pairs{{0, 0}};
    for (size_t d = 0; d < pairs.size(); ++d) {
        const State& x = a[pairs[d].first];
        const State& y = b[pairs[d].second];
        State z;
        z.accepting = x.accepting && y.accepting;
        // Both edge lists are sorted and split at the writable bounds: walk them together.
        for (size_t i = 0, k = 0; i < x.edges.size() && k < y.edges.size();) {
            spend(work_left, 1);
            const Edge& e = x.edges[i];
            const Edge& f = y.edges[k];
            const char32_t lo = std::max(e.lo, f.lo), hi = std::min(e.hi, f.hi);
            if (lo <= hi) {
                auto [it, added] = ids.emplace(std::make_pair(e.to, f.to), static_cast<uint32_t>(pairs.size()));
                if (added) {
                    if (pairs.size() >= k_max_dfa_states)
                        throw std::invalid_argument("their joint automaton passes " + std::to_string(k_max_dfa_states) +
                                                    " states (not supported)");
                    pairs.emplace_back(e.to, f.to);
                }
                z.edges.push_back({lo, hi, it->second, e.writable && f.writable});
            }
            if (e.hi < f.hi)
                ++i;
            else
                ++k;
        }
        out.push_back(std::move(z));
    }
    return out;
}

std::vector<SchemaPattern::State> SchemaPattern::build(const PatternNode& re, uint64_t& work_left) {
    std::vector<State> states;
    Nfa nfa;
    nfa.work_left = &work_left;
    // A search: any text before the match (the loop at `pre`) and after it (at `post`).
    const uint32_t pre = nfa.add();
    const auto [rs, re_end] = nfa.emit(re);
    const uint32_t post = nfa.add();
    nfa.s[pre].set = k_any, nfa.s[pre].to = pre;
    nfa.s[pre].eps.push_back(rs);
    nfa.s[re_end].eps.push_back(post);
    nfa.s[post].set = k_any, nfa.s[post].to = post;

    // Subset construction over code point intervals on which every NFA edge is constant. State 0
    // is the text's start (the only one where ^ holds), so it has no key in `ids`.
    std::vector<std::vector<uint32_t>> sets{nfa.closure({pre}, true, false)};
    std::map<std::vector<uint32_t>, uint32_t> ids;
    for (size_t d = 0; d < sets.size(); ++d) {
        std::vector<char32_t> bounds{0, k_max_cp + 1};
        for (const auto& [lo, hi] : k_writable) bounds.push_back(lo), bounds.push_back(hi + 1);
        for (const uint32_t x : sets[d]) {
            spend(work_left, 1 + nfa.s[x].set.size());
            for (const auto& [lo, hi] : nfa.s[x].set) bounds.push_back(lo), bounds.push_back(hi + 1);
        }
        std::sort(bounds.begin(), bounds.end());
        bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
        std::vector<Edge> edges;
        for (size_t i = 0; i + 1 < bounds.size(); ++i) {
            const char32_t lo = bounds[i], hi = bounds[i + 1] - 1;
            std::vector<uint32_t> next;
            spend(work_left, sets[d].size());  // this scan, and the lookup of its closure below
            for (const uint32_t x : sets[d])
                if (nfa.s[x].to != k_none && contains(nfa.s[x].set, lo)) next.push_back(nfa.s[x].to);
            if (next.empty()) continue;
            next = nfa.closure(std::move(next), false, false);
            auto [it, added] = ids.emplace(next, static_cast<uint32_t>(sets.size()));
            if (added) {
                if (sets.size() >= k_max_dfa_states)
                    throw std::invalid_argument("its automaton passes " + std::to_string(k_max_dfa_states) +
                                                " states (not supported)");
                sets.push_back(std::move(next));
            }
            const bool writable = contains(k_writable, lo);
            if (!edges.empty() && edges.back().to == it->second && edges.back().writable == writable &&
                edges.back().hi + 1 == lo)
                edges.back().hi = hi;
            else
                edges.push_back({lo, hi, it->second, writable});
        }
        states.emplace_back();
        states[d].edges = std::move(edges);
        const auto ends = nfa.closure(sets[d], d == 0, true);  // $ holds where the string ends
        states[d].accepting = std::binary_search(ends.begin(), ends.end(), post);
    }
    return states;
}

void SchemaPattern::set_live() {
    // live: a match can still end, reading writable characters only.
    const uint32_t n = n_states();
    std::vector<std::vector<uint32_t>> into(n);
    for (uint32_t x = 0; x < n; ++x)
        for (const Edge& e : states_[x].edges)
            if (e.writable) into[e.to].push_back(x);
    live_.assign(n, 0);
    std::vector<uint32_t> todo;
    for (uint32_t x = 0; x < n; ++x)
        if (states_[x].accepting) live_[x] = 1, todo.push_back(x);
    while (!todo.empty()) {
        const uint32_t x = todo.back();
        todo.pop_back();
        for (const uint32_t y : into[x])
            if (!live_[y]) live_[y] = 1, todo.push_back(y);
    }
    if (!live_[0]) throw std::invalid_argument("no string a call can write matches it");
}

void SchemaPattern::compute_lengths(uint32_t min_len, uint32_t max_len) {
    lengths_ = min_len > 0 || max_len != k_none;
    if (!lengths_) return;
    min_len_ = min_len;
    max_len_ = max_len;
    const uint32_t n = n_states();
    cap_ = min_len + n;
    words_ = (cap_ + 63) / 64;
    if (uint64_t{n} * words_ * 64 > k_max_length_bits)
        throw std::invalid_argument("a pattern with " + std::to_string(n) + " states and minLength " +
                                    std::to_string(min_len) + " is too large to check (not supported)");
    ends_.assign(size_t{n} * words_, 0);
    size_t n_edges = 0;
    for (const State& st : states_) n_edges += st.edges.size();
    spend(work_left_, uint64_t{cap_} * n_edges);  // the loop below
    const auto bit = [&](uint32_t s, uint32_t l) { return ends_[size_t{s} * words_ + l / 64] >> (l % 64) & 1; };
    for (uint32_t s = 0; s < n; ++s)
        if (states_[s].accepting) ends_[size_t{s} * words_] |= 1;
    for (uint32_t l = 0; l + 1 < cap_; ++l)
        for (uint32_t s = 0; s < n; ++s)
            for (const Edge& e : states_[s].edges)
                if (e.writable && bit(e.to, l)) {
                    ends_[size_t{s} * words_ + (l + 1) / 64] |= uint64_t{1} << ((l + 1) % 64);
                    break;
                }
    if (!can_end(0, 0)) throw std::invalid_argument("no string of a length within minLength and maxLength matches it");
}

uint32_t SchemaPattern::step(uint32_t state, char32_t cp) const {
    const auto& edges = states_[state].edges;
    const auto it =
        std::upper_bound(edges.begin(), edges.end(), cp, [](char32_t c, const Edge& e) { return c < e.lo; });
    if (it == edges.begin() || std::prev(it)->hi < cp) return k_none;
    return std::prev(it)->to;
}

bool SchemaPattern::can_end(uint32_t state, uint32_t used) const {
    if (!live_[state]) return false;
    if (!lengths_) return true;
    if (max_len_ != k_none && used > max_len_) return false;
    const uint32_t lo = min_len_ > used ? min_len_ - used : 0;
    uint32_t hi = lo + n_states() - 1;  // a shortest match of length >= lo is no longer
    if (max_len_ != k_none) hi = std::min(hi, max_len_ - used);
    if (lo > hi) return false;
    const uint64_t* row = ends_.data() + size_t{state} * words_;
    for (uint32_t w = lo / 64; w <= hi / 64; ++w) {
        uint64_t bits = row[w];
        if (w == lo / 64) bits &= ~uint64_t{0} << (lo % 64);
        if (w == hi / 64 && hi % 64 != 63) bits &= (uint64_t{1} << (hi % 64 + 1)) - 1;
        if (bits) return true;
    }
    return false;
}

bool SchemaPattern::can_step(uint32_t state, char32_t lo, char32_t hi, uint32_t used) const {
    for (const Edge& e : states_[state].edges)
        if (e.writable && e.lo <= hi && e.hi >= lo && can_end(e.to, used)) return true;
    return false;
}

bool SchemaPattern::matches(std::string_view utf8) const {
    uint32_t state = start();
    for (const char32_t c : code_points(utf8)) {
        state = step(state, c);
        if (state == k_none) return false;
    }
    return accepting(state);
}

namespace {

// RFC 3339 full-date (the days of each month, February 29 in leap years only) and full-time.
constexpr const char* k_date =
    R"((?:\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8]))|)"
    R"((?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29))";
constexpr const char* k_time =
    R"((?:[01]\d|2[0-3]):[0-5]\d:(?:[0-5]\d|60)(?:\.\d+)?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d))";
constexpr const char* k_label = R"([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)";
constexpr const char* k_octet = R"((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";

}  // namespace

std::optional<std::string> SchemaPattern::format_regex(std::string_view format) {
    const std::string date = k_date, time = k_time, label = k_label, octet = k_octet;
    if (format == "date") return "^" + date + "$";
    if (format == "time") return "^" + time + "$";
    if (format == "date-time") return "^" + date + "[Tt]" + time + "$";
    if (format == "duration")  // ISO 8601 as RFC 3339's appendix A: at least one part, T before hours
        return R"(^P(?:\d+W|(?:\d+Y(?:\d+M)?(?:\d+D)?|\d+M(?:\d+D)?|\d+D)(?:T(?:\d+H(?:\d+M)?(?:\d+S)?|\d+M(?:\d+S)?|\d+S))?)"
               R"(|T(?:\d+H(?:\d+M)?(?:\d+S)?|\d+M(?:\d+S)?|\d+S))$)";
    if (format == "email")  // the dot-atom local part and a hostname, as ajv's
        return R"(^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:)" + label + R"(\.)+)" +
               label + "$";
    if (format == "hostname") return "^" + label + R"((?:\.)" + label + R"()*\.?$)";
    if (format == "ipv4") return "^(?:" + octet + R"(\.){3})" + octet + "$";
    if (format == "uuid") return R"(^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$)";
    return std::nullopt;
}

}  // namespace cc
