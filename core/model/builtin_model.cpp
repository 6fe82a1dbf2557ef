#include "core/model/builtin_model.h"

#include "core/base/cancelled.h"
#include "core/base/embedded_resources.h"
#include "core/base/json_text.h"
#include "core/base/kernel_math.h"
#include "core/base/sha256.h"
#include "core/model/bundled_models.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <sys/mman.h>

// Without cc_bundled_models in the program (only the app, the CLI and the tests that need it link
// its 7 MB), these weak fallbacks say that no trained built-in model is there.
namespace cc::embedded {
__attribute__((weak)) std::string_view toolcaller_safetensors() { return {}; }
__attribute__((weak)) std::string_view toolcaller_config_json() { return {}; }
__attribute__((weak)) std::string_view toolcaller_generation_config_json() { return {}; }
__attribute__((weak)) std::string_view toolcaller_tokenizer_json() { return {}; }
__attribute__((weak)) std::string_view toolcaller_tokenizer_config_json() { return {}; }
}  // namespace cc::embedded

namespace cc {
namespace {

ModelConfig qwen3_config(int dim, int n_layers, int n_heads, int n_kv_heads, int head_dim, int ffn_dim, bool tied) {
    ModelConfig c;
    c.family = ModelFamily::qwen3;
    c.model_type = "qwen3";
    c.n_layers = n_layers;
    c.dim = dim;
    c.ffn_dim = ffn_dim;
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.head_dim = head_dim;
    c.vocab_size = 151936;  // Qwen3's embedding rows (the tokenizer has 151,669 tokens; the rest is padding)
    c.max_position_embeddings = 40960;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 1000000.0;
    c.tie_word_embeddings = tied;
    c.qk_norm = true;
    c.bos_token_id = std::nullopt;
    c.eos_token_ids = {151645, 151643};  // <|im_end|>, <|endoftext|>
    c.torch_dtype = "bfloat16";
    return c;
}

// splitmix64: a tiny, well-mixed generator; one independent stream per chunk.
struct SplitMix64 {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
};


// How one tensor's values are drawn: uniform in [mean - half_width, mean + half_width].
struct TensorSpec {
    std::string name;
    std::vector<int64_t> shape;
    float mean = 0.0f;
    float half_width = 0.0f;
};

constexpr size_t kChunkElements = 1 << 16;  // the unit of determinism: one seeded stream each

void fill_chunk(const TensorSpec& spec, uint64_t seed, size_t tensor_index, size_t chunk, size_t n_elements,
                DType dtype, std::byte* out) {
    SplitMix64 rng{seed ^ (0xA24BAED4963EE407ull * (tensor_index + 1)) ^ (0x9FB21C651E98DF25ull * (chunk + 1))};
    const size_t begin = chunk * kChunkElements;
    const size_t end = std::min(n_elements, begin + kChunkElements);
    for (size_t i = begin; i < end; ++i) {
        // 24 random bits -> [-1, 1)
        const float u = static_cast<float>(static_cast<int64_t>(rng.next() >> 40) - (1 << 23)) * (1.0f / (1 << 23));
        const float v = spec.mean + spec.half_width * u;
        if (dtype == DType::bf16) {
            const uint16_t b = km::f32_to_bf16(v);
            std::memcpy(out + i * 2, &b, 2);
        } else {
            std::memcpy(out + i * 4, &v, 4);
        }
    }
}

// The trained tool-calling model (resources/models/toolcaller), embedded: its config.json gives the
// shape, its generation_config.json the stop ids.
BuiltinRecipe toolcaller_recipe() {
    static const BuiltinRecipe recipe = [] {
        BuiltinRecipe r;
        r.name = "toolcaller";
        r.description = "a small Qwen3-architecture model trained here for tool selection, not a general assistant "
                        "(resources/models/toolcaller, embedded)";
        const std::string source = "builtin:toolcaller config.json";
        r.config = ModelConfig::from_json(nlohmann::json(parse_json_text(embedded::toolcaller_config_json(), source, 16)), source);
        r.weight_dtype = DType::bf16;
        r.checkpoint = embedded::toolcaller_safetensors();
        r.tokenizer_json = embedded::toolcaller_tokenizer_json();   // its own, derived from Qwen3's
        r.tokenizer_config_json = embedded::toolcaller_tokenizer_config_json();
        const std::string gen_source = "builtin:toolcaller generation_config.json";
        r.generation_eos_ids =
            generation_eos_token_ids(nlohmann::json(parse_json_text(embedded::toolcaller_generation_config_json(), gen_source, 16)),
                                     gen_source);
        return r;
    }();
    return recipe;
}

BuiltinRecipe synthetic(std::string name, std::string description, ModelConfig config, uint64_t seed, DType dtype) {
    BuiltinRecipe r;
    r.name = std::move(name);
    r.description = std::move(description);
    r.config = std::move(config);
    r.seed = seed;
    r.weight_dtype = dtype;
    return r;
}

const std::string& checkpoint_sha256(std::string_view bytes) {
    static const std::string hash = sha256_hex(bytes);   // one trained builtin today
    return hash;
}

const std::string& tokenizer_sha256(std::string_view bytes) {
    static const std::string hash = sha256_hex(bytes);   // one built-in tokenizer besides Qwen3's today
    return hash;
}

}  // namespace

std::vector<BuiltinRecipe> builtin_recipes() {
    std::vector<BuiltinRecipe> r;
    if (!embedded::toolcaller_safetensors().empty()) r.push_back(toolcaller_recipe());
    // The default of programs without the trained model: small enough that a 20-tool full prefill
    // (~3,000 tokens) takes about a second on two cores, large enough that the cache's effect is the
    // real one (prefill dominates TTFT).
    r.push_back(synthetic("qwen3-demo", "Qwen3 architecture, 8 layers, hidden 512, synthetic weights",
                 qwen3_config(512, 8, 8, 4, 64, 1536, true), 20260101, DType::bf16));
    r.push_back(synthetic("qwen3-test", "tiny Qwen3 for fast tests: 2 layers, hidden 64, head_dim 32 (!= 64/4)",
                 qwen3_config(64, 2, 4, 2, 32, 128, true), 7, DType::bf16));
    // The exact Qwen3 architectures (config.json of the released checkpoints) with synthetic weights.
    r.push_back(synthetic("qwen3-0.6b", "Qwen3-0.6B shape, synthetic weights", qwen3_config(1024, 28, 16, 8, 128, 3072, true), 6,
                 DType::bf16));
    r.push_back(synthetic("qwen3-1.7b", "Qwen3-1.7B shape, synthetic weights", qwen3_config(2048, 28, 16, 8, 128, 6144, true), 17,
                 DType::bf16));
    r.push_back(synthetic("qwen3-4b", "Qwen3-4B shape, synthetic weights", qwen3_config(2560, 36, 32, 8, 128, 9728, true), 4,
                 DType::bf16));
    r.push_back(synthetic("qwen3-8b", "Qwen3-8B shape, synthetic weights", qwen3_config(4096, 36, 32, 8, 128, 12288, false), 8,
                 DType::bf16));
    return r;
}

std::optional<BuiltinRecipe> find_builtin(const std::string& name) {
    for (auto& r : builtin_recipes())
        if (r.name == name) return r;
    return std::nullopt;
}

std::string_view builtin_tokenizer_json(const BuiltinRecipe& recipe) {
    return recipe.tokenizer_json.empty() ? embedded::qwen3_tokenizer_json() : recipe.tokenizer_json;
}

std::string_view builtin_tokenizer_config_json(const BuiltinRecipe& recipe) {
    return recipe.tokenizer_json.empty() ? embedded::qwen3_tokenizer_config_json() : recipe.tokenizer_config_json;
}

std::string builtin_recipe_text(const BuiltinRecipe& recipe) {
    std::ostringstream s;
    if (recipe.trained()) {
        s << "contextcache trained builtin model\nname=" << recipe.name << "\ncheckpoint_sha256="
          << checkpoint_sha256(recipe.checkpoint) << "\nconfig=" << recipe.config.to_json().dump() << "\n";
        if (!recipe.tokenizer_json.empty()) s << "tokenizer_sha256=" << tokenizer_sha256(recipe.tokenizer_json) << "\n";
        return s.str();
    }
    s << "contextcache builtin model\nname=" << recipe.name << "\ngenerator_version=" << kBuiltinGeneratorVersion
      << "\nseed=" << recipe.seed << "\nweight_dtype=" << dtype_name(recipe.weight_dtype)
      << "\nconfig=" << recipe.config.to_json().dump() << "\n";
    return s.str();
}

uint64_t builtin_parameter_count(const ModelConfig& c) {
    const uint64_t q = uint64_t(c.n_heads) * c.head_dim, kv = uint64_t(c.n_kv_heads) * c.head_dim;
    const uint64_t per_layer = 2ull * c.dim + q * c.dim + 2 * kv * c.dim + uint64_t(c.dim) * q +
                               (c.qk_norm ? 2ull * c.head_dim : 0) + 3ull * c.ffn_dim * c.dim +
                               (c.qkv_bias ? q + 2 * kv : 0) + (c.o_bias ? uint64_t(c.dim) : 0);
    const uint64_t embed = uint64_t(c.vocab_size) * c.dim;
    return embed * (c.tie_word_embeddings ? 1 : 2) + per_layer * c.n_layers + c.dim;
}

ModelWeights generate_builtin_weights(const BuiltinRecipe& recipe, int n_threads, const std::atomic<bool>* cancel) {
    if (recipe.trained())
        return load_weights(std::as_bytes(std::span(recipe.checkpoint.data(), recipe.checkpoint.size())),
                            "builtin:" + recipe.name + " model.safetensors", recipe.config);
    return generate_synthetic_weights(recipe.config, recipe.seed, recipe.weight_dtype, n_threads, cancel);
}

ModelWeights generate_synthetic_weights(const ModelConfig& c, uint64_t seed, DType dtype, int n_threads,
                                        const std::atomic<bool>* cancel) {
    if (dtype == DType::f16) throw std::invalid_argument("generate_synthetic_weights: F16 is not generated (use BF16 or F32)");
    if (c.qkv_bias || c.o_bias)
        throw std::invalid_argument("generate_synthetic_weights: attention biases are not generated (model_type " +
                                    c.model_type + ")");
    const int64_t q = int64_t(c.n_heads) * c.head_dim, kv = int64_t(c.n_kv_heads) * c.head_dim;
    // Uniform half-width sqrt(3)*std with std = 1/sqrt(fan_in): activations keep their scale through
    // each projection; the output projections are halved so the residual stream grows slowly.
    auto linear = [](std::string name, int64_t out, int64_t in, float gain) {
        return TensorSpec{std::move(name), {out, in}, 0.0f, gain * std::sqrt(3.0f / static_cast<float>(in))};
    };
    auto norm = [](std::string name, int64_t n) { return TensorSpec{std::move(name), {n}, 1.0f, 0.1f}; };

    std::vector<TensorSpec> specs;
    // Tied embeddings are also the lm_head: std 2/sqrt(dim) gives logits of O(2) after the final norm.
    specs.push_back({"model.embed_tokens.weight", {c.vocab_size, c.dim}, 0.0f, std::sqrt(3.0f) * 2.0f / std::sqrt(float(c.dim))});
    for (int l = 0; l < c.n_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        specs.push_back(norm(p + "input_layernorm.weight", c.dim));
        specs.push_back(linear(p + "self_attn.q_proj.weight", q, c.dim, 1.0f));
        specs.push_back(linear(p + "self_attn.k_proj.weight", kv, c.dim, 1.0f));
        specs.push_back(linear(p + "self_attn.v_proj.weight", kv, c.dim, 1.0f));
        specs.push_back(linear(p + "self_attn.o_proj.weight", c.dim, q, 0.5f));
        if (c.qk_norm) {
            specs.push_back(norm(p + "self_attn.q_norm.weight", c.head_dim));
            specs.push_back(norm(p + "self_attn.k_norm.weight", c.head_dim));
        }
        specs.push_back(norm(p + "post_attention_layernorm.weight", c.dim));
        specs.push_back(linear(p + "mlp.gate_proj.weight", c.ffn_dim, c.dim, 1.0f));
        specs.push_back(linear(p + "mlp.up_proj.weight", c.ffn_dim, c.dim, 1.0f));
        specs.push_back(linear(p + "mlp.down_proj.weight", c.dim, c.ffn_dim, 0.5f));
    }
    specs.push_back(norm("model.norm.weight", c.dim));
    if (!c.tie_word_embeddings) specs.push_back(linear("lm_head.weight", c.vocab_size, c.dim, 2.0f));

    // One buffer for everything, tensors 64-byte aligned (the SIMD loads prefer it).
    const size_t elem = dtype_bytes(dtype);
    std::vector<size_t> offsets;
    size_t total = 0;
    for (const auto& s : specs) {
        size_t n = 1;
        for (auto d : s.shape) n *= static_cast<size_t>(d);
        total = (total + 63) & ~size_t(63);
        offsets.push_back(total);
        total += n * elem;
    }
    // A private anonymous mapping (page aligned): a backend that copies the matrices may give their
    // pages back (mark_matrices_disposable), so a built-in model is not held twice.
    void* mapped =
        ::mmap(nullptr, std::max<size_t>(total, 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();  // as the allocation it replaces
    auto buffer = std::shared_ptr<std::byte>(static_cast<std::byte*>(mapped),
                                             [size = std::max<size_t>(total, 1)](std::byte* p) { ::munmap(p, size); });

    // Work items: (tensor, chunk). Threads take items round-robin; each item's bits are fixed.
    struct Item {
        size_t tensor, chunk, n_elements;
    };
    std::vector<Item> items;
    for (size_t t = 0; t < specs.size(); ++t) {
        size_t n = 1;
        for (auto d : specs[t].shape) n *= static_cast<size_t>(d);
        for (size_t ch = 0; ch * kChunkElements < n; ++ch) items.push_back({t, ch, n});
    }
    const unsigned n_workers = n_threads > 0 ? unsigned(n_threads) : std::max(1u, std::thread::hardware_concurrency());
    auto work = [&](unsigned w) {
        for (size_t i = w; i < items.size(); i += n_workers) {
            if (cancel && cancel->load(std::memory_order_relaxed)) return;
            const Item& it = items[i];
            fill_chunk(specs[it.tensor], seed, it.tensor, it.chunk, it.n_elements, dtype, buffer.get() + offsets[it.tensor]);
        }
    };
    std::vector<std::thread> threads;
    for (unsigned w = 1; w < n_workers; ++w) threads.emplace_back(work, w);
    work(0);
    for (auto& t : threads) t.join();
    if (cancel && cancel->load()) throw Cancelled();

    ModelWeights weights;
    weights.config = c;
    weights.storage.push_back(buffer);
    weights.generated = true;
    auto tensor = [&](size_t index) {
        Tensor t;
        t.dtype = dtype;
        t.shape = specs[index].shape;
        t.data = buffer.get() + offsets[index];
        size_t n = 1;
        for (auto d : t.shape) n *= static_cast<size_t>(d);
        t.n_bytes = n * elem;
        return t;
    };
    size_t i = 0;
    weights.embed = tensor(i++);
    for (int l = 0; l < c.n_layers; ++l) {
        LayerWeights lw;
        lw.attn_norm = tensor(i++);
        lw.wq = tensor(i++);
        lw.wk = tensor(i++);
        lw.wv = tensor(i++);
        lw.wo = tensor(i++);
        if (c.qk_norm) {
            lw.q_norm = tensor(i++);
            lw.k_norm = tensor(i++);
        }
        lw.ffn_norm = tensor(i++);
        lw.w_gate = tensor(i++);
        lw.w_up = tensor(i++);
        lw.w_down = tensor(i++);
        weights.layers.push_back(std::move(lw));
    }
    weights.final_norm = tensor(i++);
    weights.lm_head = c.tie_word_embeddings ? weights.embed : tensor(i++);
    return weights;
}

void save_hf_checkpoint(const ModelWeights& w, const std::filesystem::path& dir) {
    const ModelConfig& c = w.config;
    std::vector<std::pair<std::string, const Tensor*>> tensors{{"model.embed_tokens.weight", &w.embed}};
    for (int l = 0; l < c.n_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const LayerWeights& L = w.layers[static_cast<size_t>(l)];
        tensors.push_back({p + "input_layernorm.weight", &L.attn_norm});
        tensors.push_back({p + "self_attn.q_proj.weight", &L.wq});
        tensors.push_back({p + "self_attn.k_proj.weight", &L.wk});
        tensors.push_back({p + "self_attn.v_proj.weight", &L.wv});
        tensors.push_back({p + "self_attn.o_proj.weight", &L.wo});
        if (c.qkv_bias) {
            tensors.push_back({p + "self_attn.q_proj.bias", &L.bq});
            tensors.push_back({p + "self_attn.k_proj.bias", &L.bk});
            tensors.push_back({p + "self_attn.v_proj.bias", &L.bv});
        }
        if (c.o_bias) tensors.push_back({p + "self_attn.o_proj.bias", &L.bo});
        if (c.qk_norm) {
            tensors.push_back({p + "self_attn.q_norm.weight", &L.q_norm});
            tensors.push_back({p + "self_attn.k_norm.weight", &L.k_norm});
        }
        tensors.push_back({p + "post_attention_layernorm.weight", &L.ffn_norm});
        tensors.push_back({p + "mlp.gate_proj.weight", &L.w_gate});
        tensors.push_back({p + "mlp.up_proj.weight", &L.w_up});
        tensors.push_back({p + "mlp.down_proj.weight", &L.w_down});
    }
    tensors.push_back({"model.norm.weight", &w.final_norm});
    if (!c.tie_word_embeddings) tensors.push_back({"lm_head.weight", &w.lm_head});

    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    header["__metadata__"] = {{"format", "pt"}};
    size_t offset = 0;
    for (const auto& [name, t] : tensors) {
        header[name] = {{"dtype", dtype_name(t->dtype)}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->n_bytes}}};
        offset += t->n_bytes;
    }
    std::string header_text = header.dump();
    header_text.append((8 - header_text.size() % 8) % 8, ' ');

    std::filesystem::create_directories(dir);
    const auto st_path = dir / "model.safetensors";
    std::ofstream out(st_path, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(st_path.string() + ": cannot create");
    char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((uint64_t(header_text.size()) >> (8 * i)) & 0xff);
    out.write(len, 8);
    out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
    for (const auto& [name, t] : tensors) out.write(reinterpret_cast<const char*>(t->data), static_cast<std::streamsize>(t->n_bytes));
    if (!out) throw std::runtime_error(st_path.string() + ": write failed");

    auto config = c.to_json();
    const char* arch = c.family == ModelFamily::qwen3     ? "Qwen3ForCausalLM"
                       : c.family == ModelFamily::qwen2   ? "Qwen2ForCausalLM"
                       : c.family == ModelFamily::mistral ? "MistralForCausalLM"
                                                          : "LlamaForCausalLM";
    config["architectures"] = {arch};
    const auto cfg_path = dir / "config.json";
    std::ofstream cfg(cfg_path, std::ios::trunc);
    if (!cfg) throw std::runtime_error(cfg_path.string() + ": cannot create");
    cfg << config.dump(2) << "\n";
    if (!cfg) throw std::runtime_error(cfg_path.string() + ": write failed");
}

}  // namespace cc
