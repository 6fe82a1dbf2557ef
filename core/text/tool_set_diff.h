// What differs between two tool sets (the `why` of a cache miss): tools added, removed,
// renamed or changed, and for each changed tool the first field that differs. Pure: it compares
// canonical tool texts (Tool::canonical_text, what the prompt renders and the tools_hash covers),
// so a stored group that recorded its texts can be compared with a tool set being edited.
#pragma once

#include "core/text/tool_set.h"

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cc {

// One tool present on both sides (by name, or paired as a rename) whose canonical text differs.
struct ToolChange {
    std::string name;        // the stored tool's name
    std::string renamed_to;  // the new name when the tool was renamed (everything else equal), else ""
    // The first field that differs, as a path inside the tool's "function" object, in the stored
    // tool's key order: "name", "description", "parameters.properties.unit.enum",
    // "parameters.anyOf[1].type". An array of plain values is reported as a whole (its path).
    std::string field;
    // "changed" (both have the field, with other values), "added" (only the new tool has it),
    // "removed" (only the stored tool has it) or "reordered" (same keys and values, other key
    // order: the canonical text keeps the order given, so this too changes the prompt).
    std::string change;
};

struct ToolSetDiff {
    std::vector<std::string> added;     // names only in the new set (canonical order)
    std::vector<std::string> removed;   // names only in the stored set (canonical order)
    std::vector<ToolChange> changed;    // in the stored set's canonical order
    size_t n_unchanged = 0;             // tools whose canonical text is the same on both sides
    bool empty() const { return added.empty() && removed.empty() && changed.empty(); }
    size_t n_differences() const { return added.size() + removed.size() + changed.size(); }
};

// The first differing field between two JSON values, as a path below `path` ("" = the values
// themselves: then "" is returned when they differ at the top). std::nullopt when they are equal,
// key order included. `change` receives "changed", "added", "removed" or "reordered".
std::optional<std::string> first_differing_field(const ordered_json& stored, const ordered_json& wanted,
                                                 const std::string& path, std::string* change = nullptr);

// Compares a stored tool set with a new one, both given as canonical tool texts (any order).
// Tools are matched by name; an unmatched stored tool and an unmatched new tool that are equal
// apart from the name are reported as a rename (field "name"). Throws std::runtime_error naming
// `stored_source` and the index when a stored text is not a tool object.
ToolSetDiff diff_tool_sets(std::span<const std::string> stored_texts, std::span<const std::string> wanted_texts,
                           const std::string& stored_source = "stored tool set");

// The canonical texts of a set, in canonical order (what a group file records).
std::vector<std::string> canonical_texts(const ToolSet& tools);

// One line: "+name, -name, ~name (field), name -> new_name" or "same tools".
std::string tool_set_diff_text(const ToolSetDiff& diff);

}  // namespace cc
