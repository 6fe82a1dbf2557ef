// core/model/weights: loading an HF directory (single file, sharded with an index, several files),
// validated against the config; every error names the file, the tensor and expected vs actual.
#include "core/model/weights.h"

#include "core/model/model_spec.h"

#include "tests/safetensors_writer.h"
#include "tests/test_support.h"

#include <cstring>

namespace cc {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::TensorSpec;

ModelConfig tiny(const std::string& model_type, bool tied = false) {
    return ModelConfig::from_json(test::tiny_config(model_type, tied), "config.json");
}

// DIR/config.json + DIR/model.safetensors holding `tensors`.
void write_model(const fs::path& dir, const ModelConfig& c, const std::vector<TensorSpec>& tensors) {
    test::write_bytes(dir / "config.json", c.to_json().dump(2));
    test::write_bytes(dir / "model.safetensors", test::safetensors_bytes(tensors));
}

std::string load_error(const fs::path& dir, const ModelConfig& c) {
    try {
        load_weights(dir, c);
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

std::vector<TensorSpec> without(std::vector<TensorSpec> tensors, const std::string& name) {
    std::erase_if(tensors, [&](const TensorSpec& t) { return t.name == name; });
    return tensors;
}

// The bytes a Tensor points at equal the file's data section at the tensor's offset.
void expect_ramp(const Tensor& t, size_t offset, const std::string& what) {
    ASSERT_NE(t.data, nullptr) << what;
    for (size_t i = 0; i < t.n_bytes; ++i)
        ASSERT_EQ(static_cast<char>(t.data[i]), test::ramp_byte(offset + i)) << what << " byte " << i;
}

void expect_shapes(const ModelWeights& w) {
    const auto& c = w.config;
    const int64_t q = int64_t{c.n_heads} * c.head_dim, kv = int64_t{c.n_kv_heads} * c.head_dim;
    using S = std::vector<int64_t>;
    EXPECT_EQ(w.embed.shape, (S{c.vocab_size, c.dim}));
    EXPECT_EQ(w.lm_head.shape, (S{c.vocab_size, c.dim}));
    EXPECT_EQ(w.final_norm.shape, (S{c.dim}));
    ASSERT_EQ(w.layers.size(), static_cast<size_t>(c.n_layers));
    for (const auto& l : w.layers) {
        EXPECT_EQ(l.attn_norm.shape, (S{c.dim}));
        EXPECT_EQ(l.wq.shape, (S{q, c.dim}));
        EXPECT_EQ(l.wk.shape, (S{kv, c.dim}));
        EXPECT_EQ(l.wv.shape, (S{kv, c.dim}));
        EXPECT_EQ(l.wo.shape, (S{c.dim, q}));
        EXPECT_EQ(l.ffn_norm.shape, (S{c.dim}));
        EXPECT_EQ(l.w_gate.shape, (S{c.ffn_dim, c.dim}));
        EXPECT_EQ(l.w_up.shape, (S{c.ffn_dim, c.dim}));
        EXPECT_EQ(l.w_down.shape, (S{c.dim, c.ffn_dim}));
        if (c.qk_norm) {
            EXPECT_EQ(l.q_norm.shape, (S{c.head_dim}));
            EXPECT_EQ(l.k_norm.shape, (S{c.head_dim}));
        } else {
            EXPECT_EQ(l.q_norm.data, nullptr);
            EXPECT_EQ(l.k_norm.data, nullptr);
        }
        for (const Tensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down}) {
            ASSERT_NE(t->data, nullptr);
            EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % dtype_bytes(t->dtype), 0u);
        }
    }
}

TEST(Weights, Stories260kFixture) {
    CC_REQUIRE_FIXTURE("stories260k");
    const fs::path dir = test::fixture("stories260k");
    const auto config = ModelConfig::from_json(json::parse(test::read_file(dir / "config.json")), "config.json");
    const ModelWeights w = load_weights(dir, config);
    expect_shapes(w);
    EXPECT_EQ(w.layers.size(), 5u);
    EXPECT_EQ(w.embed.shape, (std::vector<int64_t>{512, 64}));
    EXPECT_EQ(w.layers[3].wk.shape, (std::vector<int64_t>{32, 64}));
    EXPECT_EQ(w.layers[0].w_down.shape, (std::vector<int64_t>{64, 172}));
    EXPECT_EQ(w.embed.dtype, DType::f32);
    EXPECT_EQ(w.lm_head.data, w.embed.data);  // tied: the logits use the embedding
    EXPECT_EQ(w.lm_head.n_bytes, w.embed.n_bytes);
    EXPECT_TRUE(w.notes.empty());
    EXPECT_FALSE(w.storage.empty());
    // The data is the file's, in place: the embedding is the first tensor of the data section.
    SafetensorsFile f(dir / "model.safetensors");
    const auto* info = f.find("model.norm.weight");
    ASSERT_NE(info, nullptr);
    ASSERT_EQ(w.final_norm.n_bytes, info->n_bytes);
    EXPECT_EQ(std::memcmp(w.final_norm.data, f.data(*info).data(), info->n_bytes), 0);
}

TEST(Weights, WeightsOnlyDirectoryNeedsNoTokenizer) {
    CC_REQUIRE_FIXTURE("stories260k");
    test::TempDir tmp;
    for (const char* name : {"config.json", "model.safetensors"})
        fs::copy_file(test::fixture("stories260k") / name, tmp.path() / name);
    const ModelSource src = resolve_model(tmp.path().string());
    EXPECT_TRUE(src.tokenizer_files.empty());
    ASSERT_EQ(src.weight_files.size(), 1u);
    const auto config = ModelConfig::from_json(src.config, "config.json");
    const ModelWeights w = load_weights(src.dir, config);
    EXPECT_EQ(w.layers.size(), 5u);
    EXPECT_EQ(model_fingerprint(src).size(), 64u);
}

TEST(Weights, MixedDtypesKeepTheirStoredDtype) {
    test::TempDir tmp;
    const auto c = tiny("llama");
    auto tensors = test::model_tensors(c, "BF16");
    tensors[0].dtype = "F32";      // embedding
    tensors[1].dtype = "F16";      // layer 0 input_layernorm
    tensors.back().dtype = "F16";  // lm_head
    write_model(tmp.path(), c, tensors);
    const ModelWeights w = load_weights(tmp.path(), c);
    expect_shapes(w);
    EXPECT_EQ(w.embed.dtype, DType::f32);
    EXPECT_EQ(w.layers[0].attn_norm.dtype, DType::f16);
    EXPECT_EQ(w.layers[0].wq.dtype, DType::bf16);
    EXPECT_EQ(w.lm_head.dtype, DType::f16);
    EXPECT_NE(w.lm_head.data, w.embed.data);
    EXPECT_EQ(w.layers[1].w_down.n_bytes, 16u * 24u * 2u);
    // Offsets in the data section follow the write order.
    size_t offset = 0;
    expect_ramp(w.embed, offset, "embed");
    offset += w.embed.n_bytes;
    expect_ramp(w.layers[0].attn_norm, offset, "attn_norm");
    offset += w.layers[0].attn_norm.n_bytes;
    expect_ramp(w.layers[0].wq, offset, "wq");
}

TEST(Weights, Qwen3HasQkNorm) {
    test::TempDir tmp;
    const auto c = tiny("qwen3", /*tied=*/true);
    write_model(tmp.path(), c, test::model_tensors(c, "BF16"));
    const ModelWeights w = load_weights(tmp.path(), c);
    expect_shapes(w);
    EXPECT_EQ(w.layers[1].q_norm.shape, std::vector<int64_t>{8});
    EXPECT_EQ(w.layers[0].wq.shape, (std::vector<int64_t>{32, 16}));  // 4 heads * head_dim 8, not 16
    EXPECT_EQ(w.lm_head.data, w.embed.data);

    // Without q_norm the Qwen3 checkpoint is incomplete.
    write_model(tmp.path(), c, without(test::model_tensors(c, "BF16"), "model.layers.1.self_attn.k_norm.weight"));
    const auto err = load_error(tmp.path(), c);
    EXPECT_HAS(err, (tmp.path() / "model.safetensors").string() +
                        ": tensor \"model.layers.1.self_attn.k_norm.weight\" is missing");
    EXPECT_HAS(err, "expected [8] (head_dim)");
}

TEST(Weights, MistralLoads) {
    test::TempDir tmp;
    auto j = test::tiny_config("mistral");
    j["sliding_window"] = 64;
    const auto c = ModelConfig::from_json(j, "config.json");
    write_model(tmp.path(), c, test::model_tensors(c, "F16"));
    expect_shapes(load_weights(tmp.path(), c));
}

// DIR/model.safetensors holding `tensors`, with `copy_to`'s bytes equal to `copy_from`'s.
void write_model_with_copy(const fs::path& dir, const ModelConfig& c, const std::vector<TensorSpec>& tensors,
                           const std::string& copy_from, const std::string& copy_to) {
    size_t n = 0;
    const auto header = test::safetensors_header(tensors, &n);
    std::string data = test::ramp_data(n);
    const auto range = [&](const std::string& name) { return header[name]["data_offsets"]; };
    const size_t from = range(copy_from)[0].get<size_t>(), to = range(copy_to)[0].get<size_t>();
    const size_t len = range(copy_from)[1].get<size_t>() - from;
    std::copy_n(data.begin() + std::ptrdiff_t(from), len, data.begin() + std::ptrdiff_t(to));
    test::write_bytes(dir / "config.json", c.to_json().dump(2));
    test::write_bytes(dir / "model.safetensors", test::safetensors_bytes(header.dump(), data));
}

TEST(Weights, TiedWithBothStoredNeedsEqualContents) {
    test::TempDir tmp;
    const auto c = tiny("llama", /*tied=*/true);
    auto tensors = test::model_tensors(c);
    tensors.push_back({"lm_head.weight", "F32", {32, 16}});
    write_model_with_copy(tmp.path(), c, tensors, "model.embed_tokens.weight", "lm_head.weight");
    const ModelWeights w = load_weights(tmp.path(), c);
    EXPECT_EQ(w.lm_head.data, w.embed.data);
    ASSERT_EQ(w.notes.size(), 1u);
    EXPECT_HAS(w.notes[0], "lm_head.weight is stored too and equals model.embed_tokens.weight");

    // Different contents (the ramp puts different bytes at each offset): an error naming both.
    write_model(tmp.path(), c, tensors);
    EXPECT_EQ(load_error(tmp.path(), c),
              (tmp.path() / "model.safetensors").string() +
                  ": tie_word_embeddings is true but tensors \"model.embed_tokens.weight\" and \"lm_head.weight\" "
                  "differ (F32 vs F32); a tied checkpoint stores one matrix");
    // Different dtypes: also an error.
    tensors.back().dtype = "BF16";
    write_model(tmp.path(), c, tensors);
    EXPECT_HAS(load_error(tmp.path(), c), "differ (F32 vs BF16)");

    // Its shape is still checked.
    tensors.back() = {"lm_head.weight", "F32", {31, 16}};
    write_model(tmp.path(), c, tensors);
    EXPECT_HAS(load_error(tmp.path(), c),
               "tensor \"lm_head.weight\": shape [31, 16], expected [32, 16] (vocab_size, hidden_size)");
}

TEST(Weights, TiedStoredAsLmHeadOnly) {
    test::TempDir tmp;
    const auto c = tiny("qwen3", /*tied=*/true);
    auto tensors = without(test::model_tensors(c, "BF16"), "model.embed_tokens.weight");
    tensors.push_back({"lm_head.weight", "BF16", {32, 16}});
    write_model(tmp.path(), c, tensors);
    const ModelWeights w = load_weights(tmp.path(), c);
    expect_shapes(w);
    EXPECT_EQ(w.embed.data, w.lm_head.data);
    EXPECT_EQ(w.embed.dtype, DType::bf16);
    ASSERT_EQ(w.notes.size(), 1u);
    EXPECT_HAS(w.notes[0], "stored as lm_head.weight only");

    // Neither name: the error names both.
    write_model(tmp.path(), c, without(tensors, "lm_head.weight"));
    EXPECT_EQ(load_error(tmp.path(), c),
              (tmp.path() / "model.safetensors").string() +
                  ": tensor \"model.embed_tokens.weight\" is missing, and so is \"lm_head.weight\" "
                  "(tie_word_embeddings: one of them holds the shared [32, 16] (vocab_size, hidden_size) matrix)");

    // Untied, lm_head alone is not enough: the embedding is its own matrix.
    const auto untied = tiny("qwen3");
    write_model(tmp.path(), untied, tensors);
    EXPECT_HAS(load_error(tmp.path(), untied), "tensor \"model.embed_tokens.weight\" is missing");
}

TEST(Weights, Qwen2QkvBiasesLoadedAndChecked) {
    test::TempDir tmp;
    const auto c = tiny("qwen2");
    ASSERT_TRUE(c.qkv_bias);
    write_model(tmp.path(), c, test::model_tensors(c, "BF16"));
    const ModelWeights w = load_weights(tmp.path(), c);
    expect_shapes(w);
    EXPECT_EQ(w.layers[1].bq.shape, std::vector<int64_t>{16});  // 4 heads * head_dim 4
    EXPECT_EQ(w.layers[1].bk.shape, std::vector<int64_t>{8});   // 2 kv heads * 4
    EXPECT_EQ(w.layers[1].bv.shape, std::vector<int64_t>{8});
    EXPECT_EQ(w.layers[1].bo.data, nullptr);  // Qwen2: no o_proj bias
    EXPECT_EQ(w.layers[1].q_norm.data, nullptr);

    write_model(tmp.path(), c, without(test::model_tensors(c, "BF16"), "model.layers.0.self_attn.k_proj.bias"));
    EXPECT_EQ(load_error(tmp.path(), c), (tmp.path() / "model.safetensors").string() +
                                             ": tensor \"model.layers.0.self_attn.k_proj.bias\" is missing (expected "
                                             "[8] (num_key_value_heads * head_dim))");
    // A bias where the config has none is an unexpected tensor, not silently dropped.
    const auto plain = tiny("llama");
    auto tensors = test::model_tensors(plain);
    tensors.push_back({"model.layers.0.self_attn.q_proj.bias", "F32", {16}});
    write_model(tmp.path(), plain, tensors);
    EXPECT_HAS(load_error(tmp.path(), plain), "tensor \"model.layers.0.self_attn.q_proj.bias\": unexpected");
}

TEST(Weights, LlamaAttentionBiasHasAllFourBiases) {
    test::TempDir tmp;
    auto j = test::tiny_config("llama");
    j["attention_bias"] = true;
    const auto c = ModelConfig::from_json(j, "config.json");
    write_model(tmp.path(), c, test::model_tensors(c, "F16"));
    const ModelWeights w = load_weights(tmp.path(), c);
    EXPECT_EQ(w.layers[0].bq.shape, std::vector<int64_t>{16});
    EXPECT_EQ(w.layers[0].bo.shape, std::vector<int64_t>{16});
    EXPECT_EQ(w.layers[0].bo.dtype, DType::f16);
    write_model(tmp.path(), c, without(test::model_tensors(c, "F16"), "model.layers.1.self_attn.o_proj.bias"));
    EXPECT_HAS(load_error(tmp.path(), c), "tensor \"model.layers.1.self_attn.o_proj.bias\" is missing (expected [16] (hidden_size))");
}

TEST(Weights, UntiedNeedsLmHead) {
    test::TempDir tmp;
    const auto c = tiny("llama");
    write_model(tmp.path(), c, without(test::model_tensors(c), "lm_head.weight"));
    EXPECT_EQ(load_error(tmp.path(), c),
              (tmp.path() / "model.safetensors").string() +
                  ": tensor \"lm_head.weight\" is missing (expected [32, 16] (vocab_size, hidden_size))");
}

TEST(Weights, MissingTensorNamed) {
    test::TempDir tmp;
    const auto c = tiny("llama");
    write_model(tmp.path(), c, without(test::model_tensors(c), "model.layers.1.mlp.up_proj.weight"));
    EXPECT_EQ(load_error(tmp.path(), c),
              (tmp.path() / "model.safetensors").string() +
                  ": tensor \"model.layers.1.mlp.up_proj.weight\" is missing (expected [24, 16] "
                  "(intermediate_size, hidden_size))");
}

TEST(Weights, WrongShapeReportsExpectedAndActual) {
    test::TempDir tmp;
    const auto c = tiny("llama");
    auto tensors = test::model_tensors(c);
    for (auto& t : tensors)
        if (t.name == "model.layers.1.self_attn.k_proj.weight") t.shape = {16, 16};
    write_model(tmp.path(), c, tensors);
    EXPECT_EQ(load_error(tmp.path(), c),
              (tmp.path() / "model.safetensors").string() +
                  ": tensor \"model.layers.1.self_attn.k_proj.weight\": shape [16, 16], expected "
                  "[8, 16] (num_key_value_heads * head_dim, hidden_size)");
    // A transposed matrix is a wrong shape too.
    tensors = test::model_tensors(c);
    for (auto& t : tensors)
        if (t.name == "model.layers.0.mlp.down_proj.weight") t.shape = {24, 16};
    write_model(tmp.path(), c, tensors);
    EXPECT_HAS(load_error(tmp.path(), c), "shape [24, 16], expected [16, 24] (hidden_size, intermediate_size)");
}

TEST(Weights, UnsupportedDtypeNamed) {
    test::TempDir tmp;
    const auto c = tiny("llama");
    auto tensors = test::model_tensors(c);
    tensors[3].dtype = "I64";
    write_model(tmp.path(), c, tensors);
    EXPECT_EQ(load_error(tmp.path(), c), (tmp.path() / "model.safetensors").string() + ": tensor \"" + tensors[3].name +
                                             "\": dtype \"I64\" is not supported (F32, F16, BF16)");
}

TEST(Weights, UnexpectedTensorNamedButInvFreqIgnored) {
    test::TempDir tmp;
    const auto c = tiny("llama");
    auto tensors = test::model_tensors(c);
    tensors.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {2}});
    write_model(tmp.path(), c, tensors);
    EXPECT_EQ(load_error(tmp.path(), c), "");

    tensors.push_back({"model.layers.0.self_attn.q_proj.bias", "F32", {16}});
    write_model(tmp.path(), c, tensors);
    const auto err = load_error(tmp.path(), c);
    EXPECT_HAS(err, (tmp.path() / "model.safetensors").string() +
                        ": tensor \"model.layers.0.self_attn.q_proj.bias\": unexpected");

    // Qwen3's q_norm in a llama checkpoint: the config and the weights disagree.
    write_model(tmp.path(), c, [&] {
        auto t = test::model_tensors(c);
        t.push_back({"model.layers.0.self_attn.q_norm.weight", "F32", {4}});
        return t;
    }());
    EXPECT_HAS(load_error(tmp.path(), c),
               "tensor \"model.layers.0.self_attn.q_norm.weight\": unexpected for model_type \"llama\"");
    // A layer beyond num_hidden_layers.
    auto three = c;
    three.n_layers = 3;
    write_model(tmp.path(), c, test::model_tensors(three));
    EXPECT_HAS(load_error(tmp.path(), c), "unexpected for model_type \"llama\" (9 unexpected: \"model.layers.2.");
}

