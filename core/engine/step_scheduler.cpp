#include "core/engine/step_scheduler.h"

#include "core/base/cancelled.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <stdexcept>
#include <string>

namespace cc {

void StepStats::add(const StepStats& o) {
    steps += o.steps;
    max_sequences = std::max(max_sequences, o.max_sequences);
    sum_sequences += o.sum_sequences;
    max_rows = std::max(max_rows, o.max_rows);
    wait_ms += o.wait_ms;
}

using Clock = std::chrono::steady_clock;

// One forward call waiting for (or in the middle of) its steps. Lives on its caller's stack; the
// caller sleeps until `finished`.
struct StepScheduler::Call {
    std::span<const token_id> tokens;
    KvView kv;
    std::span<const int> logit_rows;
    const std::atomic<bool>* cancel = nullptr;
    int n0_before = 0;               // the suffix block's positions before the call (put back on a failure)
    int done = 0;                    // rows run so far
    uint64_t arrival = 0;
    CallKind kind = CallKind::later;
    bool passed_over = false;  // a first-token step ran ahead of it once already
    Clock::time_point arrived = Clock::now();
    double busy_ms = 0;              // time inside the steps that ran its rows
    StepStats stats;
    std::span<float> logits;         // the caller's, logit_rows.size() x vocab, filled chunk by chunk
    std::span<token_id> argmax;      // the caller's greedy tokens, one a logit row (or none)
    bool finished = false;
    std::exception_ptr error;
    int remaining() const { return int(tokens.size()) - done; }
};

StepScheduler::StepScheduler(Backend& backend, StepSchedulerOptions options) : backend_(backend), options_(options) {
    if (options_.max_step_tokens < 1)
        throw std::invalid_argument("the per-step token budget must be at least 1, not " + std::to_string(options_.max_step_tokens));
    thread_ = std::thread([this] { run(); });
}

StepScheduler::~StepScheduler() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void StepScheduler::forward(std::span<const token_id> tokens, const KvView& kv, std::span<const int> logit_rows,
                            std::span<float> logits, const std::atomic<bool>* cancel, StepStats* stats, CallKind kind,
                            std::span<token_id> argmax) {
    if (kv.suffix == nullptr) throw std::runtime_error("forward: the view has no suffix block");
    const int vocab = backend_.config().vocab_size;
    check_forward_request(tokens, kv, kv.prefix_tokens > 0 ? kv.prefix : nullptr, *kv.suffix, logit_rows, vocab);
    // the backend's own checks of the storage, before the call joins a step
    check_batch_request(std::span<const SequenceRows>(std::array{SequenceRows{tokens, kv, logit_rows, logits, argmax}}),
                        vocab);
    if (tokens.empty()) return;
    if (cancel != nullptr && cancel->load()) throw Cancelled();

    Call call;
    call.tokens = tokens;
    call.kv = kv;
    call.logit_rows = logit_rows;
    call.cancel = cancel;
    call.kind = kind;
    call.n0_before = kv.suffix->n_tokens();
    call.logits = logits;
    call.argmax = argmax;
    {
        std::unique_lock lock(mutex_);
        if (stopping_) throw std::runtime_error("the engine is shutting down");
        call.arrival = next_arrival_++;
        waiting_.push_back(&call);
        ++totals_.waiting;
        cv_.notify_all();
        cv_.wait(lock, [&] { return call.finished; });
    }
    if (stats != nullptr) stats->add(call.stats);
    if (call.error) std::rethrow_exception(call.error);
}

void StepScheduler::add_active(int delta) {
    {
        std::lock_guard lock(mutex_);
        active_ += delta;
    }
    cv_.notify_all();
}

SchedulerTotals StepScheduler::totals() const {
    std::lock_guard lock(mutex_);
    return totals_;
}

// Under mutex_: the call leaves the queue, its suffix block put back when it failed.
void StepScheduler::finish(Call& call, std::exception_ptr error) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &call));
    --totals_.waiting;
    if (error) call.kv.suffix->truncate(call.n0_before);
    call.error = std::move(error);
    call.stats.wait_ms = std::chrono::duration<double, std::milli>(Clock::now() - call.arrived).count() - call.busy_ms;
    if (call.stats.steps > 1) ++totals_.chunked_calls;
    call.finished = true;
}

