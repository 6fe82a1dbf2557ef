// contextcache-cli: the headless face of ContextCache (DESIGN §9).
// Every command prints one JSON object with --json (human text otherwise). Errors: one line on
// stderr naming the file and the problem; exit 1 for bad input, 2 for bad usage.
#include "app/cli_common.h"
#include "core/base/embedded_resources.h"
#include "core/base/machine_info.h"
#include "core/base/paths.h"
#include "core/base/sha256.h"
#include "core/engine/engine.h"
#include "core/engine/miss_reason.h"
#include "core/engine/result_json.h"
#include "core/model/builtin_model.h"
#include "core/model/model_spec.h"
#include "core/research/nope.h"
#include "core/serve/server.h"
#include "core/store/group_store.h"
#include "core/text/chat_format.h"
#include "core/text/keys.h"
#include "core/text/tokenizer.h"
#include "core/text/tool_set.h"
#include "core/text/tool_set_diff.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

// "1843 of 2851 prefix tokens reused (64.6%)": what a miss took from the stored group sharing the
// longest token prefix (a tool-set edit keeps the tools before the first change).
std::string reuse_note(const cc::CompileResult& r) {
    char percent[32];
    std::snprintf(percent, sizeof percent, "%.1f%%", r.reused_percent());
    return std::to_string(r.reused_tokens) + " of " + std::to_string(r.prefix_tokens) + " prefix tokens reused (" +
           percent + ")";
}

using namespace cli;

const char* kUsage = R"(usage: contextcache-cli [global options] COMMAND [options]

global options:
  --model SPEC        builtin:NAME (default builtin:toolcaller) or an HF model directory
                      built-in: qwen3-demo, qwen3-test, qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b
                      (synthetic weights: timings and exactness are real, text is not), and
                      toolcaller (a small model trained here for tool selection, embedded)
  --backend B         auto | cpu | cuda (default auto)
  --threads N         CPU threads (default: all cores)
  --kv-dtype D        f32 | bf16 (default f32; bf16 for serve)
  --weights W         stored | f32 | bf16 | q8 | bf16dot: weights in memory (default stored: as the
                      checkpoint holds them); bf16dot also rounds activations to BF16 and
                      multiplies with AVX-512 BF16 (faster prefill; CPUs with it); CPU backend only
  --chat-format F     qwen3 | llama3 | mistral | plain (default: chosen from config.json)
  --cache-dir DIR     cache directory (default $XDG_CACHE_HOME/contextcache): group files, index, fingerprints
  --host-budget-bytes N  memory tier budget (default 4 GiB)
  --disk-budget-bytes N  disk tier budget (default 32 GiB)
  --gpu-budget-bytes N   GPU tier budget, device KV (default 8 GiB; CUDA backend only)
  --remote URL        shared remote tier on Redis, redis://[[user]:password@]host:port[/db] (docs/cache.md):
                      groups missed locally are fetched from it, compiled groups published to it
  --remote-chunk-bytes N  chunk size in Redis (default 1 MiB)
  --remote-wait-ms N  how long to wait for another replica compiling the same group (default 30000)
  --remote-warm-mb N  resident memory kept warm for fetched groups (default 256 for serve, else 0;
                      docs/deploy.md): fetches skip first-touch page faults; costs that much RSS
  --kv-warm-mb N      memory kept resident for KV blocks, where freed KV storage returns
                      (default 512 for serve, else 0; CPU backend; docs/server.md): a request's
                      block skips first-touch page faults
  --kv-warm-fill on-demand|up-front  how that memory is made resident: as much as the blocks
                      so far lacked (default; buffers above N/4 bypass it), or all N MiB when the
                      model loads (N MiB of RSS from the start)
  --json              print one JSON object (JSON lines for --jsonl)
  --help              this text