TEST(Weights, TruncatedFileNamed) {
    test::TempDir tmp;
    const auto c = tiny("llama");
    write_model(tmp.path(), c, test::model_tensors(c));
    const auto path = tmp.path() / "model.safetensors";
    fs::resize_file(path, fs::file_size(path) - 100);
    const auto err = load_error(tmp.path(), c);
    EXPECT_HAS(err, path.string() + ": tensor \"lm_head.weight\"");
    EXPECT_HAS(err, "go beyond the data section");
}

TEST(Weights, MisalignedTensorsAreCopiedAligned) {
    test::TempDir tmp;
    const auto c = tiny("llama");
    test::write_bytes(tmp.path() / "config.json", c.to_json().dump());
    // An unpadded header: its length is odd, so the data section starts at an odd address.
    auto tensors = test::model_tensors(c);
    size_t n = 0;
    auto header = test::safetensors_header(tensors, &n);
    std::string text = header.dump();
    if (text.size() % 2 == 0) text += " ";
    test::write_bytes(tmp.path() / "model.safetensors",
                      test::safetensors_bytes(text, test::ramp_data(n), /*pad=*/false));
    const ModelWeights w = load_weights(tmp.path(), c);
    expect_shapes(w);
    expect_ramp(w.embed, 0, "embed");
    ASSERT_EQ(w.notes.size(), 1u);
    EXPECT_HAS(w.notes[0], "were copied");
}

