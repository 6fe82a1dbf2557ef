// The HTTP server against real sockets on 127.0.0.1 (ephemeral ports): endpoint shapes, OpenAI error
// shapes, auth, body limit (413), a full queue (429), cancellation by disconnect, timeouts, /metrics
// format, SSE framing, cache reuse across reordered and MCP-form tools. The built-in qwen3-test model
// is synthetic (its text is gibberish), so replies are checked for shape, not content; every wait
// is bounded.
#include "core/engine/json_schema_constraint.h"
#include "core/serve/engine_worker.h"
#include "core/serve/server.h"
#include "tests/redis_server.h"
#include "tests/test_support.h"

#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <regex>
#include <sstream>
#include <thread>

namespace {

using cc::ordered_json;
using namespace std::chrono_literals;

cc::EngineOptions engine_options() {
    cc::EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    o.n_threads = 1;
    return o;  // memory tier only: no files
}

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "send_email", "description": "Send an email",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}}}
])";

ordered_json chat_body(const ordered_json& tools, int max_tokens = 2, bool stream = false) {
    ordered_json b;
    b["model"] = "builtin:qwen3-test";
    b["messages"] = ordered_json::array({{{"role", "system"}, {"content", "You are a test."}},
                                         {{"role", "user"}, {"content", "What is the weather in Paris?"}}});
    b["tools"] = tools;
    b["max_tokens"] = max_tokens;
    if (stream) {
        b["stream"] = true;
        b["stream_options"] = {{"include_usage", true}};
    }
    return b;
}

// Waits (bounded) until `pred` holds.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 20s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
        if (pred()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return pred();
}

// Sends a raw HTTP request and returns the connected socket (the caller closes it: a disconnect).
int send_raw(int port, const std::string& path, const std::string& body) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        close(fd);
        return -1;
    }
    const std::string req = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
        close(fd);
        return -1;
    }
    return fd;
}

// A long /query that keeps the engine busy until cancelled.
std::string long_query() {
    return ordered_json{{"tools", ordered_json::parse(kTools)}, {"query", "go"}, {"max_new_tokens", 30000},
                        {"ignore_eos", true}}
        .dump();
}

// One chat completion on a server of the test's own; null when it did not answer 200.
ordered_json post_to(int port, const ordered_json& body) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return ordered_json();
    EXPECT_EQ(r->status, 200) << r->body;
    return ordered_json::parse(r->body);
}

class ServerTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        cc::serve::ServerOptions o;
        o.port = 0;
        o.max_queue = 1;
        o.max_body_bytes = 64 * 1024;
        server_ = new cc::serve::Server(engine_options(), o);
        server_->start();
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    static httplib::Client client() {
        httplib::Client c("127.0.0.1", server_->port());
        c.set_read_timeout(120, 0);
        return c;
    }
    static ordered_json post(const std::string& path, const ordered_json& body, int expected_status = 200) {
        auto c = client();
        auto r = c.Post(path.c_str(), body.dump(), "application/json");
        EXPECT_TRUE(r) << path;
        if (!r) return {};
        EXPECT_EQ(r->status, expected_status) << path << ": " << r->body;
        return ordered_json::parse(r->body);
    }
    static cc::serve::Server* server_;
};
cc::serve::Server* ServerTest::server_ = nullptr;

TEST_F(ServerTest, HealthModelsStatus) {
    auto c = client();
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    EXPECT_EQ(ordered_json::parse(h->body)["status"], "ok");
    auto m = c.Get("/v1/models");
    ASSERT_TRUE(m);
    const auto models = ordered_json::parse(m->body);
    EXPECT_EQ(models["object"], "list");
    EXPECT_EQ(models["data"][0]["id"], "builtin:qwen3-test");
    EXPECT_EQ(models["data"][0]["object"], "model");
    auto s = c.Get("/status");
    ASSERT_TRUE(s);
    const auto status = ordered_json::parse(s->body);
    EXPECT_EQ(status["backend"], "cpu");
    for (const char* k : {"model", "hit_rate", "queue_depth", "max_queue", "cache", "requests"})
        EXPECT_TRUE(status.contains(k)) << k;
    EXPECT_TRUE(status["cache"].contains("memory"));
}

TEST_F(ServerTest, ChatCompletionShapeAndReuseAcrossReorderedTools) {
    const auto first = post("/v1/chat/completions", chat_body(ordered_json::parse(kTools)));
    EXPECT_EQ(first["object"], "chat.completion");
    EXPECT_TRUE(first["id"].get<std::string>().starts_with("chatcmpl-"));
    const auto& choice = first["choices"][0];
    EXPECT_EQ(choice["message"]["role"], "assistant");
    const std::string finish = choice["finish_reason"];
    EXPECT_TRUE(finish == "stop" || finish == "length" || finish == "tool_calls") << finish;
    EXPECT_GT(first["usage"]["prompt_tokens"].get<int>(), 0);
    EXPECT_LE(first["usage"]["completion_tokens"].get<int>(), 2);
    EXPECT_TRUE(first["usage"]["prompt_tokens_details"].contains("cached_tokens"));
    const auto& cc1 = first["contextcache"];
    for (const char* k : {"group_key", "tier", "group_reused_tokens", "conversation_reused_tokens", "prefilled_tokens",
                          "diverged_at", "timings"})
        EXPECT_TRUE(cc1.contains(k)) << k;

    // The same tools in another order: the same group, linked from memory.
    auto reordered = ordered_json::parse(kTools);
    std::swap(reordered[0], reordered[1]);
    const auto second = post("/v1/chat/completions", chat_body(reordered));
    EXPECT_EQ(second["contextcache"]["group_key"], cc1["group_key"]);
    EXPECT_EQ(second["contextcache"]["tier"], "memory");
    EXPECT_GT(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
    // cached_tokens = the group prefix + what a stored conversation state gave (the same question
    // was asked before, so the whole prompt but the last tokens can come from it).
    const auto& cc2 = second["contextcache"];
    EXPECT_GT(cc2["group_reused_tokens"].get<int>(), 0);
    EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
              cc2["group_reused_tokens"].get<int>() + cc2["conversation_reused_tokens"].get<int>());
    EXPECT_EQ(cc2["prompt_tokens"].get<int>(), cc2["group_reused_tokens"].get<int>() +
                                                   cc2["conversation_reused_tokens"].get<int>() +
                                                   cc2["prefilled_tokens"].get<int>());

    // The same tools as an MCP tools/list page: the same group too.
    ordered_json page;
    page["tools"] = ordered_json::array();
    for (const auto& t : ordered_json::parse(kTools))
        page["tools"].push_back({{"name", t["function"]["name"]},
                                 {"title", "ignored"},
                                 {"description", t["function"]["description"]},
                                 {"inputSchema", t["function"]["parameters"]},
                                 {"annotations", {{"readOnlyHint", true}}}});
    page["nextCursor"] = nullptr;
    const auto mcp = post("/v1/chat/completions", chat_body(page));
    EXPECT_EQ(mcp["contextcache"]["group_key"], cc1["group_key"]);
}

