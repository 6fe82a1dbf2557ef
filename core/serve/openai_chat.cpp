#include "core/serve/openai_chat.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace cc::serve {
namespace {

ApiError type_error(const std::string& param, const std::string& expected, const ordered_json& got) {
    return ApiError(400, "Invalid type for '" + param + "': expected " + expected + ", but got " + got.type_name() + ".",
                    param, "invalid_type");
}

std::optional<float> number_in(const ordered_json& body, const char* name, double lo, double hi) {
    if (!body.contains(name) || body[name].is_null()) return std::nullopt;
    const auto& v = body[name];
    if (!v.is_number()) throw type_error(name, "a number", v);
    const double d = v.get<double>();
    if (!(d >= lo && d <= hi))
        throw ApiError(400, "Invalid '" + std::string(name) + "': " + v.dump() + " is not between " +
                                ordered_json(lo).dump() + " and " + ordered_json(hi).dump() + ".",
                       name, "invalid_value");
    return static_cast<float>(d);
}

std::optional<int> int_in(const ordered_json& body, const char* name, int lo, int hi) {
    if (!body.contains(name) || body[name].is_null()) return std::nullopt;
    const auto& v = body[name];
    if (!v.is_number_integer()) throw type_error(name, "an integer", v);
    const auto i = v.get<int64_t>();
    if (i < lo || i > hi)
        throw ApiError(400, "Invalid '" + std::string(name) + "': " + v.dump() + " is not between " + std::to_string(lo) +
                                " and " + std::to_string(hi) + ".",
                       name, "invalid_value");
    return static_cast<int>(i);
}

std::optional<bool> bool_of(const ordered_json& body, const char* name, const std::string& param) {
    if (!body.contains(name) || body[name].is_null()) return std::nullopt;
    if (!body[name].is_boolean()) throw type_error(param, "a boolean", body[name]);
    return body[name].get<bool>();
}

std::string random_alnum(size_t n) {
    static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::random_device rd;
    std::uniform_int_distribution<size_t> pick(0, sizeof kChars - 2);
    std::string out(n, ' ');
    for (auto& c : out) c = kChars[pick(rd)];
    return out;
}

}  // namespace

ordered_json error_json(const ApiError& e) {
    ordered_json err;
    err["message"] = e.what();
    err["type"] = e.type;
    err["param"] = e.param.empty() ? ordered_json(nullptr) : ordered_json(e.param);
    err["code"] = e.code.empty() ? ordered_json(nullptr) : ordered_json(e.code);
    return ordered_json{{"error", std::move(err)}};
}

ToolChoice parse_tool_choice(const ordered_json& tc) {
    if (tc.is_string()) {
        const auto s = tc.get<std::string>();
        if (s == "none" || s == "auto" || s == "required") return ToolChoice::parse(s);
        throw ApiError(400, "Invalid value for 'tool_choice': \"" + s +
                                "\". Use \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}.",
                       "tool_choice", "invalid_value");
    }
    if (!tc.is_object()) throw type_error("tool_choice", "a string or an object", tc);
    if (!tc.contains("type") || !tc["type"].is_string() || tc["type"].get<std::string>() != "function")
        throw ApiError(400, "Invalid value for 'tool_choice.type': expected \"function\".", "tool_choice.type",
                       "invalid_value");
    if (!tc.contains("function") || !tc["function"].is_object())
        throw ApiError(400, "Missing required parameter: 'tool_choice.function'.", "tool_choice.function",
                       "missing_required_parameter");
    const auto& fn = tc["function"];
    if (!fn.contains("name")) throw ApiError(400, "Missing required parameter: 'tool_choice.function.name'.",
                                             "tool_choice.function.name", "missing_required_parameter");
    if (!fn["name"].is_string()) throw type_error("tool_choice.function.name", "a string", fn["name"]);
    const auto name = fn["name"].get<std::string>();
    if (name.empty())
        throw ApiError(400, "Invalid value for 'tool_choice.function.name': empty.", "tool_choice.function.name",
                       "invalid_value");
    return ToolChoice::named(name);
}

void check_tool_choice(const ToolChoice& choice, const std::vector<std::string>& tool_names) {
    if (choice.mode == ToolChoice::Mode::function &&
        std::find(tool_names.begin(), tool_names.end(), choice.function) == tool_names.end())
        throw ApiError(400, "Invalid value for 'tool_choice.function.name': no function named '" + choice.function +
                                "' is in 'tools'.",
                       "tool_choice.function.name", "invalid_value");
    if (choice.forces_call() && tool_names.empty())
        throw ApiError(400, "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
                       "tool_choice", "invalid_value");
}

