#include "core/research/eval_runner.h"

#include "core/base/json_text.h"
#include "core/engine/result_json.h"
#include "core/research/nope.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace cc {

const char* const kSyntheticEvalWarning =
    "synthetic weights: this model's text is not meaningful, so TSA/PF1/EM/FPR/FNR say nothing about "
    "tool-calling quality; the run shows that the pipeline works end to end and whether cached and full "
    "outputs are identical";

namespace {

bool is_both(const std::string& mode) {
    return mode == "both" || mode == "compare";
}

EvalOutput make_output(const std::string& label, const QueryResult& r, const std::optional<ExpectedCall>& expected) {
    EvalOutput o;
    o.mode = label;
    o.text = r.text;
    o.tokens = r.tokens;
    o.tool_call = r.tool_call;
    o.score = score_example(expected, r.tool_call);
    o.stop_reason = r.stop_reason;
    o.cache_hit = r.cache_hit;
    o.tier = r.tier;
    o.prefix_tokens = r.prefix_tokens;
    o.suffix_tokens = r.suffix_tokens;
    o.timings = r.timings;
    return o;
}

std::optional<bool> schema_valid(const std::optional<ToolCall>& call, const ToolSet& tools) {
    if (!call) return std::nullopt;
    if (!call->arguments_valid) return false;
    for (const auto& t : tools.tools())
        if (t.name == call->name) return json_schema_valid(strict_arguments_schema(t), call->arguments);
    return false;
}

ordered_json optional_json(const std::optional<bool>& v) {
    return v ? ordered_json(*v) : ordered_json(nullptr);
}

}  // namespace

QueryMode eval_query_mode(const std::string& mode) {
    if (is_both(mode)) return QueryMode::compare;
    if (mode == kPerToolNopeMode) return QueryMode::full;  // its reference run; the composed run is the experiment's
    try {
        return parse_query_mode(mode);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string(e.what()) + " (or both, or per_tool_nope)");
    }
}

std::vector<EvalModeSummary> summarize_records(const std::vector<EvalRecord>& records) {
    // Modes in the order they first appear; each mode's scores in record order.
    std::vector<std::string> order;
    std::map<std::string, std::vector<ExampleScore>> scores;
    std::map<std::string, std::pair<double, double>> time_sums;  // ttft, total
    std::map<std::string, std::pair<size_t, size_t>> calls;      // calls, schema-valid ones
    for (const auto& r : records)
        for (const auto& o : r.outputs) {
            if (!scores.count(o.mode)) order.push_back(o.mode);
            calls[o.mode].first += o.schema_valid.has_value();
            calls[o.mode].second += o.schema_valid.value_or(false);
            scores[o.mode].push_back(o.score);
            time_sums[o.mode].first += o.timings.ttft_ms;
            time_sums[o.mode].second += o.timings.total_ms;
        }
    std::vector<EvalModeSummary> out;
    for (const auto& mode : order) {
        EvalModeSummary s;
        s.mode = mode;
        s.metrics = summarize(scores[mode]);
        const double n = static_cast<double>(scores[mode].size());
        s.mean_ttft_ms = time_sums[mode].first / n;
        s.mean_total_ms = time_sums[mode].second / n;
        s.n_calls = calls[mode].first;
        s.n_schema_valid = calls[mode].second;
        out.push_back(std::move(s));
    }
    return out;
}

