// A bounded load test of the HTTP server (docs/server.md, "Load test"): the server runs in this
// process on 127.0.0.1 (ephemeral port); N clients send M requests each, a seeded mix of valid chat
// completions (streamed and not), malformed bodies, oversized bodies, clients that hang up
// mid-request, and paper endpoints. Every reply must be a correct answer -- the same text the
// CLI's query gives for that input (computed first with an Engine doing what `contextcache-cli
// query` does) -- or a clear 4xx/429. Prints one JSON object (requests, concurrency, outcomes by
// kind, p50/p95 TTFT and latency, peak RSS); exit 1 when an answer was wrong or an error unclear.
// Clients retry a 429 with backoff (kRetries); the counts say how often.
// Not a ctest: it takes a minute and its figures are measurements, not assertions.
//
//   bench_serve_load [--model builtin:qwen3-test] [--clients 16] [--requests 50] [--max-queue 8]
//                    [--max-tokens 8] [--threads 1] [--seed 1] [--out FILE]
#include "bench/bench_common.h"
#include "core/engine/engine.h"
#include "core/research/run_info.h"
#include "core/research/sample_stats.h"
#include "core/serve/server.h"

#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

namespace {

using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double rss_mib() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.starts_with("VmRSS:")) return std::stod(line.substr(6)) / 1024.0;
    return 0;
}

struct Variant {
    ordered_json tools;
    std::string system;
    std::string query;
    std::string expected_text;  // what the CLI's query answers
};

ordered_json chat_body(const Variant& v, int max_tokens, bool stream) {
    ordered_json b;
    b["model"] = "m";
    b["messages"] = ordered_json::array();
    if (!v.system.empty()) b["messages"].push_back({{"role", "system"}, {"content", v.system}});
    b["messages"].push_back({{"role", "user"}, {"content", v.query}});
    b["tools"] = v.tools;
    b["max_tokens"] = max_tokens;
    if (stream) b["stream"] = true;
    return b;
}

int connect_raw(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// A client told 429 retries a few times with jittered exponential backoff (as the OpenAI SDKs
// do, though shorter than the server's Retry-After of 1 s so the run stays short).
constexpr int kRetries = 6;
void backoff(int attempt, std::mt19937_64& rng) {
    std::uniform_int_distribution<int> jitter(0, 50);
    std::this_thread::sleep_for(std::chrono::milliseconds((50 << attempt) + jitter(rng)));
}

struct Tally {
    std::mutex mutex;
    std::map<std::string, uint64_t> outcomes;  // kind -> count
    std::vector<double> ttft_ms;               // server engine TTFT of valid answers
    std::vector<double> client_first_byte_ms;  // streamed: time to the first content chunk
    std::vector<double> latency_ms;            // valid answers, whole request
    std::vector<std::string> problems;
    void add(const std::string& kind) {
        std::lock_guard l(mutex);
        ++outcomes[kind];
    }
    void problem(const std::string& p) {
        std::lock_guard l(mutex);
        ++outcomes["wrong_or_unclear"];
        if (problems.size() < 20) problems.push_back(p);
    }
};

}  // namespace

