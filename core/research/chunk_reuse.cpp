#include "core/research/chunk_reuse.h"

#include "core/backend/partial_forward.h"
#include "core/base/json_text.h"
#include "core/research/eval.h"
#include "core/research/eval_runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace cc {

std::string ChunkRecompute::label() const {
    if (seam_tokens == 0 && blend_fraction == 0) return "per-tool (r=0 f=0)";
    std::ostringstream o;
    if (seam_tokens > 0) o << "r=" << seam_tokens;
    if (blend_fraction > 0) {
        if (seam_tokens > 0) o << ' ';
        o << "f=" << blend_fraction;
        if (check_layer != 1) o << " L" << check_layer;
    }
    return o.str();
}

void check_chunk_recompute(const ChunkRecompute& s) {
    if (s.seam_tokens < 0) throw std::invalid_argument("seam tokens r must be >= 0, got " + std::to_string(s.seam_tokens));
    if (!(s.blend_fraction >= 0 && s.blend_fraction <= 1))
        throw std::invalid_argument("blend fraction f must be in [0, 1], got " + std::to_string(s.blend_fraction));
    if (s.check_layer < 0) throw std::invalid_argument("check layer must be >= 0, got " + std::to_string(s.check_layer));
}

namespace {

// One layer of positions [first, first + count) of an image of n_tokens: per KV head K then V,
// count rows each ([2 * n_kv_heads][count][head_dim]).
std::vector<std::byte> layer_rows(std::span<const std::byte> image, int n_tokens, int first, int count, int layer,
                                  const KvImageShape& shape) {
    const size_t row = size_t(shape.head_dim) * shape.elem_bytes;
    const size_t n_parts = 2 * size_t(shape.n_kv_heads);
    std::vector<std::byte> out(n_parts * size_t(count) * row);
    for (size_t part = 0; part < n_parts; ++part) {
        const size_t p = size_t(layer) * n_parts + part;
        std::memcpy(out.data() + part * size_t(count) * row, image.data() + (p * size_t(n_tokens) + size_t(first)) * row,
                    size_t(count) * row);
    }
    return out;
}

// Per position t of [0, count): sum over K and V of every KV head of (a - b)^2, where `a` is
// layer_rows(image, ..., layer) and `b` the same rows of `image` now.
std::vector<double> deviation_per_token(std::span<const std::byte> a, std::span<const std::byte> image, int n_tokens,
                                        int first, int count, int layer, const KvImageShape& shape, bool bf16) {
    std::vector<double> out(size_t(count), 0.0);
    const size_t hd = size_t(shape.head_dim);
    const size_t n_parts = 2 * size_t(shape.n_kv_heads);
    for (size_t part = 0; part < n_parts; ++part) {
        const size_t p = size_t(layer) * n_parts + part;
        for (int t = 0; t < count; ++t) {
            const size_t ia = (part * size_t(count) + size_t(t)) * hd;
            const size_t ib = (p * size_t(n_tokens) + size_t(first + t)) * hd;
            double sum = 0;
            for (size_t d = 0; d < hd; ++d) {
                const double diff = kv_image_element(a, ia + d, bf16) - kv_image_element(image, ib + d, bf16);
                sum += diff * diff;
            }
            out[size_t(t)] += sum;
        }
    }
    // NaN compares false: rank it first, as the largest deviation
    for (double& d : out)
        if (std::isnan(d)) d = INFINITY;
    return out;
}

}  // namespace

