#include "core/engine/json_schema_constraint.h"

#include "core/engine/schema_pattern.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <stdexcept>

namespace cc {
namespace {

// Value types, as bits: a node accepts the union of its bits.
enum : uint8_t {
    t_string = 1,
    t_number = 2,
    t_integer = 4,
    t_boolean = 8,
    t_null = 16,
    t_object = 32,
    t_array = 64,
    t_any = 127,
};

// Frame kinds.
enum : uint8_t { k_tail, k_value, k_string, k_number, k_literal, k_object, k_array };

// Stages. string: before the quote, inside, after a backslash, inside \uXXXX (4 stages).
enum : uint8_t { s_before, s_in, s_escape, s_hex0 };
// number: the JSON number grammar's states; "acc" ones may end the number.
enum : uint8_t { n_start, n_minus, n_zero /*acc*/, n_int /*acc*/, n_dot, n_frac /*acc*/, n_exp, n_exp_sign, n_exp_digits /*acc*/ };
// object: before "{", after "{", inside a key, before ":", after a value, after ",".
enum : uint8_t { o_before, o_open, o_key, o_colon, o_after, o_comma };
// array: before "[", after "[", after an item.
enum : uint8_t { a_before, a_open, a_after };

constexpr uint32_t k_off_trie = std::numeric_limits<uint32_t>::max();   // key: an extra property's name
constexpr uint32_t k_additional = std::numeric_limits<uint32_t>::max();  // current property: an extra one
constexpr uint8_t k_no_ws = 255;  // whitespace slot already spent
constexpr uint8_t k_max_indent = 20;

// A whitespace run: nothing, one space, or "\n" and up to k_max_indent spaces or tabs.
// ws: 0 = nothing yet, 1 = one space, 2 + k = newline and k spaces/tabs, k_no_ws = none allowed.
bool take_ws(uint8_t& ws, uint8_t c) {
    if (c == ' ') {
        if (ws == 0) return ws = 1, true;
        if (ws >= 2 && ws < 2 + k_max_indent) return ++ws, true;
        return false;
    }
    if (c == '\t') {
        if (ws >= 2 && ws < 2 + k_max_indent) return ++ws, true;
        return false;
    }
    if (c == '\n' && ws == 0) return ws = 2, true;
    return false;
}

// One byte of string content outside an escape: no control characters, UTF-8 lead bytes set the
// number of continuation bytes due.
bool string_byte(uint32_t& due, uint8_t c) {
    if (c < 0x20) return false;
    if (c < 0x80) return true;
    if (c >= 0xC2 && c <= 0xDF) return due = 1, true;
    if (c >= 0xE0 && c <= 0xEF) return due = 2, true;
    if (c >= 0xF0 && c <= 0xF4) return due = 3, true;
    return false;  // a continuation byte without a lead, or a byte UTF-8 never uses
}

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

// A string's two-character escapes and the character each stands for.
constexpr std::pair<uint8_t, char32_t> k_short_escapes[] = {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 8},
                                                            {'f', 12},  {'n', 10},    {'r', 13},  {'t', 9}};

// A multiple of m in [lo, hi] (ends open or closed; infinite ends allowed), with a relative
// tolerance so that decimal multiples such as 0.3 of 0.1 count, as the validator counts them.
bool has_multiple(long double lo, long double hi, bool lo_open, bool hi_open, long double m) {
    if (!std::isfinite(lo) || !std::isfinite(hi)) return true;
    const long double tol = 1e-9L * m;
    long double n = std::ceil((lo - tol) / m);
    if (lo_open && std::fabs(n * m - lo) <= tol) n += 1;
    const long double x = n * m;
    return hi_open ? x < hi - tol : x <= hi + tol;
}

// v is a multiple of m, within the same tolerance.
bool is_multiple(double v, double m) {
    const double q = v / m;
    return std::fabs(q - std::round(q)) <= 1e-9 * std::max(1.0, std::fabs(q));
}
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

const char* const k_supported =
    "type, properties, required, additionalProperties, items, minItems, maxItems, enum, const, anyOf, "
    "oneOf (of branches no value can match twice), "
    "minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, minLength, maxLength, pattern, "
    "format (date, time, date-time, duration, email, hostname, ipv4, uuid checked; others annotations), "
    "$ref (#/... within the schema) with $defs or definitions, allOf (merged); "
    "annotations: description, title, default, examples, $comment, $schema, $id, deprecated, "
    "readOnly, writeOnly, discriminator";

// Where $ref targets live: read only through a $ref.
bool is_definitions(const std::string& key) {
    return key == "$defs" || key == "definitions";
}

bool is_annotation(const std::string& key) {
    static const char* const names[] = {"description", "title", "default",    "examples", "format",    "$comment",
                                        "$schema",     "$id",   "deprecated", "readOnly", "writeOnly", "discriminator"};
    return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return key == n; });
}

bool valid_in(const ordered_json& doc, const ordered_json& schema, const ordered_json& value, int depth);
bool same_value(const ordered_json& a, const ordered_json& b);

}  // namespace

// ---- the compiled schema -----------------------------------------------------------------------

struct JsonSchemaGrammar::Impl {
    struct TrieNode {
        std::vector<std::pair<uint8_t, uint32_t>> kids;
        int32_t terminal = -1;  // literal: 0 when a literal ends here; key: the property's index
        uint64_t below = 0;     // key: the properties whose key runs through this node
    };
    struct Node {
        uint8_t types = t_any;
        int32_t literals = -1;        // enum / const: the trie of the allowed values' texts
        std::vector<ordered_json> values;  // enum / const: those values
        std::vector<uint32_t> alts;   // anyOf, $ref: the alternatives (leaves once compiled); empty for a leaf
        // object
        std::vector<uint32_t> props;  // each property's value node
        std::vector<std::string> prop_names;
        uint64_t all_props = 0;
        uint64_t required = 0;
        uint32_t keys = 0;            // the trie of the properties' keys, each `name"` (JSON-escaped)
        bool closed = false;          // additionalProperties: false
        uint32_t additional = 0;      // extra properties' node (0 = any value)
        // array
        uint32_t items = 0;           // 0 = any value
        uint32_t min_items = 0;
        uint32_t max_items = std::numeric_limits<uint32_t>::max();
        // number bounds (bounded: any of them given)
        bool bounded = false;
        double min = -std::numeric_limits<double>::infinity(), max = std::numeric_limits<double>::infinity();
        bool min_excl = false, max_excl = false;
        double multiple = 0;  // multipleOf (0: none)
        // string length in code points (lengths: either given)
        bool lengths = false;
        uint32_t min_len = 0, max_len = std::numeric_limits<uint32_t>::max();
        int32_t pattern = -1;  // the string's pattern, in `patterns` (it knows the lengths too)
    };

    std::vector<Node> nodes;  // [0]: any JSON value
    std::vector<std::string> paths;  // where each node is in the schema (for errors)
    std::vector<const ordered_json*> sources;  // while compiling: each leaf's schema (null: any value)
    std::deque<ordered_json> made;             // while compiling: merged schemas (stable addresses)
    std::vector<TrieNode> trie;
    std::vector<SchemaPattern> patterns;
    uint64_t pattern_work_left = 4 * SchemaPattern::k_max_work;       // while compiling: all patterns together
    std::vector<std::pair<uint32_t, std::vector<uint32_t>>> one_ofs;  // while compiling: each oneOf's node, branches
    // While compiling: the whole schema ($ref targets are found in it) and each $ref's node.
    const ordered_json* doc = nullptr;
    std::unordered_map<std::string, uint32_t> refs;
    uint32_t bool_root = 0, null_root = 0;
    uint32_t root = 0;
    std::string tail;
    std::string where;

    uint32_t new_trie_node() {
        trie.emplace_back();
        return static_cast<uint32_t>(trie.size() - 1);
    }
    int32_t child(uint32_t at, uint8_t c) const {
        for (const auto& [b, to] : trie[at].kids)
            if (b == c) return static_cast<int32_t>(to);
        return -1;
    }
    void insert(uint32_t root_at, std::string_view text, int32_t terminal, uint64_t bit) {
        uint32_t at = root_at;
        trie[at].below |= bit;
        for (const char ch : text) {
            const uint8_t c = static_cast<uint8_t>(ch);
            int32_t next = child(at, c);
            if (next < 0) {
                const uint32_t made = new_trie_node();
                trie[at].kids.emplace_back(c, made);
                next = static_cast<int32_t>(made);
            }
            at = static_cast<uint32_t>(next);
            trie[at].below |= bit;
        }
        trie[at].terminal = terminal;
    }

