// Continuous batching (DESIGN §8 Batching): the forward calls of every request in flight are run
// together, a step at a time, through Backend::forward_batch.
//
// Each request runs the engine's ordinary data path on its own thread (link, prefill, sample,
// decode, constraints, stop strings, conversations): nothing of it changes. Its forward calls come
// here instead of going to the backend directly and wait for a step. One stepping thread builds
// each step from the calls waiting at that moment (requests join and leave between steps):
//   - the calls with the least left to run go first (decode rows, then short prefills such as a
//     cache hit's query suffix, then chunks of long prefills such as a compile), so running
//     replies and cache hits are not held up behind a long prompt;
//   - a step holds at most `max_step_tokens` rows; a longer prefill is cut into chunks that run in
//     consecutive steps (chunked prefill), each chunk appending to its suffix block before the
//     next one attends to it;
//   - a request's first-token call (the prefill that ends in its first sampled token: a cache
//     hit's query suffix, a conversation's new turn) of at most `first_token_rows` rows runs in a
//     step of its own, ahead of the decode rows waiting with it, so its
//     TTFT is one small step rather than one step of every running reply; each decode call is
//     passed over at most once; when many arrive together, at most `first_token_step_rows` of
//     their rows go in one step, the first arrivals first;
//   - a cancelled call (its flag set) leaves before the next step, its suffix block put back as
//     it was before the call.
// Exact: a row's result depends only on its own inputs and the K/V it attends to (backend.h), so
// neither the other sequences in a step nor the chunk boundaries change a bit of any call's
// logits; tests/engine/test_step_scheduler.cpp checks it with ==.
#pragma once

#include "core/backend/backend.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace cc {

struct StepSchedulerOptions {
    // Rows per step, all sequences together (the per-step token budget). Decode rows are one
    // each, so this also bounds how long a running reply waits while prefills share its steps.
    int max_step_tokens = 256;
    // How long a step may wait, after its first call arrived, for the other active requests'
    // calls (each samples its token, streams it and comes back between two steps): without it the
    // stepping thread would start a step with whichever call came first and the others would ride
    // the next one, a whole step later. The window is `gather_step_fraction` of the previous
    // step's duration, within [gather_us, gather_max_us]: waiting costs at most that fraction of a
    // step, and a request left out costs all of one. On 2 cores, 8 requests need 1-5 ms to come
    // back (docs/benchmarks.md, "The gather window"). A step never waits once every active request
    // has a call waiting. gather_us = 0 and gather_step_fraction = 0: never wait.
    int gather_us = 1000;
    int gather_max_us = 10000;
    double gather_step_fraction = 0.1;
    // First-token priority: when calls marked CallKind::first_token with at most this many rows
    // left wait beside other calls, they run first in a step of their own (other calls that have
    // already been passed over once are not passed over again: a decoding reply waits for at most
    // one such step per token). Costs the running replies one extra streaming of the weights per
    // arrival; saves each arrival most of a full step (docs/benchmarks.md, "First-token
    // priority": on 2 AVX2 cores, 8 clients, TTFT p50 7-15% lower in two sittings, aggregate
    // decode within the machine's spread). 0: every call shares steps by least-left-first only.
    int first_token_rows = 64;
    // A burst of such calls (requests arriving together): at most this many of their rows per step,
    // whole calls in arrival order (at least one), the rest in the next steps. One step of everyone's
    // first tokens gives each arrival the whole burst's time; steps of a few give the first ones
    // theirs sooner, at the cost of one more streaming of the weights per extra step
    // (docs/benchmarks.md, "A burst of arrivals": 8 cache hits arriving together on 2 AVX-512 BF16
    // cores, TTFT mean and p50 12% lower, p95 within the spread). 0: no cap, the burst shares one step.
    int first_token_step_rows = 128;
};

// What a forward call is to its request: the prefill whose last row gives the request's first
// token (its TTFT), or any later call (a decode step, a constraint's forced tokens).
enum class CallKind { first_token, later };

