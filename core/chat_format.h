// Chat formats (model adapters, DESIGN §4): render a tool-using prompt as pieces, split it into a
// cacheable prefix and a query suffix at a special-token boundary, and parse tool calls.
//
// Template structure (e.g. <|im_start|>) is emitted as Piece::special and becomes a token id;
// user-supplied text (system prompt, tool JSON, query) is a Piece::text and is always tokenized in
// plain mode, so a query cannot inject </tools> or <|im_end|>. Consecutive text pieces form one
// run and are tokenized together, so splitting the prompt into pieces never changes its tokens.
#pragma once

#include "core/json_text.h"
#include "core/tokenizer.h"
#include "core/tool_set.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cc {

struct Piece {
    enum class Kind { special, text };
    Kind kind = Kind::text;
    std::string text;  // for special: the token's content, e.g. "<|im_start|>"

    static Piece special(std::string t) { return {Kind::special, std::move(t)}; }
    static Piece plain(std::string t) { return {Kind::text, std::move(t)}; }
};

struct ToolCall {
    std::string name;
    ordered_json arguments;      // object; empty object when the model gave none
    std::string raw;             // the call's text as generated
    bool arguments_valid = true; // false when the arguments were not valid JSON (kept in raw)
};

struct RenderedPrompt {
    std::string prefix_text;
    std::string suffix_text;
    std::vector<token_id> prefix_ids;
    std::vector<token_id> suffix_ids;
    std::vector<token_id> full_ids() const;
};

class ChatFormat {
public:
    virtual ~ChatFormat() = default;
    virtual std::string_view id() const = 0;  // "qwen3", "llama3", "mistral", "plain"

    // Everything that does not depend on the query: the cacheable prefix.
    virtual std::vector<Piece> prefix_pieces(const ToolSet& tools, std::string_view system_prompt) const = 0;
    // The query turn and the assistant header that the model continues from.
    virtual std::vector<Piece> suffix_pieces(std::string_view query) const = 0;
    // Ids that end generation (looked up in the tokenizer; missing ones are skipped).
    virtual std::vector<token_id> stop_token_ids(const Tokenizer& tokenizer) const = 0;
    // The first tool call in the generated text, or nullopt for "no call". Never throws.
    virtual std::optional<ToolCall> parse_tool_call(std::string_view generated_text) const = 0;
};

// Known ids: "qwen3", "llama3", "mistral", "plain". Throws on an unknown id, naming it.
std::unique_ptr<ChatFormat> make_chat_format(std::string_view id);
// Picks the format from config.json (model_type / architectures) and the tokenizer's tokens.
// Throws naming `source` when nothing fits.
std::string choose_chat_format(const nlohmann::json& config, const Tokenizer& tokenizer,
                               const std::string& source);

// Special pieces become their ids (an unknown special token throws, naming it); each maximal run
// of text pieces is encoded once, in plain mode.
std::vector<token_id> tokenize_pieces(const Tokenizer& tokenizer, std::span<const Piece> pieces);
std::string pieces_text(std::span<const Piece> pieces);

RenderedPrompt render_prompt(const ChatFormat& format, const Tokenizer& tokenizer, const ToolSet& tools,
                             std::string_view system_prompt, std::string_view query);

}  // namespace cc
