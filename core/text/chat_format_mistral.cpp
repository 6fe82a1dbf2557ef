// Mistral v3 (Mistral-7B-Instruct-v0.3 and other tokenizer-v3 models): the tools go in
// [AVAILABLE_TOOLS] as one JSON array, as mistral_common's InstructTokenizerV3 writes it
// (json.dumps(tools, ensure_ascii=False)); the SentencePiece dummy prefix it relies on shows up as
// the space after each control token, which is also how the Hugging Face template spells it.
//
// Conversations follow the Hugging Face template exactly, including where it moves things: the
// [AVAILABLE_TOOLS] block goes right before the LAST user message (and before any earlier user
// message equal to it: the template compares message dicts), and the system prompt goes into that
// message only when it is the conversation's last message. So with more than one user turn the
// group prefix is not a prefix of the prompt. Tool results are pasted with `content|string`, i.e.
// unquoted; tool call ids must be 9 characters long (the template checks the length only).
#include "core/text/chat_format_detail.h"

#include <algorithm>
#include <stdexcept>

namespace cc::chat_detail {
namespace {

constexpr std::string_view k_alternate_error =
    "After the optional system message, conversation roles must alternate user/assistant/user/assistant/...";
constexpr std::string_view k_id_error = "Tool call IDs should be alphanumeric strings with length 9!";
constexpr std::string_view k_role_error =
    "Only user and assistant roles are supported, with the exception of an initial optional system message!";

class MistralFormat final : public ChatFormat {
public:
    std::string_view id() const override { return "mistral"; }

    std::vector<Piece> prefix_pieces(const ToolSet& tools, std::string_view /*system_prompt*/) const override {
        std::vector<Piece> pieces{Piece::special("<s>")};
        if (tools.empty()) return pieces;
        auto array = ordered_json::array();
        for (const auto& tool : tools.tools()) array.push_back(tool.schema);
        pieces.push_back(Piece::special("[AVAILABLE_TOOLS]"));
        pieces.push_back(Piece::plain(" " + py_json_dumps(array)));
        pieces.push_back(Piece::special("[/AVAILABLE_TOOLS]"));
        return pieces;
    }

    // Mistral's official template (and mistral_common) puts the system prompt into the last user
    // turn, after [INST], so for this format the system prompt lives in the query suffix and is
    // prefilled with every query: only the tool block is cached.
    std::vector<Piece> suffix_pieces(std::string_view query, std::string_view system_prompt) const override {
        std::string text = " ";
        if (!system_prompt.empty()) text.append(system_prompt).append("\n\n");
        text += query;
        return {Piece::special("[INST]"), Piece::plain(std::move(text)), Piece::special("[/INST]")};
    }

    std::vector<token_id> stop_token_ids(const Tokenizer& tokenizer) const override {
        return existing_ids(tokenizer, {"</s>"});
    }

    std::vector<Piece> conversation_pieces(
        const ToolSet& tools, std::string_view system_prompt, std::span<const ChatMessage> all_messages,
        const RenderOptions& /*options: no generation prompt in this template*/) const override {
        const auto view = conversation_view(system_prompt, all_messages);
        const auto system = view.system_prompt;
        const auto messages = view.messages;
        using Role = ChatMessage::Role;
        // The template first checks that user and assistant messages alternate, skipping tool
        // results and tool-calling assistant messages; anything else counts as "not user".
        size_t n_turns = 0;
        const ChatMessage* last_user = nullptr;
        for (size_t i = 0; i < messages.size(); ++i) {
            const ChatMessage& m = messages[i];
            if (m.role == Role::user) last_user = &m;
            if (m.role == Role::tool || (m.role == Role::assistant && !m.tool_calls.empty())) continue;
            if ((m.role == Role::user) != (n_turns % 2 == 0))
                throw std::invalid_argument(view.path(i) +
                                            ": mistral needs user and assistant messages to "
                                            "alternate, starting with user (the template raises \"" +
                                            std::string(k_alternate_error) + "\")");
            ++n_turns;
        }
        auto check_id = [&view](const std::string& id, size_t i) {
            if (utf8_length(id) != 9)
                throw std::invalid_argument(view.path(i) + ": mistral needs tool call ids of 9 characters, not \"" +
                                            id + "\" (the template raises \"" + std::string(k_id_error) + "\")");
        };

        std::vector<Piece> pieces{Piece::special("<s>")};
        const auto tool_block = prefix_pieces(tools, {});  // <s> and the [AVAILABLE_TOOLS] block, if any
        for (size_t i = 0; i < messages.size(); ++i) {
            const ChatMessage& m = messages[i];
            if (m.role == Role::user) {
                // `message == user_messages[-1]`: equal dicts, i.e. the same content.
                if (m.content == last_user->content)
                    pieces.insert(pieces.end(), tool_block.begin() + 1, tool_block.end());
                const bool last = i + 1 == messages.size();
                auto suffix = suffix_pieces(m.content, last ? system : std::string_view{});
                pieces.insert(pieces.end(), suffix.begin(), suffix.end());
            } else if (m.role == Role::assistant && !m.tool_calls.empty()) {
                std::string text = " [";
                for (size_t k = 0; k < m.tool_calls.size(); ++k) {
                    const auto& call = m.tool_calls[k];
                    ordered_json function = {{"name", call.name}, {"arguments", call.arguments}};
                    std::string out = py_json_dumps(function);
                    out.pop_back();  // out[:-1]: reopen the object to add the id
                    text += out;
                    check_id(call.id, i);
                    text += ", \"id\": \"" + call.id + "\"}";
                    text += k + 1 < m.tool_calls.size() ? ", " : "]";
                }
                pieces.push_back(Piece::special("[TOOL_CALLS]"));
                pieces.push_back(Piece::plain(std::move(text)));
                pieces.push_back(Piece::special("</s>"));
            } else if (m.role == Role::assistant) {
                pieces.push_back(Piece::plain(" " + std::string(py_strip(m.content))));
                pieces.push_back(Piece::special("</s>"));
            } else if (m.role == Role::tool) {
                check_id(m.tool_call_id, i);
                pieces.push_back(Piece::special("[TOOL_RESULTS]"));
                pieces.push_back(
                    Piece::plain(" {\"content\": " + m.content + ", \"call_id\": \"" + m.tool_call_id + "\"}"));
                pieces.push_back(Piece::special("[/TOOL_RESULTS]"));
            } else {
                throw std::invalid_argument(view.path(i) +
                                            ": mistral takes a system message only at the start "
                                            "(the template raises \"" +
                                            std::string(k_role_error) + "\")");
            }
        }
        return pieces;
    }