ChatCompletionRequest parse_chat_request(const ordered_json& body, int max_tokens_limit) {
    if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object, not " + std::string(body.type_name()) + ".");
    ChatCompletionRequest r;
    if (body.contains("model")) {
        if (!body["model"].is_string()) throw type_error("model", "a string", body["model"]);
        r.model = body["model"].get<std::string>();
    }
    if (!body.contains("messages"))
        throw ApiError(400, "Missing required parameter: 'messages'.", "messages", "missing_required_parameter");
    const auto& messages = body["messages"];
    if (!messages.is_array()) throw type_error("messages", "an array", messages);
    if (messages.empty()) throw ApiError(400, "'messages' must not be empty.", "messages", "invalid_value");
    for (size_t i = 0; i < messages.size(); ++i)
        if (!messages[i].is_object()) throw type_error("messages[" + std::to_string(i) + "]", "an object", messages[i]);
    r.messages = json::parse(messages.dump());

    if (body.contains("tools") && !body["tools"].is_null()) {
        // Key order is kept: it is the prompt. (An object is an MCP form; ToolSet reads both.)
        if (!body["tools"].is_array() && !body["tools"].is_object()) throw type_error("tools", "an array", body["tools"]);
        r.tools = body["tools"];
    }
    if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
        r.tool_choice = parse_tool_choice(body["tool_choice"]);
        // As OpenAI: a tool_choice without tools is an error, whatever its value.
        if (!r.tools)
            throw ApiError(400, "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
                           "tool_choice", "invalid_value");
    }
    // max_completion_tokens replaces the deprecated max_tokens; either may be given.
    if (auto v = int_in(body, "max_completion_tokens", 1, max_tokens_limit)) r.max_tokens = v;
    else if (auto m = int_in(body, "max_tokens", 1, max_tokens_limit)) r.max_tokens = m;
    r.temperature = number_in(body, "temperature", 0, 2);
    r.top_p = number_in(body, "top_p", 0, 1);
    if (body.contains("seed") && !body["seed"].is_null()) {
        if (!body["seed"].is_number_integer()) throw type_error("seed", "an integer", body["seed"]);
        r.seed = static_cast<uint64_t>(body["seed"].get<int64_t>());
    }
    if (body.contains("stop") && !body["stop"].is_null()) {
        const auto& s = body["stop"];
        if (s.is_string()) {
            r.stop.push_back(s.get<std::string>());
        } else if (s.is_array()) {
            if (s.size() > 4) throw ApiError(400, "'stop' may hold at most 4 sequences.", "stop", "invalid_value");
            for (size_t i = 0; i < s.size(); ++i) {
                if (!s[i].is_string()) throw type_error("stop[" + std::to_string(i) + "]", "a string", s[i]);
                r.stop.push_back(s[i].get<std::string>());
            }
        } else {
            throw type_error("stop", "a string or an array of strings", s);
        }
        for (const auto& x : r.stop)
            if (x.empty()) throw ApiError(400, "'stop' sequences must not be empty.", "stop", "invalid_value");
    }
    r.stream = bool_of(body, "stream", "stream").value_or(false);
    if (body.contains("stream_options") && !body["stream_options"].is_null()) {
        const auto& so = body["stream_options"];
        if (!so.is_object()) throw type_error("stream_options", "an object", so);
        r.include_usage = bool_of(so, "include_usage", "stream_options.include_usage").value_or(false);
    }
    if (auto n = int_in(body, "n", 1, 128); n && *n != 1)
        throw ApiError(400, "Only n = 1 is supported.", "n", "unsupported_value");
    if (bool_of(body, "logprobs", "logprobs").value_or(false))
        throw ApiError(400, "logprobs are not supported by this server.", "logprobs", "unsupported_value");
    return r;
}

std::string make_tool_call_id(bool nine_alphanumerics) {
    return nine_alphanumerics ? random_alnum(9) : "call_" + random_alnum(24);
}

std::string make_completion_id() { return "chatcmpl-" + random_alnum(29); }