ChunkReuseRun ChunkReuseExperiment::run(Engine& engine, const std::string& query, const QueryOptions& options,
                                        std::span<const ChunkRecompute> settings) {
    for (const auto& s : settings) check_chunk_recompute(s);
    QueryOptions opts = options;
    opts.keep_logits = true;
    ChunkReuseRun out;

    // The references: the full prefill, then the group cache (a hit: the tool set is compiled).
    opts.mode = QueryMode::full;
    out.full = engine.query(query, opts, {});
    if (out.full.stop_reason == StopReason::cancelled) throw Cancelled();
    opts.mode = QueryMode::cached;
    out.exact = engine.query(query, opts, {});
    if (!out.exact.cache_hit && out.exact.stop_reason != StopReason::cancelled) out.exact = engine.query(query, opts, {});
    if (out.exact.stop_reason == StopReason::cancelled) throw Cancelled();

    const Engine::PrefixRef prefix = engine.current_prefix();
    const NopeLayout layout = nope_layout(engine.tokenizer(), prefix.ids, prefix.text, prefix.tools, engine.model_info().chat_format);
    Backend& be = engine.backend();
    const ModelConfig& c = be.config();
    const bool bf16 = be.kv_dtype() == KvDType::bf16;
    const KvImageShape shape{c.n_layers, c.n_kv_heads, c.head_dim, size_t(bf16 ? 2 : 4)};
    const std::span<const token_id> ids = prefix.ids;
    const int H = int(layout.header_tokens);
    const int N = int(layout.footer_begin);  // header + tools
    const int T = N - H;
    out.header_tokens = layout.header_tokens;
    out.tool_tokens = size_t(T);
    out.footer_tokens = layout.footer_tokens;
    out.n_tools = layout.tool_tokens.size();
    out.kv_dtype = kv_dtype_name(be.kv_dtype());

    // Fill the library first (not part of any setting's TTFT: chunks are computed once). Every
    // setting then composes into the same buffer, as a system keeping a KV arena would.
    std::vector<std::byte> buffer;
    {
        ChunkLibrary::Composition warm = library_.compose(engine, layout);
        out.library_chunks_computed = warm.computed_chunks;
        out.library_ms = warm.compute_ms;
        buffer = std::move(warm.image);
    }

    // footer + query: what every setting prefills against its prefix
    std::vector<token_id> tail(ids.begin() + std::ptrdiff_t(N), ids.end());
    const std::vector<token_id> suffix_ids = engine.query_suffix_ids(query);
    tail.insert(tail.end(), suffix_ids.begin(), suffix_ids.end());
    const std::atomic<bool>* cancel = &engine.cancel_flag();

    for (const ChunkRecompute& setting : settings) {
        ChunkReusePoint p;
        p.setting = setting;
        p.label = setting.label();
        p.tool_tokens = size_t(T);
        Stopwatch submit;  // the TTFT clock
        ChunkLibrary::Composition comp = library_.compose(engine, layout, std::move(buffer));
        std::vector<std::byte>& image = comp.image;
        p.compose_ms = comp.compose_ms;

        // which absolute positions to recompute through every layer
        std::vector<char> selected(size_t(N), 0);
        if (setting.blend_fraction > 0 && T > 0) {
            Stopwatch clock;
            PartialForward& partial = require_partial_forward(be, "the CacheBlend recompute");
            const int check = std::min(setting.check_layer, c.n_layers - 1);
            // the reused K/V of the check layer, then layers [0, check] of every tool token with the
            // full context, in place (what a forward of the tool span after the header computes)
            const std::vector<std::byte> reused = layer_rows(image, N, H, T, check, shape);
            std::vector<int> tool_positions(static_cast<size_t>(T));
            std::iota(tool_positions.begin(), tool_positions.end(), H);
            partial.forward_at_positions(ids.subspan(size_t(H), size_t(T)), tool_positions, image, N, check + 1, cancel);
            const std::vector<double> dev = deviation_per_token(reused, image, N, H, T, check, shape, bf16);
            const size_t k = std::min(size_t(T), size_t(std::ceil(setting.blend_fraction * double(T) - 1e-9)));
            std::vector<int> order(static_cast<size_t>(T));
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return dev[size_t(x)] > dev[size_t(y)]; });
            for (size_t i = 0; i < k; ++i) selected[size_t(H + order[i])] = 1;
            p.select_ms = clock.elapsed_ms();
        }
        if (setting.seam_tokens > 0)
            for (size_t i = 0; i < layout.tool_begin.size(); ++i) {
                const size_t n = std::min(size_t(setting.seam_tokens), layout.tool_tokens[i]);
                std::fill_n(selected.begin() + std::ptrdiff_t(layout.tool_begin[i]), n, char(1));
            }

        // recompute the selected positions through every layer, in one pass over the image
        Stopwatch recompute_clock;
        std::vector<token_id> sel_ids;
        for (int t = H; t < N; ++t)
            if (selected[size_t(t)]) {
                p.recomputed_positions.push_back(t);
                sel_ids.push_back(ids[size_t(t)]);
            }
        p.recomputed_tokens = p.recomputed_positions.size();
        if (!sel_ids.empty()) {
            require_partial_forward(be, "the chunk-reuse recompute")
                .forward_at_positions(sel_ids, p.recomputed_positions, image, N, c.n_layers, cancel);
            p.recompute_passes = 1;
        }
        p.recompute_ms = recompute_clock.elapsed_ms();
        p.recompute_fraction = T > 0 ? double(p.recomputed_tokens) / double(T) : 0.0;

        auto prefix_block = be.link_kv(image, N, nullptr);
        auto suffix_block = be.allocate_kv(int(tail.size()) + options.max_new_tokens);
        QueryResult r = engine.continue_from(tail, KvView{prefix_block.get(), N, suffix_block.get()}, opts, {}, submit);
        if (r.stop_reason == StopReason::cancelled) throw Cancelled();
        p.ttft_ms = r.timings.ttft_ms;
        p.vs_full = compare_with_full(engine, out.full, r, tail, *prefix_block, N);
        p.text = r.text;
        p.tool_call = r.tool_call;
        out.points.push_back(std::move(p));
        prefix_block.reset();
        buffer = std::move(image);
    }
    if (!options.keep_logits) {
        out.full.step_logits.clear();
        out.exact.step_logits.clear();
    }
    return out;
}

