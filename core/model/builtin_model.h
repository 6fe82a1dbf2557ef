// Built-in models (DESIGN §5), needing no file at run time, with the bundled real Qwen3 tokenizer
// (the toolcaller: its own, derived from it):
// - synthetic ones: the Qwen3 architecture with deterministic, seeded weights generated in memory
//   at load. Timings, cache behaviour and exactness are real; the generated text is not meaningful.
// - trained ones: a checkpoint trained by this project, embedded in the program (today one:
//   "toolcaller", resources/models/toolcaller, a small model trained for tool selection), listed
//   when the program links cc_bundled_models (the app, the CLI, the tests that use it). Loaded
//   through the same safetensors checks as a model directory.
#pragma once

#include "core/model/model_config.h"
#include "core/model/safetensors.h"
#include "core/model/weights.h"

#include <atomic>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cc {

inline constexpr int kBuiltinGeneratorVersion = 1;

struct BuiltinRecipe {
    std::string name;          // without the "builtin:" prefix, e.g. "qwen3-demo"
    std::string description;
    ModelConfig config;
    uint64_t seed = 0;
    DType weight_dtype = DType::bf16;
    // A trained model: the bytes of its model.safetensors embedded in the program (empty for
    // synthetic weights), and its generation_config.json eos ids.
    std::string_view checkpoint;
    std::vector<int> generation_eos_ids;
    // Its tokenizer.json / tokenizer_config.json when they are not the bundled Qwen3 files (the
    // toolcaller ships one derived from Qwen3's, resources/tokenizers/toolcaller); empty: Qwen3's.
    std::string_view tokenizer_json, tokenizer_config_json;
    bool trained() const { return !checkpoint.empty(); }
};

std::vector<BuiltinRecipe> builtin_recipes();
std::optional<BuiltinRecipe> find_builtin(const std::string& name);

// The model's tokenizer files: its own, or the bundled Qwen3 ones.
std::string_view builtin_tokenizer_json(const BuiltinRecipe& recipe);
std::string_view builtin_tokenizer_config_json(const BuiltinRecipe& recipe);

// The text the built-in model's fingerprint is the hash of: architecture, shape, seed, dtype and
// generator version — everything that determines the weights' bits; for a trained model its
// config and the SHA-256 of its checkpoint (hashed once per process).
std::string builtin_recipe_text(const BuiltinRecipe& recipe);

// Parameter count (embedding and lm_head included once when tied).
uint64_t builtin_parameter_count(const ModelConfig& config);

// The weights: a trained model's are its embedded checkpoint, used in place. Synthetic ones are
// generated. Deterministic: every tensor is split into fixed chunks, each with its own
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
