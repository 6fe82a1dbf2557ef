// Tool sets: parsing, validation, canonical text and order, and the tools_hash (DESIGN §3).
#pragma once

#include "core/base/json_text.h"

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace cc {

struct Tool {
    std::string name;
    ordered_json schema;         // normalised OpenAI form {"type":"function","function":{...}}
    std::string canonical_text;  // py_json_dumps(schema): exactly what the prompt renders
};

struct ToolSetLimits {
    size_t max_file_bytes = 16u << 20;  // 16 MiB
    int max_json_depth = 64;
    size_t max_tools = 4096;
};

class ToolSet {
public:
    ToolSet() = default;

    // Accepted forms (docs/server.md, "Tool lists"):
    //  - a JSON array of tools, or {"tools": [...]} (this is also an MCP `tools/list` result;
    //    `nextCursor` and other fields are ignored), or a JSON-RPC response {"jsonrpc", "result":
    //    {"tools": [...]}};
    //  - an array of such pages ({"tools": [...]} each), concatenated in order;
    //  - {"servers": {"NAME": <any of the above>, ...}}: the tools of several MCP servers, each
    //    name prefixed "NAME__" (NAME with characters outside [A-Za-z0-9_-] replaced by '_').
    // Each tool in OpenAI function format, bare {name, description, parameters}, or MCP
    // {name, title?, description?, inputSchema, outputSchema?, annotations?} (see mcp_to_function).
    // Throws std::runtime_error naming the source, the tool's index and name and the field, e.g.
    // `tools.json: tool 3 ("get_wheather"): "parameters" must be an object`.
    static ToolSet from_file(const std::filesystem::path& path, const ToolSetLimits& limits = {});
    static ToolSet from_json_text(std::string_view text, const std::string& source,
                                  const ToolSetLimits& limits = {});
    static ToolSet from_json(const ordered_json& root, const std::string& source, const ToolSetLimits& limits = {});
    static ToolSet from_tools(std::vector<Tool> tools, const std::string& source = "<tools>");

    // Tools in canonical order (by canonical text), the order the prompt renders them in.
    const std::vector<Tool>& tools() const { return tools_; }
    size_t size() const { return tools_.size(); }
    bool empty() const { return tools_.empty(); }
    std::vector<std::string> names() const;

    // SHA-256 (hex) of the sorted canonical texts joined with "\n". Order-invariant.
    const std::string& tools_hash() const { return tools_hash_; }

    // The set as a JSON array in canonical order (for export).
    ordered_json to_json() const;

private:
    std::vector<Tool> tools_;
    std::string tools_hash_;
};

// Validates and normalises one tool value (any of the three tool forms); `index` and `source` are
// used in error messages.
Tool make_tool(const ordered_json& value, size_t index, const std::string& source);

// An MCP tool: an object with "inputSchema" (and neither "parameters" nor "function").
bool is_mcp_tool(const ordered_json& value);
// {"type": "function", "function": {"name", "description"?, "parameters": inputSchema}}: the form
// the model sees. title, outputSchema, annotations, icons and _meta are dropped (they are for the
// client, not the prompt), so they do not change the tools_hash.
ordered_json mcp_to_function(const ordered_json& value, const std::string& where);
// The tool values of any accepted form (see ToolSet::from_json_text), flattened, MCP server
// prefixes applied, not yet validated.
std::vector<ordered_json> tool_values(const ordered_json& root, const std::string& source);

}  // namespace cc