    // [TOOL_CALLS] [{...}, {...}]: every call of the list (a lone object is accepted too; a list cut
    // off by the end of generation keeps the calls read so far); the text around it is the content.
    ParsedReply parse_reply(std::string_view text) const override {
        ParsedReply reply;
        constexpr std::string_view tag = "[TOOL_CALLS]";
        const size_t begin = text.find(tag);
        if (begin == std::string_view::npos) {
            reply.content = std::string(py_strip(text));
            return reply;
        }
        const std::string_view rest = py_strip(text.substr(begin + tag.size()));
        size_t i = static_cast<size_t>(rest.data() - text.data());
        const bool list = !rest.empty() && rest.front() == '[';
        size_t end_of_calls = i;
        if (list) ++i;
        while (i < text.size()) {
            while (i < text.size() &&
                   (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r' || text[i] == ','))
                ++i;
            if (i >= text.size()) break;
            if (list && text[i] == ']') {
                end_of_calls = i + 1;
                break;
            }
            if (text[i] != '{') {
                reply.tool_calls_valid = false;
                end_of_calls = text.size();
                break;
            }
            const auto end = balanced_json_end(text, i);
            const size_t object_end = end ? *end : text.size();
            const std::string_view object = text.substr(i, object_end - i);
            auto call = call_from_object_text(object, end.has_value(), std::string(object));
            if (call) {
                if (!call->arguments_valid) reply.tool_calls_valid = false;
                reply.tool_calls.push_back(chat_call(*call));
            } else {
                reply.tool_calls_valid = false;
            }
            i = end_of_calls = object_end;
            if (!list) break;
        }
        if (reply.tool_calls.empty() && end_of_calls == static_cast<size_t>(rest.data() - text.data()))
            reply.tool_calls_valid = false;  // [TOOL_CALLS] with nothing after it
        std::string outside(text.substr(0, begin));
        outside += text.substr(std::min(end_of_calls, text.size()));
        reply.content = std::string(py_strip(outside));
        return reply;
    }

    // [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]: the first call of the list (a lone
    // object is accepted too); a list cut off by the end of generation still yields its first call.
    std::optional<ToolCall> parse_tool_call(std::string_view text) const override {
        constexpr std::string_view tag = "[TOOL_CALLS]";
        const size_t begin = text.find(tag);
        if (begin == std::string_view::npos) return std::nullopt;
        const size_t from = begin + tag.size();
        const std::string_view rest = py_strip(text.substr(from));
        if (rest.empty() || (rest.front() != '[' && rest.front() != '{')) return std::nullopt;
        const size_t start = static_cast<size_t>(rest.data() - text.data());
        auto call = first_object_call(text, start, begin);
        if (call && rest.front() == '[') {
            // raw covers the whole list when it closes.
            if (auto end = balanced_json_end(text, start)) call->raw = std::string(text.substr(begin, *end - begin));
        }
        return call;
    }
};

}  // namespace

std::unique_ptr<ChatFormat> make_mistral_format() { return std::make_unique<MistralFormat>(); }

}  // namespace cc::chat_detail
