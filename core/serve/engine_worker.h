// The serving discipline's core (DESIGN §8 Serving): one Engine, `EngineOptions::parallel` runner
// threads taking jobs from a bounded FIFO queue. Up to `parallel` shared jobs (chat completions:
// Engine::chat on the request's own tool set) run at once, their forward calls batched into shared
// steps by the engine's StepScheduler (continuous batching: a job joins the next step when it
// starts and leaves when it ends). An exclusive job (one that uses or changes the engine's current
// tool set, or the cache as a whole: /tools, /query, cache removal) runs alone: it waits at the
// head of the queue until the running jobs end, and nothing starts beside it. The queue is FIFO,
// so an exclusive job is never overtaken. HTTP handler threads submit a job and wait for it; a full
// queue is refused at once (the server answers 429). A job can be cancelled from any thread: a
// queued job is taken out of the queue; a job runs as one engine request under its own
// CancelToken (Engine::begin_request on its runner thread), so a cancel that comes just before it
// starts stops it at once, one that comes while it runs stops it at the next step, token or layer,
// and one that comes late touches nothing (the next job has another token).
#pragma once

#include "core/engine/engine.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cc::serve {

class EngineWorker;

// One job's state, shared by the submitting thread and the engine thread.
class Job {
public:
    enum class State { queued, running, done, dropped };  // dropped: cancelled before it ran

    // True once cancel() was called (the engine's calls for this job stop by themselves).
    bool cancelled() const { return token_.cancelled(); }
    State state() const;
    // Waits until the job is done or dropped, or until `timeout` passes; true when it is over.
    bool wait_for(std::chrono::milliseconds timeout) const;
    void wait() const;
    // The exception the job's function threw, if any (after it is done).
    std::exception_ptr error() const;
    // How long the job waited in the queue (ms; set when it starts).
    double queue_ms() const { return queue_ms_.load(); }
    // Jobs running when this one started, itself included (1 = it ran alone at first).
    size_t running_at_start() const { return running_at_start_.load(); }
    bool exclusive() const { return exclusive_; }

private:
    friend class EngineWorker;
    std::function<void(Engine&, Job&)> fn_;
    CancelToken token_;  // the job's engine request
    std::atomic<double> queue_ms_{0};
    std::atomic<size_t> running_at_start_{0};
    bool exclusive_ = false;
    std::chrono::steady_clock::time_point submitted_;
    mutable std::mutex mutex_;
    mutable std::condition_variable cv_;
    State state_ = State::queued;
    std::exception_ptr error_;
};

class EngineWorker {
public:
    // max_queue: jobs waiting (not counting the running ones); 0 = only the running jobs.
    // options.parallel (at least 1): the jobs that may run at once.
    EngineWorker(EngineOptions options, size_t max_queue);
    ~EngineWorker();  // stop()
    EngineWorker(const EngineWorker&) = delete;
    EngineWorker& operator=(const EngineWorker&) = delete;

    // Starts the runner threads and loads the model on the first; returns the model's info or
    // rethrows the load error (the threads are then stopped).
    ModelInfo start();
    // Cancels the running jobs, drops the queued ones and joins the threads. Idempotent.
    void stop();

    // Queues `fn` to run on a runner thread (alone when `exclusive`); null when the queue is full
    // (or stopped).
    std::shared_ptr<Job> submit(std::function<void(Engine&, Job&)> fn, bool exclusive = false);
    // Any thread: a queued job leaves the queue (state dropped), a running one is cancelled.
    void cancel(const std::shared_ptr<Job>& job);

    bool stopping() const;        // stop() was called: submit() refuses everything
    size_t queue_depth() const;   // jobs waiting
    bool busy() const;            // a job is running
    size_t running() const;       // jobs running
    size_t parallel() const { return parallel_; }
    const EngineOptions& options() const { return options_; }
    size_t max_queue() const { return max_queue_; }
    // The engine's step totals (zeros when it does not batch); any thread.
    SchedulerTotals step_totals() const;
    const ModelInfo& model_info() const { return info_; }

private:
    void run();
    // Under mutex_: whether the job at the head of the queue may start now.
    bool head_may_start() const;
    static void finish(Job& job, Job::State state, std::exception_ptr error);

    EngineOptions options_;
    size_t max_queue_;
    size_t parallel_;
    ModelInfo info_;
    std::unique_ptr<Engine> engine_;  // created and destroyed on the first runner thread
    std::vector<std::thread> threads_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<Job>> queue_;
    std::vector<std::shared_ptr<Job>> running_;
    bool stopping_ = false;
};

}  // namespace cc::serve
