#include "core/engine/nope.h"

#include "core/base/json_text.h"
#include "core/base/kernel_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace cc {

NopeLayout nope_layout(const Tokenizer& tokenizer, std::span<const token_id> prefix_ids, const std::string& prefix_text,
                       const ToolSet& tools, const std::string& format_id) {
    const std::string what = "per_tool_nope (" + format_id + " format): ";
    if (tools.empty()) throw std::runtime_error(what + "the tool set is empty: there is nothing to compile per tool");

    // byte offset where each token ends; a boundary is exact when it is 0 or one of these
    std::vector<size_t> token_end;
    size_t offset = 0;
    for (const token_id id : prefix_ids) {
        offset += tokenizer.decode(std::span<const token_id>(&id, 1)).size();
        token_end.push_back(offset);
    }
    if (offset != prefix_text.size())
        throw std::runtime_error(what + "the prefix tokens decode to " + std::to_string(offset) + " bytes, the prefix text has " +
                                 std::to_string(prefix_text.size()) + ": token spans cannot be located");
    auto token_at = [&](size_t byte, const std::string& where) -> size_t {
        if (byte == 0) return 0;
        const auto it = std::lower_bound(token_end.begin(), token_end.end(), byte);
        if (it == token_end.end() || *it != byte)
            throw std::runtime_error(what + where + " does not fall between two tokens (a token straddles it), so a "
                                     "per-tool compile could not see the tokens the full prompt has");
        return size_t(it - token_end.begin()) + 1;
    };

    std::vector<size_t> start_byte;  // where each tool's text begins
    size_t from = 0, last_end = 0;
    for (const auto& tool : tools.tools()) {
        size_t at = std::string::npos, len = 0;
        for (const std::string& candidate : {tool.canonical_text, py_json_dumps(tool.schema, 4)}) {
            at = prefix_text.find(candidate, from);
            if (at != std::string::npos) {
                len = candidate.size();
                break;
            }
        }
        if (at == std::string::npos)
            throw std::runtime_error(what + "tool \"" + tool.name + "\": its JSON text is not in the rendered prefix");
        start_byte.push_back(at);
        last_end = at + len;
        from = last_end;
    }
    while (last_end < prefix_text.size() && prefix_text[last_end] == '\n') ++last_end;

    NopeLayout out;
    const auto& list = tools.tools();
    out.header_tokens = token_at(start_byte[0], "the start of tool \"" + list[0].name + "\"");
    for (size_t i = 0; i < list.size(); ++i) {
        const size_t b = token_at(start_byte[i], "the start of tool \"" + list[i].name + "\"");
        const size_t e = i + 1 < list.size() ? token_at(start_byte[i + 1], "the start of tool \"" + list[i + 1].name + "\"")
                                             : token_at(last_end, "the end of the last tool \"" + list[i].name + "\"");
        if (e <= b) throw std::runtime_error(what + "tool \"" + list[i].name + "\" has no tokens of its own");
        out.tool_begin.push_back(b);
        out.tool_tokens.push_back(e - b);
    }
    out.footer_begin = out.tool_begin.back() + out.tool_tokens.back();
    out.footer_tokens = prefix_ids.size() - out.footer_begin;
    return out;
}

size_t KvImageShape::bytes(int n_tokens) const {
    return size_t(n_layers) * 2 * size_t(n_kv_heads) * size_t(n_tokens) * size_t(head_dim) * elem_bytes;
}

std::vector<std::byte> kv_image_slice(std::span<const std::byte> image, int n_tokens, int first, int count,
                                      const KvImageShape& shape) {
    if (image.size() != shape.bytes(n_tokens))
        throw std::invalid_argument("kv_image_slice: the image is " + std::to_string(image.size()) + " bytes, expected " +
                                    std::to_string(shape.bytes(n_tokens)));
    if (first < 0 || count < 0 || first + count > n_tokens)
        throw std::invalid_argument("kv_image_slice: positions [" + std::to_string(first) + ", " + std::to_string(first + count) +
                                    ") are outside [0, " + std::to_string(n_tokens) + ")");
    const size_t row = size_t(shape.head_dim) * shape.elem_bytes;
    std::vector<std::byte> out(shape.bytes(count));
    std::byte* dst = out.data();
    // parts: (layer, K|V, head), each n_tokens rows in the image
    const size_t n_parts = size_t(shape.n_layers) * 2 * size_t(shape.n_kv_heads);
    for (size_t p = 0; p < n_parts; ++p) {
        std::memcpy(dst, image.data() + (p * size_t(n_tokens) + size_t(first)) * row, size_t(count) * row);
        dst += size_t(count) * row;
    }
    return out;
}

