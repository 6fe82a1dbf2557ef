#include "core/research/nope.h"

#include "core/backend/deferred_rope.h"
#include "core/engine/compare.h"
#include "core/engine/logit_metrics.h"
#include "core/base/json_text.h"
#include "core/base/kernel_math.h"

#include <algorithm>
#include <numeric>
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
    const std::vector<size_t> token_end = tokenizer.token_end_offsets(prefix_ids);
    const size_t offset = token_end.empty() ? 0 : token_end.back();
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

nlohmann::ordered_json to_json(const NopeReport& n) {
    using nlohmann::ordered_json;
    // NaN (a cosine with an all-zero logit vector) has no JSON form: null
    auto num = [](double x) { return std::isfinite(x) ? ordered_json(x) : ordered_json(nullptr); };
    return ordered_json{{"n_tools", n.n_tools},
                        {"header_tokens", n.header_tokens},
                        {"tool_tokens", n.tool_tokens},
                        {"footer_tokens", n.footer_tokens},
                        {"composed_tokens", n.composed_tokens},
                        {"kv_dtype", n.kv_dtype},
                        {"rope_check_max_abs_diff", num(n.rope_check_max_abs_diff)},
                        {"rope_check_per_layer", n.rope_check_per_layer},
                        {"logit_cosine_first", num(n.logit_cosine_first)},
                        {"logit_cosine_mean", num(n.logit_cosine_mean)},
                        {"kl_first", num(n.kl_first)},
                        {"compared_steps", n.compared_steps},
                        {"top1_agreement", n.top1_agreement},
                        {"identical_tokens", n.identical_tokens},
                        {"identical_logits", n.identical_logits},
                        {"max_abs_logit_diff", n.max_abs_logit_diff},
                        {"first_difference", n.first_difference ? ordered_json(*n.first_difference) : ordered_json(nullptr)},
                        {"tool_name_match", n.tool_name_match},
                        {"build_ms", n.build_ms},
                        {"reused", n.reused}};
}

// The composed prefix of one tool set on one backend, kept while both stay.
struct NopeExperiment::State {
    std::string group_key;
    const Backend* backend = nullptr;
    NopeLayout layout;
    std::unique_ptr<KvBlock> composed;      // header + every tool span, deferred RoPE applied
    int composed_tokens = 0;
    std::vector<double> rope_check_per_layer;
    double build_ms = 0;
};

NopeExperiment::NopeExperiment() = default;
NopeExperiment::~NopeExperiment() = default;