commands:
  version                                     the commit this binary was built from (git describe;
                                              -dirty: from a tree with uncommitted changes)
  info                                        model, backend, fingerprint, shapes, CUDA devices
  compile --tools FILE [--system S | --system-file F]
                                              compute the prefix KV of a tool set (CompileResult)
  query --tools FILE --query Q [--system S | --system-file F] [--mode cached|full|compare|per_tool_nope]
        [--max-new-tokens N] [--temperature T] [--top-p P] [--seed S] [--repeat N] [--ignore-eos]
        [--tool-choice auto|none|required|NAME] [--strict]
                                              answer a query (QueryResult with the timing split);
                                              per_tool_nope: the paper's per-tool cache experiment
                                              vs full prefill (logit cosine, top-1, KL, RoPE check)
                                              --tool-choice required|NAME: the answer opens with a
                                              call to an offered tool / to NAME (constrained decoding)
                                              --strict: a call's arguments are masked to JSON its
                                              tool's parameters schema accepts (docs/cli.md)
  chat --messages FILE.json [--tools FILE] [--system S] [--mode cached|full|compare] [--each-turn]
       [--thinking] [--max-new-tokens N] [--temperature T] [--seed S] [--ignore-eos]
       [--tool-choice auto|none|required|NAME] [--strict]
  chat -i [--tools FILE] [--system S]         a conversation (OpenAI-style messages, or a request body
                                              {"messages", "tools"}): the reply to the last turn with
                                              group / conversation / prefilled tokens and timings;
                                              --each-turn: a request at every assistant turn, in order;
                                              -i: type turns, paste tool results (JSON lines with --json)
  generate (--prompt-ids 1,2,3 | --prompt T) [--max-new-tokens N] [--ignore-eos] [--repeat N]
                                              raw LM greedy continuation, no chat format
  logits (--prompt-ids 1,2,3 | --prompt T)    all last-position logits
  cache ls | verify | rm KEY | clear | gc --max-bytes N
                                              the persistent group cache in --cache-dir
  export --out DIR                            write a built-in model as an HF directory (config.json,
                                              model.safetensors, the Qwen3 tokenizer files)
  tokenize (--text T | --file F | --jsonl F)  token ids; [--mode plain|template] [--add-special-tokens]
           [--tokenizer PATH] [--decode]      (--jsonl: one {"text": ...} per line in, {"ids": [...]} out)
  key --tools FILE [--system S | --system-file F] [--serve]
                                              tools_hash and group_key of a tool set; --serve: the key
                                              `serve` uses here (its BF16 KV and weights defaults), the
                                              one to send in X-ContextCache-Group
  render --tools FILE --query Q [--system S | --system-file F]
                                              prefix/suffix text and ids exactly as the model sees them
  why --tools FILE [--system S | --system-file F] [--nearest N]
                                              why a tool set misses the cache: the nearest stored groups
                                              (same model, format, numerics), tools added / removed /
                                              changed (first differing field), system prompt, and the
                                              prefix tokens reusable from each (no weights loaded)
  bench [--tool-counts 5,10,20,50,100 | --tools F1,F2] [--queries F] [--n-queries 30] [--warmup 2]
        [--max-new-tokens 16] [--ignore-eos] [--system S | --system-file F] [--out DIR] [--csv] [--plot DIR]
                                              the paper's Tables 2 and 3 (full vs cached TTFT, compile,
                                              break-even); --out: results.json, table2.csv, table3.csv
  eval --dataset F [--mode cached|full|both|MODE] [--limit N] [--max-new-tokens N] [--strict] [--out DIR] [--quiet]
                                              tool-calling quality (TSA, PF1, EM, FPR, FNR) on a JSONL dataset
  chunk-reuse (--tools FILE --query Q | --dataset F [--limit N] [--out FILE.json]) [--seam 0,1,2,4,8,16]
        [--blend 0.05,0.1,0.15,0.3,0.5] [--check-layer 1] [--max-new-tokens N] [--system S | --system-file F]
                                              experiment: per-tool chunk K/V reused out of position with
                                              seam (KVBoost, first r tokens per tool) or selective
                                              (CacheBlend, fraction f) recompute, vs the full prefill and
                                              the exact cache (TTFT, logit cosine/KL, top-1, TSA)
  bfcl-import --bfcl DIR --out DIR [--splits live_simple,multiple,live_multiple,live_irrelevance]
        [--sample N] [--pool N] [--seed S]   BFCL v4 -> OUT/<split>.jsonl for eval --dataset (+ tools/,
                                              import.json); --pool N: shared N-tool sets (docs/evaluation.md)
  serve [--host 127.0.0.1] [--port 8080] [--api-key K] [--parallel N] [--step-tokens N] [--first-token-rows N]
        [--first-token-step-rows N] [--max-queue N] [--max-body-bytes N] [--request-timeout-s N]
        [--default-max-tokens N] [--malloc-arenas N]
                                              the HTTP server: OpenAI chat completions, POST/GET/DELETE
                                              /tools, /query, /status, /health, /metrics (docs/server.md);
                                              --parallel N requests at once (default 4 per core, 4..16),
                                              batched in steps of at most --step-tokens rows (256);
                                              a first-token prefill of at most --first-token-rows
                                              rows (64; 0: off) runs ahead of decoding requests;
                                              arriving together, at most --first-token-step-rows
                                              of their rows per step (128; 0: no cap);
                                              port 0 = any free port; Ctrl-C stops; at most 2 glibc
                                              malloc arenas unless --malloc-arenas (0: glibc's own)
  selftest [--backend cuda|cpu] [--quick]    check this build on this machine: a pass/fail table with
                                              measured errors (cuda: every op and the model vs the CPU;
                                              cpu: shared math vs float64, each CPU ISA, cached == full).
                                              Exit 0 all pass, 1 a failure, 77 skipped (no CUDA device)
)";

// ---- commands ---------------------------------------------------------------------------------

