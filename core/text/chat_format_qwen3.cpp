// Qwen3: the official chat template (resources/tokenizers/qwen3/tokenizer_config.json) for
// [system?, user] with tools, add_generation_prompt=True and enable_thinking=False.
// Qwen2.5: the official template of the Qwen2.5-*-Instruct tokenizer_config.json (the same ChatML
// turns and <tool_call> block), which always prints a system turn -- the default "You are Qwen,
// created by Alibaba Cloud. You are a helpful assistant." when none is given -- and has no <think>.
#include "core/text/chat_format_detail.h"

namespace cc::chat_detail {
namespace {

constexpr std::string_view k_tools_intro =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";

constexpr std::string_view k_qwen25_default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

class Qwen3Format : public ChatFormat {
public:
    std::string_view id() const override { return "qwen3"; }

    std::vector<Piece> prefix_pieces(const ToolSet& tools, std::string_view system_prompt) const override {
        std::vector<Piece> pieces;
        if (tools.empty()) {
            // Without tools the template prints the system turn only when there is a system message.
            if (system_prompt.empty()) return pieces;
            pieces.push_back(Piece::special("<|im_start|>"));
            pieces.push_back(Piece::plain("system\n" + std::string(system_prompt)));
            pieces.push_back(Piece::special("<|im_end|>"));
            pieces.push_back(Piece::plain("\n"));
            return pieces;
        }
        std::string text = "system\n";
        if (!system_prompt.empty()) text.append(system_prompt).append("\n\n");
        text += k_tools_intro;
        for (const auto& tool : tools.tools()) text.append("\n").append(tool.canonical_text);
        text += "\n</tools>\n\nFor each function call, return a json object with function name and arguments within ";
        pieces.push_back(Piece::special("<|im_start|>"));
        pieces.push_back(Piece::plain(std::move(text)));
        // <tool_call> and </tool_call> are added tokens: the official template's text becomes
        // their single ids when Hugging Face tokenizes it, so they are template tokens here too.
        pieces.push_back(Piece::special("<tool_call>"));
        pieces.push_back(Piece::special("</tool_call>"));
        pieces.push_back(Piece::plain(" XML tags:\n"));
        pieces.push_back(Piece::special("<tool_call>"));
        pieces.push_back(Piece::plain("\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"));
        pieces.push_back(Piece::special("</tool_call>"));
        pieces.push_back(Piece::special("<|im_end|>"));
        pieces.push_back(Piece::plain("\n"));
        return pieces;
    }

    std::vector<Piece> suffix_pieces(std::string_view query, std::string_view /*system_prompt*/) const override {
        return {Piece::special("<|im_start|>"), Piece::plain("user\n" + std::string(query)),
                Piece::special("<|im_end|>"),   Piece::plain("\n"),
                Piece::special("<|im_start|>"), Piece::plain("assistant\n"),
                Piece::special("<think>"),      Piece::plain("\n\n"),
                Piece::special("</think>"),     Piece::plain("\n\n")};
    }

    std::vector<token_id> stop_token_ids(const Tokenizer& tokenizer) const override {
        return existing_ids(tokenizer, {"<|im_end|>", "<|endoftext|>"});
    }

    // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>; the closing tag may be missing
    // when generation stopped early. It is a single token whose decoded text is the tag, so it is
    // kept in `raw` when present.
    std::optional<ToolCall> parse_tool_call(std::string_view text) const override {
        constexpr std::string_view open = "<tool_call>";
        constexpr std::string_view close = "</tool_call>";
        const size_t begin = text.find(open);
        if (begin == std::string_view::npos) return std::nullopt;
        const size_t body = begin + open.size();
        const size_t close_at = text.find(close, body);
        const std::string_view inner =
            text.substr(0, close_at == std::string_view::npos ? text.size() : close_at);
        const size_t raw_end = close_at == std::string_view::npos ? text.size() : close_at + close.size();
        const size_t brace = inner.find('{', body);
        if (brace == std::string_view::npos) return std::nullopt;
        const auto end = balanced_json_end(inner, brace);
        const size_t object_end = end ? *end : inner.size();
        return call_from_object_text(inner.substr(brace, object_end - brace), end.has_value(),
                                     std::string(text.substr(begin, raw_end - begin)));
    }
};

// Qwen2.5 differs from Qwen3 in two places only: an empty system prompt becomes the default one
// (so the system turn is always there, and with tools "\n\n# Tools" always follows a system
// text), and the assistant header has no <think> block. Tool calls and stop tokens are the same.
class Qwen25Format final : public Qwen3Format {
public:
    std::string_view id() const override { return "qwen2.5"; }

    std::vector<Piece> prefix_pieces(const ToolSet& tools, std::string_view system_prompt) const override {
        return Qwen3Format::prefix_pieces(tools, system_prompt.empty() ? k_qwen25_default_system : system_prompt);
    }

    std::vector<Piece> suffix_pieces(std::string_view query, std::string_view /*system_prompt*/) const override {
        return {Piece::special("<|im_start|>"), Piece::plain("user\n" + std::string(query)),
                Piece::special("<|im_end|>"),   Piece::plain("\n"),
                Piece::special("<|im_start|>"), Piece::plain("assistant\n")};
    }
};

}  // namespace

std::unique_ptr<ChatFormat> make_qwen3_format() { return std::make_unique<Qwen3Format>(); }
std::unique_ptr<ChatFormat> make_qwen25_format() { return std::make_unique<Qwen25Format>(); }

}  // namespace cc::chat_detail
