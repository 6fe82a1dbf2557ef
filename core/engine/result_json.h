// The JSON shapes of DESIGN §9 for engine results, shared by the CLI, the app's export and tests.
#pragma once

#include "core/engine/engine.h"

#include <nlohmann/json.hpp>

namespace cc {

nlohmann::ordered_json to_json(const Timings& t);
// {"name", "arguments"} (+ "arguments_raw" when the arguments did not parse), or null for no call.
nlohmann::ordered_json tool_call_json(const std::optional<ToolCall>& call);
nlohmann::ordered_json to_json(const ToolSetDiff& d);     // {"added", "removed", "changed": [{"name", "field", ...}]}
// {"n_stored", "nearest": [{"group_key", "tier", ..., "reusable_tokens", "system_prompt_changed",
// "tools_added", "tools_removed", "tools_changed", "tools_compared"}], "text"}; `prefix_tokens`
// (the new set's) goes into the text.
nlohmann::ordered_json to_json(const MissReason& m, size_t prefix_tokens);
// to_json(*m) or null.
nlohmann::ordered_json miss_reason_json(const std::optional<MissReason>& m, size_t prefix_tokens);
nlohmann::ordered_json to_json(const CompileResult& r);
nlohmann::ordered_json to_json(const ChatToolCall& c);  // {"id", "name", "arguments"}
nlohmann::ordered_json to_json(const ParsedReply& r);    // {"content", "reasoning_content", "tool_calls", ...}
nlohmann::ordered_json to_json(const QueryResult& r);
nlohmann::ordered_json to_json(const ModelInfo& m);
nlohmann::ordered_json to_json(const GroupInfo& g);

}  // namespace cc