int cmd_tokenize(Args& args, const cc::ModelSource& model, bool json) {
    std::optional<std::filesystem::path> tokenizer_path;
    if (auto t = args.get("tokenizer")) tokenizer_path = *t;
    const std::string mode_name = args.get_or("mode", "plain");
    cc::EncodeMode mode;
    if (mode_name == "plain") mode = cc::EncodeMode::plain;
    else if (mode_name == "template") mode = cc::EncodeMode::template_;
    else throw UsageError("--mode must be plain or template, not \"" + mode_name + "\"");
    const bool add_special = args.flag("add-special-tokens");
    const bool decode = args.flag("decode");
    auto text = args.get("text");
    auto file = args.get("file");
    auto jsonl = args.get("jsonl");
    if ((text ? 1 : 0) + (file ? 1 : 0) + (jsonl ? 1 : 0) != 1)
        throw UsageError("tokenize needs exactly one of --text, --file, --jsonl");
    args.check_all_used();
    const auto tokenizer = tokenizer_path ? cc::Tokenizer::from_file(*tokenizer_path) : cc::load_model_tokenizer(model);

    auto encode_one = [&](const std::string& t) {
        ordered_json out;
        const auto ids = tokenizer.encode(t, mode, add_special);
        out["ids"] = ids;
        if (decode) out["text"] = tokenizer.decode(ids);
        return out;
    };
    if (jsonl) {
        std::ifstream in(*jsonl, std::ios::binary);
        if (!in) throw std::runtime_error(*jsonl + ": cannot open");
        std::string line;
        size_t line_no = 0;
        while (std::getline(in, line)) {
            ++line_no;
            if (line.empty()) continue;
            nlohmann::json item;
            try {
                item = nlohmann::json::parse(line);
            } catch (const nlohmann::json::parse_error& e) {
                throw std::runtime_error(*jsonl + ": line " + std::to_string(line_no) + ": invalid JSON");
            }
            if (!item.is_object() || !item.contains("text") || !item["text"].is_string())
                throw std::runtime_error(*jsonl + ": line " + std::to_string(line_no) + ": expected {\"text\": \"...\"}");
            print_json(encode_one(item["text"].get<std::string>()));
        }
        return 0;
    }
    const std::string input = text ? *text : read_file(*file);
    auto out = encode_one(input);
    if (json) {
        out["n_tokens"] = out["ids"].size();
        print_json(out);
    } else {
        std::cout << ids_text(out["ids"].get<std::vector<cc::token_id>>()) << "\n";
        if (decode) std::cout << out["text"].get<std::string>() << "\n";
        std::cerr << out["ids"].size() << " tokens\n";
    }
    return 0;
}

struct KeyInfo {
    std::string chat_format;
    cc::GroupKeyInputs inputs;
};

// The same key Engine::set_tools computes, without loading the weights.
KeyInfo key_info(const cc::ModelSource& model, const cc::Tokenizer& tokenizer, const cc::ToolSet& tools,
                 const std::string& system, const cc::EngineOptions& options) {
    KeyInfo k;
    k.chat_format = options.chat_format.empty() ? cc::model_chat_format(model, tokenizer) : options.chat_format;
    k.inputs.model_fingerprint =
        options.cache_dir.empty() ? cc::model_fingerprint(model) : cc::model_fingerprint(model, options.cache_dir);
    k.inputs.chat_format = k.chat_format;
    k.inputs.backend_numerics = cc::planned_numerics(options);
    k.inputs.system_prompt = system;
    k.inputs.tools_hash = tools.tools_hash();
    return k;
}

int cmd_key(Args& args, const cc::ModelSource& model, bool json, const cc::EngineOptions& options) {
    const auto tools = tools_arg(args, "key", true);
    const std::string system = system_prompt(args);
    args.check_all_used();
    const auto tokenizer = cc::load_model_tokenizer(model);
    const auto k = key_info(model, tokenizer, tools, system, options);
    ordered_json out;
    out["tools_hash"] = tools.tools_hash();
    out["group_key"] = cc::group_key(k.inputs);
    out["n_tools"] = tools.size();
    out["tool_names"] = tools.names();
    out["chat_format"] = k.chat_format;
    out["model_fingerprint"] = k.inputs.model_fingerprint;
    out["backend_numerics"] = k.inputs.backend_numerics;
    out["key_text"] = cc::group_key_text(k.inputs);
    if (json) print_json(out);
    else
        std::cout << "tools_hash  " << out["tools_hash"].get<std::string>() << "\n"
                  << "group_key   " << out["group_key"].get<std::string>() << "\n"
                  << "n_tools     " << tools.size() << "\n";
    return 0;
}

