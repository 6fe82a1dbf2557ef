// Qwen3: the official chat template (resources/tokenizers/qwen3/tokenizer_config.json) for
// [system?, user] with tools, add_generation_prompt=True and enable_thinking=False.
// Qwen2.5: the official template of the Qwen2.5-*-Instruct tokenizer_config.json (the same ChatML
// turns and <tool_call> block), which always prints a system turn -- the default "You are Qwen,
// created by Alibaba Cloud. You are a helpful assistant." when none is given -- and has no <think>.
//
// Conversations follow the two templates line by line (see docs/models.md, "Conversations"):
// consecutive tool results share one user turn, each in <tool_response> tags (added tokens, so
// template tokens here); Qwen3 keeps an assistant turn's <think> block only after the last real
// user query and prints string arguments verbatim, Qwen2.5 always prints tojson(parsed arguments).
#include "core/text/chat_format_detail.h"

#include <stdexcept>

namespace cc::chat_detail {
namespace {

constexpr std::string_view k_tools_intro =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";

constexpr std::string_view k_think_open = "<think>";
constexpr std::string_view k_think_close = "</think>";
constexpr std::string_view k_call_open = "<tool_call>";
constexpr std::string_view k_call_close = "</tool_call>";
constexpr std::string_view k_response_open = "<tool_response>";
constexpr std::string_view k_response_close = "</tool_response>";

constexpr std::string_view k_qwen25_default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

// <|im_start|>{role}\n{content}<|im_end|>\n -- a user turn is split exactly as suffix_pieces splits it.
void append_turn(std::vector<Piece>& pieces, std::string_view role, std::string_view content) {
    pieces.push_back(Piece::special("<|im_start|>"));
    pieces.push_back(Piece::plain(std::string(role) + "\n" + std::string(content)));
    pieces.push_back(Piece::special("<|im_end|>"));
    pieces.push_back(Piece::plain("\n"));
}

// One tool result; consecutive results share one <|im_start|>user turn.
void append_tool_result(std::vector<Piece>& pieces, std::span<const ChatMessage> messages, size_t i) {
    if (i == 0 || messages[i - 1].role != ChatMessage::Role::tool) {
        pieces.push_back(Piece::special("<|im_start|>"));
        pieces.push_back(Piece::plain("user"));
    }
    pieces.push_back(Piece::plain("\n"));
    pieces.push_back(Piece::special(std::string(k_response_open)));
    pieces.push_back(Piece::plain("\n" + messages[i].content + "\n"));
    pieces.push_back(Piece::special(std::string(k_response_close)));
    if (i + 1 == messages.size() || messages[i + 1].role != ChatMessage::Role::tool) {
        pieces.push_back(Piece::special("<|im_end|>"));
        pieces.push_back(Piece::plain("\n"));
    }
}

// <tool_call>\n{"name": "...", "arguments": ...}\n</tool_call>
void append_call(std::vector<Piece>& pieces, const ChatToolCall& call, const std::string& arguments) {
    pieces.push_back(Piece::special(std::string(k_call_open)));
    pieces.push_back(Piece::plain("\n{\"name\": \"" + call.name + "\", \"arguments\": " + arguments + "}\n"));
    pieces.push_back(Piece::special(std::string(k_call_close)));
}

// Every <tool_call> block of `text` (the last may be cut off) and the text outside them.
void read_calls(std::string_view text, ParsedReply& reply) {
    std::string outside;
    size_t pos = 0;
    while (true) {
        const size_t open = text.find(k_call_open, pos);
        if (open == std::string_view::npos) break;
        outside += text.substr(pos, open - pos);
        const size_t body = open + k_call_open.size();
        const size_t close = text.find(k_call_close, body);
        const std::string_view inner =
            text.substr(body, (close == std::string_view::npos ? text.size() : close) - body);
        const size_t raw_end = close == std::string_view::npos ? text.size() : close + k_call_close.size();
        std::optional<ToolCall> call;
        if (const size_t brace = inner.find('{'); brace != std::string_view::npos) {
            const auto end = balanced_json_end(inner, brace);
            call = call_from_object_text(inner.substr(brace, (end ? *end : inner.size()) - brace), end.has_value(),
                                         std::string(text.substr(open, raw_end - open)));
        }
        if (call) {
            if (!call->arguments_valid) reply.tool_calls_valid = false;
            reply.tool_calls.push_back(chat_call(*call));
        } else {
            reply.tool_calls_valid = false;  // markup without a readable call
        }
        pos = raw_end;
    }
    outside += text.substr(pos);
    reply.content = std::string(py_strip(outside));
}

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

