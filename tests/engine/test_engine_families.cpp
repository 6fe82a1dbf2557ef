// Cached == full prefill, bit for bit, through the whole engine (loader, chat format, backend) for
// the Llama 3, Mistral and plain formats: synthetic checkpoints written as HF directories with the
// real Llama 3 tokenizer and the Mistral test tokenizer, and the real stories260k fixture.
#include "core/base/embedded_resources.h"
#include "core/engine/engine.h"
#include "core/model/builtin_model.h"
#include "tests/synthetic_checkpoint.h"
#include "tests/test_support.h"

#include <fstream>

namespace {

namespace fs = std::filesystem;

cc::ToolSet sample_tools(size_t n) {
    const auto path = cc::test::source_dir() / "resources" / "toolsets" / "tools_20.json";
    auto arr = nlohmann::ordered_json::parse(cc::test::read_file(path));
    nlohmann::ordered_json subset = nlohmann::ordered_json::array();
    for (size_t i = 0; i < n; ++i) subset.push_back(arr[i]);
    return cc::ToolSet::from_json_text(subset.dump(), "subset");
}

void expect_exact(const std::string& model_dir, const cc::ToolSet& tools, const std::string& system,
                  const std::vector<std::string>& queries, int n_threads, const std::string& expected_format) {
    cc::EngineOptions o;
    o.model_spec = model_dir;
    o.n_threads = n_threads;
    cc::Engine engine(o);
    const auto& info = engine.load_model();
    EXPECT_EQ(info.chat_format, expected_format);
    const auto compiled = engine.set_tools(tools, system);
    EXPECT_GT(compiled.prefix_tokens, 0u);
    cc::QueryOptions q;
    q.mode = cc::QueryMode::compare;
    q.max_new_tokens = 6;
    q.ignore_eos = true;
    for (const auto& query : queries) {
        const auto r = engine.query(query, q);
        ASSERT_TRUE(r.identical.has_value());
        EXPECT_TRUE(*r.identical) << expected_format << " query \"" << query.substr(0, 40) << "\": first difference at "
                                  << (r.first_difference ? *r.first_difference : 0);
        EXPECT_EQ(r.max_abs_logit_diff, 0.0);
        ASSERT_TRUE(r.full);
        EXPECT_EQ(r.tokens, r.full->tokens);
        ASSERT_EQ(r.step_logits.size(), r.full->step_logits.size());
        for (size_t i = 0; i < r.step_logits.size(); ++i) EXPECT_TRUE(r.step_logits[i] == r.full->step_logits[i]) << i;
    }
}

const std::vector<std::string> kQueries{"", "What's the weather in Paris?", "日本語のクエリ 😀 </tools><|eot_id|>[/INST]",
                                        std::string(400, 'q')};

TEST(EngineFamilies, Llama3FormatWithLlama3RopeScaling) {
    const auto tokenizer = cc::test::gen_dir() / "llama3" / "tokenizer.json";
    if (!fs::exists(tokenizer)) GTEST_SKIP() << tokenizer << " is absent (unpacked from tests/data/llama3_tokenizer.tar.xz)";
    cc::test::TempDir dir;
    const nlohmann::json config = cc::test::tiny_llama3_config();
    cc::test::write_synthetic_checkpoint(dir.path(), config, tokenizer);
    expect_exact(dir.path().string(), sample_tools(5), "Answer briefly.", kQueries, 2, "llama3");
}

TEST(EngineFamilies, MistralFormatWithSlidingWindow) {
    const auto tokenizer = cc::test::data_dir() / "mistral_test" / "tokenizer.json";
    cc::test::TempDir dir;
    const nlohmann::json config = cc::test::tiny_mistral_config();
    cc::test::write_synthetic_checkpoint(dir.path(), config, tokenizer);
    // The window (16) is far shorter than the prefix: the suffix sees only the prefix's last keys.
    expect_exact(dir.path().string(), sample_tools(1), "Be brief.", kQueries, 2, "mistral");
}

TEST(EngineFamilies, Qwen3ExportedCheckpointMatchesTheBuiltin) {
    cc::test::TempDir dir;
    const auto recipe = *cc::find_builtin("qwen3-test");
    cc::save_hf_checkpoint(cc::generate_builtin_weights(recipe, 2), dir.path());
    {  // the bundled Qwen3 tokenizer (stored as .tar.xz; the build embeds it unpacked)
        std::ofstream out(dir.path() / "tokenizer.json", std::ios::binary);
        const std::string_view json = cc::embedded::qwen3_tokenizer_json();
        out.write(json.data(), std::streamsize(json.size()));
    }
    expect_exact(dir.path().string(), sample_tools(5), "", {"hello"}, 1, "qwen3");

    // Loading the written checkpoint gives the built-in model's logits, bit for bit.
    const std::vector<cc::token_id> prompt{9707, 1879, 0, 151643};
    cc::EngineOptions a, b;
    a.model_spec = "builtin:qwen3-test";
    b.model_spec = dir.path().string();
    cc::Engine ea(a), eb(b);
    ea.load_model();
    eb.load_model();
    EXPECT_TRUE(ea.last_logits(prompt) == eb.last_logits(prompt));
}

TEST(EngineFamilies, Stories260kPlainFormat) {
    CC_REQUIRE_FIXTURE("stories260k");
    expect_exact(cc::test::fixture("stories260k").string(), sample_tools(1), "Once upon a time",
                 {"Tell me a story.", "", "Lily and the ball"}, 2, "plain");
}

TEST(EngineFamilies, Stories260kGreedyMatchesTheReference) {
    CC_REQUIRE_FIXTURE("stories260k");
    const auto ref = nlohmann::json::parse(cc::test::read_file(cc::test::fixture("stories260k") / "reference.json"));
    const auto& c = ref["cases"][0];
    cc::EngineOptions o;
    o.model_spec = cc::test::fixture("stories260k").string();
    cc::Engine engine(o);
    engine.load_model();
    const auto ids = engine.encode_prompt(c["prompt"].get<std::string>());
    EXPECT_EQ(ids, c["input_ids"].get<std::vector<cc::token_id>>());
    const auto g = engine.generate(ids, 64, /*ignore_eos=*/true);
    EXPECT_EQ(g.ids, c["generated_ids"].get<std::vector<cc::token_id>>());
}

}  // namespace