int cmd_render(Args& args, const cc::ModelSource& model, bool json, const cc::EngineOptions& options) {
    const auto tools = tools_arg(args, "render", false);
    const std::string query = args.require("query", "render");
    const std::string system = system_prompt(args);
    args.check_all_used();
    const auto tokenizer = cc::load_model_tokenizer(model);
    const auto k = key_info(model, tokenizer, tools, system, options);
    const auto format = cc::make_chat_format(k.chat_format);
    const auto r = cc::render_prompt(*format, tokenizer, tools, system, query);
    ordered_json out;
    out["chat_format"] = k.chat_format;
    out["tools_hash"] = tools.tools_hash();
    out["group_key"] = cc::group_key(k.inputs);
    out["n_tools"] = tools.size();
    out["prefix_tokens"] = r.prefix_ids.size();
    out["suffix_tokens"] = r.suffix_ids.size();
    out["prefix_text"] = r.prefix_text;
    out["suffix_text"] = r.suffix_text;
    out["prefix_ids"] = r.prefix_ids;
    out["suffix_ids"] = r.suffix_ids;
    out["full_ids"] = r.full_ids();
    if (json) {
        print_json(out);
    } else {
        std::cout << "----- prefix (" << r.prefix_ids.size() << " tokens, cacheable) -----\n" << r.prefix_text
                  << "\n----- suffix (" << r.suffix_ids.size() << " tokens, per query) -----\n" << r.suffix_text
                  << "\n-----\ntools_hash " << out["tools_hash"].get<std::string>() << "\ngroup_key  "
                  << out["group_key"].get<std::string>() << "\n";
    }
    return 0;
}

// Whether a tool set's group is stored, and if not, what the nearest stored groups differ in.
// Like key and render, it needs the tokenizer and the model's fingerprint, not its weights.
int cmd_why(Args& args, const cc::ModelSource& model, bool json, const cc::EngineOptions& options) {
    const auto tools = tools_arg(args, "why", true);
    const std::string system = system_prompt(args);
    const size_t max_nearest = static_cast<size_t>(parse_int(args.get_or("nearest", "3"), "--nearest", 1, 1000));
    args.check_all_used();
    const auto tokenizer = cc::load_model_tokenizer(model);
    const auto k = key_info(model, tokenizer, tools, system, options);
    const auto format = cc::make_chat_format(k.chat_format);
    cc::GroupMeta probe;  // the group this set would make
    probe.group_key = cc::group_key(k.inputs);
    probe.tools_hash = tools.tools_hash();
    probe.tool_names = tools.names();
    probe.tool_texts = cc::canonical_texts(tools);
    probe.prefix_ids = cc::render_prefix(*format, tokenizer, tools, system).ids;
    probe.model_fingerprint = k.inputs.model_fingerprint;
    probe.chat_format = k.chat_format;
    probe.backend_numerics = k.inputs.backend_numerics;
    probe.system_prompt_sha256 = cc::sha256_hex(system);
    cc::GroupStore store(options.cache);
    const cc::Tier tier = store.tier_of(probe.group_key);
    std::optional<cc::MissReason> reason;
    if (tier == cc::Tier::miss) reason = cc::explain_miss(store, probe, max_nearest);
    for (const auto& w : store.take_warnings()) std::cerr << "contextcache-cli: warning: " << w << "\n";

    ordered_json out;
    out["group_key"] = probe.group_key;
    out["tools_hash"] = probe.tools_hash;
    out["n_tools"] = tools.size();
    out["prefix_tokens"] = probe.prefix_ids.size();
    out["chat_format"] = k.chat_format;
    out["backend_numerics"] = k.inputs.backend_numerics;
    out["cached"] = tier != cc::Tier::miss;
    out["tier"] = cc::tier_name(tier);
    out["miss_reason"] = cc::miss_reason_json(reason, probe.prefix_ids.size());
    if (json) {
        print_json(out);
    } else {
        std::cout << "group_key   " << probe.group_key << "\n"
                  << "tools       " << tools.size() << " (" << probe.prefix_ids.size() << " prefix tokens)\n";
        if (!reason) std::cout << "cached      yes (" << tier << "): a compile or query links it\n";
        else std::cout << "cached      no (" << reason->n_stored << " other stored groups of this model, format and numerics)\n"
                       << cc::miss_reason_text(*reason, probe.prefix_ids.size()) << "\n";
    }
    return 0;
}

// ---- engine commands ---------------------------------------------------------------------------

