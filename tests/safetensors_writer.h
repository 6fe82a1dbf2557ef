// Test helper: writes small safetensors files (and HF model directories) so each test can build
// exactly the case it checks. Data bytes are a deterministic ramp, so contents can be verified.
#pragma once

#include "core/model/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace cc::test {

struct TensorSpec {
    std::string name;
    std::string dtype = "F32";  // any string: unsupported ones are written as given
    std::vector<int64_t> shape;
};

inline size_t spec_dtype_bytes(const std::string& dtype) {
    if (dtype == "F32" || dtype == "I32") return 4;
    if (dtype == "F16" || dtype == "BF16" || dtype == "I16") return 2;
    if (dtype == "I64" || dtype == "F64") return 8;
    return 1;
}

inline size_t spec_n_bytes(const TensorSpec& t) {
    size_t n = spec_dtype_bytes(t.dtype);
    for (const int64_t d : t.shape) n *= static_cast<size_t>(d);
    return n;
}

// The byte at offset i of a file's data section.
inline char ramp_byte(size_t i) {
    return static_cast<char>((i * 7 + 3) % 251);
}

// 8-byte little-endian length + header text (padded with spaces to 8 when `pad`) + data.
inline std::string safetensors_bytes(const std::string& header_text, const std::string& data, bool pad = true) {
    std::string header = header_text;
    if (pad) header.append((8 - header.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out + header + data;
}

// The header JSON of contiguous tensors in the given order (what a correct writer produces).
inline nlohmann::ordered_json safetensors_header(const std::vector<TensorSpec>& tensors, size_t* data_bytes = nullptr) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    header["__metadata__"] = {{"format", "pt"}};
    size_t offset = 0;
    for (const auto& t : tensors) {
        const size_t n = spec_n_bytes(t);
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
        offset += n;
    }
    if (data_bytes) *data_bytes = offset;
    return header;
}

inline std::string ramp_data(size_t n_bytes) {
    std::string data(n_bytes, '\0');
    for (size_t i = 0; i < n_bytes; ++i) data[i] = ramp_byte(i);
    return data;
}

inline std::string safetensors_bytes(const std::vector<TensorSpec>& tensors, bool pad = true) {
    size_t n = 0;
    const auto header = safetensors_header(tensors, &n);
    return safetensors_bytes(header.dump(), ramp_data(n), pad);
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out) throw std::runtime_error(path.string() + ": cannot write");
}

// A tiny config of each family: 2 layers, dim 16, 4 heads of 4 (2 KV heads), ffn 24, vocab 32
// (qwen3: head_dim 8, independent of hidden_size / num_attention_heads).
inline nlohmann::json tiny_config(const std::string& model_type, bool tied = false) {
    nlohmann::json c = {{"model_type", model_type}, {"hidden_size", 16},
                        {"intermediate_size", 24},  {"num_hidden_layers", 2},
                        {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                        {"vocab_size", 32},         {"max_position_embeddings", 128},
                        {"rms_norm_eps", 1e-6},     {"rope_theta", 10000.0},
                        {"hidden_act", "silu"},     {"tie_word_embeddings", tied}};
    if (model_type == "qwen3") c["head_dim"] = 8;
    return c;
}

// Every tensor a config calls for, in HF names, all of `dtype`.
inline std::vector<TensorSpec> model_tensors(const ModelConfig& c, const std::string& dtype = "F32",
                                             bool with_lm_head = true) {
    const int64_t dim = c.dim, ffn = c.ffn_dim, hd = c.head_dim, q = int64_t{c.n_heads} * hd,
                  kv = int64_t{c.n_kv_heads} * hd;
    std::vector<TensorSpec> t{{"model.embed_tokens.weight", dtype, {c.vocab_size, dim}}};
    for (int i = 0; i < c.n_layers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        t.push_back({p + "input_layernorm.weight", dtype, {dim}});
        t.push_back({p + "self_attn.q_proj.weight", dtype, {q, dim}});
        t.push_back({p + "self_attn.k_proj.weight", dtype, {kv, dim}});
        t.push_back({p + "self_attn.v_proj.weight", dtype, {kv, dim}});
        t.push_back({p + "self_attn.o_proj.weight", dtype, {dim, q}});
        if (c.qkv_bias) {
            t.push_back({p + "self_attn.q_proj.bias", dtype, {q}});
            t.push_back({p + "self_attn.k_proj.bias", dtype, {kv}});
            t.push_back({p + "self_attn.v_proj.bias", dtype, {kv}});
        }
        if (c.o_bias) t.push_back({p + "self_attn.o_proj.bias", dtype, {dim}});
        if (c.qk_norm) {
            t.push_back({p + "self_attn.q_norm.weight", dtype, {hd}});
            t.push_back({p + "self_attn.k_norm.weight", dtype, {hd}});
        }
        t.push_back({p + "post_attention_layernorm.weight", dtype, {dim}});
        t.push_back({p + "mlp.gate_proj.weight", dtype, {ffn, dim}});
        t.push_back({p + "mlp.up_proj.weight", dtype, {ffn, dim}});
        t.push_back({p + "mlp.down_proj.weight", dtype, {dim, ffn}});
    }
    t.push_back({"model.norm.weight", dtype, {dim}});
    if (with_lm_head && !c.tie_word_embeddings) t.push_back({"lm_head.weight", dtype, {c.vocab_size, dim}});
    return t;
}

}  // namespace cc::test

namespace cc::test {

// EXPECT_HAS(text, part): `text` contains `part`, printing both when it does not.
inline ::testing::AssertionResult has_substr(const char* text_expr, const char* part_expr, const std::string& text,
                                             const std::string& part) {
    if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << text_expr << " does not contain " << part_expr << "\n  text: " << text
                                         << "\n  part: " << part;
}

}  // namespace cc::test

#define EXPECT_HAS(text, part) EXPECT_PRED_FORMAT2(::cc::test::has_substr, text, part)
