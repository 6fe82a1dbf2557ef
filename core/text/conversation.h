// Conversations (DESIGN §4, §8): the messages of a tool-using chat -- user turns, assistant text
// and tool calls, tool results by call id -- as the chat formats render them and as the OpenAI
// chat-completions API spells them.
#pragma once

#include "core/base/json_text.h"

#include <optional>
#include <string>
#include <vector>

namespace cc {

struct ChatToolCall {
    std::string id;                          // e.g. "call_…"; mistral's template needs 9 alphanumerics
    std::string name;
    // Parsed; what templates that print tojson(arguments) use. A string that is not a JSON object
    // (a model's malformed arguments sent back) stays a JSON string value, as the templates get it.
    ordered_json arguments = ordered_json::object();
    // The arguments exactly as the client sent them when they came as a JSON string (the OpenAI
    // form). Qwen3's template prints a string verbatim; the others print tojson(parsed).
    std::optional<std::string> arguments_text;
};

struct ChatMessage {
    enum class Role { system, user, assistant, tool };
    Role role = Role::user;
    std::string content;                           // text; content parts joined (see parse_openai_messages)
    std::optional<std::string> reasoning_content;  // assistant: the thinking text, where the client keeps it apart
    std::vector<ChatToolCall> tool_calls;          // assistant
    std::string tool_call_id;                      // tool: the call this result answers
    std::string name;                              // tool: the function's name (optional)

    static ChatMessage user(std::string text) { return {Role::user, std::move(text), {}, {}, {}, {}}; }
    static ChatMessage assistant(std::string text) { return {Role::assistant, std::move(text), {}, {}, {}, {}}; }
    static ChatMessage tool_result(std::string call_id, std::string text) {
        return {Role::tool, std::move(text), {}, {}, std::move(call_id), {}};
    }
};
const char* role_name(ChatMessage::Role r);  // "system" | "user" | "assistant" | "tool"

// How a conversation is rendered (the template variables the official templates read).
struct RenderOptions {
    bool enable_thinking = false;       // qwen3: false adds the empty <think></think> block to the generation prompt
    bool add_generation_prompt = true;  // end with the assistant header the model continues from
};

// An OpenAI-style list of messages with the leading system (or developer) message taken apart: it
// is the system prompt that, with the tools, forms the cacheable group prefix.
struct Conversation {
    std::string system_prompt;
    std::vector<ChatMessage> messages;  // after the leading system message
};

// Parses the OpenAI chat-completions `messages` array: roles system|developer (developer = system),
// user, assistant (content may be null when tool_calls are given; tool_calls[i].function.arguments a
// JSON string -- kept as the string when it is not a JSON object, as the API and the official
// templates take it -- or an object), tool (tool_call_id required) -- and the legacy role "function" is
// refused by name. `content` may be a string or a list of {"type": "text", "text": ...} parts, which
// are joined with "\n" (as vLLM does for text-only content); other part types are refused by name.
// Unknown fields are ignored. Throws std::invalid_argument naming `source` and the path, e.g.
// `messages[2].tool_calls[0].function.arguments: must be a JSON string or an object, not number`.
Conversation parse_openai_messages(const ordered_json& messages, const std::string& source = "messages");

// The assistant's reply as the chat format reads it: the text outside the tool-call markup, each
// tool call, and (qwen3) the thinking text.
struct ParsedReply {
    std::string content;                    // "" when the reply is only tool calls
    std::optional<std::string> reasoning_content;
    std::vector<ChatToolCall> tool_calls;   // ids left empty (the caller assigns them)
    bool tool_calls_valid = true;           // false when a call's arguments were not a valid JSON object
};

// The message that a reply becomes in the next turn's history.
ChatMessage assistant_message(const ParsedReply& reply);

}  // namespace cc
