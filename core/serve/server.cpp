#include "core/serve/server.h"

#include "core/base/cancelled.h"
#include "core/base/sha256.h"
#include "core/engine/result_json.h"
#include "core/serve/peer_socket.h"
#include "core/serve/server_impl.h"

#include <algorithm>
#include <cstring>
#include <iostream>
#include <stdexcept>

namespace cc::serve {
namespace {

int64_t unix_ms_now() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

bool is_loopback(const std::string& host) {
    return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.starts_with("127.");
}

double ms_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

// ---- request helpers ------------------------------------------------------------------------

ToolSet tools_from_body(const ordered_json& value, const std::string& param) {
    try {
        return ToolSet::from_json(value, param);
    } catch (const std::exception& e) {
        throw ApiError(400, e.what(), param, "invalid_value");
    }
}

std::string optional_string(const ordered_json& body, const char* name) {
    if (!body.contains(name) || body[name].is_null()) return {};
    if (!body[name].is_string())
        throw ApiError(400, "Invalid type for '" + std::string(name) + "': expected a string, but got " +
                                body[name].type_name() + ".",
                       name, "invalid_type");
    return body[name].get<std::string>();
}

ordered_json Server::Impl::parse_body(const httplib::Request& req) {
    try {
        return ordered_json::parse(req.body);
    } catch (const std::exception&) {
        throw ApiError(400, "We could not parse the JSON body of your request. The body must be valid JSON.", "",
                       "invalid_json");
    }
}

void Server::Impl::reply_json(httplib::Response& res, int status, const ordered_json& body) {
    res.status = status;
    res.set_content(body.dump(-1, ' ', false, ordered_json::error_handler_t::replace) + "\n", "application/json");
}

void Server::Impl::reply_error(httplib::Response& res, const ApiError& e) {
    if (e.status == 429) res.set_header("Retry-After", "1");
    reply_json(res, e.status, error_json(e));
}

bool Server::Impl::authorized(const httplib::Request& req) const {
    if (options.api_key.empty()) return true;
    const std::string header = req.get_header_value("Authorization");
    const std::string given = header.starts_with("Bearer ") ? header.substr(7) : std::string();
    // Compare digests, every byte, so neither the key's content nor its length shows in the time.
    const std::string a = sha256_hex(given), b = sha256_hex(options.api_key);
    unsigned diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0 && !header.empty();
}

// ---- the discipline -------------------------------------------------------------------------

std::shared_ptr<Job> Server::Impl::submit(std::function<void(Engine&, Job&)> fn, bool exclusive) {
    auto job = worker.submit([this, fn = std::move(fn)](Engine& engine, Job& j) {
        struct Refresh {  // after the job, even when it throws
            Impl* self;
            Engine& engine;
            ~Refresh() {
                CacheUsage u;
                auto& cache = engine.cache();
                u.gpu_bytes = cache.gpu_bytes();
                u.gpu_groups = cache.gpu_size();
                u.memory_bytes = cache.memory_bytes();
                u.memory_groups = cache.memory_size();
                u.disk_bytes = cache.disk_bytes();
                const auto conv = engine.conversation_stats();
                u.conversation_bytes = conv.bytes;
                u.conversation_entries = conv.entries;
                u.kv_pool = engine.kv_pool_stats();
                if (const RemoteTier* remote = cache.remote()) {
                    u.remote = true;
                    u.remote_counters = remote->counters();
                }
                self->stats.set_cache_usage(u);
            }
        } refresh{this, engine};
        fn(engine, j);
    }, exclusive);
    if (!job && worker.stopping()) throw ApiError(503, "The server is shutting down.", "", "shutting_down", "server_error");
    if (!job)
        throw ApiError(429,
                       "The server is busy: its queue of " + std::to_string(options.max_queue) +
                           " waiting requests is full. Retry after a moment.",
                       "", "queue_full", "rate_limit_error");
    return job;
}

void Server::Impl::await(Call& call, const std::shared_ptr<Job>& job,
                         const std::function<bool(std::chrono::milliseconds)>& wait_some) {
    const PeerSocket peer(call.req.remote_addr, call.req.remote_port, call.req.local_port);
    const auto over = [&] { return job->state() == Job::State::done || job->state() == Job::State::dropped; };
    for (;;) {
        if (wait_some ? wait_some(std::chrono::milliseconds(20)) : job->wait_for(std::chrono::milliseconds(20))) {
            if (over()) break;
            return;  // the caller's condition (a stream's first token)
        }
        const bool gone = peer.closed();
        const bool late = std::chrono::steady_clock::now() >= call.deadline;
        if (gone || late) {
            worker.cancel(job);
            job->wait();  // the job may hold references into this request until it ends
            if (gone) throw ApiError(499, "The client closed the connection; its request was cancelled.", "", "client_closed");
            throw ApiError(408,
                           "The request was not answered within the server's timeout of " +
                               std::to_string(options.request_timeout_s) + " s and was cancelled.",
                           "", "request_timeout", "timeout_error");
        }
    }
    call.log.queue_ms = job->queue_ms();
    if (job->state() == Job::State::dropped)
        throw ApiError(503, "The server is shutting down.", "", "shutting_down", "server_error");
    rethrow_job_error(job);
}

void Server::Impl::rethrow_job_error(const std::shared_ptr<Job>& job) {
    const auto error = job->error();
    if (!error) return;
    try {
        std::rethrow_exception(error);
    } catch (const ApiError&) {
        throw;
    } catch (const Cancelled&) {
        throw ApiError(499, "The request was cancelled.", "", "cancelled");
    } catch (const std::invalid_argument& e) {
        throw ApiError(400, e.what(), "", "invalid_value");
    } catch (const std::out_of_range& e) {
        throw ApiError(400, e.what(), "", "invalid_value");
    } catch (const std::length_error& e) {
        throw ApiError(400, e.what(), "", "context_length_exceeded");
    } catch (const std::exception& e) {
        throw ApiError(500, e.what(), "", "engine_error", "server_error");
    }
}

void Server::Impl::finish_call(Call& call, int status, const std::string& error) {
    call.log.status = status;
    call.log.error = error;
    call.log.total_ms = ms_since(call.begun);
    call.log.unix_ms = unix_ms_now();
    stats.record(call.log);
}

httplib::Server::Handler Server::Impl::route(const std::string& endpoint, RouteFn fn) {
    return [this, endpoint, fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
        Call call{req, {}, std::chrono::steady_clock::now(), {}};
        call.log.method = req.method;
        call.log.endpoint = endpoint;
        call.deadline = call.begun + std::chrono::seconds(options.request_timeout_s);
        try {
            // Cache-affinity routing (docs/deploy.md): a client or load balancer may name the
            // group it expects; it is a hint for routing, checked for form, never trusted.
            const std::string hint = req.get_header_value(kGroupHeader);
            if (!hint.empty() && !is_group_key(hint))
                throw ApiError(400, std::string("Invalid '") + kGroupHeader + "' header: expected a group key (64 lowercase hex digits, `contextcache-cli key`).",
                               kGroupHeader, "invalid_value");
            fn(call, res);
            // The group this request linked or compiled, for the next request's routing.
            if (!call.log.group_key.empty()) {
                res.set_header(kGroupHeader, call.log.group_key);
                if (!hint.empty() && hint != call.log.group_key) res.set_header(kGroupHintHeader, "mismatch");
            }
            if (call.log.status == -1) return;  // a stream records its own entry when it ends
            finish_call(call, res.status);
        } catch (const ApiError& e) {
            reply_error(res, e);
            finish_call(call, e.status, e.what());
        } catch (const std::exception& e) {
            const ApiError err(500, e.what(), "", "internal_error", "server_error");
            reply_error(res, err);
            finish_call(call, 500, e.what());
        }
    };
}

// ---- lifecycle ------------------------------------------------------------------------------

namespace {

// A connection held in memory: reads one request from a string, throws the response away.
class MemoryStream : public httplib::Stream {
public:
    explicit MemoryStream(std::string request) : in_(std::move(request)) {}
    bool is_readable() const override { return true; }
    bool is_writable() const override { return true; }
    ssize_t read(char* ptr, size_t size) override {
        const size_t n = std::min(size, in_.size() - pos_);
        std::memcpy(ptr, in_.data() + pos_, n);
        pos_ += n;
        return static_cast<ssize_t>(n);
    }
    ssize_t write(const char*, size_t size) override { return static_cast<ssize_t>(size); }
    void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 0; }
    void get_local_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 0; }
    socket_t socket() const override { return INVALID_SOCKET; }

private:
    std::string in_;
    size_t pos_ = 0;
};

}  // namespace

