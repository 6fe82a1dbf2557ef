// Built-in models (DESIGN §5): the Qwen3 architecture with deterministic, seeded, synthetic
// weights generated in memory at load, and the bundled real Qwen3 tokenizer. Timings, cache
// behaviour and exactness are real; the generated text is not meaningful.
#pragma once

#include "core/model/model_config.h"
#include "core/model/safetensors.h"
#include "core/model/weights.h"

#include <atomic>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cc {

inline constexpr int kBuiltinGeneratorVersion = 1;

struct BuiltinRecipe {
    std::string name;          // without the "builtin:" prefix, e.g. "qwen3-demo"
    std::string description;
    ModelConfig config;
    uint64_t seed = 0;
    DType weight_dtype = DType::bf16;
};

std::vector<BuiltinRecipe> builtin_recipes();
std::optional<BuiltinRecipe> find_builtin(const std::string& name);

// The text the built-in model's fingerprint is the hash of: architecture, shape, seed, dtype and
// generator version — everything that determines the weights' bits.
std::string builtin_recipe_text(const BuiltinRecipe& recipe);

// Parameter count (embedding and lm_head included once when tied).
uint64_t builtin_parameter_count(const ModelConfig& config);

// Generates the weights. Deterministic: every tensor is split into fixed chunks, each with its own
// seed derived from (recipe seed, tensor index, chunk index), so the bits do not depend on
// `n_threads` (0 = all cores). `cancel` (optional) is checked between chunks: when set, the call
// throws Cancelled (backend.h) and nothing is kept.
ModelWeights generate_builtin_weights(const BuiltinRecipe& recipe, int n_threads = 0,
                                      const std::atomic<bool>* cancel = nullptr);

// The same generator for any supported config (Qwen3 q/k-norm tensors only when config.qk_norm;
// an lm_head tensor only when untied). Tests use it to build Llama and Mistral checkpoints.
ModelWeights generate_synthetic_weights(const ModelConfig& config, uint64_t seed, DType dtype, int n_threads = 0,
                                        const std::atomic<bool>* cancel = nullptr);

// Writes weights as an HF directory: config.json (ModelConfig::to_json + architectures) and one
// model.safetensors (tensors contiguous, header padded to 8 bytes). Throws naming the file.
void save_hf_checkpoint(const ModelWeights& weights, const std::filesystem::path& dir);

}  // namespace cc
