#include "core/serve/engine_worker.h"

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
    : options_(std::move(options)), max_queue_(max_queue) {}

EngineWorker::~EngineWorker() { stop(); }

ModelInfo EngineWorker::start() {
    std::promise<ModelInfo> loaded;
    auto result = loaded.get_future();
    thread_ = std::thread([this, &loaded] {
        try {
            engine_ = std::make_unique<Engine>(options_);
            loaded.set_value(engine_->load_model());
        } catch (...) {
            engine_.reset();
            loaded.set_exception(std::current_exception());
            return;
        }
        run();
        engine_.reset();  // the engine dies on the thread that owned it
    });
    try {
        info_ = result.get();
    } catch (...) {
        thread_.join();
        throw;
    }
    return info_;
}

void EngineWorker::stop() {
    std::deque<std::shared_ptr<Job>> dropped;
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        dropped.swap(queue_);
        if (running_) running_->token_.cancel();
    }
    cv_.notify_all();
    for (auto& job : dropped) finish(*job, Job::State::dropped, nullptr);
    if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Job> EngineWorker::submit(std::function<void(Engine&, Job&)> fn) {
    auto job = std::make_shared<Job>();
    job->fn_ = std::move(fn);
    job->submitted_ = std::chrono::steady_clock::now();
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || !thread_.joinable() || queue_.size() >= max_queue_ + (running_ ? 0 : 1)) return nullptr;
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
    if (was_queued) finish(*job, Job::State::dropped, nullptr);
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
    return running_ != nullptr;
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

void EngineWorker::run() {
    for (;;) {
        std::shared_ptr<Job> job;
        {
            std::unique_lock lock(mutex_);
            cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (stopping_) return;
            job = queue_.front();
            queue_.pop_front();
            running_ = job;
        }
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
            running_.reset();
        }
        finish(*job, Job::State::done, error);
    }
}

}  // namespace cc::serve
