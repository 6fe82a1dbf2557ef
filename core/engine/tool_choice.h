// tool_choice (the OpenAI field, the CLI's --tool-choice): whether a reply may, must, or must not
// call a tool, and the decoding constraint that enforces "must" (required / a named function).
#pragma once

#include "core/text/chat_format.h"
#include "core/text/tokenizer.h"

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

// Makes a reply open with a tool call, for tool_choice required or a named function (the engine's
// decode loop drives it). The format's markup before the name is fed through the model without
// sampling. A named function's name and the text up to its arguments (`", "arguments": ` for
// Qwen) are fed with it, tokenized as one run. With `required` the name is sampled, each step
// under a mask that leaves only the tokens keeping the name text a prefix of some offered
// `NAME` + after_name; once only one name can follow, the rest of it and of after_name is fed
// (tokenized on its own). A forced span stops before trailing whitespace (after_name's last
// space is the model's, fused with the "{" as in training). The arguments, the
// closing markup and anything after are the model's own tokens, unconstrained.
class ToolCallConstraint {
public:
    // `names`: the offered tools (one name: as a named function). `token_texts`: each id's decoded
    // text (special tokens as ""), which the mask reads; it must outlive the constraint. Throws
    // std::invalid_argument when `names` is empty.
    ToolCallConstraint(const ToolCallMarkup& markup, const Tokenizer& tokenizer, std::vector<std::string> names,
                       const std::vector<std::string>& token_texts);

    // The tokens to feed next without sampling (the opening markup, then the text after the
    // name); empty when the next token is to be sampled.
    std::vector<token_id> take_forced();
    // Before sampling a token of the name: every token that cannot continue it gets -inf. Does
    // nothing outside the name. Throws std::runtime_error if no token can (a vocabulary without
    // the name's characters).
    void mask(std::vector<float>& logits) const;
    // A sampled token (it must be one mask() left).
    void accept(token_id id);

private:
    enum class Phase { open, name, after_name, free };
    struct Frame {
        std::string name;
        std::string text;  // name + after_name
    };
    bool fits(const std::string& candidate) const;  // a prefix of some live frame's text

    ToolCallMarkup markup_;
    const Tokenizer& tokenizer_;
    const std::vector<std::string>& token_texts_;
    std::vector<Frame> frames_;  // those whose text begins with name_text_
    std::string name_text_;      // the name's text sampled so far
    Phase phase_ = Phase::open;
};

}  // namespace cc
