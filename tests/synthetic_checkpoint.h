// Test helper: small HF checkpoints of each chat family (synthetic weights, a real tokenizer), so
// engine tests can run the Llama 3 and Mistral formats without downloading a model.
#pragma once

#include "core/model/builtin_model.h"
#include "core/model/model_config.h"

#include <nlohmann/json.hpp>

#include <filesystem>

namespace cc::test {

// Llama 3 with llama3 rope scaling and a short original context (64), so positions in a tool
// prompt run through all three frequency bands. Needs the Llama 3 tokenizer (vocab 128256).
inline nlohmann::json tiny_llama3_config() {
    return {{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 32},
            {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
            {"num_key_value_heads", 2}, {"vocab_size", 128256}, {"max_position_embeddings", 4096},
            {"rms_norm_eps", 1e-5}, {"rope_theta", 500000.0},
            {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}}},
            {"hidden_act", "silu"}, {"tie_word_embeddings", false}, {"bos_token_id", 128000},
            {"eos_token_id", {128001, 128009}}};
}

// Mistral with a sliding window of 16 (far shorter than any tool prefix) and one KV head; for the
// small test tokenizer in tests/data/mistral_test (vocab 519).
inline nlohmann::json tiny_mistral_config() {
    return {{"model_type", "mistral"}, {"architectures", {"MistralForCausalLM"}}, {"hidden_size", 32},
            {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
            {"num_key_value_heads", 1}, {"vocab_size", 519}, {"max_position_embeddings", 32768},
            {"rms_norm_eps", 1e-5}, {"rope_theta", 1000000.0}, {"sliding_window", 16}, {"hidden_act", "silu"},
            {"tie_word_embeddings", false}, {"bos_token_id", 1}, {"eos_token_id", 2}};
}

// Writes config.json, synthetic BF16 weights (seed 99) and a copy of tokenizer_json into dir.
inline void write_synthetic_checkpoint(const std::filesystem::path& dir, const nlohmann::json& config_json,
                                       const std::filesystem::path& tokenizer_json) {
    const auto config = ModelConfig::from_json(config_json, "test config");
    save_hf_checkpoint(generate_synthetic_weights(config, 99, DType::bf16, 2), dir);
    std::filesystem::copy_file(tokenizer_json, dir / "tokenizer.json");
}

}  // namespace cc::test