// Writes `tensors` split over shards, and an index naming each tensor's shard.
void write_sharded(const fs::path& dir, const std::vector<std::vector<TensorSpec>>& shards,
                   json* weight_map_out = nullptr) {
    json weight_map = json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
        const std::string name =
            "model-0000" + std::to_string(i + 1) + "-of-0000" + std::to_string(shards.size()) + ".safetensors";
        test::write_bytes(dir / name, test::safetensors_bytes(shards[i]));
        for (const auto& t : shards[i]) weight_map[t.name] = name;
    }
    if (weight_map_out) *weight_map_out = weight_map;
    test::write_bytes(dir / "model.safetensors.index.json",
                      json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2));
}

std::vector<std::vector<TensorSpec>> split3(const std::vector<TensorSpec>& all) {
    std::vector<std::vector<TensorSpec>> shards(3);
    for (size_t i = 0; i < all.size(); ++i) shards[i * 3 / all.size()].push_back(all[i]);
    return shards;
}

TEST(Weights, ShardedWithIndex) {
    test::TempDir tmp;
    const auto c = tiny("qwen3");
    test::write_bytes(tmp.path() / "config.json", c.to_json().dump());
    write_sharded(tmp.path(), split3(test::model_tensors(c, "BF16")));
    const ModelWeights w = load_weights(tmp.path(), c);
    expect_shapes(w);
    EXPECT_EQ(w.storage.size(), 3u);   // one mapping per shard
    expect_ramp(w.embed, 0, "embed");  // first tensor of the first shard
}

