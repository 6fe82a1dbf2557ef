// SAX reader for tokenizer.json; see tokenizer_json.h for why.
#include "core/text/tokenizer_json.h"

#include <stdexcept>

namespace cc::tok {

namespace {

using json = nlohmann::json;

class Reader final : public nlohmann::json_sax<json> {
public:
    Reader(TokenizerJson& out, const std::string& source, int max_depth)
        : out_(out), source_(source), max_depth_(max_depth) {}

    bool null() override { return value(json()); }
    bool boolean(bool v) override { return value(json(v)); }
    bool number_integer(number_integer_t v) override {
        if (mode_ == Mode::vocab) return vocab_id(v);
        return value(json(v));
    }
    bool number_unsigned(number_unsigned_t v) override {
        if (mode_ == Mode::vocab) {
            return vocab_id(v > static_cast<number_unsigned_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v));
        }
        return value(json(v));
    }
    bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
    bool binary(binary_t&) override { return value(json()); }
    bool string(string_t& v) override {
        switch (mode_) {
            case Mode::vocab:
                fail("model.vocab[\"" + key_ + "\"] must be an integer id");
            case Mode::merges: {
                const size_t space = v.find(' ');
                if (space == std::string::npos || v.find(' ', space + 1) != std::string::npos) {
                    fail(merge_where() + " \"" + v + "\" must be two tokens separated by one space");
                }
                out_.merges.emplace_back(v.substr(0, space), v.substr(space + 1));
                return true;
            }
            case Mode::merge_pair:
                if (pair_.size() >= 2) fail(merge_where() + " must be \"a b\" or [\"a\", \"b\"]");
                pair_.push_back(std::move(v));
                return true;
            case Mode::dom:
                return value(json(std::move(v)));
        }
        return true;
    }
    bool key(string_t& k) override {
        key_ = std::move(k);
        return true;
    }
    bool start_object(std::size_t) override {
        enter();
        if (mode_ != Mode::dom) fail(mode_ == Mode::vocab ? "model.vocab values must be integer ids"
                                                          : merge_where() + " must be \"a b\" or [\"a\", \"b\"]");
        if (at_model_field("vocab")) {
            mode_ = Mode::vocab;
            out_.vocab_captured = true;
            out_.vocab.clear();
            capture_depth_ = depth_;
            return true;
        }
        return open(json::object());
    }
    bool end_object() override {
        if (mode_ == Mode::vocab && depth_ == capture_depth_) {
            mode_ = Mode::dom;
        } else {
            close();
        }
        --depth_;
        return true;
    }
    bool start_array(std::size_t) override {
        enter();
        if (mode_ == Mode::vocab) fail("model.vocab values must be integer ids");
        if (mode_ == Mode::merge_pair) fail(merge_where() + " must be \"a b\" or [\"a\", \"b\"]");
        if (mode_ == Mode::merges) {
            mode_ = Mode::merge_pair;
            pair_.clear();
            return true;
        }
        if (at_model_field("merges")) {
            mode_ = Mode::merges;
            out_.merges_captured = true;
            out_.merges.clear();
            capture_depth_ = depth_;
            return true;
        }
        return open(json::array());
    }
    bool end_array() override {
        if (mode_ == Mode::merge_pair) {
            if (pair_.size() != 2) fail(merge_where() + " must be \"a b\" or [\"a\", \"b\"]");
            out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
            mode_ = Mode::merges;
        } else if (mode_ == Mode::merges && depth_ == capture_depth_) {
            mode_ = Mode::dom;
        } else {
            close();
        }
        --depth_;
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
        fail(std::string("invalid JSON: ") + e.what());
    }

private:
    enum class Mode { dom, vocab, merges, merge_pair };

    [[noreturn]] void fail(const std::string& problem) const { throw std::runtime_error(source_ + ": " + problem); }

    std::string merge_where() const { return "model.merges[" + std::to_string(out_.merges.size()) + "]"; }

    void enter() {
        if (++depth_ > max_depth_) fail("invalid JSON: nesting deeper than " + std::to_string(max_depth_));
    }

    // True when the container being opened is root["model"][name].
    bool at_model_field(const char* name) const {
        return stack_.size() == 2 && keys_.size() == 2 && keys_[1] == "model" && stack_[1]->is_object() &&
               key_ == name;
    }

    bool vocab_id(int64_t id) {
        out_.vocab.emplace_back(std::move(key_), id);
        return true;
    }

    // Places `v` into the current container (or as the root) and returns where it lives.
    json* place(json&& v) {
        if (stack_.empty()) {
            out_.root = std::move(v);
            return &out_.root;
        }
        json& top = *stack_.back();
        if (top.is_object()) {
            json& slot = top[key_];
            slot = std::move(v);
            return &slot;
        }
        top.push_back(std::move(v));
        return &top.back();
    }
    bool value(json&& v) {
        if (mode_ == Mode::vocab) fail("model.vocab[\"" + key_ + "\"] must be an integer id");
        if (mode_ != Mode::dom) fail(merge_where() + " must be \"a b\" or [\"a\", \"b\"]");
        place(std::move(v));
        return true;
    }
    bool open(json&& container) {
        // Remember under which key this container sits, so model.vocab can be recognised.
        const std::string parent_key = stack_.empty() || !stack_.back()->is_object() ? std::string() : key_;
        stack_.push_back(place(std::move(container)));
        keys_.push_back(parent_key);
        return true;
    }
    void close() {
        stack_.pop_back();
        keys_.pop_back();
    }

    TokenizerJson& out_;
    const std::string& source_;
    const int max_depth_;
    int depth_ = 0;
    int capture_depth_ = 0;
    Mode mode_ = Mode::dom;
    std::vector<json*> stack_;       // open DOM containers; pointers stay valid while they are open
    std::vector<std::string> keys_;  // the key each open container sits under ("" in arrays / root)
    std::string key_;                // the last object key read
    std::vector<std::string> pair_;  // a merge in ["a", "b"] form being read
};

}  // namespace

TokenizerJson read_tokenizer_json(std::string_view text, const std::string& source, int max_depth) {
    TokenizerJson out;
    Reader reader(out, source, max_depth);
    json::sax_parse(text.begin(), text.end(), &reader);
    return out;
}

}  // namespace cc::tok
