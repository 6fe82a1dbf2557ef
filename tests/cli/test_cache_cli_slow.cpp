// The persistent cache across real processes: restart persistence, concurrent compiles of the same
// group, eight processes doing mixed compile/query/gc, a compile killed with SIGKILL, and the
// `cache` commands. Every answer must equal a full prefill (compare mode) and `cache verify` must
// be clean afterwards.
#include "tests/test_support.h"

#include <nlohmann/json.hpp>

#include <array>
#include <fstream>
#include <set>
#include <csignal>
#include <cstdio>
#include <future>
#include <sys/wait.h>
#include <thread>

namespace {

namespace fs = std::filesystem;

struct CliRun {
    int exit_code = -1;
    std::string out;
};

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

CliRun cli(const fs::path& cache_dir, const std::vector<std::string>& args) {
    std::string cmd = quote(cc::test::cli_path().string()) + " --model builtin:qwen3-test --cache-dir " + quote(cache_dir.string());
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " 2>&1";
    CliRun r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int st = pclose(p);
    r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

// The last line of the output is the JSON object (warnings, if any, come before it on stderr).
nlohmann::json last_json(const std::string& out) {
    const auto end = out.find_last_not_of('\n');
    const auto start = out.rfind('\n', end);
    return nlohmann::json::parse(out.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1)));
}

std::string toolset(int n) { return (cc::test::source_dir() / "resources" / "toolsets" / ("tools_" + std::to_string(n) + ".json")).string(); }

std::vector<std::string> visible_group_files(const fs::path& cache_dir) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(cache_dir / "groups", ec))
        if (f.is_regular_file() && !f.path().filename().string().starts_with(".")) names.push_back(f.path().filename().string());
    return names;
}

TEST(CacheCli, ACompileIsADiskHitForTheNextProcess) {
    cc::test::TempDir dir;
    auto c = cli(dir.path(), {"--json", "compile", "--tools", toolset(5), "--system", "S"});
    ASSERT_EQ(c.exit_code, 0) << c.out;
    const auto cj = last_json(c.out);
    EXPECT_EQ(cj["tier"], "miss");
    EXPECT_EQ(cj["persisted"], true);
    auto q = cli(dir.path(), {"--json", "query", "--tools", toolset(5), "--system", "S", "--query", "hi", "--mode",
                              "compare", "--max-new-tokens", "3", "--ignore-eos"});
    ASSERT_EQ(q.exit_code, 0) << q.out;
    const auto qj = last_json(q.out);
    EXPECT_EQ(qj["compile"]["tier"], "disk");
    EXPECT_EQ(qj["compile"]["cache_hit"], true);
    EXPECT_EQ(qj["identical"], true);

    auto ls = cli(dir.path(), {"--json", "cache", "ls"});
    ASSERT_EQ(ls.exit_code, 0) << ls.out;
    const auto lj = last_json(ls.out);
    ASSERT_EQ(lj["groups"].size(), 1u);
    EXPECT_EQ(lj["groups"][0]["group_key"], cj["group_key"]);
    EXPECT_EQ(lj["groups"][0]["n_tokens"], cj["prefix_tokens"]);
    EXPECT_GE(lj["groups"][0]["hits"].get<int>(), 1);
    EXPECT_EQ(cli(dir.path(), {"cache", "verify"}).exit_code, 0);
    EXPECT_EQ(cli(dir.path(), {"cache", "rm", cj["group_key"].get<std::string>()}).exit_code, 0);
    EXPECT_TRUE(visible_group_files(dir.path()).empty());
    EXPECT_EQ(cli(dir.path(), {"cache", "rm", cj["group_key"].get<std::string>()}).exit_code, 1);
    EXPECT_EQ(cli(dir.path(), {"cache", "rm", "nothex"}).exit_code, 2);
}

TEST(CacheCli, VerifyReportsAndQuarantinesADamagedFile) {
    cc::test::TempDir dir;
    auto c = cli(dir.path(), {"--json", "compile", "--tools", toolset(5)});
    ASSERT_EQ(c.exit_code, 0) << c.out;
    const auto key = last_json(c.out)["group_key"].get<std::string>();
    const auto file = dir.path() / "groups" / (key + ".kv");
    {
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-100, std::ios::end);
        f.put('\x7f');
    }
    auto v = cli(dir.path(), {"--json", "cache", "verify"});
    EXPECT_EQ(v.exit_code, 1) << v.out;
    const auto vj = last_json(v.out);
    ASSERT_EQ(vj["problems"].size(), 1u);
    EXPECT_NE(vj["problems"][0].get<std::string>().find(key), std::string::npos);
    EXPECT_FALSE(fs::exists(file));
    EXPECT_EQ(cli(dir.path(), {"cache", "verify"}).exit_code, 0);
}

