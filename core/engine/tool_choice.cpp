#include "core/engine/tool_choice.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace cc {
namespace {

// The forced text stops before its trailing whitespace: a BPE tokenizer merges a space with what
// follows (Qwen's " {\"" is one token), so a lone forced space would be a tokenization the model
// never saw in training; the model writes the space itself, fused as usual.
std::string without_trailing_space(std::string text) {
    while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\t')) text.pop_back();
    return text;
}

}  // namespace

ToolChoice ToolChoice::parse(std::string_view text) {
    if (text == "auto") return {};
    if (text == "none") return {Mode::none, {}};
    if (text == "required") return {Mode::required, {}};
    if (text.empty()) throw std::invalid_argument("tool choice must be auto, none, required or a function's name, not \"\"");
    return named(std::string(text));
}

std::string ToolChoice::text() const {
    switch (mode) {
        case Mode::auto_: return "auto";
        case Mode::none: return "none";
        case Mode::required: return "required";
        case Mode::function: return function;
    }
    return "?";
}

std::string forced_call_arguments(const ToolCallMarkup& markup, std::string_view text, std::string_view name,
                                  const Tokenizer* tokenizer) {
    const std::string head = pieces_text(markup.open, tokenizer) + std::string(name) + markup.after_name;
    if (!text.starts_with(head)) return {};
    std::string_view args = text.substr(head.size());
    if (!markup.close.empty())
        if (const size_t at = args.find(markup.close); at != std::string_view::npos) args = args.substr(0, at);
    args = py_strip(args);
    // The call object's "}" closes it after the arguments: drop it when the braces say it is there.
    const auto count = [&](char c) { return std::count(args.begin(), args.end(), c); };
    if (args.ends_with('}') && count('}') > count('{')) args = py_strip(args.substr(0, args.size() - 1));
    return std::string(args);
}

ToolCallConstraint::ToolCallConstraint(const ToolCallMarkup& markup, const Tokenizer& tokenizer,
                                       std::vector<std::string> names, const std::vector<std::string>& token_texts)
    : markup_(markup), tokenizer_(tokenizer), token_texts_(token_texts) {
    if (names.empty()) throw std::invalid_argument("a forced tool call needs at least one tool to call");
    for (auto& name : names) frames_.push_back({name, name + markup_.after_name});
}

std::vector<token_id> ToolCallConstraint::take_forced() {
    if (phase_ == Phase::open) {
        std::vector<Piece> pieces = markup_.open;
        if (frames_.size() == 1) {
            // The name is known: it and the text up to the arguments join the opening's last text
            // run, so the whole call head is tokenized as the format's text would be.
            pieces.push_back(Piece::plain(without_trailing_space(frames_.front().text)));
            phase_ = Phase::free;
        } else {
            phase_ = Phase::name;
        }
        return tokenize_pieces(tokenizer_, pieces);
    }
    if (phase_ == Phase::after_name) {
        phase_ = Phase::free;
        const std::string rest = without_trailing_space(frames_.front().text.substr(name_text_.size()));
        if (rest.empty()) return {};
        const Piece piece = Piece::plain(rest);
        return tokenize_pieces(tokenizer_, std::span<const Piece>(&piece, 1));
    }
    return {};
}

bool ToolCallConstraint::fits(const std::string& candidate) const {
    for (const auto& f : frames_)
        if (f.text.size() >= candidate.size() && f.text.compare(0, candidate.size(), candidate) == 0) return true;
    return false;
}

void ToolCallConstraint::mask(std::vector<float>& logits) const {
    if (phase_ != Phase::name) return;
    bool any = false;
    std::string candidate = name_text_;
    for (size_t id = 0; id < logits.size(); ++id) {
        // Ids past the tokenizer's vocabulary (padding rows of the embedding) and special tokens
        // (empty text) never continue a name.
        const bool known = id < token_texts_.size() && !token_texts_[id].empty();
        bool allowed = false;
        if (known) {
            candidate.resize(name_text_.size());
            candidate += token_texts_[id];
            allowed = fits(candidate);
        }
        if (allowed) any = true;
        else logits[id] = -std::numeric_limits<float>::infinity();
    }
    if (!any) throw std::runtime_error("no token of the vocabulary continues a tool name after \"" + name_text_ + "\"");
}

void ToolCallConstraint::accept(token_id id) {
    if (phase_ != Phase::name) return;
    name_text_ += token_texts_.at(static_cast<size_t>(id));
    std::erase_if(frames_, [&](const Frame& f) {
        return f.text.size() < name_text_.size() || f.text.compare(0, name_text_.size(), name_text_) != 0;
    });
    if (frames_.empty()) throw std::logic_error("ToolCallConstraint: a token outside the mask was accepted");
    // One name left: the rest of it and the text up to the arguments are fixed.
    if (frames_.size() == 1) phase_ = Phase::after_name;
}

}  // namespace cc