int cmd_cache(Args& args, const cc::EngineOptions& options, bool json) {
    if (args.positional().size() < 2) throw UsageError("cache needs a subcommand: ls, verify, rm KEY, clear, gc --max-bytes N");
    const std::string sub = args.positional()[1];
    std::optional<std::string> max_bytes = sub == "gc" ? args.get("max-bytes") : std::nullopt;
    args.check_all_used();
    if (sub != "rm" && args.positional().size() > 2) throw UsageError("unexpected argument \"" + args.positional()[2] + "\"");
    cc::GroupStore store(options.cache);
    for (const auto& w : store.take_warnings()) std::cerr << "contextcache-cli: warning: " << w << "\n";
    ordered_json out{{"cache_dir", options.cache.dir.string()}};
    int rc = 0;
    if (sub == "ls") {
        out["groups"] = ordered_json::array();
        for (const auto& g : store.list()) out["groups"].push_back(cc::to_json(g));
        out["disk_bytes"] = store.disk_bytes();
        out["disk_budget_bytes"] = options.cache.disk_budget_bytes;
        if (!json) {
            std::cout << "key           tools  tokens        bytes  tier    hits  last used (unix ms)\n";
            for (const auto& g : store.list())
                std::cout << g.group_key.substr(0, 12) << "  " << g.tool_names.size() << "  " << g.n_tokens() << "  "
                          << g.file_bytes << "  " << g.tier << "  " << g.hits << "  " << g.last_used_unix_ms << "\n";
            std::cout << store.disk_bytes() << " bytes on disk in " << options.cache.dir.string() << "\n";
        }
    } else if (sub == "verify") {
        const auto problems = store.verify();
        out["problems"] = problems;
        out["ok"] = problems.empty();
        // Not a problem: what writers killed before their rename left (never visible as groups).
        out["temp_files_removed"] = store.remove_stale_temp_files().size();
        rc = problems.empty() ? 0 : 1;
        if (!json) {
            for (const auto& p : problems) std::cout << "BAD  " << p << "\n";
            std::cout << (problems.empty() ? "all group files verified\n" : "some group files were bad and were quarantined\n");
        }
    } else if (sub == "rm") {
        if (args.positional().size() != 3) throw UsageError("cache rm needs exactly one KEY");
        const std::string key = args.positional()[2];
        if (!cc::is_group_key(key)) throw UsageError("\"" + key + "\" is not a group key (64 hex characters)");
        const bool removed = store.remove(key);
        out["removed"] = removed;
        rc = removed ? 0 : 1;
        if (!removed) std::cerr << "contextcache-cli: error: " << key << ": no such group in " << options.cache.dir.string() << "\n";
    } else if (sub == "clear") {
        store.clear();
        out["cleared"] = true;
    } else if (sub == "gc") {
        if (!max_bytes) throw UsageError("cache gc needs --max-bytes N");
        const auto removed = store.gc(static_cast<size_t>(parse_int(*max_bytes, "--max-bytes", 0, INT64_MAX)));
        out["removed"] = removed;
        out["disk_bytes"] = store.disk_bytes();
        if (!json) std::cout << removed.size() << " groups removed; " << store.disk_bytes() << " bytes left\n";
    } else {
        throw UsageError("unknown cache subcommand \"" + sub + "\"");
    }
    if (json) print_json(out);
    return rc;
}

int cmd_info(Args& args, cc::EngineOptions options, bool json) {
    args.check_all_used();
    cc::Engine engine(options);
    const auto& info = engine.load_model();
    auto out = cc::to_json(info);
    const auto probe = options.backends->probe_gpu();
    out["cuda"] = {{"compiled", probe.compiled}, {"available", probe.available}, {"message", probe.message}};
    const auto groups = engine.cache().list();
    out["cache"] = {{"dir", options.cache.dir.empty() ? ordered_json(nullptr) : ordered_json(options.cache.dir.string())},
                    {"persistent", engine.cache().persistent()},
                    {"groups", groups.size()},
                    {"disk_bytes", engine.cache().disk_bytes()},
                    {"disk_budget_bytes", options.cache.disk_budget_bytes},
                    {"host_budget_bytes", options.cache.host_budget_bytes},
                    {"gpu_budget_bytes", options.cache.gpu_budget_bytes}};
    report_warnings(engine);
    if (json) {
        print_json(out);
        return 0;
    }
    const auto& c = info.config;
    std::cout << "model        " << info.spec << (info.synthetic_weights ? "  (synthetic weights: text is not meaningful)" : "")
              << "\n"
              << "family       " << info.family << ", " << c.n_layers << " layers, hidden " << c.dim << ", heads "
              << c.n_heads << "/" << c.n_kv_heads << " x " << c.head_dim << ", ffn " << c.ffn_dim << ", vocab "
              << c.vocab_size << "\n"
              << "parameters   " << info.n_params << " (" << info.weight_bytes / (1024.0 * 1024.0) << " MiB of weights)\n"
              << "chat format  " << (info.chat_format.empty() ? "(none: no tokenizer)" : info.chat_format) << "\n"
              << "backend      " << info.backend << " (" << info.numerics << ", " << info.n_threads << " threads; "
              << info.backend_reason << ")\n"
              << "weights      " << info.weights
              << (info.matrix_bytes ? " (matrices in memory: " + std::to_string(info.matrix_bytes / (1024 * 1024)) + " MiB)" : std::string())
              << "\n"
              << "kv per token " << info.kv_bytes_per_token << " bytes\n"
              << "fingerprint  " << info.fingerprint << "\n"
              << "load         " << info.load_ms << " ms\n"
              << "cuda         " << out["cuda"]["message"].get<std::string>() << "\n"
              << "cache        " << (engine.cache().persistent() ? options.cache.dir.string() : std::string("memory only"))
              << ": " << groups.size() << " groups, " << engine.cache().disk_bytes() << " bytes on disk\n";
    return 0;
}