    std::vector<Piece> conversation_pieces(const ToolSet& tools, std::string_view system_prompt,
                                           std::span<const ChatMessage> all_messages,
                                           const RenderOptions& options) const override {
        const auto view = conversation_view(system_prompt, all_messages);
        const auto system = view.system_prompt;
        const auto messages = view.messages;
        auto pieces = prefix_pieces(tools, system);
        // ns.last_query_index: the last user message that is not a tool response pasted as user
        // text; without one it is the last message, so no assistant turn keeps its thinking.
        size_t last_query = messages.size() - 1;
        for (size_t i = messages.size(); i-- > 0;) {
            const auto& c = messages[i].content;
            if (messages[i].role == ChatMessage::Role::user &&
                !(c.starts_with(k_response_open) && c.ends_with(k_response_close))) {
                last_query = i;
                break;
            }
        }
        for (size_t i = 0; i < messages.size(); ++i) {
            const ChatMessage& m = messages[i];
            switch (m.role) {
                case ChatMessage::Role::user:
                case ChatMessage::Role::system:
                    append_turn(pieces, role_name(m.role), m.content);
                    break;
                case ChatMessage::Role::tool:
                    append_tool_result(pieces, messages, i);
                    break;
                case ChatMessage::Role::assistant:
                    append_assistant(pieces, m, i > last_query, i + 1 == messages.size());
                    break;
            }
        }
        if (options.add_generation_prompt) {
            pieces.push_back(Piece::special("<|im_start|>"));
            pieces.push_back(Piece::plain("assistant\n"));
            if (!options.enable_thinking) {
                pieces.push_back(Piece::special(std::string(k_think_open)));
                pieces.push_back(Piece::plain("\n\n"));
                pieces.push_back(Piece::special(std::string(k_think_close)));
                pieces.push_back(Piece::plain("\n\n"));
            }
        }
        return pieces;
    }