void HttpServer::prime() {
    // Before install_routes: no route, handler or logger sees it; httplib answers 404 into the void.
    MemoryStream stream("GET /prime?a=b HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
    bool closed = false;
    process_request(stream, true, closed, [](httplib::Request&) {});
}

Server::Impl::Impl(EngineOptions engine_options, ServerOptions opts)
    : options(std::move(opts)), worker(std::move(engine_options), options.max_queue) {}

Server::Server(EngineOptions engine_options, ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(engine_options), std::move(options))) {}

Server::~Server() { stop(); }

void Server::start() {
    auto& s = *impl_;
    if (s.options.max_body_bytes == 0) throw std::invalid_argument("server: max_body_bytes must be > 0");
    if (s.options.request_timeout_s <= 0) throw std::invalid_argument("server: request_timeout_s must be > 0");
    const ModelInfo info = s.worker.start();
    s.model_id = info.spec;
    s.system_fingerprint = "cc-" + info.fingerprint.substr(0, 12);
    s.submit([](Engine&, Job&) {})->wait();   // an empty job: its refresh fills the cache usage /metrics shows
    s.started_unix_s = unix_ms_now() / 1000;
    s.started = std::chrono::steady_clock::now();

    const size_t threads = s.options.http_threads ? s.options.http_threads : std::max<size_t>(8, s.options.max_queue + 4);
    s.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    s.http.set_payload_max_length(s.options.max_body_bytes);
    s.http.set_read_timeout(std::chrono::seconds(std::min(s.options.request_timeout_s, 60)));
    s.http.set_write_timeout(std::chrono::seconds(std::min(s.options.request_timeout_s, 60)));
    s.http.prime();
    s.install_routes();

    const int port = s.options.port == 0 ? s.http.bind_to_any_port(s.options.host)
                                         : (s.http.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1);
    if (port <= 0) {
        s.worker.stop();
        throw std::runtime_error("server: cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) +
                                 " (in use, or not an address of this machine)");
    }
    port_ = port;
    if (!is_loopback(s.options.host))
        std::cerr << "contextcache serve: warning: listening on " << s.options.host << ":" << port_
                  << ", not loopback: anyone who can reach this address can use the model"
                  << (s.options.api_key.empty() ? " (and no --api-key is set)" : "") << "\n";
    s.listener = std::thread([&s] {
        s.http.listen_after_bind();
        s.listener_returned = true;
    });
    // httplib's stop() does nothing until the listener has begun (is_running): a stop() that came
    // first would leave the listener blocked in accept() for good, and serve hung on a Ctrl-C
    // right after it started (about one start in 70 in ServeCli.CapsMallocArenasByDefaultAndOnRequest).
    // So start() returns once the listener runs (it sets is_running before anything else).
    while (!s.http.is_running() && !s.listener_returned) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

void Server::stop() {
    auto& s = *impl_;
    // The engine first: the running job is cancelled and queued ones dropped, so every handler
    // waiting on one answers and returns; then httplib's pool can join its threads.
    s.worker.stop();
    if (s.listener.joinable()) {
        s.http.stop();
        s.listener.join();
    }
}

bool Server::running() const { return impl_->http.is_running(); }

std::string Server::address() const {
    const std::string& h = impl_->options.host;
    return "http://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(port_);
}

const ModelInfo& Server::model_info() const { return impl_->worker.model_info(); }

StatsSnapshot Server::snapshot() const {
    auto s = impl_->stats.snapshot();
    s.queue_depth = impl_->worker.queue_depth();
    s.max_queue = impl_->worker.max_queue();
    s.busy = impl_->worker.busy();
    s.running = impl_->worker.running();
    s.parallel = impl_->worker.parallel();
    return s;
}

void Server::set_request_listener(std::function<void(const RequestLogEntry&)> listener) {
    impl_->stats.set_listener(std::move(listener));
}

// ---- routes ---------------------------------------------------------------------------------

namespace {

// QueryOptions from the /query body (the CLI's query options, same names).
QueryOptions query_options(const ordered_json& body, int max_tokens_limit) {
    QueryOptions q;
    if (body.contains("mode") && !body["mode"].is_null()) {
        const std::string mode = optional_string(body, "mode");
        try {
            q.mode = parse_query_mode(mode);
        } catch (const std::exception& e) {
            throw ApiError(400, e.what(), "mode", "invalid_value");
        }
    }
    auto number = [&](const char* name, double lo, double hi) -> std::optional<double> {
        if (!body.contains(name) || body[name].is_null()) return std::nullopt;
        if (!body[name].is_number())
            throw ApiError(400, std::string("Invalid type for '") + name + "': expected a number.", name, "invalid_type");
        const double v = body[name].get<double>();
        if (!(v >= lo && v <= hi))
            throw ApiError(400, std::string("Invalid '") + name + "': out of range.", name, "invalid_value");
        return v;
    };
    if (auto v = number("max_new_tokens", 1, max_tokens_limit)) q.max_new_tokens = static_cast<int>(*v);
    if (auto v = number("temperature", 0, 100)) q.temperature = static_cast<float>(*v);
    if (auto v = number("top_p", 0, 1)) q.top_p = static_cast<float>(*v);
    if (auto v = number("seed", 0, 9.0e15)) q.seed = static_cast<uint64_t>(*v);
    if (body.contains("ignore_eos") && !body["ignore_eos"].is_null()) {
        if (!body["ignore_eos"].is_boolean())
            throw ApiError(400, "Invalid type for 'ignore_eos': expected a boolean.", "ignore_eos", "invalid_type");
        q.ignore_eos = body["ignore_eos"].get<bool>();
    }
    return q;
}

// The tools of a /tools or /query body: "tools" in any accepted form (docs/server.md), or the body
// itself when it is a bare list.
ToolSet body_tools(const ordered_json& body) {
    if (body.is_array()) return tools_from_body(body, "tools");
    if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object.", "", "invalid_type");
    if (!body.contains("tools") && !body.contains("servers"))
        throw ApiError(400, "Missing required parameter: 'tools'.", "tools", "missing_required_parameter");
    if (body.contains("servers")) return tools_from_body(body, "tools");
    return tools_from_body(body["tools"], "tools");
}

std::string body_system(const ordered_json& body) {
    if (!body.is_object()) return {};
    if (body.contains("system_prompt")) return optional_string(body, "system_prompt");
    return optional_string(body, "system");
}

}  // namespace

void Server::Impl::install_routes() {
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (req.path == "/health" || authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
        res.set_header("WWW-Authenticate", "Bearer");
        reply_error(res, ApiError(401, "Incorrect API key provided. Send it as 'Authorization: Bearer KEY'.", "",
                                  "invalid_api_key"));
        RequestLogEntry e;
        e.method = req.method;
        e.endpoint = req.path;
        e.status = 401;
        e.unix_ms = unix_ms_now();
        stats.record(e);
        return httplib::Server::HandlerResponse::Handled;
    });
    // httplib answers some errors itself (413 for a body over the limit, 404, 400 for a bad
    // request line) with an empty body: give them the OpenAI error shape.
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        std::string message = "Error " + std::to_string(res.status) + ".";
        std::string code;
        if (res.status == 413) {
            message = "The request body is larger than the server's limit of " + std::to_string(options.max_body_bytes) +
                      " bytes.";
            code = "payload_too_large";
        } else if (res.status == 404) {
            message = "Unknown endpoint: " + req.method + " " + req.path + ".";
            code = "not_found";
        }
        reply_json(res, res.status, error_json(ApiError(res.status, message, "", code)));
        RequestLogEntry e;
        e.method = req.method;
        e.endpoint = req.path.size() > 64 ? req.path.substr(0, 64) : req.path;
        e.status = res.status;
        e.error = message;
        e.unix_ms = unix_ms_now();
        if (res.status == 413 || res.status == 404) e.endpoint = res.status == 413 ? "(body too large)" : "(unknown)";
        stats.record(e);
    });

    http.Get("/health", route("/health", [](Call&, httplib::Response& res) {
                 reply_json(res, 200, {{"status", "ok"}});
             }));

    http.Get("/v1/models", route("/v1/models", [this](Call&, httplib::Response& res) {
                 ordered_json m{{"id", model_id}, {"object", "model"}, {"created", started_unix_s}, {"owned_by", "contextcache"}};
                 reply_json(res, 200, {{"object", "list"}, {"data", ordered_json::array({m})}});
             }));

    http.Get("/status", route("/status", [this](Call&, httplib::Response& res) {
                 const auto s = stats.snapshot();
                 const auto& info = worker.model_info();
                 ordered_json tiers;
                 tiers["gpu"] = {{"bytes", s.cache.gpu_bytes}, {"groups", s.cache.gpu_groups}};
                 tiers["memory"] = {{"bytes", s.cache.memory_bytes}, {"groups", s.cache.memory_groups}};
                 tiers["disk"] = {{"bytes", s.cache.disk_bytes}};
                 tiers["conversation"] = {{"bytes", s.cache.conversation_bytes}, {"entries", s.cache.conversation_entries}};
                 ordered_json out;
                 out["model"] = model_id;
                 out["synthetic_weights"] = info.synthetic_weights;
                 out["backend"] = info.backend;
                 out["numerics"] = info.numerics;
                 out["weights"] = info.weights;
                 out["kv_dtype"] = kv_dtype_name(worker.options().kv_dtype);
                 out["device"] = info.device;
                 out["chat_format"] = info.chat_format;
                 out["fingerprint"] = info.fingerprint;
                 out["uptime_s"] = ms_since(started) / 1000.0;
                 out["requests"] = s.requests;
                 out["lookups"] = s.lookups;
                 out["hits"] = s.hits;
                 out["hit_rate"] = s.hit_rate;
                 out["by_tier"] = by_tier_names(s.by_tier);
                 out["queue_depth"] = worker.queue_depth();
                 out["max_queue"] = worker.max_queue();
                 out["busy"] = worker.busy();
                 out["running"] = worker.running();
                 out["parallel"] = worker.parallel();
                 out["cache"] = tiers;
                 reply_json(res, 200, out);
             }));

    http.Get("/metrics", route("/metrics", [this](Call&, httplib::Response& res) {
                 res.status = 200;
                 res.set_content(stats.prometheus(worker.queue_depth(), worker.max_queue(), worker.running(), worker.parallel(),
                                                  worker.step_totals()),
                                 "text/plain; version=0.0.4; charset=utf-8");
             }));

    // POST /tools: compile a tool set ahead of time.
    http.Post("/tools", route("/tools", [this](Call& call, httplib::Response& res) {
                  const auto body = parse_body(call.req);
                  auto tools = std::make_shared<ToolSet>(body_tools(body));
                  const std::string system = body_system(body);
                  auto out = std::make_shared<ordered_json>();
                  auto job = submit([tools, system, out, &call](Engine& engine, Job&) {
                      const auto r = engine.set_tools(*tools, system);
                      call.log.tier = r.tier;
                      call.log.group_key = r.group_key;
                      call.log.compile_ms = r.compile_ms;
                      call.log.prompt_tokens = r.prefix_tokens;
                      call.log.cached_tokens = r.cache_hit ? r.prefix_tokens : r.reused_tokens;
                      call.log.prefilled_tokens = r.cache_hit ? 0 : r.prefix_tokens - r.reused_tokens;
                      *out = to_json(r);
                  });
                  await(call, job);
                  reply_json(res, 200, *out);
              }));

    // GET /tools: the compiled groups (every tier).
    http.Get("/tools", route("/tools", [this](Call& call, httplib::Response& res) {
                 auto out = std::make_shared<ordered_json>();
                 auto job = submit([out](Engine& engine, Job&) {
                     ordered_json groups = ordered_json::array();
                     for (const auto& g : engine.cache().list()) groups.push_back(to_json(g));
                     ordered_json o;
                     o["groups"] = std::move(groups);
                     o["current"] = engine.current_tools() ? to_json(*engine.current_tools()) : ordered_json(nullptr);
                     *out = std::move(o);
                 });
                 await(call, job);
                 reply_json(res, 200, *out);
             }));

    // DELETE /tools/{key}: a group key only (64 hex digits), never a path.
    http.Delete(R"(/tools/([^/]+))", route("/tools/{key}", [this](Call& call, httplib::Response& res) {
                    const std::string key = call.req.matches[1];
                    if (!is_group_key(key))
                        throw ApiError(400, "Not a group key (64 lowercase hex digits): \"" + key.substr(0, 80) + "\".",
                                       "key", "invalid_value");
                    auto removed = std::make_shared<bool>(false);
                    auto job = submit([key, removed](Engine& engine, Job&) { *removed = engine.cache().remove(key); });
                    await(call, job);
                    if (!*removed) throw ApiError(404, "No compiled group with key " + key + ".", "key", "not_found");
                    reply_json(res, 200, {{"group_key", key}, {"deleted", true}});
                }));

    // POST /query: the CLI's query (tools + query -> QueryResult JSON).
    http.Post("/query", route("/query", [this](Call& call, httplib::Response& res) {
                  const auto body = parse_body(call.req);
                  auto tools = std::make_shared<ToolSet>(body_tools(body));
                  const std::string system = body_system(body);
                  if (!body.contains("query"))
                      throw ApiError(400, "Missing required parameter: 'query'.", "query", "missing_required_parameter");
                  const std::string query = optional_string(body, "query");
                  QueryOptions q = query_options(body, options.max_tokens_limit);
                  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
                      // The CLI's form (auto | none | required | a function's name) or OpenAI's object.
                      const auto& tc = body["tool_choice"];
                      if (tc.is_string() && !tc.get<std::string>().empty()) q.tool_choice = ToolChoice::parse(tc.get<std::string>());
                      else q.tool_choice = parse_tool_choice(tc);
                      check_tool_choice(q.tool_choice, tools->names());
                  }
                  auto out = std::make_shared<ordered_json>();
                  auto job = submit([tools, system, query, q, out, &call](Engine& engine, Job& job) {
                      // cached / compare: as the CLI's query, the group is linked (from memory or a
                      // file) or compiled inside the query, so that its TTFT and timings include
                      // it; full: compiled (or linked) first, as POST /tools would.
                      if (q.mode == QueryMode::full)
                          engine.set_tools(*tools, system);
                      else
                          engine.select_tools(*tools, system);
                      if (job.cancelled()) throw Cancelled();
                      const auto r = engine.query(query, q);
                      if (job.cancelled()) throw Cancelled();
                      const CompileResult compiled = *engine.current_tools();
                      call.log.tier = compiled.tier;
                      call.log.group_key = compiled.group_key;
                      call.log.compile_ms = compiled.compile_ms;
                      call.log.link_ms = r.timings.link_ms;
                      call.log.prefill_ms = r.timings.prefill_ms;
                      call.log.ttft_ms = r.timings.ttft_ms;
                      call.log.decode_ms = r.timings.decode_ms;
                      call.log.prompt_tokens = r.prefix_tokens + r.suffix_tokens;
                      // A miss computed the prefix inside this request (less what another group gave).
                      call.log.cached_tokens = compiled.cache_hit ? r.prefix_tokens : compiled.reused_tokens;
                      call.log.prefilled_tokens = call.log.prompt_tokens - call.log.cached_tokens;
                      call.log.generated_tokens = r.generated_tokens;
                      auto j = to_json(r);
                      // The group was linked (or compiled) in this request: its miss is this request's.
                      if (!r.miss_reason) j["miss_reason"] = miss_reason_json(compiled.miss_reason, compiled.prefix_tokens);
                      j["compile"] = to_json(compiled);
                      *out = std::move(j);
                  });
                  await(call, job);
                  reply_json(res, 200, *out);
              }));

    http.Post("/v1/chat/completions",
              route("/v1/chat/completions", [this](Call& call, httplib::Response& res) { chat_completions(call, res); }));
}

}  // namespace cc::serve