TEST_F(ServerTest, StreamingFraming) {
    auto c = client();
    auto r = c.Post("/v1/chat/completions", chat_body(ordered_json::parse(kTools), 3, true).dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
    std::vector<std::string> data;
    std::istringstream in(r->body);
    std::string line;
    bool blank_after = true;
    while (std::getline(in, line)) {
        if (line.empty()) {
            blank_after = true;
            continue;
        }
        EXPECT_TRUE(blank_after) << "two data lines in one event";
        ASSERT_TRUE(line.starts_with("data: ")) << line;
        data.push_back(line.substr(6));
        blank_after = false;
    }
    ASSERT_GE(data.size(), 4u);
    EXPECT_EQ(data.back(), "[DONE]");
    const auto first = ordered_json::parse(data[0]);
    EXPECT_EQ(first["object"], "chat.completion.chunk");
    EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
    const auto usage = ordered_json::parse(data[data.size() - 2]);
    EXPECT_TRUE(usage["choices"].empty());
    EXPECT_GT(usage["usage"]["prompt_tokens"].get<int>(), 0);
    const auto last = ordered_json::parse(data[data.size() - 3]);
    EXPECT_FALSE(last["choices"][0]["finish_reason"].is_null());
    EXPECT_TRUE(last.contains("contextcache"));
    const std::string id = first["id"];
    for (size_t i = 0; i + 1 < data.size(); ++i) EXPECT_EQ(ordered_json::parse(data[i])["id"], id);
}

TEST_F(ServerTest, ErrorsHaveTheOpenAIShape) {
    auto check = [](const ordered_json& j, const char* param) {
        ASSERT_TRUE(j.contains("error")) << j.dump();
        EXPECT_EQ(j["error"]["type"], "invalid_request_error");
        EXPECT_TRUE(j["error"]["message"].is_string());
        if (param) {
            EXPECT_EQ(j["error"]["param"], param);
        }
    };
    auto b = chat_body(ordered_json::parse(kTools));
    b["max_tokens"] = "many";
    check(post("/v1/chat/completions", b, 400), "max_tokens");
    b = chat_body(ordered_json::parse(kTools));
    b["tool_choice"] = {{"type", "function"}, {"function", {{"name", "launch_rocket"}}}};  // not in tools
    check(post("/v1/chat/completions", b, 400), "tool_choice.function.name");
    b = chat_body(ordered_json::parse(kTools));
    b.erase("tools");
    b["tool_choice"] = "required";  // tool_choice without tools
    check(post("/v1/chat/completions", b, 400), "tool_choice");
    b = chat_body(ordered_json::parse(R"([{"name": "9bad"}])"));
    check(post("/v1/chat/completions", b, 400), "tools");
    b = chat_body(ordered_json::parse(kTools));
    b["messages"][1] = {{"role", "function"}, {"name", "f"}, {"content", "x"}};  // the legacy role is refused
    check(post("/v1/chat/completions", b, 400), "messages");
    b = chat_body(ordered_json::parse(kTools));
    b["some_future_field"] = {{"x", 1}};  // unknown fields are ignored
    post("/v1/chat/completions", b, 200);

    auto c = client();
    auto bad = c.Post("/v1/chat/completions", "{not json", "application/json");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
    check(ordered_json::parse(bad->body), nullptr);
    auto missing = c.Get("/no/such/endpoint");
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404);
    EXPECT_TRUE(ordered_json::parse(missing->body).contains("error"));
}