void StepScheduler::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        cv_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
        if (stopping_) {
            while (!waiting_.empty())
                finish(*waiting_.front(), std::make_exception_ptr(std::runtime_error("the engine is shutting down")));
            cv_.notify_all();
            return;
        }
        // Cancelled calls leave before the step.
        bool any_cancelled = false;
        for (size_t i = 0; i < waiting_.size();) {
            Call* c = waiting_[i];
            if (c->cancel != nullptr && c->cancel->load()) {
                finish(*c, std::make_exception_ptr(Cancelled()));
                ++totals_.cancelled_calls;
                any_cancelled = true;
            } else {
                ++i;
            }
        }
        if (any_cancelled) cv_.notify_all();
        if (waiting_.empty()) continue;
        // The gather window: the other active requests are sampling their next token.
        const auto window = std::clamp<Clock::duration>(
            std::chrono::duration_cast<Clock::duration>(last_step_ * options_.gather_step_fraction),
            std::chrono::microseconds(options_.gather_us),
            std::chrono::microseconds(std::max(options_.gather_us, options_.gather_max_us)));
        if (window > Clock::duration::zero() && int(waiting_.size()) < active_) {
            Clock::time_point first = waiting_.front()->arrived;
            for (const Call* c : waiting_) first = std::min(first, c->arrived);
            cv_.wait_until(lock, first + window, [&] { return stopping_ || int(waiting_.size()) >= active_; });
            if (stopping_) continue;
        }

        const auto take = choose_step();
        lock.unlock();
        const auto step_start = Clock::now();
        run_step(take);
        const auto step_end = Clock::now();
        const double step_ms = std::chrono::duration<double, std::milli>(step_end - step_start).count();
        lock.lock();
        last_step_ = step_end - step_start;

        size_t rows = 0;
        for (const auto& [c, n] : take) rows += size_t(n);
        ++totals_.steps;
        totals_.rows += rows;
        totals_.sequences += take.size();
        totals_.max_sequences = std::max<uint64_t>(totals_.max_sequences, take.size());
        for (const auto& [c, n] : take) {
            c->busy_ms += step_ms;
            ++c->stats.steps;
            c->stats.sum_sequences += take.size();
            c->stats.max_sequences = std::max(c->stats.max_sequences, take.size());
            c->stats.max_rows = std::max(c->stats.max_rows, rows);
            if (c->error) finish(*c, c->error);
            else if (c->remaining() == 0) finish(*c, nullptr);
        }
        cv_.notify_all();
    }
}

std::vector<std::pair<StepScheduler::Call*, int>> StepScheduler::choose_step() {
    std::vector<Call*> order(waiting_.begin(), waiting_.end());
    std::sort(order.begin(), order.end(), [](const Call* a, const Call* b) {
        return a->remaining() != b->remaining() ? a->remaining() < b->remaining() : a->arrival < b->arrival;
    });
    // First-token priority: the short first-token calls go alone when everything else waiting may
    // be passed over (has not been yet).
    auto first = [&](const Call* c) {
        return c->kind == CallKind::first_token && c->remaining() <= options_.first_token_rows;
    };
    // A burst of them: at most first_token_step_rows of their rows per step (whole calls, at least
    // one, in arrival order so that none waits behind later ones); the others wait for the next
    // steps, so the first arrivals' first tokens do not wait for everyone's.
    if (options_.first_token_step_rows > 0) {
        std::vector<const Call*> firsts;
        for (const Call* c : order)
            if (first(c)) firsts.push_back(c);
        std::sort(firsts.begin(), firsts.end(), [](const Call* a, const Call* b) { return a->arrival < b->arrival; });
        int rows = 0;
        size_t n_kept = 0;
        for (; n_kept < firsts.size(); ++n_kept) {
            if (n_kept > 0 && rows + firsts[n_kept]->remaining() > options_.first_token_step_rows) break;
            rows += firsts[n_kept]->remaining();
        }
        std::erase_if(order, [&](const Call* c) {
            return std::find(firsts.begin() + std::ptrdiff_t(n_kept), firsts.end(), c) != firsts.end();
        });
    }
    const auto n_first = std::count_if(order.begin(), order.end(), first);
    const bool alone =
        n_first > 0 && size_t(n_first) < order.size() &&
        std::none_of(order.begin(), order.end(), [&](const Call* c) { return !first(c) && c->passed_over; });
    if (alone) {
        ++totals_.first_token_steps;
        for (Call* c : order)
            if (!first(c)) c->passed_over = true;
        std::erase_if(order, [&](const Call* c) { return !first(c); });
    }
    std::vector<std::pair<Call*, int>> take;
    int budget = options_.max_step_tokens;
    for (Call* c : order) {
        if (budget == 0) break;
        const int n = std::min(c->remaining(), budget);
        take.emplace_back(c, n);
        budget -= n;
    }
    return take;
}