namespace {

const auto num = json_number_or_null;

nlohmann::ordered_json setting_json(const ChunkRecompute& s) {
    return {{"seam_tokens", s.seam_tokens}, {"blend_fraction", s.blend_fraction}, {"check_layer", s.check_layer}};
}

std::string tool_name(const std::optional<ToolCall>& call) { return call ? call->name : std::string("(no call)"); }

}  // namespace

nlohmann::ordered_json to_json(const ChunkReusePoint& p) {
    nlohmann::ordered_json j{{"label", p.label},
                             {"setting", setting_json(p.setting)},
                             {"tool_tokens", p.tool_tokens},
                             {"recomputed_tokens", p.recomputed_tokens},
                             {"recompute_fraction", p.recompute_fraction},
                             {"recompute_passes", p.recompute_passes},
                             {"recomputed_positions", p.recomputed_positions},
                             {"compose_ms", p.compose_ms},
                             {"select_ms", p.select_ms},
                             {"recompute_ms", p.recompute_ms},
                             {"ttft_ms", p.ttft_ms},
                             {"vs_full", to_json(p.vs_full)},
                             {"text", p.text},
                             {"tool_call", p.tool_call ? nlohmann::ordered_json(p.tool_call->name) : nlohmann::ordered_json(nullptr)}};
    return j;
}

nlohmann::ordered_json to_json(const ChunkReuseRun& r) {
    nlohmann::ordered_json points = nlohmann::ordered_json::array();
    for (const auto& p : r.points) points.push_back(to_json(p));
    return {{"experiment", "chunk_reuse (approximate; the product never does this)"},
            {"n_tools", r.n_tools},
            {"header_tokens", r.header_tokens},
            {"tool_tokens", r.tool_tokens},
            {"footer_tokens", r.footer_tokens},
            {"kv_dtype", r.kv_dtype},
            {"library_chunks_computed", r.library_chunks_computed},
            {"library_ms", r.library_ms},
            {"full", {{"ttft_ms", r.full.timings.ttft_ms}, {"text", r.full.text}, {"tool_call", tool_name(r.full.tool_call)}}},
            {"exact_cache",
             {{"ttft_ms", r.exact.timings.ttft_ms},
              {"tier", tier_name(r.exact.tier)},
              {"identical_tokens", r.exact.tokens == r.full.tokens},
              {"identical_logits", r.exact.step_logits == r.full.step_logits}}},
            {"points", points}};
}

