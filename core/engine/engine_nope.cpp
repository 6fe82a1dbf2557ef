// The per-tool NoPE experiment (paper §3.2–3.3, core/nope.h): Engine::query with
// QueryMode::per_tool_nope. Kept apart from engine.cpp: it is a measurement, not a product path.
#include "core/engine/engine.h"

#include "core/engine/logit_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

namespace cc {

// The composed prefix of the current tool set, kept while the tool set stays (same group_key).
struct Engine::NopeState {
    std::string group_key;
    NopeLayout layout;
    std::unique_ptr<KvBlock> composed;      // header + every tool span, deferred RoPE applied
    int composed_tokens = 0;
    std::vector<double> rope_check_per_layer;
    double build_ms = 0;
};

// What is computed, for prefix ids P laid out as header | tool_0 .. tool_{n-1} | footer:
//   header: P[header], a plain forward from position 0 (rotated K, as in any prefill).
//   tool i: P[tool i] forwarded after the header alone (positions H .. H + L_i - 1), capturing its
//           K before RoPE and its V: it attends to the header and itself, never to other tools.
//   composed image: header K/V, then the tools' K/V one after the other, their K rotated at the
//           positions H + L_0 + ... + L_{i-1} + t they have in the full prompt.
// The query then prefills P[footer] + suffix ids against the composed block (positions continue
// from H + sum L_i), so the token sequence is exactly the full prompt's; only the tools' K/V
// differ. With one tool the composition is the full prompt's prefix K/V bit for bit (f32 KV).
std::shared_ptr<Engine::NopeState> Engine::build_nope_state() {
    Stopwatch clock;
    auto state = std::make_shared<NopeState>();
    state->group_key = compile_->group_key;
    state->layout = nope_layout(*tokenizer_, prefix_ids_, prefix_text_, *tools_, info_.chat_format);
    const NopeLayout& lay = state->layout;
    Backend& be = *backend_;
    const ModelConfig& c = be.config();
    const bool bf16 = be.kv_dtype() == KvDType::bf16;
    const KvImageShape shape{c.n_layers, c.n_kv_heads, c.head_dim, size_t(bf16 ? 2 : 4)};
    const std::span<const token_id> ids(prefix_ids_);
    const int H = int(lay.header_tokens);
    const size_t n_tools = lay.tool_tokens.size();

    auto header = be.allocate_kv(H);
    be.forward(ids.first(size_t(H)), KvView{nullptr, 0, header.get()}, {}, &cancel_);
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
        be.forward_capture_unrotated(ids.subspan(lay.tool_begin[i], size_t(L)), KvView{header.get(), H, rotated.get()}, {},
                                     *unrotated, &cancel_);
        std::vector<std::byte> rot(be.kv_bytes(L)), unrot(be.kv_bytes(L));
        be.export_kv(*rotated, L, rot);
        be.export_kv(*unrotated, L, unrot);

        // RoPE algebra check: deferred rotation at the positions of this forward must give its keys.
        std::vector<std::byte> check = unrot;
        std::vector<int> positions(static_cast<size_t>(L));
        std::iota(positions.begin(), positions.end(), H);
        be.rope_rotate_kv(check, L, positions);
        const auto diff = kv_image_max_abs_diff_per_layer(check, rot, L, shape, bf16);
        for (size_t l = 0; l < diff.size(); ++l)
            state->rope_check_per_layer[l] = std::max(state->rope_check_per_layer[l], diff[l]);

        parts.push_back(std::move(unrot));
        part_tokens.push_back(L);
        if (progress_) progress_(EngineProgress{"nope_compile", i + 1, n_tools});
    }

    // Compose: rotate every tool's pre-RoPE keys at its composed positions, header first.
    const int T = std::accumulate(part_tokens.begin() + 1, part_tokens.end(), 0);
    std::vector<std::byte> tools_image = kv_image_concat(std::span(parts).subspan(1), std::span(part_tokens).subspan(1), shape);
    std::vector<int> positions(static_cast<size_t>(T));
    std::iota(positions.begin(), positions.end(), H);
    be.rope_rotate_kv(tools_image, T, positions);
    const std::vector<std::vector<std::byte>> halves{std::move(parts[0]), std::move(tools_image)};
    const std::vector<int> half_tokens{H, T};
    const auto composed = kv_image_concat(halves, half_tokens, shape);
    state->composed_tokens = H + T;
    state->composed = be.import_kv(composed, H + T, H + T);
    state->build_ms = clock.elapsed_ms();
    return state;
}

