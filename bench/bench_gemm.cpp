// bench_gemm: the CPU GEMM's time per call at a few rows (a decode step of that many sequences)
// on the shapes of a built-in model's layer and lm_head, with the weights streamed from memory as
// in a real step: each shape is packed in as many copies as fill --stream-mb, used in turn, so no
// call finds its weights in the last-level cache. Prints one JSON object.
//   bench_gemm [--model builtin:qwen3-0.6b] [--threads 2] [--rows 1,2,4,6,8,12,24]
//              [--formats bf16dot,bf16,f32] [--stream-mb 256] [--runs 9]
//
// Per shape, format and row count: the median and the best of --runs timed batches (each batch
// a fixed number of calls, at least 0.2 s of work), GMAC/s, and the weights' GB/s (matrix bytes
// per call / time). A step of m rows reads the same bytes as one of 1 row; where its time stays
// near the 1-row time, the GEMM is bound by reading the weights, not by its arithmetic.
// bf16dot runs only where the CPU has AVX-512 BF16; bf16 is the best ISA's F32 GEMM over BF16
// panels (`--weights stored` of a BF16 checkpoint: serve's default without AVX-512 BF16); f32 the
// same GEMM over F32 panels.
#include "bench/bench_common.h"
#include "core/cpu/kernels.h"
#include "core/cpu/thread_pool.h"
#include "core/model/builtin_model.h"
#include "core/research/sample_stats.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using cc::cpu::Matrix;
using cc::cpu::PackedMatrix;
using cc::cpu::WFormat;


struct Shape {
    std::string name;
    int64_t n, k;  // out features, in features
};

}  // namespace

