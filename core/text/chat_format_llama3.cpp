// Llama 3.1: the official tools template (meta-llama/Llama-3.1-8B-Instruct tokenizer_config.json)
// with tools_in_user_message=false, so the tool schemas sit in the system turn and are cacheable,
// and date_string fixed to "26 Jul 2024" (the template's own default) so the prefix never changes
// with the calendar.
//
// Conversations: each message is a header turn with its content trimmed; an assistant tool call
// replaces the message's text with {"name": ..., "parameters": tojson(arguments)} (one call per
// message, as the template demands); a tool result is an `ipython` turn printed with tojson, because
// the template's `content is mapping or content is iterable` is true for a string too.
#include "core/text/chat_format_detail.h"

#include <stdexcept>

namespace cc::chat_detail {
namespace {

class Llama3Format final : public ChatFormat {
public:
    std::string_view id() const override { return "llama3"; }

    std::vector<Piece> prefix_pieces(const ToolSet& tools, std::string_view system_prompt) const override {
        std::string text = "\n\n";
        if (!tools.empty()) text += "Environment: ipython\n";
        text += "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
        if (!tools.empty()) {
            text += "You have access to the following functions. To call a function, please respond with JSON "
                    "for a function call.Respond in the format {\"name\": function name, \"parameters\": "
                    "dictionary of argument name and its value}.Do not use variables.\n\n";
            // The template prints each tool with tojson(indent=4), not its one-line canonical text.
            for (const auto& tool : tools.tools()) text.append(py_json_dumps(tool.schema, 4)).append("\n\n");
        }
        text += py_strip(system_prompt);  // the template trims the system message
        return {Piece::special("<|begin_of_text|>"), Piece::special("<|start_header_id|>"), Piece::plain("system"),
                Piece::special("<|end_header_id|>"), Piece::plain(std::move(text)), Piece::special("<|eot_id|>")};
    }

    std::vector<Piece> suffix_pieces(std::string_view query, std::string_view /*system_prompt*/) const override {
        return {Piece::special("<|start_header_id|>"), Piece::plain("user"),
                Piece::special("<|end_header_id|>"),   Piece::plain("\n\n" + std::string(py_strip(query))),
                Piece::special("<|eot_id|>"),          Piece::special("<|start_header_id|>"),
                Piece::plain("assistant"),             Piece::special("<|end_header_id|>"),
                Piece::plain("\n\n")};
    }

    std::vector<token_id> stop_token_ids(const Tokenizer& tokenizer) const override {
        return existing_ids(tokenizer, {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"});
    }

    std::vector<Piece> conversation_pieces(const ToolSet& tools, std::string_view system_prompt,
                                           std::span<const ChatMessage> all_messages,
                                           const RenderOptions& options) const override {
        const auto view = conversation_view(system_prompt, all_messages);
        const auto system = view.system_prompt;
        const auto messages = view.messages;
        auto pieces = prefix_pieces(tools, system);
        auto turn = [&pieces](std::string_view role, std::string body) {
            pieces.push_back(Piece::special("<|start_header_id|>"));
            pieces.push_back(Piece::plain(std::string(role)));
            pieces.push_back(Piece::special("<|end_header_id|>"));
            pieces.push_back(Piece::plain("\n\n" + std::move(body)));
            pieces.push_back(Piece::special("<|eot_id|>"));
        };
        for (size_t i = 0; i < messages.size(); ++i) {
            const ChatMessage& m = messages[i];
            if (m.role == ChatMessage::Role::tool) {
                turn("ipython", py_json_dumps(ordered_json(m.content)));
            } else if (m.role == ChatMessage::Role::assistant && !m.tool_calls.empty()) {
                if (m.tool_calls.size() != 1)
                    throw std::invalid_argument(view.path(i) +
                                                ": llama3 renders one tool call per assistant message, "
                                                "not " +
                                                std::to_string(m.tool_calls.size()) +
                                                " (the template raises \"This model only supports single tool-calls "
                                                "at once!\")");
                const auto& call = m.tool_calls.front();
                turn("assistant",
                     "{\"name\": \"" + call.name + "\", \"parameters\": " + py_json_dumps(call.arguments) + "}");
            } else {
                turn(role_name(m.role), std::string(py_strip(m.content)));
            }
        }
        if (options.add_generation_prompt) {
            pieces.push_back(Piece::special("<|start_header_id|>"));
            pieces.push_back(Piece::plain("assistant"));
            pieces.push_back(Piece::special("<|end_header_id|>"));
            pieces.push_back(Piece::plain("\n\n"));
        }
        return pieces;
    }

    // One call (see parse_tool_call); the text around it, if any, is the content.
    ParsedReply parse_reply(std::string_view text) const override {
        return single_call_reply(*this, text);
    }

    // The model answers with the JSON object itself, {"name": ..., "parameters": {...}} (some
    // fine-tunes write "arguments"), possibly after <|python_tag|>. Prose is not a call, so the
    // object must open the message.
    std::optional<ToolCall> parse_tool_call(std::string_view text) const override {
        constexpr std::string_view python_tag = "<|python_tag|>";
        const size_t tag = text.find(python_tag);
        const size_t from = tag == std::string_view::npos ? 0 : tag + python_tag.size();
        const std::string_view rest = py_strip(text.substr(from));
        if (rest.empty() || rest.front() != '{') return std::nullopt;
        const size_t brace = static_cast<size_t>(rest.data() - text.data());
        const size_t begin = tag == std::string_view::npos ? brace : tag;  // raw keeps the tag
        return first_object_call(text, brace, begin);
    }

    // {"name": "NAME", "parameters": -- how the template prints an assistant's call.
    std::optional<ToolCallMarkup> tool_call_markup() const override {
        return ToolCallMarkup{{Piece::plain("{\"name\": \"")}, "\", \"parameters\": ", "", /*opens_reply=*/true};
    }
};

}  // namespace

std::unique_ptr<ChatFormat> make_llama3_format() { return std::make_unique<Llama3Format>(); }

}  // namespace cc::chat_detail