    // <think>…</think> -> reasoning_content (a reply cut off inside the block is all reasoning);
    // after it, every <tool_call> block, and the rest as content.
    ParsedReply parse_reply(std::string_view text) const override {
        ParsedReply reply;
        std::string_view body = text;
        if (const size_t close = text.find(k_think_close); close != std::string_view::npos) {
            std::string_view thought = text.substr(0, close);
            if (const size_t open = thought.find(k_think_open); open != std::string_view::npos)
                thought = thought.substr(open + k_think_open.size());
            reply.reasoning_content = std::string(strip_chars(thought, "\n"));
            body = text.substr(close + k_think_close.size());
        } else if (const size_t open = text.find(k_think_open); open != std::string_view::npos) {
            reply.reasoning_content = std::string(strip_chars(text.substr(open + k_think_open.size()), "\n"));
            body = text.substr(0, open);
        }
        read_calls(body, reply);
        return reply;
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

    // <tool_call>\n{"name": "NAME", "arguments": -- what append_call writes and read_calls reads.
    std::optional<ToolCallMarkup> tool_call_markup() const override {
        return ToolCallMarkup{{Piece::special(std::string(k_call_open)), Piece::plain("\n{\"name\": \"")},
                              "\", \"arguments\": ", "\n" + std::string(k_call_close)};
    }

private:
    // The reasoning comes from reasoning_content, else from a </think> in the content (which then
    // loses it); it is printed only after the last query, and there only when non-empty or when
    // the turn is the conversation's last message.
    static void append_assistant(std::vector<Piece>& pieces, const ChatMessage& m, bool after_last_query, bool last) {
        std::string_view content = m.content;
        std::string_view reasoning;
        if (m.reasoning_content) {
            reasoning = *m.reasoning_content;
        } else if (const size_t close = content.rfind(k_think_close); close != std::string_view::npos) {
            // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
            std::string_view before = rstrip_chars(content.substr(0, content.find(k_think_close)), "\n");
            if (const size_t open = before.rfind(k_think_open); open != std::string_view::npos)
                before = before.substr(open + k_think_open.size());
            reasoning = lstrip_chars(before, "\n");
            content = lstrip_chars(content.substr(close + k_think_close.size()), "\n");
        }
        pieces.push_back(Piece::special("<|im_start|>"));
        if (after_last_query && (last || !reasoning.empty())) {
            pieces.push_back(Piece::plain("assistant\n"));
            pieces.push_back(Piece::special(std::string(k_think_open)));
            pieces.push_back(Piece::plain("\n" + std::string(strip_chars(reasoning, "\n")) + "\n"));
            pieces.push_back(Piece::special(std::string(k_think_close)));
            pieces.push_back(Piece::plain("\n\n" + std::string(lstrip_chars(content, "\n"))));
        } else {
            pieces.push_back(Piece::plain("assistant\n" + std::string(content)));
        }
        for (size_t k = 0; k < m.tool_calls.size(); ++k) {
            if (k > 0 || !content.empty()) pieces.push_back(Piece::plain("\n"));
            const auto& call = m.tool_calls[k];
            // `tool_call.arguments is string`: the client's JSON text, verbatim.
            append_call(pieces, call, call.arguments_text ? *call.arguments_text : py_json_dumps(call.arguments));
        }
        pieces.push_back(Piece::special("<|im_end|>"));
        pieces.push_back(Piece::plain("\n"));
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

    // No <think> anywhere: assistant text is printed as given and the generation prompt is the bare
    // header. Arguments are always tojson(parsed): vLLM parses OpenAI argument strings into objects
    // before templating (the Hugging Face convention), and this template has no `is string` branch.
    std::vector<Piece> conversation_pieces(const ToolSet& tools, std::string_view system_prompt,
                                           std::span<const ChatMessage> all_messages,
                                           const RenderOptions& options) const override {
        const auto view = conversation_view(system_prompt, all_messages);
        const auto system = view.system_prompt;
        const auto messages = view.messages;
        auto pieces = prefix_pieces(tools, system);
        for (size_t i = 0; i < messages.size(); ++i) {
            const ChatMessage& m = messages[i];
            if (m.role == ChatMessage::Role::tool) {
                append_tool_result(pieces, messages, i);
            } else if (m.role != ChatMessage::Role::assistant || m.tool_calls.empty()) {
                append_turn(pieces, role_name(m.role), m.content);
            } else {
                pieces.push_back(Piece::special("<|im_start|>"));
                pieces.push_back(Piece::plain(m.content.empty() ? "assistant" : "assistant\n" + m.content));
                for (const auto& call : m.tool_calls) {
                    pieces.push_back(Piece::plain("\n"));
                    append_call(pieces, call, py_json_dumps(call.arguments));
                }
                pieces.push_back(Piece::special("<|im_end|>"));
                pieces.push_back(Piece::plain("\n"));
            }
        }
        if (options.add_generation_prompt) {
            pieces.push_back(Piece::special("<|im_start|>"));
            pieces.push_back(Piece::plain("assistant\n"));
        }
        return pieces;
    }

    ParsedReply parse_reply(std::string_view text) const override {
        ParsedReply reply;
        read_calls(text, reply);
        return reply;
    }
};

}  // namespace

std::unique_ptr<ChatFormat> make_qwen3_format() { return std::make_unique<Qwen3Format>(); }
std::unique_ptr<ChatFormat> make_qwen25_format() { return std::make_unique<Qwen25Format>(); }

}  // namespace cc::chat_detail