int cmd_compile(Args& args, cc::EngineOptions options, bool json) {
    const auto tools = tools_arg(args, "compile", true);
    const std::string system = system_prompt(args);
    args.check_all_used();
    cc::Engine engine(options);
    engine.load_model();
    engine.set_tools(tools, system);
    engine.wait_for_persist();
    const auto result = *engine.current_tools();
    report_warnings(engine);
    if (json) {
        print_json(cc::to_json(result));
    } else {
        std::cout << "group_key   " << result.group_key << "\n"
                  << "tools       " << result.n_tools << " (" << result.prefix_tokens << " prefix tokens)\n"
                  << "tier        " << result.tier << (result.cache_hit ? " (hit)" : "") << "\n"
                  << "compile     " << result.compile_ms << " ms\n"
                  << "reused      " << (result.reused_tokens ? reuse_note(result) : std::string("none")) << "\n"
                  << "kv          " << result.kv_bytes / (1024.0 * 1024.0) << " MiB\n";
        if (result.miss_reason) std::cout << cc::miss_reason_text(*result.miss_reason, result.prefix_tokens) << "\n";
    }
    return 0;
}

void print_query_human(const cc::QueryResult& r) {
    const auto& t = r.timings;
    std::cout << r.text << "\n";
    if (r.tool_call) std::cout << "tool call: " << r.tool_call->name << " " << r.tool_call->arguments.dump() << "\n";
    std::cout << "[" << r.mode << "] " << (r.cache_hit ? "hit (" + std::string(cc::tier_name(r.tier)) + ")" : std::string("miss")) << ", prefix "
              << r.prefix_tokens << " + suffix " << r.suffix_tokens << " tokens, " << r.generated_tokens
              << " generated (" << cc::stop_reason_name(r.stop_reason) << ")\n"
              << "ttft " << t.ttft_ms << " ms = link " << t.link_ms << " + compile " << t.compile_ms << " + prefill "
              << t.prefill_ms << " (+ tokenize " << t.tokenize_ms << "); decode " << t.decode_ms << " ms ("
              << t.decode_tok_s << " tok/s); total " << t.total_ms << " ms\n";
    if (r.identical) {
        std::cout << "compare: " << (*r.identical ? "identical" : "DIFFERENT") << ", max |d logit| " << r.max_abs_logit_diff;
        if (r.first_difference) std::cout << ", first difference at generated token " << *r.first_difference;
        if (r.full)
            std::cout << "; full prefill ttft " << r.full->timings.ttft_ms << " ms vs cached " << t.ttft_ms << " ms";
        std::cout << "\n";
    }
}

int cmd_query(Args& args, cc::EngineOptions options, bool json) {
    const auto tools = tools_arg(args, "query", true);
    const std::string query = args.require("query", "query");
    const std::string system = system_prompt(args);
    cc::QueryOptions q;
    const std::string mode = args.get_or("mode", "cached");
    const bool nope_mode = mode == "per_tool_nope";  // the experiment (core/research/nope.h), not an engine mode
    try {
        if (!nope_mode) q.mode = cc::parse_query_mode(mode);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--") + e.what() + " (or per_tool_nope)");
    }
    if (auto v = args.get("max-new-tokens")) q.max_new_tokens = parse_int(*v, "--max-new-tokens", 1, 1 << 20);
    if (auto v = args.get("temperature")) q.temperature = static_cast<float>(parse_double(*v, "--temperature", 0, 100));
    if (auto v = args.get("top-p")) q.top_p = static_cast<float>(parse_double(*v, "--top-p", 0, 1));
    if (auto v = args.get("seed")) q.seed = static_cast<uint64_t>(parse_int(*v, "--seed", 0, INT64_MAX));
    q.ignore_eos = args.flag("ignore-eos");
    q.tool_choice = tool_choice_arg(args);
    const int repeat = static_cast<int>(parse_int(args.get_or("repeat", "1"), "--repeat", 1, 100000));
    args.check_all_used();

    cc::Engine engine(options);
    engine.load_model();
    // Not linked here: the first query links the group (or compiles it) and reports where its
    // prefix came from, with that load inside its TTFT.
    engine.select_tools(tools, system);
    std::vector<cc::QueryResult> runs;
    std::vector<cc::NopeReport> nope_reports;
    cc::NopeExperiment nope;
    for (int i = 0; i < repeat; ++i) {
        if (!nope_mode) {
            runs.push_back(engine.query(query, q));
            continue;
        }
        cc::NopeRun run = nope.run(engine, query, q);
        run.composed.full = std::make_shared<cc::QueryResult>(std::move(run.full));
        runs.push_back(std::move(run.composed));
        nope_reports.push_back(std::move(run.report));
    }
    // JSON of run i: the QueryResult, with the experiment's report under "nope"
    const auto run_json = [&](size_t i) {
        auto j = cc::to_json(runs[i]);
        if (nope_mode) j["nope"] = cc::to_json(nope_reports[i]);
        return j;
    };
    engine.wait_for_persist();  // the group file is written while the query runs; do not exit before it is
    const auto compiled = *engine.current_tools();
    report_warnings(engine);
    if (json) {
        auto out = run_json(0);
        out["compile"] = cc::to_json(compiled);
        if (repeat > 1) {
            out["runs"] = nlohmann::ordered_json::array();
            for (size_t i = 0; i < runs.size(); ++i) out["runs"].push_back(run_json(i));
        }
        print_json(out);
    } else {
        if (engine.model_info().synthetic_weights)
            std::cout << "(" << engine.model_info().spec
                      << ": synthetic weights - timings and exactness are real, the text is not meaningful)\n";
        std::cout << "compiled " << compiled.n_tools << " tools (" << compiled.prefix_tokens << " prefix tokens): "
                  << compiled.tier << (compiled.tier == cc::Tier::miss ? ", computed in " + std::to_string(compiled.compile_ms) + " ms" : "")
                  << (compiled.reused_tokens ? ", " + reuse_note(compiled) : "") << "\n";
        if (compiled.miss_reason) std::cout << cc::miss_reason_text(*compiled.miss_reason, compiled.prefix_tokens) << "\n";
        for (size_t i = 0; i < runs.size(); ++i) {
            print_query_human(runs[i]);
            if (nope_mode) std::cout << cc::nope_report_text(nope_reports[i]);
        }
    }
    for (const auto& r : runs)
        if (r.identical && !*r.identical) return 3;  // compare found a difference: worth a non-zero exit
    return 0;
}