TEST_F(ServerTest, BodyOverTheLimitIs413) {
    auto b = chat_body(ordered_json::parse(kTools));
    b["messages"][1]["content"] = std::string(100 * 1024, 'x');
    auto c = client();
    auto r = c.Post("/v1/chat/completions", b.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
    const auto j = ordered_json::parse(r->body);
    EXPECT_EQ(j["error"]["code"], "payload_too_large");
}

TEST_F(ServerTest, PaperEndpoints) {
    const auto compiled = post("/tools", {{"tools", ordered_json::parse(kTools)}, {"system", "paper"}});
    const std::string key = compiled["group_key"];
    EXPECT_EQ(key.size(), 64u);
    EXPECT_EQ(compiled["n_tools"], 2);
    EXPECT_TRUE(compiled.contains("compile_ms"));
    EXPECT_TRUE(compiled.contains("prefix_tokens"));
    const auto again = post("/tools", {{"tools", ordered_json::parse(kTools)}, {"system", "paper"}});
    EXPECT_EQ(again["tier"], "memory");

    auto c = client();
    auto list = c.Get("/tools");
    ASSERT_TRUE(list);
    bool found = false;
    const auto groups = ordered_json::parse(list->body)["groups"];
    for (const auto& g : groups) found |= g["group_key"] == key;
    EXPECT_TRUE(found) << key << " not in " << list->body;

    const auto q = post("/query", {{"tools", ordered_json::parse(kTools)}, {"system", "paper"}, {"query", "hi"},
                                   {"max_new_tokens", 2}});
    for (const char* k : {"text", "tokens", "tool_call", "cache_hit", "tier", "timings", "compile"})
        EXPECT_TRUE(q.contains(k)) << k;
    EXPECT_EQ(q["compile"]["group_key"], key);
    post("/query", {{"tools", ordered_json::parse(kTools)}}, 400);  // no query

    auto del = c.Delete(("/tools/" + key).c_str());
    ASSERT_TRUE(del);
    EXPECT_EQ(del->status, 200);
    auto del2 = c.Delete(("/tools/" + key).c_str());
    ASSERT_TRUE(del2);
    EXPECT_EQ(del2->status, 404);
    auto bad = c.Delete("/tools/not-a-key");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
}

TEST_F(ServerTest, MissReasonInTheResponseExtension) {
    // /tools: a miss says why (here: whatever else this process stored), a hit has null
    const auto compiled = post("/tools", {{"tools", ordered_json::parse(kTools)}, {"system", "why-test"}});
    EXPECT_EQ(compiled["tier"], "miss");
    ASSERT_TRUE(compiled["miss_reason"].is_object()) << compiled.dump();
    EXPECT_TRUE(compiled["miss_reason"].contains("nearest"));
    const std::string key = compiled["group_key"];
    const auto again = post("/tools", {{"tools", ordered_json::parse(kTools)}, {"system", "why-test"}});
    EXPECT_EQ(again["tier"], "memory");
    EXPECT_TRUE(again["miss_reason"].is_null());

    // /query with one description edited: the stored group above is the nearest
    auto edited = ordered_json::parse(kTools);
    edited[0]["function"]["description"] = "Weather for a city, today";
    const auto q = post("/query", {{"tools", edited}, {"system", "why-test"}, {"query", "hi"}, {"max_new_tokens", 1}});
    ASSERT_TRUE(q["miss_reason"].is_object()) << q.dump();
    const auto& n = q["miss_reason"]["nearest"][0];
    EXPECT_EQ(n["group_key"], key);
    ASSERT_EQ(n["tools_changed"].size(), 1u);
    EXPECT_EQ(n["tools_changed"][0]["name"], "get_weather");
    EXPECT_EQ(n["tools_changed"][0]["field"], "description");
    EXPECT_GT(n["reusable_tokens"].get<int>(), 0);
    EXPECT_EQ(q["compile"]["miss_reason"], q["miss_reason"]);

    // chat completions: the contextcache object, with a tool removed under the chat's system prompt
    const auto full = post("/v1/chat/completions", chat_body(ordered_json::parse(kTools)));
    auto fewer = ordered_json::parse(kTools);
    fewer.erase(1);
    const auto r = post("/v1/chat/completions", chat_body(fewer));
    const auto& reason = r["contextcache"]["miss_reason"];
    ASSERT_TRUE(reason.is_object()) << r.dump();
    EXPECT_EQ(reason["nearest"][0]["group_key"], full["contextcache"]["group_key"]);
    EXPECT_EQ(reason["nearest"][0]["tools_removed"], ordered_json::array({"send_email"}));
    EXPECT_EQ(reason["nearest"][0]["system_prompt_changed"], false);
    EXPECT_TRUE(post("/v1/chat/completions", chat_body(fewer))["contextcache"]["miss_reason"].is_null());
}

// Every line of a /metrics body is a comment or a Prometheus sample.
void expect_prometheus_text(const std::string& body) {
    const std::regex sample(
        R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? [-+0-9.eE]+(Inf)?$)");
    std::istringstream in(body);
    std::string line;
    while (std::getline(in, line)) {
        if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) continue;
        EXPECT_TRUE(std::regex_match(line, sample)) << line;
    }
}

// The value of one sample line of a /metrics body (-1 when absent).
double metric(const std::string& body, const std::string& name) {
    std::istringstream in(body);
    std::string line;
    while (std::getline(in, line))
        if (line.starts_with(name + " ")) return std::stod(line.substr(name.size() + 1));
    return -1;
}

TEST_F(ServerTest, MetricsAreValidPrometheusText) {
    post("/v1/chat/completions", chat_body(ordered_json::parse(kTools)));
    auto c = client();
    auto r = c.Get("/metrics");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_NE(r->get_header_value("Content-Type").find("text/plain"), std::string::npos);
    expect_prometheus_text(r->body);
    const double inf_bucket = metric(r->body, "contextcache_ttft_seconds_bucket{le=\"+Inf\"}");
    const double count = metric(r->body, "contextcache_ttft_seconds_count");
    EXPECT_EQ(inf_bucket, count);
    EXPECT_GT(count, 0);
    for (const char* name : {"contextcache_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"}",
                             "contextcache_group_lookups_total{tier=\"memory\"}", "contextcache_reused_tokens_total",
                             "contextcache_queue_depth", "contextcache_cache_bytes{tier=\"memory\"}"})
        EXPECT_NE(r->body.find(name), std::string::npos) << name;
    EXPECT_EQ(r->body.find("contextcache_remote_"), std::string::npos) << "no remote tier configured: no remote lines";
    EXPECT_EQ(r->body.find("contextcache_kv_warm_bytes"), std::string::npos) << "no warm KV pool: no pool lines";
}

