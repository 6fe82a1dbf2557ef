// Checkpoints saved the way other tools write them (tests/data/reference_models, made by
// tools/make_reference_models.py), loaded through the ordinary HF-directory path of the engine and
// checked against the independent float64 reference (tools/reference_forward.py):
//   qwen2_tiny               Qwen2: q/k/v biases; tied embeddings stored as lm_head.weight only;
//                            "dtype" (the newer torch_dtype); generation_config.json eos ids [2, 5];
//                            README.md, LICENSE, vocab.json, merges.txt beside it (ignored)
//   llama_bias_sharded_tiny  Llama attention_bias (q/k/v/o biases); F16 in two shards with
//                            model.safetensors.index.json; a tokenizer.json whose byte_fallback vocab
//                            lacks most <0xNN> tokens
// Greedy ids must match exactly and logits within the tolerance of the other reference tests
// (|ours - golden| <= 2e-4 * max(1, |golden|), goldens.json "suggested_tolerance").
#include "core/model/builtin_model.h"
#include "core/engine/engine.h"
#include "core/text/tokenizer.h"

#include "tests/safetensors_writer.h"
#include "tests/test_support.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using cc::token_id;

fs::path model_dir(const std::string& name) { return cc::test::data_dir() / "reference_models" / name; }

const json& goldens() {
    static const json g = json::parse(cc::test::read_file(cc::test::data_dir() / "reference_models" / "goldens.json"));
    return g;
}

cc::EngineOptions options_for(const fs::path& dir, const fs::path& cache_dir) {
    cc::EngineOptions o;
    o.model_spec = dir.string();
    o.backend = "cpu";
    o.n_threads = 2;
    o.cache_dir = cache_dir;
    return o;
}

// Every golden case of `name`: last-position logits within tolerance, 16 greedy ids exactly.
void expect_matches_goldens(const std::string& name, const fs::path& dir) {
    cc::test::TempDir cache;
    cc::Engine engine(options_for(dir, cache.path()));
    const auto& info = engine.load_model();
    const json& model = goldens().at("models").at(name);
    EXPECT_EQ(info.config.model_type, model.at("model_type").get<std::string>());
    ASSERT_EQ(model.at("cases").size(), 2u);
    for (const json& c : model.at("cases")) {
        const auto ids = c.at("prompt_ids").get<std::vector<token_id>>();
        const auto logits = engine.last_logits(ids);
        const auto& golden = c.at("logits_last");
        ASSERT_EQ(logits.size(), golden.size()) << name;
        for (size_t i = 0; i < logits.size(); ++i) {
            const double g = golden[i].get<double>();
            ASSERT_LE(std::abs(double(logits[i]) - g), 2e-4 * std::max(1.0, std::abs(g)))
                << name << " prompt of " << ids.size() << " tokens, vocab " << i << ": ours " << logits[i]
                << ", golden " << g;
        }
        const auto g = engine.generate(ids, 16, /*ignore_eos=*/true);
        EXPECT_EQ(g.ids, c.at("greedy_ids").get<std::vector<token_id>>()) << name << " prompt of " << ids.size();
    }
}

void copy_dir(const fs::path& from, const fs::path& to) {
    fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
}

void write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::trunc);
    out << text;
    ASSERT_TRUE(bool(out)) << path;
}

TEST(ReferenceCheckpoints, Qwen2BiasesTiedAsLmHeadOnlyMatchFloat64Reference) {
    expect_matches_goldens("qwen2_tiny", model_dir("qwen2_tiny"));
}

TEST(ReferenceCheckpoints, LlamaAttentionBiasShardedF16MatchesFloat64Reference) {
    expect_matches_goldens("llama_bias_sharded_tiny", model_dir("llama_bias_sharded_tiny"));
}

TEST(ReferenceCheckpoints, Qwen2ConfigAsWritten) {
    cc::test::TempDir cache;
    cc::Engine engine(options_for(model_dir("qwen2_tiny"), cache.path()));
    const auto& info = engine.load_model();
    EXPECT_EQ(info.family, "qwen2");
    EXPECT_TRUE(info.config.qkv_bias);
    EXPECT_FALSE(info.config.o_bias);
    EXPECT_TRUE(info.config.tie_word_embeddings);
    EXPECT_EQ(info.config.head_dim, 8);  // hidden_size / num_attention_heads: Qwen2 has no head_dim
    EXPECT_EQ(info.config.sliding_window, 0);  // use_sliding_window false: sliding_window is unused
    EXPECT_EQ(info.config.torch_dtype, "bfloat16");  // from "dtype"
    EXPECT_FALSE(info.has_tokenizer);
}

// save_hf_checkpoint writes the biases too: a re-saved Qwen2 / Llama-with-bias model gives the same
// logits, bit for bit (the saved one stores the tied matrix as model.embed_tokens.weight).
TEST(ReferenceCheckpoints, ResavedBiasCheckpointsGiveTheSameLogits) {
    for (const char* name : {"qwen2_tiny", "llama_bias_sharded_tiny"}) {
        const fs::path dir = model_dir(name);
        const auto config = cc::ModelConfig::from_json(json::parse(cc::test::read_file(dir / "config.json")), name);
        cc::test::TempDir out, cache_a, cache_b;
        cc::save_hf_checkpoint(cc::load_weights(dir, config), out.path());
        cc::Engine a(options_for(dir, cache_a.path())), b(options_for(out.path(), cache_b.path()));
        a.load_model();
        b.load_model();
        const auto ids = goldens().at("models").at(name).at("cases").at(0).at("prompt_ids").get<std::vector<token_id>>();
        EXPECT_TRUE(a.last_logits(ids) == b.last_logits(ids)) << name;
    }
}

