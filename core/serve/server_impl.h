// The Server's insides, shared by server.cpp (lifecycle, discipline, the paper's endpoints) and
// chat_completions.cpp (POST /v1/chat/completions). Private to core/serve.
#pragma once

#include "core/serve/engine_worker.h"
#include "core/serve/openai_chat.h"
#include "core/serve/server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace cc::serve {

// httplib::Server plus prime(): one request run through its parser in memory, on the thread that
// starts the server. cpp-httplib builds function-local statics on the first request a worker
// parses (the set of methods parse_request_line accepts); built here, before the listener and its
// workers exist, they are ordered before every worker by thread creation. Otherwise the first
// worker builds them and the others read them through the static's guard, whose acquire load
// inside the uninstrumented library ThreadSanitizer cannot see (docs/testing.md, "Sanitizers").
class HttpServer : public httplib::Server {
public:
    void prime();
};

struct Server::Impl {
    Impl(EngineOptions engine_options, ServerOptions options);

    ServerOptions options;
    EngineWorker worker;
    ServerStats stats;
    HttpServer http;
    std::thread listener;
    std::atomic<bool> listener_returned{false};
    std::string model_id;            // what /v1/models lists and responses name
    std::string system_fingerprint;  // "cc-" + the model fingerprint's first 12 hex digits
    int64_t started_unix_s = 0;
    std::chrono::steady_clock::time_point started;

    // One HTTP request in flight: its log entry and clock.
    struct Call {
        const httplib::Request& req;
        RequestLogEntry log;
        std::chrono::steady_clock::time_point begun = std::chrono::steady_clock::now();
        std::chrono::steady_clock::time_point deadline;
    };

    void install_routes();
    // Wraps a route: auth is done before; this times the call, turns exceptions into OpenAI error
    // replies and records the log entry (unless the handler hands the recording to a stream).
    using RouteFn = std::function<void(Call&, httplib::Response&)>;
    httplib::Server::Handler route(const std::string& endpoint, RouteFn fn);
    void finish_call(Call& call, int status, const std::string& error = {});

    // Queues `fn` for a runner thread (429 ApiError when full); `exclusive`: it runs alone (it uses
    // the engine's current tool set or the cache as a whole), else beside other shared jobs
    // (chat completions). After fn, the runner refreshes the cache usage the stats report.
    std::shared_ptr<Job> submit(std::function<void(Engine&, Job&)> fn, bool exclusive = true);
    // Waits for the job while watching the client and the deadline. A disconnect cancels the job
    // and throws ApiError 499; the deadline cancels it and throws 408. Rethrows the job's error as
    // an ApiError. `wait_some` (optional) waits up to the given time and returns true when the job
    // is over or the caller may stop waiting (a stream's first token); by default the job's own wait.
    void await(Call& call, const std::shared_ptr<Job>& job,
               const std::function<bool(std::chrono::milliseconds)>& wait_some = {});
    static void rethrow_job_error(const std::shared_ptr<Job>& job);

    void chat_completions(Call& call, httplib::Response& res);  // chat_completions.cpp

    static ordered_json parse_body(const httplib::Request& req);
    static void reply_json(httplib::Response& res, int status, const ordered_json& body);
    static void reply_error(httplib::Response& res, const ApiError& e);
    bool authorized(const httplib::Request& req) const;
};

// Request-field helpers shared by the endpoints (400 naming the field).
ToolSet tools_from_body(const ordered_json& value, const std::string& param);
std::string optional_string(const ordered_json& body, const char* name);

}  // namespace cc::serve