QueryResult Engine::run_per_tool_nope(const std::string& text, const QueryOptions& options,
                                      const std::function<void(const TokenEvent&)>& on_token) {
    // The reference first (as compare mode does), keeping every step's logits.
    auto full = std::make_shared<QueryResult>(run_full(text, options, {}));
    if (full->stop_reason == "cancelled" || cancel_.load()) throw Cancelled();

    Stopwatch submit;
    QueryResult result;
    result.mode = query_mode_name(options.mode);
    Stopwatch tokenize_clock;
    const auto suffix_pieces = format_->suffix_pieces(text, system_prompt_);
    const auto suffix_ids = tokenize_suffix(*format_, *tokenizer_, prefix_pieces_, prefix_ids_, suffix_pieces);
    result.timings.tokenize_ms = tokenize_clock.elapsed_ms();
    if (suffix_ids.empty()) throw std::runtime_error("the rendered query suffix is empty");

    NopeReport report;
    if (nope_ && nope_->group_key == compile_->group_key) {
        report.reused = true;
    } else {
        nope_.reset();
        nope_ = build_nope_state();
        // in the report only: timings.compile_ms means the group's compile to every other reader
        report.build_ms = nope_->build_ms;
    }
    const NopeState& st = *nope_;

    // footer + query, prefilled against the composed header + tools
    std::vector<token_id> ids(prefix_ids_.begin() + std::ptrdiff_t(st.layout.footer_begin), prefix_ids_.end());
    ids.insert(ids.end(), suffix_ids.begin(), suffix_ids.end());
    result.cache_hit = false;
    result.tier = "miss";
    result.group_key = compile_->group_key;
    result.prefix_tokens = size_t(st.composed_tokens);
    result.suffix_tokens = ids.size();
    auto suffix_block = backend_->allocate_kv(int(ids.size()) + options.max_new_tokens);
    prefill_and_decode(ids, KvView{st.composed.get(), st.composed_tokens, suffix_block.get()}, options, on_token, result,
                       submit);

    // ---- the report
    report.n_tools = st.layout.tool_tokens.size();
    report.header_tokens = st.layout.header_tokens;
    report.tool_tokens = st.layout.tool_tokens;
    report.footer_tokens = st.layout.footer_tokens;
    report.composed_tokens = size_t(st.composed_tokens);
    report.kv_dtype = kv_dtype_name(backend_->kv_dtype());
    report.rope_check_per_layer = st.rope_check_per_layer;
    for (double d : st.rope_check_per_layer) report.rope_check_max_abs_diff = std::max(report.rope_check_max_abs_diff, d);

    // free-running outputs: compared while both runs condition on the same tokens
    const size_t n_common = std::min(full->step_logits.size(), result.step_logits.size());
    bool identical = full->tokens == result.tokens && full->step_logits.size() == result.step_logits.size();
    double max_diff = 0;
    for (size_t i = 0; i < n_common; ++i) {
        const auto& a = full->step_logits[i];
        const auto& b = result.step_logits[i];
        if (i == 0) {
            report.logit_cosine_first = cosine_similarity(a, b);
            report.kl_first = kl_divergence(a, b);
        }
        for (size_t v = 0; v < a.size(); ++v) max_diff = std::max(max_diff, std::abs(double(a[v]) - double(b[v])));
        const bool same = std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0 && full->tokens[i] == result.tokens[i];
        if (!same) {
            identical = false;
            if (!report.first_difference) report.first_difference = i;
            // past a differing token the runs condition on different text: stop comparing
            if (full->tokens[i] != result.tokens[i]) break;
        }
    }
    if (!identical && !report.first_difference) report.first_difference = n_common;

    // teacher-forced: the composed prefix given the full run's tokens, one batch; row r's logits
    // are those a decode step would compute (a row's result does not depend on the batching).
    const size_t n_full = full->step_logits.size();
    if (result.stop_reason != "cancelled" && n_full > 0) {
        std::vector<token_id> forced_ids = ids;
        forced_ids.insert(forced_ids.end(), full->tokens.begin(), full->tokens.begin() + std::ptrdiff_t(n_full - 1));
        std::vector<int> rows(n_full);
        std::iota(rows.begin(), rows.end(), int(ids.size()) - 1);
        auto block = backend_->allocate_kv(int(forced_ids.size()));
        try {
            const auto forced = backend_->forward(forced_ids, KvView{st.composed.get(), st.composed_tokens, block.get()},
                                                  rows, &cancel_);
            const size_t V = full->step_logits[0].size();
            double cos_sum = 0;
            size_t agree = 0;
            for (size_t i = 0; i < n_full; ++i) {
                const std::span<const float> got(forced.data() + i * V, V);
                cos_sum += cosine_similarity(full->step_logits[i], got);
                if (top1(full->step_logits[i]) == top1(got)) ++agree;
            }
            report.compared_steps = n_full;
            report.logit_cosine_mean = cos_sum / double(n_full);
            report.top1_agreement = double(agree) / double(n_full);
        } catch (const Cancelled&) {
            // cancelled while comparing: the first-position metrics stand, no step metrics
        }
    }
    report.identical_tokens = full->tokens == result.tokens;
    report.tool_name_match = full->tool_call.has_value() == result.tool_call.has_value() &&
                             (!full->tool_call || full->tool_call->name == result.tool_call->name);
    report.identical_logits = identical;
    report.max_abs_logit_diff = max_diff;
    result.full = full;
    result.nope = std::move(report);
    return result;
}

}  // namespace cc