TEST(Weights, ShardNamedByIndexMustExist) {
    test::TempDir tmp;
    const auto c = tiny("llama");
    write_sharded(tmp.path(), split3(test::model_tensors(c)));
    fs::remove(tmp.path() / "model-00002-of-00003.safetensors");
    const auto err = load_error(tmp.path(), c);
    EXPECT_HAS(err, (tmp.path() / "model.safetensors.index.json").string() + ": tensor \"");
    EXPECT_HAS(err, "shard \"model-00002-of-00003.safetensors\" does not exist");
}

TEST(Weights, TensorMustBeInItsNamedShard) {
    test::TempDir tmp;
    const auto c = tiny("llama");
    const auto shards = split3(test::model_tensors(c));
    json weight_map;
    write_sharded(tmp.path(), shards, &weight_map);
    // The index claims the embedding is in shard 3.
    weight_map["model.embed_tokens.weight"] = "model-00003-of-00003.safetensors";
    test::write_bytes(tmp.path() / "model.safetensors.index.json", json{{"weight_map", weight_map}}.dump());
    EXPECT_EQ(load_error(tmp.path(), c),
              (tmp.path() / "model-00003-of-00003.safetensors").string() +
                  ": tensor \"model.embed_tokens.weight\" is missing (model.safetensors.index.json "
                  "places it in this shard)");
}

