#include "core/research/paper_bench.h"

#include "core/research/amortisation.h"
#include "core/base/embedded_resources.h"
#include "core/research/run_info.h"

#include <charconv>
#include <set>
#include <sstream>
#include <stdexcept>

namespace cc {

BenchToolSet bundled_tool_set(int n_tools) {
    const auto all = nlohmann::ordered_json::parse(embedded::sample_tools_100_json());
    if (n_tools < 1 || size_t(n_tools) > all.size())
        throw std::invalid_argument("bundled tool sets have 1 to " + std::to_string(all.size()) + " tools, not " +
                                    std::to_string(n_tools));
    nlohmann::ordered_json subset = nlohmann::ordered_json::array();
    for (int i = 0; i < n_tools; ++i) subset.push_back(all[size_t(i)]);
    const std::string name = "tools_" + std::to_string(n_tools);
    return {name, ToolSet::from_json_text(subset.dump(), name + ".json (bundled)"), {}};
}

std::vector<std::string> parse_query_list(std::string_view json_text, const std::string& source) {
    nlohmann::ordered_json doc;
    try {
        doc = nlohmann::ordered_json::parse(json_text);
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(source + ": not JSON: " + e.what());
    }
    std::vector<std::string> out;
    std::set<std::string> seen;
    auto take = [&](const nlohmann::ordered_json& list, const std::string& where) {
        if (!list.is_array()) throw std::runtime_error(source + ": " + where + " must be an array of query strings");
        for (size_t i = 0; i < list.size(); ++i) {
            if (!list[i].is_string() || list[i].get<std::string>().empty())
                throw std::runtime_error(source + ": " + where + "[" + std::to_string(i) + "] must be a non-empty string");
            if (seen.insert(list[i].get<std::string>()).second) out.push_back(list[i].get<std::string>());
        }
    };
    if (doc.is_array()) {
        take(doc, "the top level");
    } else if (doc.is_object()) {
        for (const auto& [key, list] : doc.items()) take(list, "\"" + key + "\"");
    } else {
        throw std::runtime_error(source + ": expected an array of query strings or an object of such arrays");
    }
    if (out.empty()) throw std::runtime_error(source + ": no queries");
    return out;
}

std::vector<std::string> bundled_queries() {
    return parse_query_list(embedded::sample_queries_json(), "sample_queries.json (bundled)");
}

std::string bundled_system_prompt() { return std::string(embedded::default_system_prompt()); }

nlohmann::ordered_json PaperBenchOptions::to_json() const {
    nlohmann::ordered_json sets = nlohmann::ordered_json::array();
    for (const auto& s : tool_sets) sets.push_back({{"name", s.name}, {"n_tools", s.tools.size()}, {"tools_hash", s.tools.tools_hash()}});
    return {{"tool_sets", sets},
            {"n_queries", n_queries},
            {"warmup", warmup},
            {"max_new_tokens", max_new_tokens},
            {"ignore_eos", ignore_eos},
            {"query_pool_size", queries.size()},
            {"queries", queries},
            {"system_prompt_chars", system_prompt.size()},
            {"statistic", "speedup, saving and break-even from the medians (p50) of the per-query samples"}};
}

// ---- the measurement --------------------------------------------------------------------------

namespace {

void check_not_cancelled(const QueryResult& r) {
    if (r.stop_reason == StopReason::cancelled) throw Cancelled();
}

}  // namespace

std::vector<PaperBenchRow> run_paper_bench(Engine& engine, const PaperBenchOptions& options,
                                           const std::function<void(const PaperBenchProgress&)>& progress) {
    if (options.tool_sets.empty()) throw std::invalid_argument("paper bench: no tool sets");
    if (options.queries.empty()) throw std::invalid_argument("paper bench: no queries");
    if (options.n_queries < 1) throw std::invalid_argument("paper bench: n_queries must be at least 1");
    if (options.warmup < 0) throw std::invalid_argument("paper bench: warmup must not be negative");
    PaperBenchProgress p;
    p.n_sets = options.tool_sets.size();
    p.total = (long long)p.n_sets * (1 + 2 * (options.warmup + options.n_queries));
    auto step = [&](size_t set, const std::string& text) {
        p.set_index = set;
        ++p.done;
        p.text = text;
        if (progress) progress(p);
    };
    QueryOptions full_opts;
    full_opts.mode = QueryMode::full;
    full_opts.max_new_tokens = options.max_new_tokens;
    full_opts.ignore_eos = options.ignore_eos;
    QueryOptions cached_opts = full_opts;
    cached_opts.mode = QueryMode::cached;

    std::vector<PaperBenchRow> rows;
    for (size_t s = 0; s < options.tool_sets.size(); ++s) {
        const BenchToolSet& set = options.tool_sets[s];
        // A forced miss: nothing stored may shorten the compile (longest-prefix reuse included).
        if (options.force_miss) engine.cache().clear();
        const std::vector<std::string>& queries = set.queries.empty() ? options.queries : set.queries;
        const CompileResult compiled = engine.set_tools(set.tools, options.system_prompt);
        step(s, set.name + ": compiled");
        PaperBenchRow row;
        row.tool_set = set.name;
        row.n_tools = compiled.n_tools;
        row.prefix_tokens = compiled.prefix_tokens;
        row.kv_bytes = compiled.kv_bytes;
        row.reused_tokens = compiled.reused_tokens;
        row.compile_ms = compiled.compile_ms;
        const int n_runs = options.warmup + options.n_queries;
        for (int i = 0; i < n_runs; ++i) {
            const bool measured = i >= options.warmup;
            const std::string& query = queries[size_t(i) % queries.size()];
            const std::string label = set.name + ": " +
                                      (measured ? "query " + std::to_string(i - options.warmup + 1) + "/" +
                                                      std::to_string(options.n_queries)
                                                : "warm-up " + std::to_string(i + 1) + "/" + std::to_string(options.warmup));
            const QueryResult full = engine.query(query, full_opts);
            check_not_cancelled(full);
            step(s, label + " (full prefill)");
            const QueryResult cached = engine.query(query, cached_opts);
            check_not_cancelled(cached);
            step(s, label + " (cached)");
            if (!cached.cache_hit)
                throw std::runtime_error(set.name + ": the cached query missed the cache (tier " + std::string(tier_name(cached.tier)) + ")");
            if (!measured) continue;
            row.full_ttft_ms.push_back(full.timings.ttft_ms);
            row.full_prefill_ms.push_back(full.timings.prefill_ms);
            row.full_decode_ms.push_back(full.timings.decode_ms);
            row.full_prompt_tokens.push_back(double(full.prefix_tokens + full.suffix_tokens));
            row.cached_ttft_ms.push_back(cached.timings.ttft_ms);
            row.cached_link_ms.push_back(cached.timings.link_ms);
            row.cached_prefill_ms.push_back(cached.timings.prefill_ms);
            row.cached_decode_ms.push_back(cached.timings.decode_ms);
            row.identical_outputs += cached.tokens == full.tokens ? 1 : 0;
        }
        rows.push_back(std::move(row));
        if (progress) {
            p.finished_row = &rows.back();
            progress(p);
            p.finished_row = nullptr;
        }
    }
    return rows;
}

// ---- derived figures ----------------------------------------------------------------------------

double PaperBenchRow::speedup() const { return median(full_ttft_ms) / median(cached_ttft_ms); }
double PaperBenchRow::saving_per_request_ms() const { return median(full_ttft_ms) - median(cached_ttft_ms); }
int PaperBenchRow::break_even_requests() const { return cc::break_even_requests(compile_ms, saving_per_request_ms()); }
std::optional<double> PaperBenchRow::break_even_exact() const {
    const double saving = saving_per_request_ms();
    if (saving <= 0) return std::nullopt;
    return compile_ms / saving;
}

nlohmann::ordered_json to_json(const PaperBenchRow& r) {
    nlohmann::ordered_json j;
    j["tool_set"] = r.tool_set;
    j["n_tools"] = r.n_tools;
    j["n_queries"] = r.full_ttft_ms.size();
    j["prefix_tokens"] = r.prefix_tokens;
    j["kv_bytes"] = r.kv_bytes;
    j["kv_mib"] = r.kv_mib();
    j["reused_tokens"] = r.reused_tokens;
    j["compile_ms"] = r.compile_ms;
    j["full_prefill"] = {{"ttft_ms", to_json(sample_stats(r.full_ttft_ms))},
                         {"prefill_ms", to_json(sample_stats(r.full_prefill_ms))},
                         {"decode_ms", to_json(sample_stats(r.full_decode_ms))},
                         {"prompt_tokens", to_json(sample_stats(r.full_prompt_tokens))}};
    j["cache_hit"] = {{"ttft_ms", to_json(sample_stats(r.cached_ttft_ms))},
                      {"link_ms", to_json(sample_stats(r.cached_link_ms))},
                      {"prefill_ms", to_json(sample_stats(r.cached_prefill_ms))},
                      {"decode_ms", to_json(sample_stats(r.cached_decode_ms))}};
    const auto exact = r.break_even_exact();
    j["amortization"] = {{"compile_cost_ms", r.compile_ms},
                         {"savings_per_request_ms", r.saving_per_request_ms()},
                         {"speedup_factor", r.speedup()},
                         {"break_even_requests", r.break_even_requests()},
                         {"break_even_exact", exact ? nlohmann::ordered_json(*exact) : nlohmann::ordered_json()},
                         {"savings_100_requests_ms", saved_after_ms(100, r.compile_ms, r.saving_per_request_ms())},
                         {"savings_1000_requests_ms", saved_after_ms(1000, r.compile_ms, r.saving_per_request_ms())},
                         {"savings_10000_requests_ms", saved_after_ms(10000, r.compile_ms, r.saving_per_request_ms())}};
    j["identical_outputs"] = r.identical_outputs;
    j["samples"] = {{"full_ttft_ms", r.full_ttft_ms},           {"full_prefill_ms", r.full_prefill_ms},
                    {"full_decode_ms", r.full_decode_ms},       {"full_prompt_tokens", r.full_prompt_tokens},
                    {"cached_ttft_ms", r.cached_ttft_ms},       {"cached_link_ms", r.cached_link_ms},
                    {"cached_prefill_ms", r.cached_prefill_ms}, {"cached_decode_ms", r.cached_decode_ms}};
    return j;
}

std::vector<PaperBenchRow> paper_bench_rows_from_json(const nlohmann::json& result, const std::string& source) {
    if (!result.is_object() || result.value("benchmark", "") != "paper_tables" || !result.contains("rows") ||
        !result["rows"].is_array())
        throw std::runtime_error(source + ": not a paper_tables result (no \"benchmark\": \"paper_tables\" with \"rows\")");
    std::vector<PaperBenchRow> rows;
    for (size_t i = 0; i < result["rows"].size(); ++i) {
        const auto& j = result["rows"][i];
        const std::string where = source + ": rows[" + std::to_string(i) + "]";
        try {
            PaperBenchRow r;
            r.tool_set = j.at("tool_set").get<std::string>();
            r.n_tools = j.at("n_tools").get<size_t>();
            r.prefix_tokens = j.at("prefix_tokens").get<size_t>();
            r.kv_bytes = j.at("kv_bytes").get<size_t>();
            r.reused_tokens = j.at("reused_tokens").get<size_t>();
            r.compile_ms = j.at("compile_ms").get<double>();
            r.identical_outputs = j.at("identical_outputs").get<int>();
            const auto& s = j.at("samples");
            r.full_ttft_ms = s.at("full_ttft_ms").get<std::vector<double>>();
            r.full_prefill_ms = s.at("full_prefill_ms").get<std::vector<double>>();
            r.full_decode_ms = s.at("full_decode_ms").get<std::vector<double>>();
            r.full_prompt_tokens = s.at("full_prompt_tokens").get<std::vector<double>>();
            r.cached_ttft_ms = s.at("cached_ttft_ms").get<std::vector<double>>();
            r.cached_link_ms = s.at("cached_link_ms").get<std::vector<double>>();
            r.cached_prefill_ms = s.at("cached_prefill_ms").get<std::vector<double>>();
            r.cached_decode_ms = s.at("cached_decode_ms").get<std::vector<double>>();
            rows.push_back(std::move(r));
        } catch (const nlohmann::json::exception& e) {
            throw std::runtime_error(where + ": " + e.what());
        }
    }
    return rows;
}

nlohmann::ordered_json paper_bench_json(const std::vector<PaperBenchRow>& rows, const PaperBenchOptions& options,
                                        const ModelInfo& model) {
    nlohmann::ordered_json j;
    j["benchmark"] = "paper_tables";
    j["run"] = run_info_json(model);
    j["options"] = options.to_json();
    j["rows"] = nlohmann::ordered_json::array();
    for (const auto& r : rows) j["rows"].push_back(to_json(r));
    return j;
}

// ---- CSV ----------------------------------------------------------------------------------------

namespace {

std::string num(double v) {
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, res.ptr);
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (const char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

std::string join(const std::vector<std::string>& fields) {
    std::string line;
    for (size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + fields[i];
    return line + "\n";
}

}  // namespace

std::vector<std::string> table2_columns() {
    return {"tool_set",          "n_tools",
            "n_queries",         "prefix_tokens",
            "kv_bytes",          "kv_mib",
            "compile_ms",        "full_ttft_p50_ms",
            "cached_ttft_p50_ms", "speedup",
            "saving_per_request_ms", "break_even_requests",
            "break_even_exact",  "saved_after_100_ms",
            "saved_after_1000_ms", "saved_after_10000_ms",
            "identical_outputs"};
}

std::vector<std::string> table3_columns() {
    return {"tool_set",           "n_tools",           "n_queries",          "prefix_tokens",
            "kv_mib",             "full_prompt_tokens", "full_ttft_p50_ms",  "full_ttft_p95_ms",
            "cached_ttft_p50_ms", "cached_ttft_p95_ms", "cached_link_p50_ms", "cached_link_p95_ms",
            "cached_prefill_p50_ms", "cached_prefill_p95_ms", "speedup"};
}

std::string table2_csv(const std::vector<PaperBenchRow>& rows) {
    std::string out = join(table2_columns());
    for (const auto& r : rows) {
        const double saving = r.saving_per_request_ms();
        const auto exact = r.break_even_exact();
        out += join({csv_field(r.tool_set), std::to_string(r.n_tools), std::to_string(r.full_ttft_ms.size()),
                     std::to_string(r.prefix_tokens), std::to_string(r.kv_bytes), num(r.kv_mib()), num(r.compile_ms),
                     num(median(r.full_ttft_ms)), num(median(r.cached_ttft_ms)), num(r.speedup()), num(saving),
                     std::to_string(r.break_even_requests()), exact ? num(*exact) : std::string(),
                     num(saved_after_ms(100, r.compile_ms, saving)), num(saved_after_ms(1000, r.compile_ms, saving)),
                     num(saved_after_ms(10000, r.compile_ms, saving)), std::to_string(r.identical_outputs)});
    }
    return out;
}

std::string table3_csv(const std::vector<PaperBenchRow>& rows) {
    std::string out = join(table3_columns());
    for (const auto& r : rows)
        out += join({csv_field(r.tool_set), std::to_string(r.n_tools), std::to_string(r.full_ttft_ms.size()),
                     std::to_string(r.prefix_tokens), num(r.kv_mib()), num(median(r.full_prompt_tokens)),
                     num(percentile(r.full_ttft_ms, 50)), num(percentile(r.full_ttft_ms, 95)),
                     num(percentile(r.cached_ttft_ms, 50)), num(percentile(r.cached_ttft_ms, 95)),
                     num(percentile(r.cached_link_ms, 50)), num(percentile(r.cached_link_ms, 95)),
                     num(percentile(r.cached_prefill_ms, 50)), num(percentile(r.cached_prefill_ms, 95)),
                     num(r.speedup())});
    return out;
}

}  // namespace cc