EvalRunResult run_eval(Engine& engine, const EvalDataset& dataset, const EvalRunOptions& options,
                       const std::function<void(const EvalProgress&)>& on_progress, const std::atomic<bool>* cancel) {
    if (!engine.loaded()) throw std::logic_error("run_eval: the engine has no model loaded");
    QueryOptions q = options.query;
    q.mode = eval_query_mode(options.mode);
    const bool nope_mode = options.mode == kPerToolNopeMode;
    const std::string primary = is_both(options.mode) ? "cached" : nope_mode ? kPerToolNopeMode : query_mode_name(q.mode);
    NopeExperiment nope;  // per_tool_nope: the composed prefix is reused while consecutive examples share a tool set

    EvalRunResult result;
    result.dataset = dataset.source;
    result.mode = options.mode;
    result.model = engine.model_info().spec;
    result.synthetic_weights = engine.model_info().synthetic_weights;
    const size_t total = options.limit ? std::min(options.limit, dataset.examples.size()) : dataset.examples.size();

    for (size_t i = 0; i < total; ++i) {
        if (cancel && cancel->load()) {
            result.cancelled = true;
            break;
        }
        const auto& ex = dataset.examples[i];
        EvalRecord rec;
        rec.index = i;
        rec.id = ex.id;
        rec.source = ex.source;
        rec.query = ex.query;
        rec.tools_label = ex.tools_label;
        rec.n_tools = ex.tools.size();
        rec.expected = ex.expected;
        QueryResult r;
        try {
            const auto compiled = engine.set_tools(ex.tools, ex.system.value_or(options.system_prompt));
            rec.compile_hit = compiled.cache_hit;
            rec.compile_tier = compiled.tier;
            rec.compile_ms = compiled.compile_ms;
            if (nope_mode) {
                NopeRun run = nope.run(engine, ex.query, q);
                r = std::move(run.composed);
                r.full = std::make_shared<QueryResult>(std::move(run.full));
                // The composed run is not the engine's compare mode: its verdict is the report's.
                r.identical = run.report.identical_logits;
                r.first_difference = run.report.first_difference;
                rec.nope = std::move(run.report);
            } else {
                r = engine.query(ex.query, q);
            }
        } catch (const Cancelled&) {
            // A cancel during the example's compile (set_tools checks it per chunk): a partial result.
            result.cancelled = true;
            break;
        } catch (const std::exception& e) {
            throw std::runtime_error(ex.source + " (example \"" + ex.id + "\"): " + e.what());
        }
        if (r.stop_reason == StopReason::cancelled || (r.full && r.full->stop_reason == StopReason::cancelled)) {
            result.cancelled = true;
            break;
        }
        rec.outputs.push_back(make_output(primary, r, ex.expected));
        rec.outputs.back().schema_valid = schema_valid(r.tool_call, ex.tools);
        if (r.full) {
            rec.outputs.push_back(make_output("full", *r.full, ex.expected));
            rec.outputs.back().schema_valid = schema_valid(r.full->tool_call, ex.tools);
            rec.identical_tokens = r.full->tokens == r.tokens;
            rec.identical_logits = r.identical;
            rec.first_difference = r.first_difference;
            ++result.n_compared;
            result.n_identical_tokens += *rec.identical_tokens;
            result.n_identical_logits += r.identical.value_or(false);
        }
        result.records.push_back(std::move(rec));
        if (on_progress) on_progress(EvalProgress{i + 1, total, &result.records.back()});
    }
    result.summaries = summarize_records(result.records);
    return result;
}

ordered_json to_json(const EvalOutput& o) {
    ordered_json j;
    j["mode"] = o.mode;
    j["text"] = o.text;
    j["tokens"] = o.tokens;
    j["tool_call"] = tool_call_json(o.tool_call);
    j["schema_valid"] = optional_json(o.schema_valid);
    j["score"] = to_json(o.score);
    j["stop_reason"] = stop_reason_name(o.stop_reason);
    j["cache_hit"] = o.cache_hit;
    j["tier"] = tier_name(o.tier);
    j["prefix_tokens"] = o.prefix_tokens;
    j["suffix_tokens"] = o.suffix_tokens;
    j["generated_tokens"] = o.tokens.size();
    j["timings"] = to_json(o.timings);
    return j;
}

