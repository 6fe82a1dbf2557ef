// core/model/model_config: config.json of each supported family, validated; anything unknown refused
// by name.
#include "core/model/model_config.h"

#include "tests/safetensors_writer.h"
#include "tests/test_support.h"

namespace cc {
namespace {

using json = nlohmann::json;

std::string config_error(const json& j) {
    try {
        ModelConfig::from_json(j, "config.json");
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

// Qwen3-0.6B's config.json (the fields that matter here).
json qwen3_0_6b() {
    return json::parse(R"({
      "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
      "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
      "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
      "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
      "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
      "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
      "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
      "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
}

// Llama-3.2-1B-Instruct's config.json.
json llama32_1b() {
    return json::parse(R"({
      "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
      "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64,
      "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
      "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
      "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
      "rms_norm_eps": 1e-05,
      "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                       "original_max_position_embeddings": 8192, "rope_type": "llama3"},
      "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
      "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})");
}

// Mistral-7B-Instruct-v0.1's config.json (sliding window 4096).
json mistral_7b() {
    return json::parse(R"({
      "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
      "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
      "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
      "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
      "sliding_window": 4096, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
      "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000})");
}

TEST(ModelConfig, Qwen3HeadDimIndependentOfHiddenSize) {
    const auto c = ModelConfig::from_json(qwen3_0_6b(), "config.json");
    EXPECT_EQ(c.family, ModelFamily::qwen3);
    EXPECT_EQ(c.model_type, "qwen3");
    EXPECT_EQ(c.n_layers, 28);
    EXPECT_EQ(c.dim, 1024);
    EXPECT_EQ(c.ffn_dim, 3072);
    EXPECT_EQ(c.n_heads, 16);
    EXPECT_EQ(c.n_kv_heads, 8);
    EXPECT_EQ(c.head_dim, 128);  // not 1024 / 16
    EXPECT_EQ(c.vocab_size, 151936);
    EXPECT_EQ(c.max_position_embeddings, 40960);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
    EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
    EXPECT_TRUE(c.rope_scaling.type.empty());
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_EQ(c.sliding_window, 0);
    EXPECT_EQ(c.bos_token_id, 151643);
    EXPECT_EQ(c.eos_token_ids, std::vector<int>{151645});
    EXPECT_EQ(c.torch_dtype, "bfloat16");
}

TEST(ModelConfig, Qwen3RequiresHeadDim) {
    auto j = qwen3_0_6b();
    j.erase("head_dim");
    EXPECT_EQ(config_error(j), "config.json: missing required field \"head_dim\" (qwen3)");
}

TEST(ModelConfig, Qwen3SlidingWindowRefusedWhenUsed) {
    auto j = qwen3_0_6b();
    j["use_sliding_window"] = true;
    j["sliding_window"] = 4096;
    EXPECT_HAS(config_error(j), "use_sliding_window true is not supported");
}

TEST(ModelConfig, LlamaWithLlama3RopeScalingAndEosList) {
    const auto c = ModelConfig::from_json(llama32_1b(), "config.json");
    EXPECT_EQ(c.family, ModelFamily::llama);
    EXPECT_FALSE(c.qk_norm);
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
    EXPECT_EQ(c.rope_scaling.type, "llama3");
    EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
    EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
    EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
    EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
    EXPECT_EQ(c.eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
    EXPECT_EQ(c.bos_token_id, 128000);
    EXPECT_TRUE(c.tie_word_embeddings);
}

TEST(ModelConfig, RopeScalingTypeAliasAndDefault) {
    auto j = llama32_1b();
    j["rope_scaling"].erase("rope_type");
    j["rope_scaling"]["type"] = "llama3";
    EXPECT_EQ(ModelConfig::from_json(j, "config.json").rope_scaling.type, "llama3");
    j["rope_scaling"] = {{"rope_type", "default"}};
    EXPECT_TRUE(ModelConfig::from_json(j, "config.json").rope_scaling.type.empty());
    // transformers 5 writes rope_parameters, with rope_theta inside.
    j.erase("rope_scaling");
    j.erase("rope_theta");
    j["rope_parameters"] = llama32_1b()["rope_scaling"];
    j["rope_parameters"]["rope_theta"] = 250000.0;
    const auto c = ModelConfig::from_json(j, "config.json");
    EXPECT_EQ(c.rope_scaling.type, "llama3");
    EXPECT_DOUBLE_EQ(c.rope_theta, 250000.0);
}

TEST(ModelConfig, OtherRopeTypesRefusedByName) {
    for (const char* type : {"yarn", "linear", "dynamic", "longrope"}) {
        auto j = llama32_1b();
        j["rope_scaling"] = {{"rope_type", type}, {"factor", 4.0}};
        EXPECT_EQ(config_error(j),
                  std::string("config.json: rope_scaling type \"") + type + "\" is not supported (llama3)");
    }
    auto j = llama32_1b();
    j["rope_scaling"].erase("low_freq_factor");
    EXPECT_HAS(config_error(j), "missing required field \"rope_scaling.low_freq_factor\"");
    j = llama32_1b();
    j["rope_scaling"] = {{"factor", 2.0}};
    EXPECT_HAS(config_error(j), "\"rope_scaling\" has no \"rope_type\"");
}

TEST(ModelConfig, EosIntOrList) {
    auto j = llama32_1b();
    j["eos_token_id"] = 7;
    EXPECT_EQ(ModelConfig::from_json(j, "c").eos_token_ids, std::vector<int>{7});
    j["eos_token_id"] = json::array({3, 4});
    EXPECT_EQ(ModelConfig::from_json(j, "c").eos_token_ids, (std::vector<int>{3, 4}));
    j["eos_token_id"] = nullptr;
    EXPECT_TRUE(ModelConfig::from_json(j, "c").eos_token_ids.empty());
    j["eos_token_id"] = "2";
    EXPECT_HAS(config_error(j), "\"eos_token_id\" must be an integer");
}

TEST(ModelConfig, MistralSlidingWindowIntOrNull) {
    auto j = mistral_7b();
    auto c = ModelConfig::from_json(j, "config.json");
    EXPECT_EQ(c.family, ModelFamily::mistral);
    EXPECT_EQ(c.sliding_window, 4096);
    EXPECT_EQ(c.head_dim, 128);  // default: hidden_size / num_attention_heads
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_FALSE(c.qk_norm);
    j["sliding_window"] = nullptr;
    EXPECT_EQ(ModelConfig::from_json(j, "config.json").sliding_window, 0);
    j["sliding_window"] = "4096";
    EXPECT_HAS(config_error(j), "\"sliding_window\" must be an integer");
}

TEST(ModelConfig, Stories260kFixture) {
    CC_REQUIRE_FIXTURE("stories260k");
    const auto text = test::read_file(test::fixture("stories260k") / "config.json");
    const auto c = ModelConfig::from_json(json::parse(text), "config.json");
    EXPECT_EQ(c.family, ModelFamily::llama);
    EXPECT_EQ(c.n_layers, 5);
    EXPECT_EQ(c.dim, 64);
    EXPECT_EQ(c.ffn_dim, 172);
    EXPECT_EQ(c.n_heads, 8);
    EXPECT_EQ(c.n_kv_heads, 4);
    EXPECT_EQ(c.head_dim, 8);
    EXPECT_EQ(c.vocab_size, 512);
    EXPECT_EQ(c.max_position_embeddings, 512);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.bos_token_id, 1);
    EXPECT_EQ(c.eos_token_ids, std::vector<int>{2});
}

TEST(ModelConfig, UnknownModelTypeRefusedByName) {
    auto j = mistral_7b();
    j["model_type"] = "gpt2";
    EXPECT_EQ(config_error(j), "config.json: model_type \"gpt2\" is not supported (qwen3, qwen2, llama, mistral)");
    j["model_type"] = "qwen3_moe";
    EXPECT_HAS(config_error(j), "model_type \"qwen3_moe\" is not supported");
    j.erase("model_type");
    EXPECT_EQ(config_error(j), "config.json: missing required field \"model_type\"");
}

TEST(ModelConfig, HiddenActOtherThanSiluRefusedByName) {
    auto j = llama32_1b();
    j["hidden_act"] = "gelu";
    EXPECT_EQ(config_error(j), "config.json: hidden_act \"gelu\" is not supported (silu)");
    j.erase("hidden_act");  // transformers' default for all three families is silu
    EXPECT_EQ(config_error(j), "");
}

TEST(ModelConfig, AttentionBiasPerFamily) {
    // Llama and Qwen3: attention_bias puts biases on q/k/v/o_proj (transformers LlamaAttention,
    // Qwen3Attention).
    for (json j : {llama32_1b(), qwen3_0_6b()}) {
        j["attention_bias"] = true;
        const auto c = ModelConfig::from_json(j, "config.json");
        EXPECT_TRUE(c.qkv_bias);
        EXPECT_TRUE(c.o_bias);
        j["attention_bias"] = false;
        EXPECT_FALSE(ModelConfig::from_json(j, "config.json").qkv_bias);
    }
    // Mistral has no bias tensors: refused by name.
    auto j = mistral_7b();
    j["attention_bias"] = true;
    EXPECT_EQ(config_error(j),
              "config.json: attention_bias true is not supported for mistral (no bias tensors in its attention)");
    // mlp_bias: refused for every family.
    j = llama32_1b();
    j["mlp_bias"] = true;
    EXPECT_HAS(config_error(j), "config.json: mlp_bias true is not supported");
}

// Qwen2.5-7B-Instruct's config.json, as published.
json qwen25_7b() {
    return json::parse(R"({
      "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
      "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
      "intermediate_size": 18944, "max_position_embeddings": 32768, "max_window_layers": 28,
      "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
      "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": false,
      "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": true,
      "use_sliding_window": false, "vocab_size": 152064})");
}

TEST(ModelConfig, Qwen2HasQkvBiasesAndNoQkNorm) {
    const auto c = ModelConfig::from_json(qwen25_7b(), "config.json");
    EXPECT_EQ(c.family, ModelFamily::qwen2);
    EXPECT_STREQ(family_name(c.family), "qwen2");
    EXPECT_EQ(c.head_dim, 128);  // 3584 / 28: Qwen2 has no head_dim field
    EXPECT_EQ(c.n_kv_heads, 4);
    EXPECT_TRUE(c.qkv_bias);
    EXPECT_FALSE(c.o_bias);
    EXPECT_FALSE(c.qk_norm);
    EXPECT_EQ(c.sliding_window, 0);  // use_sliding_window false: sliding_window / max_window_layers unused
    EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
    EXPECT_EQ(c.eos_token_ids, std::vector<int>{151645});

    auto j = qwen25_7b();
    j["use_sliding_window"] = true;
    EXPECT_EQ(config_error(j), "config.json: use_sliding_window true is not supported for qwen2");
    j = qwen25_7b();
    j["attention_bias"] = false;  // not a Qwen2Config field: transformers ignores it, and so do we
    EXPECT_TRUE(ModelConfig::from_json(j, "config.json").qkv_bias);
}

TEST(ModelConfig, DtypeUnderEitherNameAndOnlyTheThreeWeRead) {
    for (const char* key : {"torch_dtype", "dtype"})
        for (const char* dtype : {"bfloat16", "float16", "float32"}) {
            auto j = qwen25_7b();
            j.erase("torch_dtype");
            j[key] = dtype;
            EXPECT_EQ(ModelConfig::from_json(j, "config.json").torch_dtype, dtype) << key;
        }
    auto j = qwen25_7b();
    j["dtype"] = "float16";  // the newer name wins when both are there (transformers >= 4.56 writes dtype)
    EXPECT_EQ(ModelConfig::from_json(j, "config.json").torch_dtype, "float16");
    j = qwen25_7b();
    j["torch_dtype"] = "float8_e4m3fn";
    EXPECT_EQ(config_error(j), "config.json: torch_dtype \"float8_e4m3fn\" is not supported (bfloat16, float16, float32)");
    j["torch_dtype"] = 16;
    EXPECT_EQ(config_error(j), "config.json: \"torch_dtype\" must be a string (got 16)");
    j.erase("torch_dtype");
    EXPECT_EQ(config_error(j), "");
}

TEST(ModelConfig, QuantizationPartialRopeAndSlidingLayerTypesRefused) {
    auto j = qwen25_7b();
    j["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}};
    EXPECT_EQ(config_error(j), "config.json: quantization_config is not supported (only unquantized BF16/F16/F32 weights)");
    j = llama32_1b();
    j["partial_rotary_factor"] = 0.5;
    EXPECT_EQ(config_error(j), "config.json: partial_rotary_factor 0.5 is not supported (1.0)");
    j["partial_rotary_factor"] = 1.0;
    EXPECT_EQ(config_error(j), "");
    j = qwen3_0_6b();
    j["layer_types"] = json::array({"full_attention", "sliding_attention"});
    EXPECT_EQ(config_error(j), "config.json: layer_types entry \"sliding_attention\" is not supported (full_attention)");
    j["layer_types"] = json::array({"full_attention", "full_attention"});
    EXPECT_EQ(config_error(j), "");
}

TEST(ModelConfig, GenerationConfigEosIds) {
    EXPECT_EQ(generation_eos_token_ids(json::parse(R"({"eos_token_id": [151645, 151643]})"), "g.json"),
              (std::vector<int>{151645, 151643}));
    EXPECT_EQ(generation_eos_token_ids(json::parse(R"({"eos_token_id": 2, "do_sample": true})"), "g.json"),
              std::vector<int>{2});
    EXPECT_TRUE(generation_eos_token_ids(json::parse(R"({"eos_token_id": null})"), "g.json").empty());
    EXPECT_TRUE(generation_eos_token_ids(json::object(), "g.json").empty());
    try {
        generation_eos_token_ids(json::parse(R"({"eos_token_id": [2, "x"]})"), "g.json");
        ADD_FAILURE() << "accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "g.json: \"eos_token_id\" must be an integer >= 0 (got \"x\")");
    }
}

TEST(ModelConfig, MissingFieldsNamed) {
    for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                            "vocab_size", "max_position_embeddings", "rms_norm_eps"}) {
        auto j = llama32_1b();
        j.erase(key);
        EXPECT_EQ(config_error(j), std::string("config.json: missing required field \"") + key + "\"");
    }
}

TEST(ModelConfig, DefaultsWhereTransformersHasThem) {
    auto j = test::tiny_config("llama");
    j.erase("num_key_value_heads");
    j.erase("rope_theta");
    j.erase("tie_word_embeddings");
    const auto c = ModelConfig::from_json(j, "config.json");
    EXPECT_EQ(c.n_kv_heads, 4);
    EXPECT_EQ(c.head_dim, 4);  // 16 / 4
    EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
    EXPECT_FALSE(c.tie_word_embeddings);
}

TEST(ModelConfig, InvalidValuesRefused) {
    auto j = test::tiny_config("llama");
    j["num_key_value_heads"] = 3;
    EXPECT_EQ(config_error(j), "config.json: num_attention_heads (4) must be a multiple of num_key_value_heads (3)");
    j = test::tiny_config("llama");
    j["hidden_size"] = "16";
    EXPECT_HAS(config_error(j), "\"hidden_size\" must be an integer >= 1 (got \"16\")");
    j["hidden_size"] = 0;
    EXPECT_HAS(config_error(j), "\"hidden_size\" must be an integer >= 1");
    j["hidden_size"] = 16.5;
    EXPECT_HAS(config_error(j), "\"hidden_size\" must be an integer");
    j = test::tiny_config("llama");
    j["hidden_size"] = 18;  // not divisible by 4 heads, and no head_dim
    EXPECT_HAS(config_error(j), "hidden_size (18) is not a multiple of num_attention_heads (4)");
    j = test::tiny_config("qwen3");
    j["head_dim"] = 7;
    EXPECT_HAS(config_error(j), "head_dim 7 must be even");
    j = test::tiny_config("llama");
    j["rms_norm_eps"] = -1;
    EXPECT_HAS(config_error(j), "\"rms_norm_eps\" must be a positive number");
    j = test::tiny_config("llama");
    j["tie_word_embeddings"] = "yes";
    EXPECT_HAS(config_error(j), "\"tie_word_embeddings\" must be true or false");
    EXPECT_EQ(config_error(json::array()), "config.json: must hold a JSON object");
}

TEST(ModelConfig, ToJsonRoundTrips) {
    auto llama_bias = llama32_1b();
    llama_bias["attention_bias"] = true;
    for (const json& j : {qwen3_0_6b(), llama32_1b(), mistral_7b(), qwen25_7b(), llama_bias}) {
        const auto c = ModelConfig::from_json(j, "config.json");
        const auto back = ModelConfig::from_json(c.to_json(), "to_json");
        EXPECT_EQ(back.to_json(), c.to_json());
        EXPECT_EQ(back.family, c.family);
        EXPECT_EQ(back.head_dim, c.head_dim);
        EXPECT_EQ(back.n_kv_heads, c.n_kv_heads);
        EXPECT_EQ(back.rope_scaling.type, c.rope_scaling.type);
        EXPECT_DOUBLE_EQ(back.rope_scaling.factor, c.rope_scaling.factor);
        EXPECT_EQ(back.sliding_window, c.sliding_window);
        EXPECT_EQ(back.eos_token_ids, c.eos_token_ids);
        EXPECT_EQ(back.bos_token_id, c.bos_token_id);
        EXPECT_EQ(back.tie_word_embeddings, c.tie_word_embeddings);
        EXPECT_EQ(back.qkv_bias, c.qkv_bias);
        EXPECT_EQ(back.o_bias, c.o_bias);
        EXPECT_DOUBLE_EQ(back.rms_norm_eps, c.rms_norm_eps);
    }
    EXPECT_STREQ(family_name(ModelFamily::qwen3), "qwen3");
    EXPECT_STREQ(family_name(ModelFamily::llama), "llama");
    EXPECT_STREQ(family_name(ModelFamily::mistral), "mistral");
}

}  // namespace
}  // namespace cc