    [[noreturn]] void refuse(const std::string& path, const std::string& problem) const {
        throw std::invalid_argument(where + ": strict: " + problem + " at " + path);
    }
    // `key` (anyOf, $ref, allOf) takes only annotations and definitions beside it.
    void alone(const ordered_json& s, const std::string& key, const std::string& path, const char* hint) const {
        for (auto it = s.begin(); it != s.end(); ++it)
            if (it.key() != key && !is_annotation(it.key()) && !is_definitions(it.key()))
                refuse(path, key + " together with \"" + it.key() + "\" is not supported (" + hint + ")");
    }

    uint32_t new_node(const std::string& path, const ordered_json* source = nullptr) {
        nodes.emplace_back();
        paths.push_back(path);
        sources.push_back(source);
        return static_cast<uint32_t>(nodes.size() - 1);
    }
    uint32_t compile(const ordered_json& s, const std::string& path, int depth);
    // allOf and keywords beside anyOf/oneOf: one schema that means both, or a refusal naming why.
    ordered_json merge(const ordered_json& a, const ordered_json& b, const std::string& path) const;
    ordered_json resolve(const ordered_json& s, const std::string& path) const;  // through a $ref alone
    static ordered_json base_of(const ordered_json& s, const std::string& key);  // s without key, $defs
    const ordered_json& keep(ordered_json s) {  // a schema made while compiling, alive until finish()
        made.push_back(std::move(s));
        return made.back();
    }
    uint32_t compile_ref(const ordered_json& s, const std::string& path, int depth);
    void finish();
    uint8_t kinds(uint32_t leaf) const;
    bool exclusive(uint32_t a, uint32_t b, int depth) const;
    std::vector<uint32_t> leaves(uint32_t n) const {
        return nodes[n].alts.empty() ? std::vector<uint32_t>{n} : nodes[n].alts;
    }

    bool code_point_goes_on(SchemaFrame& f, const SchemaPattern* pattern) const;
    bool run(SchemaStackBuf& b, size_t k, uint8_t c) const;
    void step_all(const SchemaStackBuf& in, uint8_t c, SchemaStackBuf& out) const;
};

uint32_t JsonSchemaGrammar::Impl::compile(const ordered_json& s, const std::string& path, int depth) {
    if (depth > 64) refuse(path, "the schema nests deeper than 64 levels");
    if (s.is_boolean()) {
        if (s.get<bool>()) return 0;
        refuse(path, "the schema false (no value) is not supported");
    }
    if (!s.is_object()) refuse(path, "a schema must be an object");
    if (s.contains("$ref")) return compile_ref(s, path, depth);
    if (s.contains("allOf")) {
        const auto& list = s["allOf"];
        if (!list.is_array() || list.empty()) refuse(path + ".allOf", "allOf must be a non-empty array");
        // One schema is that schema (pydantic v1 wraps a described $ref so); several, and keywords
        // beside them, are merged into one schema that means the same (merge() refuses otherwise).
        bool alone_here = true;
        for (auto it = s.begin(); it != s.end(); ++it)
            alone_here = alone_here && (it.key() == "allOf" || is_annotation(it.key()) || is_definitions(it.key()));
        if (list.size() == 1 && alone_here) return compile(list[0], path + ".allOf[0]", depth + 1);
        ordered_json merged = base_of(s, "allOf");
        for (size_t i = 0; i < list.size(); ++i)
            merged = merge(merged, list[i], path + ".allOf[" + std::to_string(i) + "]");
        return compile(keep(std::move(merged)), path, depth + 1);
    }
    // Keywords beside anyOf / oneOf hold for every branch: base and (b1 or b2) = (base and b1) or
    // (base and b2), so they are merged into each branch.
    for (const char* key : {"anyOf", "oneOf"})
        if (s.contains(key) && s[key].is_array() && !s[key].empty() &&
            !s.contains(key == std::string("anyOf") ? "oneOf" : "anyOf")) {
            const ordered_json base = base_of(s, key);
            bool has_base = false;
            for (auto it = base.begin(); it != base.end(); ++it) has_base = has_base || !is_annotation(it.key());
            if (!has_base) break;
            ordered_json branches = ordered_json::array();
            for (size_t i = 0; i < s[key].size(); ++i)
                branches.push_back(merge(base, s[key][i], path + "." + key + "[" + std::to_string(i) + "]"));
            return compile(keep(ordered_json{{key, std::move(branches)}}), path, depth + 1);
        }
    for (auto it = s.begin(); it != s.end(); ++it) {
        static const char* const constraining[] = {"type",
                                                   "properties",
                                                   "required",
                                                   "additionalProperties",
                                                   "items",
                                                   "minItems",
                                                   "maxItems",
                                                   "enum",
                                                   "const",
                                                   "anyOf",
                                                   "oneOf",
                                                   "minimum",
                                                   "maximum",
                                                   "exclusiveMinimum",
                                                   "exclusiveMaximum",
                                                   "minLength",
                                                   "maxLength",
                                                   "multipleOf",
                                                   "pattern"};
        const std::string& key = it.key();
        if (is_annotation(key) || is_definitions(key) ||
            std::any_of(std::begin(constraining), std::end(constraining), [&](const char* n) { return key == n; }))
            continue;
        throw std::invalid_argument(where + ": strict: keyword \"" + key + "\" at " + path +
                                    " is not supported (supported: " + k_supported + ")");
    }
    const uint32_t index = new_node(path, &s);

    // oneOf matches as anyOf does once finish() has shown that no value can match two branches.
    if (s.contains("anyOf") || s.contains("oneOf")) {
        const std::string key = s.contains("anyOf") ? "anyOf" : "oneOf";
        const auto& list = s[key];
        if (!list.is_array() || list.empty()) refuse(path + "." + key, key + " must be a non-empty array");
        alone(s, key, path, "put it inside each branch");
        std::vector<uint32_t> alts;  // made leaves by finish(), once every $ref's target is compiled
        for (size_t i = 0; i < list.size(); ++i)
            alts.push_back(compile(list[i], path + "." + key + "[" + std::to_string(i) + "]", depth + 1));
        if (key == "oneOf") one_ofs.push_back({index, alts});
        nodes[index].alts = std::move(alts);
        return index;
    }

    if (s.contains("enum") || s.contains("const")) {
        if (s.contains("enum") && s.contains("const")) refuse(path, "enum together with const is not supported");
        ordered_json values;
        if (s.contains("const")) {
            values = ordered_json::array({s["const"]});
        } else {
            values = s["enum"];
            if (!values.is_array() || values.empty()) refuse(path + ".enum", "enum must be a non-empty array");
        }
        const uint32_t root_at = new_trie_node();
        for (const auto& v : values)
            if (valid_in(*doc, s, v, 0)) {  // the other keywords hold
                insert(root_at, py_json_dumps(v), 0, 0);
                nodes[index].values.push_back(v);
            }
        if (nodes[index].values.empty()) refuse(path, "no value of its enum or const satisfies its other keywords");
        nodes[index].literals = static_cast<int32_t>(root_at);
        return index;
    }

    uint8_t types = 0;
    if (s.contains("type")) {
        const auto& t = s["type"];
        std::vector<ordered_json> names;
        if (t.is_string()) names.push_back(t);
        else if (t.is_array() && !t.empty()) names.assign(t.begin(), t.end());
        else refuse(path + ".type", "type must be a type name or a non-empty list of them");
        for (const auto& n : names) {
            const std::string name = n.is_string() ? n.get<std::string>() : n.dump();
            if (name == "string") types |= t_string;
            else if (name == "number") types |= t_number;
            else if (name == "integer") types |= t_integer;
            else if (name == "boolean") types |= t_boolean;
            else if (name == "null") types |= t_null;
            else if (name == "object") types |= t_object;
            else if (name == "array") types |= t_array;
            else refuse(path + ".type", "unknown type \"" + name + "\"");
        }
    } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
        types = t_object;
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
        types = t_array;
    } else {
        types = t_any;
    }
    nodes[index].types = types;

    // object
    std::vector<std::string> prop_names;
    std::vector<uint32_t> props;
    if (s.contains("properties")) {
        const auto& p = s["properties"];
        if (!p.is_object()) refuse(path + ".properties", "properties must be an object");
        if (p.size() > 64)
            refuse(path + ".properties", "an object with more than 64 properties (" + std::to_string(p.size()) +
                                             ") is not supported");
        for (auto it = p.begin(); it != p.end(); ++it) {
            prop_names.push_back(it.key());
            props.push_back(compile(it.value(), path + ".properties." + it.key(), depth + 1));
        }
    }
    const uint32_t keys = new_trie_node();
    for (size_t i = 0; i < prop_names.size(); ++i) {
        std::string text = py_json_dumps(ordered_json(prop_names[i]));  // "name", escaped
        text.erase(0, 1);                                              // the opening quote is read before the trie
        insert(keys, text, static_cast<int32_t>(i), uint64_t{1} << i);
    }
    Node& node = nodes[index];
    node.props = std::move(props);
    node.prop_names = prop_names;
    node.keys = keys;
    node.all_props = prop_names.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << prop_names.size()) - 1;
    if (s.contains("required")) {
        const auto& r = s["required"];
        if (!r.is_array()) refuse(path + ".required", "required must be an array of property names");
        for (const auto& name : r) {
            const auto at = std::find(prop_names.begin(), prop_names.end(), name.is_string() ? name.get<std::string>() : "");
            if (!name.is_string() || at == prop_names.end())
                refuse(path + ".required", "required names " + name.dump() + ", which is not in properties");
            nodes[index].required |= uint64_t{1} << (at - prop_names.begin());
        }
    }
    if (s.contains("additionalProperties")) {
        const auto& ap = s["additionalProperties"];
        if (ap.is_boolean()) {
            nodes[index].closed = !ap.get<bool>();
        } else {
            const uint32_t extra = compile(ap, path + ".additionalProperties", depth + 1);
            nodes[index].additional = extra;
        }
    } else {
        // As llama.cpp's grammars and OpenAI's strict mode: an object that lists its properties
        // takes only those unless additionalProperties says otherwise (a subset of what the schema
        // accepts, and no room for a weak model to ramble in made-up keys).
        nodes[index].closed = s.contains("properties");
    }
    // array
    if (s.contains("items")) {
        if (s["items"].is_array()) refuse(path + ".items", "items as a list (tuple validation) is not supported");
        const uint32_t items = compile(s["items"], path + ".items", depth + 1);
        nodes[index].items = items;
    }
    const auto count = [&](const char* key) -> uint32_t {
        const auto& v = s[key];
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > std::numeric_limits<uint32_t>::max())
            refuse(path + "." + key, std::string(key) + " must be a non-negative integer");
        return static_cast<uint32_t>(v.get<int64_t>());
    };
    if (s.contains("minItems")) nodes[index].min_items = count("minItems");
    if (s.contains("maxItems")) nodes[index].max_items = count("maxItems");
    if (nodes[index].min_items > nodes[index].max_items) refuse(path, "minItems is greater than maxItems");
    // string
    if (s.contains("minLength")) nodes[index].min_len = count("minLength"), nodes[index].lengths = true;
    if (s.contains("maxLength")) nodes[index].max_len = count("maxLength"), nodes[index].lengths = true;
    if (nodes[index].min_len > nodes[index].max_len) refuse(path, "minLength is greater than maxLength");
    // pattern, and a format strict calls check (as OpenAI's strict mode): strings must match both.
    std::vector<SchemaPattern::Source> regexes;
    if (s.contains("pattern")) {
        if (!s["pattern"].is_string()) refuse(path + ".pattern", "pattern must be a string");
        regexes.push_back({s["pattern"].get<std::string>(), "pattern \"" + s["pattern"].get<std::string>() + "\""});
    }
    if (s.contains("format") && s["format"].is_string())
        if (auto regex = SchemaPattern::format_regex(s["format"].get<std::string>()))
            regexes.push_back({*regex, "format \"" + s["format"].get<std::string>() + "\""});
    if (!regexes.empty() && (nodes[index].types & t_string)) {  // they constrain strings only
        try {
            // One budget for every pattern of the schema, so that many of them cannot add up to seconds.
            if (pattern_work_left == 0)
                throw std::invalid_argument(
                    "the schema's patterns together are too complex to compile (not supported)");
            patterns.emplace_back(regexes, nodes[index].min_len, nodes[index].max_len,
                                  std::min(pattern_work_left, SchemaPattern::k_max_work));
            pattern_work_left -= patterns.back().work();
        } catch (const std::invalid_argument& e) {
            refuse(path + (s.contains("pattern") ? ".pattern" : ".format"), e.what());
        }
        nodes[index].pattern = static_cast<int32_t>(patterns.size() - 1);
    }
    // number
    Node& num = nodes[index];
    const auto bound = [&](const char* key, double& into, bool exclusive, bool& excl, bool is_min) {
        if (!s.contains(key)) return;
        if (!s[key].is_number()) refuse(path + "." + key, std::string(key) + " must be a number");
        const double v = s[key].get<double>();
        if (!std::isfinite(v)) refuse(path + "." + key, std::string(key) + " must be finite");
        num.bounded = true;
        // The tighter of minimum and exclusiveMinimum (maximum alike) wins.
        const bool tighter = is_min ? (v > into || (v == into && exclusive)) : (v < into || (v == into && exclusive));
        if (tighter) into = v, excl = exclusive;
    };
    bound("minimum", num.min, false, num.min_excl, true);
    bound("exclusiveMinimum", num.min, true, num.min_excl, true);
    bound("maximum", num.max, false, num.max_excl, false);
    bound("exclusiveMaximum", num.max, true, num.max_excl, false);
    if (s.contains("multipleOf")) {
        const auto& m = s["multipleOf"];
        if (!m.is_number() || !(m.get<double>() > 0) || !std::isfinite(m.get<double>()))
            refuse(path + ".multipleOf", "multipleOf must be a number greater than 0");
        num.multiple = m.get<double>();
        if ((num.types & (t_number | t_integer)) == t_integer && std::floor(num.multiple) != num.multiple)
            refuse(path + ".multipleOf", "multipleOf of an integer must be an integer");
        num.bounded = true;
    }
    if (num.bounded) {
        const bool integer_only = (num.types & (t_number | t_integer)) == t_integer;
        bool some = num.min < num.max || (num.min == num.max && !num.min_excl && !num.max_excl);
        if (integer_only) {
            const double lo = num.min_excl ? std::floor(num.min) + 1 : std::ceil(num.min);
            const double hi = num.max_excl ? std::ceil(num.max) - 1 : std::floor(num.max);
            some = lo <= hi && (num.multiple == 0 || std::ceil(lo / num.multiple) <= std::floor(hi / num.multiple));
        } else if (some && num.multiple > 0) {
            some = has_multiple(num.min, num.max, num.min_excl, num.max_excl, num.multiple);
        }
        if (!some && (num.types & (t_number | t_integer))) refuse(path, "no number lies within its minimum and maximum");
        if (std::max(std::fabs(num.min == -std::numeric_limits<double>::infinity() ? 0 : num.min),
                     std::fabs(num.max == std::numeric_limits<double>::infinity() ? 0 : num.max)) >= 1e15)
            refuse(path, "a bound of 1e15 or more is not supported (bounded numbers have at most 15 digits)");
    }
    return index;
}