// What is computed, for prefix ids P laid out as header | tool_0 .. tool_{n-1} | footer:
//   header: P[header], a plain forward from position 0 (rotated K, as in any prefill).
//   tool i: P[tool i] forwarded after the header alone (positions H .. H + L_i - 1), capturing its
//           K before RoPE and its V: it attends to the header and itself, never to other tools.
//   composed image: header K/V, then the tools' K/V one after the other, their K rotated at the
//           positions H + L_0 + ... + L_{i-1} + t they have in the full prompt.
// The query then prefills P[footer] + suffix ids against the composed block (positions continue
// from H + sum L_i), so the token sequence is exactly the full prompt's; only the tools' K/V
// differ. With one tool the composition is the full prompt's prefix K/V bit for bit (f32 KV).
std::unique_ptr<NopeExperiment::State> NopeExperiment::build(Engine& engine) {
    Stopwatch clock;
    const Engine::PrefixRef prefix = engine.current_prefix();
    Backend& be = engine.backend();
    DeferredRope& rope = require_deferred_rope(be);
    const std::atomic<bool>* cancel = &engine.cancel_flag();
    auto state = std::make_unique<State>();
    state->group_key = prefix.compile.group_key;
    state->backend = &be;
    state->layout = nope_layout(engine.tokenizer(), prefix.ids, prefix.text, prefix.tools, engine.model_info().chat_format);
    const NopeLayout& lay = state->layout;
    const ModelConfig& c = be.config();
    const bool bf16 = be.kv_dtype() == KvDType::bf16;
    const KvImageShape shape{c.n_layers, c.n_kv_heads, c.head_dim, size_t(bf16 ? 2 : 4)};
    const std::span<const token_id> ids = prefix.ids;
    const int H = int(lay.header_tokens);
    const size_t n_tools = lay.tool_tokens.size();

    auto header = be.allocate_kv(H);
    be.forward(ids.first(size_t(H)), KvView{nullptr, 0, header.get()}, {}, cancel);
    std::vector<std::vector<std::byte>> parts;  // header image, then each tool's pre-RoPE image
    std::vector<int> part_tokens;
    parts.emplace_back(be.kv_bytes(H));
    be.export_kv(*header, H, parts.back());
    part_tokens.push_back(H);
    state->rope_check_per_layer.assign(size_t(c.n_layers), 0.0);

    for (size_t i = 0; i < n_tools; ++i) {
        const int L = int(lay.tool_tokens[i]);
        auto rotated = be.allocate_kv(L);
        auto unrotated = be.allocate_kv(L);
        rope.forward_capture_unrotated(ids.subspan(lay.tool_begin[i], size_t(L)), KvView{header.get(), H, rotated.get()}, {},
                                       *unrotated, cancel);
        std::vector<std::byte> rot(be.kv_bytes(L)), unrot(be.kv_bytes(L));
        be.export_kv(*rotated, L, rot);
        be.export_kv(*unrotated, L, unrot);

        // RoPE algebra check: deferred rotation at the positions of this forward must give its keys.
        std::vector<std::byte> check = unrot;
        std::vector<int> positions(static_cast<size_t>(L));
        std::iota(positions.begin(), positions.end(), H);
        rope.rope_rotate_kv(check, L, positions);
        const auto diff = kv_image_max_abs_diff_per_layer(check, rot, L, shape, bf16);
        for (size_t l = 0; l < diff.size(); ++l)
            state->rope_check_per_layer[l] = std::max(state->rope_check_per_layer[l], diff[l]);

        parts.push_back(std::move(unrot));
        part_tokens.push_back(L);
        engine.report_progress(EngineProgress{"nope_compile", i + 1, n_tools});
    }

    // Compose: rotate every tool's pre-RoPE keys at its composed positions, header first.
    const int T = std::accumulate(part_tokens.begin() + 1, part_tokens.end(), 0);
    std::vector<std::byte> tools_image = kv_image_concat(std::span(parts).subspan(1), std::span(part_tokens).subspan(1), shape);
    std::vector<int> positions(static_cast<size_t>(T));
    std::iota(positions.begin(), positions.end(), H);
    rope.rope_rotate_kv(tools_image, T, positions);
    const std::vector<std::vector<std::byte>> halves{std::move(parts[0]), std::move(tools_image)};
    const std::vector<int> half_tokens{H, T};
    const auto composed = kv_image_concat(halves, half_tokens, shape);
    state->composed_tokens = H + T;
    state->composed = be.import_kv(composed, H + T, H + T);
    state->build_ms = clock.elapsed_ms();
    return state;
}

