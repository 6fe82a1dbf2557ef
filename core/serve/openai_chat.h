// The OpenAI chat-completions protocol (POST /v1/chat/completions): the request as the server reads
// it, and the response, streaming chunks and errors in OpenAI's shapes. Plain JSON in, JSON/SSE text
// out; no engine and no HTTP here, so every shape is testable on its own.
//
// What is read (docs/server.md): model, messages (kept as JSON for the conversation parser),
// tools (function tools; MCP tools/list forms too), tool_choice none|auto|required|{function}
// (required and a named function are enforced by the engine's constrained decoding of the call's
// opening, core/engine/tool_choice.h), max_tokens /
// max_completion_tokens, temperature, top_p, seed, stop (string or list), stream,
// stream_options.include_usage, n (only 1). Unknown fields are ignored; a known field of the wrong
// type is a 400 naming it.
#pragma once

#include "core/base/json_text.h"
#include "core/engine/tool_choice.h"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cc::serve {

using nlohmann::json;

// An error the client caused (or a refusal): HTTP status + OpenAI's error object.
struct ApiError : std::runtime_error {
    ApiError(int status, std::string message, std::string param = {}, std::string code = {},
             std::string type = "invalid_request_error")
        : std::runtime_error(message), status(status), param(std::move(param)), code(std::move(code)),
          type(std::move(type)) {}
    int status;
    std::string param;  // "" = null
    std::string code;   // "" = null
    std::string type;
};
// {"error": {"message", "type", "param", "code"}}
ordered_json error_json(const ApiError& e);

struct ChatCompletionRequest {
    std::string model;
    json messages;                     // the array (of objects), for parse_openai_messages
    std::optional<ordered_json> tools; // the raw list, as given (key order kept: it is the prompt)
    ToolChoice tool_choice;            // auto unless given; a given one needs `tools`
    std::optional<int> max_tokens;     // max_completion_tokens wins over the deprecated max_tokens
    std::optional<float> temperature;  // absent = greedy (deterministic; == the CLI's answer)
    std::optional<float> top_p;
    std::optional<uint64_t> seed;
    std::vector<std::string> stop;     // at most 4, none empty
    bool stream = false;
    bool include_usage = false;        // stream_options.include_usage
};

// Parses the request body (already JSON). Throws ApiError (400) naming the field.
ChatCompletionRequest parse_chat_request(const ordered_json& body, int max_tokens_limit);
// tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name": ...}}.
// Throws ApiError (400) naming the field.
ToolChoice parse_tool_choice(const ordered_json& value);
// Against the offered tools: a named function must be one of them (400 naming
// tool_choice.function.name, as OpenAI); required needs at least one.
void check_tool_choice(const ToolChoice& choice, const std::vector<std::string>& tool_names);

// A tool call of the reply, with the arguments as the JSON string OpenAI sends.
struct ReplyToolCall {
    std::string id;
    std::string name;
    std::string arguments;  // JSON text of an object
};

// What the engine produced for one completion, in the protocol's terms.
struct ChatOutcome {
    std::string content;                        // text outside tool calls
    std::optional<std::string> reasoning_content;
    std::vector<ReplyToolCall> tool_calls;
    std::string finish_reason = "stop";         // stop | length | tool_calls
    size_t prompt_tokens = 0;
    size_t completion_tokens = 0;
    size_t cached_tokens = 0;                   // prompt tokens reused (group + conversation)
    ordered_json contextcache = ordered_json::object();  // group_key, tier, reused/prefilled tokens, timings
};

// "call_" + 24 alphanumerics, or 9 alphanumerics for chat formats whose template requires that
// (mistral). Random from the system's entropy source: ids need to be unique, not reproducible.
std::string make_tool_call_id(bool nine_alphanumerics);
std::string make_completion_id();  // "chatcmpl-" + 29 alphanumerics

// The chat.completion object.
ordered_json completion_json(const std::string& id, int64_t created, const std::string& model,
                             const std::string& system_fingerprint, const ChatOutcome& outcome);

// Server-sent events of one streamed completion: each method returns one or more complete
// "data: ...\n\n" events.
class ChatStream {
public:
    ChatStream(std::string id, int64_t created, std::string model, std::string system_fingerprint, bool include_usage);
    std::string begin() const;                              // delta {role: assistant, content: ""}
    std::string content(const std::string& delta) const;    // delta {content}
    // delta.tool_calls: per call, one chunk with index, id, type, function {name, arguments: ""},
    // then one with the arguments.
    std::string tool_calls(const std::vector<ReplyToolCall>& calls) const;
    // The chunk with finish_reason (and the contextcache object), the usage chunk when asked for,
    // then "data: [DONE]".
    std::string finish(const ChatOutcome& outcome) const;
    // An error in the middle of a stream (headers already sent): an error event, then [DONE].
    static std::string error(const ApiError& e);

private:
    ordered_json chunk(ordered_json delta, const ordered_json& finish_reason) const;
    static std::string event(const ordered_json& j);
    std::string id_, model_, fingerprint_;
    int64_t created_;
    bool include_usage_;
};

// Decides which streamed text can go out as content at once: text that might begin a tool call
// (the chat format's marker, e.g. "<tool_call>") is held back, and everything after a marker is
// held (it is sent as tool_calls deltas once the reply is parsed).
class ContentHoldback {
public:
    explicit ContentHoldback(std::vector<std::string> markers) : markers_(std::move(markers)) {}
    // Appends generated text; returns the text now safe to send as content.
    std::string push(const std::string& text);
    bool in_tool_call() const { return in_call_; }
    // Everything that was sent as content so far.
    const std::string& sent() const { return sent_; }

private:
    std::vector<std::string> markers_;
    std::string pending_;  // text not sent yet
    std::string sent_;
    bool in_call_ = false;
};

// The markers that start a tool call in a chat format's output ("qwen3" -> "<tool_call>", ...).
std::vector<std::string> tool_call_markers(const std::string& chat_format);

}  // namespace cc::serve
