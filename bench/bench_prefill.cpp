// Prefill throughput of the CPU backend on a synthetic Qwen3-shaped model, next to the machine's
// SGEMM throughput (OpenBLAS, same GEMM shapes, same run), so the figure means something on any
// machine. Run: build/bench/bench_prefill --benchmark_format=json
//
// Model: dim 1024, 8 layers, 16 heads, 8 kv heads, head_dim 64, ffn 3072, vocab 32000, tied
// embeddings, seeded random weights (BF16 by default, as real checkpoints; the _f32 variants use
// F32). FLOPs counted: 2*M*N*K per GEMM (q, k, v, o, gate, up, down; lm_head for the one logit row)
// plus causal attention 2 * 2 * head_dim * n_heads * T(T+1)/2 per layer (QK and PV).
//
// --backend cuda: the same prefill and decode on the GPU, for this shape and the Qwen3-8B shape
// (builtin:qwen3-8b, synthetic weights), with achieved TFLOP/s and GB/s, their fractions of the
// device's peaks (core/backend/device_peaks.h) and of cuBLAS's own BF16 GEMM throughput on the same shapes.
// Target (issue 6): a 3,000-token prefill of the Qwen3-8B shape at >= 50% of the BF16 peak
// (counter target_met). Without a device: "skipped: <reason>", exit 77. Never run on a GPU here.
#include "bench/bench_cuda.h"
#include "bench/gbench_main.h"
#include "core/base/kernel_math.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels.h"
#include "core/model/builtin_model.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <vector>

#ifdef CC_HAVE_CUDA
#include "cuda/gemm.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

#ifdef CC_HAVE_OPENBLAS
// The one CBLAS entry point used; declared here rather than through <cblas.h>, whose Debian
// alternative may point at another BLAS.
extern "C" void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                            const float* b, int ldb, float beta, float* c, int ldc);
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;
#endif

namespace {

using namespace cc;

// xorshift64*: fast, seeded; Irwin-Hall(4) approximates a normal well enough for random weights.
struct Rng {
    uint64_t s;
    uint64_t next() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 2685821657736338717ull;
    }
    float normal() {
        float acc = 0;
        for (int i = 0; i < 4; ++i) acc += float(next() >> 40) * (1.0f / 16777216.0f);
        return (acc - 2.0f) * 1.7320508f;  // variance of the sum of 4 U(0,1) is 1/3
    }
};

struct SynthModel {
    ModelWeights w;
    std::vector<std::shared_ptr<std::vector<std::byte>>> buffers;

    Tensor tensor(std::vector<int64_t> shape, bool bf16, Rng& rng, float scale, float offset = 0.0f) {
        size_t n = 1;
        for (int64_t d : shape) n *= size_t(d);
        auto buf = std::make_shared<std::vector<std::byte>>(n * (bf16 ? 2 : 4));
        for (size_t i = 0; i < n; ++i) {
            const float v = offset + scale * rng.normal();
            if (bf16) {
                const uint16_t h = km::f32_to_bf16(v);
                std::memcpy(buf->data() + 2 * i, &h, 2);
            } else {
                std::memcpy(buf->data() + 4 * i, &v, 4);
            }
        }
        w.storage.push_back(buf);
        Tensor t;
        t.dtype = bf16 ? DType::bf16 : DType::f32;
        t.shape = std::move(shape);
        t.data = buf->data();
        t.n_bytes = buf->size();
        return t;
    }
};

ModelConfig bench_config() {
    ModelConfig c;
    c.family = ModelFamily::qwen3;
    c.model_type = "qwen3";
    c.n_layers = 8;
    c.dim = 1024;
    c.ffn_dim = 3072;
    c.n_heads = 16;
    c.n_kv_heads = 8;
    c.head_dim = 64;
    c.vocab_size = 32000;
    c.max_position_embeddings = 4096;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 1e6;
    c.tie_word_embeddings = true;
    c.qk_norm = true;
    return c;
}

