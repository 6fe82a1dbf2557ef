// contextcache-cli end to end: exit codes, JSON shape, and errors that name the file.
#include "core/base/machine_info.h"
#include "core/text/tool_set.h"
#include "tests/test_support.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <sstream>
#include <cstdio>
#include <fstream>
#include <sys/wait.h>

namespace {

using cc::test::run_cli;

std::string toolset(int n) { return (cc::test::source_dir() / "resources" / "toolsets" / ("tools_" + std::to_string(n) + ".json")).string(); }

// `version` names the commit the binary was built from, with no model loaded: the benchmarks
// record it as the binaries' commit.
TEST(Cli, VersionPrintsTheBuildCommit) {
    auto r = run_cli({"version"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, std::string(cc::build_commit()) + "\n");
    EXPECT_FALSE(std::string(cc::build_commit()).empty());
    r = run_cli({"--json", "version"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out).at("commit"), cc::build_commit());
    r = run_cli({"version", "--tools", "x.json"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--tools"), std::string::npos) << r.err;
}

TEST(Cli, HelpAndUsageErrors) {
    EXPECT_EQ(run_cli({"--help"}).exit_code, 0);
    auto r = run_cli({"frobnicate"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("unknown command \"frobnicate\""), std::string::npos) << r.err;
    r = run_cli({"tokenize", "--text", "a", "--bogus", "1"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("unknown option --bogus"), std::string::npos) << r.err;
    r = run_cli({"tokenize"});
    EXPECT_EQ(r.exit_code, 2);
    r = run_cli({"tokenize", "--text", "a", "--mode", "fancy"});
    EXPECT_EQ(r.exit_code, 2);
    // the remote tier's options are checked before anything connects
    r = run_cli({"--remote", "http://127.0.0.1:6379", "key", "--tools", toolset(5)});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--remote:"), std::string::npos) << r.err;
    r = run_cli({"--remote", "redis://127.0.0.1:1", "--remote-warm-mb", "-1", "key", "--tools", toolset(5)});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--remote-warm-mb"), std::string::npos) << r.err;
    r = run_cli({"--kv-warm-mb", "-1", "key", "--tools", toolset(5)});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--kv-warm-mb"), std::string::npos) << r.err;
    r = run_cli({"--kv-warm-fill", "lazy", "key", "--tools", toolset(5)});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--kv-warm-fill: \"lazy\""), std::string::npos) << r.err;
}

TEST(Cli, TokenizePlainAndTemplateOnTheBundledQwen3) {
    // builtin:qwen3-test has the bundled Qwen3 tokenizer (the default model has its own)
    auto r = run_cli({"--model", "builtin:qwen3-test", "tokenize", "--json", "--text", "<|im_end|>", "--mode", "template"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["ids"], nlohmann::json::array({151645}));
    r = run_cli({"--model", "builtin:qwen3-test", "tokenize", "--json", "--text", "<|im_end|>"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_GT(j["ids"].size(), 1u);
    for (const auto& id : j["ids"]) EXPECT_LT(id.get<int>(), 151643);
    // the default model, builtin:toolcaller, tokenizes with its own 24,576-row tokenizer
    r = run_cli({"tokenize", "--json", "--text", "<|im_end|>", "--mode", "template"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["ids"], nlohmann::json::array({24552}));
}

TEST(Cli, TokenizeJsonlBatch) {
    cc::test::TempDir dir;
    const auto in = dir.path() / "in.jsonl";
    std::ofstream(in) << "{\"text\": \"hello world\"}\n{\"text\": \"\"}\n{\"text\": \"héllo 世界\"}\n";
    auto r = run_cli({"tokenize", "--jsonl", in.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::string line;
    std::vector<nlohmann::json> outs;
    while (std::getline(lines, line)) outs.push_back(nlohmann::json::parse(line));
    ASSERT_EQ(outs.size(), 3u);
    EXPECT_EQ(outs[1]["ids"].size(), 0u);
    EXPECT_GT(outs[0]["ids"].size(), 0u);

    std::ofstream(in) << "{\"text\": \"ok\"}\nnot json\n";
    r = run_cli({"tokenize", "--jsonl", in.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(in.string() + ": line 2: invalid JSON"), std::string::npos) << r.err;
}

TEST(Cli, TokenizeWithTheStoriesFixture) {
    CC_REQUIRE_FIXTURE("stories260k");
    const auto dir = cc::test::fixture("stories260k").string();
    auto r = run_cli({"--model", dir, "tokenize", "--json", "--text", "Once upon a time", "--add-special-tokens"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["ids"], nlohmann::json::parse("[1,403,407,261,378]"));
    r = run_cli({"tokenize", "--json", "--tokenizer", dir + "/tokenizer.json", "--text", "Once upon a time"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["ids"], nlohmann::json::parse("[403,407,261,378]"));
}

TEST(Cli, KeyIsOrderInvariantAndSystemSensitive) {
    cc::test::TempDir dir;
    const std::string a = R"([{"name": "a", "parameters": {"type": "object"}}, {"name": "b"}])";
    const std::string b = R"([{"name": "b"}, {"name": "a", "parameters": {"type": "object"}}])";
    std::ofstream(dir.path() / "a.json") << a;
    std::ofstream(dir.path() / "b.json") << b;
    auto ra = run_cli({"key", "--json", "--tools", (dir.path() / "a.json").string()});
    auto rb = run_cli({"key", "--json", "--tools", (dir.path() / "b.json").string()});
    auto rs = run_cli({"key", "--json", "--tools", (dir.path() / "b.json").string(), "--system", "Be brief."});
    ASSERT_EQ(ra.exit_code, 0) << ra.err;
    const auto ja = nlohmann::json::parse(ra.out), jb = nlohmann::json::parse(rb.out), js = nlohmann::json::parse(rs.out);
    EXPECT_EQ(ja["tools_hash"], jb["tools_hash"]);
    EXPECT_EQ(ja["group_key"], jb["group_key"]);
    EXPECT_EQ(ja["n_tools"], 2);
    EXPECT_EQ(ja["tools_hash"], cc::ToolSet::from_json_text(a, "a").tools_hash());
    EXPECT_EQ(js["tools_hash"], jb["tools_hash"]);
    EXPECT_NE(js["group_key"], jb["group_key"]);
}

TEST(Cli, KvWidthDefaultsToF32OnTheCpuAndBf16ForTheServer) {
    // The KV width a command gets when --kv-dtype is not given: F32 for the research commands on
    // the CPU, BF16 for `serve` (and on the GPU, which this test can only reach where a device is).
    auto numerics = [](std::vector<std::string> args) {
        auto r = run_cli(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return r.exit_code == 0 ? nlohmann::json::parse(r.out)["backend_numerics"].get<std::string>() : std::string();
    };
    const std::vector<std::string> key{"--model", "builtin:qwen3-test", "--backend", "cpu", "key", "--json", "--tools", toolset(5)};
    auto with = [&](std::vector<std::string> more) {
        std::vector<std::string> a = key;
        a.insert(a.end(), more.begin(), more.end());
        return a;
    };
    const std::string cpu = numerics(key);
    EXPECT_EQ(cpu.rfind("cpu/", 0), 0u) << cpu;
    EXPECT_NE(cpu.find("/f32"), std::string::npos) << cpu;
    const std::string serve = numerics(with({"--serve"}));
    EXPECT_NE(serve.find("/bf16"), std::string::npos) << serve;
    const std::string given = numerics(with({"--serve", "--kv-dtype", "f32"}));
    EXPECT_EQ(given.find("/bf16/"), std::string::npos) << given;
    EXPECT_NE(given.find("/f32"), std::string::npos) << given;
}

TEST(Cli, BadToolsFileExitsOneNamingTheFile) {
    cc::test::TempDir dir;
    const auto path = dir.path() / "tools.json";
    std::ofstream(path) << R"([{"name": "get_wheather", "parameters": "city"}])";
    auto r = run_cli({"key", "--tools", path.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(path.string() + ": tool 0 (\"get_wheather\"): \"parameters\" must be an object"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line on stderr: " << r.err;
    r = run_cli({"key", "--tools", (dir.path() / "missing.json").string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("missing.json: cannot read"), std::string::npos) << r.err;
}

TEST(Cli, BadModelDirectoryExitsOne) {
    cc::test::TempDir dir;
    auto r = run_cli({"--model", dir.path().string(), "info"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("config.json: missing"), std::string::npos) << r.err;
    std::ofstream(dir.path() / "config.json") << "{ not json";
    r = run_cli({"--model", dir.path().string(), "info"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("config.json: invalid JSON"), std::string::npos) << r.err;
    r = run_cli({"--model", "builtin:nope", "info"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("builtin:nope: unknown built-in model"), std::string::npos) << r.err;
}

TEST(Cli, RenderSplitsExactly) {
    if (!std::filesystem::exists(toolset(20))) GTEST_SKIP() << "sample tool sets absent";
    auto r = run_cli({"render", "--json", "--tools", toolset(20), "--query", "What's the weather in Paris?", "--system",
                      "You are helpful."});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    auto full = j["prefix_ids"].get<std::vector<int>>();
    const auto suffix = j["suffix_ids"].get<std::vector<int>>();
    full.insert(full.end(), suffix.begin(), suffix.end());
    EXPECT_EQ(full, j["full_ids"].get<std::vector<int>>());
    EXPECT_EQ(j["chat_format"], "qwen3");
    EXPECT_TRUE(j["prefix_text"].get<std::string>().starts_with("<|im_start|>system\nYou are helpful.\n\n# Tools"));
    EXPECT_TRUE(j["prefix_text"].get<std::string>().ends_with("<|im_end|>\n"));
    EXPECT_TRUE(j["suffix_text"].get<std::string>().starts_with("<|im_start|>user\nWhat's the weather in Paris?<|im_end|>"));
    EXPECT_GT(j["prefix_tokens"].get<int>(), 1500);
}

TEST(Cli, InfoReportsCudaCleanly) {
    auto r = run_cli({"info", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["model"], "builtin:toolcaller");   // the CLI's default: it carries the trained model
    EXPECT_EQ(j["synthetic_weights"], false);
    EXPECT_EQ(j["chat_format"], "qwen3");
    EXPECT_EQ(j["fingerprint"].get<std::string>().size(), 64u);
    EXPECT_TRUE(j["cuda"].contains("available"));
    EXPECT_NE(j["note"].get<std::string>().find("trained here"), std::string::npos);
    EXPECT_EQ(j["cache"]["persistent"], true);
    r = run_cli({"--model", "builtin:qwen3-demo", "info", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_NE(j["note"].get<std::string>().find("synthetic"), std::string::npos);
}

// ---- engine commands ------------------------------------------------------------------------

TEST(Cli, ToolChoiceForcesACallAndNamesAToolThatIsNotOffered) {
    auto r = run_cli({"--model", "builtin:qwen3-test", "--json", "query", "--tools", toolset(5), "--query", "hi",
                      "--mode", "compare", "--max-new-tokens", "20", "--tool-choice", "send_email"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["identical"], true);
    EXPECT_EQ(j["tool_call"]["name"], "send_email") << j["text"];
    EXPECT_GT(j["forced_tokens"].get<int>(), 0);
    r = run_cli({"--model", "builtin:qwen3-test", "--json", "query", "--tools", toolset(5), "--query", "hi",
                 "--max-new-tokens", "20", "--tool-choice", "required"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["tool_call"].is_object()) << j["text"];
    r = run_cli({"--model", "builtin:qwen3-test", "query", "--tools", toolset(5), "--query", "hi", "--tool-choice",
                 "launch_rocket"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("launch_rocket"), std::string::npos) << r.err;
}

TEST(Cli, QueryCompareIsIdenticalAndReportsTheTimingSplit) {
    cc::test::TempDir cache;  // its own, so that the first query compiles whatever ran before in this process
    auto r = run_cli({"--model", "builtin:qwen3-test", "--cache-dir", cache.path().string(), "--json", "query",
                      "--tools", toolset(5), "--query", "Weather in Oslo?", "--mode", "compare", "--max-new-tokens",
                      "4", "--ignore-eos", "--repeat", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["identical"], true);
    EXPECT_TRUE(j["first_difference"].is_null());
    EXPECT_EQ(j["max_abs_logit_diff"], 0.0);
    // The first query of this process compiled the group (a fresh cache): inside its TTFT.
    EXPECT_EQ(j["cache_hit"], false);
    EXPECT_EQ(j["tier"], "miss");
    EXPECT_GT(j["timings"]["compile_ms"].get<double>(), 0.0);
    EXPECT_EQ(j["prefilled_tokens"], j["prompt_tokens"]);
    EXPECT_EQ(j["runs"][1]["cache_hit"], true);
    EXPECT_EQ(j["runs"][1]["tier"], "memory");
    EXPECT_EQ(j["runs"][1]["group_reused_tokens"], j["prefix_tokens"]);
    EXPECT_EQ(j["compile"]["tier"], "miss");
    EXPECT_EQ(j["generated_tokens"], 4);
    EXPECT_EQ(j["tokens"], j["full"]["tokens"]);
    EXPECT_EQ(j["runs"].size(), 2u);
    EXPECT_EQ(j["compile"]["n_tools"], 5);
    EXPECT_EQ(j["compile"]["group_key"], j["group_key"]);
    for (const char* k : {"tokenize_ms", "lookup_ms", "disk_load_ms", "upload_ms", "link_ms", "prefill_ms", "ttft_ms",
                          "decode_ms", "total_ms", "prefill_tok_s", "decode_tok_s", "disk_load_gb_s"})
        EXPECT_TRUE(j["timings"][k].is_number()) << k;
}

TEST(Cli, ChatEachTurnIsExactAndReusesTheTurnsBefore) {
    cc::test::TempDir dir;
    const auto messages = dir.path() / "chat.json";
    {
        std::ofstream f(messages);
        f << R"({"messages": [
          {"role": "system", "content": "You are terse."},
          {"role": "user", "content": "Weather in Oslo?"},
          {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
          {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 4}"},
          {"role": "assistant", "content": "4 degrees."},
          {"role": "user", "content": "Thanks"}]})";
    }
    auto r = run_cli({"--model", "builtin:qwen3-test", "--json", "chat", "--tools", toolset(5), "--messages",
                      messages.string(), "--each-turn", "--mode", "compare", "--max-new-tokens", "3", "--ignore-eos"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["turns"].size(), 3u);
    size_t previous = 0;
    for (const auto& t : j["turns"]) {
        EXPECT_EQ(t["identical"], true);
        EXPECT_EQ(t["prompt_tokens"].get<size_t>(), t["group_reused_tokens"].get<size_t>() +
                                                        t["conversation_reused_tokens"].get<size_t>() +
                                                        t["prefilled_tokens"].get<size_t>());
        const size_t reused = t["group_reused_tokens"].get<size_t>() + t["conversation_reused_tokens"].get<size_t>();
        if (&t != &j["turns"][0]) {
            EXPECT_GT(reused, previous);
            EXPECT_EQ(t["conversation_tier"], "memory");
        }
        previous = reused;
        EXPECT_TRUE(t["reply"]["tool_calls"].is_array());
    }

    // A bad message names its path; exit 1.
    {
        std::ofstream f(messages);
        f << R"([{"role": "user", "content": 5}])";
    }
    auto bad = run_cli({"--model", "builtin:qwen3-test", "chat", "--tools", toolset(5), "--messages", messages.string()});
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("messages[0].content"), std::string::npos) << bad.err;
    EXPECT_EQ(run_cli({"chat", "--tools", toolset(5)}).exit_code, 2) << "neither --messages nor -i";
}

TEST(Cli, InteractiveChatReadsTurnsFromStdin) {
    cc::test::TempDir cache;
    const std::string cmd = "printf 'hello\\nagain\\n/quit\\n' | XDG_CACHE_HOME=" + cc::test::shell_quote(cache.path().string()) + " " +
                            cc::test::shell_quote(cc::test::cli_path().string()) + " --model builtin:qwen3-test --json chat -i --tools " + cc::test::shell_quote(toolset(5)) +
                            " --max-new-tokens 2 --ignore-eos 2>/dev/null";
    FILE* pipe = popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
    ASSERT_EQ(pclose(pipe), 0);
    std::istringstream lines(out);
    std::string line;
    std::vector<nlohmann::json> turns;
    while (std::getline(lines, line))
        if (!line.empty()) turns.push_back(nlohmann::json::parse(line));
    // Two user turns (a tool call in between would ask for a result; with 2 tokens none parses).
    ASSERT_GE(turns.size(), 2u);
    EXPECT_EQ(turns[0]["turn"], 1);
    EXPECT_GT(turns[1]["conversation_reused_tokens"].get<size_t>(), 0u);
}

TEST(Cli, AQueryAfterACompileInAnotherProcessReportsTheDiskLoadInsideItsTtft) {
    auto compile = run_cli({"--model", "builtin:qwen3-test", "--json", "compile", "--tools", toolset(10)});
    ASSERT_EQ(compile.exit_code, 0) << compile.err;
    EXPECT_EQ(nlohmann::json::parse(compile.out)["tier"], "miss");
    auto query = run_cli({"--model", "builtin:qwen3-test", "--json", "query", "--tools", toolset(10), "--query", "hi",
                          "--max-new-tokens", "2"});
    ASSERT_EQ(query.exit_code, 0) << query.err;
    const auto j = nlohmann::json::parse(query.out);
    EXPECT_EQ(j["tier"], "disk");
    EXPECT_EQ(j["cache_hit"], true);
    EXPECT_GT(j["timings"]["disk_load_ms"].get<double>(), 0.0);
    EXPECT_GE(j["timings"]["ttft_ms"].get<double>(), j["timings"]["disk_load_ms"].get<double>());
    EXPECT_EQ(j["compile"]["tier"], "disk");
}

TEST(Cli, KeyMatchesTheGroupKeyTheEngineCompiles) {
    auto key = run_cli({"--model", "builtin:qwen3-test", "--json", "key", "--tools", toolset(5), "--system", "S"});
    auto compile = run_cli({"--model", "builtin:qwen3-test", "--json", "compile", "--tools", toolset(5), "--system", "S"});
    ASSERT_EQ(key.exit_code, 0) << key.err;
    ASSERT_EQ(compile.exit_code, 0) << compile.err;
    const auto k = nlohmann::json::parse(key.out), c = nlohmann::json::parse(compile.out);
    EXPECT_EQ(k["group_key"], c["group_key"]);
    EXPECT_EQ(c["tier"], "miss");
    EXPECT_GT(c["kv_bytes"].get<double>(), 0);
    EXPECT_GT(c["prefix_tokens"].get<int>(), 500);
}

TEST(Cli, WhyExplainsAMissAgainstTheStoredGroups) {
    cc::test::TempDir dir;
    const std::string cache = (dir.path() / "cache").string();
    auto cli = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {"--model", "builtin:qwen3-test", "--backend", "cpu", "--cache-dir", cache});
        return run_cli(args);
    };
    // nothing stored yet
    auto r = cli({"--json", "why", "--tools", toolset(5)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["cached"], false);
    EXPECT_EQ(j["tier"], "miss");
    EXPECT_EQ(j["miss_reason"]["n_stored"], 0);
    EXPECT_EQ(j["miss_reason"]["nearest"].size(), 0u);

    r = cli({"--json", "compile", "--tools", toolset(5)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto compiled = nlohmann::json::parse(r.out);
    EXPECT_EQ(compiled["miss_reason"]["nearest"].size(), 0u);
    const std::string key = compiled["group_key"];
    r = cli({"--json", "why", "--tools", toolset(5)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["group_key"], key);
    EXPECT_EQ(j["cached"], true);
    EXPECT_EQ(j["tier"], "disk");
    EXPECT_TRUE(j["miss_reason"].is_null());

    // an edited set: one tool dropped, one enum changed
    auto tools = nlohmann::ordered_json::parse(cc::test::read_file(toolset(5)));
    nlohmann::ordered_json edited = nlohmann::ordered_json::array();
    for (auto t : tools) {
        if (t["function"]["name"] == "send_email") continue;
        if (t["function"]["name"] == "get_current_weather")
            t["function"]["parameters"]["properties"]["units"]["enum"] = {"metric", "imperial", "kelvin"};
        edited.push_back(t);
    }
    const std::string edited_path = (dir.path() / "edited.json").string();
    std::ofstream(edited_path) << edited.dump();
    r = cli({"--json", "why", "--tools", edited_path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["cached"], false);
    ASSERT_EQ(j["miss_reason"]["nearest"].size(), 1u) << r.out;
    const auto n = j["miss_reason"]["nearest"][0];
    EXPECT_EQ(n["group_key"], key);
    EXPECT_EQ(n["tier"], "disk");
    EXPECT_EQ(n["tools_removed"], nlohmann::json::array({"send_email"}));
    EXPECT_EQ(n["tools_added"].size(), 0u);
    ASSERT_EQ(n["tools_changed"].size(), 1u);
    EXPECT_EQ(n["tools_changed"][0]["name"], "get_current_weather");
    EXPECT_EQ(n["tools_changed"][0]["field"], "parameters.properties.units.enum");
    EXPECT_EQ(n["system_prompt_changed"], false);
    // reusable tokens: the common prefix of the two rendered prefixes
    auto prefix = [&](const std::string& file) {
        auto rr = cli({"--json", "render", "--tools", file, "--query", "q"});
        EXPECT_EQ(rr.exit_code, 0) << rr.err;
        return nlohmann::json::parse(rr.out)["prefix_ids"].get<std::vector<int>>();
    };
    const auto a = prefix(toolset(5));
    const auto b = prefix(edited_path);
    size_t common = 0;
    while (common < a.size() && common < b.size() && a[common] == b[common]) ++common;
    EXPECT_EQ(n["reusable_tokens"], common);
    EXPECT_EQ(n["prefix_tokens"], a.size());
    EXPECT_EQ(j["prefix_tokens"], b.size());

    // human text; and the system prompt
    r = cli({"why", "--tools", edited_path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("-send_email, ~get_current_weather (parameters.properties.units.enum)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::to_string(common) + " of " + std::to_string(b.size()) + " prefix tokens reusable"),
              std::string::npos) << r.out;
    r = cli({"--json", "why", "--tools", toolset(5), "--system", "Another prompt."});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["miss_reason"]["nearest"][0]["system_prompt_changed"], true);
    EXPECT_EQ(j["miss_reason"]["nearest"][0]["tools_changed"].size(), 0u);

    // compiling the edited set (in a copy of the cache, for the human text) reuses exactly the
    // common prefix and says how much of the prefix that is
    const auto copy = dir.path() / "cache_copy";
    std::filesystem::copy(cache, copy, std::filesystem::copy_options::recursive);
    r = run_cli({"--model", "builtin:qwen3-test", "--backend", "cpu", "--cache-dir", copy.string(), "compile", "--tools",
                 edited_path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    char percent[32];
    std::snprintf(percent, sizeof percent, "%.1f%%", 100.0 * double(common) / double(b.size()));
    EXPECT_NE(r.out.find(std::to_string(common) + " of " + std::to_string(b.size()) + " prefix tokens reused (" + percent + ")"),
              std::string::npos) << r.out;

    // compiling the edited set reports the same reason in its CompileResult
    r = cli({"--json", "compile", "--tools", edited_path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["tier"], "miss");
    EXPECT_EQ(j["reused_tokens"], common);
    EXPECT_EQ(j["miss_reason"]["nearest"][0]["group_key"], key);
    EXPECT_EQ(j["miss_reason"]["nearest"][0]["reusable_tokens"], common);

    EXPECT_EQ(cli({"why"}).exit_code, 2);
}

TEST(Cli, GenerateOnTheStoriesFixtureMatchesTheReference) {
    CC_REQUIRE_FIXTURE("stories260k");
    const auto dir = cc::test::fixture("stories260k");
    const auto ref = nlohmann::json::parse(cc::test::read_file(dir / "reference.json"))["cases"][0];
    std::string ids;
    for (const auto& id : ref["input_ids"]) ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int>());
    auto r = run_cli({"--model", dir.string(), "--json", "generate", "--prompt-ids", ids, "--max-new-tokens", "64",
                      "--ignore-eos"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["ids"], ref["generated_ids"]);
    // --prompt applies the tokenizer's BOS, like the reference.
    r = run_cli({"--model", dir.string(), "--json", "generate", "--prompt", ref["prompt"].get<std::string>(),
                 "--max-new-tokens", "64", "--ignore-eos"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["prompt_ids"], ref["input_ids"]);
    EXPECT_EQ(j["ids"], ref["generated_ids"]);
    EXPECT_TRUE(j["text"].get<std::string>().starts_with(", there was a little girl named Lily")) << j["text"];

    r = run_cli({"--model", dir.string(), "--json", "logits", "--prompt-ids", ids});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["logits"].size(), 512u);
    for (const auto& top : ref["top5_first_logits"])
        EXPECT_NEAR(j["logits"][top["id"].get<size_t>()].get<double>(), top["logit"].get<double>(), 1e-3);
}

TEST(Cli, WeightsOnlyDirectoryWorksWithTokenIds) {
    CC_REQUIRE_FIXTURE("stories260k");
    cc::test::TempDir dir;
    for (const char* f : {"config.json", "model.safetensors"})
        std::filesystem::copy_file(cc::test::fixture("stories260k") / f, dir.path() / f);
    auto r = run_cli({"--model", dir.path().string(), "--json", "generate", "--prompt-ids", "1,403,407,261,378",
                      "--max-new-tokens", "3"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["ids"], nlohmann::json::parse("[432, 383, 286]"));
    // --repeat: each run from an empty KV, the same greedy ids, its own timings
    r = run_cli({"--model", dir.path().string(), "--json", "generate", "--prompt-ids", "1,403,407,261,378",
                 "--max-new-tokens", "3", "--repeat", "3"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto runs = nlohmann::json::parse(r.out)["runs"];
    ASSERT_EQ(runs.size(), 3u);
    for (const auto& run : runs) {
        EXPECT_EQ(run["ids"], nlohmann::json::parse("[432, 383, 286]"));
        EXPECT_GT(run["timings"]["prefill_ms"].get<double>(), 0.0);
    }
    r = run_cli({"--model", dir.path().string(), "generate", "--prompt", "Once"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("no tokenizer"), std::string::npos) << r.err;
    r = run_cli({"--model", dir.path().string(), "--json", "info"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["has_tokenizer"], false);
}

TEST(Cli, DamagedWeightsExitOneNamingTheFileAndTensor) {
    CC_REQUIRE_FIXTURE("stories260k");
    cc::test::TempDir dir;
    std::filesystem::copy_file(cc::test::fixture("stories260k") / "config.json", dir.path() / "config.json");
    auto bytes = cc::test::read_file(cc::test::fixture("stories260k") / "model.safetensors");
    bytes.resize(bytes.size() / 2);  // truncated
    std::ofstream(dir.path() / "model.safetensors", std::ios::binary) << bytes;
    auto r = run_cli({"--model", dir.path().string(), "logits", "--prompt-ids", "1"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("model.safetensors"), std::string::npos) << r.err;
    r = run_cli({"--model", "builtin:qwen3-test", "logits", "--prompt-ids", "1,999999999"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("999999999"), std::string::npos) << r.err;
    r = run_cli({"--model", "builtin:qwen3-test", "logits", "--prompt-ids", "1,x"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
}

TEST(Cli, ExportWritesALoadableCheckpoint) {
    cc::test::TempDir dir;
    const auto out = dir.path() / "qwen3-test";
    auto r = run_cli({"--model", "builtin:qwen3-test", "export", "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto a = run_cli({"--model", "builtin:qwen3-test", "--json", "logits", "--prompt-ids", "9707,1879"});
    auto b = run_cli({"--model", out.string(), "--json", "logits", "--prompt-ids", "9707,1879"});
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(nlohmann::json::parse(a.out)["logits"], nlohmann::json::parse(b.out)["logits"]);
    r = run_cli({"--model", "builtin:qwen3-test", "export", "--out", out.string()});
    EXPECT_EQ(r.exit_code, 1);  // not empty: nothing is overwritten
}

}  // namespace
