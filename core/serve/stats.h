// What the server has done, for GET /status, GET /metrics and the app's Server panel: counters,
// a TTFT histogram, the last requests with their timing split and tier, and the cache usage the
// engine thread reports after each job. Thread-safe; read through snapshot() or a callback.
#pragma once

#include "core/base/warm_pages.h"
#include "core/engine/step_scheduler.h"
#include "core/store/remote_tier.h"
#include "core/store/tier.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace cc::serve {

// One finished HTTP request.
struct RequestLogEntry {
    int64_t unix_ms = 0;        // when it finished
    std::string method;
    std::string endpoint;       // the route ("/v1/chat/completions", "/tools/{key}", ...)
    int status = 0;             // 499: the client went away before the answer
    bool stream = false;
    std::optional<Tier> tier;   // where the group came from; none: no engine work
    std::string group_key;
    double queue_ms = 0;        // waiting in the queue for a runner
    size_t batch_sequences = 0; // the most requests that shared one of its engine steps (0: no steps)
    double link_ms = 0;         // lookup + disk load + upload of the group prefix
    double compile_ms = 0;      // the prefix computed inside this request (a miss)
    double prefill_ms = 0;
    double ttft_ms = 0;         // engine: submit to the first token (queue time not included)
    double decode_ms = 0;
    double total_ms = 0;        // the whole HTTP request, queue included
    size_t prompt_tokens = 0;
    size_t cached_tokens = 0;   // reused: group + conversation
    size_t prefilled_tokens = 0;
    size_t generated_tokens = 0;
    std::string error;          // the error message for 4xx/5xx
};

// Cache usage, as the engine thread last saw it.
struct CacheUsage {
    size_t gpu_bytes = 0, gpu_groups = 0;
    size_t memory_bytes = 0, memory_groups = 0;
    uint64_t disk_bytes = 0;
    size_t conversation_bytes = 0, conversation_entries = 0;
    bool remote = false;              // a remote tier is configured (--remote)
    RemoteCounters remote_counters;   // what it did, in this process
    WarmPages::Stats kv_pool;         // the warm KV pool (--kv-warm-mb); zeros without one
};

struct StatsSnapshot {
    uint64_t requests = 0;
    uint64_t lookups = 0;                    // requests that linked a group (chat, query, compile)
    uint64_t hits = 0;                       // ... found it in a tier
    double hit_rate = 0;                     // hits / lookups (0 when none)
    std::map<Tier, uint64_t> by_tier;        // lookups by the tier they found the group in
    uint64_t reused_tokens = 0;
    uint64_t prefilled_tokens = 0;
    uint64_t generated_tokens = 0;
    uint64_t rejected_queue_full = 0;        // 429s
    uint64_t cancelled = 0;                  // 499s: disconnects that cancelled their job
    size_t queue_depth = 0;
    size_t max_queue = 0;
    bool busy = false;
    size_t running = 0;                      // requests running now (at most parallel)
    size_t parallel = 1;                     // requests that may run at once (--parallel)
    CacheUsage cache;
    std::vector<RequestLogEntry> recent;     // oldest first
};

// by_tier by tier name, in the names' order: GET /status's "by_tier" and the app's summary.
std::map<std::string, uint64_t> by_tier_names(const std::map<Tier, uint64_t>& by_tier);

class ServerStats {
public:
    explicit ServerStats(size_t log_size = 256) : log_size_(log_size) {}
    void record(const RequestLogEntry& e);
    void set_cache_usage(const CacheUsage& usage);
    // Called (on the request's thread) after each record(); the app marshals it to its GUI thread.
    void set_listener(std::function<void(const RequestLogEntry&)> listener);
    StatsSnapshot snapshot() const;  // queue_depth/max_queue/busy are filled by the Server
    // Prometheus text exposition (version 0.0.4), with the gauges the server passes in: the queue,
    // the running requests and the engine's step totals.
    std::string prometheus(size_t queue_depth, size_t max_queue, size_t running, size_t parallel,
                           const SchedulerTotals& steps) const;

    // TTFT histogram bucket bounds (seconds), Prometheus style (cumulative, +Inf last).
    static const std::vector<double>& ttft_buckets_s();

private:
    mutable std::mutex mutex_;
    size_t log_size_;
    std::deque<RequestLogEntry> recent_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;  // (endpoint, status) -> count
    std::map<Tier, uint64_t> by_tier_;
    std::vector<uint64_t> ttft_counts_;  // per bucket, not cumulative; last = +Inf
    double ttft_sum_s_ = 0;
    uint64_t ttft_count_ = 0;
    uint64_t reused_tokens_ = 0, prefilled_tokens_ = 0, generated_tokens_ = 0;
    uint64_t requests_total_ = 0, rejected_ = 0, cancelled_ = 0;
    double queue_wait_sum_s_ = 0;   // requests that reached the engine: their queue wait
    uint64_t queue_wait_count_ = 0;
    CacheUsage cache_;
    std::function<void(const RequestLogEntry&)> listener_;
};

}  // namespace cc::serve
