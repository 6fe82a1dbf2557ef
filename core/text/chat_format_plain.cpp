// Plain: a prompt for base models without chat tokens (e.g. the stories260k Llama fixture).
//
//   [BOS] {system}\n\nTools:\n{tool}\n{tool}\n...  |  User: {query}\nAssistant:
//
// There is no special token at the split, so render_prompt takes the suffix ids from the joint
// tokenization of the whole text run and checks that the prefix's own ids begin it (see
// chat_format.h). The prefix ends with "\n" whenever it has text, and for the SentencePiece
// tokenizers this format serves "\n" is a byte-fallback token that no merge crosses, while the
// suffix begins with "User", so the check always passes there; it is a guard, not a hope.
//
// Conversations (no official template; our own rendering, one line per message after the prefix):
//   User: {text}\n   System: {text}\n   Tool result: {text}\n
//   Assistant: {text}\n, or with tool calls one {"name": ..., "arguments": {...}} line per call
//   after the text ("Assistant: " + the lines joined with "\n")
// and "Assistant:" as the generation prompt, so one user message renders as the suffix does.
#include "core/text/chat_format_detail.h"

#include <algorithm>

namespace cc::chat_detail {
namespace {

class PlainFormat final : public ChatFormat {
public:
    std::string_view id() const override { return "plain"; }

    std::vector<Piece> prefix_pieces(const ToolSet& tools, std::string_view system_prompt) const override {
        std::vector<Piece> pieces{Piece::bos()};
        std::string text;
        if (!system_prompt.empty()) text.append(system_prompt).append("\n\n");
        if (!tools.empty()) {
            text += "Tools:\n";
            for (const auto& tool : tools.tools()) text.append(tool.canonical_text).append("\n");
        }
        if (!text.empty()) pieces.push_back(Piece::plain(std::move(text)));
        return pieces;
    }

    std::vector<Piece> suffix_pieces(std::string_view query, std::string_view /*system_prompt*/) const override {
        return {Piece::plain("User: " + std::string(query) + "\nAssistant:")};
    }

    std::vector<Piece> conversation_pieces(const ToolSet& tools, std::string_view system_prompt,
                                           std::span<const ChatMessage> all_messages,
                                           const RenderOptions& options) const override {
        const auto view = conversation_view(system_prompt, all_messages);
        const auto system = view.system_prompt;
        const auto messages = view.messages;
        auto pieces = prefix_pieces(tools, system);
        std::string text;
        for (const ChatMessage& m : messages) {
            switch (m.role) {
                case ChatMessage::Role::user:
                    text += "User: " + m.content + "\n";
                    break;
                case ChatMessage::Role::system:
                    text += "System: " + m.content + "\n";
                    break;
                case ChatMessage::Role::tool:
                    text += "Tool result: " + m.content + "\n";
                    break;
                case ChatMessage::Role::assistant: {
                    std::string lines = m.content;
                    for (const auto& call : m.tool_calls) {
                        if (!lines.empty()) lines += "\n";
                        lines += py_json_dumps(ordered_json{{"name", call.name}, {"arguments", call.arguments}});
                    }
                    text += "Assistant: " + lines + "\n";
                    break;
                }
            }
        }
        if (options.add_generation_prompt) text += "Assistant:";
        if (!text.empty()) pieces.push_back(Piece::plain(std::move(text)));
        return pieces;
    }

    ParsedReply parse_reply(std::string_view text) const override {
        return single_call_reply(*this, text);
    }

    // A base model has no end-of-turn token: stop at end of text, and at BOS, which a model trained
    // on concatenated documents (like stories260k) emits when it starts the next one.
    std::vector<token_id> stop_token_ids(const Tokenizer& tokenizer) const override {
        auto ids = existing_ids(tokenizer, {"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>"});
        if (auto bos = tokenizer.bos_id(); bos && std::find(ids.begin(), ids.end(), *bos) == ids.end())
            ids.push_back(*bos);
        return ids;
    }

    // The answer is a bare JSON object {"name": ..., "arguments"|"parameters": {...}} at its start.
    std::optional<ToolCall> parse_tool_call(std::string_view text) const override {
        const std::string_view rest = py_strip(text);
        if (rest.empty() || rest.front() != '{') return std::nullopt;
        const size_t brace = static_cast<size_t>(rest.data() - text.data());
        return first_object_call(text, brace, brace);
    }
};

}  // namespace

std::unique_ptr<ChatFormat> make_plain_format() { return std::make_unique<PlainFormat>(); }

}  // namespace cc::chat_detail