int main(int argc, char** argv) {
    std::map<std::string, std::string> args{{"model", "builtin:qwen3-test"}, {"clients", "16"}, {"requests", "50"},
                                            {"max-queue", "8"}, {"max-tokens", "8"}, {"threads", "1"},
                                            {"seed", "1"}, {"out", ""}};
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i];
        if (!k.starts_with("--") || !args.count(k.substr(2))) {
            std::cerr << "bench_serve_load: unknown option " << k << "\n";
            return 2;
        }
        args[k.substr(2)] = argv[i + 1];
    }
    const int n_clients = std::stoi(args["clients"]), n_requests = std::stoi(args["requests"]);
    const int max_tokens = std::stoi(args["max-tokens"]);
    const uint64_t seed = std::stoull(args["seed"]);

    cc::EngineOptions eo;
    eo.model_spec = args["model"];
    eo.n_threads = std::stoi(args["threads"]);

    // The inputs, and what the CLI answers for each (set_tools + query, greedy).
    const std::string src = CC_SOURCE_DIR;
    auto read = [](const std::string& p) {
        std::ifstream in(p);
        std::stringstream ss;
        ss << in.rdbuf();
        return ordered_json::parse(ss.str());
    };
    const auto tools5 = read(src + "/resources/toolsets/tools_5.json");
    const auto tools10 = read(src + "/resources/toolsets/tools_10.json");
    auto tools5_reversed = tools5;
    std::reverse(tools5_reversed.begin(), tools5_reversed.end());
    std::vector<Variant> variants{{tools5, "", "What's the weather like in Austin, TX right now?", {}},
                                  {tools5_reversed, "", "Book a table for two tonight.", {}},
                                  {tools10, "You are a careful assistant.", "Convert 100 USD to EUR.", {}},
                                  {tools10, "", "Send an email to bob@example.com saying hi.", {}}};
    const double rss_before_mib = rss_mib();
    {
        cc::Engine engine(eo);
        engine.load_model();
        cc::QueryOptions q;
        q.max_new_tokens = max_tokens;
        for (auto& v : variants) {
            engine.set_tools(cc::ToolSet::from_json(v.tools, "tools"), v.system);
            v.expected_text = engine.query(v.query, q).text;
        }
    }

    cc::serve::ServerOptions so;
    so.port = 0;
    so.max_queue = static_cast<size_t>(std::stoi(args["max-queue"]));
    so.max_body_bytes = 256 * 1024;
    so.request_timeout_s = 120;
    so.http_threads = static_cast<size_t>(n_clients + 4);
    cc::serve::Server server(eo, so);
    server.start();
    const int port = server.port();
    const double rss_start_mib = rss_mib();

    std::atomic<bool> done{false};
    std::atomic<double> rss_peak{rss_start_mib};
    std::thread monitor([&] {
        while (!done.load()) {
            const double r = rss_mib();
            if (r > rss_peak.load()) rss_peak.store(r);
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });

    Tally tally;
    const auto t0 = Clock::now();
    std::vector<std::thread> clients;
    for (int c = 0; c < n_clients; ++c) {
        clients.emplace_back([&, c] {
            std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(c));
            std::uniform_int_distribution<int> pct(0, 99);
            httplib::Client http("127.0.0.1", port);
            http.set_read_timeout(300, 0);
            for (int i = 0; i < n_requests; ++i) {
                const int roll = pct(rng);
                const Variant& v = variants[static_cast<size_t>(pct(rng)) % variants.size()];
                const auto start = Clock::now();
                const auto ms = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); };
                if (roll < 35) {  // a valid completion, not streamed
                    auto r = http.Post("/v1/chat/completions", chat_body(v, max_tokens, false).dump(), "application/json");
                    for (int attempt = 0; r && r->status == 429 && attempt < kRetries; ++attempt) {
                        tally.add("429_retried");
                        backoff(attempt, rng);
                        r = http.Post("/v1/chat/completions", chat_body(v, max_tokens, false).dump(), "application/json");
                    }
                    if (!r) { tally.problem("no reply (non-stream)"); continue; }
                    if (r->status == 429) { tally.add("429_gave_up"); continue; }
                    if (r->status != 200) { tally.problem("status " + std::to_string(r->status) + ": " + r->body.substr(0, 200)); continue; }
                    const auto j = ordered_json::parse(r->body);
                    const auto& msg = j["choices"][0]["message"];
                    const std::string content = msg["content"].is_string() ? msg["content"].get<std::string>() : "";
                    if (!msg.contains("tool_calls") && content != v.expected_text) {
                        tally.problem("wrong answer: " + content.substr(0, 80) + " != " + v.expected_text.substr(0, 80));
                        continue;
                    }
                    std::lock_guard l(tally.mutex);
                    ++tally.outcomes["200_answer"];
                    tally.ttft_ms.push_back(j["contextcache"]["timings"]["ttft_ms"].get<double>());
                    tally.latency_ms.push_back(ms());
                } else if (roll < 70) {  // a valid completion, streamed
                    std::string body, content;
                    double first_ms = -1;
                    int status = 0;
                    httplib::Request req;
                    req.method = "POST";
                    req.path = "/v1/chat/completions";
                    req.body = chat_body(v, max_tokens, true).dump();
                    req.set_header("Content-Type", "application/json");
                    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
                        if (first_ms < 0) first_ms = ms();
                        body.append(data, n);
                        return true;
                    };
                    auto r = http.send(req);
                    for (int attempt = 0; r && r->status == 429 && attempt < kRetries; ++attempt) {
                        tally.add("429_retried");
                        backoff(attempt, rng);
                        body.clear();
                        first_ms = -1;
                        r = http.send(req);
                    }
                    if (!r) { tally.problem("no reply (stream)"); continue; }
                    status = r->status;
                    if (status == 429) { tally.add("429_gave_up"); continue; }
                    if (status != 200) { tally.problem("stream status " + std::to_string(status)); continue; }
                    double ttft = -1;
                    bool framed = body.ends_with("data: [DONE]\n\n"), calls = false;
                    std::istringstream in(body);
                    for (std::string line; std::getline(in, line);) {
                        if (line.empty() || line == "data: [DONE]") continue;
                        if (!line.starts_with("data: ")) { framed = false; break; }
                        const auto ch = ordered_json::parse(line.substr(6));
                        if (ch.contains("error")) { framed = false; break; }
                        if (ch.contains("contextcache")) ttft = ch["contextcache"]["timings"]["ttft_ms"].get<double>();
                        if (ch["choices"].empty()) continue;
                        const auto& d = ch["choices"][0]["delta"];
                        if (d.contains("content") && d["content"].is_string()) content += d["content"].get<std::string>();
                        if (d.contains("tool_calls")) calls = true;
                    }
                    if (!framed) { tally.problem("bad stream framing"); continue; }
                    if (!calls && content != v.expected_text) { tally.problem("wrong streamed answer"); continue; }
                    std::lock_guard l(tally.mutex);
                    ++tally.outcomes["200_stream_answer"];
                    if (ttft >= 0) tally.ttft_ms.push_back(ttft);
                    tally.client_first_byte_ms.push_back(first_ms);
                    tally.latency_ms.push_back(ms());
                } else if (roll < 80) {  // malformed: bad JSON or a wrong type
                    const bool bad_json = pct(rng) < 50;
                    auto b = chat_body(v, max_tokens, false);
                    b["max_tokens"] = "eight";
                    auto r = http.Post("/v1/chat/completions", bad_json ? std::string("{\"messages\": [") : b.dump(),
                                       "application/json");
                    if (r && r->status == 400 && ordered_json::parse(r->body).contains("error")) tally.add("400_malformed");
                    else tally.problem("malformed body not answered 400");
                } else if (roll < 85) {  // too large
                    auto b = chat_body(v, max_tokens, false);
                    b["messages"].back()["content"] = std::string(300 * 1024, 'x');
                    auto r = http.Post("/v1/chat/completions", b.dump(), "application/json");
                    if (r && r->status == 413) tally.add("413_too_large");
                    else if (!r) tally.add("413_connection_closed");  // the server may close before reading it all
                    else tally.problem("oversized body answered " + std::to_string(r->status));
                } else if (roll < 95) {  // a client that hangs up mid-request
                    const int fd = connect_raw(port);
                    if (fd < 0) { tally.problem("connect failed"); continue; }
                    const std::string body = chat_body(v, 256, pct(rng) < 50).dump();
                    const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
                    send(fd, req.data(), req.size(), MSG_NOSIGNAL);
                    std::this_thread::sleep_for(std::chrono::milliseconds(pct(rng)));
                    close(fd);
                    tally.add("disconnected");
                } else {  // the paper's endpoints
                    auto r = pct(rng) < 50 ? http.Get("/status")
                                           : http.Post("/tools", ordered_json{{"tools", v.tools}, {"system", v.system}}.dump(),
                                                       "application/json");
                    if (r && (r->status == 200 || r->status == 429)) tally.add(r->status == 200 ? "200_paper_endpoint" : "429_queue_full");
                    else tally.problem("paper endpoint failed");
                }
            }
        });
    }
    for (auto& t : clients) t.join();
    const double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    // Let the cancelled jobs drain, then read the server's own counters.
    for (int i = 0; i < 200 && (server.snapshot().busy || server.snapshot().queue_depth > 0); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto snap = server.snapshot();
    done.store(true);
    monitor.join();
    const double rss_end_mib = rss_mib();
    server.stop();

    ordered_json out;
    out["benchmark"] = "serve_load";
    out["machine"] = cc::bench::machine_json();
    out["model"] = args["model"];
    out["clients"] = n_clients;
    out["requests_per_client"] = n_requests;
    out["requests"] = n_clients * n_requests;
    out["max_queue"] = so.max_queue;
    out["max_tokens"] = max_tokens;
    out["wall_s"] = wall_s;
    out["outcomes"] = tally.outcomes;
    out["problems"] = tally.problems;
    auto pcts = [](const std::vector<double>& v) {
        if (v.empty()) return ordered_json(nullptr);
        return ordered_json{{"n", v.size()}, {"p50", cc::percentile(v, 50)}, {"p95", cc::percentile(v, 95)},
                            {"max", *std::max_element(v.begin(), v.end())}};
    };
    out["engine_ttft_ms"] = pcts(tally.ttft_ms);
    out["client_first_byte_ms"] = pcts(tally.client_first_byte_ms);
    out["latency_ms"] = pcts(tally.latency_ms);
    out["server"] = {{"requests", snap.requests}, {"cancelled_by_disconnect", snap.cancelled},
                     {"rejected_queue_full", snap.rejected_queue_full}, {"hit_rate", snap.hit_rate},
                     {"by_tier", cc::serve::by_tier_names(snap.by_tier)}, {"queue_depth_after", snap.queue_depth}};
    out["rss_mib"] = {{"before_model", rss_before_mib}, {"server_started", rss_start_mib}, {"peak", rss_peak.load()},
                      {"end", rss_end_mib}};
    const std::string text = out.dump(2);
    std::cout << text << "\n";
    if (!args["out"].empty()) std::ofstream(args["out"]) << text << "\n";
    return tally.outcomes.count("wrong_or_unclear") ? 1 : 0;
}