std::string chunk_reuse_text(const ChunkReuseRun& r) {
    std::ostringstream o;
    o.setf(std::ios::fixed);
    o.precision(1);
    o << "chunk reuse (experiment, approximate): " << r.n_tools << " tools, header " << r.header_tokens << " + tools "
      << r.tool_tokens << " + footer " << r.footer_tokens << " tokens; kv " << r.kv_dtype << "; library: "
      << r.library_chunks_computed << " chunks computed (" << r.library_ms << " ms)\n"
      << "  full prefill: TTFT " << r.full.timings.ttft_ms << " ms, tool " << tool_name(r.full.tool_call) << "\n"
      << "  exact cache (" << r.exact.tier << "): TTFT " << r.exact.timings.ttft_ms << " ms, "
      << (r.exact.tokens == r.full.tokens ? "identical to the full prefill" : "DIFFERENT from the full prefill") << "\n";
    for (const auto& p : r.points) {
        o << "  " << p.label << ": recomputed " << p.recomputed_tokens << "/" << p.tool_tokens << " ("
          << 100.0 * p.recompute_fraction << "%), TTFT " << p.ttft_ms << " ms; ";
        o.precision(4);
        o << "first-token cosine " << p.vs_full.logit_cosine_first << ", KL " << p.vs_full.kl_first << ", top-1 agreement "
          << p.vs_full.top1_agreement;
        o.precision(1);
        o << "; " << (p.vs_full.identical_logits ? "bit-identical" : p.vs_full.identical_tokens ? "identical tokens" : "different")
          << ", tool " << tool_name(p.tool_call) << "\n";
    }
    return o.str();
}

// ---- the sweep --------------------------------------------------------------------------------------

double ChunkReuseRow::tsa() const { return expect_call ? double(correct_tool) / double(expect_call) : NAN; }

ChunkReuseSweep run_chunk_reuse_sweep(Engine& engine, const EvalDataset& dataset, std::span<const ChunkRecompute> settings,
                                      const ChunkReuseSweepOptions& options,
                                      const std::function<void(size_t, size_t)>& on_progress, const std::atomic<bool>* cancel) {
    for (const auto& s : settings) check_chunk_recompute(s);
    ChunkReuseSweep sweep;
    sweep.dataset = dataset.source;
    sweep.model = engine.model_info().spec;
    sweep.synthetic_weights = engine.model_info().synthetic_weights;
    sweep.rows.resize(2 + settings.size());
    sweep.rows[0].label = "full prefill";
    sweep.rows[1].label = "exact cache";
    for (size_t i = 0; i < settings.size(); ++i) {
        sweep.rows[2 + i].label = settings[i].label();
        sweep.rows[2 + i].setting = settings[i];
    }
    // sums, divided at the end
    const size_t total = options.limit ? std::min(options.limit, dataset.examples.size()) : dataset.examples.size();
    ChunkReuseExperiment experiment;
    auto add = [](ChunkReuseRow& row, const std::optional<ExpectedCall>& expected, const std::optional<ToolCall>& call,
                  double fraction, double ttft, const ApproxComparison& c) {
        ++row.n;
        row.mean_recompute_fraction += fraction;
        row.mean_ttft_ms += ttft;
        row.mean_logit_cosine_first += c.logit_cosine_first;
        row.mean_kl_first += c.kl_first;
        row.mean_top1_agreement += c.top1_agreement;
        row.identical_tokens += c.identical_tokens ? 1 : 0;
        row.same_tool += c.tool_name_match ? 1 : 0;
        if (expected) {
            ++row.expect_call;
            if (call && call->name == expected->name) ++row.correct_tool;
        }
    };
    for (size_t i = 0; i < total; ++i) {
        if (cancel != nullptr && cancel->load()) {
            sweep.cancelled = true;
            break;
        }
        const EvalExample& ex = dataset.examples[i];
        ChunkReuseRun run;
        try {
            engine.set_tools(ex.tools, ex.system.value_or(options.system_prompt));
            run = experiment.run(engine, ex.query, options.query, settings);
        } catch (const Cancelled&) {
            sweep.cancelled = true;
            break;
        } catch (const std::exception& e) {
            throw std::runtime_error(ex.source + ": " + e.what());
        }
        // the references compared with themselves: the full prefill is the reference (cosine 1,
        // KL 0); the exact cache is compared token for token
        ApproxComparison self;
        self.logit_cosine_first = 1;
        self.top1_agreement = 1;
        self.identical_tokens = self.identical_logits = self.tool_name_match = true;
        add(sweep.rows[0], ex.expected, run.full.tool_call, 1.0, run.full.timings.ttft_ms, self);
        ApproxComparison exact = self;
        exact.identical_logits = run.exact.step_logits == run.full.step_logits;
        exact.identical_tokens = run.exact.tokens == run.full.tokens;
        exact.tool_name_match = tool_name(run.exact.tool_call) == tool_name(run.full.tool_call);
        add(sweep.rows[1], ex.expected, run.exact.tool_call, 0.0, run.exact.timings.ttft_ms, exact);
        for (size_t s = 0; s < run.points.size(); ++s) {
            const ChunkReusePoint& p = run.points[s];
            add(sweep.rows[2 + s], ex.expected, p.tool_call, p.recompute_fraction, p.ttft_ms, p.vs_full);
        }
        ++sweep.examples;
        if (on_progress) on_progress(i + 1, total);
    }
    for (auto& row : sweep.rows)
        if (row.n > 0) {
            const double n = double(row.n);
            row.mean_recompute_fraction /= n;
            row.mean_ttft_ms /= n;
            row.mean_logit_cosine_first /= n;
            row.mean_kl_first /= n;
            row.mean_top1_agreement /= n;
        }
    return sweep;
}

