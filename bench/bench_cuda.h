// What the benchmarks share for `--backend cuda`: the option, the skip path (no device or a build
// without CUDA: "skipped: <reason>" on stdout and exit 77, as `contextcache-cli selftest` does), and
// the device's peaks for the fraction-of-peak figures.
#pragma once

#include "app/backends.h"
#include "core/model/weights.h"
#ifdef CC_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

#include <nlohmann/json.hpp>

#include <cstring>
#include <iostream>
#include <optional>
#include <string>

namespace cc::bench {

inline constexpr int kExitSkipped = 77;  // the automake/ctest skip code

// Takes "--backend X" or "--backend=X" out of argv (Google Benchmark rejects options it does not
// know); returns X, or `fallback` when absent.
inline std::string take_backend_arg(int& argc, char** argv, const std::string& fallback) {
    std::string value = fallback;
    int out = 1;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            value = argv[++i];
        } else if (std::strncmp(argv[i], "--backend=", 10) == 0) {
            value = argv[i] + 10;
        } else {
            argv[out++] = argv[i];
        }
    }
    argc = out;
    argv[argc] = nullptr;
    return value;
}

struct CudaDevice {
    std::string name;
    int compute_major = 0, compute_minor = 0, sm_count = 0;
    double peak_bf16_tflops = 0;  // 0 = not in the table (core/backend/device_peaks.h)
    double peak_dram_gb_s = 0;
};

// The device the CUDA backend would use, or nullopt with `reason` filled.
inline std::optional<CudaDevice> cuda_device(std::string& reason) {
    const auto summary = cc::app::available_backends()->probe_gpu();
    if (!summary.compiled) {
        reason = "this build has no CUDA backend (configure with -DCONTEXTCACHE_CUDA=ON)";
        return std::nullopt;
    }
    if (!summary.available) {
        reason = summary.message;
        return std::nullopt;
    }
#ifdef CC_HAVE_CUDA
    const auto probe = cc::cuda::probe();
    if (probe.devices.empty()) {
        reason = probe.message;
        return std::nullopt;
    }
    const auto& d = probe.devices.front();
    return CudaDevice{d.name, d.compute_major, d.compute_minor, d.sm_count, d.peak_bf16_tflops, d.peak_dram_gb_s};
#else
    reason = "built without the CUDA backend";
    return std::nullopt;
#endif
}

inline int print_skipped(const std::string& benchmark, const std::string& reason) {
    std::cout << "skipped: " << reason << "\n";
    std::cerr << benchmark << ": --backend cuda skipped (exit " << kExitSkipped << "): " << reason << "\n";
    return kExitSkipped;
}

inline nlohmann::ordered_json device_json(const CudaDevice& d) {
    return {{"name", d.name},
            {"compute_capability", std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor)},
            {"sm_count", d.sm_count},
            {"peak_bf16_tflops", d.peak_bf16_tflops},
            {"peak_dram_gb_s", d.peak_dram_gb_s}};
}

// Bytes of every weight tensor (a tied lm_head counted once): what one forward pass reads at least.
inline size_t weight_bytes(const ModelWeights& w) {
    size_t total = w.embed.n_bytes + w.final_norm.n_bytes;
    for (const auto& l : w.layers)
        for (const Tensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.q_norm, &l.k_norm, &l.ffn_norm, &l.w_gate, &l.w_up,
                                &l.w_down})
            total += t->n_bytes;
    if (!w.config.tie_word_embeddings) total += w.lm_head.n_bytes;
    return total;
}

// FLOPs of a forward pass over t new tokens after `past` cached positions, with `logit_rows` rows
// of logits: 2*M*N*K per GEMM (q, k, v, o, gate, up, down; lm_head per logit row) plus attention
// QK and PV, 2 * 2 * head_dim * n_heads per (query, key) pair, causal.
inline double forward_flops(const ModelConfig& c, double t, double past = 0, double logit_rows = 1) {
    const double qd = double(c.n_heads) * c.head_dim, kvd = double(c.n_kv_heads) * c.head_dim;
    const double gemm = 2.0 * t * (qd * c.dim + 2 * kvd * c.dim + c.dim * qd + 3.0 * c.ffn_dim * c.dim);
    const double pairs = t * past + t * (t + 1) / 2.0;
    const double attention = 2.0 * 2.0 * c.head_dim * c.n_heads * pairs;
    return c.n_layers * (gemm + attention) + 2.0 * logit_rows * c.vocab_size * c.dim;
}

}  // namespace cc::bench
