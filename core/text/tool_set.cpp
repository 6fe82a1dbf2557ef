#include "core/text/tool_set.h"

#include "core/base/sha256.h"

#include <algorithm>
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

}  // namespace

Tool make_tool(const ordered_json& value, size_t index, const std::string& source) {
    std::string where = source + ": tool " + std::to_string(index);
    auto fail = [&](const std::string& problem) -> std::runtime_error { return std::runtime_error(where + ": " + problem); };

    if (!value.is_object()) throw fail("must be a JSON object, not " + type_name(value));

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
    const ordered_json root = parse_json_text(text, source, limits.max_json_depth);
    const ordered_json* list = &root;
    if (root.is_object()) {
        if (!root.contains("tools"))
            throw std::runtime_error(source + ": expected a JSON array of tools or an object with a \"tools\" array");
        list = &root["tools"];
    }
    if (!list->is_array())
        throw std::runtime_error(source + ": expected a JSON array of tools or an object with a \"tools\" array, not " +
                                 type_name(*list));
    if (list->size() > limits.max_tools)
        throw std::runtime_error(source + ": " + std::to_string(list->size()) + " tools, more than the limit of " +
                                 std::to_string(limits.max_tools));

    std::vector<Tool> tools;
    tools.reserve(list->size());
    std::unordered_map<std::string, size_t> first_index;
    for (size_t i = 0; i < list->size(); ++i) {
        Tool tool = make_tool((*list)[i], i, source);
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
