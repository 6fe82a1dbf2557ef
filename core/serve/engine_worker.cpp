#include "core/serve/engine_worker.h"

#include <algorithm>
#include <future>

namespace cc::serve {

Job::State Job::state() const {
    std::lock_guard lock(mutex_);
    return state_;
}

bool Job::wait_for(std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return state_ == State::done || state_ == State::dropped; });
}

void Job::wait() const {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return state_ == State::done || state_ == State::dropped; });
}

std::exception_ptr Job::error() const {
    std::lock_guard lock(mutex_);
    return error_;
}

EngineWorker::EngineWorker(EngineOptions options, size_t max_queue)
    : options_(std::move(options)), max_queue_(max_queue), parallel_(size_t(std::max(1, options_.parallel))) {}

EngineWorker::~EngineWorker() { stop(); }

ModelInfo EngineWorker::start() {
    std::promise<ModelInfo> loaded;
    auto result = loaded.get_future();
    // The first runner makes and loads the engine (and destroys it after the others have ended);
    // the others start once it is loaded.
    threads_.emplace_back([this, &loaded] {
        try {
            engine_ = std::make_unique<Engine>(options_);
            loaded.set_value(engine_->load_model());
        } catch (...) {
            engine_.reset();
            loaded.set_exception(std::current_exception());
            return;
        }
        run();
    });
    try {
        info_ = result.get();
    } catch (...) {
        threads_.front().join();
        threads_.clear();
        throw;
    }
    for (size_t i = 1; i < parallel_; ++i) threads_.emplace_back([this] { run(); });
    return info_;
}

void EngineWorker::stop() {
    std::deque<std::shared_ptr<Job>> dropped;
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        dropped.swap(queue_);
        for (auto& job : running_) job->token_.cancel();
    }
    cv_.notify_all();
    for (auto& job : dropped) finish(*job, Job::State::dropped, nullptr);
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    threads_.clear();
    engine_.reset();  // after every runner has ended
}

std::shared_ptr<Job> EngineWorker::submit(std::function<void(Engine&, Job&)> fn, bool exclusive) {
    auto job = std::make_shared<Job>();
    job->fn_ = std::move(fn);
    job->exclusive_ = exclusive;
    job->submitted_ = std::chrono::steady_clock::now();
    {
        std::lock_guard lock(mutex_);
        // max_queue waiting beyond the free runners (a job for a free runner does not wait)
        const size_t free_runners = parallel_ - std::min(parallel_, running_.size());
        if (stopping_ || threads_.empty() || queue_.size() >= max_queue_ + free_runners) return nullptr;
        queue_.push_back(job);
    }
    cv_.notify_all();
    return job;
}

void EngineWorker::cancel(const std::shared_ptr<Job>& job) {
    job->token_.cancel();  // a running job's engine calls see it; a job about to start, too
    bool was_queued = false;
    {
        std::lock_guard lock(mutex_);
        for (auto it = queue_.begin(); it != queue_.end(); ++it) {
            if (*it == job) {
                queue_.erase(it);
                was_queued = true;
                break;
            }
        }
    }
    if (was_queued) {
        finish(*job, Job::State::dropped, nullptr);
        cv_.notify_all();  // the job behind it may start now
    }
}

bool EngineWorker::stopping() const {
    std::lock_guard lock(mutex_);
    return stopping_;
}

size_t EngineWorker::queue_depth() const {
    std::lock_guard lock(mutex_);
    return queue_.size();
}

bool EngineWorker::busy() const {
    std::lock_guard lock(mutex_);
    return !running_.empty();
}

size_t EngineWorker::running() const {
    std::lock_guard lock(mutex_);
    return running_.size();
}

SchedulerTotals EngineWorker::step_totals() const {
    // engine_ is set before start() returns and reset only in stop()
    return engine_ ? engine_->step_totals() : SchedulerTotals{};
}

void EngineWorker::finish(Job& job, Job::State state, std::exception_ptr error) {
    {
        std::lock_guard lock(job.mutex_);
        job.state_ = state;
        job.error_ = std::move(error);
        job.fn_ = nullptr;  // release what the job captured
    }
    job.cv_.notify_all();
}

bool EngineWorker::head_may_start() const {
    if (queue_.empty()) return false;
    if (queue_.front()->exclusive_) return running_.empty();
    if (running_.size() >= parallel_) return false;
    return std::none_of(running_.begin(), running_.end(), [](const auto& j) { return j->exclusive_; });
}

void EngineWorker::run() {
    for (;;) {
        std::shared_ptr<Job> job;
        {
            std::unique_lock lock(mutex_);
            cv_.wait(lock, [&] { return stopping_ || head_may_start(); });
            if (stopping_) return;
            job = queue_.front();
            queue_.pop_front();
            running_.push_back(job);
            job->running_at_start_.store(running_.size());
        }
        cv_.notify_all();  // the next job may start beside this one
        job->queue_ms_.store(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - job->submitted_).count());
        {
            std::lock_guard lock(job->mutex_);
            job->state_ = Job::State::running;
        }
        std::exception_ptr error;
        if (!job->cancelled()) {
            engine_->begin_request(job->token_);
            try {
                job->fn_(*engine_, *job);
            } catch (...) {
                error = std::current_exception();
            }
            engine_->end_request();
        }
        {
            std::lock_guard lock(mutex_);
            running_.erase(std::find(running_.begin(), running_.end(), job));
        }
        cv_.notify_all();  // an exclusive job may be waiting for the running ones to end
        finish(*job, Job::State::done, error);
    }
}

}  // namespace cc::serve
