#include "core/text/tool_set_diff.h"

#include <algorithm>
#include <stdexcept>

namespace cc {
namespace {

std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

bool structured(const ordered_json& v) { return v.is_object() || v.is_array(); }

struct ParsedTool {
    std::string text;
    ordered_json root;
    ordered_json function;  // the "function" object (the tool itself when it has none)
    std::string name;
};

ParsedTool parse_tool(const std::string& text, size_t index, const std::string& source) {
    const std::string where = source + ": tool " + std::to_string(index);
    ParsedTool t;
    t.text = text;
    t.root = parse_json_text(text, where);
    if (!t.root.is_object()) throw std::runtime_error(where + ": not a JSON object");
    const auto fn = t.root.find("function");
    t.function = fn != t.root.end() && fn->is_object() ? *fn : t.root;
    const auto name = t.function.find("name");
    if (name == t.function.end() || !name->is_string()) throw std::runtime_error(where + ": \"name\" must be a string");
    t.name = name->get<std::string>();
    return t;
}

std::vector<ParsedTool> parse_sorted(std::span<const std::string> texts, const std::string& source) {
    std::vector<std::string> sorted(texts.begin(), texts.end());
    std::sort(sorted.begin(), sorted.end());  // canonical order
    std::vector<ParsedTool> out;
    out.reserve(sorted.size());
    for (size_t i = 0; i < sorted.size(); ++i) out.push_back(parse_tool(sorted[i], i, source));
    return out;
}

// The first differing field of two tools (paths inside "function").
ToolChange compare_tools(const ParsedTool& stored, const ParsedTool& wanted) {
    ToolChange c;
    c.name = stored.name;
    if (stored.name != wanted.name) c.renamed_to = wanted.name;
    auto field = first_differing_field(stored.function, wanted.function, "", &c.change);
    if (!field) field = first_differing_field(stored.root, wanted.root, "", &c.change);  // outside "function"
    c.field = field.value_or("");
    return c;
}

// Equal apart from the name (the name keeps its position in the object, so key order counts).
bool same_but_name(const ParsedTool& stored, const ParsedTool& wanted) {
    ordered_json renamed = wanted.root;
    ordered_json& fn = renamed.contains("function") && renamed["function"].is_object() ? renamed["function"] : renamed;
    fn["name"] = stored.name;
    return py_json_dumps(renamed) == stored.text;
}

}  // namespace

std::optional<std::string> first_differing_field(const ordered_json& stored, const ordered_json& wanted,
                                                 const std::string& path, std::string* change) {
    auto report = [&](std::string at, const char* what) -> std::optional<std::string> {
        if (change) *change = what;
        return at;
    };
    if (stored.is_object() && wanted.is_object()) {
        for (const auto& [key, value] : stored.items()) {
            const auto it = wanted.find(key);
            if (it == wanted.end()) return report(join(path, key), "removed");
            if (auto d = first_differing_field(value, *it, join(path, key), change)) return d;
        }
        for (const auto& [key, value] : wanted.items())
            if (!stored.contains(key)) return report(join(path, key), "added");
        // Same keys, same values: the order may still differ, and the canonical text keeps it.
        auto a = stored.begin();
        for (auto b = wanted.begin(); b != wanted.end(); ++a, ++b)
            if (a.key() != b.key()) return report(path, "reordered");
        return std::nullopt;
    }
    if (stored.is_array() && wanted.is_array()) {
        const size_t n = std::min(stored.size(), wanted.size());
        for (size_t i = 0; i < n; ++i) {
            const auto& a = stored[i];
            const auto& b = wanted[i];
            // Into an element only when both are objects or both arrays (a schema inside anyOf,
            // items); a list of plain values (enum, required) is one field.
            if (structured(a) && a.type() == b.type()) {
                if (auto d = first_differing_field(a, b, path + "[" + std::to_string(i) + "]", change)) return d;
            } else if (a.dump() != b.dump()) {
                return report(path, "changed");
            }
        }
        if (stored.size() != wanted.size()) return report(path, "changed");
        return std::nullopt;
    }
    // Scalars, or values of different kinds. dump() tells 1 from 1.0, as the canonical text does.
    if (stored.type() != wanted.type() || stored.dump() != wanted.dump()) return report(path, "changed");
    return std::nullopt;
}

ToolSetDiff diff_tool_sets(std::span<const std::string> stored_texts, std::span<const std::string> wanted_texts,
                           const std::string& stored_source) {
    const std::vector<ParsedTool> stored = parse_sorted(stored_texts, stored_source);
    const std::vector<ParsedTool> wanted = parse_sorted(wanted_texts, "tool set");
    std::vector<bool> wanted_matched(wanted.size(), false);
    std::vector<size_t> stored_unmatched;
    ToolSetDiff diff;

    // 1. by name
    for (size_t i = 0; i < stored.size(); ++i) {
        const auto it = std::find_if(wanted.begin(), wanted.end(), [&](const ParsedTool& w) { return w.name == stored[i].name; });
        if (it == wanted.end()) {
            stored_unmatched.push_back(i);
            continue;
        }
        const size_t j = static_cast<size_t>(it - wanted.begin());
        wanted_matched[j] = true;
        if (it->text == stored[i].text) ++diff.n_unchanged;
        else diff.changed.push_back(compare_tools(stored[i], *it));
    }
    // 2. renames: an unmatched pair equal apart from the name
    for (const size_t i : stored_unmatched) {
        bool renamed = false;
        for (size_t j = 0; j < wanted.size() && !renamed; ++j) {
            if (wanted_matched[j] || !same_but_name(stored[i], wanted[j])) continue;
            wanted_matched[j] = true;
            diff.changed.push_back(compare_tools(stored[i], wanted[j]));
            renamed = true;
        }
        if (!renamed) diff.removed.push_back(stored[i].name);
    }
    for (size_t j = 0; j < wanted.size(); ++j)
        if (!wanted_matched[j]) diff.added.push_back(wanted[j].name);
    // Renames were appended after the tools matched by name: back to the stored canonical order.
    std::stable_sort(diff.changed.begin(), diff.changed.end(), [&](const ToolChange& a, const ToolChange& b) {
        auto pos = [&](const ToolChange& c) {
            return std::find_if(stored.begin(), stored.end(), [&](const ParsedTool& t) { return t.name == c.name; }) -
                   stored.begin();
        };
        return pos(a) < pos(b);
    });
    return diff;
}

std::vector<std::string> canonical_texts(const ToolSet& tools) {
    std::vector<std::string> out;
    out.reserve(tools.size());
    for (const auto& t : tools.tools()) out.push_back(t.canonical_text);
    return out;
}

std::string tool_set_diff_text(const ToolSetDiff& diff) {
    if (diff.empty()) return "same tools";
    std::string out;
    auto add = [&](const std::string& item) { out += (out.empty() ? "" : ", ") + item; };
    for (const auto& n : diff.added) add("+" + n);
    for (const auto& n : diff.removed) add("-" + n);
    for (const auto& c : diff.changed) {
        if (!c.renamed_to.empty()) add(c.name + " -> " + c.renamed_to);
        else if (c.change == "reordered") add("~" + c.name + " (key order of " + (c.field.empty() ? "the tool" : c.field) + ")");
        else add("~" + c.name + " (" + c.field + (c.change == "changed" ? "" : " " + c.change) + ")");
    }
    return out;
}

}  // namespace cc
