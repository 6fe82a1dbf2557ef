// tool_choice (the OpenAI field, the CLI's --tool-choice): whether a reply may, must, or must not
// call a tool, and the decoding constraint that enforces "must" (required / a named function).
#pragma once

#include "core/engine/json_schema_constraint.h"
#include "core/text/chat_format.h"
#include "core/text/tokenizer.h"
#include "core/text/tool_set.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cc {

struct ToolChoice {
    enum class Mode {
        auto_,     // the model decides (no constraint)
        none,      // no constraint either; the caller reads the reply as text (the server does not parse calls)
        required,  // the reply opens with a call to one of the offered tools
        function   // the reply opens with a call to `function`
    };
    Mode mode = Mode::auto_;
    std::string function;  // Mode::function: the tool's name
    // Strict calls for every offered tool (the CLI's --strict, the app's toggle), as if each had
    // "strict": true: a call's arguments are masked to JSON its tool's parameters schema accepts
    // (ToolCallConstraint, core/engine/json_schema_constraint.h). Tools marked "strict": true are
    // strict without it. Not part of text(); ignored with Mode::none.
    bool strict = false;

    // "auto" | "none" | "required" | any other text = the name of a function. Throws on "".
    static ToolChoice parse(std::string_view text);
    static ToolChoice named(std::string name) { return {Mode::function, std::move(name)}; }
    bool forces_call() const { return mode == Mode::required || mode == Mode::function; }
    std::string text() const;  // the form parse() reads
    bool operator==(const ToolChoice&) const = default;
};

// The arguments of a forced call to `name` as the model wrote them, whether or not they parse:
// the reply's text after open + name + after_name, up to `close` (or the end), without the call
// object's own closing "}". Empty when `text` does not begin with that head.
std::string forced_call_arguments(const ToolCallMarkup& markup, std::string_view text, std::string_view name,
                                  const Tokenizer* tokenizer);

// "strict": true in the tool's function object (OpenAI's structured tool calls).
bool tool_is_strict(const Tool& tool);
// The schema a strict call's arguments follow: the tool's parameters, or an empty closed object
// when it has none.
ordered_json strict_arguments_schema(const Tool& tool);

// Compiles the arguments schema of every strict tool (all of them with `all`), so a request is
// refused before it runs: throws std::invalid_argument naming the tool and the unsupported keyword.
void check_strict_tools(const ToolSet& tools, bool all);

// Makes a reply open with a tool call, for tool_choice required or a named function (the engine's
// decode loop drives it). The format's markup before the name is fed through the model without
// sampling. A named function's name and the text up to its arguments (`", "arguments": ` for
// Qwen) are fed with it, tokenized as one run. With `required` the name is sampled, each step
// under a mask that leaves only the tokens keeping the name text a prefix of some offered
// `NAME` + after_name; once only one name can follow, the rest of it and of after_name is fed
// (tokenized on its own). A forced span stops before trailing whitespace (after_name's last
// space is the model's, fused with the "{" as in training). The arguments, the
// closing markup and anything after are the model's own tokens, unconstrained.
//
// Strict calls (a SchemaMasker per strict name): after the text up to the arguments, each token
// is masked so the arguments stay a prefix of JSON the tool's schema accepts, followed by the
// call's end ("}" and the format's closing markup, e.g. "}\n</tool_call>"); once that is read the
// constraint watches for the next call. Without `forced` (tool_choice auto) nothing is fed: the
// constraint waits until the model samples the format's call-opening token (Qwen's <tool_call>),
// then masks the rest of the opening and the name as above, then the arguments. A format whose
// call is the reply itself (Llama 3's JSON object: ToolCallMarkup::opens_reply) is watched at the
// reply's start instead: a token whose text, after the reply's leading whitespace, begins with "{"
// is allowed only while it stays a prefix of open + some offered NAME + after_name (the parser
// reads such a reply as a call), any other text is prose and ends the watch, special tokens
// (<|python_tag|>) and whitespace leave it open.
class ToolCallConstraint {
public:
    // `names`: the offered tools (one name: as a named function). `token_texts`: each id's decoded
    // text (special tokens as ""), which the mask reads; it must outlive the constraint. Throws
    // std::invalid_argument when `names` is empty.
    ToolCallConstraint(const ToolCallMarkup& markup, const Tokenizer& tokenizer, std::vector<std::string> names,
                       const std::vector<std::string>& token_texts);
    // `schemas[i]`: names[i]'s arguments masker, null for a call whose arguments are the model's.
    // Throws std::invalid_argument when !forced and the markup has no call-opening token.
    ToolCallConstraint(const ToolCallMarkup& markup, const Tokenizer& tokenizer, std::vector<std::string> names,
                       const std::vector<std::string>& token_texts, std::vector<std::shared_ptr<SchemaMasker>> schemas,
                       bool forced);
    // Whether calls in this markup open with a single token that a watching constraint can see.
    static bool has_watch_token(const ToolCallMarkup& markup, const Tokenizer& tokenizer);
    // Whether a call the model opens itself can be watched for: by its opening token, or at the
    // reply's start (opens_reply).
    static bool can_watch(const ToolCallMarkup& markup, const Tokenizer& tokenizer);

    // The tokens to feed next without sampling (the opening markup, then the text after the
    // name); empty when the next token is to be sampled.
    std::vector<token_id> take_forced();
    // Before sampling a token of the name or of strict arguments: every token that cannot continue
    // them gets -inf. Does nothing elsewhere. Throws std::runtime_error if no token can (a
    // vocabulary without the name's characters).
    void mask(std::vector<float>& logits) const;
    // A sampled token (it must be one mask() left).
    void accept(token_id id);

    // Calls whose arguments were masked and read to their end (strict calls completed).
    size_t strict_calls() const { return strict_calls_; }

private:
    enum class Phase { watch, reply_start, open, name, after_name, args, free };
    struct Frame {
        std::string name;
        std::string text;  // (watched: the opening after its token +) name + after_name
        std::shared_ptr<SchemaMasker> schema;
    };
    bool fits(const std::string& candidate) const;  // a prefix of some live frame's text
    void start_frames(const std::string& head);     // all names live again, each text after `head`
    void after_head(const Frame& frame);            // the head is read: the arguments come next

    ToolCallMarkup markup_;
    const Tokenizer& tokenizer_;
    const std::vector<std::string>& token_texts_;
    std::vector<Frame> all_;     // every offered name
    std::vector<Frame> frames_;  // those whose text begins with name_text_
    std::string name_text_;      // the name's text sampled so far
    Phase phase_ = Phase::open;
    std::optional<token_id> watch_token_;  // the call-opening token, when the markup has one
    std::string watch_head_;               // the opening's text after it
    std::string lead_;                     // Phase::reply_start: the reply's text so far (whitespace)
    bool strict_ = false;                  // some name has a schema: watch for further calls
    std::shared_ptr<SchemaMasker> args_;   // Phase::args: the call's masker and where it is
    SchemaState args_state_;
    size_t strict_calls_ = 0;
};

}  // namespace cc
