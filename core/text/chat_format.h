// Chat formats (model adapters, DESIGN §4): render a tool-using prompt as pieces, split it into a
// cacheable prefix and a query suffix, and parse tool calls.
//
// Template structure (e.g. <|im_start|>) is emitted as Piece::special and becomes a token id;
// user-supplied text (system prompt, tool JSON, query) is a Piece::text and is always tokenized in
// plain mode, so a query cannot inject </tools> or <|im_end|>. Consecutive text pieces form one
// run and are tokenized together, so splitting the prompt into pieces never changes its tokens.
//
// Where the prefix ends with a special token (qwen3, llama3, mistral) the two halves tokenize
// independently and exactly. Where it ends inside a text run (plain), render_prompt tokenizes the
// joined run and takes the suffix ids from it, refusing the prompt if the prefix's own ids are not a
// prefix of the joint ids; so `prefix_ids + suffix_ids == tokenize_pieces(all pieces)` always holds.
#pragma once

#include "core/base/json_text.h"
#include "core/text/conversation.h"
#include "core/text/tokenizer.h"
#include "core/text/tool_set.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cc {

struct Piece {
    enum class Kind {
        special,  // a template token by its content, e.g. "<|im_start|>"
        text,     // user or template text, tokenized in plain mode
        bos       // the tokenizer's beginning-of-sequence token, or nothing when it has none
    };
    Kind kind = Kind::text;
    std::string text;  // for special: the token's content; empty for bos

    static Piece special(std::string t) { return {Kind::special, std::move(t)}; }
    static Piece plain(std::string t) { return {Kind::text, std::move(t)}; }
    static Piece bos() { return {Kind::bos, {}}; }
};

struct ToolCall {
    std::string name;
    ordered_json arguments = ordered_json::object();  // object; empty when the model gave none
    std::string raw;                                  // the call's text as generated
    bool arguments_valid = true;  // false when the arguments were not a valid JSON object (kept in raw)
};

// How a reply opens a tool call, for forcing one (tool_choice required or a named function):
// `open` is the markup before the function's name (template tokens and text), `after_name` the
// text between the name and the arguments. open + NAME + after_name is exactly what the format's
// parse_tool_call reads as the start of a call to NAME; the arguments, the call object's "}" and
// `close` follow ("" when the call ends the message).
struct ToolCallMarkup {
    std::vector<Piece> open;
    std::string after_name;
    std::string close;
    // The parser reads a call only where it opens the reply (Llama 3: the JSON object itself, after
    // whitespace or <|python_tag|>), so a call the model opens itself is recognised there.
    bool opens_reply = false;
};

// The cacheable prefix of a tool set's prompt, rendered once: its pieces (a suffix is tokenized
// against them: tokenize_suffix), its ids and its text.
struct RenderedPrefix {
    std::vector<Piece> pieces;
    std::vector<token_id> ids;
    std::string text;  // pieces_text with the tokenizer's BOS
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
    virtual std::string_view id() const = 0;  // "qwen3", "qwen2.5", "llama3", "mistral", "plain"

    // Everything that does not depend on the query: the cacheable prefix. An empty system prompt
    // means "no system message".
    virtual std::vector<Piece> prefix_pieces(const ToolSet& tools, std::string_view system_prompt) const = 0;
    // The query turn and the assistant header that the model continues from. `system_prompt` is
    // only used by formats whose template places it in the query turn (mistral); the others put it
    // in the prefix and ignore it here.
    virtual std::vector<Piece> suffix_pieces(std::string_view query, std::string_view system_prompt) const = 0;
    // The whole prompt of a conversation, as the official template renders [system?, messages...]
    // with these tools: for a conversation of one user message (enable_thinking off, with the
    // generation prompt) it is prefix_pieces(...) + suffix_pieces(...), piece for piece; in general
    // the group prefix is a prefix of it when the template keeps the tools and system prompt in
    // front (all formats but mistral with more than one user turn). Earlier turns are rendered
    // by the template's own rules (e.g. qwen3 drops the <think> block of assistant turns before
    // the last user query). Throws std::invalid_argument naming the message (e.g.
    // "messages[3]: llama3 renders one tool call per assistant message") where the official
    // template raises.
    virtual std::vector<Piece> conversation_pieces(const ToolSet& tools, std::string_view system_prompt,
                                                   std::span<const ChatMessage> messages,
                                                   const RenderOptions& options) const = 0;
    // The reply's text outside the tool-call markup, every tool call in it, and the thinking text.
    // Never throws.
    virtual ParsedReply parse_reply(std::string_view generated_text) const = 0;
    // Ids that end generation (looked up in the tokenizer; missing ones are skipped).
    virtual std::vector<token_id> stop_token_ids(const Tokenizer& tokenizer) const = 0;
    // The first tool call in the generated text, or nullopt for "no call". Never throws.
    virtual std::optional<ToolCall> parse_tool_call(std::string_view generated_text) const = 0;
    // How a call opens, for constrained decoding; nullopt when the format has no call markup that
    // a reply can be made to begin with.
    virtual std::optional<ToolCallMarkup> tool_call_markup() const { return std::nullopt; }
};

// Known ids: "qwen3", "qwen2.5", "llama3", "mistral", "plain". Throws on an unknown id, naming it.
std::unique_ptr<ChatFormat> make_chat_format(std::string_view id);
// Picks the format from config.json (model_type / architectures) and the tokenizer's tokens.
// Throws naming `source` when nothing fits.
std::string choose_chat_format(const nlohmann::json& config, const Tokenizer& tokenizer,
                               const std::string& source);

// Special pieces become their ids (an unknown special token throws, naming it), a bos piece the
// tokenizer's BOS id if it has one; each maximal run of text pieces is encoded once, in plain mode.
std::vector<token_id> tokenize_pieces(const Tokenizer& tokenizer, std::span<const Piece> pieces);
// The pieces' text as the official template would print it. A bos piece prints as the tokenizer's
// BOS token when `tokenizer` is given and has one, otherwise as nothing.
std::string pieces_text(std::span<const Piece> pieces, const Tokenizer* tokenizer = nullptr);

// Throws std::runtime_error (naming the format and the tokenizer) when the prompt cannot be split
// exactly, which only a format whose split lies inside a text run can hit.
// The suffix's ids as they appear in the full prompt's ids. Tokenized on its own when a special
// piece separates it from the prefix; when the split lies inside a text run (the plain format) the
// joined run is encoded once and the suffix is what follows `prefix_ids` (throws if a token would
// straddle the boundary).
std::vector<token_id> tokenize_suffix(const ChatFormat& format, const Tokenizer& tokenizer,
                                      std::span<const Piece> prefix, std::span<const token_id> prefix_ids,
                                      std::span<const Piece> suffix);

// The prefix of `tools` + `system_prompt`: prefix_pieces, tokenize_pieces, pieces_text.
RenderedPrefix render_prefix(const ChatFormat& format, const Tokenizer& tokenizer, const ToolSet& tools,
                             std::string_view system_prompt);
// render_prefix and the query's suffix after it.
RenderedPrompt render_prompt(const ChatFormat& format, const Tokenizer& tokenizer, const ToolSet& tools,
                             std::string_view system_prompt, std::string_view query);

// Python's str.strip() with no argument (Jinja's `trim`): removes leading and trailing Unicode
// whitespace as str.isspace() defines it. Invalid UTF-8 bytes count as non-whitespace.
std::string_view py_strip(std::string_view text);

}  // namespace cc
