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
        stopping_.store(true);
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

namespace {

// Pause iterations before sleeping: about 10-20 us, enough to bridge the gaps between the parallel
// regions of one decode step. Longer spins cost more than they save when the machine is
// oversubscribed (measured: 2^14 halved decode speed with other builds running; 2^10 did not).
constexpr int kSpin = 1 << 10;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
}

}  // namespace

void ThreadPool::run_tasks(int thread) {
    for (;;) {
        if (failed_.load(std::memory_order_relaxed)) return;
        const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
        if (task >= n_tasks_) return;
        try {
            (*fn_)(task, thread);
        } catch (...) {
            std::lock_guard lock(mutex_);
            if (!error_) error_ = std::current_exception();
            failed_.store(true);
        }
    }
}

void ThreadPool::worker(int thread) {
    uint64_t seen = 0;
    for (;;) {
        for (int i = 0; i < kSpin && generation_.load(std::memory_order_acquire) == seen && !stopping_.load(); ++i) cpu_relax();
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
            if (stop_) return;
            seen = generation_.load();
        }
        run_tasks(thread);
        if (n_busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard lock(mutex_);  // the caller may be about to sleep on done_
            done_.notify_all();
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
        next_task_.store(0);
        failed_.store(false);
        error_ = nullptr;
        n_busy_.store(int(workers_.size()));
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    run_tasks(0);
    for (int i = 0; i < kSpin && n_busy_.load(std::memory_order_acquire) != 0; ++i) cpu_relax();
    std::exception_ptr error;
    {
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return n_busy_.load() == 0; });
        fn_ = nullptr;
        error = error_;
        error_ = nullptr;
    }
    if (error) std::rethrow_exception(error);
}

}  // namespace cc::cpu
