// The end of main() in the Google Benchmark programs here (bench_prefill, bench_group_file,
// bench_sampler, bench_tokenizer).
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <iostream>

namespace cc::bench {

// Runs the benchmarks that --benchmark_filter selects and shuts the library down. A filter that
// selects none is a mistake (a misspelt name, or rows that another option registers), not a run:
// it says so on stderr and returns 1, so that a script's step fails instead of writing an empty
// JSON; else 0. `hint`, when given, says what usually registers the missing rows.
inline int run_selected_benchmarks(const char* program, const char* hint = nullptr) {
    const size_t ran = benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    if (ran > 0) return 0;
    std::cerr << program << ": no benchmark matched";
    if (hint != nullptr) std::cerr << " (" << hint << ")";
    std::cerr << "\n";
    return 1;
}

}  // namespace cc::bench