namespace {

ordered_json usage_json(const ChatOutcome& o) {
    ordered_json u;
    u["prompt_tokens"] = o.prompt_tokens;
    u["completion_tokens"] = o.completion_tokens;
    u["total_tokens"] = o.prompt_tokens + o.completion_tokens;
    u["prompt_tokens_details"] = {{"cached_tokens", o.cached_tokens}};
    u["completion_tokens_details"] = {{"reasoning_tokens", 0}};
    return u;
}

ordered_json tool_call_json(const ReplyToolCall& c) {
    return ordered_json{{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

}  // namespace

ordered_json completion_json(const std::string& id, int64_t created, const std::string& model,
                             const std::string& system_fingerprint, const ChatOutcome& outcome) {
    ordered_json message;
    message["role"] = "assistant";
    // OpenAI: content is null when the reply is only tool calls.
    message["content"] = outcome.content.empty() && !outcome.tool_calls.empty() ? ordered_json(nullptr)
                                                                                 : ordered_json(outcome.content);
    if (outcome.reasoning_content) message["reasoning_content"] = *outcome.reasoning_content;
    message["refusal"] = nullptr;
    if (!outcome.tool_calls.empty()) {
        message["tool_calls"] = ordered_json::array();
        for (const auto& c : outcome.tool_calls) message["tool_calls"].push_back(tool_call_json(c));
    }
    ordered_json choice;
    choice["index"] = 0;
    choice["message"] = std::move(message);
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = outcome.finish_reason;
    ordered_json out;
    out["id"] = id;
    out["object"] = "chat.completion";
    out["created"] = created;
    out["model"] = model;
    out["system_fingerprint"] = system_fingerprint;
    out["choices"] = ordered_json::array({std::move(choice)});
    out["usage"] = usage_json(outcome);
    out["contextcache"] = outcome.contextcache;
    return out;
}

ChatStream::ChatStream(std::string id, int64_t created, std::string model, std::string system_fingerprint,
                       bool include_usage)
    : id_(std::move(id)), model_(std::move(model)), fingerprint_(std::move(system_fingerprint)), created_(created),
      include_usage_(include_usage) {}

ordered_json ChatStream::chunk(ordered_json delta, const ordered_json& finish_reason) const {
    ordered_json c;
    c["id"] = id_;
    c["object"] = "chat.completion.chunk";
    c["created"] = created_;
    c["model"] = model_;
    c["system_fingerprint"] = fingerprint_;
    ordered_json choice;
    choice["index"] = 0;
    choice["delta"] = std::move(delta);
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish_reason;
    c["choices"] = ordered_json::array({std::move(choice)});
    // With include_usage every chunk carries "usage": null, the last one the figures (OpenAI).
    if (include_usage_) c["usage"] = nullptr;
    return c;
}

std::string ChatStream::event(const ordered_json& j) {
    return "data: " + j.dump(-1, ' ', false, ordered_json::error_handler_t::replace) + "\n\n";
}

std::string ChatStream::begin() const {
    return event(chunk({{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}, nullptr));
}

std::string ChatStream::content(const std::string& delta) const { return event(chunk({{"content", delta}}, nullptr)); }

std::string ChatStream::tool_calls(const std::vector<ReplyToolCall>& calls) const {
    std::string out;
    for (size_t i = 0; i < calls.size(); ++i) {
        ordered_json head{{"index", i}, {"id", calls[i].id}, {"type", "function"},
                          {"function", {{"name", calls[i].name}, {"arguments", ""}}}};
        out += event(chunk({{"tool_calls", ordered_json::array({head})}}, nullptr));
        ordered_json args{{"index", i}, {"function", {{"arguments", calls[i].arguments}}}};
        out += event(chunk({{"tool_calls", ordered_json::array({args})}}, nullptr));
    }
    return out;
}

std::string ChatStream::finish(const ChatOutcome& outcome) const {
    auto last = chunk(ordered_json::object(), outcome.finish_reason);
    last["contextcache"] = outcome.contextcache;
    std::string out = event(last);
    if (include_usage_) {
        ordered_json u;
        u["id"] = id_;
        u["object"] = "chat.completion.chunk";
        u["created"] = created_;
        u["model"] = model_;
        u["system_fingerprint"] = fingerprint_;
        u["choices"] = ordered_json::array();
        u["usage"] = usage_json(outcome);
        out += event(u);
    }
    return out + "data: [DONE]\n\n";
}

std::string ChatStream::error(const ApiError& e) { return event(error_json(e)) + "data: [DONE]\n\n"; }

std::string ContentHoldback::push(const std::string& text) {
    if (in_call_) return {};
    pending_ += text;
    // A marker inside the pending text: send what precedes it, hold the rest for good.
    size_t first = std::string::npos;
    for (const auto& m : markers_)
        if (const size_t at = pending_.find(m); at != std::string::npos) first = std::min(first, at);
    if (first != std::string::npos) {
        in_call_ = true;
        std::string out = pending_.substr(0, first);
        sent_ += out;
        pending_.erase(0, first);
        return out;
    }
    // Hold back the longest tail that could still grow into a marker.
    size_t keep = 0;
    for (const auto& m : markers_)
        for (size_t n = std::min(m.size() - 1, pending_.size()); n > keep; --n)
            if (pending_.compare(pending_.size() - n, n, m, 0, n) == 0) {
                keep = n;
                break;
            }
    std::string out = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    sent_ += out;
    return out;
}

std::vector<std::string> tool_call_markers(const std::string& chat_format) {
    if (chat_format == "mistral") return {"[TOOL_CALLS]"};
    if (chat_format == "llama3") return {"<|python_tag|>", "{\"name\""};
    return {"<tool_call>"};  // qwen3, qwen2.5 and plain use the Hermes-style markup
}

}  // namespace cc::serve
