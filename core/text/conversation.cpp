// Conversations: the OpenAI chat-completions `messages` reader and the reply -> history message.
#include "core/text/conversation.h"

#include <stdexcept>

namespace cc {

const char* role_name(ChatMessage::Role r) {
    switch (r) {
        case ChatMessage::Role::system:
            return "system";
        case ChatMessage::Role::user:
            return "user";
        case ChatMessage::Role::assistant:
            return "assistant";
        case ChatMessage::Role::tool:
            return "tool";
    }
    return "?";
}

namespace {

constexpr int k_arguments_max_depth = 64;  // client JSON is untrusted: bound the parser's recursion

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
    throw std::invalid_argument(path + ": " + problem);
}

const char* type_name(const ordered_json& v) {
    return v.type_name();
}

// `content` as a string: a string, or a list of {"type": "text", "text": ...} parts joined with "\n".
std::string content_text(const ordered_json& content, const std::string& path) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array())
        fail(path, std::string("must be a string or a list of text parts, not ") + type_name(content));
    std::string text;
    for (size_t j = 0; j < content.size(); ++j) {
        const auto& part = content[j];
        const std::string part_path = path + "[" + std::to_string(j) + "]";
        if (!part.is_object()) fail(part_path, "must be a text part {\"type\": \"text\", \"text\": ...}");
        auto type = part.find("type");
        if (type == part.end() || !type->is_string()) fail(part_path + ".type", "must be the string \"text\"");
        if (type->get<std::string>() != "text")
            fail(part_path + ".type", "\"" + type->get<std::string>() + "\" parts are not supported (text only)");
        auto t = part.find("text");
        if (t == part.end() || !t->is_string()) fail(part_path + ".text", "must be a string");
        if (j > 0) text += "\n";
        text += t->get<std::string>();
    }
    return text;
}

std::optional<std::string> optional_string(const ordered_json& message, const char* key, const std::string& path) {
    auto it = message.find(key);
    if (it == message.end() || it->is_null()) return std::nullopt;
    if (!it->is_string()) fail(path + "." + key, std::string("must be a string, not ") + type_name(*it));
    return it->get<std::string>();
}

ChatToolCall read_tool_call(const ordered_json& value, const std::string& path) {
    if (!value.is_object()) fail(path, "must be an object {\"id\", \"type\": \"function\", \"function\": {...}}");
    ChatToolCall call;
    if (auto id = optional_string(value, "id", path)) call.id = std::move(*id);
    if (auto type = optional_string(value, "type", path); type && *type != "function")
        fail(path + ".type", "\"" + *type + "\" tool calls are not supported (only \"function\")");
    auto fn = value.find("function");
    if (fn == value.end() || !fn->is_object()) fail(path + ".function", "must be an object {\"name\", \"arguments\"}");
    const std::string fn_path = path + ".function";
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty())
        fail(fn_path + ".name", "must be a non-empty string");
    call.name = name->get<std::string>();
    auto args = fn->find("arguments");
    const std::string args_path = fn_path + ".arguments";
    if (args == fn->end()) fail(args_path, "missing (a JSON string or an object)");
    if (args->is_string()) {
        // The OpenAI API takes any string here (a model's arguments need not parse), and the
        // official templates print a string as one: Qwen's verbatim, the others through tojson.
        // So a string that is not a JSON object is kept as that string, not refused.
        const auto text = args->get<std::string>();
        try {
            call.arguments = parse_json_text(text, args_path, k_arguments_max_depth);
        } catch (const std::exception&) {
            call.arguments = ordered_json();
        }
        if (!call.arguments.is_object()) call.arguments = text;
        call.arguments_text = text;
    } else if (args->is_object()) {
        call.arguments = *args;  // ordered_json: the client's key order is kept
    } else {
        fail(args_path, std::string("must be a JSON string or an object, not ") + type_name(*args));
    }
    return call;
}

}  // namespace

Conversation parse_openai_messages(const ordered_json& messages, const std::string& source) {
    if (!messages.is_array()) fail(source, "must be a list of messages");
    Conversation out;
    for (size_t i = 0; i < messages.size(); ++i) {
        const auto& m = messages[i];
        const std::string path = source + "[" + std::to_string(i) + "]";
        if (!m.is_object()) fail(path, "must be an object with a \"role\"");
        auto role_it = m.find("role");
        if (role_it == m.end() || !role_it->is_string()) fail(path + ".role", "must be a string");
        const std::string role = role_it->get<std::string>();
        auto content_it = m.find("content");
        const bool has_content = content_it != m.end() && !content_it->is_null();

        ChatMessage msg;
        if (role == "system" || role == "developer") {
            if (!has_content) fail(path + ".content", "a " + role + " message needs content");
            std::string text = content_text(*content_it, path + ".content");
            if (i == 0) {
                out.system_prompt = std::move(text);
                continue;
            }
            msg.role = ChatMessage::Role::system;
            msg.content = std::move(text);
        } else if (role == "user") {
            if (!has_content) fail(path + ".content", "a user message needs content");
            msg.role = ChatMessage::Role::user;
            msg.content = content_text(*content_it, path + ".content");
        } else if (role == "assistant") {
            msg.role = ChatMessage::Role::assistant;
            if (has_content) msg.content = content_text(*content_it, path + ".content");
            msg.reasoning_content = optional_string(m, "reasoning_content", path);
            auto calls = m.find("tool_calls");
            if (calls != m.end() && !calls->is_null()) {
                if (!calls->is_array()) fail(path + ".tool_calls", "must be a list of tool calls");
                for (size_t k = 0; k < calls->size(); ++k)
                    msg.tool_calls.push_back(
                        read_tool_call((*calls)[k], path + ".tool_calls[" + std::to_string(k) + "]"));
            }
            if (!has_content && msg.tool_calls.empty())
                fail(path + ".content", "an assistant message needs content or tool_calls");
        } else if (role == "tool") {
            if (!has_content) fail(path + ".content", "a tool message needs content");
            msg.role = ChatMessage::Role::tool;
            msg.content = content_text(*content_it, path + ".content");
            auto id = optional_string(m, "tool_call_id", path);
            if (!id) fail(path + ".tool_call_id", "a tool message needs the id of the call it answers");
            msg.tool_call_id = std::move(*id);
            if (auto name = optional_string(m, "name", path)) msg.name = std::move(*name);
        } else if (role == "function") {
            fail(path + ".role",
                 "the legacy role \"function\" is not supported; send tool results with role "
                 "\"tool\" and a tool_call_id");
        } else {
            fail(path + ".role", "unknown role \"" + role + "\" (known: system, developer, user, assistant, tool)");
        }
        out.messages.push_back(std::move(msg));
    }
    return out;
}

ChatMessage assistant_message(const ParsedReply& reply) {
    ChatMessage m = ChatMessage::assistant(reply.content);
    m.reasoning_content = reply.reasoning_content;
    m.tool_calls = reply.tool_calls;
    return m;
}

}  // namespace cc
