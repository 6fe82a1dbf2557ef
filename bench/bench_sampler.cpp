// bench_sampler: one token sampled from a 151,936-entry logits row (Qwen3's vocabulary) at a
// temperature, as every request that does not decode greedily does once per generated token.
//   bench_sampler [--benchmark_format=json]
// Two rows: "peaky" (20 tokens 12 above a N(0, 3) rest: most of the mass on a few tokens, as a
// language model's next token usually is) and "flat" (N(0, 3) alone: the nucleus spans thousands
// of tokens, the sampler's worst case); top_p 1 (the whole distribution) and 0.95 / 0.9 (a nucleus).
#include "bench/gbench_main.h"
#include "core/engine/sampler.h"

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

namespace {

std::vector<float> row(bool peaky) {
    std::mt19937 g(17);
    std::normal_distribution<float> d(0.0f, 3.0f);
    std::vector<float> l(151936);
    for (auto& x : l) x = d(g);
    if (peaky)
        for (size_t i = 0; i < 20; ++i) l[(i * 7919) % l.size()] += 12.0f;
    return l;
}

void BM_SampleToken(benchmark::State& state) {
    const bool peaky = state.range(0) == 1;
    const float top_p = float(state.range(1)) / 100.0f;
    const std::vector<float> logits = row(peaky);
    std::mt19937_64 rng(5);
    for (auto _ : state) benchmark::DoNotOptimize(cc::sample_token(logits, 0.7f, top_p, rng));
    state.SetLabel(std::string(peaky ? "peaky" : "flat") + ", T 0.7, top_p " + std::to_string(top_p).substr(0, 4));
}
BENCHMARK(BM_SampleToken)
    ->ArgsProduct({{1, 0}, {100, 95, 90}})
    ->ArgNames({"peaky", "top_p_pct"})
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    benchmark::AddCustomContext("vocabulary", "151936 (Qwen3)");
    return cc::bench::run_selected_benchmarks("bench_sampler");
}