// {"$ref": "#/$defs/Name"} (pydantic's and FastMCP's form; also "#/definitions/...", "#" and any
// JSON pointer into the schema): a node whose one alternative is the target, compiled once per
// reference, so a schema may refer to itself (a tree, a linked list). finish() makes it a leaf list.
uint32_t JsonSchemaGrammar::Impl::compile_ref(const ordered_json& s, const std::string& path, int depth) {
    alone(s, "$ref", path, "put it in the referenced schema");
    const auto& r = s["$ref"];
    if (!r.is_string()) refuse(path + ".$ref", "$ref must be a string");
    const std::string ref = r.get<std::string>();
    if (ref.empty() || ref[0] != '#')
        refuse(path + ".$ref", "$ref \"" + ref + "\" does not point within the schema (only \"#/...\" is supported)");
    if (const auto it = refs.find(ref); it != refs.end()) return it->second;
    const ordered_json* target = nullptr;
    try {
        target = &doc->at(ordered_json::json_pointer(ref.substr(1)));
    } catch (const ordered_json::exception&) {
        refuse(path + ".$ref", "$ref \"" + ref + "\" does not resolve within the schema");
    }
    const uint32_t index = new_node(path);
    refs.emplace(ref, index);
    std::string at = "parameters";
    for (size_t i = 1; i < ref.size(); ++i) at += ref[i] == '/' ? '.' : ref[i];
    const uint32_t to = compile(*target, at, depth + 1);
    nodes[index].alts = {to};
    return index;
}

ordered_json JsonSchemaGrammar::Impl::base_of(const ordered_json& s, const std::string& key) {
    ordered_json base = ordered_json::object();
    for (auto it = s.begin(); it != s.end(); ++it)
        if (it.key() != key && !is_definitions(it.key())) base[it.key()] = it.value();
    return base;
}

ordered_json JsonSchemaGrammar::Impl::resolve(const ordered_json& s, const std::string& path) const {
    const ordered_json* at = &s;
    for (int hop = 0; at->is_object() && at->contains("$ref"); ++hop) {
        alone(*at, "$ref", path, "put it in the referenced schema");
        const auto& r = (*at)["$ref"];
        if (hop > 16 || !r.is_string() || r.get<std::string>().empty() || r.get<std::string>()[0] != '#')
            refuse(path + ".$ref", "a $ref in allOf must point within the schema");
        try {
            at = &doc->at(ordered_json::json_pointer(r.get<std::string>().substr(1)));
        } catch (const ordered_json::exception&) {
            refuse(path + ".$ref", "$ref \"" + r.get<std::string>() + "\" does not resolve within the schema");
        }
    }
    if (at->is_boolean()) {
        if (!at->get<bool>()) refuse(path, "the schema false (no value) is not supported");
        return ordered_json::object();
    }
    if (!at->is_object()) refuse(path, "a schema must be an object");
    return base_of(*at, "");
}

