// Model weights: loaded from an HF directory (mmapped safetensors, validated against the config),
// or generated (built-in models). Tensors keep their stored dtype; the backend decides how to use it.
#pragma once

#include "core/model_config.h"
#include "core/safetensors.h"

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
    int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
    int64_t cols() const { return shape.size() < 2 ? 1 : shape[1]; }
};

struct LayerWeights {
    Tensor attn_norm;  // (dim)                         input_layernorm
    Tensor wq;         // (n_heads * head_dim, dim)      self_attn.q_proj
    Tensor wk;         // (n_kv_heads * head_dim, dim)   self_attn.k_proj
    Tensor wv;         // (n_kv_heads * head_dim, dim)   self_attn.v_proj
    Tensor wo;         // (dim, n_heads * head_dim)      self_attn.o_proj
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
// size (a misaligned one, from an old unpadded file, is copied). With tie_word_embeddings, lm_head
// is the embedding (a stored lm_head.weight is ignored, as transformers does, and noted).
ModelWeights load_weights(const std::filesystem::path& dir, const ModelConfig& config);

}  // namespace cc
