// core/research/paper_bench (the paper's Tables 2 and 3) and `contextcache-cli bench`: the statistics on
// hand-made samples, the amortisation formula against the paper's published figures, and a tiny
// run on builtin:qwen3-test whose JSON and CSV must agree with its own per-query samples.
// Timings are never asserted, only the bookkeeping between them.
#include "core/research/amortisation.h"
#include "core/engine/engine.h"
#include "core/research/paper_bench.h"
#include "core/research/sample_stats.h"
#include "tests/test_support.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

namespace {

using nlohmann::json;

// ---- statistics ---------------------------------------------------------------------------------

TEST(SampleStats, PercentilesInterpolateLikeNumpy) {
    // numpy.percentile([10, 20, 30, 40, 50], q): rank q/100 * 4
    const std::vector<double> v{50, 10, 40, 20, 30};  // order does not matter
    EXPECT_DOUBLE_EQ(cc::percentile(v, 0), 10);
    EXPECT_DOUBLE_EQ(cc::percentile(v, 50), 30);
    EXPECT_DOUBLE_EQ(cc::percentile(v, 95), 48);  // 40 + 0.8 * 10
    EXPECT_DOUBLE_EQ(cc::percentile(v, 100), 50);
    EXPECT_DOUBLE_EQ(cc::median({1, 2, 3, 4}), 2.5);
    EXPECT_DOUBLE_EQ(cc::percentile({7}, 95), 7);
    std::vector<double> ramp;
    for (int i = 1; i <= 20; ++i) ramp.push_back(i);
    EXPECT_NEAR(cc::percentile(ramp, 95), 19.05, 1e-12);
    EXPECT_THROW(cc::percentile({}, 50), std::invalid_argument);
    EXPECT_THROW(cc::percentile({1, 2}, 101), std::invalid_argument);
    EXPECT_THROW(cc::percentile({1, 2}, -1), std::invalid_argument);
}

TEST(SampleStats, MeanStdMinMax) {
    const auto s = cc::sample_stats({2, 4, 4, 4, 5, 5, 7, 9});
    EXPECT_EQ(s.n, 8u);
    EXPECT_DOUBLE_EQ(s.mean, 5);
    EXPECT_DOUBLE_EQ(s.std, 2);  // population standard deviation
    EXPECT_DOUBLE_EQ(s.min, 2);
    EXPECT_DOUBLE_EQ(s.max, 9);
    EXPECT_DOUBLE_EQ(s.p50, 4.5);
    EXPECT_DOUBLE_EQ(s.p95, 7 + 0.65 * 2);  // rank 6.65
    const json j = cc::to_json(s);
    for (const char* key : {"n", "mean", "std", "min", "max", "p50", "p95"}) EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_THROW(cc::sample_stats({}), std::invalid_argument);
}

// ---- amortisation ---------------------------------------------------------------------------------

TEST(Amortisation, BreakEvenIsTheCeilingOfCompileOverSaving) {
    EXPECT_EQ(cc::break_even_requests(100, 50), 2);    // exactly covered after 2
    EXPECT_EQ(cc::break_even_requests(101, 50), 3);
    EXPECT_EQ(cc::break_even_requests(10, 50), 1);
    EXPECT_EQ(cc::break_even_requests(0, 50), 1);      // at least one request
    EXPECT_EQ(cc::break_even_requests(100, 0), 0);     // never
    EXPECT_EQ(cc::break_even_requests(100, -5), 0);
    EXPECT_DOUBLE_EQ(cc::saved_after_ms(10, 100, 50), 400);
    EXPECT_DOUBLE_EQ(cc::saved_after_ms(1, 100, 50), -50);
}

TEST(Amortisation, ReproducesThePapersPublishedFigures) {
    const auto path = cc::test::shared_dir() / "data/contextcache/eval_results/context_cache_benchmark/benchmark_main.json";
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
    const json a = json::parse(cc::test::read_file(path))["amortization"];
    const double compile = a["compile_cost_ms"], saving = a["savings_per_request_ms"];
    for (const int n : {100, 1000, 10000})
        EXPECT_NEAR(cc::saved_after_ms(n, compile, saving), a["savings_" + std::to_string(n) + "_requests_ms"].get<double>(), 1e-6);
    EXPECT_EQ(cc::break_even_requests(compile, saving), int(std::ceil(a["break_even_requests"].get<double>())));
}

// ---- inputs ---------------------------------------------------------------------------------------

TEST(PaperBenchInputs, BundledToolSetsAreTheShippedFiles) {
    for (const int n : {5, 10, 20, 50, 100}) {
        const auto set = cc::bundled_tool_set(n);
        const auto file = cc::ToolSet::from_file(cc::test::source_dir() / "resources/toolsets" / ("tools_" + std::to_string(n) + ".json"));
        EXPECT_EQ(set.name, "tools_" + std::to_string(n));
        EXPECT_EQ(set.tools.size(), size_t(n));
        EXPECT_EQ(set.tools.tools_hash(), file.tools_hash()) << n;
    }
    EXPECT_EQ(cc::bundled_tool_set(7).tools.size(), 7u);
    EXPECT_THROW(cc::bundled_tool_set(0), std::invalid_argument);
    EXPECT_THROW(cc::bundled_tool_set(101), std::invalid_argument);
    EXPECT_EQ(cc::bundled_system_prompt(), cc::test::read_file(cc::test::source_dir() / "resources/system_prompt.txt"));
    // enough distinct queries for the default 30 without repeating one
    EXPECT_GE(cc::bundled_queries().size(), 30u);
}

TEST(PaperBenchInputs, QueryListsAndTheirErrors) {
    EXPECT_EQ(cc::parse_query_list(R"(["a", "b", "a"])", "q.json"), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(cc::parse_query_list(R"({"x.json": ["a", "b"], "y.json": ["b", "c"]})", "q.json"),
              (std::vector<std::string>{"a", "b", "c"}));
    auto message = [](const std::string& text) {
        try {
            cc::parse_query_list(text, "my_queries.json");
        } catch (const std::exception& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message("[\"a\", ").find("my_queries.json: not JSON"), std::string::npos);
    EXPECT_NE(message("[\"a\", 3]").find("my_queries.json: the top level[1] must be a non-empty string"), std::string::npos);
    EXPECT_NE(message("{\"k\": \"a\"}").find("my_queries.json: \"k\" must be an array"), std::string::npos);
    EXPECT_NE(message("[]").find("my_queries.json: no queries"), std::string::npos);
    EXPECT_NE(message("42").find("my_queries.json: expected an array"), std::string::npos);
}

// ---- a tiny run -----------------------------------------------------------------------------------

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
    std::vector<std::vector<std::string>> rows;
    std::stringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (line.empty()) continue;
        std::vector<std::string> fields;
        std::stringstream ss(line);
        for (std::string f; std::getline(ss, f, ',');) fields.push_back(f);
        if (!line.empty() && line.back() == ',') fields.push_back("");
        rows.push_back(fields);
    }
    return rows;
}

// Every figure in a result row agrees with the row's own per-query samples.
void expect_consistent(const json& row, size_t n_queries) {
    const json& s = row["samples"];
    for (const char* key : {"full_ttft_ms", "full_prefill_ms", "full_decode_ms", "full_prompt_tokens", "cached_ttft_ms",
                            "cached_link_ms", "cached_prefill_ms", "cached_decode_ms"})
        ASSERT_EQ(s[key].size(), n_queries) << key;
    const auto full = s["full_ttft_ms"].get<std::vector<double>>();
    const auto cached = s["cached_ttft_ms"].get<std::vector<double>>();
    const auto link = s["cached_link_ms"].get<std::vector<double>>();
    const auto prefill = s["cached_prefill_ms"].get<std::vector<double>>();
    for (size_t i = 0; i < n_queries; ++i) {
        // TTFT = link + suffix prefill + (tokenize, first sample): never less than the two parts
        EXPECT_LE(link[i] + prefill[i], cached[i] + 1e-9) << "query " << i;
        EXPECT_GE(link[i], 0);
        EXPECT_GT(prefill[i], 0);
        EXPECT_GT(s["full_prompt_tokens"][i].get<double>(), row["prefix_tokens"].get<double>());
    }
    EXPECT_DOUBLE_EQ(row["full_prefill"]["ttft_ms"]["p50"], cc::percentile(full, 50));
    EXPECT_DOUBLE_EQ(row["full_prefill"]["ttft_ms"]["p95"], cc::percentile(full, 95));
    EXPECT_DOUBLE_EQ(row["cache_hit"]["ttft_ms"]["p50"], cc::percentile(cached, 50));
    EXPECT_DOUBLE_EQ(row["cache_hit"]["ttft_ms"]["p95"], cc::percentile(cached, 95));
    EXPECT_DOUBLE_EQ(row["cache_hit"]["link_ms"]["p50"], cc::percentile(link, 50));
    EXPECT_DOUBLE_EQ(row["cache_hit"]["prefill_ms"]["p95"], cc::percentile(prefill, 95));
    EXPECT_EQ(row["cache_hit"]["ttft_ms"]["n"], n_queries);
    const json& a = row["amortization"];
    const double saving = cc::median(full) - cc::median(cached);
    EXPECT_DOUBLE_EQ(a["savings_per_request_ms"], saving);
    EXPECT_DOUBLE_EQ(a["speedup_factor"], cc::median(full) / cc::median(cached));
    EXPECT_DOUBLE_EQ(a["compile_cost_ms"], row["compile_ms"]);
    const double compile = row["compile_ms"];
    EXPECT_EQ(a["break_even_requests"], saving > 0 ? std::max(1, int(std::ceil(compile / saving))) : 0);
    if (saving > 0) {
        EXPECT_DOUBLE_EQ(a["break_even_exact"], compile / saving);
    }
    EXPECT_DOUBLE_EQ(a["savings_100_requests_ms"], 100 * saving - compile);
    EXPECT_EQ(row["identical_outputs"], n_queries);  // exactness: cached output == full output
    EXPECT_EQ(row["reused_tokens"], 0);              // every compile a clean miss
    EXPECT_GT(row["compile_ms"].get<double>(), 0);
    EXPECT_DOUBLE_EQ(row["kv_mib"], row["kv_bytes"].get<double>() / (1024.0 * 1024.0));
}

void expect_csv_matches(const std::string& csv, const std::vector<std::string>& columns, const json& rows,
                        const std::vector<std::pair<std::string, json::json_pointer>>& checks) {
    const auto table = parse_csv(csv);
    ASSERT_EQ(table.size(), rows.size() + 1);
    EXPECT_EQ(table[0], columns);
    for (size_t r = 0; r < rows.size(); ++r) {
        ASSERT_EQ(table[r + 1].size(), columns.size()) << "line " << r + 2;
        for (const auto& [column, pointer] : checks) {
            const size_t c = size_t(std::find(columns.begin(), columns.end(), column) - columns.begin());
            ASSERT_LT(c, columns.size()) << column;
            EXPECT_DOUBLE_EQ(std::stod(table[r + 1][c]), rows[r].at(pointer).get<double>()) << column << " line " << r + 2;
        }
    }
}

const std::vector<std::pair<std::string, json::json_pointer>> kTable2Checks{
    {"n_tools", json::json_pointer("/n_tools")},
    {"prefix_tokens", json::json_pointer("/prefix_tokens")},
    {"kv_bytes", json::json_pointer("/kv_bytes")},
    {"compile_ms", json::json_pointer("/compile_ms")},
    {"full_ttft_p50_ms", json::json_pointer("/full_prefill/ttft_ms/p50")},
    {"cached_ttft_p50_ms", json::json_pointer("/cache_hit/ttft_ms/p50")},
    {"speedup", json::json_pointer("/amortization/speedup_factor")},
    {"saving_per_request_ms", json::json_pointer("/amortization/savings_per_request_ms")},
    {"break_even_requests", json::json_pointer("/amortization/break_even_requests")},
    {"saved_after_1000_ms", json::json_pointer("/amortization/savings_1000_requests_ms")},
    {"identical_outputs", json::json_pointer("/identical_outputs")}};
const std::vector<std::pair<std::string, json::json_pointer>> kTable3Checks{
    {"prefix_tokens", json::json_pointer("/prefix_tokens")},
    {"full_ttft_p95_ms", json::json_pointer("/full_prefill/ttft_ms/p95")},
    {"cached_ttft_p95_ms", json::json_pointer("/cache_hit/ttft_ms/p95")},
    {"cached_link_p50_ms", json::json_pointer("/cache_hit/link_ms/p50")},
    {"cached_prefill_p50_ms", json::json_pointer("/cache_hit/prefill_ms/p50")},
    {"full_prompt_tokens", json::json_pointer("/full_prefill/prompt_tokens/p50")}};

TEST(PaperBench, TinyRunOnTheTestModelIsConsistent) {
    cc::EngineOptions eo;
    eo.model_spec = "builtin:qwen3-test";
    cc::Engine engine(eo);
    const auto& model = engine.load_model();
    cc::PaperBenchOptions o;
    o.tool_sets = {cc::bundled_tool_set(5), cc::bundled_tool_set(10)};
    o.queries = cc::bundled_queries();
    o.n_queries = 3;
    o.warmup = 1;
    o.max_new_tokens = 2;
    o.system_prompt = cc::bundled_system_prompt();
    std::vector<cc::PaperBenchProgress> seen;
    std::vector<std::string> finished;  // the rows reported as they complete
    const auto rows = cc::run_paper_bench(engine, o, [&](const cc::PaperBenchProgress& p) {
        if (p.finished_row) finished.push_back(p.finished_row->tool_set);
        else seen.push_back(p);
    });
    ASSERT_EQ(rows.size(), 2u);
    ASSERT_EQ(seen.size(), size_t(2 * (1 + 2 * (1 + 3))));
    EXPECT_EQ(finished, (std::vector<std::string>{"tools_5", "tools_10"}));
    EXPECT_EQ(seen.back().done, seen.back().total);
    EXPECT_EQ(seen.back().set_index, 1u);
    EXPECT_EQ(rows[0].n_tools, 5u);
    EXPECT_EQ(rows[1].n_tools, 10u);
    EXPECT_LT(rows[0].prefix_tokens, rows[1].prefix_tokens);
    for (const auto& r : rows) EXPECT_EQ(r.kv_bytes, r.prefix_tokens * model.kv_bytes_per_token);

    const json result = cc::paper_bench_json(rows, o, model);
    EXPECT_EQ(result["benchmark"], "paper_tables");
    for (const char* key : {"commit", "date", "machine", "model", "model_fingerprint", "backend", "numerics", "device", "threads"})
        EXPECT_TRUE(result["run"].contains(key)) << key;
    EXPECT_EQ(result["run"]["model"], "builtin:qwen3-test");
    EXPECT_EQ(result["options"]["n_queries"], 3);
    EXPECT_EQ(result["options"]["warmup"], 1);
    EXPECT_EQ(result["options"]["tool_sets"][1]["n_tools"], 10);
    ASSERT_EQ(result["rows"].size(), 2u);
    for (const auto& row : result["rows"]) expect_consistent(row, 3);
    expect_csv_matches(cc::table2_csv(rows), cc::table2_columns(), result["rows"], kTable2Checks);
    expect_csv_matches(cc::table3_csv(rows), cc::table3_columns(), result["rows"], kTable3Checks);
}

TEST(PaperBench, ProgressCanCancel) {
    cc::EngineOptions eo;
    eo.model_spec = "builtin:qwen3-test";
    cc::Engine engine(eo);
    engine.load_model();
    cc::PaperBenchOptions o;
    o.tool_sets = {cc::bundled_tool_set(5)};
    o.queries = {"hello"};
    o.n_queries = 5;
    o.warmup = 0;
    o.max_new_tokens = 1;
    int calls = 0;
    EXPECT_THROW(cc::run_paper_bench(engine, o,
                                     [&](const cc::PaperBenchProgress&) {
                                         if (++calls == 3) throw cc::Cancelled();
                                     }),
                 cc::Cancelled);
    EXPECT_EQ(calls, 3);
    o.n_queries = 0;
    EXPECT_THROW(cc::run_paper_bench(engine, o), std::invalid_argument);
}

// ---- contextcache-cli bench -----------------------------------------------------------------------

const std::vector<std::string> kTiny{"--model", "builtin:qwen3-test", "bench", "--tool-counts", "5,10",
                                     "--n-queries", "3", "--warmup", "0", "--max-new-tokens", "2"};

std::vector<std::string> tiny(std::vector<std::string> extra) {
    auto args = kTiny;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

TEST(CliBench, JsonAndOutFilesAgree) {
    cc::test::TempDir dir;
    const auto r = cc::test::run_cli(tiny({"--json", "--out", (dir.path() / "out").string()}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json result = json::parse(r.out);
    EXPECT_EQ(result["run"]["model"], "builtin:qwen3-test");
    EXPECT_FALSE(result["run"]["model_fingerprint"].get<std::string>().empty());
    EXPECT_FALSE(result["run"]["commit"].get<std::string>().empty());
    EXPECT_EQ(result["options"]["n_queries"], 3);
    ASSERT_EQ(result["rows"].size(), 2u);
    EXPECT_EQ(result["rows"][0]["tool_set"], "tools_5");
    for (const auto& row : result["rows"]) expect_consistent(row, 3);
    // results.json is the same measurement as stdout
    const json file = json::parse(cc::test::read_file(dir.path() / "out/results.json"));
    EXPECT_EQ(file["rows"], result["rows"]);
    expect_csv_matches(cc::test::read_file(dir.path() / "out/table2.csv"), cc::table2_columns(), result["rows"], kTable2Checks);
    expect_csv_matches(cc::test::read_file(dir.path() / "out/table3.csv"), cc::table3_columns(), result["rows"], kTable3Checks);
}

// Without Qt there is no chart code: --plot is refused before anything runs, naming the reason.
// The CLI links no Qt: --plot names the app command that draws the charts (ui_test_bench_panel
// checks that `contextcache --plot-bench DIR` writes them).
TEST(CliBench, PlotIsAUsageErrorNamingTheAppCommand) {
    cc::test::TempDir dir;
    const auto r = cc::test::run_cli(tiny({"--plot", (dir.path() / "plots").string()}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("contextcache --plot-bench DIR"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "plots"));
}

TEST(CliBench, TableAndCsvOnStdout) {
    auto r = cc::test::run_cli({"--model", "builtin:qwen3-test", "bench", "--tool-counts", "5", "--n-queries", "1",
                                "--warmup", "0", "--max-new-tokens", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Table 2: deployment economics"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Table 3: TTFT scaling"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("synthetic weights"), std::string::npos) << r.out;
    r = cc::test::run_cli(tiny({"--csv"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto blank = r.out.find("\n\n");
    ASSERT_NE(blank, std::string::npos) << r.out;
    const auto t2 = parse_csv(r.out.substr(0, blank)), t3 = parse_csv(r.out.substr(blank + 2));
    ASSERT_EQ(t2.size(), 3u);
    ASSERT_EQ(t3.size(), 3u);
    EXPECT_EQ(t2[0], cc::table2_columns());
    EXPECT_EQ(t3[0], cc::table3_columns());
}

TEST(CliBench, BadOptionsAreUsageErrors) {
    for (const auto& extra : std::vector<std::vector<std::string>>{{"--n-queries", "0"},
                                                                   {"--n-queries", "many"},
                                                                   {"--tool-counts", "0"},
                                                                   {"--tool-counts", "101"},
                                                                   {"--tool-counts", "5,x"},
                                                                   {"--warmup", "-1"},
                                                                   {"--max-new-tokens", "0"},
                                                                   {"--tools", "a.json"},
                                                                   {"--bogus", "1"}}) {
        const auto r = cc::test::run_cli(tiny(extra));
        EXPECT_EQ(r.exit_code, 2) << extra[0] << " " << extra[1] << ": " << r.err;
        EXPECT_NE(r.err.find("usage error"), std::string::npos) << r.err;
    }
}

TEST(CliBench, BadQueryFileNamesTheFile) {
    cc::test::TempDir dir;
    const auto path = dir.path() / "queries.json";
    std::ofstream(path) << "[\"ok\", 7]";
    const auto r = cc::test::run_cli(tiny({"--queries", path.string()}));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(path.string() + ": the top level[1] must be a non-empty string"), std::string::npos) << r.err;
    const auto missing = cc::test::run_cli(tiny({"--queries", (dir.path() / "nope.json").string()}));
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("nope.json"), std::string::npos) << missing.err;
}

}  // namespace