int cmd_generate(Args& args, cc::EngineOptions options, bool json) {
    cc::Engine engine(options);
    const int max_new = static_cast<int>(parse_int(args.get_or("max-new-tokens", "32"), "--max-new-tokens", 1, 1 << 20));
    const bool ignore_eos = args.flag("ignore-eos");
    const int repeat = static_cast<int>(parse_int(args.get_or("repeat", "1"), "--repeat", 1, 100000));
    auto ids_arg = args.get("prompt-ids");
    auto prompt_arg = args.get("prompt");
    args.check_all_used();
    engine.load_model();
    std::vector<cc::token_id> ids;
    if ((ids_arg ? 1 : 0) + (prompt_arg ? 1 : 0) != 1) throw UsageError("generate needs exactly one of --prompt-ids, --prompt");
    ids = prompt_arg ? engine.encode_prompt(*prompt_arg) : parse_ids(*ids_arg);
    // --repeat: the same prompt again from an empty KV in this process (as llama-bench's -r), so a
    // benchmark sees the first, cold run and the warm ones apart
    std::vector<cc::GenerateResult> runs;
    for (int i = 0; i < repeat; ++i) runs.push_back(engine.generate(ids, max_new, ignore_eos));
    const auto& r = runs.front();
    if (json) {
        nlohmann::ordered_json out{{"prompt_ids", ids}, {"ids", r.ids}, {"text", r.text}, {"timings", cc::to_json(r.timings)}};
        if (repeat > 1) {
            out["runs"] = nlohmann::ordered_json::array();
            for (const auto& run : runs) out["runs"].push_back({{"ids", run.ids}, {"timings", cc::to_json(run.timings)}});
        }
        print_json(out);
    } else {
        std::cout << (r.text.empty() ? ids_text(r.ids) : r.text) << "\n";
    }
    return 0;
}

int cmd_logits(Args& args, cc::EngineOptions options, bool json) {
    cc::Engine engine(options);
    auto ids_arg = args.get("prompt-ids");
    auto prompt_arg = args.get("prompt");
    args.check_all_used();
    engine.load_model();
    if ((ids_arg ? 1 : 0) + (prompt_arg ? 1 : 0) != 1) throw UsageError("logits needs exactly one of --prompt-ids, --prompt");
    const auto ids = prompt_arg ? engine.encode_prompt(*prompt_arg) : parse_ids(*ids_arg);
    const auto logits = engine.last_logits(ids);
    if (json) {
        print_json(nlohmann::ordered_json{{"prompt_ids", ids}, {"logits", logits}});
    } else {
        const auto best = std::max_element(logits.begin(), logits.end());
        std::cout << logits.size() << " logits; argmax " << (best - logits.begin()) << " (" << *best << ")\n";
    }
    return 0;
}