ordered_json JsonSchemaGrammar::Impl::merge(const ordered_json& a_in, const ordered_json& b_in,
                                            const std::string& path) const {
    ordered_json a = resolve(a_in, path), b = resolve(b_in, path);
    // A nested allOf is merged first; anyOf/oneOf go on to compile, which merges this base into them.
    for (ordered_json* x : {&a, &b})
        if (x->contains("allOf")) {
            ordered_json inner = base_of(*x, "allOf");
            const auto list = (*x)["allOf"];
            if (!list.is_array()) refuse(path + ".allOf", "allOf must be a non-empty array");
            for (const auto& part : list) inner = merge(inner, part, path + ".allOf");
            *x = std::move(inner);
        }
    const auto type_set = [&](const ordered_json& t) {
        std::vector<std::string> out;
        if (t.is_string())
            out.push_back(t.get<std::string>());
        else if (t.is_array())
            for (const auto& n : t) out.push_back(n.is_string() ? n.get<std::string>() : n.dump());
        return out;
    };
    for (auto it = b.begin(); it != b.end(); ++it) {
        const std::string& k = it.key();
        const ordered_json& v = it.value();
        if (!a.contains(k)) {
            a[k] = v;
            continue;
        }
        ordered_json& have = a[k];
        if (is_annotation(k)) continue;  // the first one's
        if (k == "type") {
            // integer within number is integer; otherwise the names both allow.
            std::vector<std::string> both;
            const auto ta = type_set(have), tb = type_set(v);
            const auto in = [](const std::vector<std::string>& l, const std::string& n) {
                return std::find(l.begin(), l.end(), n) != l.end();
            };
            for (const auto& n : ta)
                if (in(tb, n))
                    both.push_back(n);
                else if (n == "integer" && in(tb, "number"))
                    both.push_back(n);
            for (const auto& n : tb)
                if (n == "integer" && in(ta, "number") && !in(both, n)) both.push_back(n);
            if (both.empty()) refuse(path + ".type", "the schemas of the allOf have no type in common");
            have = both.size() == 1 ? ordered_json(both[0]) : ordered_json(both);
        } else if (k == "required") {
            for (const auto& r : v)
                if (std::find(have.begin(), have.end(), r) == have.end()) have.push_back(r);
        } else if (k == "properties" && have.is_object() && v.is_object()) {
            for (auto p = v.begin(); p != v.end(); ++p)
                if (!have.contains(p.key()))
                    have[p.key()] = p.value();
                else
                    have[p.key()] = ordered_json{{"allOf", ordered_json::array({have[p.key()], p.value()})}};
        } else if ((k == "minimum" || k == "minLength" || k == "minItems" || k == "exclusiveMinimum") &&
                   have.is_number() && v.is_number()) {
            if (v > have) have = v;
        } else if ((k == "maximum" || k == "maxLength" || k == "maxItems" || k == "exclusiveMaximum") &&
                   have.is_number() && v.is_number()) {
            if (v < have) have = v;
        } else if (k == "enum" && have.is_array() && v.is_array()) {
            ordered_json both = ordered_json::array();
            for (const auto& x : have)
                if (std::any_of(v.begin(), v.end(), [&](const ordered_json& y) { return same_value(x, y); }))
                    both.push_back(x);
            if (both.empty()) refuse(path + ".enum", "the schemas of the allOf have no enum value in common");
            have = std::move(both);
        } else if (same_value(have, v)) {
            // the same keyword, the same value
        } else {
            refuse(path, "\"" + k +
                             "\" in more than one schema of an allOf (or beside anyOf/oneOf) is not supported "
                             "unless its values are equal (merged: type, required, properties, enum, bounds)");
        }
    }
    // additionalProperties speaks of its own schema's properties only: merged, it would speak of the
    // other's too. So a schema that says it must list every property of the merged one.
    const ordered_json all = a.value("properties", ordered_json::object());
    for (const ordered_json* part : {&a_in, &b_in}) {
        const ordered_json r = resolve(*part, path);
        if (!r.contains("additionalProperties")) continue;
        const ordered_json own = r.value("properties", ordered_json::object());
        for (auto it = all.begin(); it != all.end(); ++it)
            if (!own.contains(it.key()))
                refuse(path,
                       "additionalProperties in one schema of an allOf (or beside anyOf/oneOf) whose other "
                       "schema lists a property it does not (\"" +
                           it.key() + "\") is not supported");
    }
    return a;
}

// After the whole schema is compiled: every anyOf and $ref node lists the leaves it may begin as
// (refused when it reaches itself through anyOf and $ref alone), and every leaf has a finite value
// (refused when it cannot, e.g. an object that requires itself): the matcher never enters a branch
// it could not finish.
void JsonSchemaGrammar::Impl::finish() {
    std::vector<uint8_t> seen(nodes.size(), 0);  // 1: being flattened, 2: done
    std::function<void(uint32_t)> flatten = [&](uint32_t n) {
        if (seen[n] == 2 || nodes[n].alts.empty()) return void(seen[n] = 2);
        if (seen[n] == 1)
            refuse(paths[n], "the schema refers to itself through anyOf or $ref alone, with no value in between");
        seen[n] = 1;
        std::vector<uint32_t> out;
        for (const uint32_t a : nodes[n].alts) {
            flatten(a);
            for (const uint32_t leaf : leaves(a))
                if (std::find(out.begin(), out.end(), leaf) == out.end()) out.push_back(leaf);
        }
        nodes[n].alts = std::move(out);
        seen[n] = 2;
    };
    for (uint32_t n = 0; n < nodes.size(); ++n) flatten(n);

    std::vector<uint8_t> finite(nodes.size(), 0);
    const auto some_finite = [&](uint32_t n) {
        const auto ls = leaves(n);
        return std::any_of(ls.begin(), ls.end(), [&](uint32_t l) { return finite[l] != 0; });
    };
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t n = 0; n < nodes.size(); ++n) {
            const Node& x = nodes[n];
            if (finite[n] || !x.alts.empty()) continue;
            bool ok = x.literals >= 0 || (x.types & (t_string | t_number | t_integer | t_boolean | t_null)) != 0;
            if (!ok && (x.types & t_object)) {
                ok = true;
                for (size_t i = 0; i < x.props.size(); ++i)
                    if ((x.required >> i & 1) && !some_finite(x.props[i])) ok = false;
            }
            if (!ok && (x.types & t_array)) ok = x.min_items == 0 || x.items == 0 || some_finite(x.items);
            if (ok) finite[n] = 1, changed = true;
        }
    }
    for (uint32_t n = 0; n < nodes.size(); ++n)
        if (nodes[n].alts.empty() && !finite[n])
            refuse(paths[n], "the schema has no finite value (it requires itself)");

    for (const auto& [n, branches] : one_ofs)
        for (size_t i = 0; i < branches.size(); ++i)
            for (size_t j = i + 1; j < branches.size(); ++j)
                if (!exclusive(branches[i], branches[j], 0))
                    refuse(paths[n] + ".oneOf", "branches " + std::to_string(i) + " and " + std::to_string(j) +
                                                    " may both match one value (supported: a oneOf whose branches "
                                                    "cannot, by type, by enum or const values, or by a required "
                                                    "property whose values differ; anyOf if a value may match both)");
    one_ofs.clear();
}

namespace {

constexpr int k_max_bounded_digits = 15;

// An interval of values with open or closed ends.
struct Interval {
    long double lo, hi;
    bool lo_open, hi_open;
};

bool overlap(const Interval& a, const Interval& b) {
    const long double lo = std::max(a.lo, b.lo), hi = std::min(a.hi, b.hi);
    const bool lo_open = (a.lo == lo && a.lo_open) || (b.lo == lo && b.lo_open);
    const bool hi_open = (a.hi == hi && a.hi_open) || (b.hi == hi && b.hi_open);
    return lo < hi || (lo == hi && !lo_open && !hi_open);
}

long double pow10l_int(int k) {
    long double p = 1;
    for (int i = 0; i < k; ++i) p *= 10;
    return p;
}

}  // namespace

