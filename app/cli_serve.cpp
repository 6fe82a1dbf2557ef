// contextcache-cli serve: the HTTP server (docs/server.md) until Ctrl-C / SIGTERM.
#include "app/cli_common.h"
#include "core/serve/server.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <malloc.h>
#include <thread>

namespace cli {

namespace {

// glibc gives each thread that allocates its own arena, up to 8 per core, and memory freed in one
// arena is not reused by another: with HTTP workers and request threads each touching a few, a
// server's RSS climbs for tens of minutes (docs/testing.md, "30 minutes with evictions": 190 MB and
// +7% by default, 100 MB and flat with 2). Cap them before any thread starts, unless the user set
// MALLOC_ARENA_MAX (glibc reads it itself). 0 leaves glibc's default. Where malloc is not glibc's
// (a sanitizer's, or jemalloc/tcmalloc preloaded) mallopt refuses and that allocator's own policy
// stays, with a note on stderr. Returns the cap in force, or -1 where there is none of ours.
int cap_malloc_arenas(Args& args) {
    const long arenas = parse_int(args.get_or("malloc-arenas", "2"), "--malloc-arenas", 0, 1024);
    if (args.get("malloc-arenas") == std::nullopt) {
        if (const char* env = std::getenv("MALLOC_ARENA_MAX"); env != nullptr && *env != '\0') return -1;
    }
    if (arenas == 0) return -1;
    if (mallopt(M_ARENA_MAX, static_cast<int>(arenas)) != 1) {
        std::cerr << "contextcache serve: --malloc-arenas " << arenas
                  << " not applied: this process's malloc is not glibc's (mallopt(M_ARENA_MAX) refused)\n";
        return -1;
    }
    return static_cast<int>(arenas);
}

}  // namespace

int cmd_serve(Args& args, const cc::EngineOptions& engine_options, bool json) {
    const int malloc_arenas = cap_malloc_arenas(args);
    cc::EngineOptions options = engine_options;
    // Requests served at once (continuous batching): by default four per core, 4 to 16. Decode
    // reads every weight once per step whatever the number of rows, so on a CPU a step of 8 decode
    // rows costs little more than one (docs/server.md).
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    options.parallel = static_cast<int>(
        parse_int(args.get_or("parallel", std::to_string(std::clamp(4 * cores, 4, 16))), "--parallel", 1, 256));
    options.step_tokens = static_cast<int>(parse_int(args.get_or("step-tokens", "256"), "--step-tokens", 1, 1 << 20));
    options.first_token_rows = static_cast<int>(parse_int(
        args.get_or("first-token-rows", std::to_string(options.first_token_rows)), "--first-token-rows", 0, 1 << 20));
    options.first_token_step_rows =
        static_cast<int>(parse_int(args.get_or("first-token-step-rows", std::to_string(options.first_token_step_rows)),
                                   "--first-token-step-rows", 0, 1 << 20));
    cc::serve::ServerOptions s;
    s.host = args.get_or("host", s.host);
    s.port = static_cast<int>(parse_int(args.get_or("port", "8080"), "--port", 0, 65535));
    s.api_key = args.get_or("api-key", "");
    s.max_queue = static_cast<size_t>(parse_int(args.get_or("max-queue", "16"), "--max-queue", 0, 1 << 20));
    s.max_body_bytes = static_cast<size_t>(
        parse_int(args.get_or("max-body-bytes", std::to_string(s.max_body_bytes)), "--max-body-bytes", 1, 1LL << 32));
    s.request_timeout_s = static_cast<int>(parse_int(args.get_or("request-timeout-s", "300"), "--request-timeout-s", 1, 86400));
    if (auto v = args.get("default-max-tokens"))
        s.default_max_tokens = static_cast<int>(parse_int(*v, "--default-max-tokens", 1, s.max_tokens_limit));
    args.check_all_used();

    // Ctrl-C and SIGTERM are taken by sigwait on this thread: blocked here before any thread starts,
    // so every thread inherits the mask and none is interrupted inside the engine or a socket call.
    // Their dispositions are reset first: a shell starts background jobs with SIGINT ignored, and an
    // ignored signal is dropped before sigwait could see it (`kill -INT` would do nothing).
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a signal

    cc::serve::Server server(options, s);
    server.start();
    const auto& info = server.model_info();
    if (json) {
        print_json(
            ordered_json{{"address", server.address()},
                         {"port", server.port()},
                         {"model", info.spec},
                         {"backend", info.backend},
                         {"numerics", info.numerics},
                         {"weights", info.weights},
                         {"chat_format", info.chat_format},
                         {"parallel", options.parallel},
                         {"step_tokens", options.step_tokens},
                         {"first_token_rows", options.first_token_rows},
                         {"first_token_step_rows", options.first_token_step_rows},
                         {"malloc_arenas", malloc_arenas < 0 ? ordered_json(nullptr) : ordered_json(malloc_arenas)}});
    } else {
        std::cout << "contextcache serve: " << info.spec << " on " << info.numerics << ", " << options.parallel
                  << " requests at once, listening on " << server.address() << " (Ctrl-C stops)" << std::endl;
    }
    std::cout.flush();
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::cerr << "contextcache serve: stopping (" << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ")\n";
    server.stop();
    return 0;
}

}  // namespace cli
