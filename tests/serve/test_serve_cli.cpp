// contextcache-cli serve as a process: it prints its address as JSON, answers, and stops cleanly
// (exit 0) on SIGINT, even while a request is running.
#include "tests/test_support.h"

#include <nlohmann/json.hpp>

#include <httplib.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

extern char** environ;

namespace {

using ordered_json = nlohmann::ordered_json;
using namespace std::chrono_literals;

struct ServeProcess {
    pid_t pid = -1;
    int out_fd = -1;
    int port = 0;
    ordered_json first_line;  // what it printed first: {"address", "port", ...}

    explicit ServeProcess(const std::vector<std::string>& extra) {
        int pipefd[2];
        if (pipe(pipefd) != 0) return;
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
        posix_spawn_file_actions_addclose(&actions, pipefd[0]);
        std::vector<std::string> args{cc::test::cli_path().string(), "--model", "builtin:qwen3-test", "--threads", "1",
                                      "--json", "serve", "--port", "0"};
        args.insert(args.end(), extra.begin(), extra.end());
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid = -1;
        posix_spawn_file_actions_destroy(&actions);
        close(pipefd[1]);
        out_fd = pipefd[0];
        // The first line is {"address", "port", ...}.
        std::string line;
        char c;
        while (read(out_fd, &c, 1) == 1 && c != '\n') line += c;
        if (!line.empty()) {
            first_line = ordered_json::parse(line);
            port = first_line.value("port", 0);
        }
    }
    // SIGINT, then the exit status (or -1 when it did not end within the limit).
    int interrupt_and_wait(std::chrono::seconds limit) {
        kill(pid, SIGINT);
        const auto end = std::chrono::steady_clock::now() + limit;
        int status = 0;
        while (std::chrono::steady_clock::now() < end) {
            if (waitpid(pid, &status, WNOHANG) == pid) {
                pid = -1;
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
            std::this_thread::sleep_for(20ms);
        }
        return -1;
    }
    ~ServeProcess() {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
        if (out_fd >= 0) close(out_fd);
    }
};

TEST(ServeCli, PrintsItsAddressAnswersAndStopsOnSigint) {
    ServeProcess server({"--max-queue", "2"});
    ASSERT_GT(server.port, 0);
    httplib::Client c("127.0.0.1", server.port);
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    // A long request in flight when Ctrl-C comes: the server cancels it and exits.
    std::thread busy([&] {
        httplib::Client b("127.0.0.1", server.port);
        b.set_read_timeout(60, 0);
        b.Post("/query",
               R"({"tools": [{"name": "f", "parameters": {"type": "object"}}], "query": "q", "max_new_tokens": 30000, "ignore_eos": true})",
               "application/json");
    });
    for (int i = 0; i < 200; ++i) {
        auto s = c.Get("/status");
        if (s && ordered_json::parse(s->body).value("busy", false)) break;
        std::this_thread::sleep_for(20ms);
    }
    EXPECT_EQ(server.interrupt_and_wait(30s), 0);
    busy.join();
}

// --first-token-rows and --first-token-step-rows (first-token priority, docs/server.md) are
// announced with their defaults, taken as given (0 turns each off), and a bad value is refused by
// the option's name.
TEST(ServeCli, AnnouncesFirstTokenRows) {
    struct Case {
        std::vector<std::string> args;
        int rows, step_rows;
    };
    for (const auto& c : {Case{{}, 64, 128}, Case{{"--first-token-rows", "0"}, 0, 128},
                          Case{{"--first-token-step-rows", "0"}, 64, 0}}) {
        ServeProcess server(c.args);
        ASSERT_GT(server.port, 0);
        EXPECT_EQ(server.first_line.at("first_token_rows"), c.rows);
        EXPECT_EQ(server.first_line.at("first_token_step_rows"), c.step_rows);
        EXPECT_EQ(server.interrupt_and_wait(30s), 0);
    }
    for (const std::string option : {"--first-token-rows", "--first-token-step-rows"}) {
        const auto bad = cc::test::run_cli({"--model", "builtin:qwen3-test", "serve", "--port", "0", option, "-1"});
        EXPECT_NE(bad.exit_code, 0);
        EXPECT_NE(bad.err.find(option), std::string::npos) << bad.err;
    }
}

// Under ASan malloc is the sanitizer's and mallopt refuses: serve runs without a cap. (TSan's
// allocator serves malloc too, but leaves mallopt to glibc, which accepts it.)
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMallocIsGlibcs = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kMallocIsGlibcs = false;
#else
constexpr bool kMallocIsGlibcs = true;
#endif
#else
constexpr bool kMallocIsGlibcs = true;
#endif

// glibc's malloc arenas are capped at 2 unless told otherwise (docs/testing.md, "Soak": more only
// let RSS creep up); 0 leaves glibc's default; a bad value is refused by the option's name; where
// malloc is not glibc's, serve still starts, without a cap.
TEST(ServeCli, CapsMallocArenasByDefaultAndOnRequest) {
    if (!kMallocIsGlibcs) {
        ServeProcess server({"--malloc-arenas", "5"});
        ASSERT_GT(server.port, 0);
        EXPECT_TRUE(server.first_line.at("malloc_arenas").is_null());
        EXPECT_EQ(server.interrupt_and_wait(30s), 0);
        return;
    }
    {
        ServeProcess server({});
        ASSERT_GT(server.port, 0);
        EXPECT_EQ(server.first_line.at("malloc_arenas"), 2);
        EXPECT_EQ(server.interrupt_and_wait(30s), 0);
    }
    {
        ServeProcess server({"--malloc-arenas", "5"});
        ASSERT_GT(server.port, 0);
        EXPECT_EQ(server.first_line.at("malloc_arenas"), 5);
        EXPECT_EQ(server.interrupt_and_wait(30s), 0);
    }
    {
        ServeProcess server({"--malloc-arenas", "0"});
        ASSERT_GT(server.port, 0);
        EXPECT_TRUE(server.first_line.at("malloc_arenas").is_null());
        EXPECT_EQ(server.interrupt_and_wait(30s), 0);
    }
    {
        // the user's MALLOC_ARENA_MAX (glibc reads it at start) is kept when the option is not given
        ASSERT_EQ(setenv("MALLOC_ARENA_MAX", "3", 1), 0);
        ServeProcess server({});
        unsetenv("MALLOC_ARENA_MAX");
        ASSERT_GT(server.port, 0);
        EXPECT_TRUE(server.first_line.at("malloc_arenas").is_null());
        EXPECT_EQ(server.interrupt_and_wait(30s), 0);
    }
    const auto bad = cc::test::run_cli({"--model", "builtin:qwen3-test", "serve", "--port", "0", "--malloc-arenas", "-1"});
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("--malloc-arenas"), std::string::npos) << bad.err;
}

// A client computes the routing header with `key --serve` (docs/deploy.md): it must be the key the
// server answers with, whatever weights and KV width `serve` chose by default on this CPU.
TEST(ServeCli, KeyServeIsTheGroupKeyTheServerAnswersWith) {
    const auto tools = (cc::test::source_dir() / "resources" / "toolsets" / "tools_5.json").string();
    const auto k = cc::test::run_cli({"--model", "builtin:qwen3-test", "--json", "key", "--serve", "--tools", tools});
    ASSERT_EQ(k.exit_code, 0) << k.out;
    const std::string key = ordered_json::parse(k.out).at("group_key");
    const auto plain = cc::test::run_cli({"--model", "builtin:qwen3-test", "--json", "key", "--tools", tools});
    ASSERT_EQ(plain.exit_code, 0) << plain.out;
    EXPECT_NE(ordered_json::parse(plain.out).at("group_key"), key) << "key without --serve takes F32 KV: another key";

    ServeProcess server({});
    ASSERT_GT(server.port, 0);
    httplib::Client c("127.0.0.1", server.port);
    c.set_read_timeout(120, 0);
    const std::string body = R"({"tools": )" + cc::test::read_file(tools) + R"(, "query": "q", "max_new_tokens": 1})";
    auto r = c.Post("/query", body, "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("X-ContextCache-Group"), key);
    EXPECT_EQ(server.interrupt_and_wait(30s), 0);
}

TEST(ServeCli, BadOptionsAreUsageErrors) {
    const auto r = cc::test::run_cli({"serve", "--port", "70000"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    const auto u = cc::test::run_cli({"serve", "--no-such-option", "1"});
    EXPECT_EQ(u.exit_code, 2) << u.err;
}

}  // namespace