int main(int argc, char** argv) {
    std::string model = "builtin:qwen3-0.6b";
    std::vector<std::string> formats{"bf16dot", "bf16", "f32"};
    std::vector<size_t> rows{1, 2, 4, 6, 8, 12, 24};
    int threads = 2, runs = 9;
    double stream_mb = 256;
    if (argc % 2 == 0) {  // an option without its value (--help among them): say how, run nothing
        std::cerr << "usage: bench_gemm [--model builtin:qwen3-0.6b] [--threads 2] [--rows 1,2,4,6,8,12,24]\n"
                     "                  [--formats bf16dot,bf16,f32] [--stream-mb 256] [--runs 9]\n";
        return 2;
    }
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--model") model = v;
        else if (a == "--threads") threads = std::atoi(v.c_str());
        else if (a == "--rows") rows = cc::bench::parse_size_list(v);
        else if (a == "--formats") formats = cc::bench::parse_string_list(v);
        else if (a == "--stream-mb") stream_mb = std::atof(v.c_str());
        else if (a == "--runs") runs = std::atoi(v.c_str());
        else {
            std::cerr << "bench_gemm: unknown option " << a << "\n";
            return 2;
        }
    }
    if (threads < 1 || runs < 1 || stream_mb <= 0 || rows.empty() ||
        std::any_of(rows.begin(), rows.end(), [](size_t m) { return m < 1 || m > 4096; })) {
        std::cerr << "bench_gemm: --threads and --runs must be >= 1, --stream-mb > 0, --rows in 1..4096\n";
        return 2;
    }
    const std::string prefix = "builtin:";
    const auto recipe = model.rfind(prefix, 0) == 0 ? cc::find_builtin(model.substr(prefix.size())) : std::nullopt;
    if (!recipe) {
        std::cerr << "bench_gemm: --model must name a built-in model (its shapes are used, not its weights): " << model << "\n";
        return 2;
    }
    const cc::ModelConfig& c = recipe->config;
    const std::vector<Shape> shapes{
        {"qkv", int64_t(c.n_heads + 2 * c.n_kv_heads) * c.head_dim, c.dim},
        {"o", c.dim, int64_t(c.n_heads) * c.head_dim},
        {"gate_up", 2 * int64_t(c.ffn_dim), c.dim},
        {"down", c.dim, c.ffn_dim},
        {"lm_head", c.vocab_size, c.dim},
    };
    const size_t max_rows = *std::max_element(rows.begin(), rows.end());

    cc::cpu::ThreadPool pool(threads);
    cc::cpu::Workspace ws(threads);
    const cc::cpu::Kernels& kernels = cc::cpu::kernels_for(cc::cpu::resolve_isa(""));
    nlohmann::ordered_json results = nlohmann::ordered_json::array();
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (const std::string& format : formats) {
        const bool dot = format == "bf16dot";
        if (!dot && format != "f32" && format != "bf16") {
            std::cerr << "bench_gemm: --formats takes bf16dot, bf16 and f32, not " << format << "\n";
            return 2;
        }
        const WFormat packed = dot ? WFormat::bf16dot : format == "bf16" ? WFormat::bf16 : WFormat::f32;
        if (dot && !cc::cpu::bf16dot::supported()) {
            results.push_back({{"format", format}, {"skipped", "this CPU has no AVX-512 BF16"}});
            continue;
        }
        for (const Shape& s : shapes) {
            std::vector<float> w(size_t(s.n * s.k));
            for (float& v : w) v = normal(rng);
            const Matrix src{w.data(), false, s.n, s.k};
            std::vector<PackedMatrix> copies;
            const double bytes = double(s.n * s.k) * (packed == WFormat::f32 ? 4 : 2);
            const int n_copies = std::max(1, int(stream_mb * 1e6 / bytes));
            for (int i = 0; i < n_copies; ++i)
                copies.push_back(cc::cpu::pack_matrix(pool, src, packed,
                                                      dot ? cc::cpu::bf16dot::panel_width() : kernels.gemm_nr));
            std::vector<float> x(max_rows * size_t(s.k)), y(max_rows * size_t(s.n));
            for (float& v : x) v = normal(rng);
            size_t next = 0;
            const auto call = [&](int m) {
                const Matrix& view = copies[next].view;
                next = (next + 1) % copies.size();
                if (dot)
                    cc::cpu::bf16dot::gemm(pool, ws, x.data(), m, view, y.data());
                else
                    kernels.gemm(pool, ws, x.data(), m, view, y.data());
            };
            for (size_t m : rows) {
                // calls per timed batch: about 0.2 s at 30 GMAC/s, at least as many as the copies
                const double macs = double(m) * double(s.n) * double(s.k);
                const int calls = std::max<int>(int(copies.size()), int(6e9 / macs));
                for (size_t i = 0; i < copies.size(); ++i) call(int(m));  // warm-up: every copy once
                std::vector<double> ms;
                for (int r = 0; r < runs; ++r) {
                    const auto t0 = Clock::now();
                    for (int i = 0; i < calls; ++i) call(int(m));
                    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / calls);
                }
                const double med = cc::median(ms), best = *std::min_element(ms.begin(), ms.end());
                results.push_back({{"format", format},
                                   {"shape", s.name},
                                   {"n", s.n},
                                   {"k", s.k},
                                   {"rows", m},
                                   {"copies", copies.size()},
                                   {"calls_per_run", calls},
                                   {"ms_median", med},
                                   {"ms_best", best},
                                   {"gmac_s_median", macs / med / 1e6},
                                   {"weights_gb_s_median", bytes / med / 1e6},
                                   {"ms_runs", ms}});
            }
        }
    }
    nlohmann::ordered_json out{{"benchmark", "gemm"},
                               {"machine", cc::bench::machine_json()},
                               {"model_shapes", model},
                               {"threads", threads},
                               {"isa", cc::cpu::isa_name(cc::cpu::resolve_isa(""))},
                               {"stream_mb", stream_mb},
                               {"runs", runs},
                               {"results", results}};
    std::cout << out.dump(1) << "\n";
    return 0;
}
