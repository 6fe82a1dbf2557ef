#include "core/serve/stats.h"

#include <sstream>

namespace cc::serve {

std::map<std::string, uint64_t> by_tier_names(const std::map<Tier, uint64_t>& by_tier) {
    std::map<std::string, uint64_t> out;
    for (const auto& [tier, n] : by_tier) out[tier_name(tier)] = n;
    return out;
}

const std::vector<double>& ServerStats::ttft_buckets_s() {
    static const std::vector<double> b{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
    return b;
}

void ServerStats::record(const RequestLogEntry& e) {
    std::function<void(const RequestLogEntry&)> listener;
    {
        std::lock_guard lock(mutex_);
        ++requests_total_;
        ++requests_[{e.endpoint, e.status}];
        if (e.status == 429) ++rejected_;
        if (e.status == 499) ++cancelled_;
        if (e.tier && e.status == 200) {
            ++by_tier_[*e.tier];
            reused_tokens_ += e.cached_tokens;
            prefilled_tokens_ += e.prefilled_tokens;
            generated_tokens_ += e.generated_tokens;
            queue_wait_sum_s_ += e.queue_ms / 1000.0;
            ++queue_wait_count_;
            if (e.ttft_ms > 0) {
                if (ttft_counts_.empty()) ttft_counts_.assign(ttft_buckets_s().size() + 1, 0);
                const double s = e.ttft_ms / 1000.0;
                size_t i = 0;
                while (i < ttft_buckets_s().size() && s > ttft_buckets_s()[i]) ++i;
                ++ttft_counts_[i];
                ttft_sum_s_ += s;
                ++ttft_count_;
            }
        }
        recent_.push_back(e);
        while (recent_.size() > log_size_) recent_.pop_front();
        listener = listener_;
    }
    if (listener) listener(e);
}

void ServerStats::set_cache_usage(const CacheUsage& usage) {
    std::lock_guard lock(mutex_);
    cache_ = usage;
}

void ServerStats::set_listener(std::function<void(const RequestLogEntry&)> listener) {
    std::lock_guard lock(mutex_);
    listener_ = std::move(listener);
}

StatsSnapshot ServerStats::snapshot() const {
    std::lock_guard lock(mutex_);
    StatsSnapshot s;
    s.requests = requests_total_;
    s.by_tier = by_tier_;
    for (const auto& [tier, n] : by_tier_) {
        s.lookups += n;
        if (tier != Tier::miss) s.hits += n;
    }
    s.hit_rate = s.lookups ? static_cast<double>(s.hits) / static_cast<double>(s.lookups) : 0.0;
    s.reused_tokens = reused_tokens_;
    s.prefilled_tokens = prefilled_tokens_;
    s.generated_tokens = generated_tokens_;
    s.rejected_queue_full = rejected_;
    s.cancelled = cancelled_;
    s.cache = cache_;
    s.recent.assign(recent_.begin(), recent_.end());
    return s;
}

namespace {

// A label value with \, " and newlines escaped (Prometheus text format).
std::string label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') out.push_back('\\');
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out.push_back(c);
    }
    return out;
}

}  // namespace