NopeRun NopeExperiment::run(Engine& engine, const std::string& query, const QueryOptions& options,
                            const std::function<void(const TokenEvent&)>& on_token) {
    QueryOptions opts = options;
    opts.keep_logits = true;  // every step's logits, for the comparison
    NopeRun out;
    // The reference first (as compare mode does).
    opts.mode = QueryMode::full;
    out.full = engine.query(query, opts, {});
    if (out.full.stop_reason == StopReason::cancelled) throw Cancelled();

    Stopwatch submit;
    Stopwatch tokenize_clock;
    const std::vector<token_id> suffix_ids = engine.query_suffix_ids(query);
    const double tokenize_ms = tokenize_clock.elapsed_ms();

    NopeReport& report = out.report;
    const Engine::PrefixRef prefix = engine.current_prefix();
    if (state_ && state_->group_key == prefix.compile.group_key && state_->backend == &engine.backend()) {
        report.reused = true;
    } else {
        state_.reset();
        state_ = build(engine);
        report.build_ms = state_->build_ms;
    }
    const State& st = *state_;

    // footer + query, prefilled against the composed header + tools
    std::vector<token_id> ids(prefix.ids.begin() + std::ptrdiff_t(st.layout.footer_begin), prefix.ids.end());
    ids.insert(ids.end(), suffix_ids.begin(), suffix_ids.end());
    Backend& be = engine.backend();
    auto suffix_block = be.allocate_kv(int(ids.size()) + options.max_new_tokens);
    out.composed = engine.continue_from(ids, KvView{st.composed.get(), st.composed_tokens, suffix_block.get()}, opts, on_token,
                                        submit);
    out.composed.mode = "per_tool_nope";
    out.composed.timings.tokenize_ms = tokenize_ms;
    out.composed.group_key = prefix.compile.group_key;
    out.composed.prefix_tokens = size_t(st.composed_tokens);
    out.composed.suffix_tokens = ids.size();

    // ---- the report
    report.n_tools = st.layout.tool_tokens.size();
    report.header_tokens = st.layout.header_tokens;
    report.tool_tokens = st.layout.tool_tokens;
    report.footer_tokens = st.layout.footer_tokens;
    report.composed_tokens = size_t(st.composed_tokens);
    report.kv_dtype = kv_dtype_name(be.kv_dtype());
    report.rope_check_per_layer = st.rope_check_per_layer;
    for (double d : st.rope_check_per_layer) report.rope_check_max_abs_diff = std::max(report.rope_check_max_abs_diff, d);

    // free-running outputs: compared while both runs condition on the same tokens
    const QueryResult& full = out.full;
    const QueryResult& result = out.composed;
    const StepDiff diff = compare_steps(full, result);
    report.identical_logits = diff.identical;
    report.max_abs_logit_diff = diff.max_abs_logit_diff;
    report.first_difference = diff.first_difference;
    if (!full.step_logits.empty() && !result.step_logits.empty()) {
        report.logit_cosine_first = cosine_similarity(full.step_logits[0], result.step_logits[0]);
        report.kl_first = kl_divergence(full.step_logits[0], result.step_logits[0]);
    }

    // teacher-forced: the composed prefix given the full run's tokens, one batch; row r's logits
    // are those a decode step would compute (a row's result does not depend on the batching).
    const size_t n_full = full.step_logits.size();
    if (result.stop_reason != StopReason::cancelled && n_full > 0) {
        std::vector<token_id> forced_ids = ids;
        forced_ids.insert(forced_ids.end(), full.tokens.begin(), full.tokens.begin() + std::ptrdiff_t(n_full - 1));
        std::vector<int> rows(n_full);
        std::iota(rows.begin(), rows.end(), int(ids.size()) - 1);
        auto block = be.allocate_kv(int(forced_ids.size()));
        try {
            const auto forced = be.forward(forced_ids, KvView{st.composed.get(), st.composed_tokens, block.get()}, rows,
                                           &engine.cancel_flag());
            const size_t V = full.step_logits[0].size();
            double cos_sum = 0;
            size_t agree = 0;
            for (size_t i = 0; i < n_full; ++i) {
                const std::span<const float> got(forced.data() + i * V, V);
                cos_sum += cosine_similarity(full.step_logits[i], got);
                if (top1(full.step_logits[i]) == top1(got)) ++agree;
            }
            report.compared_steps = n_full;
            report.logit_cosine_mean = cos_sum / double(n_full);
            report.top1_agreement = double(agree) / double(n_full);
        } catch (const Cancelled&) {
            // cancelled while comparing: the first-position metrics stand, no step metrics
        }
    }
    report.identical_tokens = full.tokens == result.tokens;
    report.tool_name_match = full.tool_call.has_value() == result.tool_call.has_value() &&
                             (!full.tool_call || full.tool_call->name == result.tool_call->name);
    if (!options.keep_logits) {
        out.full.step_logits.clear();
        out.composed.step_logits.clear();
    }
    return out;
}

}  // namespace cc
