#include "core/base/big_buffer.h"

#include <cstdint>
#include <cstdlib>
#include <new>

#include <sys/mman.h>

namespace cc {
namespace {

constexpr size_t kHuge = size_t(2) << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

void* big_alloc(size_t bytes) {
    if (bytes < kBigBufferThreshold) {
        void* p = std::aligned_alloc(64, round_up(bytes == 0 ? 1 : bytes, 64));
        if (p == nullptr) throw std::bad_alloc();
        return p;
    }
    // Map one huge page more than needed and cut the ends so the start is 2 MiB aligned: the
    // kernel can only back aligned 2 MiB ranges with a huge page.
    const size_t size = round_up(bytes, kHuge);
    void* raw = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = round_up(start, kHuge);
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t end = aligned + size, raw_end = start + size + kHuge;
    if (raw_end > end) munmap(reinterpret_cast<void*>(end), raw_end - end);
    // Huge pages for the whole 2 MiB pages of the buffer only: a tail of a few bytes past the last
    // one (a packed matrix's slack for padded reads) would otherwise make a whole 2 MiB page
    // resident, 224 MB over the 112 matrices of a 0.6B model. The tail gets ordinary pages.
    const size_t whole = bytes / kHuge * kHuge;
    if (whole > 0) madvise(reinterpret_cast<void*>(aligned), whole, MADV_HUGEPAGE);   // advice: failure changes nothing
    if (size > whole) madvise(reinterpret_cast<void*>(aligned + whole), size - whole, MADV_NOHUGEPAGE);
    return reinterpret_cast<void*>(aligned);
}

void big_free(void* p, size_t bytes) noexcept {
    if (p == nullptr) return;
    if (bytes < kBigBufferThreshold) {
        std::free(p);
        return;
    }
    munmap(p, round_up(bytes, kHuge));
}

}  // namespace cc
