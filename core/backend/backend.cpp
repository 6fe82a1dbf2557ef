#include "core/backend/backend.h"

#include "core/base/kernel_math.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace cc {

const char* kv_dtype_name(KvDType t) {
    switch (t) {
        case KvDType::f32: return "f32";
        case KvDType::bf16: return "bf16";
    }
    return "?";
}

void check_forward_request(std::span<const token_id> tokens, const KvView& kv, const KvBlock* prefix,
                           const KvBlock& suffix, std::span<const int> logit_rows, int vocab_size) {
    const int T = int(tokens.size());
    if (kv.prefix_tokens < 0) throw std::runtime_error("forward: negative prefix_tokens");
    if (kv.prefix_tokens > 0) {
        if (prefix == nullptr) throw std::runtime_error("forward: the view uses prefix positions but has no prefix block");
        if (prefix == &suffix) throw std::runtime_error("forward: the prefix and suffix blocks are the same block");
        if (kv.prefix_tokens > prefix->n_tokens())
            throw std::runtime_error("forward: the view uses " + std::to_string(kv.prefix_tokens) +
                                     " prefix positions, the prefix block holds " + std::to_string(prefix->n_tokens()));
    }
    for (int t = 0; t < T; ++t)
        if (tokens[size_t(t)] < 0 || tokens[size_t(t)] >= vocab_size)
            throw std::runtime_error("forward: token id " + std::to_string(tokens[size_t(t)]) + " (at index " +
                                     std::to_string(t) + ") is outside the vocabulary [0, " +
                                     std::to_string(vocab_size) + ")");
    for (int r : logit_rows)
        if (r < 0 || r >= T)
            throw std::runtime_error("forward: logit row " + std::to_string(r) + " is outside the batch [0, " +
                                     std::to_string(T) + ")");
    const int P = kv.prefix_tokens, n0 = suffix.n_tokens();
    if (int64_t(n0) + T > suffix.capacity_tokens())
        throw std::runtime_error("forward: KV capacity exceeded: positions " + std::to_string(P + n0) + ".." +
                                 std::to_string(P + n0 + T - 1) + " need " + std::to_string(n0 + T) +
                                 " suffix slots, the block has " + std::to_string(suffix.capacity_tokens()));
}

void check_batch_request(std::span<const SequenceRows> seqs, int vocab_size) {
    if (seqs.empty()) throw std::runtime_error("forward_batch: no sequences");
    for (size_t i = 0; i < seqs.size(); ++i) {
        if (seqs[i].kv.suffix == nullptr)
            throw std::runtime_error("forward_batch: sequence " + std::to_string(i) + " has no suffix block");
        const size_t rows = seqs[i].logit_rows.size(), want = rows * size_t(vocab_size);
        if (!seqs[i].argmax.empty() && seqs[i].argmax.size() != rows)
            throw std::runtime_error("forward_batch: sequence " + std::to_string(i) + " gives " +
                                     std::to_string(seqs[i].argmax.size()) + " ids for the greedy tokens of its " +
                                     std::to_string(rows) + " logit rows");
        const bool tokens_only = !seqs[i].argmax.empty() && seqs[i].logits.empty();
        if (seqs[i].logits.size() != want && !tokens_only)
            throw std::runtime_error("forward_batch: sequence " + std::to_string(i) + " gives " +
                                     std::to_string(seqs[i].logits.size()) + " floats for its logits, its " +
                                     std::to_string(rows) + " logit rows need " + std::to_string(want));
        for (size_t j = 0; j < seqs.size(); ++j) {
            if (i == j) continue;
            const KvBlock* other_prefix = seqs[j].kv.prefix_tokens > 0 ? seqs[j].kv.prefix : nullptr;
            if (seqs[i].kv.suffix == seqs[j].kv.suffix || seqs[i].kv.suffix == other_prefix)
                throw std::runtime_error("forward_batch: the suffix block of sequence " + std::to_string(i) +
                                         " is also used by sequence " + std::to_string(j));
        }
    }
}

void argmax_rows(const float* logits, int vocab_size, std::span<token_id> out) {
    for (size_t j = 0; j < out.size(); ++j)
        out[j] = token_id(km::argmax_row(logits + j * size_t(vocab_size), vocab_size));
}

