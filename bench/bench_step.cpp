// bench_step: the backend's multi-sequence decode step (Backend::forward_batch) alone, without
// the server around it: N sequences over one shared prefix block (a cached tool group of `depth`
// positions; 0: no prefix), each with its private suffix, decoding together one token each per
// step, as `serve --parallel` runs them. Prints one JSON object. --weights: serve's default on this
// CPU unless given (bf16dot with AVX-512 BF16, else stored).
//   bench_step [--backend cpu|cuda] [--model SPEC] [--threads N] [--weights W] [--kv bf16]
//              [--depth 2985[,0,...]] [--sequences 1,2,4,8,16] [--tokens 16] [--runs 3] [--share on,off]
//              [--batch serial,stacked[,stacked+graphs,stacked+replay+fused,...]] [--greedy host[,backend]]
//
// Per sequence count: ms per step (median over --runs, each run `tokens` steps after a warm-up
// run), aggregate tok/s = N x steps/s, `over_one`: that aggregate over the one-sequence run's
// (issue 36's "8 clients >= 4x one" asked of the backend alone), and `weight_gb_s`: the weights'
// bytes over the step time (each step reads every weight at least once; with a device, also as a
// fraction of its DRAM peak). CPU: `--share off` turns off the shared-prefix attention
// (CpuBackendOptions::share_prefix_attention) to show what it saves. CUDA (default model
// builtin:qwen3-8b, BF16 weights; CONTEXTCACHE_CUDA_ATTENTION applies): `--batch serial` runs a
// step's sequences one after another, `stacked` in one pass (CudaBackendOptions::stacked_batch),
// `+graphs` as CUDA graphs (CudaBackendOptions::graphs), `+replay` as graphs captured once per shape
// and KV-length bucket and replayed (CudaBackendOptions::graph_replay: with
// CONTEXTCACHE_CUDA_ATTENTION=mma; without it the graphs are captured every step), `+fused` with the fused small
// kernels (CudaBackendOptions::fused_kernels, also on for every variant with CONTEXTCACHE_CUDA_FUSED=on);
// `--greedy backend` asks the backend for
// each step's greedy tokens instead of its logits (SequenceRows::argmax: the engine's greedy decode;
// CONTEXTCACHE_CUDA_GREEDY=device then picks them on the GPU), `host` (the default) brings the
// logits back and picks here;
// without a device it prints "skipped: <reason>" and exits 77. Each sequence starts from its own
// token and greedily decodes, so the steps run real (different) rows; the bits each gets are the
// tests' and the self-test's business (test_cpu_backend, forward_batch; "several sequences in one
// step == full").
#include "bench/bench_common.h"
#include "bench/bench_cuda.h"
#include "core/backend/backend.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels.h"
#include "core/engine/sampler.h"
#include "core/research/sample_stats.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A --batch variant: serial or stacked, then optionally +graphs or +replay, then optionally +fused.
struct BatchVariant {
    bool stacked = false, graphs = false, replay = false, fused = false;
};
std::optional<BatchVariant> parse_batch_variant(const std::string& s) {
    BatchVariant v;
    std::string rest = s;
    auto take = [&](const std::string& part) {
        if (!rest.starts_with(part)) return false;
        rest.erase(0, part.size());
        return true;
    };
    if (take("stacked"))
        v.stacked = true;
    else if (!take("serial"))
        return std::nullopt;
    v.replay = take("+replay");
    v.graphs = v.replay || take("+graphs");
    v.fused = take("+fused");
    if (!rest.empty()) return std::nullopt;
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    std::string backend = "cpu", model, weights_name, kv_name = "bf16";
    std::vector<std::string> greedies{"host"};
    std::vector<int> sequences{1, 2, 4, 8, 16};
    std::vector<std::string> shares{"on", "off"}, batches{"serial", "stacked"};
    std::vector<int> depths{2985};
    int threads = 2, tokens = 16, runs = 3;
    if (argc % 2 == 0) {  // an option without its value (--help among them): say how, run nothing
        std::cerr
            << "usage: bench_step [--backend cpu|cuda] [--model SPEC] [--threads N] [--weights W] [--kv bf16]\n"
               "                  [--depth 2985[,0,...]] [--sequences 1,2,4,8,16] [--tokens 16] [--runs 3]\n"
               "                  [--share on,off] [--batch serial,stacked[,stacked+graphs,stacked+replay+fused]]\n"
               "                  [--greedy host[,backend]]\n";
        return 2;
    }
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--backend")
            backend = v;
        else if (a == "--model")
            model = v;
        else if (a == "--threads")
            threads = std::atoi(v.c_str());
        else if (a == "--weights")
            weights_name = v;
        else if (a == "--kv")
            kv_name = v;
        else if (a == "--depth") {
            depths.clear();
            for (const auto& d : cc::bench::parse_string_list(v)) depths.push_back(std::atoi(d.c_str()));
        } else if (a == "--sequences") {
            sequences.clear();
            for (const auto& s : cc::bench::parse_string_list(v)) sequences.push_back(std::atoi(s.c_str()));
        } else if (a == "--tokens")
            tokens = std::atoi(v.c_str());
        else if (a == "--runs")
            runs = std::atoi(v.c_str());
        else if (a == "--share")
            shares = cc::bench::parse_string_list(v);
        else if (a == "--batch")
            batches = cc::bench::parse_string_list(v);
        else if (a == "--greedy")
            greedies = cc::bench::parse_string_list(v);
        else {
            std::cerr << "bench_step: unknown option " << a << "\n";
            return 2;
        }
    }
    if (threads < 1 || tokens < 1 || runs < 1 || sequences.empty() || depths.empty() ||
        std::any_of(depths.begin(), depths.end(), [](int d) { return d < 0; }) ||
        std::any_of(sequences.begin(), sequences.end(), [](int n) { return n < 1; }) ||
        std::any_of(shares.begin(), shares.end(), [](const std::string& s) { return s != "on" && s != "off"; }) ||
        std::any_of(batches.begin(), batches.end(), [](const std::string& s) { return !parse_batch_variant(s); }) ||
        (backend != "cpu" && backend != "cuda") || greedies.empty() ||
        std::any_of(greedies.begin(), greedies.end(),
                    [](const std::string& g) { return g != "host" && g != "backend"; })) {
        std::cerr
            << "bench_step: --threads, --tokens, --runs and every --sequences entry must be >= 1, every --depth >= 0; "
               "--share takes on and/or off, --batch serial or stacked, each optionally followed by +graphs or "
               "+replay then +fused, --backend cpu or cuda, --greedy host and/or backend\n";
        return 2;
    }
    const bool cuda = backend == "cuda";
    std::optional<cc::bench::CudaDevice> device;
    if (cuda) {
        std::string reason;
        device = cc::bench::cuda_device(reason);
        if (!device) return cc::bench::print_skipped("bench_step", reason);
        weights_name = "stored";
    }
    // serve's default on this CPU: bf16dot where the CPU has AVX-512 BF16, else the stored weights
    if (weights_name.empty()) weights_name = cc::cpu::bf16dot::supported() ? "bf16dot" : "stored";
    if (model.empty()) model = cuda ? "builtin:qwen3-8b" : "builtin:qwen3-0.6b";
    try {
        const cc::ModelWeights weights = cc::bench::load_model_weights(model, threads);
        const cc::ModelConfig& c = weights.config;
        const double weight_gb = double(cc::bench::weight_bytes(weights)) / 1e9;

        nlohmann::ordered_json out;
        out["benchmark"] = "bench_step";
        out["machine"] = cc::bench::machine_json();
        out["backend"] = backend;
        if (device) out["device"] = cc::bench::device_json(*device);
        out["model"] = model;
        out["threads"] = threads;
        out["weights"] = weights_name;
        out["weight_gb"] = weight_gb;
        out["kv"] = kv_name;
        out["depths"] = depths;
        out["steps_per_run"] = tokens;
        out["runs"] = runs;

        std::mt19937 rng(7);
        std::uniform_int_distribution<int> pick(0, c.vocab_size - 1);
        std::vector<cc::token_id> prefix(static_cast<size_t>(*std::max_element(depths.begin(), depths.end())));
        for (auto& t : prefix) t = pick(rng);
        const int max_seqs = *std::max_element(sequences.begin(), sequences.end());
        std::vector<cc::token_id> first(static_cast<size_t>(max_seqs));
        for (auto& t : first) t = pick(rng);

        // the variants compared: the CPU's shared-prefix attention on/off, or CUDA's serial/stacked step
        for (const std::string& variant : cuda ? batches : shares) {
            std::unique_ptr<cc::Backend> be;
            if (cuda) {
#ifdef CC_HAVE_CUDA
                cc::cuda::CudaBackendOptions o;
                o.kv_dtype = cc::parse_kv_dtype(kv_name);
                o.mma_attention = cc::cuda::mma_attention_from_env();
                o.own_gemm = cc::cuda::own_gemm_from_env();
                const BatchVariant bv = *parse_batch_variant(variant);
                o.stacked_batch = bv.stacked;
                o.graphs = bv.graphs;
                o.graph_replay = bv.replay;
                o.device_greedy = cc::cuda::device_greedy_from_env();
                o.fused_kernels = bv.fused || cc::cuda::fused_kernels_from_env();
                be = cc::cuda::make_cuda_backend(weights, o);
#endif
            } else {
                cc::CpuBackendOptions o;
                o.n_threads = threads;
                o.weights = cc::parse_weight_dtype(weights_name);
                o.kv_dtype = cc::parse_kv_dtype(kv_name);
                o.share_prefix_attention = variant == "on";
                be = cc::make_cpu_backend(weights, o);
            }
            for (const int depth : depths) {
                std::unique_ptr<cc::KvBlock> group;  // the shared prefix, as a linked group is
                if (depth > 0) {
                    group = be->allocate_kv(depth);
                    be->forward(std::span(prefix).first(size_t(depth)), {nullptr, 0, group.get()}, {});
                }
                std::vector<std::unique_ptr<cc::KvBlock>> suffixes;
                for (int s = 0; s < max_seqs; ++s) suffixes.push_back(be->allocate_kv(tokens + 1));
                // Each sequence's logits storage, kept from step to step as the server's requests keep theirs.
                std::vector<std::vector<float>> logits(static_cast<size_t>(max_seqs),
                                                       std::vector<float>(static_cast<size_t>(c.vocab_size)));

                double one_tok_s = 0;
                for (const std::string& greedy : greedies)
                    for (int n : sequences) {
                        const bool by_backend = greedy == "backend";
                        std::vector<double> step_ms;
                        for (int r = 0; r < runs + 1; ++r) {  // the first run warms up and is not counted
                            std::vector<cc::token_id> next(first.begin(), first.begin() + n);
                            for (int s = 0; s < n; ++s) suffixes[size_t(s)]->truncate(0);
                            const std::vector<int> last{0};
                            const auto t0 = Clock::now();
                            for (int i = 0; i < tokens; ++i) {
                                std::vector<cc::SequenceRows> rows;
                                const std::vector<cc::token_id> fed = next;
                                for (int s = 0; s < n; ++s) {
                                    cc::SequenceRows q{std::span<const cc::token_id>(&fed[size_t(s)], 1),
                                                       {group.get(), depth, suffixes[size_t(s)].get()},
                                                       last,
                                                       logits[size_t(s)]};
                                    if (by_backend) {  // the tokens only, picked by the backend
                                        q.logits = {};
                                        q.argmax = std::span<cc::token_id>(&next[size_t(s)], 1);
                                    }
                                    rows.push_back(q);
                                }
                                be->forward_batch(rows);
                                if (!by_backend)
                                    for (int s = 0; s < n; ++s) next[size_t(s)] = cc::argmax_token(logits[size_t(s)]);
                            }
                            if (r > 0) step_ms.push_back(ms_since(t0) / tokens);
                        }
                        const double ms = cc::median(step_ms);
                        const double tok_s = n * 1000.0 / ms;
                        if (n == 1) one_tok_s = tok_s;
                        nlohmann::ordered_json row;
                        if (cuda)
                            row["batch"] = variant;
                        else
                            row["share_prefix_attention"] = variant == "on";
                        row["greedy"] = greedy;
                        row["depth"] = depth;
                        row["sequences"] = n;
                        row["numerics"] = be->numerics_id();
                        row["step_ms"] = ms;
                        row["step_ms_runs"] = step_ms;
                        row["aggregate_tok_s"] = tok_s;
                        if (one_tok_s > 0) row["over_one"] = tok_s / one_tok_s;
                        row["weight_gb_s"] = weight_gb / (ms / 1000.0);
                        if (device && device->peak_dram_gb_s > 0)
                            row["fraction_of_dram_peak"] = weight_gb / (ms / 1000.0) / device->peak_dram_gb_s;
                        out["rows"].push_back(row);
                        std::cerr << variant << ", greedy " << greedy << ", depth " << depth << ", " << n
                                  << " sequences: " << ms << " ms/step, " << tok_s << " tok/s\n";
                    }
            }
        }
        std::cout << out.dump(2) << "\n";
    } catch (const std::exception& e) {
        std::cerr << "bench_step: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