const SynthModel& model(bool bf16) {
    static std::map<bool, std::unique_ptr<SynthModel>> cache;
    auto& m = cache[bf16];
    if (m) return *m;
    m = std::make_unique<SynthModel>();
    ModelConfig& c = m->w.config;
    c = bench_config();
    Rng rng{0x9e3779b97f4a7c15ull};
    const int64_t qd = int64_t(c.n_heads) * c.head_dim, kvd = int64_t(c.n_kv_heads) * c.head_dim;
    const float g = 1.0f / std::sqrt(float(c.dim));
    m->w.embed = m->tensor({c.vocab_size, c.dim}, bf16, rng, 0.5f);
    for (int l = 0; l < c.n_layers; ++l) {
        LayerWeights L;
        L.attn_norm = m->tensor({c.dim}, bf16, rng, 0.1f, 1.0f);
        L.wq = m->tensor({qd, c.dim}, bf16, rng, g);
        L.wk = m->tensor({kvd, c.dim}, bf16, rng, g);
        L.wv = m->tensor({kvd, c.dim}, bf16, rng, g);
        L.wo = m->tensor({c.dim, qd}, bf16, rng, 1.0f / std::sqrt(float(qd)));
        L.q_norm = m->tensor({c.head_dim}, bf16, rng, 0.1f, 1.0f);
        L.k_norm = m->tensor({c.head_dim}, bf16, rng, 0.1f, 1.0f);
        L.ffn_norm = m->tensor({c.dim}, bf16, rng, 0.1f, 1.0f);
        L.w_gate = m->tensor({c.ffn_dim, c.dim}, bf16, rng, g);
        L.w_up = m->tensor({c.ffn_dim, c.dim}, bf16, rng, g);
        L.w_down = m->tensor({c.dim, c.ffn_dim}, bf16, rng, 1.0f / std::sqrt(float(c.ffn_dim)));
        m->w.layers.push_back(L);
    }
    m->w.final_norm = m->tensor({c.dim}, bf16, rng, 0.1f, 1.0f);
    m->w.lm_head = m->w.embed;
    return *m;
}

struct GemmShape {
    int64_t n, k;
};

// The per-layer GEMMs: (out features, in features).
std::vector<GemmShape> layer_gemms(const ModelConfig& c) {
    const int64_t qd = int64_t(c.n_heads) * c.head_dim, kvd = int64_t(c.n_kv_heads) * c.head_dim;
    return {{qd, c.dim}, {kvd, c.dim}, {kvd, c.dim}, {c.dim, qd}, {c.ffn_dim, c.dim}, {c.ffn_dim, c.dim}, {c.dim, c.ffn_dim}};
}

double layer_gemm_flops(const ModelConfig& c, int64_t t) {
    double f = 0;
    for (const GemmShape& s : layer_gemms(c)) f += 2.0 * double(t) * double(s.n) * double(s.k);
    return f;
}

double attention_flops(const ModelConfig& c, int64_t t) {
    return 2.0 * 2.0 * c.head_dim * c.n_heads * double(t) * double(t + 1) / 2.0;
}

double forward_flops(const ModelConfig& c, int64_t t) {
    return c.n_layers * (layer_gemm_flops(c, t) + attention_flops(c, t)) + 2.0 * c.vocab_size * c.dim;
}

#ifdef CC_HAVE_OPENBLAS
// OpenBLAS SGEMM GFLOP/s over one layer's GEMM shapes at M = t (F32 copies of layer 0's weights):
// best of 3 after a warm-up. Memoised per t so the prefill benchmarks can report their fraction.
double openblas_gflops(int t) {
    static std::map<int, double> memo;
    if (auto it = memo.find(t); it != memo.end()) return it->second;
    const ModelConfig c = bench_config();
    Rng rng{42};
    std::vector<float> x(size_t(t) * c.ffn_dim), y(size_t(t) * c.ffn_dim);
    for (auto& v : x) v = rng.normal();
    std::vector<std::vector<float>> w;
    for (const GemmShape& s : layer_gemms(c)) {
        w.emplace_back(size_t(s.n * s.k));
        for (auto& v : w.back()) v = rng.normal() * 0.03f;
    }
    auto run = [&] {
        const auto shapes = layer_gemms(c);
        for (size_t i = 0; i < shapes.size(); ++i)
            cblas_sgemm(kCblasRowMajor, kCblasNoTrans, kCblasTrans, t, int(shapes[i].n), int(shapes[i].k), 1.0f, x.data(),
                        int(shapes[i].k), w[i].data(), int(shapes[i].k), 0.0f, y.data(), int(shapes[i].n));
    };
    run();
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        run();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return memo[t] = layer_gemm_flops(c, t) / best * 1e-9;
}

void BM_openblas_sgemm(benchmark::State& state) {
    const int t = int(state.range(0));
    double g = 0;
    for (auto _ : state) g = openblas_gflops(t);
    state.counters["gflops"] = g;
    state.counters["tokens"] = t;
}
#endif