std::vector<std::byte> kv_image_concat(std::span<const std::vector<std::byte>> images, std::span<const int> n_tokens,
                                       const KvImageShape& shape) {
    if (images.size() != n_tokens.size()) throw std::invalid_argument("kv_image_concat: one token count per image");
    int total = 0;
    for (size_t i = 0; i < images.size(); ++i) {
        if (images[i].size() != shape.bytes(n_tokens[i]))
            throw std::invalid_argument("kv_image_concat: image " + std::to_string(i) + " is " + std::to_string(images[i].size()) +
                                        " bytes, expected " + std::to_string(shape.bytes(n_tokens[i])));
        total += n_tokens[i];
    }
    const size_t row = size_t(shape.head_dim) * shape.elem_bytes;
    std::vector<std::byte> out(shape.bytes(total));
    std::byte* dst = out.data();
    const size_t n_parts = size_t(shape.n_layers) * 2 * size_t(shape.n_kv_heads);
    for (size_t p = 0; p < n_parts; ++p)
        for (size_t i = 0; i < images.size(); ++i) {
            const size_t n = size_t(n_tokens[i]) * row;
            std::memcpy(dst, images[i].data() + p * n, n);
            dst += n;
        }
    return out;
}

std::vector<double> kv_image_max_abs_diff_per_layer(std::span<const std::byte> a, std::span<const std::byte> b,
                                                    int n_tokens, const KvImageShape& shape, bool bf16) {
    if (a.size() != shape.bytes(n_tokens) || b.size() != shape.bytes(n_tokens))
        throw std::invalid_argument("kv_image_max_abs_diff_per_layer: the images are not " +
                                    std::to_string(shape.bytes(n_tokens)) + " bytes each");
    const size_t layer_elems = 2 * size_t(shape.n_kv_heads) * size_t(n_tokens) * size_t(shape.head_dim);
    auto at = [&](std::span<const std::byte> img, size_t i) -> double {
        if (bf16) {
            uint16_t h;
            std::memcpy(&h, img.data() + 2 * i, 2);
            return km::bf16_to_f32(h);
        }
        float f;
        std::memcpy(&f, img.data() + 4 * i, 4);
        return f;
    };
    std::vector<double> out(size_t(shape.n_layers), 0.0);
    for (int l = 0; l < shape.n_layers; ++l)
        for (size_t i = size_t(l) * layer_elems; i < size_t(l + 1) * layer_elems; ++i) {
            const double d = std::abs(at(a, i) - at(b, i));
            // NaN compares false: count it as an infinite difference rather than none
            out[size_t(l)] = std::isnan(d) ? INFINITY : std::max(out[size_t(l)], d);
        }
    return out;
}

std::string nope_report_text(const NopeReport& r) {
    std::ostringstream o;
    o << "per-tool NoPE (experiment, paper 3.2-3.3): " << r.n_tools << " tools compiled alone and composed with deferred RoPE\n"
      << "  layout: header " << r.header_tokens << " + tools";
    for (size_t i = 0; i < r.tool_tokens.size(); ++i) o << (i ? "," : " ") << r.tool_tokens[i];
    o << " = " << r.composed_tokens << " composed tokens; footer " << r.footer_tokens << " tokens prefilled with the query; kv "
      << r.kv_dtype << (r.reused ? "; composition reused" : "") << "\n"
      << "  RoPE check (deferred vs standard rotation, every per-tool compile): max |diff| " << r.rope_check_max_abs_diff
      << " across " << r.rope_check_per_layer.size() << " layers\n"
      << "  vs full prefill: first token: logit cosine " << r.logit_cosine_first << ", KL(full || nope) " << r.kl_first
      << " nats; over the full run's " << r.compared_steps << " steps (teacher-forced): mean cosine " << r.logit_cosine_mean
      << ", top-1 agreement " << r.top1_agreement << "\n"
      << "  output: " << (r.identical_tokens ? "identical tokens" : "different tokens")
      << (r.identical_logits ? " and bit-identical logits" : "");
    if (r.first_difference) o << ", first difference at generated token " << *r.first_difference;
    o << ", max |d logit| " << r.max_abs_logit_diff << "; same tool called: " << (r.tool_name_match ? "yes" : "no") << "\n";
    return o.str();
}

}  // namespace cc