// The kinds of JSON value a leaf takes, as bits (integer and number are one kind: numbers).
uint8_t JsonSchemaGrammar::Impl::kinds(uint32_t leaf) const {
    const Node& x = nodes[leaf];
    if (x.literals < 0) return static_cast<uint8_t>((x.types & ~t_integer) | ((x.types & t_integer) ? t_number : 0));
    uint8_t out = 0;
    for (const auto& v : x.values)
        out |= v.is_string()    ? t_string
               : v.is_number()  ? t_number
               : v.is_boolean() ? t_boolean
               : v.is_null()    ? t_null
               : v.is_object()  ? t_object
                                : t_array;
    return out;
}

// No value matches both a and b (nodes, so anyOf and $ref are read through their leaves), by what
// compiling already knows: the kinds of value, enum/const values that the other side refuses
// (checked with the validator against its schema), bounded numbers whose ranges do not meet, and
// objects that both require a property whose values are exclusive (pydantic's discriminated
// unions: a "const" tag per branch). False when it cannot tell.
bool JsonSchemaGrammar::Impl::exclusive(uint32_t a, uint32_t b, int depth) const {
    if (depth > 16) return false;
    for (const uint32_t la : leaves(a))
        for (const uint32_t lb : leaves(b)) {
            if (la == lb) return false;
            const Node& x = nodes[la];
            const Node& y = nodes[lb];
            const uint8_t common = kinds(la) & kinds(lb);
            if (common == 0) continue;
            // A literal side: none of its values is one the other side takes.
            if (x.literals >= 0 || y.literals >= 0) {
                const Node& lit = x.literals >= 0 ? x : y;
                const uint32_t other = x.literals >= 0 ? lb : la;
                if (std::any_of(lit.values.begin(), lit.values.end(), [&](const ordered_json& v) {
                        return !sources[other] || valid_in(*doc, *sources[other], v, 0);
                    }))
                    return false;
                continue;
            }
            if (common & (t_string | t_boolean | t_null | t_array)) return false;
            if (common & t_number) {
                if (!x.bounded || !y.bounded ||
                    overlap(Interval{x.min, x.max, x.min_excl, x.max_excl},
                            Interval{y.min, y.max, y.min_excl, y.max_excl}))
                    return false;
            }
            if (common & t_object) {
                bool split = false;
                for (size_t i = 0; i < x.props.size() && !split; ++i)
                    for (size_t k = 0; k < y.props.size() && !split; ++k)
                        split = (x.required >> i & 1) && (y.required >> k & 1) && x.prop_names[i] == y.prop_names[k] &&
                                exclusive(x.props[i], y.props[k], depth + 1);
                if (!split) return false;
            }
        }
    return true;
}

// Whether a bounded number in frame `f` (stage, sign, digits so far) can still end within its
// node's bounds. The values reachable from a prefix are a union of intervals: for the integer
// part I with j more digits, [I*10^j, (I+1)*10^j) (an integer: its integer points), and after the
// point with digits M/10^k, [M/10^k, (M+1)/10^k).
bool number_feasible(const JsonSchemaGrammar::Impl::Node& n, const SchemaFrame& f) {
    const bool integer = f.a & 1, neg = f.a & 2;
    const int remaining = k_max_bounded_digits - static_cast<int>(f.count);
    const Interval bounds{n.min, n.max, n.min_excl, n.max_excl};
    const long double m = n.multiple;
    const auto meets = [&](long double a, long double b, bool b_open) {  // magnitudes [a, b) or [a, b]
        Interval v = neg ? Interval{-b, -a, b_open, false} : Interval{a, b, false, b_open};
        if (!integer) {
            if (!overlap(v, bounds)) return false;
            if (m == 0) return true;
            const long double lo = std::max(v.lo, bounds.lo), hi = std::min(v.hi, bounds.hi);
            const bool lo_open = (v.lo == lo && v.lo_open) || (bounds.lo == lo && bounds.lo_open);
            const bool hi_open = (v.hi == hi && v.hi_open) || (bounds.hi == hi && bounds.hi_open);
            return has_multiple(lo, hi, lo_open, hi_open, m);
        }
        // Integers: the integer points of v within the bounds (multiples of m among them).
        const long double lo = std::max(std::ceil(v.lo), bounds.lo_open ? std::floor(bounds.lo) + 1 : std::ceil(bounds.lo));
        const long double hi = std::min(std::floor(v.hi), bounds.hi_open ? std::ceil(bounds.hi) - 1 : std::floor(bounds.hi));
        if (m == 0 || !std::isfinite(lo) || !std::isfinite(hi)) return lo <= hi;
        return std::ceil(lo / m) <= std::floor(hi / m);
    };
    const long double limit = std::max(std::fabs(static_cast<long double>(n.min)), std::fabs(static_cast<long double>(n.max)));
    switch (f.stage) {
        case n_start: return true;  // compile checked that some number fits
        case n_minus: return meets(0, pow10l_int(remaining) - 1, false) || (!integer && meets(0, pow10l_int(remaining - 1), true));
        case n_zero: return meets(0, 0, false) || (!integer && remaining >= 1 && meets(0, 1, true));
        case n_int: {
            const long double i = static_cast<long double>(f.used);
            for (int j = 0; j <= remaining; ++j) {
                const long double p = pow10l_int(j);
                if (meets(i * p, i * p + p - 1, false)) return true;
                if (!integer && j < remaining && meets(i * p, (i + 1) * p, true)) return true;
                if (std::isfinite(limit) && i * p > limit) break;
            }
            return false;
        }
        case n_dot:
        case n_frac: {
            const long double scale = pow10l_int(f.aux);
            const long double d = static_cast<long double>(f.used);
            if (remaining == 0) return meets(d / scale, d / scale, false);
            return meets(d / scale, (d + 1) / scale, true) || (f.stage == n_frac && meets(d / scale, d / scale, false));
        }
    }
    return false;
}

// Whether the bounded number in `f` may end here: its value, computed as a JSON reader would
// (digits / 10^k, one correctly rounded division), is within the bounds.
bool number_in_bounds(const JsonSchemaGrammar::Impl::Node& n, const SchemaFrame& f) {
    double v = static_cast<double>(f.used);  // < 10^15: exact
    if (f.aux > 0) v /= static_cast<double>(pow10l_int(f.aux));  // 10^k, k <= 15: exact
    if (f.a & 2) v = -v;
    if (n.multiple > 0 && !is_multiple(v, n.multiple)) return false;
    return (n.min_excl ? v > n.min : v >= n.min) && (n.max_excl ? v < n.max : v <= n.max);
}

// After a UTF-8 lead or continuation byte in a string: the code points the sequence can still
// become include valid ones (no overlong form, no surrogate) and, under a pattern, one that keeps a
// match possible within the lengths; at the sequence's last byte the pattern steps.
bool JsonSchemaGrammar::Impl::code_point_goes_on(SchemaFrame& f, const SchemaPattern* pattern) const {
    static constexpr char32_t first[] = {0, 0, 0x80, 0x800, 0x10000};  // by the sequence's length
    static constexpr char32_t last[] = {0, 0, 0x7FF, 0xFFFF, 0x10FFFF};
    const unsigned rest = 6 * f.count;
    const char32_t lo = std::max<char32_t>(f.cp << rest, first[f.aux]);
    const char32_t hi = std::min<char32_t>((f.cp << rest) | ((char32_t{1} << rest) - 1), last[f.aux]);
    if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return false;
    if (pattern && !pattern->can_step(f.a, lo, hi, static_cast<uint32_t>(f.used))) return false;
    if (f.count == 0) {  // lo == hi: the code point
        if (pattern) f.a = pattern->step(f.a, lo);
        f.cp = 0, f.aux = 0;  // so that equal futures keep equal states
    }
    return true;
}