// Our GEMM alone on the same shapes (F32 or BF16 weights), for comparison with SGEMM.
void BM_cpu_gemm_layer(benchmark::State& state) {
    const int t = int(state.range(0));
    const bool bf16 = state.range(1) != 0;
    const SynthModel& m = model(bf16);
    const ModelConfig& c = m.w.config;
    cpu::ThreadPool pool(cpu::ThreadPool::available_cores());
    cpu::Workspace ws(pool.n_threads());
    const cpu::Kernels& k = cpu::kernels_for(cpu::resolve_isa(""));
    std::vector<float> x(size_t(t) * c.ffn_dim, 0.01f), y(size_t(t) * c.ffn_dim);
    const LayerWeights& L = m.w.layers[0];
    const Tensor* ts[] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down};
    for (auto _ : state) {
        for (const Tensor* tt : ts) {
            cpu::Matrix mat{tt->data, bf16, tt->shape[0], tt->shape[1]};
            k.gemm(pool, ws, x.data(), t, mat, y.data());
        }
        benchmark::ClobberMemory();
    }
    const double flops = layer_gemm_flops(c, t);
    state.counters["gflops"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
#ifdef CC_HAVE_OPENBLAS
    state.counters["openblas_gflops"] = openblas_gflops(t);
#endif
}

// range(1): 0 = F32 weights, 1 = BF16 weights, 2 = BF16 weights as bf16dot (BF16 activations,
// VDPBF16PS; skipped on a CPU without AVX-512 BF16).
void BM_prefill(benchmark::State& state) {
    const int t = int(state.range(0));
    const bool bf16 = state.range(1) != 0;
    const SynthModel& m = model(bf16);
    CpuBackendOptions o;
    if (state.range(1) == 2) {
        if (!cpu::bf16dot::supported()) {
            state.SkipWithError("skipped: this CPU has no AVX-512 BF16 (the bf16dot format)");
            for (auto _ : state) {
            }
            return;
        }
        o.weights = WeightDType::bf16dot;
    }
    auto be = make_cpu_backend(m.w, o);
    std::vector<token_id> tokens(static_cast<size_t>(t));
    Rng rng{7};
    for (auto& id : tokens) id = token_id(rng.next() % uint64_t(m.w.config.vocab_size));
    const std::vector<int> last{t - 1};
    {  // warm-up: grows the scratch and touches the weights
        auto kv = be->allocate_kv(t);
        benchmark::DoNotOptimize(be->forward(tokens, {nullptr, 0, kv.get()}, last));
    }
    double seconds = 0;
    for (auto _ : state) {
        state.PauseTiming();
        auto kv = be->allocate_kv(t);
        state.ResumeTiming();
        const auto t0 = std::chrono::steady_clock::now();
        auto logits = be->forward(tokens, {nullptr, 0, kv.get()}, last);
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        benchmark::DoNotOptimize(logits.data());
    }
    const double per_iter = seconds / double(state.iterations());
    const double gflops = forward_flops(m.w.config, t) / per_iter * 1e-9;
    state.counters["tokens_per_s"] = double(t) / per_iter;
    state.counters["gflops"] = gflops;
    state.counters["attention_share"] =
        attention_flops(m.w.config, t) / (layer_gemm_flops(m.w.config, t) + attention_flops(m.w.config, t));
    state.SetLabel(be->numerics_id() + (bf16 ? " weights bf16" : " weights f32"));
#ifdef CC_HAVE_OPENBLAS
    const double ob = openblas_gflops(t);
    state.counters["openblas_gflops"] = ob;
    state.counters["fraction_of_openblas"] = gflops / ob;
#endif
}

