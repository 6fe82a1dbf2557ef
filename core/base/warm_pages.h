// A pool of resident memory for buffers that are filled from a socket and then kept (a group
// fetched from the remote tier becomes that group's storage). On the VMs we measure on the first
// touch of a fresh page costs 0.6–3 ms per MB, more than the network: a replica's first remote
// fetches ran at 0.1–0.3 GB/s while a fetch into warm memory runs at 1–3 GB/s (docs/deploy.md,
// "A fresh process's first fetch"). The pool pays that cost ahead of time (fill(), on a
// background thread when the tier is made) and takes back the pages of buffers that are freed
// (a group evicted from the memory tier), up to its capacity; everything past it is unmapped.
//
// Pieces are 2 MiB, 2 MiB-aligned ranges (a transparent huge page where the kernel gives one). A
// buffer of n bytes is a fresh 2 MiB-aligned mapping of round_up(n, 2 MiB) bytes into which the
// pool's warm pieces are moved with mremap(2): page tables move, no byte is copied and no page
// faults; the pieces the pool lacks stay fresh (faulted on first write, as without a pool).
// keep_filled() refills it in the background whenever takes leave it below half its fill target.
// The fill target is its capacity (WarmFill::up_front: everything made resident ahead of time, as
// the remote tier wants for a first fetch), or grows with demand (WarmFill::on_demand: it starts
// at nothing and grows by the bytes each take could not be given warm, up to the capacity), so a
// server that runs one request at a time keeps about one block's pages warm rather than the
// whole capacity (docs/benchmarks.md, "A warm KV pool that grows with demand"). On demand,
// buffers of more than a quarter of the capacity (a group's compiled KV, not a request's block)
// neither come from the pool nor teach it nor go back to it: one compile would otherwise make
// the pool keep a whole group's size resident beside the group.
// Buffers below 2 MiB are big_alloc's (not pooled). The bytes of a reused piece are whatever the
// buffer that gave it back held (this process's own data): the caller fills every byte it reads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace cc {

// What fill() and keep_filled() make resident (given-back pieces are kept up to the capacity
// either way).
enum class WarmFill {
    up_front,   // the whole capacity
    on_demand,  // a target that starts at 0 and grows by the bytes each take lacked, up to the capacity;
                // buffers of more than a quarter of the capacity bypass the pool
};

class WarmPages {
public:
    static constexpr size_t kPiece = size_t(2) << 20;

    // capacity rounded down to whole pieces; 0 = no pool
    explicit WarmPages(size_t capacity_bytes, WarmFill fill = WarmFill::up_front);
    ~WarmPages();                               // unmaps what it holds (buffers out keep theirs)
    WarmPages(const WarmPages&) = delete;
    WarmPages& operator=(const WarmPages&) = delete;

    // Maps and touches the pieces the pool lacks when called (its fill target less what it holds);
    // returns the bytes added. Takes made while it runs are not made up by the same call (the
    // next one does: keep_filled's, once they leave the pool below half). Safe on any thread
    // beside take/give; stops early (between blocks of 32 MiB) once stop() is called.
    size_t fill();
    // Fills the pool, then again whenever take() leaves it below half its fill target, until stop():
    // the body of a thread of its own that keeps a pool ready (the CPU backend's KV pool runs it at
    // the lowest priority, so refilling takes idle CPU time, not a request's).
    void keep_filled();
    void stop();

    // A 64-byte aligned buffer of at least `bytes` (2 MiB-aligned from 2 MiB on). Throws bad_alloc.
    void* take(size_t bytes);
    // `bytes` as given to take. Its pieces return to the pool while it is below capacity.
    void give(void* p, size_t bytes) noexcept;

    struct Stats {
        size_t capacity_bytes = 0;
        size_t target_bytes = 0;        // what fill() makes resident: the capacity, or what demand has asked for
        size_t held_bytes = 0;          // warm pieces waiting in the pool
        uint64_t warm_bytes_taken = 0;  // bytes of buffers that came from the pool's pieces
        uint64_t cold_bytes_taken = 0;  // bytes of buffers the pool had no pieces for
        uint64_t filled_bytes = 0;      // bytes fill() touched
        uint64_t returned_bytes = 0;    // bytes given back and kept
    };
    Stats stats() const;

private:
    bool bypasses(size_t size) const;  // on demand: a buffer (whole pieces) too big for the pool
    const size_t capacity_;
    const WarmFill mode_;
    std::atomic<bool> stop_{false};
    mutable std::mutex mutex_;
    std::condition_variable low_;     // take() left the pool below half its fill target, or stop()
    std::vector<std::byte*> pieces_;  // each a resident kPiece range
    Stats stats_;
};

// An allocator over a WarmPages (null: big_alloc) for a vector filled right after it is sized (a
// socket read): resize leaves the new elements as allocated (zero when fresh and huge, from the
// kernel; the previous owner's bytes when warm) instead of writing zeros over them first, a whole
// pass over the buffer for nothing. It holds the pool, so a buffer never outlives it.
template <class T>
struct WarmAllocator {
    using value_type = T;
    using propagate_on_container_move_assignment = std::true_type;
    using propagate_on_container_swap = std::true_type;
    WarmAllocator() noexcept = default;
    explicit WarmAllocator(std::shared_ptr<WarmPages> pool) noexcept : pool(std::move(pool)) {}
    template <class U>
    WarmAllocator(const WarmAllocator<U>& o) noexcept : pool(o.pool) {}
    T* allocate(size_t n);
    void deallocate(T* p, size_t n) noexcept;
    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
    template <class U>
    bool operator==(const WarmAllocator<U>& o) const noexcept {
        return pool == o.pool;
    }
    std::shared_ptr<WarmPages> pool;
};

void* warm_or_big_alloc(WarmPages* pool, size_t bytes);
void warm_or_big_free(WarmPages* pool, void* p, size_t bytes) noexcept;

template <class T>
T* WarmAllocator<T>::allocate(size_t n) {
    return static_cast<T*>(warm_or_big_alloc(pool.get(), n * sizeof(T)));
}
template <class T>
void WarmAllocator<T>::deallocate(T* p, size_t n) noexcept {
    warm_or_big_free(pool.get(), p, n * sizeof(T));
}

}  // namespace cc
