// bench_tool_edits: the tool-removal table (issue 18 item 2). For each tool set it compiles the
// full set, then for each position k removes the k-th tool in canonical order and compiles the
// edited set (a) in the engine holding the full group, which reuses the longest common token
// prefix and computes the rest, and (b) from scratch in an empty store. Reports reused tokens and
// %, both compile times, the speed-up, and `==` checks of the two KV images (group file payloads)
// and of a query's first-token logits. Prints one JSON object (machine, commit, model).
//   bench_tool_edits [--model SPEC] [--tools 20,50,100] [--positions spread|all|0,5,19] [--runs 1]
//                    [--warmup 0] [--threads N] [--query TEXT]
// spread = first, the quartiles, last. Each run of (a) starts from a store holding only the full
// group (the edited group is removed after it), each run of (b) from an empty one; times are
// medians over --runs (after --warmup runs), and one side's group file is written (in the
// background) before the other side is timed.
#include "app/backends.h"
#include "bench/bench_common.h"
#include "core/engine/engine.h"
#include "core/research/paper_bench.h"
#include "core/research/run_info.h"
#include "core/research/sample_stats.h"
#include "core/research/tool_edits.h"
#include "core/store/group_file.h"

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace {

namespace fs = std::filesystem;

std::vector<size_t> positions_for(const std::string& spec, size_t n_tools) {
    std::vector<size_t> k;
    if (spec == "all") {
        for (size_t i = 0; i < n_tools; ++i) k.push_back(i);
    } else if (spec == "spread") {
        k = {0, n_tools / 4, n_tools / 2, 3 * n_tools / 4, n_tools - 1};
    } else {
        for (size_t i : cc::bench::parse_size_list(spec))
            if (i < n_tools) k.push_back(i);
    }
    std::sort(k.begin(), k.end());
    k.erase(std::unique(k.begin(), k.end()), k.end());
    return k;
}

// One engine with its own cache directory.
struct Side {
    fs::path dir;
    std::unique_ptr<cc::Engine> engine;
};

Side make_side(const cc::EngineOptions& base, const std::string& name) {
    char tmpl[] = "/tmp/bench_tool_edits_XXXXXX";
    Side s;
    s.dir = fs::path(mkdtemp(tmpl)) / name;
    cc::EngineOptions o = base;
    o.cache.dir = s.dir;
    s.engine = std::make_unique<cc::Engine>(o);
    s.engine->load_model();
    return s;
}

std::vector<float> first_token_logits(cc::Engine& e, const std::string& query) {
    cc::QueryOptions o;
    o.mode = cc::QueryMode::cached;
    o.max_new_tokens = 1;
    o.keep_logits = true;
    return e.query(query, o).step_logits.at(0);
}

std::vector<std::byte> kv_image(const Side& s, const std::string& group_key) {
    s.engine->wait_for_persist();
    std::vector<std::byte> payload;
    cc::read_group_file(s.dir / "groups" / (group_key + ".kv"), payload);
    return payload;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model = "builtin:qwen3-demo", positions = "spread", query = "What's the weather in Oslo tomorrow, in Celsius?";
    std::vector<size_t> counts{20, 50, 100};
    int runs = 1, warmup = 0, threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--model") model = v;
        else if (a == "--tools") counts = cc::bench::parse_size_list(v);
        else if (a == "--positions") positions = v;
        else if (a == "--runs") runs = std::max(1, std::atoi(v.c_str()));
        else if (a == "--warmup") warmup = std::max(0, std::atoi(v.c_str()));
        else if (a == "--threads") threads = std::atoi(v.c_str());
        else if (a == "--query") query = v;
        else {
            std::cerr << "bench_tool_edits: unknown option " << a << "\n";
            return 2;
        }
    }
    cc::EngineOptions options;
    options.model_spec = model;
    options.n_threads = threads;
    options.backend = "cpu";
    options.backends = cc::app::available_backends();
    Side reuse = make_side(options, "reuse");
    Side scratch = make_side(options, "scratch");
    const auto& info = reuse.engine->model_info();
    const std::string system = cc::bundled_system_prompt();

    nlohmann::ordered_json out;
    out["benchmark"] = "bench_tool_edits";
    out["run"] = cc::run_info_json(info);
    out["command"] = [&] {
        std::string c;
        for (int i = 0; i < argc; ++i) c += (i ? " " : "") + std::string(argv[i]);
        return c;
    }();
    out["model"] = model;
    out["synthetic_weights"] = info.synthetic_weights;
    out["backend"] = info.numerics;
    out["threads"] = info.n_threads;
    out["runs"] = runs;
    out["warmup"] = warmup;
    out["results"] = nlohmann::ordered_json::array();
    bool all_identical = true;

    for (const size_t n_tools : counts) {
        const cc::ToolSet full = cc::bundled_tool_set(static_cast<int>(n_tools)).tools;
        reuse.engine->cache().clear();
        const auto full_compile = reuse.engine->set_tools(full, system);
        reuse.engine->wait_for_persist();
        // the scratch side's first compile would pay the process's warm-up (page faults, threads)
        scratch.engine->set_tools(full, system);
        scratch.engine->wait_for_persist();
        const auto full_ids = cc::render_prompt(reuse.engine->chat_format(), reuse.engine->tokenizer(), full, system, "q").prefix_ids;
        for (const size_t k : positions_for(positions, n_tools)) {
            const cc::ToolSet edited = cc::ToolSet::from_tools(cc::without_tool(full.tools(), k), "edited");
            const auto edited_ids =
                cc::render_prompt(reuse.engine->chat_format(), reuse.engine->tokenizer(), edited, system, "q").prefix_ids;
            std::vector<double> reuse_ms, scratch_ms;
            cc::CompileResult a, b;
            bool kv_identical = true, logits_identical = true;
            for (int r = 0; r < warmup + runs; ++r) {
                a = reuse.engine->set_tools(edited, system);
                // the group file is written in the background: not while the other side is timed
                reuse.engine->wait_for_persist();
                scratch.engine->cache().clear();
                b = scratch.engine->set_tools(edited, system);
                if (a.tier != cc::Tier::miss || b.tier != cc::Tier::miss || b.reused_tokens != 0) {
                    std::cerr << "bench_tool_edits: expected two misses, the second from scratch\n";
                    return 1;
                }
                if (r >= warmup) {
                    reuse_ms.push_back(a.compile_ms);
                    scratch_ms.push_back(b.compile_ms);
                }
                kv_identical = kv_identical && kv_image(reuse, a.group_key) == kv_image(scratch, b.group_key);
                logits_identical = logits_identical &&
                                   first_token_logits(*reuse.engine, query) == first_token_logits(*scratch.engine, query);
                reuse.engine->cache().remove(a.group_key);  // the store holds the full group only again
            }
            all_identical = all_identical && kv_identical && logits_identical;
            nlohmann::ordered_json row;
            row["n_tools"] = n_tools;
            row["k"] = k;
            row["removed_tool"] = full.tools()[k].name;
            row["full_prefix_tokens"] = full_compile.prefix_tokens;
            row["full_compile_ms"] = full_compile.compile_ms;
            row["prefix_tokens"] = a.prefix_tokens;
            row["reused_tokens"] = a.reused_tokens;
            row["reused_percent"] = a.reused_percent();
            row["reused_is_common_prefix"] = a.reused_tokens == cc::common_prefix_tokens(full_ids, edited_ids);
            row["reuse_compile_ms"] = cc::median(reuse_ms);
            row["scratch_compile_ms"] = cc::median(scratch_ms);
            row["speedup"] = cc::median(scratch_ms) / cc::median(reuse_ms);
            row["kv_identical"] = kv_identical;
            row["first_token_logits_identical"] = logits_identical;
            out["results"].push_back(row);
            std::cerr << n_tools << " tools, remove k=" << k << " (" << full.tools()[k].name << "): reused "
                      << a.reused_tokens << "/" << a.prefix_tokens << " (" << a.reused_percent() << "%), "
                      << cc::median(reuse_ms) << " ms vs " << cc::median(scratch_ms) << " ms from scratch; KV "
                      << (kv_identical ? "==" : "DIFFERENT") << ", logits " << (logits_identical ? "==" : "DIFFERENT")
                      << "\n";
        }
    }
    out["all_identical"] = all_identical;
    reuse.engine.reset();
    scratch.engine.reset();
    fs::remove_all(reuse.dir.parent_path());
    fs::remove_all(scratch.dir.parent_path());
    std::cout << out.dump(2) << "\n";
    return all_identical ? 0 : 1;
}