// --kv-warm-mb: /metrics shows the warm KV pool's capacity, what it holds, and where the pages of
// KV storage came from.
TEST(ServerKvPool, MetricsShowTheWarmKvPool) {
    cc::EngineOptions e = engine_options();
    e.kv_warm_bytes = size_t(8) << 20;
    cc::serve::ServerOptions o;
    o.port = 0;
    cc::serve::Server s(e, o);
    s.start();
    post_to(s.port(), chat_body(ordered_json::parse(kTools)));
    httplib::Client c("127.0.0.1", s.port());
    auto r = c.Get("/metrics");
    ASSERT_TRUE(r);
    expect_prometheus_text(r->body);
    EXPECT_EQ(metric(r->body, "contextcache_kv_warm_bytes{state=\"capacity\"}"), double(size_t(8) << 20)) << r->body;
    EXPECT_GE(metric(r->body, "contextcache_kv_warm_bytes{state=\"held\"}"), 0) << r->body;
    const double target = metric(r->body, "contextcache_kv_warm_bytes{state=\"target\"}");
    EXPECT_GE(target, 0) << r->body;
    EXPECT_LE(target, double(size_t(8) << 20)) << r->body;
    EXPECT_GE(metric(r->body, "contextcache_kv_storage_pages_bytes_total{pages=\"warm\"}"), 0) << r->body;
    EXPECT_GE(metric(r->body, "contextcache_kv_storage_pages_bytes_total{pages=\"fresh\"}"), 0) << r->body;
    EXPECT_GE(metric(r->body, "contextcache_kv_warm_returned_bytes_total"), 0) << r->body;
}

// With --remote, /metrics counts the remote tier: a replica that compiled a tool set publishes it,
// another one's request is a verified remote hit.
TEST(ServerRemote, MetricsCountTheRemoteTier) {
    CC_REQUIRE_REDIS();
    cc::test::TempDir tmp;
    cc::test::RedisServer redis(tmp.path());
    ASSERT_TRUE(redis.ok()) << redis.log();
    cc::EngineOptions e = engine_options();
    e.cache.remote.url = redis.url();
    e.cache.remote.chunk_bytes = 64 << 10;
    e.cache.remote.warm_bytes = size_t(4) << 20;
    cc::serve::ServerOptions o;
    o.port = 0;
    const auto body = chat_body(ordered_json::parse(kTools));
    auto metrics = [](const cc::serve::Server& s) {
        httplib::Client c("127.0.0.1", s.port());
        auto m = c.Get("/metrics");
        return m ? m->body : std::string();
    };
    ordered_json first;
    {
        cc::serve::Server a(e, o);
        a.start();
        const std::string at_start = metrics(a);   // before any request
        EXPECT_EQ(metric(at_start, "contextcache_remote_fetches_total{outcome=\"hit\"}"), 0) << at_start;
        first = post_to(a.port(), body);
        EXPECT_EQ(first["contextcache"]["tier"], "miss");
        EXPECT_TRUE(eventually([&] {
            return redis.get("cc:group:" + first["contextcache"]["group_key"].get<std::string>()).has_value();
        })) << "the group was not published";
        const std::string m = metrics(a);
        expect_prometheus_text(m);
        EXPECT_EQ(metric(m, "contextcache_remote_fetches_total{outcome=\"absent\"}"), 1) << m;
        EXPECT_EQ(metric(m, "contextcache_remote_compile_claims_total{outcome=\"locked\"}"), 1) << m;
        EXPECT_EQ(metric(m, "contextcache_remote_warm_bytes{state=\"capacity\"}"), double(size_t(4) << 20)) << m;
    }
    cc::serve::Server b(e, o);
    b.start();
    const ordered_json second = post_to(b.port(), body);
    EXPECT_EQ(second["contextcache"]["tier"], "remote");
    EXPECT_EQ(second["choices"], first["choices"]);
    const std::string m = metrics(b);
    expect_prometheus_text(m);
    EXPECT_EQ(metric(m, "contextcache_remote_fetches_total{outcome=\"hit\"}"), 1) << m;
    EXPECT_GT(metric(m, "contextcache_remote_bytes_total{direction=\"read\"}"), 0) << m;
    EXPECT_EQ(metric(m, "contextcache_remote_fetches_total{outcome=\"damaged\"}"), 0) << m;
}

TEST_F(ServerTest, FullQueueIs429AndADisconnectCancels) {
    const auto before = server_->snapshot();
    // A: a long generation, from a client that will hang up.
    const int a = send_raw(server_->port(), "/query", long_query());
    ASSERT_GE(a, 0);
    ASSERT_TRUE(eventually([] { return server_->snapshot().busy; }));
    // B: waits in the queue (max_queue = 1).
    std::thread b_thread([] { post("/v1/chat/completions", chat_body(ordered_json::parse(kTools), 1)); });
    ASSERT_TRUE(eventually([] { return server_->snapshot().queue_depth == 1; }));
    // C: refused at once.
    auto c = client();
    auto r = c.Post("/v1/chat/completions", chat_body(ordered_json::parse(kTools), 1).dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 429);
    EXPECT_EQ(r->get_header_value("Retry-After"), "1");
    const auto err = ordered_json::parse(r->body);
    EXPECT_EQ(err["error"]["type"], "rate_limit_error");
    // A hangs up: its generation is cancelled, so B runs and finishes well before A's 30000 tokens.
    close(a);
    b_thread.join();
    EXPECT_TRUE(eventually([&] { return server_->snapshot().cancelled == before.cancelled + 1; }));
    EXPECT_FALSE(server_->snapshot().busy);
    EXPECT_EQ(server_->snapshot().rejected_queue_full, before.rejected_queue_full + 1);
}

