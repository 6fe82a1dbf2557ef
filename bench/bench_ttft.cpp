// bench_ttft: full-prefill TTFT vs cache-hit TTFT (link + suffix prefill) for growing tool sets,
// compile time, decode speed and KV size. Prints one JSON object.
//   bench_ttft [--model SPEC] [--tools 5,10,20,50] [--runs 5] [--warmup 1] [--max-new-tokens 16]
//              [--threads N] [--query TEXT]
#include "bench/bench_common.h"
#include "core/engine.h"

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace {

std::vector<int> parse_counts(const std::string& s) {
    std::vector<int> v;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) v.push_back(std::atoi(item.c_str()));
    return v;
}

cc::ToolSet first_tools(int n) {
    const std::string path = std::string(CC_SOURCE_DIR) + "/resources/toolsets/tools_100.json";
    auto arr = nlohmann::ordered_json::parse(std::ifstream(path));
    nlohmann::ordered_json subset = nlohmann::ordered_json::array();
    for (int i = 0; i < n && i < static_cast<int>(arr.size()); ++i) subset.push_back(arr[i]);
    return cc::ToolSet::from_json_text(subset.dump(), path);
}

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
    std::string model = "builtin:qwen3-demo", query = "What's the weather in Oslo tomorrow, in Celsius?";
    std::vector<int> counts{5, 10, 20, 50};
    int runs = 5, warmup = 1, max_new = 16, threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--model") model = v;
        else if (a == "--tools") counts = parse_counts(v);
        else if (a == "--runs") runs = std::atoi(v.c_str());
        else if (a == "--warmup") warmup = std::atoi(v.c_str());
        else if (a == "--max-new-tokens") max_new = std::atoi(v.c_str());
        else if (a == "--threads") threads = std::atoi(v.c_str());
        else if (a == "--query") query = v;
        else {
            std::cerr << "bench_ttft: unknown option " << a << "\n";
            return 2;
        }
    }
    cc::EngineOptions options;
    options.model_spec = model;
    options.n_threads = threads;
    cc::Engine engine(options);
    const auto& info = engine.load_model();
    const std::string system = read_text(std::string(CC_SOURCE_DIR) + "/resources/system_prompt.txt");

    nlohmann::ordered_json out;
    out["benchmark"] = "bench_ttft";
    out["machine"] = cc::bench::machine_json();
    out["model"] = model;
    out["synthetic_weights"] = info.synthetic_weights;
    out["backend"] = info.numerics;
    out["threads"] = info.n_threads;
    out["runs"] = runs;
    out["warmup"] = warmup;
    out["max_new_tokens"] = max_new;
    out["results"] = nlohmann::ordered_json::array();

    for (const int n_tools : counts) {
        const auto tools = first_tools(n_tools);
        std::vector<double> compile_ms, prefix_prefill_ms, full_ttft, cached_ttft, cached_link, cached_prefill,
            decode_tok_s, full_prefill;
        cc::CompileResult compiled;
        cc::QueryOptions q;
        q.max_new_tokens = max_new;
        q.ignore_eos = true;
        for (int r = 0; r < warmup + runs; ++r) {
            const bool keep = r >= warmup;
            // compile: a forced miss each run
            engine.cache().clear();
            compiled = engine.set_tools(tools, system);
            // the same prefix through a plain full prefill (no cache bookkeeping), for the overhead ratio
            cc::Stopwatch sw;
            const auto pieces = cc::make_chat_format(info.chat_format)->prefix_pieces(tools, system);
            const auto prefix_ids = cc::tokenize_pieces(engine.tokenizer(), pieces);
            engine.last_logits(prefix_ids);
            const double plain_prefill = sw.elapsed_ms();
            q.mode = cc::QueryMode::full;
            const auto full = engine.query(query, q);
            q.mode = cc::QueryMode::cached;
            const auto cached = engine.query(query, q);
            if (!cached.cache_hit) {
                std::cerr << "bench_ttft: expected a cache hit\n";
                return 1;
            }
            if (full.tokens != cached.tokens) {
                std::cerr << "bench_ttft: cached and full prefill produced different tokens\n";
                return 1;
            }
            if (!keep) continue;
            compile_ms.push_back(compiled.compile_ms);
            prefix_prefill_ms.push_back(plain_prefill);
            full_ttft.push_back(full.timings.ttft_ms);
            full_prefill.push_back(full.timings.prefill_ms);
            cached_ttft.push_back(cached.timings.ttft_ms);
            cached_link.push_back(cached.timings.link_ms);
            cached_prefill.push_back(cached.timings.prefill_ms);
            decode_tok_s.push_back(cached.timings.decode_tok_s);
        }
        using cc::bench::median;
        nlohmann::ordered_json row;
        row["n_tools"] = n_tools;
        row["prefix_tokens"] = compiled.prefix_tokens;
        row["kv_bytes"] = compiled.kv_bytes;
        row["compile_ms"] = median(compile_ms);
        row["prefix_full_prefill_ms"] = median(prefix_prefill_ms);
        row["compile_overhead"] = median(compile_ms) / median(prefix_prefill_ms) - 1.0;
        row["full_ttft_ms"] = median(full_ttft);
        row["full_prefill_ms"] = median(full_prefill);
        row["cached_ttft_ms"] = median(cached_ttft);
        row["cached_link_ms"] = median(cached_link);
        row["cached_prefill_ms"] = median(cached_prefill);
        row["speedup"] = median(full_ttft) / median(cached_ttft);
        row["decode_tok_s"] = median(decode_tok_s);
        out["results"].push_back(row);
        std::cerr << n_tools << " tools: " << compiled.prefix_tokens << " prefix tokens, full TTFT " << median(full_ttft)
                  << " ms, cached TTFT " << median(cached_ttft) << " ms (" << median(full_ttft) / median(cached_ttft)
                  << "x), compile " << median(compile_ms) << " ms\n";
    }
    std::cout << out.dump(2) << "\n";
    return 0;
}