std::string ServerStats::prometheus(size_t queue_depth, size_t max_queue, size_t running, size_t parallel,
                                    const SchedulerTotals& steps) const {
    std::lock_guard lock(mutex_);
    std::ostringstream o;
    o << "# HELP contextcache_requests_total HTTP requests answered, by endpoint and status.\n"
      << "# TYPE contextcache_requests_total counter\n";
    for (const auto& [key, n] : requests_)
        o << "contextcache_requests_total{endpoint=\"" << label(key.first) << "\",status=\"" << key.second << "\"} " << n
          << "\n";
    o << "# HELP contextcache_group_lookups_total Requests that linked a tool-set group, by the tier it came from.\n"
      << "# TYPE contextcache_group_lookups_total counter\n";
    for (const Tier tier : {Tier::gpu, Tier::memory, Tier::disk, Tier::remote, Tier::miss}) {
        const auto it = by_tier_.find(tier);
        o << "contextcache_group_lookups_total{tier=\"" << tier << "\"} " << (it == by_tier_.end() ? 0 : it->second)
          << "\n";
    }
    o << "# HELP contextcache_reused_tokens_total Prompt tokens reused from the cache (group + conversation).\n"
      << "# TYPE contextcache_reused_tokens_total counter\n"
      << "contextcache_reused_tokens_total " << reused_tokens_ << "\n"
      << "# HELP contextcache_prefilled_tokens_total Prompt tokens computed by requests.\n"
      << "# TYPE contextcache_prefilled_tokens_total counter\n"
      << "contextcache_prefilled_tokens_total " << prefilled_tokens_ << "\n"
      << "# HELP contextcache_generated_tokens_total Tokens generated.\n"
      << "# TYPE contextcache_generated_tokens_total counter\n"
      << "contextcache_generated_tokens_total " << generated_tokens_ << "\n";
    o << "# HELP contextcache_ttft_seconds Time to first token on the engine (queue time not included).\n"
      << "# TYPE contextcache_ttft_seconds histogram\n";
    uint64_t cumulative = 0;
    const auto& bounds = ttft_buckets_s();
    for (size_t i = 0; i <= bounds.size(); ++i) {
        cumulative += ttft_counts_.empty() ? 0 : ttft_counts_[i];
        o << "contextcache_ttft_seconds_bucket{le=\"";
        if (i < bounds.size()) o << bounds[i];
        else o << "+Inf";
        o << "\"} " << cumulative << "\n";
    }
    o << "contextcache_ttft_seconds_sum " << ttft_sum_s_ << "\n"
      << "contextcache_ttft_seconds_count " << ttft_count_ << "\n";
    o << "# HELP contextcache_queue_depth Jobs waiting for the engine thread.\n"
      << "# TYPE contextcache_queue_depth gauge\n"
      << "contextcache_queue_depth " << queue_depth << "\n"
      << "# HELP contextcache_queue_capacity The queue's bound (more is answered 429).\n"
      << "# TYPE contextcache_queue_capacity gauge\n"
      << "contextcache_queue_capacity " << max_queue << "\n"
      << "# HELP contextcache_engine_busy 1 while a request runs on the engine.\n"
      << "# TYPE contextcache_engine_busy gauge\n"
      << "contextcache_engine_busy " << (running > 0 ? 1 : 0) << "\n"
      << "# HELP contextcache_requests_running Requests running on the engine now.\n"
      << "# TYPE contextcache_requests_running gauge\n"
      << "contextcache_requests_running " << running << "\n"
      << "# HELP contextcache_parallel Requests that may run at once (--parallel).\n"
      << "# TYPE contextcache_parallel gauge\n"
      << "contextcache_parallel " << parallel << "\n"
      << "# HELP contextcache_queue_wait_seconds Time requests waited in the queue before they ran.\n"
      << "# TYPE contextcache_queue_wait_seconds summary\n"
      << "contextcache_queue_wait_seconds_sum " << queue_wait_sum_s_ << "\n"
      << "contextcache_queue_wait_seconds_count " << queue_wait_count_ << "\n"
      << "# HELP contextcache_steps_total Engine steps run (continuous batching; 0 without --parallel).\n"
      << "# TYPE contextcache_steps_total counter\n"
      << "contextcache_steps_total " << steps.steps << "\n"
      << "# HELP contextcache_step_rows_total Token rows run in those steps, all requests together.\n"
      << "# TYPE contextcache_step_rows_total counter\n"
      << "contextcache_step_rows_total " << steps.rows << "\n"
      << "# HELP contextcache_step_sequences_total Requests per step, summed (divided by steps: the mean batch).\n"
      << "# TYPE contextcache_step_sequences_total counter\n"
      << "contextcache_step_sequences_total " << steps.sequences << "\n"
      << "# HELP contextcache_step_max_sequences The most requests that have shared one step.\n"
      << "# TYPE contextcache_step_max_sequences gauge\n"
      << "contextcache_step_max_sequences " << steps.max_sequences << "\n"
      << "# HELP contextcache_chunked_prefills_total Forward calls cut into chunks by the per-step token budget.\n"
      << "# TYPE contextcache_chunked_prefills_total counter\n"
      << "contextcache_chunked_prefills_total " << steps.chunked_calls << "\n"
      << "# HELP contextcache_first_token_steps_total Steps that ran requests' first-token prefills ahead of decoding "
         "requests.\n"
      << "# TYPE contextcache_first_token_steps_total counter\n"
      << "contextcache_first_token_steps_total " << steps.first_token_steps << "\n";
    o << "# HELP contextcache_cache_bytes Bytes held by each cache tier.\n"
      << "# TYPE contextcache_cache_bytes gauge\n"
      << "contextcache_cache_bytes{tier=\"gpu\"} " << cache_.gpu_bytes << "\n"
      << "contextcache_cache_bytes{tier=\"memory\"} " << cache_.memory_bytes << "\n"
      << "contextcache_cache_bytes{tier=\"disk\"} " << cache_.disk_bytes << "\n"
      << "contextcache_cache_bytes{tier=\"conversation\"} " << cache_.conversation_bytes << "\n"
      << "# HELP contextcache_cache_groups Groups held by each memory tier.\n"
      << "# TYPE contextcache_cache_groups gauge\n"
      << "contextcache_cache_groups{tier=\"gpu\"} " << cache_.gpu_groups << "\n"
      << "contextcache_cache_groups{tier=\"memory\"} " << cache_.memory_groups << "\n";
    if (cache_.kv_pool.capacity_bytes > 0) {
        const WarmPages::Stats& k = cache_.kv_pool;
        o << "# HELP contextcache_kv_warm_bytes Memory made resident for KV blocks (--kv-warm-mb): its capacity, "
             "the fill target (--kv-warm-fill: the capacity, or what blocks have lacked so far) and what it holds "
             "now, unused.\n"
          << "# TYPE contextcache_kv_warm_bytes gauge\n"
          << "contextcache_kv_warm_bytes{state=\"capacity\"} " << k.capacity_bytes << "\n"
          << "contextcache_kv_warm_bytes{state=\"target\"} " << k.target_bytes << "\n"
          << "contextcache_kv_warm_bytes{state=\"held\"} " << k.held_bytes << "\n"
          << "# HELP contextcache_kv_storage_pages_bytes_total Bytes of KV storage (buffers from 2 MiB) by where their "
             "pages came from: the warm pool or fresh memory.\n"
          << "# TYPE contextcache_kv_storage_pages_bytes_total counter\n"
          << "contextcache_kv_storage_pages_bytes_total{pages=\"warm\"} " << k.warm_bytes_taken << "\n"
          << "contextcache_kv_storage_pages_bytes_total{pages=\"fresh\"} " << k.cold_bytes_taken << "\n"
          << "# HELP contextcache_kv_warm_returned_bytes_total Bytes of freed KV storage the pool kept.\n"
          << "# TYPE contextcache_kv_warm_returned_bytes_total counter\n"
          << "contextcache_kv_warm_returned_bytes_total " << k.returned_bytes << "\n";
    }
    if (cache_.remote) {
        const RemoteCounters& r = cache_.remote_counters;
        o << "# HELP contextcache_remote_fetches_total Group fetches from the remote tier, by outcome (a hit is verified).\n"
          << "# TYPE contextcache_remote_fetches_total counter\n"
          << "contextcache_remote_fetches_total{outcome=\"hit\"} " << r.hits << "\n"
          << "contextcache_remote_fetches_total{outcome=\"absent\"} " << r.misses << "\n"
          << "contextcache_remote_fetches_total{outcome=\"incomplete\"} " << r.incomplete << "\n"
          << "contextcache_remote_fetches_total{outcome=\"damaged\"} " << r.damaged << "\n"
          << "contextcache_remote_fetches_total{outcome=\"unavailable\"} " << r.errors << "\n"
          << "# HELP contextcache_remote_publishes_total Groups written to the remote tier, by outcome.\n"
          << "# TYPE contextcache_remote_publishes_total counter\n"
          << "contextcache_remote_publishes_total{outcome=\"ok\"} " << r.published << "\n"
          << "contextcache_remote_publishes_total{outcome=\"error\"} " << r.publish_errors << "\n"
          << "# HELP contextcache_remote_bytes_total Group file bytes read from and written to the remote tier.\n"
          << "# TYPE contextcache_remote_bytes_total counter\n"
          << "contextcache_remote_bytes_total{direction=\"read\"} " << r.bytes_read << "\n"
          << "contextcache_remote_bytes_total{direction=\"written\"} " << r.bytes_written << "\n"
          << "# HELP contextcache_remote_compile_claims_total Misses shared with other replicas: compiled here under the lock, "
             "waited for another's compile, or waited past --remote-wait-ms and compiled here.\n"
          << "# TYPE contextcache_remote_compile_claims_total counter\n"
          << "contextcache_remote_compile_claims_total{outcome=\"locked\"} " << r.locks_taken << "\n"
          << "contextcache_remote_compile_claims_total{outcome=\"waited\"} " << r.waited << "\n"
          << "contextcache_remote_compile_claims_total{outcome=\"timed_out\"} " << r.wait_timeouts << "\n"
          << "# HELP contextcache_remote_warm_bytes The warm pool for fetched groups (--remote-warm-mb): its capacity and "
             "what it holds now.\n"
          << "# TYPE contextcache_remote_warm_bytes gauge\n"
          << "contextcache_remote_warm_bytes{state=\"capacity\"} " << r.warm_capacity_bytes << "\n"
          << "contextcache_remote_warm_bytes{state=\"held\"} " << r.warm_held_bytes << "\n"
          << "# HELP contextcache_remote_fetched_pages_bytes_total Bytes of fetch buffers (from 2 MiB) by where their "
             "pages came from: the warm pool or fresh memory.\n"
          << "# TYPE contextcache_remote_fetched_pages_bytes_total counter\n"
          << "contextcache_remote_fetched_pages_bytes_total{pages=\"warm\"} " << r.warm_fetched_bytes << "\n"
          << "contextcache_remote_fetched_pages_bytes_total{pages=\"fresh\"} " << r.cold_fetched_bytes << "\n";
    }
    return o.str();
}

}  // namespace cc::serve
