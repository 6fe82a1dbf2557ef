// contextcache-cli bench: the paper's Table 2 (deployment economics) and Table 3 (TTFT scaling) for
// the model given with --model, measured by core/research/paper_bench. JSON (--json), CSV (--csv) or a table
// on stdout; --out DIR writes results.json, table2.csv and table3.csv. The charts of a results.json
// come from the app: `contextcache --plot-bench DIR` (the CLI links no Qt).
#include "app/cli_common.h"
#include "core/research/paper_bench.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <unistd.h>

namespace cli {

namespace {

void write_text(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw std::runtime_error(path.string() + ": cannot write");
}

std::string fixed(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

void print_tables(const std::vector<cc::PaperBenchRow>& rows, const cc::ModelInfo& model, int n_queries) {
    if (model.synthetic_weights)
        std::cout << "(" << model.spec << ": synthetic weights - the timings are real, the text is not meaningful)\n";
    std::cout << model.spec << " on " << model.numerics << " (" << model.device << ", " << model.n_threads
              << " threads); medians (p50) and p95 over " << n_queries << " queries\n\n";
    std::printf("Table 2: deployment economics\n");
    std::printf("%-10s %6s %8s %10s %11s %13s %13s %8s %12s %10s %10s\n", "tool set", "tools", "prefix", "KV MiB",
                "compile ms", "full TTFT ms", "cached ms", "speedup", "saving ms", "break-even", "identical");
    for (const auto& r : rows)
        std::printf("%-10s %6zu %8zu %10s %11s %13s %13s %7sx %12s %10d %6d/%zu\n", r.tool_set.c_str(), r.n_tools,
                    r.prefix_tokens, fixed(r.kv_mib(), 1).c_str(), fixed(r.compile_ms, 1).c_str(),
                    fixed(cc::median(r.full_ttft_ms), 1).c_str(), fixed(cc::median(r.cached_ttft_ms), 1).c_str(),
                    fixed(r.speedup(), 2).c_str(), fixed(r.saving_per_request_ms(), 1).c_str(), r.break_even_requests(),
                    r.identical_outputs, r.full_ttft_ms.size());
    std::printf("\nTable 3: TTFT scaling (ms, p50 / p95)\n");
    std::printf("%-10s %6s %8s %19s %19s %17s %19s\n", "tool set", "tools", "prefix", "full TTFT", "cached TTFT", "link",
                "suffix prefill");
    auto pair = [](const std::vector<double>& v) {
        return fixed(cc::percentile(v, 50), 2) + " / " + fixed(cc::percentile(v, 95), 2);
    };
    for (const auto& r : rows)
        std::printf("%-10s %6zu %8zu %19s %19s %17s %19s\n", r.tool_set.c_str(), r.n_tools, r.prefix_tokens,
                    pair(r.full_ttft_ms).c_str(), pair(r.cached_ttft_ms).c_str(), pair(r.cached_link_ms).c_str(),
                    pair(r.cached_prefill_ms).c_str());
}

}  // namespace

int cmd_bench(Args& args, const cc::EngineOptions& global, bool json) {
    cc::PaperBenchOptions o;
    const auto counts_arg = args.get("tool-counts");
    const auto files_arg = args.get("tools");
    if (counts_arg && files_arg) throw UsageError("bench takes --tool-counts or --tools, not both");
    if (files_arg) {
        const auto files = split_list(*files_arg);
        if (files.empty()) throw UsageError("--tools needs FILE[,FILE...]");
        for (const auto& f : files) o.tool_sets.push_back({f, cc::ToolSet::from_file(f), {}});
    } else {
        const auto counts = split_list(counts_arg.value_or("5,10,20,50,100"));
        if (counts.empty()) throw UsageError("--tool-counts needs N[,N...]");
        for (const auto& c : counts) o.tool_sets.push_back(cc::bundled_tool_set(int(parse_int(c, "--tool-counts", 1, 100))));
    }
    const auto queries_file = args.get("queries");
    o.queries = queries_file ? cc::parse_query_list(read_file(*queries_file), *queries_file) : cc::bundled_queries();
    o.n_queries = int(parse_int(args.get_or("n-queries", "30"), "--n-queries", 1, 100000));
    o.warmup = int(parse_int(args.get_or("warmup", "2"), "--warmup", 0, 100000));
    o.max_new_tokens = int(parse_int(args.get_or("max-new-tokens", "16"), "--max-new-tokens", 1, 1 << 20));
    o.ignore_eos = args.flag("ignore-eos");
    const bool own_system = args.has("system") || args.has("system-file");
    o.system_prompt = own_system ? system_prompt(args) : cc::bundled_system_prompt();
    const auto out_dir = args.get("out");
    const auto plot_dir = args.get("plot");
    const bool csv = args.flag("csv");
    args.check_all_used();
    // The CLI links no Qt: the charts come from the app, over the results this run writes.
    if (plot_dir)
        throw UsageError("--plot: contextcache-cli draws no charts; write the results with --out DIR and run "
                         "`contextcache --plot-bench DIR`");

    // A memory-only store of its own: every compile is a forced miss, and the user's cache directory
    // is neither read nor cleared. (--cache-dir still memoises the model fingerprint.)
    cc::EngineOptions options = global;
    options.cache.dir.clear();
    cc::Engine engine(options);
    const cc::ModelInfo& model = engine.load_model();
    const bool live = !json && isatty(STDERR_FILENO);  // a progress line only where someone watches it
    const auto rows = cc::run_paper_bench(engine, o, [&](const cc::PaperBenchProgress& p) {
        if (live && !p.finished_row) std::cerr << "\r[" << p.done << "/" << p.total << "] " << p.text << "\x1b[K" << std::flush;
    });
    if (live) std::cerr << "\n";
    const auto result = cc::paper_bench_json(rows, o, model);

    if (out_dir) {
        std::filesystem::create_directories(*out_dir);
        write_text(std::filesystem::path(*out_dir) / "results.json", result.dump(2) + "\n");
        write_text(std::filesystem::path(*out_dir) / "table2.csv", cc::table2_csv(rows));
        write_text(std::filesystem::path(*out_dir) / "table3.csv", cc::table3_csv(rows));
    }
    if (json) print_json(result);
    else if (csv) std::cout << cc::table2_csv(rows) << "\n" << cc::table3_csv(rows);
    else print_tables(rows, model, o.n_queries);

    for (const auto& r : rows)
        if (size_t(r.identical_outputs) != r.full_ttft_ms.size()) {
            std::cerr << "contextcache-cli: " << r.tool_set << ": " << r.full_ttft_ms.size() - size_t(r.identical_outputs)
                      << " cached outputs differ from the full prefill\n";
            return 3;  // as query --mode compare: exactness broken is worth a non-zero exit
        }
    return 0;
}

}  // namespace cli
