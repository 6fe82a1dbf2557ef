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

// The reply so far without its leading whitespace (Python's str.strip set, as the parser).
std::string_view without_leading_space(std::string_view text) {
    while (!text.empty() && std::string_view(" \t\n\r\f\v").find(text.front()) != std::string_view::npos)
        text.remove_prefix(1);
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

bool tool_is_strict(const Tool& tool) {
    const auto& fn = tool.schema.contains("function") ? tool.schema["function"] : tool.schema;
    return fn.is_object() && fn.contains("strict") && fn["strict"].is_boolean() && fn["strict"].get<bool>();
}

ordered_json strict_arguments_schema(const Tool& tool) {
    const auto& fn = tool.schema.contains("function") ? tool.schema["function"] : tool.schema;
    if (fn.is_object() && fn.contains("parameters")) return fn["parameters"];
    return ordered_json{{"type", "object"}, {"properties", ordered_json::object()}, {"additionalProperties", false}};
}

ToolCallConstraint::ToolCallConstraint(const ToolCallMarkup& markup, const Tokenizer& tokenizer,
                                       std::vector<std::string> names, const std::vector<std::string>& token_texts)
    : ToolCallConstraint(markup, tokenizer, std::move(names), token_texts, {}, /*forced=*/true) {}

void check_strict_tools(const ToolSet& tools, bool all) {
    for (const auto& tool : tools.tools())
        if (all || tool_is_strict(tool)) JsonSchemaGrammar(strict_arguments_schema(tool), "", "tool \"" + tool.name + "\"");
}

bool ToolCallConstraint::can_watch(const ToolCallMarkup& markup, const Tokenizer& tokenizer) {
    return has_watch_token(markup, tokenizer) ||
           (markup.opens_reply && std::all_of(markup.open.begin(), markup.open.end(),
                                              [](const Piece& p) { return p.kind == Piece::Kind::text; }));
}

bool ToolCallConstraint::has_watch_token(const ToolCallMarkup& markup, const Tokenizer& tokenizer) {
    if (markup.open.empty() || markup.open.front().kind != Piece::Kind::special) return false;
    return tokenize_pieces(tokenizer, std::span<const Piece>(markup.open.data(), 1)).size() == 1;
}

ToolCallConstraint::ToolCallConstraint(const ToolCallMarkup& markup, const Tokenizer& tokenizer,
                                       std::vector<std::string> names, const std::vector<std::string>& token_texts,
                                       std::vector<std::shared_ptr<SchemaMasker>> schemas, bool forced)
    : markup_(markup), tokenizer_(tokenizer), token_texts_(token_texts) {
    if (names.empty()) throw std::invalid_argument("a forced tool call needs at least one tool to call");
    if (!schemas.empty() && schemas.size() != names.size())
        throw std::logic_error("ToolCallConstraint: one schema slot per name");
    for (size_t i = 0; i < names.size(); ++i) {
        all_.push_back({names[i], names[i] + markup_.after_name, schemas.empty() ? nullptr : schemas[i]});
        if (all_.back().schema) strict_ = true;
    }
    if (has_watch_token(markup_, tokenizer_)) {
        watch_token_ = tokenize_pieces(tokenizer_, std::span<const Piece>(markup_.open.data(), 1)).front();
        watch_head_ = pieces_text(std::span<const Piece>(markup_.open.data() + 1, markup_.open.size() - 1));
    }
    if (!forced && !can_watch(markup_, tokenizer_))
        throw std::invalid_argument(
            "the chat format's tool calls neither open with a single token nor open the reply, so "
            "calls the model opens itself cannot be constrained; force the call (tool_choice "
            "required or a name)");
    if (forced || watch_token_) {
        start_frames("");
        phase_ = forced ? Phase::open : Phase::watch;
    } else {
        start_frames(pieces_text(markup_.open));  // the call is the reply: its head is the model's to write
        phase_ = Phase::reply_start;
    }
}

void ToolCallConstraint::start_frames(const std::string& head) {
    frames_.clear();
    for (const auto& f : all_) frames_.push_back({f.name, head + f.text, f.schema});
    name_text_.clear();
}

void ToolCallConstraint::after_head(const Frame& frame) {
    if (frame.schema) {
        args_ = frame.schema;
        args_state_ = args_->grammar().start();
        phase_ = Phase::args;
    } else {
        phase_ = Phase::free;  // the model's own arguments: where they end is not followed
    }
}

std::vector<token_id> ToolCallConstraint::take_forced() {
    if (phase_ == Phase::open) {
        std::vector<Piece> pieces = markup_.open;
        if (frames_.size() == 1) {
            // The name is known: it and the text up to the arguments join the opening's last text
            // run, so the whole call head is tokenized as the format's text would be.
            pieces.push_back(Piece::plain(without_trailing_space(frames_.front().text)));
            after_head(frames_.front());
        } else {
            phase_ = Phase::name;
        }
        return tokenize_pieces(tokenizer_, pieces);
    }
    if (phase_ == Phase::after_name) {
        after_head(frames_.front());
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
    if (phase_ == Phase::args) {
        args_->mask(args_state_, logits);
        return;
    }
    if (phase_ == Phase::reply_start) {
        // Prose and whitespace pass; a reply that opens with "{" is a call, so it must stay one.
        std::string candidate;
        for (size_t id = 0; id < logits.size(); ++id) {
            if (id >= token_texts_.size()) {
                logits[id] = -std::numeric_limits<float>::infinity();
                continue;
            }
            if (token_texts_[id].empty()) continue;  // a special token (<|python_tag|>, the end)
            candidate = lead_;
            candidate += token_texts_[id];
            const std::string_view text = without_leading_space(candidate);
            if (!text.empty() && text.front() == '{' && !fits(std::string(text)))
                logits[id] = -std::numeric_limits<float>::infinity();
        }
        return;
    }
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
    if (phase_ == Phase::reply_start) {
        const std::string& text = token_texts_.at(static_cast<size_t>(id));
        if (text.empty()) return;
        lead_ += text;
        const std::string_view reply = without_leading_space(lead_);
        if (reply.empty()) return;
        if (reply.front() != '{') {
            phase_ = Phase::free;  // prose: the parser reads no call in this reply
            return;
        }
        // The model opened the call: the rest of the head is masked (or fed) from here.
        name_text_ = std::string(reply);
        std::erase_if(frames_, [&](const Frame& f) { return !f.text.starts_with(name_text_); });
        if (frames_.empty()) throw std::logic_error("ToolCallConstraint: a token outside the mask was accepted");
        phase_ = frames_.size() == 1 ? Phase::after_name : Phase::name;
        return;
    }
    if (phase_ == Phase::watch) {
        if (id != *watch_token_) return;
        // The model opened a call: the rest of the opening and the name are masked from here.
        start_frames(watch_head_);
        phase_ = frames_.size() == 1 ? Phase::after_name : Phase::name;
        return;
    }
    if (phase_ == Phase::args) {
        if (!args_->grammar().advance(args_state_, token_texts_.at(static_cast<size_t>(id))))
            throw std::logic_error("ToolCallConstraint: a token outside the arguments mask was accepted");
        if (args_->grammar().complete(args_state_)) {
            ++strict_calls_;
            args_.reset();
            // The call is closed: the next one the model opens is constrained too.
            phase_ = watch_token_ && strict_ ? Phase::watch : Phase::free;
        }
        return;
    }
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
