// contextcache-cli end to end: exit codes, JSON shape, and errors that name the file.
#include "core/tool_set.h"
#include "tests/test_support.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <sstream>
#include <cstdio>
#include <fstream>
#include <sys/wait.h>

namespace {

struct RunResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

RunResult run_cli(const std::vector<std::string>& args) {
    static cc::test::TempDir tmp;
    const auto err_path = tmp.path() / "stderr.txt";
    std::string cmd = shell_quote(cc::test::cli_path().string());
    for (const auto& a : args) cmd += " " + shell_quote(a);
    cmd += " 2>" + shell_quote(err_path.string());
    RunResult r;
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = cc::test::read_file(err_path);
    return r;
}

std::string toolset(int n) { return (cc::test::source_dir() / "resources" / "toolsets" / ("tools_" + std::to_string(n) + ".json")).string(); }

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
}

TEST(Cli, TokenizePlainAndTemplateOnTheBundledQwen3) {
    auto r = run_cli({"tokenize", "--json", "--text", "<|im_end|>", "--mode", "template"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["ids"], nlohmann::json::array({151645}));
    r = run_cli({"tokenize", "--json", "--text", "<|im_end|>"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_GT(j["ids"].size(), 1u);
    for (const auto& id : j["ids"]) EXPECT_LT(id.get<int>(), 151643);
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
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["chat_format"], "qwen3");
    EXPECT_EQ(j["fingerprint"].get<std::string>().size(), 64u);
    EXPECT_TRUE(j["cuda"].contains("available"));
    EXPECT_NE(j["note"].get<std::string>().find("synthetic"), std::string::npos);
}

}  // namespace
