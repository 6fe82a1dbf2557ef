// Internals shared by the chat format implementations (chat_format_*.cpp); not part of the API.
#pragma once

#include "core/text/chat_format.h"

#include <initializer_list>
#include <memory>
#include <optional>
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

}  // namespace cc::chat_detail