TEST(CacheCli, TwoProcessesCompilingTheSameGroupLeaveOneValidFile) {
    cc::test::TempDir dir;
    std::vector<std::future<CliRun>> runs;
    for (int i = 0; i < 2; ++i)
        runs.push_back(std::async(std::launch::async, [&] { return cli(dir.path(), {"--json", "compile", "--tools", toolset(10)}); }));
    std::set<std::string> keys;
    for (auto& r : runs) {
        const CliRun run = r.get();
        ASSERT_EQ(run.exit_code, 0) << run.out;
        keys.insert(last_json(run.out)["group_key"].get<std::string>());
    }
    EXPECT_EQ(keys.size(), 1u);
    EXPECT_EQ(visible_group_files(dir.path()).size(), 1u);
    EXPECT_EQ(cli(dir.path(), {"cache", "verify"}).exit_code, 0);
}

TEST(CacheCli, EightProcessesMixedCompileQueryGc) {
    cc::test::TempDir dir;
    std::vector<std::future<std::vector<CliRun>>> workers;
    for (int w = 0; w < 8; ++w) {
        workers.push_back(std::async(std::launch::async, [&, w] {
            std::vector<CliRun> out;
            for (int i = 0; i < 3; ++i) {
                const std::string system = "system " + std::to_string((w + i) % 3);
                if (w == 7 && i == 1) {
                    out.push_back(cli(dir.path(), {"--json", "cache", "gc", "--max-bytes", "1"}));
                } else if ((w + i) % 2) {
                    out.push_back(cli(dir.path(), {"--json", "compile", "--tools", toolset(5), "--system", system}));
                } else {
                    out.push_back(cli(dir.path(), {"--json", "query", "--tools", toolset(5), "--system", system, "--query",
                                                   "q" + std::to_string(w), "--mode", "compare", "--max-new-tokens", "2",
                                                   "--ignore-eos"}));
                }
            }
            return out;
        }));
    }
    int n_queries = 0;
    for (auto& w : workers) {
        for (const auto& r : w.get()) {
            ASSERT_EQ(r.exit_code, 0) << r.out;
            const auto j = last_json(r.out);
            if (j.contains("identical")) {
                EXPECT_EQ(j["identical"], true) << r.out;
                ++n_queries;
            }
        }
    }
    EXPECT_GT(n_queries, 6);
    const auto v = cli(dir.path(), {"--json", "cache", "verify"});
    EXPECT_EQ(v.exit_code, 0) << v.out;
    EXPECT_LE(visible_group_files(dir.path()).size(), 3u);
}

TEST(CacheCli, ACompileKilledWithSigkillLeavesNoPartialFile) {
    cc::test::TempDir dir;
    for (int attempt = 0; attempt < 4; ++attempt) {
        const pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            const std::string cache = dir.path().string(), cli_path = cc::test::cli_path().string();
            const std::string system = "kill " + std::to_string(attempt);
            execl(cli_path.c_str(), cli_path.c_str(), "--model", "builtin:qwen3-test", "--cache-dir", cache.c_str(),
                  "compile", "--tools", toolset(20).c_str(), "--system", system.c_str(), static_cast<char*>(nullptr));
            _exit(127);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200 + 250 * attempt));
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        // Whatever moment the kill hit, every visible group file is complete, and verify removes
        // the temp file a writer killed before its rename left (nobody holds its lock).
        const auto v = cli(dir.path(), {"--json", "cache", "verify"});
        EXPECT_EQ(v.exit_code, 0) << "attempt " << attempt << ": " << v.out;
        std::error_code ec;
        for (const auto& f : fs::directory_iterator(dir.path() / "groups", ec))
            EXPECT_FALSE(f.path().filename().string().starts_with(".")) << "left behind: " << f.path();
    }
    auto c = cli(dir.path(), {"--json", "query", "--tools", toolset(20), "--system", "kill 0", "--query", "q", "--mode",
                              "compare", "--max-new-tokens", "2", "--ignore-eos"});
    ASSERT_EQ(c.exit_code, 0) << c.out;
    EXPECT_EQ(last_json(c.out)["identical"], true);
}

}  // namespace
