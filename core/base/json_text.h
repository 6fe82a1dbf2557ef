// JSON text exactly as Python's json.dumps writes it, which is what the chat templates' `tojson`
// filter produces (transformers: json.dumps(x, ensure_ascii=False, indent=..., sort_keys=False)).
// Key order is kept as given, so the rendered prompt is the one the official template renders.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

namespace cc {

using ordered_json = nlohmann::ordered_json;

// indent < 0: one line with ", " and ": " separators (json.dumps default).
// indent >= 0: newline + indent spaces per level, "," and ": " separators (json.dumps(indent=N)).
std::string py_json_dumps(const ordered_json& value, int indent = -1);

// Parses JSON text, refusing nesting deeper than `max_depth` before the parser sees it (so a
// hostile file cannot exhaust the stack). Throws std::runtime_error "<source>: <problem>".
ordered_json parse_json_text(std::string_view text, const std::string& source, int max_depth = 64);

// A number as JSON, or null where JSON has no form for it (NaN, e.g. a cosine with an all-zero
// vector, and the infinities).
inline ordered_json json_number_or_null(double x) { return std::isfinite(x) ? ordered_json(x) : ordered_json(nullptr); }

}  // namespace cc