TEST(Weights, IndexMustListEveryTensorAndStayInDir) {
    test::TempDir tmp;
    const auto c = tiny("llama");
    json weight_map;
    write_sharded(tmp.path(), split3(test::model_tensors(c)), &weight_map);
    json partial = weight_map;
    partial.erase("model.norm.weight");
    test::write_bytes(tmp.path() / "model.safetensors.index.json", json{{"weight_map", partial}}.dump());
    EXPECT_HAS(load_error(tmp.path(), c), "tensor \"model.norm.weight\" is not listed in model.safetensors.index.json");

    json escaping = weight_map;
    escaping["model.norm.weight"] = "../model-00003-of-00003.safetensors";
    test::write_bytes(tmp.path() / "model.safetensors.index.json", json{{"weight_map", escaping}}.dump());
    EXPECT_HAS(load_error(tmp.path(), c), "shard \"../model-00003-of-00003.safetensors\" is not a plain file name");

    test::write_bytes(tmp.path() / "model.safetensors.index.json", "{\"weight_map\": [");
    EXPECT_HAS(load_error(tmp.path(), c), (tmp.path() / "model.safetensors.index.json").string() + ": invalid JSON");
    test::write_bytes(tmp.path() / "model.safetensors.index.json", "{\"metadata\": {}}");
    EXPECT_HAS(load_error(tmp.path(), c), "must be an object with a \"weight_map\" object");
}

