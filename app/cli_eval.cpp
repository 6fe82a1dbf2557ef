// contextcache-cli eval: tool-calling quality on a dataset (core/research/eval.h, core/research/eval_runner.h).
// stdout: the summary (one JSON object with --json, a table otherwise); --out DIR also writes
// examples.jsonl (one record per example), summary.json and summary.csv. Every result carries the
// run's metadata (cc::run_info_json). Exit 3 when two outputs were compared and some differ.
#include "app/cli_common.h"
#include "core/research/eval.h"
#include "core/research/eval_runner.h"
#include "core/research/run_info.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace cli {
namespace {

std::string ratio_text(const std::optional<double>& v) {
    if (!v) return "-";
    std::ostringstream ss;
    ss << std::fixed << std::setprecision(3) << *v;
    return ss.str();
}

std::string csv_number(const std::optional<double>& v) {
    if (!v) return "";
    std::ostringstream ss;
    ss << std::setprecision(17) << *v;
    return ss.str();
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

void write_text(const std::filesystem::path& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    if (!f) throw std::runtime_error(path.string() + ": write failed");
}

std::string json_line(const ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string summary_csv(const cc::EvalRunResult& r, const ordered_json& run) {
    std::ostringstream out;
    out << "mode,n_examples,n_tool_call,n_no_call,correct_tool,wrong_tool,exact_match_count,false_positives,"
           "false_negatives,tsa,pf1,em,fpr,fnr,mean_ttft_ms,mean_total_ms,compared,identical_tokens,"
           "identical_logits,synthetic_weights,warning,dataset,model,model_fingerprint,backend,numerics,device,threads,"
           "commit,date\n";
    for (const auto& s : r.summaries) {
        const auto& m = s.metrics;
        out << s.mode << ',' << m.n_examples << ',' << m.n_tool_call << ',' << m.n_no_call << ',' << m.n_correct_tool
            << ',' << m.n_wrong_tool << ',' << m.n_exact << ',' << m.n_false_positive << ',' << m.n_false_negative
            << ',' << csv_number(m.tsa) << ',' << csv_number(m.pf1) << ',' << csv_number(m.em) << ','
            << csv_number(m.fpr) << ',' << csv_number(m.fnr) << ',' << csv_number(s.mean_ttft_ms) << ','
            << csv_number(s.mean_total_ms) << ',' << r.n_compared << ',' << r.n_identical_tokens << ','
            << r.n_identical_logits << ',' << (r.synthetic_weights ? "true" : "false") << ','
            << (r.synthetic_weights ? csv_field(cc::kSyntheticEvalWarning) : std::string()) << ','
            << csv_field(r.dataset) << ',' << csv_field(run["model"].get<std::string>()) << ','
            << run["model_fingerprint"].get<std::string>() << ',' << run["backend"].get<std::string>() << ','
            << csv_field(run["numerics"].get<std::string>()) << ',' << csv_field(run["device"].get<std::string>())
            << ',' << run["threads"].dump() << ',' << csv_field(run["commit"].get<std::string>()) << ','
            << run["date"].get<std::string>() << '\n';
    }
    return out.str();
}

void print_table(const cc::EvalRunResult& r, const cc::EvalDataset& ds, const ordered_json& run) {
    std::cout << "dataset  " << r.dataset << " (" << r.records.size() << " of " << ds.examples.size() << " examples";
    size_t n_call = 0;
    for (const auto& rec : r.records) n_call += rec.expected.has_value();
    std::cout << ": " << n_call << " with a tool call, " << r.records.size() - n_call << " without)\n"
              << "model    " << r.model << " on " << run["numerics"].get<std::string>() << ", commit "
              << run["commit"].get<std::string>() << "\n";
    if (r.synthetic_weights) std::cout << "WARNING: " << cc::kSyntheticEvalWarning << "\n";
    if (r.cancelled) std::cout << "(cancelled: the figures cover the finished examples only)\n";
    std::cout << "\nmode            TSA    PF1     EM    FPR    FNR  correct  wrong   FP   FN  mean TTFT ms\n";
    for (const auto& s : r.summaries) {
        const auto& m = s.metrics;
        std::cout << std::left << std::setw(12) << s.mode << std::right << std::setw(7) << ratio_text(m.tsa)
                  << std::setw(7) << ratio_text(m.pf1) << std::setw(7) << ratio_text(m.em) << std::setw(7)
                  << ratio_text(m.fpr) << std::setw(7) << ratio_text(m.fnr) << std::setw(9) << m.n_correct_tool
                  << std::setw(7) << m.n_wrong_tool << std::setw(5) << m.n_false_positive << std::setw(5)
                  << m.n_false_negative << std::setw(14) << std::fixed << std::setprecision(1) << s.mean_ttft_ms
                  << "\n";
    }
    for (const auto& s : r.summaries)
        std::cout << (&s == &r.summaries.front() ? "\n" : "") << "schema-valid calls (" << s.mode
                  << "): " << s.n_schema_valid << " / " << s.n_calls << "\n";
    if (r.n_compared)
        std::cout << "\nidentical outputs (token for token): " << r.n_identical_tokens << " / " << r.n_compared
                  << "; bit-identical logits: " << r.n_identical_logits << " / " << r.n_compared << "\n";
    if (const cc::NopeMeans m = cc::nope_means(r.records); m.n)
        std::cout << "per-tool NoPE vs full prefill, means over " << m.n << " examples: first-token logit cosine "
                  << std::setprecision(4) << m.logit_cosine_first << ", KL(full || composed) " << m.kl_first
                  << " nats; over the teacher-forced steps: cosine " << m.logit_cosine_mean << ", top-1 agreement "
                  << m.top1_agreement << (m.nan_figures ? " (some figures undefined, left out)" : "") << "\n";
    std::cout << "(TSA, EM, FNR over tool-call examples; PF1 over correct-tool examples; FPR over no-call examples; - "
                 "= undefined)\n";
}

}  // namespace

int cmd_eval(Args& args, const cc::EngineOptions& options, bool json) {
    const std::string dataset_path = args.require("dataset", "eval");
    cc::EvalRunOptions run_options;
    run_options.mode = args.get_or("mode", "cached");
    try {
        cc::eval_query_mode(run_options.mode);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--") + e.what());
    }
    if (auto v = args.get("limit")) run_options.limit = static_cast<size_t>(parse_int(*v, "--limit", 1, INT32_MAX));
    run_options.query.max_new_tokens =
        static_cast<int>(parse_int(args.get_or("max-new-tokens", "128"), "--max-new-tokens", 1, 1 << 20));
    run_options.system_prompt = system_prompt(args);
    run_options.query.tool_choice.strict = args.flag("strict");  // strict calls for every tool (docs/cli.md)
    const auto out_dir = args.get("out");
    const bool quiet = args.flag("quiet");
    args.check_all_used();

    const auto dataset = cc::load_eval_dataset(dataset_path);  // bad input: exit 1 naming file:line
    cc::Engine engine(options);
    engine.load_model();
    const auto run = cc::run_info_json(engine.model_info());
    auto progress = [&](const cc::EvalProgress& p) {
        if (quiet) return;
        const auto& rec = *p.last;
        std::cerr << "[" << p.done << "/" << p.total << "] " << rec.id << ":";
        for (const auto& o : rec.outputs)
            std::cerr << " " << o.mode << "=" << (o.tool_call ? o.tool_call->name : std::string("(no call)"));
        if (rec.identical_tokens) std::cerr << (*rec.identical_tokens ? " identical" : " DIFFERENT");
        std::cerr << "\n";
    };
    const auto result = cc::run_eval(engine, dataset, run_options, progress);
    engine.wait_for_persist();
    report_warnings(engine);

    ordered_json summary = cc::eval_summary_json(result);
    summary["run"] = run;
    summary["max_new_tokens"] = run_options.query.max_new_tokens;
    if (out_dir) {
        const std::filesystem::path dir = *out_dir;
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (ec) throw std::runtime_error(dir.string() + ": cannot create: " + ec.message());
        std::string lines;
        for (const auto& rec : result.records) {
            auto j = cc::to_json(rec);
            j["run"] = run;
            if (result.synthetic_weights) j["warning"] = cc::kSyntheticEvalWarning;
            lines += json_line(j) + "\n";
        }
        write_text(dir / "examples.jsonl", lines);
        write_text(dir / "summary.json", summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
        write_text(dir / "summary.csv", summary_csv(result, run));
    }
    if (json)
        print_json(summary);
    else
        print_table(result, dataset, run);
    if (result.n_compared && result.n_identical_tokens != result.n_compared) return 3;
    return 0;
}

}  // namespace cli
