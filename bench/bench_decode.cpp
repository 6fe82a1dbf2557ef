// bench_decode: CPU decode speed per weight format and KV width, at several context depths, next
// to the machine's memory-read ceiling measured in the same run. Prints one JSON object.
//   bench_decode [--model SPEC] [--threads N] [--weights f32,bf16,q8] [--kv f32,bf16]
//                [--depths 0,3000] [--tokens 32] [--runs 3] [--suffix 34]
//
// Decode is memory-bound: each generated token streams every weight matrix once (lm_head
// included) plus the K/V of the context. `bytes_per_token` counts exactly that (the backend's
// packed matrices, Backend::matrix_bytes(), plus depth x kv bytes per position), and `gb_s` is
// bytes_per_token x tokens/s: the bandwidth the decode loop achieves, to set against
// `ceiling.read_gb_s` (every thread streaming its slice of a 1 GiB buffer with vector loads) and
// `ceiling.memcpy_gb_s` (memcpy of 512 MiB split across the threads).
// At each depth it also times the cache-hit shape: a `suffix`-token forward over the `depth`
// positions (the short query over a long prefix), with logits for the last row only.
// Medians of --runs; every run's figure is listed.
#include "bench/bench_common.h"
#include "core/backend/backend.h"
#include "core/cpu/cpu_backend.h"
#include "core/research/sample_stats.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

using cc::bench::parse_string_list;

// Every thread sums its slice of `buf` as 64-bit words in 16 independent sums (vectorised by the
// compiler); returns GB/s over the whole buffer. Best of `reps`.
double read_gb_s(const std::vector<uint64_t>& buf, int threads, int reps) {
    double best = 0;
    std::vector<uint64_t> sums(size_t(threads) * 8);
    for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        std::vector<std::thread> ts;
        const size_t chunk = buf.size() / size_t(threads);
        for (int t = 0; t < threads; ++t)
            ts.emplace_back([&, t] {
                const uint64_t* p = buf.data() + size_t(t) * chunk;
                uint64_t s[16] = {};  // 16 independent sums: several vector adds in flight
                for (size_t i = 0; i + 16 <= chunk; i += 16)
                    for (int j = 0; j < 16; ++j) s[j] += p[i + size_t(j)];
                uint64_t total = 0;
                for (uint64_t v : s) total += v;
                sums[size_t(t) * 8] = total;
            });
        for (auto& th : ts) th.join();
        best = std::max(best, double(buf.size() * 8) / (ms_since(t0) * 1e6));
    }
    volatile uint64_t sink = sums[0];
    (void)sink;
    return best;
}

