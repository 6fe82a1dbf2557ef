// Loading a Hugging Face tokenizer.json into Tokenizer::Impl, and the small accessors.
// Every section type is matched by name; anything not implemented is refused with the file name,
// because a silently different tokenization would corrupt every cache key and every answer.
#include "core/text/tokenizer_impl.h"
#include "core/text/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cc {

namespace {

// nlohmann::json (std::map objects), not ordered_json: the 150k-entry vocab object must insert in
// O(log n), and ordered_json's linear-probing map would make loading quadratic.
using json = nlohmann::json;

constexpr int k_max_json_depth = 64;
constexpr int64_t k_max_token_id = (int64_t{1} << 24) - 1;  // sanity bound; real vocabs are < 300k

class Loader {
public:
    explicit Loader(std::string source) : source_(std::move(source)) {}

    [[noreturn]] void fail(const std::string& problem) const { throw std::runtime_error(source_ + ": " + problem); }

    const json& require(const json& obj, const char* key, const std::string& where) const {
        auto it = obj.find(key);
        if (it == obj.end()) fail(where + "." + key + " is missing");
        return *it;
    }
    std::string string_field(const json& obj, const char* key, const std::string& where) const {
        const json& v = require(obj, key, where);
        if (!v.is_string()) fail(where + "." + key + " must be a string");
        return v.get<std::string>();
    }
    std::optional<std::string> optional_string(const json& obj, const char* key, const std::string& where) const {
        auto it = obj.find(key);
        if (it == obj.end() || it->is_null()) return std::nullopt;
        if (!it->is_string()) fail(where + "." + key + " must be a string or null");
        return it->get<std::string>();
    }
    bool bool_field(const json& obj, const char* key, const std::string& where, std::optional<bool> fallback) const {
        auto it = obj.find(key);
        if (it == obj.end() || it->is_null()) {
            if (!fallback) fail(where + "." + key + " is missing");
            return *fallback;
        }
        if (!it->is_boolean()) fail(where + "." + key + " must be true or false");
        return it->get<bool>();
    }
    int64_t int_field(const json& obj, const char* key, const std::string& where) const {
        const json& v = require(obj, key, where);
        if (!v.is_number_integer()) fail(where + "." + key + " must be an integer");
        return v.get<int64_t>();
    }
    token_id check_id(int64_t id, const std::string& where) const {
        if (id < 0 || id > k_max_token_id) fail(where + ": token id " + std::to_string(id) + " is out of range");
        return static_cast<token_id>(id);
    }
    std::string type_of(const json& obj, const std::string& where) const {
        if (!obj.is_object()) fail(where + " must be an object or null");
        return string_field(obj, "type", where);
    }
    // {"String": s} or {"Regex": r}.
    std::pair<std::string, bool> pattern(const json& obj, const std::string& where) const {
        const json& p = require(obj, "pattern", where);
        if (p.is_object() && p.size() == 1) {
            if (auto it = p.find("String"); it != p.end() && it->is_string()) return {it->get<std::string>(), false};
            if (auto it = p.find("Regex"); it != p.end() && it->is_string()) return {it->get<std::string>(), true};
        }
        fail(where + ".pattern must be {\"String\": ...} or {\"Regex\": ...}");
    }
    const std::string& source() const { return source_; }

private:
    std::string source_;
};

size_t code_point_count(std::string_view s) {
    size_t n = 0;
    for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

std::string single_char(const Loader& L, const json& obj, const char* key, const std::string& where) {
    std::string s = L.string_field(obj, key, where);
    if (!is_valid_utf8(s) || code_point_count(s) != 1) L.fail(where + "." + key + " must be a single character");
    return s;
}

tok::PrependScheme prepend_scheme(const Loader& L, const json& obj, const std::string& where) {
    if (auto scheme = L.optional_string(obj, "prepend_scheme", where)) {
        if (*scheme == "always") return tok::PrependScheme::always;
        if (*scheme == "first") return tok::PrependScheme::first;
        if (*scheme == "never") return tok::PrependScheme::never;
        L.fail(where + ".prepend_scheme \"" + *scheme + "\" is not supported");
    }
    // Files written before prepend_scheme existed use add_prefix_space.
    return L.bool_field(obj, "add_prefix_space", where, true) ? tok::PrependScheme::always : tok::PrependScheme::never;
}

// ---- sections ------------------------------------------------------------------------------

void load_normalizer(const Loader& L, const json& node, const std::string& where,
                     std::vector<tok::NormalizerStep>& steps) {
    if (node.is_null()) return;
    const std::string type = L.type_of(node, where);
    using K = tok::NormalizerStep::Kind;
    if (type == "Sequence") {
        const json& list = L.require(node, "normalizers", where);
        if (!list.is_array()) L.fail(where + ".normalizers must be an array");
        for (size_t i = 0; i < list.size(); ++i) {
            load_normalizer(L, list[i], where + ".normalizers[" + std::to_string(i) + "]", steps);
        }
    } else if (type == "NFC") {
        steps.push_back({K::nfc, {}, {}});
    } else if (type == "NFD") {
        steps.push_back({K::nfd, {}, {}});
    } else if (type == "NFKC") {
        steps.push_back({K::nfkc, {}, {}});
    } else if (type == "NFKD") {
        steps.push_back({K::nfkd, {}, {}});
    } else if (type == "Prepend") {
        steps.push_back({K::prepend, L.string_field(node, "prepend", where), {}});
    } else if (type == "Replace") {
        auto [pattern, is_regex] = L.pattern(node, where);
        if (is_regex) L.fail(where + ": normalizer type \"Replace\" with a Regex pattern is not supported");
        if (pattern.empty()) L.fail(where + ": Replace pattern is empty");
        steps.push_back({K::replace, pattern, L.string_field(node, "content", where)});
    } else {
        L.fail("normalizer type \"" + type + "\" is not supported");
    }
}

// The regex of GPT-2 that ByteLevel(use_regex=true) applies.
constexpr const char* k_gpt2_regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

void load_pre_tokenizer(const Loader& L, const json& node, const std::string& where,
                        std::vector<tok::PreTokenizerStep>& steps) {
    if (node.is_null()) return;
    const std::string type = L.type_of(node, where);
    using K = tok::PreTokenizerStep::Kind;
    tok::PreTokenizerStep step;
    if (type == "Sequence") {
        const json& list = L.require(node, "pretokenizers", where);
        if (!list.is_array()) L.fail(where + ".pretokenizers must be an array");
        for (size_t i = 0; i < list.size(); ++i) {
            load_pre_tokenizer(L, list[i], where + ".pretokenizers[" + std::to_string(i) + "]", steps);
        }
        return;
    } else if (type == "Split") {
        step.kind = K::split;
        auto [pattern, is_regex] = L.pattern(node, where);
        if (pattern.empty()) L.fail(where + ": Split pattern is empty");
        if (is_regex) {
            step.regex = std::make_shared<tok::Regex>(pattern, L.source(), where + " Split");
        } else {
            step.literal = pattern;
        }
        const std::string behavior = L.string_field(node, "behavior", where);
        if (behavior == "Removed") step.behavior = tok::SplitBehavior::removed;
        else if (behavior == "Isolated") step.behavior = tok::SplitBehavior::isolated;
        else if (behavior == "MergedWithPrevious") step.behavior = tok::SplitBehavior::merged_with_previous;
        else if (behavior == "MergedWithNext") step.behavior = tok::SplitBehavior::merged_with_next;
        else if (behavior == "Contiguous") step.behavior = tok::SplitBehavior::contiguous;
        else L.fail(where + ": Split behavior \"" + behavior + "\" is not supported");
        step.invert = L.bool_field(node, "invert", where, false);
    } else if (type == "ByteLevel") {
        step.kind = K::byte_level;
        step.add_prefix_space = L.bool_field(node, "add_prefix_space", where, std::nullopt);
        step.use_regex = L.bool_field(node, "use_regex", where, true);  // HF's serde default
        if (step.use_regex) step.regex = std::make_shared<tok::Regex>(k_gpt2_regex, L.source(), "GPT-2");
    } else if (type == "Metaspace") {
        step.kind = K::metaspace;
        step.replacement = single_char(L, node, "replacement", where);
        step.prepend_scheme = prepend_scheme(L, node, where);
        step.split_on_replacement = L.bool_field(node, "split", where, true);
    } else {
        L.fail("pre_tokenizer type \"" + type + "\" is not supported");
    }
    steps.push_back(std::move(step));
}

void load_decoder(const Loader& L, const json& node, const std::string& where, std::vector<tok::DecoderStep>& steps) {
    const std::string type = L.type_of(node, where);
    using K = tok::DecoderStep::Kind;
    tok::DecoderStep step;
    if (type == "Sequence") {
        const json& list = L.require(node, "decoders", where);
        if (!list.is_array()) L.fail(where + ".decoders must be an array");
        for (size_t i = 0; i < list.size(); ++i) {
            load_decoder(L, list[i], where + ".decoders[" + std::to_string(i) + "]", steps);
        }
        return;
    } else if (type == "ByteLevel") {
        step.kind = K::byte_level;
    } else if (type == "Replace") {
        step.kind = K::replace;
        auto [pattern, is_regex] = L.pattern(node, where);
        if (is_regex) L.fail(where + ": decoder type \"Replace\" with a Regex pattern is not supported");
        if (pattern.empty()) L.fail(where + ": Replace pattern is empty");
        step.pattern = pattern;
        step.content = L.string_field(node, "content", where);
    } else if (type == "ByteFallback") {
        step.kind = K::byte_fallback;
    } else if (type == "Fuse") {
        step.kind = K::fuse;
    } else if (type == "Strip") {
        step.kind = K::strip;
        step.content = single_char(L, node, "content", where);
        const int64_t start = L.int_field(node, "start", where), stop = L.int_field(node, "stop", where);
        if (start < 0 || stop < 0) L.fail(where + ": Strip start/stop must not be negative");
        step.n_start = static_cast<size_t>(start);
        step.n_stop = static_cast<size_t>(stop);
    } else if (type == "Metaspace") {
        step.kind = K::metaspace;
        step.content = single_char(L, node, "replacement", where);
        step.metaspace_strip_first = prepend_scheme(L, node, where) != tok::PrependScheme::never;
    } else {
        L.fail("decoder type \"" + type + "\" is not supported");
    }
    steps.push_back(std::move(step));
}

void load_post_processor(const Loader& L, const json& node, const std::string& where, Tokenizer::Impl& impl) {
    if (node.is_null()) return;
    const std::string type = L.type_of(node, where);
    if (type == "Sequence") {
        const json& list = L.require(node, "processors", where);
        if (!list.is_array()) L.fail(where + ".processors must be an array");
        for (size_t i = 0; i < list.size(); ++i) {
            load_post_processor(L, list[i], where + ".processors[" + std::to_string(i) + "]", impl);
        }
    } else if (type == "ByteLevel") {
        // Only adjusts offsets, which we do not produce; the ids are unchanged.
    } else if (type == "TemplateProcessing") {
        if (impl.has_template) L.fail(where + ": more than one TemplateProcessing is not supported");
        const json& specials = L.require(node, "special_tokens", where);
        if (!specials.is_object()) L.fail(where + ".special_tokens must be an object");
        const json& single = L.require(node, "single", where);
        if (!single.is_array()) L.fail(where + ".single must be an array");
        for (size_t i = 0; i < single.size(); ++i) {
            const std::string item_where = where + ".single[" + std::to_string(i) + "]";
            const json& item = single[i];
            tok::TemplatePiece piece;
            if (item.is_object() && item.contains("Sequence")) {
                const std::string seq = L.string_field(item["Sequence"], "id", item_where + ".Sequence");
                if (seq != "A") L.fail(item_where + ": sequence \"" + seq + "\" in a single-sequence template");
                piece.is_sequence = true;
            } else if (item.is_object() && item.contains("SpecialToken")) {
                const std::string name = L.string_field(item["SpecialToken"], "id", item_where + ".SpecialToken");
                auto it = specials.find(name);
                if (it == specials.end()) L.fail(item_where + ": special token \"" + name + "\" is not in special_tokens");
                const json& ids = L.require(*it, "ids", where + ".special_tokens." + name);
                if (!ids.is_array()) L.fail(where + ".special_tokens." + name + ".ids must be an array");
                for (const json& id : ids) {
                    if (!id.is_number_integer()) L.fail(where + ".special_tokens." + name + ".ids must hold integers");
                    piece.ids.push_back(L.check_id(id.get<int64_t>(), where + ".special_tokens." + name));
                }
            } else {
                L.fail(item_where + " must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
            }
            impl.template_single.push_back(std::move(piece));
        }
        impl.has_template = true;
    } else {
        L.fail("post_processor type \"" + type + "\" is not supported");
    }
}

void load_model(const Loader& L, const json& node, tok::TokenizerJson& captured, tok::BpeModel& model) {
    const std::string where = "model";
    if (!node.is_object()) L.fail("model must be an object");
    const std::string type = L.string_field(node, "type", where);
    if (type != "BPE") L.fail("model type \"" + type + "\" is not supported");
    if (auto it = node.find("dropout"); it != node.end() && !it->is_null()) {
        L.fail("model.dropout is not supported (it makes encoding random)");
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        if (auto s = L.optional_string(node, key, where); s && !s->empty()) {
            L.fail(std::string("model.") + key + " \"" + *s + "\" is not supported");
        }
    }
    model.fuse_unk = L.bool_field(node, "fuse_unk", where, false);
    model.byte_fallback = L.bool_field(node, "byte_fallback", where, false);
    model.ignore_merges = L.bool_field(node, "ignore_merges", where, false);

    // model.vocab / model.merges normally arrive pre-split by the SAX reader; a file where they
    // have another shape keeps them in the DOM, and the checks below report it.
    std::vector<std::pair<std::string, int64_t>> dom_vocab;
    auto* vocab = &captured.vocab;
    if (!captured.vocab_captured) {
        const json& v = L.require(node, "vocab", where);
        if (!v.is_object()) L.fail("model.vocab must be an object of token -> id");
        for (auto it = v.begin(); it != v.end(); ++it) {
            if (!it.value().is_number_integer()) L.fail("model.vocab[\"" + it.key() + "\"] must be an integer id");
            dom_vocab.emplace_back(it.key(), it.value().get<int64_t>());
        }
        vocab = &dom_vocab;
    }
    model.vocab.reserve(vocab->size());
    int64_t max_id = -1;
    for (auto& [token, raw_id] : *vocab) {
        const token_id id = L.check_id(raw_id, "model.vocab");
        model.vocab.insert_or_assign(std::move(token), id);  // a repeated key keeps its last id, like a JSON object
        max_id = std::max<int64_t>(max_id, id);
    }
    model.id_to_key.assign(static_cast<size_t>(max_id + 1), -1);
    const auto& keys = model.vocab.keys();
    const auto& ids = model.vocab.ids();
    for (size_t i = 0; i < keys.size(); ++i) {
        if (model.id_to_key[ids[i]] < 0) model.id_to_key[ids[i]] = static_cast<int32_t>(i);
    }

    model.single_char_ids.assign(0x10000, -1);
    for (size_t i = 0; i < keys.size(); ++i) {
        const std::string& token = keys[i];
        const token_id id = ids[i];
        if (token.empty() || token.size() > 3 || !is_valid_utf8(token)) continue;
        char32_t cp = 0;
        if (utf8_decode(token, 0, cp) == token.size() && cp < 0x10000) model.single_char_ids[cp] = id;
    }

    if (auto unk = L.optional_string(node, "unk_token", where)) {
        model.unk_id = model.vocab.find(*unk);
        if (!model.unk_id) L.fail("model.unk_token \"" + *unk + "\" is not in the vocab");
    }
    // The tokenizers library accepts a byte_fallback vocab that lacks some <0xNN> tokens: a
    // character whose bytes are not all present falls back to unk (see BpeModel::merge_word).
    for (int b = 0; b < 256; ++b) {
        static constexpr char hex[] = "0123456789ABCDEF";
        const std::string name = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
        const auto id = model.vocab.find(name);
        model.byte_fallback_ids[b] = id ? *id : -1;
    }

    std::vector<std::pair<std::string, std::string>> dom_merges;
    const auto* merges = &captured.merges;
    if (!captured.merges_captured) {
        const json& m = L.require(node, "merges", where);
        if (!m.is_array()) L.fail("model.merges must be an array");
        for (size_t rank = 0; rank < m.size(); ++rank) {
            const std::string mwhere = "model.merges[" + std::to_string(rank) + "]";
            if (m[rank].is_array() && m[rank].size() == 2 && m[rank][0].is_string() && m[rank][1].is_string()) {
                dom_merges.emplace_back(m[rank][0].get<std::string>(), m[rank][1].get<std::string>());
            } else if (m[rank].is_string()) {
                const std::string& text = m[rank].get_ref<const std::string&>();
                const size_t space = text.find(' ');
                if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
                    L.fail(mwhere + " \"" + text + "\" must be two tokens separated by one space");
                }
                dom_merges.emplace_back(text.substr(0, space), text.substr(space + 1));
            } else {
                L.fail(mwhere + " must be \"a b\" or [\"a\", \"b\"]");
            }
        }
        merges = &dom_merges;
    }
    model.merges.reserve(merges->size() * 2);
    std::string joined;
    for (size_t rank = 0; rank < merges->size(); ++rank) {
        const auto& [left, right] = (*merges)[rank];
        auto find = [&](std::string_view token) {
            const auto id = model.vocab.find(token);
            if (!id) {
                L.fail("model.merges[" + std::to_string(rank) + "] names token \"" + std::string(token) +
                       "\" which is not in the vocab");
            }
            return *id;
        };
        const token_id left_id = find(left), right_id = find(right);
        joined.assign(left).append(right);
        const token_id new_id = find(joined);
        // Like HF (a HashMap built in order), a repeated pair keeps its last rank.
        model.merges.insert_or_assign(tok::BpeModel::pair_key(left_id, right_id),
                                      tok::Merge{static_cast<uint32_t>(rank), new_id});
    }
}

void load_added_tokens(const Loader& L, const json& root, Tokenizer::Impl& impl) {
    auto it = root.find("added_tokens");
    if (it == root.end() || it->is_null()) return;
    if (!it->is_array()) L.fail("added_tokens must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
        const json& t = (*it)[i];
        const std::string where = "added_tokens[" + std::to_string(i) + "]";
        if (!t.is_object()) L.fail(where + " must be an object");
        AddedToken added;
        added.id = L.check_id(L.int_field(t, "id", where), where);
        added.content = L.string_field(t, "content", where);
        if (added.content.empty()) L.fail(where + ".content is empty");
        added.special = L.bool_field(t, "special", where, false);
        added.lstrip = L.bool_field(t, "lstrip", where, false);
        added.rstrip = L.bool_field(t, "rstrip", where, false);
        added.single_word = L.bool_field(t, "single_word", where, false);
        added.normalized = L.bool_field(t, "normalized", where, !added.special);
        // HF gives an added token that is already a vocab entry the vocab's id (and only warns when
        // the file says otherwise), so the same is done here.
        if (auto v = impl.model.vocab.find(added.content)) added.id = *v;
        if (impl.added_by_id.count(added.id)) L.fail(where + ": id " + std::to_string(added.id) + " is listed twice");
        impl.added_by_id.emplace(added.id, impl.added_tokens.size());
        impl.added_tokens.push_back(std::move(added));
    }
}

void build_matcher(Tokenizer::Impl::Matcher& matcher) {
    for (auto& bucket : matcher.by_first_byte) {
        std::stable_sort(bucket.begin(), bucket.end(), [&](size_t a, size_t b) {
            return matcher.patterns[a].size() > matcher.patterns[b].size();
        });
    }
}

void add_pattern(Tokenizer::Impl::Matcher& matcher, std::string pattern, size_t token_index) {
    if (pattern.empty()) return;
    for (const std::string& p : matcher.patterns) {
        if (p == pattern) return;  // the first token with this text wins, as in HF's trie
    }
    matcher.by_first_byte[static_cast<unsigned char>(pattern[0])].push_back(matcher.patterns.size());
    matcher.patterns.push_back(std::move(pattern));
    matcher.token_index.push_back(token_index);
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path.string() + ": cannot open the tokenizer file");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) throw std::runtime_error(path.string() + ": cannot read the tokenizer file");
    return from_json(buffer.str(), path.string());
}

