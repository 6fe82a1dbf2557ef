// A small fixed pool of worker threads owned by one backend (no globals).
//
// parallel_for hands out task indices 0..n_tasks-1 dynamically; the calling thread works too.
// Which thread runs a task never changes its result: kernels write only to memory owned by the
// task, and per-thread scratch is indexed by the thread id passed to the task.
// A decode step is a few hundred short parallel regions, so hand-off latency matters: workers
// spin for a short while (kSpin pause iterations, some microseconds) for the next region
// before they sleep on the condition variable, and the caller spins likewise for the region's end.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cc::cpu {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);  // n_threads >= 1, including the caller
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int n_threads() const { return n_threads_; }

    // Runs fn(task, thread) for every task in [0, n_tasks); thread is in [0, n_threads()).
    // Returns when all tasks are done; rethrows the first exception a task threw.
    void parallel_for(int64_t n_tasks, const std::function<void(int64_t task, int thread)>& fn);

    // Every core this process may run on (sched_getaffinity), at least 1.
    static int available_cores();

private:
    void worker(int thread);
    void run_tasks(int thread);

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable done_;
    std::atomic<uint64_t> generation_{0};  // bumped (under mutex_) for each parallel_for
    std::atomic<int> n_busy_{0};           // workers still inside the current generation
    bool stop_ = false;                    // guarded by mutex_
    std::atomic<bool> stopping_{false};    // stop_, readable while spinning
    const std::function<void(int64_t, int)>* fn_ = nullptr;
    int64_t n_tasks_ = 0;
    std::atomic<int64_t> next_task_{0};
    std::atomic<bool> failed_{false};
    std::exception_ptr error_;             // guarded by mutex_
};

}  // namespace cc::cpu