double memcpy_gb_s(size_t bytes, int threads, int reps) {
    std::vector<char> a(bytes, 1), b(bytes, 2);
    double best = 0;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        std::vector<std::thread> ts;
        const size_t chunk = bytes / size_t(threads);
        for (int t = 0; t < threads; ++t)
            ts.emplace_back([&, t] { std::memcpy(b.data() + size_t(t) * chunk, a.data() + size_t(t) * chunk, chunk); });
        for (auto& th : ts) th.join();
        best = std::max(best, double(bytes) / (ms_since(t0) * 1e6));  // bytes copied (read + write = 2x traffic)
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model = "builtin:qwen3-0.6b";
    std::vector<std::string> weight_formats{"f32", "bf16", "q8"}, kv_formats{"f32", "bf16"};
    std::vector<int> depths{0, 3000};
    int threads = 2, tokens = 32, runs = 3, suffix = 34;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--model") model = v;
        else if (a == "--threads") threads = std::atoi(v.c_str());
        else if (a == "--weights") weight_formats = parse_string_list(v);
        else if (a == "--kv") kv_formats = parse_string_list(v);
        else if (a == "--depths") {
            depths.clear();
            for (const auto& d : parse_string_list(v)) depths.push_back(std::atoi(d.c_str()));
        } else if (a == "--tokens") tokens = std::atoi(v.c_str());
        else if (a == "--runs") runs = std::atoi(v.c_str());
        else if (a == "--suffix") suffix = std::atoi(v.c_str());
        else {
            std::cerr << "bench_decode: unknown option " << a << "\n";
            return 2;
        }
    }
    if (threads < 1 || tokens < 1 || runs < 1 || suffix < 1) {
        std::cerr << "bench_decode: --threads, --tokens, --runs and --suffix must be >= 1\n";
        return 2;
    }
    try {
        const cc::ModelWeights weights = cc::bench::load_model_weights(model, threads);
        const cc::ModelConfig& c = weights.config;

        nlohmann::ordered_json out;
        out["benchmark"] = "bench_decode";
        out["machine"] = cc::bench::machine_json();
        out["model"] = model;
        out["threads"] = threads;
        out["tokens_per_run"] = tokens;
        out["runs"] = runs;
        {
            std::vector<uint64_t> buf(size_t(1) << 27, 1);  // 1 GiB
            out["ceiling"] = {{"read_gb_s", read_gb_s(buf, threads, 5)}, {"memcpy_gb_s", memcpy_gb_s(size_t(512) << 20, threads, 5)}};
        }
        std::mt19937 rng(7);
        std::uniform_int_distribution<int> pick(0, c.vocab_size - 1);
        const int max_depth = *std::max_element(depths.begin(), depths.end());
        std::vector<cc::token_id> context(size_t(max_depth + suffix));
        for (auto& t : context) t = pick(rng);

        for (const auto& wname : weight_formats)
            for (const auto& kname : kv_formats) {
                cc::CpuBackendOptions o;
                o.n_threads = threads;
                o.weights = cc::parse_weight_dtype(wname);
                o.kv_dtype = cc::parse_kv_dtype(kname);
                const auto t_pack = Clock::now();
                auto be = cc::make_cpu_backend(weights, o);
                const double pack_ms = ms_since(t_pack);
                const size_t kv_per_pos = be->kv_bytes(1);
                for (int depth : depths) {
                    auto block = be->allocate_kv(depth + std::max(tokens, suffix) + 1);
                    const std::span<const cc::token_id> all(context);
                    if (depth > 0) be->forward(all.first(size_t(depth)), {nullptr, 0, block.get()}, {});
                    std::vector<double> tok_s, suffix_ms;
                    for (int r = 0; r < runs + 1; ++r) {  // the first run warms up and is not counted
                        block->truncate(depth);
                        cc::token_id next = context[size_t(depth)];
                        const auto t0 = Clock::now();
                        for (int i = 0; i < tokens; ++i) {
                            const cc::token_id one[1] = {next};
                            const auto logits = be->forward(one, {nullptr, 0, block.get()}, std::vector<int>{0});
                            next = cc::token_id(std::max_element(logits.begin(), logits.end()) - logits.begin());
                        }
                        const double ms = ms_since(t0);
                        block->truncate(depth);
                        const auto t1 = Clock::now();
                        be->forward(all.subspan(size_t(depth), size_t(suffix)), {nullptr, 0, block.get()}, std::vector<int>{suffix - 1});
                        const double sms = ms_since(t1);
                        if (r == 0) continue;
                        tok_s.push_back(tokens / (ms / 1000.0));
                        suffix_ms.push_back(sms);
                    }
                    const double med = cc::median(tok_s);
                    // mean context over the decoded tokens: depth .. depth + tokens - 1
                    const double kv_read = double(kv_per_pos) * (depth + (tokens - 1) / 2.0);
                    const double bytes = double(be->matrix_bytes()) + kv_read;
                    out["rows"].push_back({{"weights", wname},
                                           {"kv", kname},
                                           {"depth", depth},
                                           {"numerics", be->numerics_id()},
                                           {"pack_ms", pack_ms},
                                           {"matrix_bytes", be->matrix_bytes()},
                                           {"bytes_per_token", bytes},
                                           {"decode_tok_s", med},
                                           {"decode_tok_s_runs", tok_s},
                                           {"gb_s", bytes * med / 1e9},
                                           {"fraction_of_read_ceiling", bytes * med / 1e9 / out["ceiling"]["read_gb_s"].get<double>()},
                                           {"suffix_tokens", suffix},
                                           {"suffix_forward_ms", cc::median(suffix_ms)},
                                           {"suffix_forward_ms_runs", suffix_ms}});
                    std::cerr << wname << "/" << kname << " depth " << depth << ": " << med << " tok/s, suffix "
                              << cc::median(suffix_ms) << " ms\n";
                }
            }
        std::cout << out.dump(2) << "\n";
    } catch (const std::exception& e) {
        std::cerr << "bench_decode: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
