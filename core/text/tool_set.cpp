#include "core/text/tool_set.h"

#include "core/base/sha256.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace cc {
namespace {

// ^[A-Za-z_][A-Za-z0-9_.-]{0,127}$ — checked by hand: the rule is small and an error can then
// say exactly which character is wrong.
std::string name_problem(const std::string& name) {
    if (name.empty()) return "is empty";
    if (name.size() > 128) return "is longer than 128 characters";
    auto alpha = [](unsigned char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
    auto rest = [&](unsigned char c) { return alpha(c) || (c >= '0' && c <= '9') || c == '.' || c == '-'; };
    if (!alpha(static_cast<unsigned char>(name[0]))) return "must start with a letter or '_'";
    for (size_t i = 1; i < name.size(); ++i)
        if (!rest(static_cast<unsigned char>(name[i])))
            return "has a character that is not a letter, digit, '_', '.' or '-' at position " + std::to_string(i);
    return {};
}

std::string type_name(const ordered_json& v) { return v.type_name(); }

// An MCP server's name as a tool-name prefix: characters outside [A-Za-z0-9_-] become '_'.
std::string sanitize_server_name(const std::string& name) {
    std::string out = name;
    for (char& c : out) {
        const auto u = static_cast<unsigned char>(c);
        if (!std::isalnum(u) && c != '_' && c != '-') c = '_';
    }
    return out;
}

// The tools of one MCP `tools/list` result (or a JSON-RPC response wrapping one, or an array of
// such pages), appended to `out` with their names prefixed by `prefix`. `where` names the value in
// error messages.
void collect_tools(const ordered_json& value, const std::string& where, const std::string& prefix,
                   std::vector<ordered_json>& out) {
    const ordered_json* v = &value;
    if (v->is_object() && v->contains("jsonrpc") && v->contains("result")) v = &(*v)["result"];
    if (v->is_array()) {
        // An array of pages ({"tools": [...]} each) or an array of tools.
        const bool pages = !v->empty() && std::all_of(v->begin(), v->end(), [](const ordered_json& p) {
            return p.is_object() && p.contains("tools") && !p.contains("name");
        });
        for (size_t i = 0; i < v->size(); ++i) {
            if (pages) {
                collect_tools((*v)[i], where + "[" + std::to_string(i) + "]", prefix, out);
                continue;
            }
            ordered_json tool = (*v)[i];
            if (!prefix.empty() && tool.is_object()) {
                ordered_json* fn = tool.contains("function") && tool["function"].is_object() ? &tool["function"] : &tool;
                if (fn->contains("name") && (*fn)["name"].is_string())
                    (*fn)["name"] = prefix + (*fn)["name"].get<std::string>();
            }
            out.push_back(std::move(tool));
        }
        return;
    }
    if (!v->is_object() || !v->contains("tools"))
        throw std::runtime_error(where + ": expected a JSON array of tools or an object with a \"tools\" array (or MCP "
                                 "tools/list pages, or {\"servers\": {NAME: tools/list result}}), not " +
                                 type_name(*v));
    const auto& tools = (*v)["tools"];
    if (!tools.is_array())
        throw std::runtime_error(where + ": \"tools\" must be an array, not " + type_name(tools));
    collect_tools(tools, where, prefix, out);
}

}  // namespace

bool is_mcp_tool(const ordered_json& value) {
    return value.is_object() && value.contains("inputSchema") && !value.contains("parameters") &&
           !value.contains("function");
}

ordered_json mcp_to_function(const ordered_json& value, const std::string& where) {
    // The function form the model sees: name, description, parameters = inputSchema. title,
    // outputSchema, annotations, icons and _meta are for the client, not the prompt, so they are
    // dropped and cannot change the key.
    ordered_json fn = ordered_json::object();
    if (!value.contains("name")) throw std::runtime_error(where + ": \"name\" is missing");
    fn["name"] = value["name"];
    if (value.contains("description")) fn["description"] = value["description"];
    const auto& schema = value["inputSchema"];
    if (!schema.is_object()) throw std::runtime_error(where + ": \"inputSchema\" must be an object");
    fn["parameters"] = schema;
    return ordered_json{{"type", "function"}, {"function", std::move(fn)}};
}

std::vector<ordered_json> tool_values(const ordered_json& root, const std::string& source) {
    std::vector<ordered_json> out;
    if (root.is_object() && root.contains("servers") && !root.contains("tools")) {
        const auto& servers = root["servers"];
        if (!servers.is_object())
            throw std::runtime_error(source + ": \"servers\" must be an object {NAME: tools/list result}");
        for (const auto& [name, value] : servers.items())
            collect_tools(value, source + ": servers." + name, sanitize_server_name(name) + "__", out);
        return out;
    }
    collect_tools(root, source, "", out);
    return out;
}

Tool make_tool(const ordered_json& value, size_t index, const std::string& source) {
    std::string where = source + ": tool " + std::to_string(index);
    auto fail = [&](const std::string& problem) -> std::runtime_error { return std::runtime_error(where + ": " + problem); };

    if (!value.is_object()) throw fail("must be a JSON object, not " + type_name(value));
    if (is_mcp_tool(value)) return make_tool(mcp_to_function(value, where), index, source);

    // Normalise: bare {name, description, parameters} becomes {"type":"function","function":{...}}.
    ordered_json schema;
    const ordered_json* fn = nullptr;
    if (value.contains("type") || value.contains("function")) {
        if (!value.contains("type") || !value["type"].is_string() || value["type"] != "function")
            throw fail("\"type\" must be \"function\"");
        if (!value.contains("function") || !value["function"].is_object())
            throw fail("\"function\" must be an object");
        schema = value;
        fn = &value["function"];
    } else {
        schema = ordered_json::object();
        schema["type"] = "function";
        schema["function"] = value;
        fn = &value;
    }

    if (!fn->contains("name")) throw fail("\"name\" is missing");
    if (!(*fn)["name"].is_string()) throw fail("\"name\" must be a string");
    const std::string name = (*fn)["name"].get<std::string>();
    where += " (\"" + name + "\")";
    if (const auto problem = name_problem(name); !problem.empty()) throw fail("\"name\" " + problem);

    if (fn->contains("description") && !(*fn)["description"].is_string())
        throw fail("\"description\" must be a string");
    if (fn->contains("parameters")) {
        const auto& params = (*fn)["parameters"];
        if (!params.is_object()) throw fail("\"parameters\" must be an object");
        if (params.contains("type") && params["type"] != "object")
            throw fail("\"parameters\".\"type\" must be \"object\"");
        if (params.contains("properties") && !params["properties"].is_object())
            throw fail("\"parameters\".\"properties\" must be an object");
        if (params.contains("required")) {
            const auto& req = params["required"];
            if (!req.is_array()) throw fail("\"parameters\".\"required\" must be an array of property names");
            for (const auto& r : req) {
                if (!r.is_string()) throw fail("\"parameters\".\"required\" must hold strings only");
                if (params.contains("properties") && !params["properties"].contains(r.get<std::string>()))
                    throw fail("\"parameters\".\"required\" names \"" + r.get<std::string>() +
                               "\", which is not in \"properties\"");
            }
        }
    }

    Tool tool;
    tool.name = name;
    tool.schema = std::move(schema);
    tool.canonical_text = py_json_dumps(tool.schema);
    return tool;
}

ToolSet ToolSet::from_tools(std::vector<Tool> tools, const std::string& source) {
    std::sort(tools.begin(), tools.end(),
              [](const Tool& a, const Tool& b) { return a.canonical_text < b.canonical_text; });
    std::unordered_map<std::string, size_t> seen;
    for (size_t i = 0; i < tools.size(); ++i) {
        if (auto [it, inserted] = seen.emplace(tools[i].name, i); !inserted)
            throw std::runtime_error(source + ": duplicate tool name \"" + tools[i].name + "\"");
    }
    ToolSet set;
    std::string joined;
    for (size_t i = 0; i < tools.size(); ++i) {
        if (i) joined.push_back('\n');
        joined += tools[i].canonical_text;
    }
    set.tools_ = std::move(tools);
    set.tools_hash_ = sha256_hex(joined);
    return set;
}

ToolSet ToolSet::from_json_text(std::string_view text, const std::string& source, const ToolSetLimits& limits) {
    if (text.size() > limits.max_file_bytes)
        throw std::runtime_error(source + ": file is " + std::to_string(text.size()) + " bytes, more than the limit of " +
                                 std::to_string(limits.max_file_bytes));
    return from_json(parse_json_text(text, source, limits.max_json_depth), source, limits);
}

ToolSet ToolSet::from_json(const ordered_json& root, const std::string& source, const ToolSetLimits& limits) {
    const std::vector<ordered_json> list = tool_values(root, source);
    if (list.size() > limits.max_tools)
        throw std::runtime_error(source + ": " + std::to_string(list.size()) + " tools, more than the limit of " +
                                 std::to_string(limits.max_tools));

    std::vector<Tool> tools;
    tools.reserve(list.size());
    std::unordered_map<std::string, size_t> first_index;
    for (size_t i = 0; i < list.size(); ++i) {
        Tool tool = make_tool(list[i], i, source);
        if (auto [it, inserted] = first_index.emplace(tool.name, i); !inserted)
            throw std::runtime_error(source + ": tool " + std::to_string(i) + " (\"" + tool.name +
                                     "\"): duplicate name, already used by tool " + std::to_string(it->second));
        tools.push_back(std::move(tool));
    }
    return from_tools(std::move(tools), source);
}

ToolSet ToolSet::from_file(const std::filesystem::path& path, const ToolSetLimits& limits) {
    const std::string source = path.string();
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw std::runtime_error(source + ": cannot read: " + ec.message());
    if (size > limits.max_file_bytes)
        throw std::runtime_error(source + ": file is " + std::to_string(size) + " bytes, more than the limit of " +
                                 std::to_string(limits.max_file_bytes));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(source + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    return from_json_text(ss.str(), source, limits);
}

std::vector<std::string> ToolSet::names() const {
    std::vector<std::string> out;
    out.reserve(tools_.size());
    for (const auto& t : tools_) out.push_back(t.name);
    return out;
}

ordered_json ToolSet::to_json() const {
    ordered_json arr = ordered_json::array();
    for (const auto& t : tools_) arr.push_back(t.schema);
    return arr;
}

}  // namespace cc
