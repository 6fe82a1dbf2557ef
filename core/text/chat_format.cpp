// Shared machinery of the chat formats: piece tokenization, the exact prefix/suffix split,
// format selection, and the tolerant JSON tool-call reader.
#include "core/text/chat_format.h"

#include "core/text/chat_format_detail.h"

#include <algorithm>
#include <stdexcept>

namespace cc {

std::vector<token_id> RenderedPrompt::full_ids() const {
    std::vector<token_id> ids;
    ids.reserve(prefix_ids.size() + suffix_ids.size());
    ids.insert(ids.end(), prefix_ids.begin(), prefix_ids.end());
    ids.insert(ids.end(), suffix_ids.begin(), suffix_ids.end());
    return ids;
}

std::unique_ptr<ChatFormat> make_chat_format(std::string_view id) {
    if (id == "qwen3") return chat_detail::make_qwen3_format();
    if (id == "qwen2.5") return chat_detail::make_qwen25_format();
    if (id == "llama3") return chat_detail::make_llama3_format();
    if (id == "mistral") return chat_detail::make_mistral_format();
    if (id == "plain") return chat_detail::make_plain_format();
    throw std::runtime_error("unknown chat format \"" + std::string(id) +
                             "\" (known: qwen3, qwen2.5, llama3, mistral, plain)");
}

namespace {

bool has_token(const Tokenizer& tokenizer, std::string_view token) {
    return tokenizer.token_to_id(token).has_value();
}

std::string missing_tokens(const Tokenizer& tokenizer, std::initializer_list<std::string_view> tokens) {
    std::string missing;
    for (auto token : tokens) {
        if (has_token(tokenizer, token)) continue;
        if (!missing.empty()) missing += ", ";
        missing += token;
    }
    return missing;
}

// model_type as written, or derived from the first architecture when model_type is absent.
std::string model_family(const nlohmann::json& config) {
    if (config.is_object()) {
        auto it = config.find("model_type");
        if (it != config.end() && it->is_string()) return it->get<std::string>();
        auto arch = config.find("architectures");
        if (arch != config.end() && arch->is_array()) {
            for (const auto& a : *arch) {
                if (!a.is_string()) continue;
                const auto name = a.get<std::string>();
                if (name == "Qwen3ForCausalLM") return "qwen3";
                if (name == "Qwen2ForCausalLM") return "qwen2";
                if (name == "LlamaForCausalLM") return "llama";
                if (name == "MistralForCausalLM") return "mistral";
            }
        }
    }
    return {};
}

}  // namespace

std::string choose_chat_format(const nlohmann::json& config, const Tokenizer& tokenizer,
                               const std::string& source) {
    const std::string family = model_family(config);
    const std::string what = source + ": model_type \"" + family + "\"";
    if (family == "qwen3") {
        auto missing = missing_tokens(tokenizer, {"<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                                                  "<think>", "</think>"});
        if (!missing.empty())
            throw std::runtime_error(what + ": the Qwen3 chat format needs tokens the tokenizer " +
                                     tokenizer.source_name() + " lacks: " + missing);
        return "qwen3";
    }
    if (family == "qwen2") {
        // Qwen2.5 (model_type qwen2): ChatML with the <tool_call> tokens. Qwen2 (no <tool_call>
        // tokens, no tools in its template) is refused by the missing tokens.
        auto missing = missing_tokens(tokenizer, {"<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"});
        if (!missing.empty())
            throw std::runtime_error(what + ": the Qwen2.5 chat format needs tokens the tokenizer " +
                                     tokenizer.source_name() + " lacks: " + missing);
        return "qwen2.5";
    }
    if (family == "llama" || family == "mistral") {
        if (family == "llama" && has_token(tokenizer, "<|start_header_id|>")) {
            auto missing = missing_tokens(tokenizer, {"<|begin_of_text|>", "<|end_header_id|>", "<|eot_id|>"});
            if (!missing.empty())
                throw std::runtime_error(what + ": the Llama 3 chat format needs tokens the tokenizer " +
                                         tokenizer.source_name() + " lacks: " + missing);
            return "llama3";
        }
        if (has_token(tokenizer, "[INST]")) {
            auto missing = missing_tokens(tokenizer, {"[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "<s>"});
            if (!missing.empty())
                throw std::runtime_error(what + ": [INST] is a token but the Mistral v3 tool format needs " +
                                         "tokens the tokenizer " + tokenizer.source_name() + " lacks: " + missing);
            return "mistral";
        }
        // A base model without chat tokens: the plain text format.
        return "plain";
    }
    if (family.empty())
        throw std::runtime_error(source + ": neither model_type nor a known architecture is given; "
                                          "cannot choose a chat format");
    throw std::runtime_error(what + " has no chat format (known: qwen2, qwen3, llama, mistral)");
}

std::vector<token_id> tokenize_pieces(const Tokenizer& tokenizer, std::span<const Piece> pieces) {
    std::vector<token_id> ids;
    std::string run;
    bool in_run = false;
    auto flush = [&] {
        if (!in_run) return;
        auto run_ids = tokenizer.encode(run, EncodeMode::plain, false);
        ids.insert(ids.end(), run_ids.begin(), run_ids.end());
        run.clear();
        in_run = false;
    };
    for (const auto& piece : pieces) {
        switch (piece.kind) {
        case Piece::Kind::text:
            run += piece.text;
            in_run = true;
            break;
        case Piece::Kind::special: {
            flush();
            auto id = tokenizer.token_to_id(piece.text);
            if (!id)
                throw std::runtime_error(tokenizer.source_name() + ": the chat format needs the token \"" +
                                         piece.text + "\", which this tokenizer does not have");
            ids.push_back(*id);
            break;
        }
        case Piece::Kind::bos:
            flush();
            if (auto bos = tokenizer.bos_id()) ids.push_back(*bos);
            break;
        }
    }
    flush();
    return ids;
}

std::string pieces_text(std::span<const Piece> pieces, const Tokenizer* tokenizer) {
    std::string out;
    for (const auto& piece : pieces) {
        if (piece.kind != Piece::Kind::bos) {
            out += piece.text;
        } else if (tokenizer != nullptr) {
            if (auto bos = tokenizer->bos_id()) out += tokenizer->id_to_token(*bos);
        }
    }
    return out;
}

std::vector<token_id> tokenize_suffix(const ChatFormat& format, const Tokenizer& tokenizer,
                                      std::span<const Piece> prefix, std::span<const token_id> prefix_ids,
                                      std::span<const Piece> suffix) {
    const bool split_in_text_run = !prefix.empty() && !suffix.empty() && prefix.back().kind == Piece::Kind::text &&
                                   suffix.front().kind == Piece::Kind::text;
    // A special (or bos) piece on either side ends the text run, so the halves tokenize apart.
    if (!split_in_text_run) return tokenize_pieces(tokenizer, suffix);

    // The boundary lies inside one text run: the full prompt's ids are those of the joined run.
    // Take the suffix from them, and refuse when the prefix's own ids are not their beginning
    // (a token would straddle the boundary, so no cached prefix can be exact).
    std::vector<Piece> all(prefix.begin(), prefix.end());
    all.insert(all.end(), suffix.begin(), suffix.end());
    auto full = tokenize_pieces(tokenizer, all);
    if (full.size() < prefix_ids.size() || !std::equal(prefix_ids.begin(), prefix_ids.end(), full.begin()))
        throw std::runtime_error(tokenizer.source_name() + ": chat format \"" + std::string(format.id()) +
                                 "\": a token straddles the prefix/suffix boundary for this prompt, so the "
                                 "prefix cannot be cached exactly");
    return {full.begin() + static_cast<std::ptrdiff_t>(prefix_ids.size()), full.end()};
}

RenderedPrefix render_prefix(const ChatFormat& format, const Tokenizer& tokenizer, const ToolSet& tools,
                             std::string_view system_prompt) {
    RenderedPrefix out;
    out.pieces = format.prefix_pieces(tools, system_prompt);
    out.ids = tokenize_pieces(tokenizer, out.pieces);
    out.text = pieces_text(out.pieces, &tokenizer);
    return out;
}

RenderedPrompt render_prompt(const ChatFormat& format, const Tokenizer& tokenizer, const ToolSet& tools,
                             std::string_view system_prompt, std::string_view query) {
    RenderedPrefix prefix = render_prefix(format, tokenizer, tools, system_prompt);
    const auto suffix = format.suffix_pieces(query, system_prompt);
    RenderedPrompt out;
    out.suffix_text = pieces_text(suffix, &tokenizer);
    out.suffix_ids = tokenize_suffix(format, tokenizer, prefix.pieces, prefix.ids, suffix);
    out.prefix_text = std::move(prefix.text);
    out.prefix_ids = std::move(prefix.ids);
    return out;
}

namespace {

// Decodes one UTF-8 code point at text[i]; returns its length, or 0 for an invalid sequence.
size_t utf8_decode(std::string_view text, size_t i, char32_t& cp) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    size_t len = 0;
    if (b0 < 0x80) {
        cp = b0;
        return 1;
    }
    if ((b0 & 0xE0) == 0xC0) {
        len = 2;
        cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
        len = 3;
        cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
        len = 4;
        cp = b0 & 0x07;
    } else {
        return 0;
    }
    if (i + len > text.size()) return 0;
    for (size_t k = 1; k < len; ++k) {
        const auto b = static_cast<unsigned char>(text[i + k]);
        if ((b & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b & 0x3F);
    }
    return len;
}

// str.isspace(): the characters with bidirectional type WS, B or S, or category Zs.
bool py_isspace(char32_t cp) {
    if ((cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20)) return true;
    switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

}  // namespace

std::string_view py_strip(std::string_view text) {
    // Leading: step forward over whole whitespace code points.
    size_t begin = 0;
    while (begin < text.size()) {
        char32_t cp = 0;
        const size_t len = utf8_decode(text, begin, cp);
        if (len == 0 || !py_isspace(cp)) break;
        begin += len;
    }
    // Trailing: find the start of the last code point, test it, repeat.
    size_t end = text.size();
    while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80 && end - start < 4)
            --start;
        char32_t cp = 0;
        const size_t len = utf8_decode(text, start, cp);
        if (len != end - start || !py_isspace(cp)) break;
        end = start;
    }
    return text.substr(begin, end - begin);
}

namespace chat_detail {

std::vector<token_id> existing_ids(const Tokenizer& tokenizer, std::initializer_list<std::string_view> tokens) {
    std::vector<token_id> ids;
    for (auto token : tokens) {
        auto id = tokenizer.token_to_id(token);
        if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
    }
    return ids;
}

std::optional<size_t> balanced_json_end(std::string_view text, size_t begin) {
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (size_t i = begin; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if (c == '}' || c == ']') {
            // Mismatched bracket kinds are left for the JSON parser to reject.
            if (--depth == 0) return i + 1;
        }
    }
    return std::nullopt;
}

namespace {

constexpr int k_call_json_max_depth = 64;  // generated text is untrusted: bound the parser's recursion

std::optional<ordered_json> try_parse(std::string_view text) {
    try {
        return parse_json_text(text, "tool call", k_call_json_max_depth);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// The value of "name" read directly from the text, for calls whose JSON does not parse.
std::optional<std::string> scan_name(std::string_view text) {
    size_t pos = 0;
    while ((pos = text.find("\"name\"", pos)) != std::string_view::npos) {
        size_t i = pos + 6;
        while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
        if (i < text.size() && text[i] == ':') {
            ++i;
            while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
                ++i;
            if (i < text.size() && text[i] == '"') {
                const size_t close = text.find('"', i + 1);
                if (close == std::string_view::npos) return std::nullopt;
                std::string name(text.substr(i + 1, close - i - 1));
                if (name.empty() || name.find('\\') != std::string::npos) return std::nullopt;
                return name;
            }
        }
        pos += 6;
    }
    return std::nullopt;
}

}  // namespace

std::optional<ToolCall> call_from_object_text(std::string_view object_text, bool complete, std::string raw) {
    try {
        std::optional<ordered_json> value;
        if (complete) value = try_parse(object_text);
        if (!value || !value->is_object()) {
            auto name = scan_name(object_text);
            if (!name) return std::nullopt;
            ToolCall call;
            call.name = std::move(*name);
            call.raw = std::move(raw);
            call.arguments_valid = false;
            return call;
        }
        const ordered_json* object = &*value;
        // OpenAI style {"function": {"name", "arguments"}} is accepted as well.
        if (!object->contains("name") && object->contains("function") && (*object)["function"].is_object())
            object = &(*object)["function"];
        auto name_it = object->find("name");
        if (name_it == object->end() || !name_it->is_string() || name_it->get<std::string>().empty())
            return std::nullopt;

        ToolCall call;
        call.name = name_it->get<std::string>();
        call.raw = std::move(raw);
        auto args_it = object->find("arguments");
        if (args_it == object->end()) args_it = object->find("parameters");
        if (args_it == object->end() || args_it->is_null()) return call;  // no arguments given
        if (args_it->is_object()) {
            call.arguments = *args_it;
        } else if (args_it->is_string()) {
            // Some models write the arguments as a JSON string, as the OpenAI API does.
            auto parsed = try_parse(args_it->get<std::string>());
            if (parsed && parsed->is_object()) call.arguments = std::move(*parsed);
            else call.arguments_valid = false;
        } else {
            call.arguments_valid = false;
        }
        return call;
    } catch (const std::exception&) {
        // parse_tool_call must never throw (e.g. on allocation failure or odd UTF-8 in the JSON).
        return std::nullopt;
    }
}

std::optional<ToolCall> first_object_call(std::string_view text, size_t from, size_t raw_begin) {
    const size_t brace = text.find('{', from);
    if (brace == std::string_view::npos) return std::nullopt;
    const auto end = balanced_json_end(text, brace);
    const size_t object_end = end ? *end : text.size();
    return call_from_object_text(text.substr(brace, object_end - brace), end.has_value(),
                                 std::string(text.substr(raw_begin, object_end - raw_begin)));
}

}  // namespace chat_detail
}  // namespace cc

namespace cc::chat_detail {

ConversationView conversation_view(std::string_view system_prompt, std::span<const ChatMessage> messages) {
    size_t first_index = 0;
    if (system_prompt.empty() && !messages.empty() && messages.front().role == ChatMessage::Role::system) {
        system_prompt = messages.front().content;
        messages = messages.subspan(1);
        first_index = 1;
    }
    if (messages.empty())
        throw std::invalid_argument("messages: a conversation needs at least one message after the system prompt");
    return {system_prompt, messages, first_index};
}

std::string_view lstrip_chars(std::string_view text, std::string_view chars) {
    const size_t begin = text.find_first_not_of(chars);
    return begin == std::string_view::npos ? std::string_view{} : text.substr(begin);
}

std::string_view rstrip_chars(std::string_view text, std::string_view chars) {
    const size_t last = text.find_last_not_of(chars);
    return last == std::string_view::npos ? std::string_view{} : text.substr(0, last + 1);
}

std::string_view strip_chars(std::string_view text, std::string_view chars) {
    return rstrip_chars(lstrip_chars(text, chars), chars);
}

size_t utf8_length(std::string_view text) {
    size_t n = 0;
    for (const char c : text)
        if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
    return n;
}

std::string message_path(size_t index) {
    return "messages[" + std::to_string(index) + "]";
}

ChatToolCall chat_call(const ToolCall& call) {
    ChatToolCall out;
    out.name = call.name;
    out.arguments = call.arguments;
    return out;
}

std::string text_outside(std::string_view text, std::string_view markup) {
    const size_t at = text.find(markup);
    if (at == std::string_view::npos) return std::string(py_strip(text));
    std::string rest(text.substr(0, at));
    rest += text.substr(at + markup.size());
    return std::string(py_strip(rest));
}

ParsedReply single_call_reply(const ChatFormat& format, std::string_view text) {
    ParsedReply reply;
    if (auto call = format.parse_tool_call(text)) {
        reply.tool_calls_valid = call->arguments_valid;
        reply.tool_calls.push_back(chat_call(*call));
        reply.content = text_outside(text, call->raw);
    } else {
        reply.content = std::string(py_strip(text));
    }
    return reply;
}

}  // namespace cc::chat_detail
