// The paper's Table 2 ("deployment economics") and Table 3 ("TTFT scaling") for any model: for each
// tool set, compile once (a forced miss), then answer the same queries by full prefill and from the
// cached prefix, and summarise. Shared by `contextcache-cli bench`, bench/bench_ttft and the app's
// Benchmarks tab, so the three report the same numbers the same way.
//
// Field names follow the paper's published result files (eval_results/context_cache_benchmark/
// benchmark_main.json, benchmark_scaling*.json) where they measure the same thing; the mapping is in
// the README ("Reproducing the paper"). Speed-up, saving and break-even come from the medians (p50),
// which a loaded machine disturbs less than the means the paper used; the samples are all kept.
#pragma once

#include "core/engine/engine.h"
#include "core/research/sample_stats.h"
#include "core/text/tool_set.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cc {

struct BenchToolSet {
    std::string name;  // "tools_20" (bundled) or the file it came from
    ToolSet tools;
    std::vector<std::string> queries;  // this set's own queries; empty = PaperBenchOptions::queries
};

// The bundled sample set with the first `n_tools` tools of tools_100.json (the bundled tools_N.json
// are those prefixes). Throws for n_tools outside 1..100.
BenchToolSet bundled_tool_set(int n_tools);
// Queries in file order from sample_queries.json ({"tools_5.json": [...], ...}: every list, duplicates
// dropped) or a JSON array of strings. `source` names the text in errors.
std::vector<std::string> parse_query_list(std::string_view json_text, const std::string& source);
std::vector<std::string> bundled_queries();    // the embedded sample_queries.json
std::string bundled_system_prompt();           // the embedded resources/system_prompt.txt

struct PaperBenchOptions {
    std::vector<BenchToolSet> tool_sets;  // measured in this order
    std::vector<std::string> queries;     // query i is queries[i % size]; warm-up queries come first
    // Clear the engine's cache before each compile, so every compile is a real miss (the CLI's
    // bench, on a store of its own). Off: the compile may link a stored group (the app's sweep,
    // which runs on the user's store and must not clear it); compile_ms is then the link's 0.
    bool force_miss = true;
    int n_queries = 30;                   // measured per tool set, each in both modes
    int warmup = 2;                       // unmeasured query pairs per tool set after the compile
    int max_new_tokens = 16;
    bool ignore_eos = false;
    std::string system_prompt;
    nlohmann::ordered_json to_json() const;  // the options as run (tool set names and sizes, not schemas)
};

// One tool set: the compile and, per measured query (in query order), both runs' timings.
struct PaperBenchRow {
    std::string tool_set;
    size_t n_tools = 0;
    size_t prefix_tokens = 0;         // paper: cache_prefix_tokens
    size_t kv_bytes = 0;              // paper: cache_size_mb (in MiB)
    size_t reused_tokens = 0;         // prefix tokens taken from another stored group (0: a clean compile)
    double compile_ms = 0;            // paper: compile_ms
    // per-query samples, index i = the i-th measured query
    std::vector<double> full_ttft_ms;        // paper: full_prefill.ttft_ms (= its prefill_ms)
    std::vector<double> full_prefill_ms;
    std::vector<double> full_decode_ms;
    std::vector<double> full_prompt_tokens;  // paper: full_prefill.prompt_tokens
    std::vector<double> cached_ttft_ms;      // paper: cache_hit.ttft_ms
    std::vector<double> cached_link_ms;      // paper: cache_hit.link_ms
    std::vector<double> cached_prefill_ms;   // paper: cache_hit.prefill_ms (the query suffix only)
    std::vector<double> cached_decode_ms;
    int identical_outputs = 0;               // queries whose cached tokens equal the full run's

    // From the medians (p50) of the samples above; valid once there is at least one sample.
    double speedup() const;                  // full TTFT / cached TTFT (paper: speedup_factor)
    double saving_per_request_ms() const;    // full TTFT - cached TTFT (paper: savings_per_request_ms)
    int break_even_requests() const;         // ceil(compile / saving), as the app shows; 0 = never
    std::optional<double> break_even_exact() const;  // compile / saving, unrounded (the paper's figure)
    double kv_mib() const { return double(kv_bytes) / (1024.0 * 1024.0); }
};

struct PaperBenchProgress {
    size_t set_index = 0;   // 0-based, into options.tool_sets
    size_t n_sets = 0;
    long long done = 0;     // steps over the whole run: one compile, then one per query run
    long long total = 0;
    std::string text;       // e.g. "tools_20: query 3/30 (cached)"
    // Set on one extra call when a tool set's row is complete (done unchanged), so a caller can
    // show rows as they come; null on every step.
    const PaperBenchRow* finished_row = nullptr;
};

// Runs the whole benchmark on a loaded engine. With force_miss the engine's cache is cleared before
// each compile so that every compile is a real miss: give it a store of its own (the CLI uses a
// memory-only store). The app's tool-count sweep runs this same loop on the user's store.
// `progress` is called after each step and may throw (cc::Cancelled) to stop. Throws when a cached
// query is not a cache hit; a cached output that differs from the full one is counted, not thrown.
std::vector<PaperBenchRow> run_paper_bench(Engine& engine, const PaperBenchOptions& options,
                                           const std::function<void(const PaperBenchProgress&)>& progress = {});

// The row as JSON: the scalars, a stats object per timing, and the per-query samples.
nlohmann::ordered_json to_json(const PaperBenchRow& row);
// The rows back from a paper_bench_json() result (e.g. `bench --out DIR`'s results.json), for
// plotting in another process. Throws std::runtime_error naming `source` and the field.
std::vector<PaperBenchRow> paper_bench_rows_from_json(const nlohmann::json& result, const std::string& source);
// {"benchmark": "paper_tables", "run": cc::run_info_json, "options", "rows": [...]}
nlohmann::ordered_json paper_bench_json(const std::vector<PaperBenchRow>& rows, const PaperBenchOptions& options,
                                        const ModelInfo& model);

// CSV text with a header row, one line per row, numbers in shortest round-trip form.
// Table 2 (deployment economics): compile, KV, TTFT both ways, saving, break-even, saved after N.
// Table 3 (TTFT scaling): prefix size and the TTFT split, medians and p95.
std::string table2_csv(const std::vector<PaperBenchRow>& rows);
std::string table3_csv(const std::vector<PaperBenchRow>& rows);
std::vector<std::string> table2_columns();
std::vector<std::string> table3_columns();

}  // namespace cc
