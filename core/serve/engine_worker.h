// The serving discipline's core (DESIGN §8 Serving): exactly one thread owns the Engine and runs
// jobs from a bounded FIFO queue, one at a time. HTTP handler threads submit a job and wait for it;
// a full queue is refused at once (the server answers 429). A job can be cancelled from any thread:
// a queued job is taken out of the queue; a job runs as one engine request under its own
// CancelToken (Engine::begin_request), so a cancel that comes just before it starts stops it at
// once, one that comes while it runs stops it at the next token or layer, and one that comes late
// touches nothing (the next job has another token).
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

private:
    friend class EngineWorker;
    std::function<void(Engine&, Job&)> fn_;
    CancelToken token_;  // the job's engine request
    std::atomic<double> queue_ms_{0};
    std::chrono::steady_clock::time_point submitted_;
    mutable std::mutex mutex_;
    mutable std::condition_variable cv_;
    State state_ = State::queued;
    std::exception_ptr error_;
};

class EngineWorker {
public:
    // max_queue: jobs waiting (not counting the running one); 0 = only the running job.
    EngineWorker(EngineOptions options, size_t max_queue);
    ~EngineWorker();  // stop()
    EngineWorker(const EngineWorker&) = delete;
    EngineWorker& operator=(const EngineWorker&) = delete;

    // Starts the engine thread and loads the model on it; returns the model's info or rethrows the
    // load error (the thread is then stopped).
    ModelInfo start();
    // Cancels the running job, drops the queued ones and joins the thread. Idempotent.
    void stop();

    // Queues `fn` to run on the engine thread; null when the queue is full (or stopped).
    std::shared_ptr<Job> submit(std::function<void(Engine&, Job&)> fn);
    // Any thread: a queued job leaves the queue (state dropped), a running one is cancelled.
    void cancel(const std::shared_ptr<Job>& job);

    bool stopping() const;        // stop() was called: submit() refuses everything
    size_t queue_depth() const;   // jobs waiting
    bool busy() const;            // a job is running
    size_t max_queue() const { return max_queue_; }
    const ModelInfo& model_info() const { return info_; }

private:
    void run();
    static void finish(Job& job, Job::State state, std::exception_ptr error);

    EngineOptions options_;
    size_t max_queue_;
    ModelInfo info_;
    std::unique_ptr<Engine> engine_;  // created, used and destroyed on the engine thread
    std::thread thread_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<Job>> queue_;
    std::shared_ptr<Job> running_;
    bool stopping_ = false;
};

}  // namespace cc::serve