// generation_config.json's eos ids end a raw generation, as transformers' generate() does; an int
// and a list both work, and the ids join the chat format's stop ids.
TEST(ReferenceCheckpoints, GenerationConfigEosIdsStopGeneration) {
    const json& c = goldens().at("models").at("qwen2_tiny").at("cases").at(0);
    const auto ids = c.at("prompt_ids").get<std::vector<token_id>>();
    const auto greedy = c.at("greedy_ids").get<std::vector<token_id>>();
    // The shipped generation_config.json lists [2, 5]: neither is in this greedy run.
    ASSERT_EQ(std::count_if(greedy.begin(), greedy.end(), [](token_id t) { return t == 2 || t == 5; }), 0);
    const token_id stop = greedy[3];
    const auto first = size_t(std::find(greedy.begin(), greedy.end(), stop) - greedy.begin());
    for (const std::string& eos : {std::to_string(stop), "[5, " + std::to_string(stop) + "]"}) {
        cc::test::TempDir dir, cache;
        copy_dir(model_dir("qwen2_tiny"), dir.path());
        write_text(dir.path() / "generation_config.json", R"({"bos_token_id": 1, "eos_token_id": )" + eos + "}");
        cc::Engine engine(options_for(dir.path(), cache.path()));
        engine.load_model();
        const auto g = engine.generate(ids, 16, /*ignore_eos=*/false);
        EXPECT_EQ(g.ids, std::vector<token_id>(greedy.begin(), greedy.begin() + std::ptrdiff_t(first) + 1)) << eos;
        EXPECT_NE(std::find(engine.stop_ids().begin(), engine.stop_ids().end(), stop), engine.stop_ids().end());
    }
    // A malformed eos_token_id is refused, naming the file.
    cc::test::TempDir dir, cache;
    copy_dir(model_dir("qwen2_tiny"), dir.path());
    write_text(dir.path() / "generation_config.json", R"({"eos_token_id": "</s>"})");
    cc::Engine engine(options_for(dir.path(), cache.path()));
    try {
        engine.load_model();
        ADD_FAILURE() << "a string eos_token_id was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_HAS(e.what(), (dir.path() / "generation_config.json").string() + ": \"eos_token_id\" must be an integer");
    }
}

TEST(ReferenceCheckpoints, StopIdsMergeChatFormatConfigAndGenerationConfig) {
    cc::test::TempDir dir, cache;
    copy_dir(model_dir("llama_bias_sharded_tiny"), dir.path());
    write_text(dir.path() / "generation_config.json", R"({"eos_token_id": [2, 40, 41]})");
    cc::Engine engine(options_for(dir.path(), cache.path()));
    const auto& info = engine.load_model();
    EXPECT_EQ(info.chat_format, "plain");
    const auto& stop = engine.stop_ids();
    for (token_id id : {2, 40, 41}) EXPECT_EQ(std::count(stop.begin(), stop.end(), id), 1) << id;
}

// The shipped tokenizer.json (byte_fallback, only <0x0A>, <0xC3>, <0xA9> of the byte tokens) loads
// and encodes as the tokenizers library does: é has both byte tokens, ü (C3 BC) and € do not -> <unk>
// (fuse_unk true). Ids worked by hand from BPE::merge_word; vocab in make_reference_models.py.
TEST(ReferenceCheckpoints, ByteFallbackTokenizerWithMissingByteTokens) {
    const auto tok = cc::Tokenizer::from_file(model_dir("llama_bias_sharded_tiny") / "tokenizer.json");
    const auto id = [&](const std::string& piece) { return *tok.token_to_id(piece); };
    const token_id unk = 0, x_c3 = 4, x_a9 = 5;
    ASSERT_EQ(id("<0xC3>"), x_c3);
    ASSERT_EQ(id("<0xA9>"), x_a9);
    // "▁the▁café": ▁t + he -> ▁the; ▁c; a; f; é -> <0xC3><0xA9>
    EXPECT_EQ(tok.encode("the caf\xC3\xA9", cc::EncodeMode::plain, false),
              (std::vector<token_id>{id("\xE2\x96\x81the"), id("\xE2\x96\x81" "c"), id("a"), id("f"), x_c3, x_a9}));
    // "▁über": ü -> <unk> (no <0xBC>); e r -> er
    EXPECT_EQ(tok.encode("\xC3\xBC" "ber", cc::EncodeMode::plain, false),
              (std::vector<token_id>{id("\xE2\x96\x81"), unk, id("b"), id("er")}));
    // "€€" fuses into one <unk>
    EXPECT_EQ(tok.encode("\xE2\x82\xAC\xE2\x82\xAC", cc::EncodeMode::plain, false),
              (std::vector<token_id>{id("\xE2\x96\x81"), unk}));
    EXPECT_EQ(tok.decode(std::vector<token_id>{id("\xE2\x96\x81the"), id("\xE2\x96\x81" "c"), id("a"), id("f"), x_c3,
                                               x_a9}),
              "the caf\xC3\xA9");
}

}  // namespace
