// Internals shared by the chat format implementations (chat_format_*.cpp); not part of the API.
#pragma once

#include "core/text/chat_format.h"

#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cc::chat_detail {

std::unique_ptr<ChatFormat> make_qwen3_format();
std::unique_ptr<ChatFormat> make_qwen25_format();
std::unique_ptr<ChatFormat> make_llama3_format();
std::unique_ptr<ChatFormat> make_mistral_format();
std::unique_ptr<ChatFormat> make_plain_format();

// Ids of those `tokens` that the tokenizer has, in order, without duplicates.
std::vector<token_id> existing_ids(const Tokenizer& tokenizer, std::initializer_list<std::string_view> tokens);

// One past the end of the balanced JSON object or array that starts at text[begin] ('{' or '['),
// honouring strings and escapes; nullopt when the text ends before it closes (a truncated call).
std::optional<size_t> balanced_json_end(std::string_view text, size_t begin);

// A tool call from the JSON object text `object_text` ({"name": ..., "arguments"|"parameters": ...}).
// `complete` is false when the object was cut off. Invalid or cut-off JSON still yields a call when
// a "name" can be read, with arguments_valid = false; nullopt when there is no name. Never throws.
std::optional<ToolCall> call_from_object_text(std::string_view object_text, bool complete, std::string raw);

// The call whose JSON object starts at the first '{' at or after `from` in `text`; its raw text
// runs from `raw_begin` to the object's end, or to the end of the text when the object never closes.
std::optional<ToolCall> first_object_call(std::string_view text, size_t from, size_t raw_begin);

// The system prompt and the messages the template loops over. When `system_prompt` is empty and the
// first message is a system message, that message is the system prompt: the official templates
// take messages[0] apart whenever its role is system. An empty conversation is refused.
struct ConversationView {
    std::string_view system_prompt;
    std::span<const ChatMessage> messages;
    size_t first_index = 0;  // 1 when messages[0] became the system prompt
    // "messages[i]" for errors, counted in the caller's messages.
    std::string path(size_t i) const { return "messages[" + std::to_string(i + first_index) + "]"; }
};
ConversationView conversation_view(std::string_view system_prompt, std::span<const ChatMessage> messages);

// Python's str.strip(chars) / lstrip / rstrip with an explicit set of ASCII characters.
std::string_view strip_chars(std::string_view text, std::string_view chars);
std::string_view lstrip_chars(std::string_view text, std::string_view chars);
std::string_view rstrip_chars(std::string_view text, std::string_view chars);

// len() of a Python str: the number of UTF-8 code points (continuation bytes are not counted).
size_t utf8_length(std::string_view text);

// A parsed call as a history message's call (no id: the caller assigns one).
ChatToolCall chat_call(const ToolCall& call);

// `text` without its first occurrence of `markup` (which must occur in it), trimmed as py_strip does.
std::string text_outside(std::string_view text, std::string_view markup);

// The reply of a format whose replies hold at most one call (llama3, plain): that call, as
// parse_tool_call finds it, and the text around it as the content.
ParsedReply single_call_reply(const ChatFormat& format, std::string_view text);

}  // namespace cc::chat_detail
