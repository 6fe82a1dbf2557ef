// The JSON shapes of DESIGN §9 for engine results, shared by the CLI, the app's export and tests.
#pragma once

#include "core/engine/engine.h"

#include <nlohmann/json.hpp>

namespace cc {

nlohmann::ordered_json to_json(const Timings& t);
// {"name", "arguments"} (+ "arguments_raw" when the arguments did not parse), or null for no call.
nlohmann::ordered_json tool_call_json(const std::optional<ToolCall>& call);
nlohmann::ordered_json to_json(const CompileResult& r);
nlohmann::ordered_json to_json(const ChatToolCall& c);  // {"id", "name", "arguments"}
nlohmann::ordered_json to_json(const ParsedReply& r);    // {"content", "reasoning_content", "tool_calls", ...}
nlohmann::ordered_json to_json(const QueryResult& r);
nlohmann::ordered_json to_json(const ModelInfo& m);
nlohmann::ordered_json to_json(const GroupInfo& g);

}  // namespace cc