// Processes byte `c` on stack b.v[k], in place. A value that may start several ways (anyOf, a
// list of types) forks: the other ways are appended to `b` and processed too. Returns false when
// the stack dies (the caller clears it).
bool JsonSchemaGrammar::Impl::run(SchemaStackBuf& b, size_t k, uint8_t c) const {
    for (;;) {
        SchemaStack& s = b.v[k];
        SchemaFrame& f = s.back();
        switch (f.kind) {
            case k_tail:
                if (f.a < tail.size() && static_cast<uint8_t>(tail[f.a]) == c) return ++f.a, true;
                return f.a == 0 && !tail.empty() && take_ws(f.ws, c);

            case k_value: {
                if (take_ws(f.ws, c)) return true;
                // The frames this value may begin with, each before its first byte.
                SchemaFrame ways[8];
                size_t n_ways = 0;
                std::vector<SchemaFrame> more;  // past 8 (a long anyOf)
                const auto add = [&](SchemaFrame w) {
                    if (n_ways < 8) ways[n_ways++] = w;
                    else more.push_back(w);
                };
                for (const uint32_t leaf : leaves(f.node)) {
                    const Node& n = nodes[leaf];
                    SchemaFrame w;
                    w.node = leaf;
                    if (n.literals >= 0) {
                        if (child(static_cast<uint32_t>(n.literals), c) >= 0) {
                            w.kind = k_literal;
                            w.a = static_cast<uint32_t>(n.literals);
                            add(w);
                        }
                        continue;
                    }
                    if ((n.types & t_string) && c == '"') w.kind = k_string, w.stage = s_before, add(w);
                    if ((n.types & (t_number | t_integer)) && (c == '-' || is_digit(c))) {
                        w.kind = k_number;
                        w.stage = n_start;
                        w.a = (n.types & t_number) ? 0 : 1;  // 1: an integer, no fraction or exponent
                        add(w);
                    }
                    if ((n.types & t_boolean) && (c == 't' || c == 'f'))
                        w.kind = k_literal, w.a = bool_root, add(w);
                    if ((n.types & t_null) && c == 'n') w.kind = k_literal, w.a = null_root, add(w);
                    if ((n.types & t_object) && c == '{') w.kind = k_object, w.stage = o_before, add(w);
                    if ((n.types & t_array) && c == '[') w.kind = k_array, w.stage = a_before, add(w);
                }
                if (n_ways == 0) return false;
                for (size_t i = 1; i < n_ways + more.size(); ++i) {
                    SchemaStack fork = b.v[k];
                    fork.back() = i < n_ways ? ways[i] : more[i - n_ways];
                    const size_t j = b.push(fork);
                    if (!run(b, j, c)) b.v[j].clear();
                }
                b.v[k].back() = ways[0];
                continue;  // the chosen way reads c
            }

            case k_literal: {
                const int32_t next = child(f.a, c);
                if (next >= 0) return f.a = static_cast<uint32_t>(next), true;
                if (trie[f.a].terminal < 0) return false;
                s.pop_back();  // the value is complete; c is the parent's
                continue;
            }

            case k_string: {
                const Node& sn = nodes[f.node];
                const SchemaPattern* pattern = sn.pattern >= 0 ? &patterns[static_cast<size_t>(sn.pattern)] : nullptr;
                if (f.count > 0) {  // a UTF-8 continuation byte
                    if ((c & 0xC0) != 0x80) return false;
                    f.cp = f.cp << 6 | (c & 0x3F);
                    --f.count;
                    return code_point_goes_on(f, pattern);
                }
                switch (f.stage) {
                    case s_before:
                        return c == '"' ? (f.stage = s_in, f.a = pattern ? pattern->start() : 0, true) : false;
                    case s_in: {
                        if (c == '"') {
                            if (sn.lengths && f.used < sn.min_len) return false;
                            if (pattern && !pattern->accepting(f.a)) return false;
                            return s.pop_back(), true;
                        }
                        if (sn.lengths && c >= 0x20) {
                            // One more character (an escape counts once, at its backslash). Without a
                            // maximum the count stops at the minimum, so the state stops changing.
                            if (f.used >= sn.max_len) return false;
                            if (sn.max_len != std::numeric_limits<uint32_t>::max() || f.used < sn.min_len) ++f.used;
                        }
                        if (c == '\\') {
                            if (pattern && !std::any_of(std::begin(k_short_escapes), std::end(k_short_escapes),
                                                        [&](const auto& e) {
                                                            return pattern->can_step(f.a, e.second, e.second,
                                                                                     static_cast<uint32_t>(f.used));
                                                        }))
                                return false;
                            return f.stage = s_escape, true;
                        }
                        if (!string_byte(f.count, c)) return false;
                        if (f.count > 0) {  // a lead byte: the code points it may begin
                            f.aux = static_cast<uint8_t>(f.count + 1);
                            f.cp = c & (0x7F >> f.aux);
                            return code_point_goes_on(f, pattern);
                        }
                        if (!pattern) return true;
                        if (!pattern->can_step(f.a, c, c, static_cast<uint32_t>(f.used))) return false;
                        f.a = pattern->step(f.a, c);
                        return true;
                    }
                    case s_escape: {
                        if (c == 'u') return pattern ? false : (f.stage = s_hex0, true);  // no \u under a pattern
                        const auto e = std::find_if(std::begin(k_short_escapes), std::end(k_short_escapes),
                                                    [&](const auto& x) { return x.first == c; });
                        if (e == std::end(k_short_escapes)) return false;
                        if (pattern) {
                            if (!pattern->can_step(f.a, e->second, e->second, static_cast<uint32_t>(f.used)))
                                return false;
                            f.a = pattern->step(f.a, e->second);
                        }
                        return f.stage = s_in, true;
                    }
                    default: {  // s_hex0 .. s_hex0 + 3
                        if (!is_hex(c)) return false;
                        f.cp = f.cp << 4 | static_cast<uint32_t>(is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
                        // No surrogate: a lone one is not JSON that parsers take (nlohmann refuses it),
                        // and a pair is written as the character itself.
                        if (f.stage == s_hex0 + 1 && f.cp >= 0xD8 && f.cp <= 0xDF) return false;
                        if (f.stage == s_hex0 + 3) return f.stage = s_in, f.cp = 0, true;
                        return ++f.stage, true;
                    }
                }
            }

            case k_number: {
                const Node& nn = nodes[f.node];
                const bool integer = f.a & 1;
                const bool exponent = !integer && !nn.bounded;  // a bounded number has none
                uint8_t next = 255;
                switch (f.stage) {
                    case n_start: next = c == '-' ? n_minus : c == '0' ? n_zero : is_digit(c) ? n_int : 255; break;
                    case n_minus: next = c == '0' ? n_zero : is_digit(c) ? n_int : 255; break;
                    case n_zero:
                    case n_int:
                        if (f.stage == n_int && is_digit(c)) next = n_int;
                        else if (!integer && c == '.') next = n_dot;
                        else if (exponent && (c == 'e' || c == 'E')) next = n_exp;
                        break;
                    case n_dot: next = is_digit(c) ? n_frac : 255; break;
                    case n_frac: next = is_digit(c) ? n_frac : (exponent && (c == 'e' || c == 'E')) ? n_exp : 255; break;
                    case n_exp: next = (c == '+' || c == '-') ? n_exp_sign : is_digit(c) ? n_exp_digits : 255; break;
                    case n_exp_sign:
                    case n_exp_digits: next = is_digit(c) && f.count < 2 ? n_exp_digits : 255; break;
                }
                if (next != 255) {
                    if (!nn.bounded) {
                        // An exponent has at most 2 digits, so every number reads as a finite double.
                        if (next == n_exp_digits) ++f.count;
                        return f.stage = next, true;
                    }
                    // Bounded: the digits are kept, and a byte is taken only while some completion fits.
                    SchemaFrame g = f;
                    g.stage = next;
                    if (c == '-') g.a |= 2;
                    if (is_digit(c) || c == '.') {
                        if (g.count >= k_max_bounded_digits) return false;
                        if (is_digit(c)) {
                            g.used = g.used * 10 + static_cast<uint64_t>(c - '0');
                            ++g.count;
                            if (f.stage == n_dot || f.stage == n_frac) ++g.aux;
                        }
                    }
                    if (!number_feasible(nn, g)) return false;
                    f = g;
                    return true;
                }
                const bool may_end = f.stage == n_zero || f.stage == n_int || f.stage == n_frac || f.stage == n_exp_digits;
                if (!may_end || (nn.bounded && !number_in_bounds(nn, f))) return false;
                s.pop_back();
                continue;
            }

            case k_object: {
                const Node& n = nodes[f.node];
                const bool more_keys = !n.closed || (n.all_props & ~f.used) != 0;
                switch (f.stage) {
                    case o_before:
                        return c == '{' ? (f.stage = o_open, f.ws = 0, true) : false;
                    case o_open:
                    case o_comma:
                        if (take_ws(f.ws, c)) return true;
                        if (c == '"' && more_keys) return f.stage = o_key, f.a = n.keys, f.count = 0, true;
                        if (c == '}' && f.stage == o_open && (n.required & ~f.used) == 0) return s.pop_back(), true;
                        return false;
                    case o_key: {
                        if (f.count > 0) {
                            if ((c & 0xC0) != 0x80) return false;
                            return --f.count, true;
                        }
                        if (f.a != k_off_trie) {
                            const int32_t next = child(f.a, c);
                            if (next >= 0) {
                                const TrieNode& t = trie[static_cast<size_t>(next)];
                                if (t.terminal >= 0) {  // the closing quote of a property's key
                                    const uint64_t bit = uint64_t{1} << t.terminal;
                                    if (f.used & bit) return false;  // a key twice
                                    f.used |= bit;
                                    f.a = static_cast<uint32_t>(t.terminal);
                                    f.stage = o_colon;
                                    f.ws = 0;
                                    return true;
                                }
                                // In a closed object a key must stay on the way to a property not yet given.
                                if (n.closed && (t.below & ~f.used) == 0) return false;
                                f.a = static_cast<uint32_t>(next);
                                return true;
                            }
                        }
                        if (n.closed) return false;
                        // An extra property's key: plain string bytes, no escapes.
                        if (c == '"') return f.a = k_additional, f.stage = o_colon, f.ws = 0, true;
                        if (c == '\\') return false;
                        f.a = k_off_trie;
                        return string_byte(f.count, c);
                    }
                    case o_colon: {
                        if (take_ws(f.ws, c)) return true;
                        if (c != ':') return false;
                        SchemaFrame v;
                        v.kind = k_value;
                        v.node = f.a == k_additional ? n.additional : n.props[f.a];
                        f.stage = o_after;
                        f.ws = 0;
                        s.push_back(v);
                        return true;
                    }
                    case o_after:
                        if (take_ws(f.ws, c)) return true;
                        if (c == ',' && more_keys) return f.stage = o_comma, f.ws = 0, true;
                        if (c == '}' && (n.required & ~f.used) == 0) return s.pop_back(), true;
                        return false;
                }
                return false;
            }

            case k_array: {
                const Node& n = nodes[f.node];
                switch (f.stage) {
                    case a_before:
                        return c == '[' ? (f.stage = a_open, f.ws = 0, true) : false;
                    case a_open: {
                        if (take_ws(f.ws, c)) return true;
                        if (c == ']') return n.min_items == 0 ? (s.pop_back(), true) : false;
                        if (n.max_items == 0) return false;
                        f.stage = a_after;
                        f.count = 1;
                        f.ws = 0;
                        SchemaFrame v;
                        v.kind = k_value;
                        v.node = n.items;
                        v.ws = k_no_ws;  // the whitespace after "[" was this frame's
                        s.push_back(v);
                        continue;  // the item reads c
                    }
                    case a_after:
                        if (take_ws(f.ws, c)) return true;
                        if (c == ']') return f.count >= n.min_items ? (s.pop_back(), true) : false;
                        if (c == ',' && f.count < n.max_items) {
                            ++f.count;
                            f.ws = 0;
                            SchemaFrame v;
                            v.kind = k_value;
                            v.node = n.items;
                            s.push_back(v);
                            return true;
                        }
                        return false;
                }
                return false;
            }
        }
        return false;
    }
}

void JsonSchemaGrammar::Impl::step_all(const SchemaStackBuf& in, uint8_t c, SchemaStackBuf& out) const {
    out.n = 0;
    for (size_t i = 0; i < in.n; ++i) {
        const size_t k = out.push(in.v[i]);
        if (!run(out, k, c)) out.v[k].clear();
    }
    size_t w = 0;
    for (size_t i = 0; i < out.n; ++i)
        if (!out.v[i].empty()) {
            if (w != i) std::swap(out.v[w], out.v[i]);
            ++w;
        }
    out.n = w;
}

size_t SchemaStackBuf::push(const SchemaStack& s) {
    if (n < v.size()) v[n] = s;
    else v.push_back(s);
    return n++;
}

// ---- JsonSchemaGrammar -------------------------------------------------------------------------

JsonSchemaGrammar::JsonSchemaGrammar(const ordered_json& schema, std::string tail, const std::string& where)
    : impl_(std::make_unique<Impl>()) {
    Impl& g = *impl_;
    g.tail = std::move(tail);
    g.where = where;
    g.new_node("parameters");  // [0]: any value (open objects, any items)
    g.bool_root = g.new_trie_node();
    g.insert(g.bool_root, "true", 0, 0);
    g.insert(g.bool_root, "false", 0, 0);
    g.null_root = g.new_trie_node();
    g.insert(g.null_root, "null", 0, 0);
    g.nodes[0].keys = g.new_trie_node();
    g.doc = &schema;
    g.root = g.compile(schema, "parameters", 0);
    g.finish();
    g.doc = nullptr;
    g.refs.clear();
    g.sources.clear();
    g.made.clear();
}

JsonSchemaGrammar::~JsonSchemaGrammar() = default;

SchemaState JsonSchemaGrammar::start() const {
    SchemaFrame tail;
    tail.kind = k_tail;
    SchemaFrame value;
    value.kind = k_value;
    value.node = impl_->root;
    return SchemaState{{SchemaStack{tail, value}}};
}

bool JsonSchemaGrammar::advance(SchemaState& state, std::string_view text) const {
    SchemaStackBuf a, b;
    a.v = std::move(state.stacks);
    a.n = a.v.size();
    for (const char ch : text) {
        impl_->step_all(a, static_cast<uint8_t>(ch), b);
        std::swap(a, b);
        if (a.n == 0) break;
    }
    a.v.resize(a.n);
    // Two ways that reached the same frames have the same future: keep one.
    std::sort(a.v.begin(), a.v.end(), [](const SchemaStack& x, const SchemaStack& y) {
        return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end(), [](const SchemaFrame& p, const SchemaFrame& q) {
            return std::memcmp(&p, &q, sizeof(SchemaFrame)) < 0;
        });
    });
    a.v.erase(std::unique(a.v.begin(), a.v.end()), a.v.end());
    state.stacks = std::move(a.v);
    return !state.dead();
}

