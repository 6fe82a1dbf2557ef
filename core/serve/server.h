// The HTTP server (DESIGN §8 Serving; docs/server.md): the OpenAI-compatible chat completions, the
// paper's endpoints, /metrics. One engine thread (EngineWorker) owns the Engine and serves a bounded
// FIFO queue; HTTP handler threads parse and validate, submit a job, and wait for it while watching
// the client's connection (a disconnect cancels the job) and the request timeout. No Qt; the app's
// Server panel reads snapshot() and the request listener.
#pragma once

#include "core/engine/engine.h"
#include "core/serve/stats.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace cc::serve {

// Cache-affinity routing (docs/deploy.md): responses that linked or compiled a group carry its key
// in this header (not SSE streams: their headers go out before the group is known); a request may
// send it (a valid key, else 400) so that a load balancer hashes on it. A hint that differs from
// the group the request really used is answered with kGroupHintHeader: mismatch.
inline constexpr const char* kGroupHeader = "X-ContextCache-Group";
inline constexpr const char* kGroupHintHeader = "X-ContextCache-Group-Hint";

// The warm KV pool of a server's engine when nothing says otherwise (EngineOptions::kv_warm_bytes):
// `serve --kv-warm-mb` and the app's Server panel (docs/server.md, Continuous batching, "Memory").
inline constexpr size_t kDefaultKvWarmMb = 512;

struct ServerOptions {
    std::string host = "127.0.0.1";    // loopback by default; anything else prints a warning
    int port = 8080;                   // 0 = an ephemeral port (see Server::port())
    std::string api_key;               // "" = no authentication; else "Authorization: Bearer KEY"
    size_t max_queue = 16;             // jobs waiting for the engine (more: 429 + Retry-After)
    size_t max_body_bytes = 8u << 20;  // larger request bodies: 413
    int request_timeout_s = 300;       // a request not answered by then is cancelled (408)
    int max_tokens_limit = 32768;      // the largest max_tokens a request may ask for
    int default_max_tokens = 512;      // when a request gives none
    size_t http_threads = 0;           // handler threads; 0 = max(8, max_queue + 4)
};

class Server {
public:
    Server(EngineOptions engine_options, ServerOptions options);
    ~Server();  // stop()
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Loads the model on the engine thread, binds and starts listening in the background. Throws
    // on a model error or when the address cannot be bound.
    void start();
    // Stops listening, cancels the running job, answers queued ones 503, joins the threads.
    // Idempotent; safe from any thread but a handler's.
    void stop();
    bool running() const;
    int port() const { return port_; }        // the bound port (after start)
    std::string address() const;              // "http://HOST:PORT"
    const ModelInfo& model_info() const;

    StatsSnapshot snapshot() const;
    // Called on the handler thread after each request; keep it short (the app queues it).
    void set_request_listener(std::function<void(const RequestLogEntry&)> listener);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
    int port_ = 0;
};

}  // namespace cc::serve
