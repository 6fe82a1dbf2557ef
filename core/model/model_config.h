// config.json of a supported family, validated (DESIGN §5). Unknown model types, activations and
// rope types are refused by name, never defaulted.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace cc {

enum class ModelFamily { qwen3, llama, mistral, qwen2 };
const char* family_name(ModelFamily f);

struct RopeScaling {
    std::string type;                       // "" (none) or "llama3"
    double factor = 1.0;
    double low_freq_factor = 1.0;
    double high_freq_factor = 1.0;
    int original_max_position_embeddings = 0;
};

struct ModelConfig {
    ModelFamily family = ModelFamily::llama;
    std::string model_type;                 // as written in config.json
    int n_layers = 0;                       // num_hidden_layers
    int dim = 0;                            // hidden_size
    int ffn_dim = 0;                        // intermediate_size
    int n_heads = 0;                        // num_attention_heads
    int n_kv_heads = 0;                     // num_key_value_heads (GQA: n_heads % n_kv_heads == 0)
    int head_dim = 0;                       // head_dim, or hidden_size / num_attention_heads
    int vocab_size = 0;
    int max_position_embeddings = 0;
    double rms_norm_eps = 1e-6;
    double rope_theta = 10000.0;
    RopeScaling rope_scaling;
    bool tie_word_embeddings = false;
    bool qk_norm = false;                   // Qwen3: RMSNorm on each q/k head before RoPE
    bool qkv_bias = false;                  // q/k/v_proj have biases: Qwen2 always, Llama/Qwen3 with attention_bias
    bool o_bias = false;                    // o_proj has a bias: Llama/Qwen3 with attention_bias
    int sliding_window = 0;                 // Mistral; 0 = full causal attention
    std::optional<int> bos_token_id;
    std::vector<int> eos_token_ids;         // int or list in config.json
    std::string torch_dtype;                // informational

    // Throws std::runtime_error "<source>: <problem>" (e.g. `config.json: hidden_act "gelu" is not
    // supported (silu)`, `config.json: missing required field "hidden_size"`).
    // Required: model_type, num_hidden_layers, hidden_size, intermediate_size, num_attention_heads,
    // vocab_size, max_position_embeddings, rms_norm_eps, and head_dim for qwen3. docs/model-loading.md
    // lists every field of the transformers config classes: honoured, ignored (and why) or refused. Defaults as in
    // transformers: num_key_value_heads = num_attention_heads, head_dim = hidden_size /
    // num_attention_heads, rope_theta 10000, tie_word_embeddings false, hidden_act silu. rope_scaling
    // (or the newer rope_parameters) may be null, "default" or "llama3"; Mistral's sliding_window is
    // an int or null; Qwen2/Qwen3's sliding window is refused when use_sliding_window is true.
    // torch_dtype (or the newer dtype) must be bfloat16, float16 or float32 when given.
    static ModelConfig from_json(const nlohmann::json& config, const std::string& source);
    nlohmann::json to_json() const;
};

// generation_config.json's eos_token_id: absent or null -> none, an int, or a list of ints; anything
// else throws "<source>: ...". The other generation fields (sampling defaults, max_length, ...) are
// not used: the caller's options decide sampling.
std::vector<int> generation_eos_token_ids(const nlohmann::json& generation_config, const std::string& source);

}  // namespace cc
