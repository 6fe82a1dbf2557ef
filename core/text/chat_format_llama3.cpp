// Llama 3.1: the official tools template (meta-llama/Llama-3.1-8B-Instruct tokenizer_config.json)
// with tools_in_user_message=false, so the tool schemas sit in the system turn and are cacheable,
// and date_string fixed to "26 Jul 2024" (the template's own default) so the prefix never changes
// with the calendar.
#include "core/text/chat_format_detail.h"

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
};

}  // namespace

std::unique_ptr<ChatFormat> make_llama3_format() { return std::make_unique<Llama3Format>(); }

}  // namespace cc::chat_detail