int cmd_export(Args& args, const std::string& model_spec, bool json) {
    const std::filesystem::path out = args.require("out", "export");
    args.check_all_used();
    const auto source = cc::resolve_model(model_spec);
    if (!source.builtin) throw UsageError("export writes built-in models only (--model builtin:NAME)");
    const auto recipe = cc::find_builtin(source.builtin_name);
    if (!recipe) throw std::runtime_error(model_spec + ": unknown built-in model");
    if (std::filesystem::exists(out) && !std::filesystem::is_empty(out))
        throw std::runtime_error(out.string() + ": exists and is not empty");
    const auto weights = cc::generate_builtin_weights(*recipe);
    cc::save_hf_checkpoint(weights, out);
    for (const auto& [name, text] : {std::pair{"tokenizer.json", cc::builtin_tokenizer_json(*recipe)},
                                     std::pair{"tokenizer_config.json", cc::builtin_tokenizer_config_json(*recipe)}}) {
        std::ofstream f(out / name, std::ios::binary);
        f.write(text.data(), static_cast<std::streamsize>(text.size()));
        if (!f) throw std::runtime_error((out / name).string() + ": write failed");
    }
    if (json) print_json(nlohmann::ordered_json{{"model", model_spec}, {"out", out.string()}});
    else std::cout << "wrote " << model_spec << (recipe->trained() ? " (trained weights)" : " (synthetic weights)") << " to " << out.string() << "\n";
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        // -i is chat's short form of --interactive
        std::vector<char*> argv_long(argv, argv + argc);
        static char interactive_flag[] = "--interactive";
        for (auto& a : argv_long)
            if (std::string_view(a) == "-i") a = interactive_flag;
        Args args(static_cast<int>(argv_long.size()), argv_long.data(),
                  {"json", "help", "add-special-tokens", "decode", "ignore-eos", "csv", "quiet", "quick", "interactive",
                   "each-turn", "thinking", "strict", "serve"});
        if (args.flag("help") || args.positional().empty()) {
            std::cout << kUsage;
            return args.flag("help") ? 0 : 2;
        }
        const std::string command = args.positional()[0];
        if (args.positional().size() > 1 && command != "cache")
            throw UsageError("unexpected argument \"" + args.positional()[1] + "\"");
        const bool json = args.flag("json");
        if (command == "bfcl-import") return cmd_bfcl_import(args, json);  // reads files only: no model
        if (command == "version") {  // what benchmarks record as the binaries' commit
            args.check_all_used();
            if (json) print_json(nlohmann::ordered_json{{"commit", cc::build_commit()}});
            else std::cout << cc::build_commit() << "\n";
            return 0;
        }
        const std::string backend = args.get_or("backend", "auto");
        if (backend != "auto" && backend != "cpu" && backend != "cuda")
            throw UsageError("--backend must be auto, cpu or cuda, not \"" + backend + "\"");
        const std::string model_spec = args.get_or("model", cc::default_model_spec());
        // The server and the GPU keep BF16 KV unless told otherwise: half the memory, group files
        // and uploads, and on the 0.6B shape a faster cache hit and decode at depth
        // (docs/benchmarks.md); the research commands on the CPU keep the F32 reference (the NoPE
        // experiment's RoPE check is exact there). And where the CPU has AVX-512 BF16, the server
        // takes bf16dot weights (the fastest exact path it has). `key --serve`: the key a `serve`
        // with the same options computes (its routing header).
        const bool serve_numerics = command == "serve" || (command == "key" && args.flag("serve"));
        const std::string kv_default = args.has("kv-dtype") ? "f32" : default_kv_dtype(model_spec, backend, serve_numerics);
        const auto options =
            serve_numerics ? engine_options(args, model_spec, backend, kv_default,
                                            args.has("weights") ? "stored" : serve_default_weights(model_spec, backend),
                                            command == "serve" ? 256 : 0,
                                            command == "serve" ? int64_t(cc::serve::kDefaultKvWarmMb) : 0)
                           : engine_options(args, model_spec, backend, kv_default);
        if (command == "info" || command == "compile" || command == "query" || command == "generate" ||
            command == "logits") {
            if (command == "info") return cmd_info(args, options, json);
            if (command == "compile") return cmd_compile(args, options, json);
            if (command == "query") return cmd_query(args, options, json);
            if (command == "generate") return cmd_generate(args, options, json);
            return cmd_logits(args, options, json);
        }
        if (command == "selftest") return cmd_selftest(args, options, json);
        if (command == "serve") return cmd_serve(args, options, json);
        if (command == "chat") return cmd_chat(args, options, json);
        if (command == "export") return cmd_export(args, model_spec, json);
        if (command == "cache") return cmd_cache(args, options, json);
        if (command == "bench") return cmd_bench(args, options, json);
        if (command == "eval") return cmd_eval(args, options, json);
        if (command == "chunk-reuse") return cmd_chunk_reuse(args, options, json);
        const auto model = cc::resolve_model(model_spec);
        if (command == "tokenize") return cmd_tokenize(args, model, json);
        if (command == "key") return cmd_key(args, model, json, options);
        if (command == "render") return cmd_render(args, model, json, options);
        if (command == "why") return cmd_why(args, model, json, options);
        throw UsageError("unknown command \"" + command + "\"");
    } catch (const UsageError& e) {
        std::cerr << "contextcache-cli: usage error: " << e.what() << " (see --help)\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "contextcache-cli: error: " << e.what() << "\n";
        return 1;
    }
}
