// builtin:toolcaller, the trained model embedded in the program: the same config, the same weight
// bytes and the same logits as loading its directory (resources/models/toolcaller), and the
// metadata of a trained (not synthetic) model.
#include "core/engine/engine.h"
#include "core/base/embedded_resources.h"
#include "core/base/sha256.h"
#include "core/model/builtin_model.h"
#include "core/model/model_spec.h"
#include "core/model/weights.h"
#include "tests/test_support.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

fs::path toolcaller_dir() { return cc::test::source_dir() / "resources" / "models" / "toolcaller"; }

bool same_bytes(const cc::Tensor& a, const cc::Tensor& b) {
    return a.dtype == b.dtype && a.shape == b.shape && a.n_bytes == b.n_bytes &&
           std::memcmp(a.data, b.data, a.n_bytes) == 0;
}

TEST(BuiltinTrained, IsListedAndResolvesToTheDirectorysConfig) {
    const auto recipe = cc::find_builtin("toolcaller");
    ASSERT_TRUE(recipe.has_value());
    EXPECT_TRUE(recipe->trained());
    EXPECT_FALSE(cc::find_builtin("qwen3-demo")->trained());

    const auto builtin = cc::resolve_model("builtin:toolcaller");
    const auto dir = cc::resolve_model(toolcaller_dir().string());
    const auto from_dir = cc::ModelConfig::from_json(dir.config, "config.json");
    EXPECT_EQ(recipe->config.to_json(), from_dir.to_json());
    EXPECT_EQ(builtin.generation_eos_ids, dir.generation_eos_ids);
    EXPECT_FALSE(builtin.generation_eos_ids.empty());
}

TEST(BuiltinTrained, IsTheDefaultWhereTheProgramCarriesIt) {
    // This program links cc_bundled_models, as the app and the CLI do.
    EXPECT_EQ(cc::default_model_spec(), "builtin:toolcaller");
    EXPECT_EQ(cc::EngineOptions{}.model_spec, "builtin:toolcaller");
}

TEST(BuiltinTrained, WeightsAreTheCheckpointsBytes) {
    const auto recipe = *cc::find_builtin("toolcaller");
    const auto embedded = cc::generate_builtin_weights(recipe);
    const auto dir = cc::load_weights(toolcaller_dir(), recipe.config);
    EXPECT_TRUE(same_bytes(embedded.embed, dir.embed));
    EXPECT_TRUE(same_bytes(embedded.final_norm, dir.final_norm));
    ASSERT_EQ(embedded.layers.size(), dir.layers.size());
    for (size_t i = 0; i < dir.layers.size(); ++i) {
        const auto& a = embedded.layers[i];
        const auto& b = dir.layers[i];
        for (auto [x, y] : {std::pair{&a.wq, &b.wq}, {&a.wk, &b.wk}, {&a.wv, &b.wv}, {&a.wo, &b.wo},
                            {&a.q_norm, &b.q_norm}, {&a.k_norm, &b.k_norm}, {&a.attn_norm, &b.attn_norm},
                            {&a.ffn_norm, &b.ffn_norm}, {&a.w_gate, &b.w_gate}, {&a.w_up, &b.w_up},
                            {&a.w_down, &b.w_down}})
            EXPECT_TRUE(same_bytes(*x, *y)) << "layer " << i;
    }
}

TEST(BuiltinTrained, FingerprintCoversTheCheckpoint) {
    const auto recipe = *cc::find_builtin("toolcaller");
    const std::string text = cc::builtin_recipe_text(recipe);
    EXPECT_NE(text.find("checkpoint_sha256="), std::string::npos);
    EXPECT_EQ(cc::model_fingerprint(cc::resolve_model("builtin:toolcaller")), cc::sha256_hex(text));
    EXPECT_NE(text, cc::builtin_recipe_text(*cc::find_builtin("qwen3-test")));
}

// Its tokenizer is its own (tools/train_toolcaller/derive_tokenizer.py): Qwen3's byte-level BPE
// restricted to 24,576 rows. Where Qwen3's tokens of a text are all kept, the tokens are Qwen3's,
// renumbered; the derivation keeps every token of the evaluation sets, so their queries must come
// out token for token as Qwen3 cuts them.
TEST(BuiltinTrained, TokenizerIsQwen3sRestrictedAndTheDirectorysOwn) {
    const auto builtin = cc::load_model_tokenizer(cc::resolve_model("builtin:toolcaller"), std::nullopt);
    const auto dir = cc::load_model_tokenizer(cc::resolve_model(toolcaller_dir().string()), std::nullopt);
    const auto qwen3 = cc::Tokenizer::from_json(cc::embedded::qwen3_tokenizer_json(), "qwen3 tokenizer.json");
    const auto recipe = *cc::find_builtin("toolcaller");
    EXPECT_EQ(builtin.vocab_size(), size_t(recipe.config.vocab_size));
    EXPECT_LT(builtin.vocab_size(), qwen3.vocab_size() / 4);
    EXPECT_NE(cc::builtin_recipe_text(recipe).find("tokenizer_sha256="), std::string::npos);
    size_t n = 0;
    for (const char* file : {"tool_calls.jsonl", "tool_families.jsonl"}) {
        std::ifstream in(cc::test::source_dir() / "resources" / "eval" / file);
        std::string line;
        while (std::getline(in, line)) {
            const std::string text = "user\n" + nlohmann::json::parse(line)["query"].get<std::string>();
            const auto ids = builtin.encode(text);
            EXPECT_EQ(ids, dir.encode(text)) << text;
            std::vector<cc::token_id> renumbered;
            for (const auto id : qwen3.encode(text)) {
                const auto kept = builtin.token_to_id(qwen3.id_to_token(id));
                ASSERT_TRUE(kept.has_value()) << "Qwen3 token " << id << " of " << text << " was dropped";
                renumbered.push_back(*kept);
            }
            EXPECT_EQ(ids, renumbered) << text;
            EXPECT_EQ(builtin.decode(ids), qwen3.decode(qwen3.encode(text))) << text;
            ++n;
        }
    }
    EXPECT_EQ(n, 246u);   // 120 + 126 queries
}

TEST(BuiltinTrained, SameLogitsAsTheDirectoryAndCachedEqualsFull) {
    auto run = [](const std::string& spec) {
        cc::EngineOptions o;
        o.model_spec = spec;
        o.n_threads = 2;
        cc::Engine e(o);
        const auto& info = e.load_model();
        EXPECT_FALSE(info.synthetic_weights) << spec;
        e.set_tools(cc::ToolSet::from_file(cc::test::source_dir() / "resources" / "toolsets" / "tools_5.json"), "");
        cc::QueryOptions q;
        q.mode = cc::QueryMode::compare;
        q.max_new_tokens = 24;
        const auto r = e.query("What's the weather like in Oslo right now?", q);
        EXPECT_TRUE(r.identical.value_or(false)) << spec << ": cached != full";
        return r;
    };
    const auto builtin = run("builtin:toolcaller");
    const auto dir = run(toolcaller_dir().string());
    EXPECT_EQ(builtin.tokens, dir.tokens);
    ASSERT_EQ(builtin.step_logits.size(), dir.step_logits.size());
    for (size_t i = 0; i < dir.step_logits.size(); ++i) EXPECT_EQ(builtin.step_logits[i], dir.step_logits[i]) << "token " << i;
}

}  // namespace
