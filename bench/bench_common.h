// Shared by the benchmarks: machine and commit description for the JSON they print (medians and
// percentiles: core/research/sample_stats.h).
#pragma once

#include "core/base/machine_info.h"
#include "core/model/builtin_model.h"
#include "core/model/model_spec.h"
#include "core/model/weights.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cc::bench {

// The weights of `model`: a built-in spec (generated on `threads` threads) or a model directory.
inline ModelWeights load_model_weights(const std::string& model, int threads) {
    const ModelSource source = resolve_model(model);
    if (source.builtin) {
        const auto recipe = find_builtin(source.builtin_name);
        if (!recipe) throw std::runtime_error(model + ": unknown built-in model");
        return generate_builtin_weights(*recipe, threads);
    }
    return load_weights(source.dir, ModelConfig::from_json(source.config, (source.dir / "config.json").string()));
}

// This process's resident memory now (VmRSS) and at its peak so far (VmHWM), MiB; -1 where
// /proc/self/status cannot be read.
inline double process_memory_mib(const char* field) {
    std::ifstream f("/proc/self/status");
    const std::string key = std::string(field) + ":";
    for (std::string line; std::getline(f, line);)
        if (line.rfind(key, 0) == 0) return std::strtod(line.c_str() + key.size(), nullptr) / 1024.0;
    return -1.0;
}

inline std::string run_command(const std::string& cmd) {
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
        std::array<char, 256> buf;
        while (fgets(buf.data(), buf.size(), p)) out += buf.data();
        pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
}

// "20,50,100" -> {20, 50, 100} (a list option of the benchmarks).
inline std::vector<size_t> parse_size_list(const std::string& s) {
    std::vector<size_t> v;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) v.push_back(std::strtoull(item.c_str(), nullptr, 10));
    return v;
}

// "f32,bf16" -> {"f32", "bf16"} (a list option of the benchmarks; empty items dropped).
inline std::vector<std::string> parse_string_list(const std::string& s) {
    std::vector<std::string> v;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) v.push_back(item);
    return v;
}

inline nlohmann::ordered_json machine_json() {
    std::string cpu;
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0) {
            cpu = line.substr(line.find(':') + 2);
            break;
        }
    return {{"cpu", cpu},
            {"hardware_threads", std::thread::hardware_concurrency()},
            {"os", run_command("uname -sr")},
            {"commit", build_commit()},  // the binary's, not the checkout's (an A/B runs older binaries)
            {"date", run_command("date -u +%Y-%m-%dT%H:%M:%SZ")}};
}

}  // namespace cc::bench
