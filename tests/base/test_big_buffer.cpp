// core/base/big_buffer: aligned, zeroed, writable memory below and above the huge-page threshold,
// and a std::vector over it.
#include "core/base/big_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace cc {
namespace {

TEST(BigBuffer, SmallAndLargeAreAlignedWritableAndFreed) {
    for (const size_t bytes : {size_t(1), size_t(100), kBigBufferThreshold - 1, kBigBufferThreshold,
                               kBigBufferThreshold + 12345, size_t(9) << 20}) {
        auto* p = static_cast<unsigned char*>(big_alloc(bytes));
        ASSERT_NE(p, nullptr) << bytes;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
        if (bytes >= kBigBufferThreshold) {
            EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kBigBufferThreshold, 0u) << bytes;   // huge-page aligned
            for (size_t i = 0; i < bytes; i += 4096) ASSERT_EQ(p[i], 0) << "fresh pages are zero, byte " << i;
        }
        std::memset(p, 0xab, bytes);
        EXPECT_EQ(p[bytes - 1], 0xab);
        big_free(p, bytes);
    }
    big_free(nullptr, size_t(1) << 30);   // a no-op, as free(nullptr)
}

TEST(BigBuffer, VectorOverTheAllocator) {
    std::vector<float, BigAllocator<float>> v(size_t(3) << 20, 1.5f);   // 12 MiB: huge-page backed
    EXPECT_EQ(v.back(), 1.5f);
    v.assign(10, 0.0f);                    // shrinks in place: same storage
    EXPECT_GE(v.capacity(), size_t(3) << 20);
    v.resize(size_t(5) << 20, 2.0f);       // grows: a new mapping, the old one freed
    EXPECT_EQ(v[0], 0.0f);
    EXPECT_EQ(v.back(), 2.0f);
    std::vector<uint16_t, BigAllocator<uint16_t>> small(7, 3);
    EXPECT_EQ(small[6], 3);
}

}  // namespace
}  // namespace cc
