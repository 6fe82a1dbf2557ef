// Model weights: loaded from an HF directory (mmapped safetensors, validated against the config),
// or generated (built-in models). Tensors keep their stored dtype; the backend decides how to use it.
#pragma once

#include "core/model/model_config.h"
#include "core/model/safetensors.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cc {

// A view of one weight tensor, row-major, shape as in torch: Linear weights are (out, in).
struct Tensor {
    DType dtype = DType::f32;
    std::vector<int64_t> shape;
    const std::byte* data = nullptr;
    size_t n_bytes = 0;
    bool file_mapped = false;  // data lies in a read-only file mapping (release_mapped_pages may drop it)
    int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
    int64_t cols() const { return shape.size() < 2 ? 1 : shape[1]; }
};

struct LayerWeights {
    Tensor attn_norm;  // (dim)                         input_layernorm
    Tensor wq;         // (n_heads * head_dim, dim)      self_attn.q_proj
    Tensor wk;         // (n_kv_heads * head_dim, dim)   self_attn.k_proj
    Tensor wv;         // (n_kv_heads * head_dim, dim)   self_attn.v_proj
    Tensor wo;         // (dim, n_heads * head_dim)      self_attn.o_proj
    Tensor bq;         // (n_heads * head_dim)  qkv_bias  self_attn.q_proj.bias
    Tensor bk;         // (n_kv_heads * head_dim)         self_attn.k_proj.bias
    Tensor bv;         // (n_kv_heads * head_dim)         self_attn.v_proj.bias
    Tensor bo;         // (dim)  o_bias (Llama attention_bias) self_attn.o_proj.bias
    Tensor q_norm;     // (head_dim)  Qwen3 only         self_attn.q_norm
    Tensor k_norm;     // (head_dim)  Qwen3 only         self_attn.k_norm
    Tensor ffn_norm;   // (dim)                          post_attention_layernorm
    Tensor w_gate;     // (ffn_dim, dim)                 mlp.gate_proj
    Tensor w_up;       // (ffn_dim, dim)                 mlp.up_proj
    Tensor w_down;     // (dim, ffn_dim)                 mlp.down_proj
};

struct ModelWeights {
    ModelConfig config;
    Tensor embed;        // (vocab, dim)   model.embed_tokens
    std::vector<LayerWeights> layers;
    Tensor final_norm;   // (dim)          model.norm
    Tensor lm_head;      // (vocab, dim)   lm_head, or embed when tie_word_embeddings
    // What keeps the bytes alive: mmapped files or generated buffers.
    std::vector<std::shared_ptr<const void>> storage;
    // What the loader chose for the user to know (an ignored tied lm_head, copied misaligned
    // tensors), one line each, for the log.
    std::vector<std::string> notes;
};

// Loads the weights of an HF directory, in transformers' order of preference: DIR/model.safetensors,
// else DIR/model.safetensors.index.json (weight_map: tensor -> shard file beside it), else every
// DIR/*.safetensors as one checkpoint (a name in two files is an error). Only safetensors are read:
// no tokenizer file is needed. Checks every expected tensor's presence, dtype (BF16/F16/F32) and
// shape against the config, and that no unexpected tensor is present (rotary_emb.inv_freq buffers
// are ignored). Errors name the file and the tensor, with expected vs actual, e.g.
//   model.safetensors: tensor "model.layers.3.self_attn.k_proj.weight": shape [64, 64], expected
//   [32, 64] (num_key_value_heads * head_dim, hidden_size)
// Tensors are used in place (mmapped) and keep their stored dtype; each is aligned to its element
// size (a misaligned one, from an old unpadded file, is copied). With tie_word_embeddings the shared
// matrix may be stored as model.embed_tokens.weight, as lm_head.weight, or as both with equal
// contents (differing ones are an error naming both); embed and lm_head then point at the same bytes.
ModelWeights load_weights(const std::filesystem::path& dir, const ModelConfig& config);

// The same checks and binding for one safetensors file already in memory (a checkpoint embedded in
// the program); the bytes must outlive the weights. `source` names it in errors.
ModelWeights load_weights(std::span<const std::byte> safetensors, const std::string& source, const ModelConfig& config);

// Builds a backend's own view of decoder layer `layer` (a struct with LayerWeights' member names),
// converting each tensor with the backend's `vec(tensor, name, n)` for the norm and bias vectors and
// `mat(tensor, name, rows, cols)` for the matrices; `name` is the checkpoint's, for the errors.
// One walk for every backend, so the shapes each expects cannot drift apart.
template <class Layer, class Vec, class Mat>
Layer bind_layer(const ModelConfig& c, const LayerWeights& w, int layer, Vec&& vec, Mat&& mat) {
    const int64_t qd = int64_t(c.n_heads) * c.head_dim, kvd = int64_t(c.n_kv_heads) * c.head_dim;
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    Layer L{};
    L.attn_norm = vec(w.attn_norm, p + "input_layernorm.weight", c.dim);
    L.ffn_norm = vec(w.ffn_norm, p + "post_attention_layernorm.weight", c.dim);
    if (c.qk_norm) {
        L.q_norm = vec(w.q_norm, p + "self_attn.q_norm.weight", c.head_dim);
        L.k_norm = vec(w.k_norm, p + "self_attn.k_norm.weight", c.head_dim);
    }
    if (c.qkv_bias) {
        L.bq = vec(w.bq, p + "self_attn.q_proj.bias", qd);
        L.bk = vec(w.bk, p + "self_attn.k_proj.bias", kvd);
        L.bv = vec(w.bv, p + "self_attn.v_proj.bias", kvd);
    }
    if (c.o_bias) L.bo = vec(w.bo, p + "self_attn.o_proj.bias", c.dim);
    L.wq = mat(w.wq, p + "self_attn.q_proj.weight", qd, c.dim);
    L.wk = mat(w.wk, p + "self_attn.k_proj.weight", kvd, c.dim);
    L.wv = mat(w.wv, p + "self_attn.v_proj.weight", kvd, c.dim);
    L.wo = mat(w.wo, p + "self_attn.o_proj.weight", c.dim, qd);
    L.w_gate = mat(w.w_gate, p + "mlp.gate_proj.weight", c.ffn_dim, c.dim);
    L.w_up = mat(w.w_up, p + "mlp.up_proj.weight", c.ffn_dim, c.dim);
    L.w_down = mat(w.w_down, p + "mlp.down_proj.weight", c.dim, c.ffn_dim);
    return L;
}

}  // namespace cc
