// A throwaway redis-server for tests: 127.0.0.1 only, an ephemeral port, no persistence, its own
// directory; started and stopped by the test (bounded waits), never a server someone else runs.
// Tests call CC_REQUIRE_REDIS() to skip, saying why, where redis-server is not installed.
#pragma once

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cc::test {

// The first executable `name` on PATH (or in /usr/sbin, /usr/bin), empty when none.
inline std::filesystem::path find_program(const std::string& name) {
    std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
    path += ":/usr/sbin:/usr/bin:/sbin:/bin";
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
        if (dir.empty()) continue;
        const auto p = std::filesystem::path(dir) / name;
        if (::access(p.c_str(), X_OK) == 0) return p;
    }
    return {};
}

// A port that was free a moment ago on 127.0.0.1 (the kernel's ephemeral choice).
inline int free_loopback_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
        port = ntohs(a.sin_port);
    ::close(fd);
    return port;
}

// A child process started with argv, stdout/stderr to `log`; stopped (TERM, then KILL after a
// bounded wait) when the object dies.
class ChildProcess {
public:
    ChildProcess() = default;
    ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& log) {
        pid_ = ::fork();
        if (pid_ == 0) {
            ::setpgid(0, 0);
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0) {
                ::dup2(fd, 1);
                ::dup2(fd, 2);
            }
            std::vector<char*> args;
            for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
            args.push_back(nullptr);
            ::execv(args[0], args.data());
            ::_exit(127);
        }
    }
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;
    ChildProcess(ChildProcess&& o) noexcept : pid_(std::exchange(o.pid_, -1)) {}
    ChildProcess& operator=(ChildProcess&& o) noexcept {
        stop();
        pid_ = std::exchange(o.pid_, -1);
        return *this;
    }
    ~ChildProcess() { stop(); }
    bool running() const {
        if (pid_ <= 0) return false;
        int status = 0;
        return ::waitpid(pid_, &status, WNOHANG) == 0;
    }
    void kill_now() { stop(SIGKILL); }
    void stop(int sig = SIGTERM) {
        if (pid_ <= 0) return;
        ::kill(pid_, sig);
        for (int i = 0; i < 100; ++i) {  // 5 s
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
    }
    pid_t pid() const { return pid_; }

private:
    pid_t pid_ = -1;
};

struct RedisReplyDeleter {
    void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisReplyPtr = std::unique_ptr<redisReply, RedisReplyDeleter>;

class RedisServer {
public:
    static std::filesystem::path binary() { return find_program("redis-server"); }

    // Starts one on a fresh port (a few tries: the port may be taken between the check and the
    // bind); ok() says whether it answers PING.
    explicit RedisServer(const std::filesystem::path& dir, const std::vector<std::string>& extra = {})
        : dir_(dir), extra_(extra) {
        for (int attempt = 0; attempt < 3 && !ok_; ++attempt) {
            port_ = free_loopback_port();
            if (port_ != 0) start();
        }
    }
    // Stops it and starts a new, empty one on the same port (as a restart without persistence).
    bool restart() {
        stop();
        start();
        return ok_;
    }
    bool ok() const { return ok_; }
    int port() const { return port_; }
    std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
    void stop() {
        process_.stop();
        ok_ = false;
    }
    std::string log() const {
        std::ifstream in(dir_ / "redis.log");
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }

    // One command on a fresh connection (binary-safe arguments); null when Redis does not answer.
    RedisReplyPtr command(const std::vector<std::string>& args) const {
        const timeval tv{2, 0};
        std::unique_ptr<redisContext, void (*)(redisContext*)> c(redisConnectWithTimeout("127.0.0.1", port_, tv), redisFree);
        if (!c || c->err) return nullptr;
        std::vector<const char*> argv;
        std::vector<size_t> lens;
        for (const auto& a : args) {
            argv.push_back(a.data());
            lens.push_back(a.size());
        }
        return RedisReplyPtr(static_cast<redisReply*>(
            redisCommandArgv(c.get(), static_cast<int>(args.size()), argv.data(), lens.data())));
    }
    std::optional<std::string> get(const std::string& key) const {
        auto r = command({"GET", key});
        if (!r || r->type != REDIS_REPLY_STRING) return std::nullopt;
        return std::string(r->str, r->len);
    }
    long long integer(const std::vector<std::string>& args) const {
        auto r = command(args);
        return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    }

private:
    void start() {
        std::vector<std::string> argv{binary().string(), "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", dir_.string(),
                                      "--protected-mode", "yes"};
        argv.insert(argv.end(), extra_.begin(), extra_.end());
        process_ = ChildProcess(argv, dir_ / "redis.log");
        for (int i = 0; i < 100 && !ok_ && process_.running(); ++i) {  // 5 s
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            if (auto r = command({"PING"}); r && r->type == REDIS_REPLY_STATUS) ok_ = true;
        }
        if (!ok_) process_.stop();
    }

    std::filesystem::path dir_;
    std::vector<std::string> extra_;
    int port_ = 0;
    bool ok_ = false;
    ChildProcess process_;
};

}  // namespace cc::test

#define CC_REQUIRE_PROGRAM(name)                                                                        \
    do {                                                                                                \
        if (::cc::test::find_program(name).empty())                                                     \
            GTEST_SKIP() << name << " is not installed (scripts/deps.sh installs it: apt-get install " \
                         << name << ")";                                                                \
    } while (0)

#define CC_REQUIRE_REDIS() CC_REQUIRE_PROGRAM("redis-server")
