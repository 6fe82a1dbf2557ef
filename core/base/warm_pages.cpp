#include "core/base/warm_pages.h"

#include "core/base/big_buffer.h"

#include <algorithm>

#include <sys/mman.h>

namespace cc {
namespace {

size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

// fill() maps and touches this much at a time, outside the lock.
constexpr size_t kFillBlock = size_t(32) << 20;

}  // namespace

WarmPages::WarmPages(size_t capacity_bytes, WarmFill fill) : capacity_(capacity_bytes / kPiece * kPiece), mode_(fill) {
    stats_.capacity_bytes = capacity_;
    stats_.target_bytes = mode_ == WarmFill::up_front ? capacity_ : 0;
}

WarmPages::~WarmPages() {
    for (std::byte* piece : pieces_) munmap(piece, kPiece);
}

size_t WarmPages::fill() {
    // What the pool lacks now, and no more: takes while it fills are made up by the next call
    // (keep_filled's, once they leave the pool below half), never by this one, so a caller that
    // saw the pool full and then took from it finds exactly what it left.
    size_t deficit = 0;
    {
        std::lock_guard lock(mutex_);
        if (stats_.held_bytes < stats_.target_bytes) deficit = stats_.target_bytes - stats_.held_bytes;
    }
    size_t added = 0;
    while (!stop_ && added < deficit) {
        const size_t want = std::min(kFillBlock, deficit - added);
        std::byte* block = nullptr;
        try {
            block = static_cast<std::byte*>(big_alloc(want));  // whole pieces: every one MADV_HUGEPAGE
        } catch (const std::bad_alloc&) {
            break;  // no memory to keep warm: the pool holds what it has
        }
        // One write per 4 KiB page makes every page resident (one fault per huge page where the
        // kernel gives them, one per 4 KiB page where not).
        volatile unsigned char* bytes = reinterpret_cast<volatile unsigned char*>(block);
        for (size_t off = 0; off < want; off += 4096) bytes[off] = 0;
        std::lock_guard lock(mutex_);
        size_t kept = 0;
        for (; kept < want && stats_.held_bytes < stats_.target_bytes; kept += kPiece) {
            pieces_.push_back(block + kept);
            stats_.held_bytes += kPiece;
        }
        stats_.filled_bytes += kept;
        added += kept;
        if (kept < want) {
            munmap(block + kept, want - kept);  // buffers given back meanwhile filled it
            break;
        }
    }
    return added;
}

void WarmPages::keep_filled() {
    while (!stop_) {
        fill();
        std::unique_lock lock(mutex_);
        low_.wait(lock, [this] { return stop_ || stats_.held_bytes < stats_.target_bytes / 2; });
    }
}

void WarmPages::stop() {
    {
        std::lock_guard lock(mutex_);  // so a keep_filled() between its check and its wait sees it
        stop_ = true;
    }
    low_.notify_all();
}

bool WarmPages::bypasses(size_t size) const {
    return mode_ == WarmFill::on_demand && size > capacity_ / 4;
}

void* WarmPages::take(size_t bytes) {
    if (bytes < kPiece) return big_alloc(bytes);
    const size_t size = round_up(bytes, kPiece);
    if (bypasses(size)) {
        void* p = big_alloc(size);
        std::lock_guard lock(mutex_);
        stats_.cold_bytes_taken += size;
        return p;
    }
    auto* base = static_cast<std::byte*>(big_alloc(size));  // fresh: where the pool has no piece
    std::vector<std::byte*> warm;
    bool low = false;
    {
        std::lock_guard lock(mutex_);
        const size_t n = std::min(size / kPiece, pieces_.size());
        warm.assign(pieces_.end() - static_cast<ptrdiff_t>(n), pieces_.end());  // the last given back: hottest
        pieces_.resize(pieces_.size() - n);
        stats_.held_bytes -= n * kPiece;
        // On demand, the target grows by what this take lacked: the next one like it finds it warm.
        if (mode_ == WarmFill::on_demand && n < size / kPiece)
            stats_.target_bytes = std::min(capacity_, stats_.target_bytes + (size / kPiece - n) * kPiece);
        low = stats_.held_bytes < stats_.target_bytes / 2;
    }
    if (low) low_.notify_one();  // a keep_filled() thread refills it
    size_t moved = 0;
    for (size_t i = 0; i < warm.size(); ++i) {
        std::byte* dst = base + i * kPiece;
        // Moves the piece's page tables over the fresh range at dst (which it unmaps).
        if (mremap(warm[i], kPiece, kPiece, MREMAP_MAYMOVE | MREMAP_FIXED, dst) != MAP_FAILED) {
            moved += kPiece;
            continue;
        }
        // Not expected (both ranges are whole, aligned anonymous mappings); the piece is dropped
        // and dst mapped fresh again in case the failed call unmapped it.
        munmap(warm[i], kPiece);
        if (mmap(dst, kPiece, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
            for (size_t j = i + 1; j < warm.size(); ++j) munmap(warm[j], kPiece);
            munmap(base, size);
            throw std::bad_alloc();
        }
        madvise(dst, kPiece, MADV_HUGEPAGE);
    }
    std::lock_guard lock(mutex_);
    stats_.warm_bytes_taken += moved;
    stats_.cold_bytes_taken += size - moved;
    return base;
}

void WarmPages::give(void* p, size_t bytes) noexcept {
    if (p == nullptr) return;
    if (bytes < kPiece) {
        big_free(p, bytes);
        return;
    }
    auto* base = static_cast<std::byte*>(p);
    const size_t size = round_up(bytes, kPiece);
    size_t kept = 0;
    if (!bypasses(size)) {
        std::lock_guard lock(mutex_);
        bool room = true;  // push_back must not throw here (noexcept): reserve first
        try {
            pieces_.reserve(pieces_.size() + size / kPiece);
        } catch (const std::bad_alloc&) {
            room = false;  // keep none: unmapped below
        }
        for (; room && kept < size && stats_.held_bytes < capacity_; kept += kPiece) {
            pieces_.push_back(base + kept);
            stats_.held_bytes += kPiece;
        }
        stats_.returned_bytes += kept;
    }
    if (kept < size) munmap(base + kept, size - kept);
}

WarmPages::Stats WarmPages::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

void* warm_or_big_alloc(WarmPages* pool, size_t bytes) {
    return pool ? pool->take(bytes) : big_alloc(bytes);
}

void warm_or_big_free(WarmPages* pool, void* p, size_t bytes) noexcept {
    if (pool)
        pool->give(p, bytes);
    else
        big_free(p, bytes);
}

}  // namespace cc