bool JsonSchemaGrammar::complete(const SchemaState& state) const {
    const Impl& g = *impl_;
    for (const auto& s : state.stacks) {
        if (s.size() == 1 && s[0].kind == k_tail && s[0].a == g.tail.size()) return true;
        if (s.size() == 2 && g.tail.empty()) {  // a number or literal that could still grow
            const SchemaFrame& top = s[1];
            if (top.kind == k_number &&
                (top.stage == n_zero || top.stage == n_int || top.stage == n_frac || top.stage == n_exp_digits) &&
                (!g.nodes[top.node].bounded || number_in_bounds(g.nodes[top.node], top)))
                return true;
            if (top.kind == k_literal && g.trie[top.a].terminal >= 0) return true;
        }
    }
    return false;
}

bool JsonSchemaGrammar::accepts(std::string_view text) const {
    SchemaState s = start();
    return advance(s, text) && complete(s);
}

bool JsonSchemaGrammar::is_prefix(std::string_view text) const {
    SchemaState s = start();
    return advance(s, text);
}

std::string SchemaState::key() const {
    std::string out;
    for (const auto& s : stacks) {
        const uint32_t n = static_cast<uint32_t>(s.size());
        out.append(reinterpret_cast<const char*>(&n), sizeof n);
        out.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(SchemaFrame));
    }
    return out;
}

namespace {

// JSON Schema's equality: objects whatever their keys' order (ordered_json's == minds it), numbers by
// value (1 == 1.0), nothing else across types.
bool same_value(const ordered_json& a, const ordered_json& b) {
    if (a.is_object() && b.is_object()) {
        if (a.size() != b.size()) return false;
        for (auto it = a.begin(); it != a.end(); ++it) {
            const auto at = b.find(it.key());
            if (at == b.end() || !same_value(it.value(), *at)) return false;
        }
        return true;
    }
    if (a.is_array() && b.is_array())
        return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), same_value);
    return a == b;
}