// The bf16dot GEMMs alone (BF16 activations, VDPBF16PS; skipped without AVX-512 BF16) on
// Qwen3-0.6B's layer shapes (q|k|v stacked 4096 x 1024, o 1024 x 2048, gate|up 6144 x 1024, down
// 1024 x 3072): range(0) rows. The weights come in 6 copies visited in turn (190 MB), so that they
// stream from memory as a model's 28 layers do: at 23 rows (a cache hit's suffix) that, not the
// arithmetic, may bound it.
void BM_bf16dot_gemm(benchmark::State& state) {
    if (!cpu::bf16dot::supported()) {
        state.SkipWithError("skipped: this CPU has no AVX-512 BF16");
        for (auto _ : state) {
        }
        return;
    }
    const int m = int(state.range(0));
    constexpr int kCopies = 6;
    const GemmShape shapes[] = {{4096, 1024}, {1024, 2048}, {6144, 1024}, {1024, 3072}};
    cpu::ThreadPool pool(cpu::ThreadPool::available_cores());
    cpu::Workspace ws(pool.n_threads());
    Rng rng{5};
    std::vector<cpu::PackedMatrix> packed;
    double flops = 0;
    for (int c = 0; c < kCopies; ++c)
        for (const GemmShape& sh : shapes) {
            std::vector<uint16_t> w(size_t(sh.n * sh.k));
            for (auto& x : w) x = km::f32_to_bf16(rng.normal() * 0.03f);
            const cpu::Matrix src{w.data(), true, sh.n, sh.k};
            packed.push_back(cpu::pack_matrix(pool, src, cpu::WFormat::bf16dot, cpu::bf16dot::panel_width()));
            if (c == 0) flops += 2.0 * m * double(sh.n) * double(sh.k);
        }
    std::vector<float> x(size_t(m) * 3072), y(size_t(m) * 6144);
    for (auto& v : x) v = rng.normal();
    int copy = 0;
    for (auto _ : state) {
        copy = (copy + 1) % kCopies;
        for (size_t i = 0; i < std::size(shapes); ++i)
            cpu::bf16dot::gemm(pool, ws, x.data(), m, packed[size_t(copy) * std::size(shapes) + i].view, y.data());
        benchmark::DoNotOptimize(y.data());
    }
    state.counters["gflops"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    double bytes = 0;
    for (const GemmShape& sh : shapes) bytes += 2.0 * double(sh.n) * double(sh.k);
    state.counters["weight_gb_s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// One layer's attention alone, on Qwen3-0.6B's attention shape (16 heads, 8 kv heads, head_dim 128):
// range(0) query rows after range(1) cached positions (a tiled block the backend wrote), KV F32
// (range(2) 0), BF16 (1), or BF16 with BF16 dot products (2: AttentionArgs::bf16_dot, the bf16dot
// weights' attention; skipped without AVX-512 BF16). {23, 2952}: the side-by-side cache hit's
// suffix; {512, 0}: a prefill's causal block; {1, 3000}: a decode step at depth 3,000. FLOPs: 4 * head_dim * n_heads per (row, key it sees).
// The prefix's K/V come in 8 copies visited in turn, as a model's layers are, so that a long
// prefix streams from memory rather than from the last level cache.
void BM_attention(benchmark::State& state) {
    const int rows = int(state.range(0)), prefix = int(state.range(1));
    const bool bf16 = state.range(2) != 0, dot = state.range(2) == 2;
    if (dot && !cpu::bf16dot::supported()) {
        state.SkipWithError("skipped: this CPU has no AVX-512 BF16");
        for (auto _ : state) {
        }
        return;
    }
    constexpr int n_heads = 16, n_kv = 8, hd = 128;
    cpu::ThreadPool pool(cpu::ThreadPool::available_cores());
    cpu::Workspace ws(pool.n_threads());
    const cpu::Kernels& k = cpu::kernels_for(cpu::resolve_isa(""));
    Rng rng{11};
    const auto round_up = [](int n) { return (n + cpu::kKeyTile - 1) / cpu::kKeyTile * cpu::kKeyTile; };
    const int cap[2] = {round_up(std::max(prefix, 1)), round_up(rows)};
    constexpr int kCopies = 8;
    std::vector<std::vector<float>> kv32(4);
    std::vector<std::vector<uint16_t>> kv16(4);
    std::vector<std::vector<float>> prefix32(2 * kCopies);  // copy c: K at 2c, V at 2c + 1
    std::vector<std::vector<uint16_t>> prefix16(2 * kCopies);
    cpu::AttentionArgs a;
    a.kv_bf16 = bf16;
    a.bf16_dot = dot;
    a.n_heads = n_heads;
    a.n_kv_heads = n_kv;
    a.head_dim = hd;
    a.scale = 1.0f / std::sqrt(float(hd));
    for (int si = 0; si < 2; ++si) {
        const size_t n = size_t(n_kv) * size_t(cap[si]) * hd;
        for (int kvi = 0; kvi < 2; ++kvi) {  // the layout does not matter for the timing: random values
            auto& f = kv32[size_t(2 * si + kvi)];
            auto& h = kv16[size_t(2 * si + kvi)];
            f.resize(n);
            h.resize(n);
            for (size_t i = 0; i < n; ++i) h[i] = km::f32_to_bf16(f[i] = rng.normal());
        }
        cpu::KvSegment& seg = a.seg[si];
        seg.k = bf16 ? static_cast<const void*>(kv16[size_t(2 * si)].data()) : kv32[size_t(2 * si)].data();
        seg.v = bf16 ? static_cast<const void*>(kv16[size_t(2 * si + 1)].data()) : kv32[size_t(2 * si + 1)].data();
        seg.capacity = cap[si];
        seg.first_pos = si == 0 ? 0 : prefix;
        seg.n_tokens = si == 0 ? prefix : rows;
    }
    std::vector<float> q(size_t(rows) * n_heads * hd), out(q.size());
    for (auto& v : q) v = rng.normal();
    a.q = q.data();
    a.n_rows = rows;
    a.first_pos = prefix;
    a.out = out.data();
    for (int c = 0; c < 2 * kCopies; ++c) {
        prefix32[size_t(c)] = kv32[size_t(c % 2)];
        prefix16[size_t(c)] = kv16[size_t(c % 2)];
    }
    const auto use_copy = [&](int c) {
        a.seg[0].k = bf16 ? static_cast<const void*>(prefix16[size_t(2 * c)].data()) : prefix32[size_t(2 * c)].data();
        a.seg[0].v = bf16 ? static_cast<const void*>(prefix16[size_t(2 * c + 1)].data()) : prefix32[size_t(2 * c + 1)].data();
    };
    use_copy(0);
    k.attention(pool, ws, a);  // warm-up: grows the scratch
    int copy = 0;
    for (auto _ : state) {
        use_copy(copy = (copy + 1) % kCopies);
        k.attention(pool, ws, a);
        benchmark::DoNotOptimize(out.data());
    }
    double pairs = 0;  // (row, key) pairs: row t sees prefix + t + 1 keys
    for (int t = 0; t < rows; ++t) pairs += double(prefix + t + 1);
    state.counters["gflops"] =
        benchmark::Counter(4.0 * hd * n_heads * pairs * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(dot ? "kv bf16, bf16 dot products" : bf16 ? "kv bf16" : "kv f32");
}

// Generation: one token at a time after a 512-token prompt (memory-bound: every weight is read
// once per token).
void BM_decode(benchmark::State& state) {
    const bool bf16 = state.range(0) != 0;
    const SynthModel& m = model(bf16);
    auto be = make_cpu_backend(m.w, CpuBackendOptions{});
    const int prompt = 512, n_new = 16;
    std::vector<token_id> tokens(static_cast<size_t>(prompt));
    Rng rng{9};
    for (auto& id : tokens) id = token_id(rng.next() % uint64_t(m.w.config.vocab_size));
    const std::vector<int> last{0};
    double seconds = 0;
    for (auto _ : state) {
        state.PauseTiming();
        auto kv = be->allocate_kv(prompt + n_new);
        be->forward(tokens, {nullptr, 0, kv.get()}, std::vector<int>{prompt - 1});
        state.ResumeTiming();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n_new; ++i) {
            const token_id one[1] = {token_id(i + 3)};
            benchmark::DoNotOptimize(be->forward(one, {nullptr, 0, kv.get()}, last).data());
        }
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    const double per_token = seconds / double(state.iterations()) / n_new;
    state.counters["ms_per_token"] = per_token * 1e3;
    state.counters["tokens_per_s"] = 1.0 / per_token;
    state.SetLabel(be->numerics_id() + (bf16 ? " weights bf16" : " weights f32"));
}

#ifdef CC_HAVE_CUDA
// ---- --backend cuda ----------------------------------------------------------------------------

// Throughput of `gemm` (x, w, y, n, k) -> ok over one layer's GEMM shapes at M = t: best of 5
// after a warm-up, in TFLOP/s; 0 when a CUDA call fails (the fraction is then not reported).
template <class Gemm>
double layer_gemms_tflops(const ModelConfig& c, int t, Gemm&& gemm) {
    const auto shapes = layer_gemms(c);
    int64_t max_k = 0, max_n = 0;
    for (const auto& sh : shapes) max_k = std::max(max_k, sh.k), max_n = std::max(max_n, sh.n);
    void *x = nullptr, *y = nullptr;
    std::vector<void*> w(shapes.size(), nullptr);
    cudaEvent_t start = nullptr, stop = nullptr;
    double result = 0;
    bool ok = cudaMalloc(&x, size_t(t) * size_t(max_k) * 2) == cudaSuccess &&
              cudaMalloc(&y, size_t(t) * size_t(max_n) * 4) == cudaSuccess && cudaEventCreate(&start) == cudaSuccess &&
              cudaEventCreate(&stop) == cudaSuccess;
    for (size_t i = 0; ok && i < shapes.size(); ++i)
        ok = cudaMalloc(&w[i], size_t(shapes[i].n) * size_t(shapes[i].k) * 2) == cudaSuccess &&
             cudaMemset(w[i], 0x3c, size_t(shapes[i].n) * size_t(shapes[i].k) * 2) == cudaSuccess;
    if (ok) ok = cudaMemset(x, 0x3c, size_t(t) * size_t(max_k) * 2) == cudaSuccess;  // bf16 0x3c3c ~ 0.0115
    auto run = [&] {
        for (size_t i = 0; ok && i < shapes.size(); ++i) ok = gemm(x, w[i], y, int(shapes[i].n), int(shapes[i].k));
    };
    if (ok) {
        run();
        float best_ms = 1e30f;
        for (int rep = 0; ok && rep < 5; ++rep) {
            cudaEventRecord(start);
            run();
            cudaEventRecord(stop);
            float ms = 0;
            ok = cudaEventSynchronize(stop) == cudaSuccess && cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
            best_ms = std::min(best_ms, ms);
        }
        if (ok && best_ms > 0) result = layer_gemm_flops(c, t) / (double(best_ms) * 1e-3) * 1e-12;
    }
    for (void* p : w) cudaFree(p);
    cudaFree(x);
    cudaFree(y);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    cudaGetLastError();
    return result;
}

// cuBLAS BF16 GEMM throughput (FP32 accumulate, cublasGemmEx, its own heuristic) on those shapes:
// the practical ceiling of the prefill's GEMMs on this device. Memoised per (shape, t).
double cublas_bf16_tflops(const ModelConfig& c, int t) {
    static std::map<std::pair<int64_t, int>, double> memo;
    const auto key = std::make_pair(int64_t(c.dim) * 1000003 + c.ffn_dim, t);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    cublasHandle_t handle = nullptr;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return memo[key] = 0;
    const double r = layer_gemms_tflops(c, t, [&](const void* x, const void* w, void* y, int n, int k) {
        const float alpha = 1.0f, beta = 0.0f;
        // Row-major Y[t, n] = X[t, k] * W[n, k]^T is column-major Y^T = W^T(op T) * X^T.
        return cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, t, k, &alpha, w, CUDA_R_16BF, k, x, CUDA_R_16BF, k,
                            &beta, y, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
    });
    cublasDestroy(handle);
    return memo[key] = r;
}

// Our own GEMM kernels (CONTEXTCACHE_CUDA_GEMM=own; cuda/gemm_mma_kernels.cuh) on the same shapes,
// one weight a launch, as `kernel` names them: the tiled kernel in blocks of 128 rows or of 64
// (prefill), the rows kernel with loads in batches of 8 steps or of 16 (decode). Which pays at which
// M is what these figures are for (the backend picks by geom::gemm_mma_block_rows and
// geom::gemm_rows_deep). The backend itself runs a long prefill in chunks of max_batch_tokens (512) rows.
double own_gemm_tflops(const ModelConfig& c, int t, cuda::kern::GemmKernel kernel) {
    static std::map<std::tuple<int64_t, int, int>, double> memo;
    const auto key = std::make_tuple(int64_t(c.dim) * 1000003 + c.ffn_dim, t, int(kernel));
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    return memo[key] = layer_gemms_tflops(c, t, [&](const void* x, const void* w, void* y, int n, int k) {
               try {
                   const cuda::kern::GemmOut out{static_cast<const uint16_t*>(w), static_cast<float*>(y), n};
                   cuda::gemm_mma_launch(static_cast<const uint16_t*>(x), std::span(&out, 1), t, k, kernel, nullptr);
               } catch (const std::exception& e) {
                   std::cerr << "bench_prefill: own gemm: " << e.what() << "\n";
                   return false;
               }
               return true;
           });
}

// The models: the small bench shape above and the Qwen3-8B shape (the target shape).
const ModelWeights& cuda_model(const std::string& name) {
    if (name == "bench") return model(true).w;
    static std::map<std::string, std::unique_ptr<ModelWeights>> cache;
    auto& w = cache[name];
    if (!w) w = std::make_unique<ModelWeights>(generate_builtin_weights(*find_builtin(name)));
    return *w;
}

// One backend per model (weights are uploaded once).
Backend& cuda_backend_for(const std::string& name) {
    static std::map<std::string, std::unique_ptr<Backend>> cache;
    auto& b = cache[name];
    if (!b) {
        cuda::CudaBackendOptions o;
        o.mma_attention = cuda::mma_attention_from_env();  // CONTEXTCACHE_CUDA_ATTENTION=mma: the tensor-core kernel
        o.graphs = cuda::graphs_from_env();                // CONTEXTCACHE_CUDA_GRAPHS=on: small chunks as graphs
        o.graph_replay = cuda::graph_replay_from_env();    // =replay: captured once per shape and bucket
        o.own_gemm = cuda::own_gemm_from_env();            // CONTEXTCACHE_CUDA_GEMM=own: our tensor-core GEMMs
        o.fused_kernels = cuda::fused_kernels_from_env();  // CONTEXTCACHE_CUDA_FUSED=on: residual add + RMSNorm
        b = cuda::make_cuda_backend(cuda_model(name), o);
    }
    return *b;
}

void BM_cuda_prefill(benchmark::State& state, const std::string& name, const bench::CudaDevice& dev) {
    const int t = int(state.range(0));
    const ModelWeights& w = cuda_model(name);
    Backend& be = cuda_backend_for(name);
    std::vector<token_id> tokens(static_cast<size_t>(t));
    Rng rng{7};
    for (auto& id : tokens) id = token_id(rng.next() % uint64_t(w.config.vocab_size));
    const std::vector<int> last{t - 1};
    {  // warm-up (cuBLAS heuristics, first-touch allocations)
        auto kv = be.allocate_kv(t);
        benchmark::DoNotOptimize(be.forward(tokens, {nullptr, 0, kv.get()}, last));
    }
    double seconds = 0;
    for (auto _ : state) {
        state.PauseTiming();
        auto kv = be.allocate_kv(t);
        state.ResumeTiming();
        const auto t0 = std::chrono::steady_clock::now();
        auto logits = be.forward(tokens, {nullptr, 0, kv.get()}, last);  // returns host logits: synchronised
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        benchmark::DoNotOptimize(logits.data());
    }
    const double per_iter = seconds / double(state.iterations());
    const double tflops = bench::forward_flops(w.config, t) / per_iter * 1e-12;
    const double gb_s = double(bench::weight_bytes(w)) / per_iter * 1e-9;
    state.counters["tokens_per_s"] = double(t) / per_iter;
    state.counters["tflops"] = tflops;
    state.counters["gb_s"] = gb_s;
    if (dev.peak_bf16_tflops > 0) state.counters["fraction_of_peak"] = tflops / dev.peak_bf16_tflops;
    if (dev.peak_dram_gb_s > 0) state.counters["fraction_of_dram_peak"] = gb_s / dev.peak_dram_gb_s;
    const double cublas = cublas_bf16_tflops(w.config, t);
    if (cublas > 0) {
        state.counters["cublas_gemm_tflops"] = cublas;
        state.counters["fraction_of_cublas_gemm"] = tflops / cublas;
    }
    if (t > cuda::geom::kGemmRowsMax) {  // our tiled kernel's two block heights on the same shapes
        state.counters["own_gemm_tflops_128_rows"] = own_gemm_tflops(w.config, t, cuda::kern::GemmKernel::tiled);
        state.counters["own_gemm_tflops_64_rows"] = own_gemm_tflops(w.config, t, cuda::kern::GemmKernel::tiled_half);
    }
    if (name == "qwen3-8b" && t == 3000 && dev.peak_bf16_tflops > 0) {
        state.counters["target_fraction_of_peak"] = 0.5;
        state.counters["target_met"] = tflops / dev.peak_bf16_tflops >= 0.5 ? 1 : 0;
    }
    state.SetLabel(name + " " + be.numerics_id() + " on " + dev.name);
}

// Decode: one token at a time after a 512-token prompt; memory-bound, so GB/s against the DRAM peak.
void BM_cuda_decode(benchmark::State& state, const std::string& name, const bench::CudaDevice& dev) {
    const ModelWeights& w = cuda_model(name);
    Backend& be = cuda_backend_for(name);
    const int prompt = 512, n_new = 16;
    std::vector<token_id> tokens(static_cast<size_t>(prompt));
    Rng rng{9};
    for (auto& id : tokens) id = token_id(rng.next() % uint64_t(w.config.vocab_size));
    const std::vector<int> last{0};
    double seconds = 0;
    for (auto _ : state) {
        state.PauseTiming();
        auto kv = be.allocate_kv(prompt + n_new);
        be.forward(tokens, {nullptr, 0, kv.get()}, std::vector<int>{prompt - 1});
        state.ResumeTiming();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n_new; ++i) {
            const token_id one[1] = {token_id(i + 3)};
            benchmark::DoNotOptimize(be.forward(one, {nullptr, 0, kv.get()}, last).data());
        }
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    const double per_token = seconds / double(state.iterations()) / n_new;
    const double gb_s = double(bench::weight_bytes(w)) / per_token * 1e-9;
    state.counters["ms_per_token"] = per_token * 1e3;
    state.counters["tokens_per_s"] = 1.0 / per_token;
    state.counters["gb_s"] = gb_s;
    if (dev.peak_dram_gb_s > 0) state.counters["fraction_of_dram_peak"] = gb_s / dev.peak_dram_gb_s;
    // our rows kernel on one layer's GEMM shapes at one row, each weight its own launch, with its
    // loads in batches of 8 steps and of 16 (geom::gemm_rows_deep picks 16 where a launch has few
    // warps an SM): the weights' GB/s (one row: a FLOP per weight byte, so GB/s = 1000 x TFLOP/s)
    state.counters["own_rows_gb_s_batch_8"] = 1e3 * own_gemm_tflops(w.config, 1, cuda::kern::GemmKernel::rows);
    state.counters["own_rows_gb_s_batch_16"] = 1e3 * own_gemm_tflops(w.config, 1, cuda::kern::GemmKernel::rows_deep);
    state.SetLabel(name + " " + be.numerics_id() + " on " + dev.name);
}

void register_cuda(const bench::CudaDevice& dev) {
    for (const std::string name : {"bench", "qwen3-8b"}) {
        benchmark::RegisterBenchmark(("BM_cuda_prefill/" + name).c_str(),
                                     [name, dev](benchmark::State& s) { BM_cuda_prefill(s, name, dev); })
            ->Arg(512)
            ->Arg(3000)
            ->Iterations(3)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("BM_cuda_decode/" + name).c_str(),
                                     [name, dev](benchmark::State& s) { BM_cuda_decode(s, name, dev); })
            ->Iterations(2)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
}
#endif

void register_cpu() {
#ifdef CC_HAVE_OPENBLAS
    benchmark::RegisterBenchmark("BM_openblas_sgemm", BM_openblas_sgemm)->Arg(512)->Arg(3000)->Iterations(1)->Unit(benchmark::kMillisecond);
#endif
    benchmark::RegisterBenchmark("BM_cpu_gemm_layer", BM_cpu_gemm_layer)
        ->Args({512, 1})
        ->Args({3000, 1})
        ->Args({3000, 0})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_bf16dot_gemm", BM_bf16dot_gemm)->Arg(1)->Arg(23)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("BM_attention", BM_attention)
        ->Args({23, 2952, 1})
        ->Args({23, 2952, 2})
        ->Args({23, 2952, 0})
        ->Args({512, 0, 1})
        ->Args({512, 0, 2})
        ->Args({1, 3000, 1})
        ->Args({1, 3000, 2})
        ->Args({8, 2985, 2})  // the rows of 8 decoding sequences over a shared 20-tool group (bench_step)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_decode", BM_decode)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("BM_prefill", BM_prefill)
        ->Args({512, 1})
        ->Args({3000, 1})
        ->Args({3000, 0})
        ->Args({512, 2})
        ->Args({3000, 2})
        ->Iterations(2)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
    const std::string backend = cc::bench::take_backend_arg(argc, argv, "cpu");
    if (backend != "cpu" && backend != "cuda") {
        std::cerr << "bench_prefill: --backend must be cpu or cuda, not \"" << backend << "\"\n";
        return 2;
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    if (backend == "cuda") {
        std::string reason;
        const auto dev = cc::bench::cuda_device(reason);
        if (!dev) return cc::bench::print_skipped("bench_prefill", reason);
#ifdef CC_HAVE_CUDA
        benchmark::AddCustomContext("backend", "cuda");
        benchmark::AddCustomContext("device", dev->name);
        benchmark::AddCustomContext("peak_bf16_tflops", std::to_string(dev->peak_bf16_tflops));
        benchmark::AddCustomContext("peak_dram_gb_s", std::to_string(dev->peak_dram_gb_s));
        register_cuda(*dev);
#endif
    } else {
        benchmark::AddCustomContext("backend", "cpu");
        benchmark::AddCustomContext("cpu_isa", cc::cpu::isa_name(cc::cpu::resolve_isa("")));
        benchmark::AddCustomContext("threads", std::to_string(cc::cpu::ThreadPool::available_cores()));
#ifdef CC_HAVE_OPENBLAS
        benchmark::AddCustomContext("openblas", "yes");
#else
        benchmark::AddCustomContext("openblas", "absent: no SGEMM comparison");
#endif
        register_cpu();
    }
    return cc::bench::run_selected_benchmarks("bench_prefill", "the CUDA rows need --backend cuda");
}