Tokenizer Tokenizer::from_json(std::string_view json_text, std::string source_name) {
    const Loader L(source_name);
    tok::TokenizerJson file = tok::read_tokenizer_json(json_text, source_name, k_max_json_depth);
    const json& root = file.root;
    if (!root.is_object()) L.fail("the top level must be a JSON object");

    auto impl = std::make_shared<Impl>();
    impl->source_name = source_name;
    // Numbers come from the file and may not fit the requested type; nlohmann throws then.
    try {
        load_model(L, L.require(root, "model", "tokenizer"), file, impl->model);
        load_normalizer(L, root.value("normalizer", json()), "normalizer", impl->normalizer);
        load_pre_tokenizer(L, root.value("pre_tokenizer", json()), "pre_tokenizer", impl->pre_tokenizer);
        load_post_processor(L, root.value("post_processor", json()), "post_processor", *impl);
        if (const json decoder = root.value("decoder", json()); !decoder.is_null()) {
            load_decoder(L, decoder, "decoder", impl->decoder);
            impl->has_decoder = true;
        }
        load_added_tokens(L, root, *impl);
    } catch (const json::exception& e) {
        L.fail(std::string("malformed field: ") + e.what());
    }
    // truncation / padding are ignored on purpose: transformers turns them off unless a call asks
    // for them, and the engine never does.

    // Added tokens matched on the raw text, and those matched on the normalized text (HF keeps the
    // two tries apart so a normalizer never mangles a special token's text).
    for (size_t i = 0; i < impl->added_tokens.size(); ++i) {
        const AddedToken& t = impl->added_tokens[i];
        if (t.normalized) {
            impl->added_decode_text.push_back(impl->normalize(t.content));
            add_pattern(impl->normalized_matcher, impl->added_decode_text.back(), i);
        } else {
            impl->added_decode_text.push_back(t.content);
            add_pattern(impl->raw_matcher, t.content, i);
        }
        if (t.special) impl->special_contents.insert(t.content);
    }
    build_matcher(impl->raw_matcher);
    build_matcher(impl->normalized_matcher);

    size_t vocab_size = impl->model.id_to_key.size();
    for (const AddedToken& t : impl->added_tokens) vocab_size = std::max(vocab_size, static_cast<size_t>(t.id) + 1);
    impl->vocab_size = vocab_size;

    for (const tok::TemplatePiece& piece : impl->template_single) {
        if (!piece.is_sequence && !piece.ids.empty()) impl->bos_id = piece.ids.front();
        break;  // only a special token before $A is a BOS
    }
    if (!impl->bos_id) {
        for (const AddedToken& t : impl->added_tokens) {
            if (t.content == "<s>" || t.content == "<|begin_of_text|>" || t.content == "<bos>") impl->bos_id = t.id;
        }
    }
    bool byte_level = false;
    for (const auto& step : impl->pre_tokenizer) byte_level |= step.kind == tok::PreTokenizerStep::Kind::byte_level;
    for (const auto& step : impl->decoder) byte_level |= step.kind == tok::DecoderStep::Kind::byte_level;
    impl->model_kind = byte_level ? "byte_level_bpe" : "sentencepiece_bpe";
    return Tokenizer(std::move(impl));
}

size_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<token_id> Tokenizer::token_to_id(std::string_view token) const {
    for (const AddedToken& t : impl_->added_tokens) {
        if (t.content == token) return t.id;
    }
    return impl_->model.vocab.find(token);
}

std::string Tokenizer::id_to_token(token_id id) const {
    if (auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end()) {
        return impl_->added_decode_text[it->second];
    }
    const auto& model = impl_->model;
    if (const std::string* token = model.token_of(id)) return *token;
    throw std::runtime_error(impl_->source_name + ": token id " + std::to_string(id) + " is not in the vocabulary");
}

bool Tokenizer::is_special(token_id id) const {
    auto it = impl_->added_by_id.find(id);
    return it != impl_->added_by_id.end() && impl_->added_tokens[it->second].special;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added_tokens; }
std::optional<token_id> Tokenizer::bos_id() const { return impl_->bos_id; }
std::string_view Tokenizer::model_kind() const { return impl_->model_kind; }
const std::string& Tokenizer::source_name() const { return impl_->source_name; }

}  // namespace cc
