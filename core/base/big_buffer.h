// Memory for large buffers that are filled once and streamed often (packed weights, KV blocks, a
// forward pass's activations): anonymous pages the kernel may back with 2 MiB transparent huge
// pages (madvise(MADV_HUGEPAGE), honoured in the "madvise" and "always" THP modes). Filling 1 GB
// then takes ~500 page faults instead of ~260,000, each of which costs microseconds (more in a
// VM), and streaming it needs far fewer TLB entries. Small requests are plain aligned_alloc.
// The bytes come zeroed from the kernel when huge; callers that need zeros still write them.
#pragma once

#include <cstddef>

namespace cc {

inline constexpr size_t kBigBufferThreshold = size_t(2) << 20;   // 2 MiB: from here, mmap + MADV_HUGEPAGE

// 64-byte aligned (2 MiB aligned from kBigBufferThreshold on); throws std::bad_alloc.
void* big_alloc(size_t bytes);
// `bytes` as given to big_alloc.
void big_free(void* p, size_t bytes) noexcept;

// An allocator for std::vector over big_alloc.
template <class T>
struct BigAllocator {
    using value_type = T;
    BigAllocator() noexcept = default;
    template <class U>
    BigAllocator(const BigAllocator<U>&) noexcept {}
    T* allocate(size_t n) { return static_cast<T*>(big_alloc(n * sizeof(T))); }
    void deallocate(T* p, size_t n) noexcept { big_free(p, n * sizeof(T)); }
    template <class U>
    bool operator==(const BigAllocator<U>&) const noexcept { return true; }
};

}  // namespace cc