void StepScheduler::run_step(const std::vector<std::pair<Call*, int>>& take) {
    const size_t vocab = size_t(backend_.config().vocab_size);
    // Per call: the rows of this chunk that want logits (local to the chunk), which of the call's
    // logit rows they are, and where the step writes their logits and greedy tokens: straight into
    // the call's storage when they are consecutive there (always, for logit rows in ascending
    // order), else into `staged` and copied into place after the step.
    struct Staged {
        std::vector<float> logits;
        std::vector<token_id> argmax;
    };
    std::vector<std::vector<int>> rows(take.size());
    std::vector<std::vector<size_t>> slots(take.size());
    std::vector<Staged> staged(take.size());
    std::vector<SequenceRows> seqs;
    for (size_t i = 0; i < take.size(); ++i) {
        const auto& [c, n] = take[i];
        for (size_t k = 0; k < c->logit_rows.size(); ++k) {
            const int r = c->logit_rows[k];
            if (r >= c->done && r < c->done + n) {
                rows[i].push_back(r - c->done);
                slots[i].push_back(k);
            }
        }
        const size_t m = slots[i].size();
        const bool consecutive = m == 0 || slots[i].back() - slots[i].front() + 1 == m;
        std::span<float> out;
        std::span<token_id> ids;
        if (consecutive && m > 0) {
            if (!c->logits.empty()) out = c->logits.subspan(slots[i].front() * vocab, m * vocab);
            if (!c->argmax.empty()) ids = c->argmax.subspan(slots[i].front(), m);
        } else if (!consecutive) {
            if (!c->logits.empty()) staged[i].logits.resize(m * vocab);
            if (!c->argmax.empty()) staged[i].argmax.resize(m);
            out = staged[i].logits;
            ids = staged[i].argmax;
        }
        seqs.push_back(SequenceRows{c->tokens.subspan(size_t(c->done), size_t(n)), c->kv, rows[i], out, ids});
    }
    auto scatter = [&](size_t i) {
        Call* c = take[i].first;
        for (size_t j = 0; j < slots[i].size(); ++j) {
            if (!staged[i].logits.empty())
                std::copy_n(staged[i].logits.begin() + std::ptrdiff_t(j * vocab), vocab,
                            c->logits.begin() + std::ptrdiff_t(slots[i][j] * vocab));
            if (!staged[i].argmax.empty()) c->argmax[slots[i][j]] = staged[i].argmax[j];
        }
        c->done += take[i].second;
    };
    try {
        backend_.forward_batch(seqs, nullptr);
        for (size_t i = 0; i < take.size(); ++i) scatter(i);
    } catch (...) {
        // No suffix block changed; run each sequence alone so that only the one at fault fails.
        if (take.size() == 1) {
            take[0].first->error = std::current_exception();
            return;
        }
        for (size_t i = 0; i < take.size(); ++i) {
            try {
                backend_.forward_batch(std::span<const SequenceRows>(&seqs[i], 1), nullptr);
                scatter(i);
            } catch (...) {
                take[i].first->error = std::current_exception();
            }
        }
    }
}

}  // namespace cc
