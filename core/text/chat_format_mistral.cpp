// Mistral v3 (Mistral-7B-Instruct-v0.3 and other tokenizer-v3 models): the tools go in
// [AVAILABLE_TOOLS] as one JSON array, as mistral_common's InstructTokenizerV3 writes it
// (json.dumps(tools, ensure_ascii=False)); the SentencePiece dummy prefix it relies on shows up as
// the space after each control token, which is also how the Hugging Face template spells it.
#include "core/text/chat_format_detail.h"

namespace cc::chat_detail {
namespace {

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