// `doc` is the whole schema, where a $ref's target is looked up.
bool valid_in(const ordered_json& doc, const ordered_json& schema, const ordered_json& value, int depth) {
    const auto valid = [&](const ordered_json& s, const ordered_json& v) { return valid_in(doc, s, v, depth + 1); };
    if (depth > 512) return false;  // a $ref cycle with no value in between (compile refuses it)
    if (schema.is_boolean()) return schema.get<bool>();
    if (!schema.is_object()) return false;
    if (schema.contains("$ref")) {
        const auto& r = schema["$ref"];
        if (!r.is_string() || r.get<std::string>().empty() || r.get<std::string>()[0] != '#') return false;
        try {
            return valid(doc.at(ordered_json::json_pointer(r.get<std::string>().substr(1))), value);
        } catch (const ordered_json::exception&) {
            return false;
        }
    }
    // allOf, anyOf, oneOf, then the keywords beside them.
    if (schema.contains("allOf"))
        for (const auto& part : schema["allOf"])
            if (!valid(part, value)) return false;
    if (schema.contains("anyOf") && std::none_of(schema["anyOf"].begin(), schema["anyOf"].end(),
                                                 [&](const ordered_json& alt) { return valid(alt, value); }))
        return false;
    if (schema.contains("oneOf") && std::count_if(schema["oneOf"].begin(), schema["oneOf"].end(),
                                                  [&](const ordered_json& alt) { return valid(alt, value); }) != 1)
        return false;
    // enum and const, then every other keyword (a value of the enum may still break one).
    if (schema.contains("const") && !same_value(value, schema["const"])) return false;
    if (schema.contains("enum") &&
        (!schema["enum"].is_array() || std::none_of(schema["enum"].begin(), schema["enum"].end(),
                                                    [&](const ordered_json& v) { return same_value(value, v); })))
        return false;
    if (schema.contains("type")) {
        const auto& t = schema["type"];
        const auto is = [&](const std::string& name) {
            if (name == "string") return value.is_string();
            if (name == "number") return value.is_number();
            if (name == "integer") return value.is_number_integer() || (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>());
            if (name == "boolean") return value.is_boolean();
            if (name == "null") return value.is_null();
            if (name == "object") return value.is_object();
            if (name == "array") return value.is_array();
            return false;
        };
        bool ok = false;
        if (t.is_string()) ok = is(t.get<std::string>());
        else
            for (const auto& n : t) ok = ok || (n.is_string() && is(n.get<std::string>()));
        if (!ok) return false;
    }
    if (value.is_object()) {
        const ordered_json props = schema.value("properties", ordered_json::object());
        if (schema.contains("required"))
            for (const auto& r : schema["required"])
                if (!value.contains(r.get<std::string>())) return false;
        for (auto it = value.begin(); it != value.end(); ++it) {
            if (props.contains(it.key())) {
                if (!valid(props[it.key()], it.value())) return false;
            } else if (schema.contains("additionalProperties")) {
                if (!valid(schema["additionalProperties"], it.value())) return false;
            }
        }
    }
    if (value.is_number()) {
        const double v = value.get<double>();
        if (schema.contains("minimum") && !(v >= schema["minimum"].get<double>())) return false;
        if (schema.contains("maximum") && !(v <= schema["maximum"].get<double>())) return false;
        if (schema.contains("exclusiveMinimum") && !(v > schema["exclusiveMinimum"].get<double>())) return false;
        if (schema.contains("exclusiveMaximum") && !(v < schema["exclusiveMaximum"].get<double>())) return false;
        if (schema.contains("multipleOf") && !is_multiple(v, schema["multipleOf"].get<double>())) return false;
    }
    if (value.is_string()) {
        const std::string& text = value.get_ref<const std::string&>();
        const size_t n_chars = static_cast<size_t>(
            std::count_if(text.begin(), text.end(), [](char ch) { return (static_cast<uint8_t>(ch) & 0xC0) != 0x80; }));
        if (schema.contains("minLength") && n_chars < schema["minLength"].get<size_t>()) return false;
        if (schema.contains("maxLength") && n_chars > schema["maxLength"].get<size_t>()) return false;
        if (schema.contains("pattern") && schema["pattern"].is_string()) {
            try {
                if (!SchemaPattern(schema["pattern"].get<std::string>()).matches(text)) return false;
            } catch (const std::invalid_argument&) {
                // a pattern strict calls refuse is not checked here
            }
        }
        if (schema.contains("format") && schema["format"].is_string())
            if (const auto regex = SchemaPattern::format_regex(schema["format"].get<std::string>()))
                if (!SchemaPattern(*regex).matches(text)) return false;
    }
    if (value.is_array()) {
        if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>()) return false;
        if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>()) return false;
        if (schema.contains("items"))
            for (const auto& item : value)
                if (!valid(schema["items"], item)) return false;
    }
    return true;
}

}  // namespace

bool json_schema_valid(const ordered_json& schema, const ordered_json& value) {
    return valid_in(schema, schema, value, 0);
}

// ---- TokenTrie ---------------------------------------------------------------------------------

TokenTrie::TokenTrie(const std::vector<std::string>& texts) : vocab_size_(texts.size()) {
    std::vector<uint32_t> order;
    order.reserve(texts.size());
    for (size_t id = 0; id < texts.size(); ++id)
        if (!texts[id].empty()) order.push_back(static_cast<uint32_t>(id));
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return texts[a] < texts[b]; });
    // Pre-order: each text adds nodes for the bytes past its common prefix with the text before.
    std::vector<uint32_t> path;  // the node at each depth of the previous text
    std::vector<uint32_t> node_tokens_end;
    std::string_view prev;
    for (const uint32_t id : order) {
        const std::string_view t = texts[id];
        if (t.size() >= std::numeric_limits<uint16_t>::max())
            throw std::invalid_argument("TokenTrie: token " + std::to_string(id) + "'s text is 65535 bytes or longer");
        size_t lcp = 0;
        while (lcp < prev.size() && lcp < t.size() && prev[lcp] == t[lcp]) ++lcp;
        path.resize(lcp);
        for (size_t d = lcp; d < t.size(); ++d) {
            path.push_back(static_cast<uint32_t>(byte_.size()));
            byte_.push_back(static_cast<uint8_t>(t[d]));
            depth_.push_back(static_cast<uint16_t>(d + 1));
            tok_off_.push_back(static_cast<uint32_t>(tok_ids_.size()));
        }
        // The token ends at the deepest node on its path; nodes are added in order, so its
        // tokens are the last ones appended while it is the newest node.
        const uint32_t at = path.back();
        if (at + 1 != byte_.size())
            throw std::logic_error("TokenTrie: a text repeats out of order");  // sorted input makes this unreachable
        tok_ids_.push_back(id);
        prev = t;
    }
    tok_off_.push_back(static_cast<uint32_t>(tok_ids_.size()));
    // skip: the first later node no deeper than this one.
    skip_.assign(byte_.size(), static_cast<uint32_t>(byte_.size()));
    std::vector<uint32_t> open;
    for (uint32_t i = 0; i < byte_.size(); ++i) {
        while (!open.empty() && depth_[open.back()] >= depth_[i]) {
            skip_[open.back()] = i;
            open.pop_back();
        }
        open.push_back(i);
    }
}

// ---- SchemaMasker ------------------------------------------------------------------------------

SchemaMasker::SchemaMasker(std::shared_ptr<const JsonSchemaGrammar> grammar, std::shared_ptr<const TokenTrie> trie)
    : grammar_(std::move(grammar)), trie_(std::move(trie)) {}

std::vector<uint64_t> SchemaMasker::allowed(const SchemaState& state) {
    std::lock_guard lock(mutex_);
    return allowed_locked(state);
}

const std::vector<uint64_t>& SchemaMasker::allowed_locked(const SchemaState& state) {
    std::string key = state.key();
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    if (cache_.size() >= 512) cache_.clear();  // bound the memory (512 x vocab/8 bytes)

    const TokenTrie& t = *trie_;
    const auto& g = grammar_->impl();
    std::vector<uint64_t> bits((t.vocab_size() + 63) / 64, 0);
    if (levels_.size() < 2) levels_.resize(2);
    levels_[0].v = state.stacks;
    levels_[0].n = state.stacks.size();
    const size_t n_nodes = t.n_nodes();
    for (size_t i = 0; i < n_nodes;) {
        const size_t d = t.depth_[i];
        if (levels_.size() <= d) levels_.resize(d + 1);
        g.step_all(levels_[d - 1], t.byte_[i], levels_[d]);
        if (levels_[d].n == 0) {
            i = t.skip_[i];  // nothing below can be read either
            continue;
        }
        for (uint32_t j = t.tok_off_[i]; j < t.tok_off_[i + 1]; ++j) bits[t.tok_ids_[j] / 64] |= uint64_t{1} << (t.tok_ids_[j] % 64);
        ++i;
    }
    return cache_.emplace(std::move(key), std::move(bits)).first->second;
}

void SchemaMasker::mask(const SchemaState& state, std::vector<float>& logits) {
    std::lock_guard lock(mutex_);
    const std::vector<uint64_t>& bits = allowed_locked(state);
    bool any = false;
    const size_t n_known = std::min(logits.size(), trie_->vocab_size());
    for (size_t id = 0; id < n_known; ++id) {
        if (bits[id / 64] >> (id % 64) & 1) any = true;
        else logits[id] = -std::numeric_limits<float>::infinity();
    }
    for (size_t id = n_known; id < logits.size(); ++id) logits[id] = -std::numeric_limits<float>::infinity();
    if (!any) throw std::runtime_error("strict: no token of the vocabulary continues the arguments");
}

std::shared_ptr<SchemaMasker> SchemaMaskerCache::get(const ordered_json& schema, const std::string& tail,
                                                     const std::string& where, const std::vector<std::string>& token_texts) {
    std::lock_guard lock(mutex_);
    std::string key = tail + '\n' + schema.dump();
    if (auto it = maskers_.find(key); it != maskers_.end()) return it->second;
    auto grammar = std::make_shared<const JsonSchemaGrammar>(schema, tail, where);  // throws on an unsupported keyword
    if (!trie_ || trie_->vocab_size() != token_texts.size()) trie_ = std::make_shared<const TokenTrie>(token_texts);
    if (maskers_.size() >= 256) maskers_.clear();
    auto masker = std::make_shared<SchemaMasker>(std::move(grammar), trie_);
    maskers_.emplace(std::move(key), masker);
    return masker;
}

void SchemaMaskerCache::clear() {
    std::lock_guard lock(mutex_);
    trie_.reset();
    maskers_.clear();
}

}  // namespace cc
