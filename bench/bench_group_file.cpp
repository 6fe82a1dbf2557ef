// Group file speed on the built-in demo group: 20 tools, 2952 prefix tokens, 8 layers, 4 KV heads,
// head_dim 64, f32 = 48.4 MB of KV. Files go to a temp dir under $TMPDIR (default /tmp): point
// TMPDIR at the cache's disk to measure that disk.
//
//   build/bench/bench_group_file --benchmark_format=json
//
// Counters: GB_per_s (payload bytes / wall time), file_MB.
//   BM_MapGroupFile        the disk tier's load: mmap + verify every layer's XXH3 in place (no copy;
//                          the CPU backend then attends to the mapping), warm page cache; GB/s
//                          over the file's bytes
//   BM_ReadGroupFile       read + verify every layer's XXH3 from a warm page cache into a reused
//                          buffer (the disk tier's load into a host buffer that is already there)
//   BM_ReadGroupFileFresh  the same into a new std::vector each time (its page faults included)
//   BM_ReadGroupHeader     preamble + JSON header only (index rebuild)
//   BM_WriteGroupFile      temp file, write, fsync, rename, directory fsync
//   BM_MemcpyCeiling, BM_Xxh3Ceiling  the machine's memcpy and XXH3 speed on the same 48 MB: a
//                          read + verify is one of each, so it cannot beat 1 / (1/copy + 1/hash)
#include "bench/bench_common.h"
#include "bench/gbench_main.h"
#include "core/store/group_file.h"

#include <benchmark/benchmark.h>
#include <xxhash.h>
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>  // the same dispatched XXH3 as core/store/group_file.cpp
#endif

#include <unistd.h>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>

namespace {

namespace fs = std::filesystem;

cc::GroupMeta demo_header() {
    cc::GroupMeta h;
    h.group_key = std::string(64, 'a');
    h.model_fingerprint = std::string(64, 'b');
    h.chat_format = "qwen3";
    h.backend_numerics = "cpu/f32";
    h.tools_hash = std::string(64, 'c');
    h.system_prompt_sha256 = std::string(64, 'd');
    h.n_layers = 8;
    h.n_kv_heads = 4;
    h.head_dim = 64;
    h.kv_dtype = cc::KvDType::f32;
    std::mt19937 rng(1);
    for (int i = 0; i < 2952; ++i) h.prefix_ids.push_back(static_cast<cc::token_id>(rng() % 151643));
    for (int t = 0; t < 20; ++t) {
        h.tool_names.push_back("demo_tool_" + std::to_string(t));
        h.tool_token_boundaries.push_back(40 + t * 145);
    }
    h.created_unix_ms = 1714000000000;
    return h;
}

// The shared fixture: one header, one payload (KV-like f32 values), one temp dir.
struct Demo {
    cc::GroupMeta header = demo_header();
    std::vector<std::byte> payload;
    fs::path dir;
    fs::path file;

    Demo() {
        std::vector<float> kv(cc::group_payload_bytes(header) / sizeof(float));
        std::mt19937 rng(2);
        std::normal_distribution<float> nd(0.f, 1.f);
        for (auto& x : kv) x = nd(rng);
        payload.resize(kv.size() * sizeof(float));
        std::memcpy(payload.data(), kv.data(), payload.size());
        dir = fs::temp_directory_path() / ("cc_bench_group_file_" + std::to_string(::getpid()));
        fs::create_directories(dir);
        file = dir / (header.group_key + ".kv");
        cc::write_group_file(file, header, payload);
    }
    ~Demo() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

Demo& demo() {
    static Demo d;
    return d;
}

void set_counters(benchmark::State& state, size_t bytes) {
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
    state.counters["GB_per_s"] =
        benchmark::Counter(static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["file_MB"] = static_cast<double>(fs::file_size(demo().file)) / 1e6;
}

void BM_MapGroupFile(benchmark::State& state) {
    Demo& d = demo();
    const size_t file_bytes = fs::file_size(d.file);
    { const auto warm = cc::map_group_file(d.file); }
    for (auto _ : state) {
        const auto m = cc::map_group_file(d.file);
        benchmark::DoNotOptimize(m.payload.data());
    }
    {
        const auto m = cc::map_group_file(d.file);
        if (!std::equal(m.payload.begin(), m.payload.end(), d.payload.begin(), d.payload.end()))
            state.SkipWithError("payload differs");
    }
    set_counters(state, file_bytes);
}
BENCHMARK(BM_MapGroupFile)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

void BM_ReadGroupFile(benchmark::State& state) {
    Demo& d = demo();
    std::vector<std::byte> out;
    cc::read_group_file(d.file, out);  // warms the page cache and sizes the buffer
    for (auto _ : state) {
        const auto h = cc::read_group_file(d.file, out);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    if (out != d.payload) state.SkipWithError("payload differs");
    set_counters(state, d.payload.size());
}
BENCHMARK(BM_ReadGroupFile)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

void BM_ReadGroupFileFresh(benchmark::State& state) {
    Demo& d = demo();
    for (auto _ : state) {
        std::vector<std::byte> out;
        const auto h = cc::read_group_file(d.file, out);
        benchmark::DoNotOptimize(out.data());
    }
    set_counters(state, d.payload.size());
}
BENCHMARK(BM_ReadGroupFileFresh)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

void BM_ReadGroupHeader(benchmark::State& state) {
    Demo& d = demo();
    for (auto _ : state) {
        const auto h = cc::read_group_header(d.file);
        benchmark::DoNotOptimize(h.prefix_ids.data());
    }
}
BENCHMARK(BM_ReadGroupHeader)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_WriteGroupFile(benchmark::State& state) {
    Demo& d = demo();
    const fs::path target = d.dir / "written.kv";
    for (auto _ : state) cc::write_group_file(target, d.header, d.payload);
    set_counters(state, d.payload.size());
}
BENCHMARK(BM_WriteGroupFile)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

void BM_MemcpyCeiling(benchmark::State& state) {
    Demo& d = demo();
    std::vector<std::byte> out(d.payload.size());
    for (auto _ : state) {
        std::memcpy(out.data(), d.payload.data(), out.size());
        benchmark::ClobberMemory();
    }
    set_counters(state, d.payload.size());
}
BENCHMARK(BM_MemcpyCeiling)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

void BM_Xxh3Ceiling(benchmark::State& state) {
    Demo& d = demo();
    for (auto _ : state) benchmark::DoNotOptimize(XXH3_64bits(d.payload.data(), d.payload.size()));
    set_counters(state, d.payload.size());
}
BENCHMARK(BM_Xxh3Ceiling)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    const auto machine = cc::bench::machine_json();
    for (const auto& [k, v] : machine.items())
        benchmark::AddCustomContext("cc_" + k, v.is_string() ? v.get<std::string>() : v.dump());
    benchmark::AddCustomContext("group",
                                "built-in demo: 20 tools, 2952 tokens, 8 layers, 4 KV heads, head_dim 64, f32");
    benchmark::AddCustomContext("dir", fs::temp_directory_path().string());
    return cc::bench::run_selected_benchmarks("bench_group_file");
}