nlohmann::ordered_json to_json(const ChunkReuseRow& row) {
    return {{"label", row.label},
            {"setting", row.setting ? setting_json(*row.setting) : nlohmann::ordered_json(nullptr)},
            {"n", row.n},
            {"mean_recompute_fraction", row.mean_recompute_fraction},
            {"mean_ttft_ms", row.mean_ttft_ms},
            {"mean_logit_cosine_first", num(row.mean_logit_cosine_first)},
            {"mean_kl_first", num(row.mean_kl_first)},
            {"mean_top1_agreement", row.mean_top1_agreement},
            {"identical_tokens", row.identical_tokens},
            {"same_tool_as_full", row.same_tool},
            {"expect_call", row.expect_call},
            {"correct_tool", row.correct_tool},
            {"tsa", num(row.tsa())}};
}

nlohmann::ordered_json to_json(const ChunkReuseSweep& s) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& r : s.rows) rows.push_back(to_json(r));
    nlohmann::ordered_json j{{"experiment", "chunk_reuse (approximate; the product never does this)"},
                             {"dataset", s.dataset},
                             {"model", s.model},
                             {"synthetic_weights", s.synthetic_weights},
                             {"examples", s.examples},
                             {"cancelled", s.cancelled},
                             {"rows", rows}};
    if (s.synthetic_weights) j["warning"] = kSyntheticEvalWarning;
    return j;
}

std::string chunk_reuse_table(const ChunkReuseSweep& s) {
    std::ostringstream o;
    o << "| setting | recomputed | TTFT ms | cosine (1st) | KL (1st) | top-1 agr. | identical | same tool | TSA |\n"
      << "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    char buf[256];
    for (const auto& r : s.rows) {
        const double tsa = r.tsa();
        std::snprintf(buf, sizeof buf, "| %s | %.1f%% | %.1f | %.4f | %.4g | %.3f | %zu/%zu | %zu/%zu | %s |\n", r.label.c_str(),
                      100.0 * r.mean_recompute_fraction, r.mean_ttft_ms, r.mean_logit_cosine_first, r.mean_kl_first,
                      r.mean_top1_agreement, r.identical_tokens, r.n, r.same_tool, r.n,
                      std::isnan(tsa) ? "-" : (std::to_string(int(std::lround(tsa * 100))) + "%").c_str());
        o << buf;
    }
    return o.str();
}

}  // namespace cc
