// builtin:toolcaller, the trained model embedded in the program: the same config, the same weight
// bytes and the same logits as loading its directory (resources/models/toolcaller), and the
// metadata of a trained (not synthetic) model.
#include "core/engine/engine.h"
#include "core/base/sha256.h"
#include "core/model/builtin_model.h"
#include "core/model/model_spec.h"
#include "core/model/weights.h"
#include "tests/test_support.h"

#include <cstring>

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