void Backend::forward_batch(std::span<const SequenceRows> seqs, const std::atomic<bool>* cancel) {
    check_batch_request(seqs, config().vocab_size);
    // One after another; on a failure the sequences already run are put back as they were.
    std::vector<int> before;
    for (const auto& s : seqs) before.push_back(s.kv.suffix->n_tokens());
    size_t done = 0;
    try {
        for (; done < seqs.size(); ++done) {
            const SequenceRows& s = seqs[done];
            const std::vector<float> logits = forward(s.tokens, s.kv, s.logit_rows, cancel);
            if (!s.logits.empty()) std::copy(logits.begin(), logits.end(), s.logits.begin());
            argmax_rows(logits.data(), config().vocab_size, s.argmax);
        }
    } catch (...) {
        for (size_t i = 0; i < done; ++i) seqs[i].kv.suffix->truncate(before[i]);
        throw;
    }
}

void Backend::check_kv_room(const char* caller, int n_tokens, int capacity_tokens, int reserve_tokens) {
    if (n_tokens < 0 || n_tokens > reserve_tokens || reserve_tokens > capacity_tokens)
        throw std::runtime_error(std::string(caller) + ": " + std::to_string(n_tokens) + " positions, reserving " +
                                 std::to_string(reserve_tokens) + ", do not fit a capacity of " +
                                 std::to_string(capacity_tokens) + " (0 <= positions <= reserved <= capacity)");
}

std::unique_ptr<KvBlock> Backend::copy_kv(const KvBlock& src, int n_tokens, int capacity_tokens, int reserve_tokens) {
    if (n_tokens > src.n_tokens())
        throw std::runtime_error("copy_kv: " + std::to_string(n_tokens) + " positions requested, the block holds " +
                                 std::to_string(src.n_tokens()));
    check_kv_room("copy_kv", n_tokens, capacity_tokens, reserve_tokens);
    std::vector<std::byte> image(kv_bytes(n_tokens));
    export_kv(src, n_tokens, image);
    return import_kv(image, n_tokens, capacity_tokens, reserve_tokens);
}

std::unique_ptr<KvBlock> Backend::link_kv(std::span<const std::byte> data, int n_tokens, std::shared_ptr<const void>) {
    return import_kv(data, n_tokens, n_tokens, n_tokens);
}

KvDType parse_kv_dtype(const std::string& name) {
    if (name == "f32") return KvDType::f32;
    if (name == "bf16") return KvDType::bf16;
    throw std::invalid_argument("KV dtype must be f32 or bf16, not \"" + name + "\"");
}

const char* weight_dtype_name(WeightDType t) {
    switch (t) {
        case WeightDType::stored: return "stored";
        case WeightDType::f32: return "f32";
        case WeightDType::bf16: return "bf16";
        case WeightDType::q8: return "q8";
        case WeightDType::bf16dot: return "bf16dot";
    }
    return "?";
}

WeightDType parse_weight_dtype(const std::string& name) {
    if (name == "stored" || name == "auto") return WeightDType::stored;
    if (name == "f32") return WeightDType::f32;
    if (name == "bf16") return WeightDType::bf16;
    if (name == "q8") return WeightDType::q8;
    if (name == "bf16dot") return WeightDType::bf16dot;
    throw std::invalid_argument("weights must be stored, f32, bf16, q8 or bf16dot, not \"" + name + "\"");
}

void Backend::export_kv_layer(const KvBlock&, int, int, std::span<std::byte>) const {
    throw std::logic_error("export_kv_layer: the " + name() + " backend exports whole images only (exports_layers() is false)");
}

size_t Backend::kv_bytes(int n_tokens) const {
    const ModelConfig& c = config();
    const size_t elem_bytes = kv_dtype() == KvDType::f32 ? 4 : 2;
    // Per layer K and V, each [n_kv_heads, n_tokens, head_dim].
    return size_t(c.n_layers) * 2 * size_t(c.n_kv_heads) * size_t(n_tokens) * size_t(c.head_dim) * elem_bytes;
}

}  // namespace cc