TEST_F(ServerTest, AStreamClosedMidwayIsCancelled) {
    const auto before = server_->snapshot();
    auto body = chat_body(ordered_json::parse(kTools), 30000, true);
    const int fd = send_raw(server_->port(), "/v1/chat/completions", body.dump());
    ASSERT_GE(fd, 0);
    char buf[4096];
    ASSERT_GT(recv(fd, buf, sizeof buf, 0), 0);  // headers and the first chunk have come
    close(fd);
    EXPECT_TRUE(eventually([&] { return server_->snapshot().cancelled == before.cancelled + 1; }));
    EXPECT_TRUE(eventually([] { return !server_->snapshot().busy; }));
}

// Cache-affinity routing (docs/server.md): the group key comes back in a header; a request may
// send it (checked for form); a hint that names another group is flagged.
TEST_F(ServerTest, GroupKeyHeaderForRouting) {
    auto c = client();
    const std::string body = chat_body(ordered_json::parse(kTools)).dump();
    auto r = c.Post("/v1/chat/completions", body, "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const std::string key = ordered_json::parse(r->body)["contextcache"]["group_key"];
    EXPECT_EQ(r->get_header_value(cc::serve::kGroupHeader), key);
    EXPECT_FALSE(r->has_header(cc::serve::kGroupHintHeader));

    r = c.Post("/v1/chat/completions", httplib::Headers{{cc::serve::kGroupHeader, key}}, body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value(cc::serve::kGroupHeader), key);
    EXPECT_FALSE(r->has_header(cc::serve::kGroupHintHeader));

    // Streamed (SSE): the same header with the stream's headers, the same key the final chunk's
    // contextcache object reports.
    r = c.Post("/v1/chat/completions", chat_body(ordered_json::parse(kTools), 2, true).dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
    EXPECT_EQ(r->get_header_value(cc::serve::kGroupHeader), key);
    const size_t at = r->body.find("\"group_key\":\"");
    if (at != std::string::npos) {
        EXPECT_EQ(r->body.substr(at + 13, 64), key);
    }
    r = c.Post("/v1/chat/completions", httplib::Headers{{cc::serve::kGroupHeader, std::string(64, 'b')}},
               chat_body(ordered_json::parse(kTools), 2, true).dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->get_header_value(cc::serve::kGroupHeader), key);
    EXPECT_EQ(r->get_header_value(cc::serve::kGroupHintHeader), "mismatch");
    // and a tool-less chat, streamed or not, names the same group both ways
    ordered_json plain = chat_body(ordered_json::array());
    plain.erase("tools");
    r = c.Post("/v1/chat/completions", plain.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const std::string plain_key = r->get_header_value(cc::serve::kGroupHeader);
    plain["stream"] = true;
    r = c.Post("/v1/chat/completions", plain.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value(cc::serve::kGroupHeader), plain_key);

    const std::string other(64, 'a');
    r = c.Post("/v1/chat/completions", httplib::Headers{{cc::serve::kGroupHeader, other}}, body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value(cc::serve::kGroupHeader), key);  // the request's own group, not the hint's
    EXPECT_EQ(r->get_header_value(cc::serve::kGroupHintHeader), "mismatch");

    r = c.Post("/v1/chat/completions", httplib::Headers{{cc::serve::kGroupHeader, "not-a-key"}}, body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(ordered_json::parse(r->body)["error"]["param"], cc::serve::kGroupHeader);

    ordered_json q;
    q["tools"] = ordered_json::parse(kTools);
    q["query"] = "Weather in Paris?";
    q["max_new_tokens"] = 1;
    r = c.Post("/query", q.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value(cc::serve::kGroupHeader), ordered_json::parse(r->body)["compile"]["group_key"]);
}

TEST(ServerOptionsTest, ApiKeyIsRequiredExceptForHealth) {
    cc::serve::ServerOptions o;
    o.port = 0;
    o.api_key = "sk-test-123";
    cc::serve::Server server(engine_options(), o);
    server.start();
    httplib::Client c("127.0.0.1", server.port());
    auto none = c.Get("/v1/models");
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401);
    EXPECT_EQ(ordered_json::parse(none->body)["error"]["code"], "invalid_api_key");
    auto wrong = c.Get("/v1/models", {{"Authorization", "Bearer sk-test-124"}});
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 401);
    auto right = c.Get("/v1/models", {{"Authorization", "Bearer sk-test-123"}});
    ASSERT_TRUE(right);
    EXPECT_EQ(right->status, 200);
    auto health = c.Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
}

TEST(ServerOptionsTest, RequestTimeoutCancels) {
    cc::serve::ServerOptions o;
    o.port = 0;
    o.request_timeout_s = 1;
    cc::serve::Server server(engine_options(), o);
    server.start();
    httplib::Client c("127.0.0.1", server.port());
    c.set_read_timeout(30, 0);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = c.Post("/query", long_query(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 408);
    EXPECT_EQ(ordered_json::parse(r->body)["error"]["code"], "request_timeout");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
    EXPECT_FALSE(server.snapshot().busy);
}

TEST(ServerOptionsTest, StopWhileBusyEndsPromptly) {
    cc::serve::ServerOptions o;
    o.port = 0;
    auto server = std::make_unique<cc::serve::Server>(engine_options(), o);
    server->start();
    const int fd = send_raw(server->port(), "/query", long_query());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(eventually([&] { return server->snapshot().busy; }));
    const auto t0 = std::chrono::steady_clock::now();
    server.reset();  // stop(): cancels the job, joins every thread
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
    close(fd);
}

// A stop right after start (Ctrl-C as the server comes up) ends the listener. httplib's stop()
// does nothing until its listen loop has begun, so a stop that came first left the listener in
// accept() for good and the join in stop() hung (about one start in 70 of `serve` then Ctrl-C).
// So start() returns only once the listener runs: checked on every cycle (without that wait it
// fails on the first), and the cycles run on a thread watched with a time limit, since a hung
// listener cannot be joined: the test then fails and ends the process.
TEST(ServerOptionsTest, StopRightAfterStartEndsTheListener) {
    constexpr int kCycles = 10;
    std::promise<int> done;
    auto finished = done.get_future();
    std::thread cycles([&done] {
        int n = 0;
        for (; n < kCycles; ++n) {
            cc::serve::ServerOptions o;
            o.port = 0;
            cc::serve::Server server(engine_options(), o);
            server.start();
            EXPECT_TRUE(server.running()) << "start() returned before the listener ran, cycle " << n;
            server.stop();
        }
        done.set_value(n);
    });
    if (finished.wait_for(120s) != std::future_status::ready) {
        ADD_FAILURE() << "a stop right after start did not end the listener (hung in accept)";
        std::fflush(nullptr);
        std::_Exit(1);
    }
    cycles.join();
    EXPECT_EQ(finished.get(), kCycles);
}

// ---- tool_choice required / a named function, on the trained toolcaller -----------------------

// The toolcaller model (resources/models/toolcaller): it writes tool-call markup, so the reply's
// shape under a forced choice is the product being checked. (Its arguments are often not valid
// JSON -- it is a weak model; docs/models.md -- and a forced call is reported as a call anyway.)
class ForcedToolChoiceTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        cc::EngineOptions e;
        e.model_spec = (cc::test::source_dir() / "resources" / "models" / "toolcaller").string();
        e.n_threads = 1;
        cc::serve::ServerOptions o;
        o.port = 0;
        server_ = new cc::serve::Server(e, o);
        server_->start();
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    static ordered_json tools() {
        return ordered_json::parse(cc::test::read_file(cc::test::source_dir() / "resources" / "toolsets" / "tools_5.json"));
    }
    static std::vector<std::string> tool_names() {
        std::vector<std::string> out;
        for (const auto& t : tools()) out.push_back(t["function"]["name"]);
        return out;
    }
    static ordered_json body(const ordered_json& tool_choice, bool stream = false) {
        ordered_json b = chat_body(tools(), 64, stream);
        b["messages"][1]["content"] = "What's the weather like in Austin, TX right now?";
        b["tool_choice"] = tool_choice;
        return b;
    }
    static httplib::Result send(const ordered_json& b, const std::string& path = "/v1/chat/completions") {
        httplib::Client c("127.0.0.1", server_->port());
        c.set_read_timeout(120, 0);
        return c.Post(path.c_str(), b.dump(), "application/json");
    }
    static cc::serve::Server* server_;
};
cc::serve::Server* ForcedToolChoiceTest::server_ = nullptr;

TEST_F(ForcedToolChoiceTest, RequiredAndNamedRepliesAreToolCalls) {
    const auto names = tool_names();
    std::vector<ordered_json> choices{"required"};
    for (const auto& n : {names[1], names[4]}) choices.push_back({{"type", "function"}, {"function", {{"name", n}}}});
    for (const auto& choice : choices) {
        const auto r = send(body(choice));
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 200) << r->body;
        const auto j = ordered_json::parse(r->body);
        const auto& c0 = j["choices"][0];
        EXPECT_EQ(c0["finish_reason"], "tool_calls") << r->body;
        ASSERT_TRUE(c0["message"]["tool_calls"].is_array()) << r->body;
        ASSERT_FALSE(c0["message"]["tool_calls"].empty()) << r->body;
        EXPECT_TRUE(c0["message"]["content"].is_null()) << r->body;
        const auto& call = c0["message"]["tool_calls"][0];
        EXPECT_EQ(call["type"], "function");
        EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_"));
        EXPECT_TRUE(call["function"]["arguments"].is_string());
        const std::string name = call["function"]["name"];
        if (choice.is_string()) EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
        else EXPECT_EQ(name, choice["function"]["name"]);
        EXPECT_GT(j["contextcache"]["forced_tokens"].get<int>(), 0);
        EXPECT_EQ(j["contextcache"]["tool_choice"], choice.is_string() ? choice : choice["function"]["name"]);
    }
}

TEST_F(ForcedToolChoiceTest, StreamedCallArrivesAsToolCallDeltas) {
    const std::string named = tool_names()[2];
    const auto r = send(body({{"type", "function"}, {"function", {{"name", named}}}}, true));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    std::istringstream in(r->body);
    std::string line, content, finish, called;
    while (std::getline(in, line)) {
        if (!line.starts_with("data: ") || line == "data: [DONE]") continue;
        const auto chunk = ordered_json::parse(line.substr(6));
        if (chunk["choices"].empty()) continue;
        const auto& c0 = chunk["choices"][0];
        if (c0["delta"].contains("content") && c0["delta"]["content"].is_string()) content += c0["delta"]["content"];
        if (c0["delta"].contains("tool_calls"))
            for (const auto& d : c0["delta"]["tool_calls"])
                if (d.contains("function") && d["function"].contains("name")) called = d["function"]["name"];
        if (!c0["finish_reason"].is_null()) finish = c0["finish_reason"];
    }
    EXPECT_EQ(called, named) << r->body;
    EXPECT_EQ(finish, "tool_calls") << r->body;
    EXPECT_EQ(content.find("<tool_call>"), std::string::npos) << "markup leaked into content: " << content;
}

// "strict": true on the tools (OpenAI's structured tool calls): under required and under auto,
// every call's arguments satisfy its tool's schema; a strict tool whose schema the matcher cannot
// follow is a 400 naming the tool and the keyword.
TEST_F(ForcedToolChoiceTest, StrictToolsGetSchemaValidArguments) {
    ordered_json tools = ForcedToolChoiceTest::tools();
    for (auto& t : tools) t["function"]["strict"] = true;
    const auto schema_of = [&](const std::string& name) {
        for (const auto& t : tools)
            if (t["function"]["name"] == name) return t["function"]["parameters"];
        return ordered_json();
    };
    size_t n_calls = 0;
    for (const char* query : {"What's the weather like in Austin, TX right now?", "Send an email to bo@example.com: running late."}) {
        for (const ordered_json& choice : {ordered_json("required"), ordered_json("auto")}) {
            ordered_json b = chat_body(tools, 128, false);
            b["messages"][1]["content"] = query;
            b["tool_choice"] = choice;
            const auto r = send(b);
            ASSERT_TRUE(r);
            ASSERT_EQ(r->status, 200) << r->body;
            const auto j = ordered_json::parse(r->body);
            const auto& message = j["choices"][0]["message"];
            if (choice == "auto" && !message.contains("tool_calls")) continue;  // it answered in text
            ASSERT_TRUE(message["tool_calls"].is_array()) << r->body;
            for (const auto& call : message["tool_calls"]) {
                const std::string name = call["function"]["name"];
                const ordered_json schema = schema_of(name);
                ASSERT_FALSE(schema.is_null()) << name;
                ordered_json args;
                ASSERT_NO_THROW(args = ordered_json::parse(call["function"]["arguments"].get<std::string>())) << r->body;
                EXPECT_TRUE(cc::json_schema_valid(schema, args)) << r->body;
                ++n_calls;
            }
        }
    }
    EXPECT_GE(n_calls, 2u);

    tools[0]["function"]["parameters"]["properties"]["zip"] = {{"type", "string"}, {"not", {{"const", "00000"}}}};
    ordered_json b = chat_body(tools, 16, false);
    b["tool_choice"] = "required";
    const auto bad = send(b);
    ASSERT_TRUE(bad);
    ASSERT_EQ(bad->status, 400) << bad->body;
    const auto error = ordered_json::parse(bad->body)["error"];
    EXPECT_EQ(error["param"], "tools");
    const std::string message = error["message"];
    EXPECT_NE(message.find("\"not\" at parameters.properties.zip"), std::string::npos) << message;
    EXPECT_NE(message.find("tool \"" + tools[0]["function"]["name"].get<std::string>() + "\""), std::string::npos) << message;
}

// A strict tool whose parameters sit under $defs behind a $ref (pydantic's and FastMCP's form) gets
// arguments its schema accepts; a $ref that points nowhere is a 400 naming the tool and the path.
TEST_F(ForcedToolChoiceTest, StrictToolsFollowReferences) {
    ordered_json tools = ForcedToolChoiceTest::tools();
    const std::string name = tools[0]["function"]["name"];
    ordered_json params = tools[0]["function"]["parameters"];
    params["additionalProperties"] = false;
    tools[0]["function"]["parameters"] = {{"$defs", {{"Args", params}}}, {"$ref", "#/$defs/Args"}};
    tools[0]["function"]["strict"] = true;
    ordered_json b = chat_body(tools, 128, false);
    b["tool_choice"] = {{"type", "function"}, {"function", {{"name", name}}}};
    const auto r = send(b);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const ordered_json reply = ordered_json::parse(r->body);
    const auto& calls = reply["choices"][0]["message"]["tool_calls"];
    ASSERT_TRUE(calls.is_array() && !calls.empty()) << r->body;
    ordered_json args;
    ASSERT_NO_THROW(args = ordered_json::parse(calls[0]["function"]["arguments"].get<std::string>())) << r->body;
    EXPECT_TRUE(cc::json_schema_valid(tools[0]["function"]["parameters"], args)) << r->body;
    EXPECT_FALSE(cc::json_schema_valid(tools[0]["function"]["parameters"], ordered_json{{"not_a_parameter", 1}}));

    tools[0]["function"]["parameters"]["$ref"] = "#/$defs/Missing";
    ordered_json bad_body = chat_body(tools, 16, false);
    bad_body["tool_choice"] = "required";
    const auto bad = send(bad_body);
    ASSERT_TRUE(bad);
    ASSERT_EQ(bad->status, 400) << bad->body;
    const std::string message = ordered_json::parse(bad->body)["error"]["message"];
    EXPECT_NE(message.find("tool \"" + name + "\""), std::string::npos) << message;
    EXPECT_NE(message.find("$ref \"#/$defs/Missing\" does not resolve"), std::string::npos) << message;
}

TEST_F(ForcedToolChoiceTest, PaperQueryTakesTheCliForm) {
    const std::string named = tool_names()[3];
    ordered_json q{{"tools", tools()}, {"query", "Book me something"}, {"max_new_tokens", 24}, {"tool_choice", named}};
    const auto r = send(q, "/query");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const auto j = ordered_json::parse(r->body);
    EXPECT_EQ(j["tool_call"]["name"], named) << r->body;
    EXPECT_GT(j["forced_tokens"].get<int>(), 0);
    q["tool_choice"] = "not_a_tool";
    const auto bad = send(q, "/query");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
    EXPECT_EQ(ordered_json::parse(bad->body)["error"]["param"], "tool_choice.function.name");
}

// ---- the engine thread's cancel discipline ----------------------------------------------------

// A cancel that comes after the job started but before its engine call is kept (the job's engine
// request token), and it does not reach the next job.
TEST(EngineWorkerTest, ACancelBeforeTheEngineCallIsKeptAndDoesNotLeak) {
    cc::serve::EngineWorker worker(engine_options(), 4);
    worker.start();
    std::promise<void> started, release;
    auto release_f = release.get_future().share();
    cc::QueryOptions q;
    q.max_new_tokens = 6;
    q.ignore_eos = true;
    bool a_cancelled = false;
    auto a = worker.submit([&](cc::Engine& engine, cc::serve::Job&) {
        engine.set_tools(cc::ToolSet::from_json_text(kTools, "tools"), "");
        started.set_value();
        release_f.wait();  // the cancel lands here, between two engine calls of this job
        try {
            engine.query("go", q);
        } catch (const cc::Cancelled&) {
            a_cancelled = true;
        }
    });
    ASSERT_TRUE(a);
    cc::StopReason b_stop = cc::StopReason::cancelled;
    auto b = worker.submit([&](cc::Engine& engine, cc::serve::Job&) { b_stop = engine.query("go", q).stop_reason; });
    ASSERT_TRUE(b);
    started.get_future().wait();
    worker.cancel(a);
    release.set_value();
    a->wait();
    b->wait();
    EXPECT_TRUE(a_cancelled) << "the cancel was lost: the query ran";
    EXPECT_EQ(b_stop, cc::StopReason::max_new_tokens) << "the cancel reached the next job";
}

// --parallel: concurrent chat completions share the engine's steps, and every reply is the reply
// the same request gets alone (the engine test compares logits; here the protocol's answer, token
// usage included). Requests mix two tool sets, lengths and a stream; one client hangs up midway.
TEST(ParallelServerTest, ConcurrentRepliesEqualTheRequestsAlone) {
    const auto tools_a = ordered_json::parse(kTools);
    ordered_json tools_b = ordered_json::array({tools_a[1]});
    std::vector<ordered_json> bodies;
    const char* questions[] = {"What is the weather in Paris?", "Email Bob", "hi", "Tell me a long story about a cat"};
    for (int i = 0; i < 8; ++i) {
        ordered_json b = chat_body(i % 3 == 2 ? tools_b : tools_a, 3 + i % 5);
        b["messages"][1]["content"] = questions[i % 4];
        bodies.push_back(std::move(b));
    }
    auto answer = [](const ordered_json& reply) {
        const auto& m = reply["choices"][0]["message"];
        return ordered_json{{"content", m["content"]},
                            {"tool_calls", m.contains("tool_calls") ? m["tool_calls"].size() : 0},
                            {"finish_reason", reply["choices"][0]["finish_reason"]},
                            {"usage", reply["usage"]["completion_tokens"]}};
    };
    std::vector<ordered_json> alone;
    {
        cc::serve::ServerOptions o;
        o.port = 0;
        cc::serve::Server server(engine_options(), o);
        server.start();
        for (const auto& b : bodies) alone.push_back(answer(post_to(server.port(), b)));
    }

    cc::EngineOptions e = engine_options();
    e.parallel = 4;
    e.step_tokens = 16;
    cc::serve::ServerOptions o;
    o.port = 0;
    o.max_queue = 16;
    cc::serve::Server server(e, o);
    server.start();
    // a client that hangs up while the others run: its request is cancelled, theirs go on
    const int hang_up = send_raw(server.port(), "/v1/chat/completions", [&] {
        ordered_json b = chat_body(tools_a, 2000);
        return b.dump();
    }());
    ASSERT_GE(hang_up, 0);
    std::vector<std::future<ordered_json>> replies;
    for (const auto& b : bodies) replies.push_back(std::async(std::launch::async, [&, b] { return post_to(server.port(), b); }));
    std::this_thread::sleep_for(50ms);
    close(hang_up);
    size_t shared = 0;
    for (size_t i = 0; i < bodies.size(); ++i) {
        const ordered_json reply = replies[i].get();
        ASSERT_FALSE(reply.is_null()) << "request " << i;
        EXPECT_EQ(answer(reply), alone[i]) << "request " << i;
        const auto& batch = reply["contextcache"]["batch"];
        EXPECT_GE(batch["steps"].get<size_t>(), 1u) << "request " << i;
        EXPECT_GE(batch["running_at_start"].get<size_t>(), 1u) << "request " << i;
        EXPECT_LE(batch["running_at_start"].get<size_t>(), 4u) << "request " << i;
        if (batch["max_sequences"].get<size_t>() > 1) ++shared;
    }
    EXPECT_GT(shared, 0u) << "no request shared a step: the server ran them one at a time";
    EXPECT_TRUE(eventually([&] { return server.snapshot().cancelled == 1; })) << "the hang-up was not cancelled";
    EXPECT_TRUE(eventually([&] { return server.snapshot().running == 0; }));
    const auto s = server.snapshot();
    EXPECT_EQ(s.parallel, 4u);
    httplib::Client c("127.0.0.1", server.port());
    auto m = c.Get("/metrics");
    ASSERT_TRUE(m);
    for (const char* name : {"contextcache_requests_running 0", "contextcache_parallel 4", "contextcache_steps_total ",
                             "contextcache_step_max_sequences ", "contextcache_queue_wait_seconds_count "})
        EXPECT_NE(m->body.find(name), std::string::npos) << name;
}

}  // namespace
