#include "core/cpu/thread_pool.h"

#include <sched.h>

#include <stdexcept>

namespace cc::cpu {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads) {
    if (n_threads < 1) throw std::invalid_argument("ThreadPool: n_threads must be >= 1");
    workers_.reserve(size_t(n_threads - 1));
    for (int t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { worker(t); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
}

int ThreadPool::available_cores() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    unsigned hw = std::thread::hardware_concurrency();
    return hw > 0 ? int(hw) : 1;
}

void ThreadPool::run_tasks(int thread) {
    for (;;) {
        int64_t task;
        {
            std::lock_guard lock(mutex_);
            if (next_task_ >= n_tasks_ || error_) return;
            task = next_task_++;
        }
        try {
            (*fn_)(task, thread);
        } catch (...) {
            std::lock_guard lock(mutex_);
            if (!error_) error_ = std::current_exception();
        }
    }
}

void ThreadPool::worker(int thread) {
    uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
        }
        run_tasks(thread);
        {
            std::lock_guard lock(mutex_);
            if (--n_busy_ == 0) done_.notify_all();
        }
    }
}

void ThreadPool::parallel_for(int64_t n_tasks, const std::function<void(int64_t, int)>& fn) {
    if (n_tasks <= 0) return;
    if (n_threads_ == 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        fn_ = &fn;
        n_tasks_ = n_tasks;
        next_task_ = 0;
        error_ = nullptr;
        n_busy_ = int(workers_.size());
        ++generation_;
    }
    wake_.notify_all();
    run_tasks(0);
    std::exception_ptr error;
    {
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return n_busy_ == 0; });
        fn_ = nullptr;
        error = error_;
        error_ = nullptr;
    }
    if (error) std::rethrow_exception(error);
}

}  // namespace cc::cpu
