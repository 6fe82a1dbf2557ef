#include "core/model/model_config.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace cc {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& problem) {
    throw std::runtime_error(source + ": " + problem);
}

const json* find(const json& j, const char* key) {
    const auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
}

// A present, non-null value.
const json* find_value(const json& j, const char* key) {
    const json* v = find(j, key);
    return v && !v->is_null() ? v : nullptr;
}

int int_value(const json& v, const std::string& source, const std::string& key, int min_value) {
    if (!v.is_number_integer() || v.get<int64_t>() < min_value || v.get<int64_t>() > std::numeric_limits<int>::max())
        fail(source, "\"" + key + "\" must be an integer >= " + std::to_string(min_value) + " (got " + v.dump() + ")");
    return static_cast<int>(v.get<int64_t>());
}

int required_int(const json& j, const std::string& source, const char* key, int min_value = 1) {
    const json* v = find_value(j, key);
    if (!v) fail(source, std::string("missing required field \"") + key + "\"");
    return int_value(*v, source, key, min_value);
}

double positive_number(const json& v, const std::string& source, const std::string& key) {
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
        fail(source, "\"" + key + "\" must be a positive number (got " + v.dump() + ")");
    return v.get<double>();
}

bool bool_value(const json& j, const std::string& source, const char* key, bool fallback) {
    const json* v = find_value(j, key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(source, std::string("\"") + key + "\" must be true or false (got " + v->dump() + ")");
    return v->get<bool>();
}

// rope_scaling (transformers <= 4.x) or rope_parameters (newer): null, "default" or "llama3".
void parse_rope(const json& r, const std::string& source, const char* field, ModelConfig& c) {
    if (!r.is_object()) fail(source, std::string("\"") + field + "\" must be an object or null");
    const json* type = find_value(r, "rope_type");
    if (!type) type = find_value(r, "type");
    if (!type || !type->is_string())
        fail(source, std::string("\"") + field + "\" has no \"rope_type\" (or \"type\") string");
    const auto& name = type->get_ref<const std::string&>();
    if (const json* theta = find_value(r, "rope_theta"))
        c.rope_theta = positive_number(*theta, source, std::string(field) + ".rope_theta");
    if (name == "default") return;
    if (name != "llama3") fail(source, std::string(field) + " type \"" + name + "\" is not supported (llama3)");
    c.rope_scaling.type = name;
    const std::string prefix = std::string(field) + ".";
    for (const char* key : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
        if (!find_value(r, key)) fail(source, "missing required field \"" + prefix + key + "\" (rope type llama3)");
    c.rope_scaling.factor = positive_number(r["factor"], source, prefix + "factor");
    c.rope_scaling.low_freq_factor = positive_number(r["low_freq_factor"], source, prefix + "low_freq_factor");
    c.rope_scaling.high_freq_factor = positive_number(r["high_freq_factor"], source, prefix + "high_freq_factor");
    c.rope_scaling.original_max_position_embeddings =
        int_value(r["original_max_position_embeddings"], source, prefix + "original_max_position_embeddings", 1);
    // The llama3 formula divides by (high_freq_factor - low_freq_factor).
    if (c.rope_scaling.high_freq_factor <= c.rope_scaling.low_freq_factor)
        fail(source, prefix + "high_freq_factor must be greater than low_freq_factor");
}

}  // namespace

const char* family_name(ModelFamily f) {
    switch (f) {
        case ModelFamily::qwen3:
            return "qwen3";
        case ModelFamily::llama:
            return "llama";
        case ModelFamily::mistral:
            return "mistral";
        case ModelFamily::qwen2:
            return "qwen2";
    }
    return "?";
}

// Defaults follow the transformers config classes (LlamaConfig, MistralConfig, Qwen3Config) where
// all three agree and real checkpoints rely on them; everything else is required.
ModelConfig ModelConfig::from_json(const json& config, const std::string& source) {
    if (!config.is_object()) fail(source, "must hold a JSON object");
    ModelConfig c;
    const json* type = find_value(config, "model_type");
    if (!type) fail(source, "missing required field \"model_type\"");
    if (!type->is_string()) fail(source, "\"model_type\" must be a string");
    c.model_type = type->get<std::string>();
    if (c.model_type == "qwen3")
        c.family = ModelFamily::qwen3;
    else if (c.model_type == "llama")
        c.family = ModelFamily::llama;
    else if (c.model_type == "mistral")
        c.family = ModelFamily::mistral;
    else if (c.model_type == "qwen2")
        c.family = ModelFamily::qwen2;
    else
        fail(source, "model_type \"" + c.model_type + "\" is not supported (qwen3, qwen2, llama, mistral)");

    c.n_layers = required_int(config, source, "num_hidden_layers");
    c.dim = required_int(config, source, "hidden_size");
    c.ffn_dim = required_int(config, source, "intermediate_size");
    c.n_heads = required_int(config, source, "num_attention_heads");
    c.vocab_size = required_int(config, source, "vocab_size");
    c.max_position_embeddings = required_int(config, source, "max_position_embeddings");
    if (const json* v = find_value(config, "num_key_value_heads"))
        c.n_kv_heads = int_value(*v, source, "num_key_value_heads", 1);
    else
        c.n_kv_heads = c.n_heads;  // transformers: no GQA when absent
    if (c.n_heads % c.n_kv_heads != 0)
        fail(source, "num_attention_heads (" + std::to_string(c.n_heads) +
                         ") must be a multiple of num_key_value_heads (" + std::to_string(c.n_kv_heads) + ")");

    if (const json* v = find_value(config, "head_dim")) {
        c.head_dim = int_value(*v, source, "head_dim", 1);
    } else if (c.family == ModelFamily::qwen3) {
        // Qwen3's head_dim is independent of hidden_size (and transformers' default, 128, is a guess).
        fail(source, "missing required field \"head_dim\" (qwen3)");
    } else {
        if (c.dim % c.n_heads != 0)
            fail(source, "hidden_size (" + std::to_string(c.dim) + ") is not a multiple of num_attention_heads (" +
                             std::to_string(c.n_heads) + ") and there is no \"head_dim\"");
        c.head_dim = c.dim / c.n_heads;
    }
    if (c.head_dim % 2 != 0)
        fail(source, "head_dim " + std::to_string(c.head_dim) + " must be even (RoPE rotates pairs)");

    const json* eps = find_value(config, "rms_norm_eps");
    if (!eps) fail(source, "missing required field \"rms_norm_eps\"");
    c.rms_norm_eps = positive_number(*eps, source, "rms_norm_eps");
    if (const json* v = find_value(config, "rope_theta")) c.rope_theta = positive_number(*v, source, "rope_theta");

    const json* scaling = find_value(config, "rope_scaling");
    const json* params = find_value(config, "rope_parameters");
    if (scaling)
        parse_rope(*scaling, source, "rope_scaling", c);
    else if (params)
        parse_rope(*params, source, "rope_parameters", c);

    if (const json* act = find_value(config, "hidden_act")) {
        if (!act->is_string() || act->get<std::string>() != "silu")
            fail(source, "hidden_act " + act->dump() + " is not supported (silu)");
    }
    // attention_bias adds biases to q/k/v/o_proj in transformers' LlamaAttention and Qwen3Attention.
    // Qwen2Attention always has q/k/v biases and no o_proj bias (Qwen2Config has no such field, so a
    // stray one is ignored, as transformers does). MistralAttention has no biases: refused there.
    const bool attention_bias = bool_value(config, source, "attention_bias", false);
    if (c.family == ModelFamily::qwen2) {
        c.qkv_bias = true;
    } else if (c.family == ModelFamily::llama || c.family == ModelFamily::qwen3) {
        c.qkv_bias = c.o_bias = attention_bias;
    } else if (attention_bias) {
        fail(source, "attention_bias true is not supported for " + c.model_type + " (no bias tensors in its attention)");
    }
    if (bool_value(config, source, "mlp_bias", false)) fail(source, "mlp_bias true is not supported (no bias tensors)");
    // Quantized checkpoints (GPTQ, AWQ, bitsandbytes, fp8, ...) store other tensors and need other
    // kernels; a partial rotary dimension changes RoPE; per-layer sliding attention changes the mask.
    if (find_value(config, "quantization_config"))
        fail(source, "quantization_config is not supported (only unquantized BF16/F16/F32 weights)");
    if (const json* v = find_value(config, "partial_rotary_factor"); v && !(v->is_number() && v->get<double>() == 1.0))
        fail(source, "partial_rotary_factor " + v->dump() + " is not supported (1.0)");
    if (const json* v = find_value(config, "layer_types")) {
        if (!v->is_array()) fail(source, "\"layer_types\" must be a list of strings");
        for (const auto& t : *v)
            if (!t.is_string() || t.get<std::string>() != "full_attention")
                fail(source, "layer_types entry " + t.dump() + " is not supported (full_attention)");
    }
    c.tie_word_embeddings = bool_value(config, source, "tie_word_embeddings", false);
    c.qk_norm = c.family == ModelFamily::qwen3;

    if (c.family == ModelFamily::mistral) {
        if (const json* v = find_value(config, "sliding_window"))
            c.sliding_window = int_value(*v, source, "sliding_window", 1);
    } else if (c.family == ModelFamily::qwen3 || c.family == ModelFamily::qwen2) {
        // Qwen2/Qwen3 carry sliding_window and max_window_layers but use them only with
        // use_sliding_window (then layers >= max_window_layers slide): that is refused.
        if (bool_value(config, source, "use_sliding_window", false))
            fail(source, "use_sliding_window true is not supported for " + c.model_type);
    } else if (find_value(config, "sliding_window")) {
        fail(source, "sliding_window is not supported for llama");
    }

    if (const json* v = find_value(config, "bos_token_id")) c.bos_token_id = int_value(*v, source, "bos_token_id", 0);
    c.eos_token_ids = generation_eos_token_ids(config, source);
    // The dtype the weights were saved in (informational: each tensor carries its own dtype, checked
    // at load); "dtype" is the newer name. Anything but the three dtypes the backends read is refused.
    for (const char* key : {"dtype", "torch_dtype"}) {
        const json* v = find_value(config, key);
        if (!v || !c.torch_dtype.empty()) continue;
        if (!v->is_string()) fail(source, std::string("\"") + key + "\" must be a string (got " + v->dump() + ")");
        const auto& name = v->get_ref<const std::string&>();
        if (name != "bfloat16" && name != "float16" && name != "float32")
            fail(source, std::string(key) + " \"" + name + "\" is not supported (bfloat16, float16, float32)");
        c.torch_dtype = name;
    }
    return c;
}

std::vector<int> generation_eos_token_ids(const json& config, const std::string& source) {
    if (!config.is_object()) fail(source, "must hold a JSON object");
    std::vector<int> ids;
    if (const json* v = find_value(config, "eos_token_id")) {
        if (v->is_array()) {
            for (const auto& id : *v) ids.push_back(int_value(id, source, "eos_token_id", 0));
        } else {
            ids.push_back(int_value(*v, source, "eos_token_id", 0));
        }
    }
    return ids;
}

json ModelConfig::to_json() const {
    json j = {{"model_type", model_type.empty() ? family_name(family) : model_type},
              {"num_hidden_layers", n_layers},
              {"hidden_size", dim},
              {"intermediate_size", ffn_dim},
              {"num_attention_heads", n_heads},
              {"num_key_value_heads", n_kv_heads},
              {"head_dim", head_dim},
              {"vocab_size", vocab_size},
              {"max_position_embeddings", max_position_embeddings},
              {"rms_norm_eps", rms_norm_eps},
              {"rope_theta", rope_theta},
              {"rope_scaling", nullptr},
              {"hidden_act", "silu"},

              {"tie_word_embeddings", tie_word_embeddings}};
    if (family == ModelFamily::llama) j["mlp_bias"] = false;
    if (family == ModelFamily::llama || family == ModelFamily::qwen3) j["attention_bias"] = o_bias;
    if (!rope_scaling.type.empty())
        j["rope_scaling"] = {{"rope_type", rope_scaling.type},
                             {"factor", rope_scaling.factor},
                             {"low_freq_factor", rope_scaling.low_freq_factor},
                             {"high_freq_factor", rope_scaling.high_freq_factor},
                             {"original_max_position_embeddings", rope_scaling.original_max_position_embeddings}};
    if (family == ModelFamily::mistral) j["sliding_window"] = sliding_window > 0 ? json(sliding_window) : json(nullptr);
    if (bos_token_id) j["bos_token_id"] = *bos_token_id;
    if (eos_token_ids.size() == 1)
        j["eos_token_id"] = eos_token_ids[0];
    else if (!eos_token_ids.empty())
        j["eos_token_id"] = eos_token_ids;
    if (!torch_dtype.empty()) j["torch_dtype"] = torch_dtype;
    return j;
}

}  // namespace cc