TEST(Weights, SeveralFilesWithoutIndexAreOneCheckpoint) {
    test::TempDir tmp;
    const auto c = tiny("llama");
    const auto shards = split3(test::model_tensors(c));
    for (size_t i = 0; i < shards.size(); ++i)
        test::write_bytes(tmp.path() / ("part" + std::to_string(i) + ".safetensors"),
                          test::safetensors_bytes(shards[i]));
    expect_shapes(load_weights(tmp.path(), c));

    // A name in two files is ambiguous.
    test::write_bytes(tmp.path() / "part3.safetensors", test::safetensors_bytes({{"model.norm.weight", "F32", {16}}}));
    const auto err = load_error(tmp.path(), c);
    EXPECT_HAS(err, (tmp.path() / "part3.safetensors").string() + ": tensor \"model.norm.weight\": also in " +
                        (tmp.path() / "part2.safetensors").string());
}

TEST(Weights, NoWeightsNamed) {
    test::TempDir tmp;
    EXPECT_HAS(load_error(tmp.path(), tiny("llama")), tmp.path().string() + ": no weights");
    EXPECT_HAS(load_error(tmp.path() / "absent", tiny("llama")), "not a model directory");
}

TEST(Weights, StorageKeepsMappingsAlive) {
    test::TempDir tmp;
    const auto c = tiny("llama");
    write_model(tmp.path(), c, test::model_tensors(c));
    ModelWeights moved;
    {
        ModelWeights w = load_weights(tmp.path(), c);
        moved = std::move(w);
    }
    fs::remove(tmp.path() / "model.safetensors");  // the mapping outlives the name
    expect_ramp(moved.embed, 0, "embed");
}

}  // namespace
}  // namespace cc