// What the steps that served one call (or, added up, one request) looked like.
struct StepStats {
    size_t steps = 0;               // steps that ran rows of this call
    size_t max_sequences = 0;       // the most sequences that shared one of those steps
    size_t sum_sequences = 0;       // sequences per step, summed over those steps (mean = sum / steps)
    size_t max_rows = 0;            // the most rows (all sequences) in one of those steps
    double wait_ms = 0;             // time between the call's arrival and its last step's start, not running
    void add(const StepStats& o);
    double mean_sequences() const { return steps ? double(sum_sequences) / double(steps) : 0.0; }
};

// The scheduler's totals since it started (for /metrics).
struct SchedulerTotals {
    uint64_t steps = 0;
    uint64_t rows = 0;
    uint64_t sequences = 0;          // sequences per step, summed
    uint64_t max_sequences = 0;      // the most in one step
    uint64_t chunked_calls = 0;      // calls that needed more than one step
    uint64_t cancelled_calls = 0;
    uint64_t first_token_steps = 0;  // steps that ran first-token calls alone, ahead of others waiting
    size_t waiting = 0;              // calls waiting now
};

class StepScheduler {
public:
    StepScheduler(Backend& backend, StepSchedulerOptions options);
    ~StepScheduler();  // fails the calls still waiting (std::runtime_error) and joins the thread
    StepScheduler(const StepScheduler&) = delete;
    StepScheduler& operator=(const StepScheduler&) = delete;

    // Backend::forward's contract, run inside shared steps; blocks the calling thread until its
    // last row has run. The logits go to `logits` (logit_rows.size() x vocab floats, the caller's,
    // as in SequenceRows). `cancel` is checked before every step: when set, the call throws
    // Cancelled and its suffix block is as it was. Validation errors (check_forward_request, the
    // size of `logits`) are thrown at once, before the call joins a step. `stats` (optional) gets
    // this call's steps. `argmax` (optional): each logit row's greedy token, as SequenceRows::argmax
    // (`logits` may then be empty).
    void forward(std::span<const token_id> tokens, const KvView& kv, std::span<const int> logit_rows,
                 std::span<float> logits, const std::atomic<bool>* cancel = nullptr, StepStats* stats = nullptr,
                 CallKind kind = CallKind::later, std::span<token_id> argmax = {});

    SchedulerTotals totals() const;
    int max_step_tokens() const { return options_.max_step_tokens; }

    // A request that will make forward calls (for the step's gather window): the scheduler
    // counts the active ones. While a request waits for something else than a step (another
    // request's compile), it steps aside (Idle) so that no step waits for it.
    class Active {
    public:
        explicit Active(StepScheduler* s) : s_(s) { if (s_) s_->add_active(+1); }
        ~Active() { if (s_) s_->add_active(-1); }
        Active(const Active&) = delete;
        Active& operator=(const Active&) = delete;
    private:
        StepScheduler* s_;
    };
    class Idle {
    public:
        explicit Idle(StepScheduler* s) : s_(s) { if (s_) s_->add_active(-1); }
        ~Idle() { if (s_) s_->add_active(+1); }
        Idle(const Idle&) = delete;
        Idle& operator=(const Idle&) = delete;
    private:
        StepScheduler* s_;
    };

private:
    struct Call;
    void run();
    // The calls of the next step (under mutex_): first-token calls alone when they may go first,
    // else least left first; rows up to the budget, the last call possibly cut to a chunk.
    std::vector<std::pair<Call*, int>> choose_step();
    // Runs one step over `take` (call, rows this step); on a failure that is not a cancel, each
    // sequence is run alone so that only the failing call fails.
    void run_step(const std::vector<std::pair<Call*, int>>& take);
    void finish(Call& call, std::exception_ptr error);
    void add_active(int delta);

    Backend& backend_;
    StepSchedulerOptions options_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<Call*> waiting_;
    bool stopping_ = false;
    uint64_t next_arrival_ = 0;
    int active_ = 0;  // requests that will make forward calls (Active)
    std::chrono::steady_clock::duration last_step_{};  // the previous step's duration (the gather window)
    SchedulerTotals totals_;
    std::thread thread_;
};

}  // namespace cc