ordered_json to_json(const EvalRecord& r) {
    ordered_json j;
    j["index"] = r.index;
    j["id"] = r.id;
    j["source"] = r.source;
    j["query"] = r.query;
    j["tools"] = r.tools_label;
    j["n_tools"] = r.n_tools;
    if (r.expected) {
        j["expected"] = ordered_json{{"name", r.expected->name}, {"arguments", r.expected->arguments}};
        if (r.expected->accepted) j["expected"]["accepted"] = *r.expected->accepted;
    } else {
        j["expected"] = nullptr;
    }
    j["compile"] = {{"cache_hit", r.compile_hit}, {"tier", tier_name(r.compile_tier)}, {"compile_ms", r.compile_ms}};
    j["outputs"] = ordered_json::array();
    for (const auto& o : r.outputs) j["outputs"].push_back(to_json(o));
    j["identical_tokens"] = optional_json(r.identical_tokens);
    j["identical_logits"] = optional_json(r.identical_logits);
    j["first_difference"] = r.first_difference ? ordered_json(*r.first_difference) : ordered_json(nullptr);
    if (r.nope) j["nope"] = to_json(*r.nope);
    return j;
}

ordered_json to_json(const EvalModeSummary& s) {
    ordered_json j{{"mode", s.mode}};
    const ordered_json metrics = to_json(s.metrics);
    for (const auto& [k, v] : metrics.items()) j[k] = v;
    j["mean_ttft_ms"] = s.mean_ttft_ms;
    j["mean_total_ms"] = s.mean_total_ms;
    j["calls"] = s.n_calls;
    j["schema_valid_calls"] = s.n_schema_valid;
    return j;
}

NopeMeans nope_means(const std::vector<EvalRecord>& records) {
    NopeMeans m;
    struct Mean {
        double sum = 0;
        size_t n = 0;
    } cosine_first, kl_first, cosine_mean, top1;
    auto add = [&m](Mean& mean, double x) {
        if (std::isnan(x)) {
            ++m.nan_figures;
        } else {
            mean.sum += x;
            ++mean.n;
        }
    };
    for (const auto& rec : records) {
        if (!rec.nope) continue;
        ++m.n;
        add(cosine_first, rec.nope->logit_cosine_first);
        add(kl_first, rec.nope->kl_first);
        add(cosine_mean, rec.nope->logit_cosine_mean);
        add(top1, rec.nope->top1_agreement);
    }
    auto mean = [](const Mean& a) { return a.n ? a.sum / double(a.n) : std::nan(""); };
    m.logit_cosine_first = mean(cosine_first);
    m.kl_first = mean(kl_first);
    m.logit_cosine_mean = mean(cosine_mean);
    m.top1_agreement = mean(top1);
    return m;
}

ordered_json eval_summary_json(const EvalRunResult& r) {
    ordered_json j;
    j["dataset"] = r.dataset;
    j["mode"] = r.mode;
    j["model"] = r.model;
    j["synthetic_weights"] = r.synthetic_weights;
    if (r.synthetic_weights) j["warning"] = kSyntheticEvalWarning;
    j["n_examples"] = r.records.size();
    j["cancelled"] = r.cancelled;
    j["modes"] = ordered_json::array();
    for (const auto& s : r.summaries) j["modes"].push_back(to_json(s));
    if (r.n_compared) {
        j["compared"] = r.n_compared;
        j["identical_tokens"] = r.n_identical_tokens;
        j["identical_logits"] = r.n_identical_logits;
    }
    const NopeMeans m = nope_means(r.records);
    if (m.n) {
        j["nope"] = {{"n", m.n},
                     {"mean_logit_cosine_first", json_number_or_null(m.logit_cosine_first)},
                     {"mean_kl_first", json_number_or_null(m.kl_first)},
                     {"mean_logit_cosine", json_number_or_null(m.logit_cosine_mean)},
                     {"mean_top1_agreement", json_number_or_null(m.top1_agreement)},
                     {"nan_figures", m.nan_figures}};
    }
    return j;
}

}  // namespace cc
