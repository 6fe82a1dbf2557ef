// core/base/warm_pages: a pool's pieces are resident before anyone writes them (mincore), they
// move into the buffers taken from it, come back when those are freed, and the pool never holds
// more than its capacity.
#include "core/base/warm_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <chrono>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace cc {
namespace {

constexpr size_t kPiece = WarmPages::kPiece;
constexpr size_t kMiB = size_t(1) << 20;

// Resident 4 KiB pages of [p, p + bytes) (mincore); -1 where some of it is not mapped at all.
long resident_pages(const void* p, size_t bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> vec((bytes + page - 1) / page);
    if (mincore(const_cast<void*>(p), bytes, vec.data()) != 0) return -1;
    long n = 0;
    for (unsigned char v : vec) n += v & 1;
    return n;
}

long pages(size_t bytes) {
    return static_cast<long>(bytes / static_cast<size_t>(sysconf(_SC_PAGESIZE)));
}

TEST(WarmPages, FillMakesItsCapacityResidentAndTakeMovesItIntoTheBuffer) {
    WarmPages pool(9 * kMiB);  // rounded down to 4 pieces
    EXPECT_EQ(pool.stats().capacity_bytes, 4 * kPiece);
    EXPECT_EQ(pool.stats().held_bytes, 0u);
    EXPECT_EQ(pool.fill(), 4 * kPiece);
    EXPECT_EQ(pool.fill(), 0u) << "full: nothing more to add";
    EXPECT_EQ(pool.stats().held_bytes, 4 * kPiece);

    // 5 MiB: three pieces, all from the pool, resident before a byte is written.
    const size_t bytes = 5 * kMiB;
    auto* p = static_cast<unsigned char*>(pool.take(bytes));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kPiece, 0u);
    EXPECT_EQ(resident_pages(p, 3 * kPiece), pages(3 * kPiece)) << "the pool's pieces moved in warm";
    auto s = pool.stats();
    EXPECT_EQ(s.held_bytes, kPiece);
    EXPECT_EQ(s.warm_bytes_taken, 3 * kPiece);
    EXPECT_EQ(s.cold_bytes_taken, 0u);
    std::memset(p, 0x5a, bytes);
    EXPECT_EQ(p[bytes - 1], 0x5a);

    // 6 MiB more: one warm piece left, two fresh ones (not resident until written).
    auto* q = static_cast<unsigned char*>(pool.take(6 * kMiB));
    EXPECT_EQ(resident_pages(q, kPiece), pages(kPiece));
    EXPECT_EQ(resident_pages(q + kPiece, 2 * kPiece), 0) << "no piece left: fresh memory";
    s = pool.stats();
    EXPECT_EQ(s.held_bytes, 0u);
    EXPECT_EQ(s.warm_bytes_taken, 4 * kPiece);
    EXPECT_EQ(s.cold_bytes_taken, 2 * kPiece);
    std::memset(q, 0x33, 6 * kMiB);

    // Given back: the pool keeps up to its capacity (4 pieces), unmaps the rest.
    pool.give(p, bytes);
    EXPECT_EQ(pool.stats().held_bytes, 3 * kPiece);
    pool.give(q, 6 * kMiB);
    s = pool.stats();
    EXPECT_EQ(s.held_bytes, 4 * kPiece);
    EXPECT_EQ(s.returned_bytes, 4 * kPiece);
    EXPECT_EQ(resident_pages(q + kPiece, 2 * kPiece), -1) << "past the capacity: unmapped";

    // The given-back pieces serve the next buffer warm.
    auto* r = static_cast<unsigned char*>(pool.take(8 * kMiB));
    EXPECT_EQ(resident_pages(r, 8 * kMiB), pages(8 * kMiB));
    EXPECT_EQ(pool.stats().warm_bytes_taken, 8 * kPiece);
    std::memset(r, 1, 8 * kMiB);
    pool.give(r, 8 * kMiB);
}

TEST(WarmPages, SmallBuffersAndAnEmptyPoolAreBigAllocs) {
    WarmPages none(kPiece - 1);  // less than a piece: no pool
    EXPECT_EQ(none.stats().capacity_bytes, 0u);
    EXPECT_EQ(none.fill(), 0u);
    auto* p = static_cast<unsigned char*>(none.take(3 * kMiB));
    std::memset(p, 7, 3 * kMiB);
    none.give(p, 3 * kMiB);
    EXPECT_EQ(none.stats().held_bytes, 0u);
    EXPECT_EQ(none.stats().cold_bytes_taken, 2 * kPiece);

    WarmPages pool(2 * kPiece);
    pool.fill();
    auto* s = static_cast<unsigned char*>(pool.take(100));  // below a piece: aligned_alloc, no piece used
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s) % 64, 0u);
    std::memset(s, 1, 100);
    pool.give(s, 100);
    EXPECT_EQ(pool.stats().held_bytes, 2 * kPiece);
    EXPECT_EQ(pool.stats().warm_bytes_taken, 0u);
}

TEST(WarmPages, VectorOverTheAllocatorKeepsThePoolAlive) {
    std::vector<std::byte, WarmAllocator<std::byte>> v;  // no pool: big_alloc
    v.resize(3 * kMiB);
    std::weak_ptr<WarmPages> weak;
    {
        auto pool = std::make_shared<WarmPages>(4 * kPiece);
        weak = pool;
        pool->fill();
        std::vector<std::byte, WarmAllocator<std::byte>> w{WarmAllocator<std::byte>(pool)};
        w.resize(7 * kMiB);  // four pieces, warm
        EXPECT_EQ(pool->stats().warm_bytes_taken, 4 * kPiece);
        std::memset(w.data(), 9, w.size());
        v = std::move(w);  // the allocator (and the pool) moves with the storage
        EXPECT_FALSE(v.get_allocator() == WarmAllocator<std::byte>());
    }
    ASSERT_FALSE(weak.expired()) << "the vector's allocator holds the pool";
    EXPECT_EQ(static_cast<int>(v[7 * kMiB - 1]), 9);
    v = std::vector<std::byte, WarmAllocator<std::byte>>();  // storage back to the pool, then the pool goes
    EXPECT_TRUE(weak.expired());
}

TEST(WarmPages, FillBesideTakeAndGiveOnOtherThreads) {
    WarmPages pool(64 * kMiB);
    size_t filled = 0;
    std::thread filler([&] { filled = pool.fill(); });
    for (int i = 0; i < 20; ++i) {
        const size_t bytes = (size_t(1 + i % 5) << 20) + 12345;
        auto* p = static_cast<unsigned char*>(pool.take(bytes));
        std::memset(p, i, bytes);
        ASSERT_EQ(p[bytes - 1], static_cast<unsigned char>(i));
        pool.give(p, bytes);
    }
    filler.join();
    const auto s = pool.stats();
    EXPECT_LE(filled, s.capacity_bytes) << "one fill makes up what the pool lacked at its start, no more";
    EXPECT_LE(s.held_bytes, s.capacity_bytes);
    EXPECT_EQ(pool.fill() + s.held_bytes, s.capacity_bytes);

    WarmPages stopped(64 * kMiB);
    stopped.stop();
    EXPECT_EQ(stopped.fill(), 0u) << "stop() before fill: nothing touched";
}

// A thread running pool.keep_filled(), stopped and joined on every way out of a test, so a failed
// assertion never leaves it running.
class Keeper {
public:
    explicit Keeper(WarmPages& pool) : pool_(pool), thread_([&pool] { pool.keep_filled(); }) {}
    ~Keeper() {
        pool_.stop();
        thread_.join();
    }

private:
    WarmPages& pool_;
    std::thread thread_;
};

// Whether the pool comes to hold exactly `bytes` within 20 s (a keeper thread fills it).
bool held_reaches(const WarmPages& pool, size_t bytes) {
    for (int i = 0; i < 20000; ++i) {
        if (pool.stats().held_bytes == bytes) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
}

// keep_filled() fills the pool, refills it once takes leave it below half, and returns on stop().
TEST(WarmPages, KeepFilledRefillsBelowHalfUntilStopped) {
    WarmPages pool(8 * kPiece);
    Keeper keeper(pool);
    ASSERT_TRUE(held_reaches(pool, 8 * kPiece)) << "never filled";
    // A take that leaves half or more is not made up, even one made the moment the pool reported
    // full (the fill that filled it made up only what the pool lacked when it began). The pause
    // gives a wrong top-up the time to show.
    void* b = pool.take(2 * kPiece);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(pool.stats().held_bytes, 6 * kPiece) << "topped up above half";
    EXPECT_EQ(pool.stats().filled_bytes, 8 * kPiece);
    void* a = pool.take(4 * kPiece);  // 2 of 8 left: below half, refilled to 8
    ASSERT_TRUE(held_reaches(pool, 8 * kPiece)) << "not refilled";
    EXPECT_EQ(pool.stats().filled_bytes, 14 * kPiece);
    pool.give(a, 4 * kPiece);  // full: given back pieces are unmapped
    pool.give(b, 2 * kPiece);
    EXPECT_EQ(pool.stats().held_bytes, 8 * kPiece);
}

// WarmFill::on_demand: nothing is made resident ahead of use; each take that the pool cannot give
// warm raises the fill target by what it lacked (up to the capacity), and fill() then makes that
// much resident, so the next take of the same size finds it warm.
TEST(WarmPages, OnDemandFillGrowsByWhatTakesLacked) {
    WarmPages pool(16 * kPiece, WarmFill::on_demand);
    EXPECT_EQ(pool.stats().target_bytes, 0u);
    EXPECT_EQ(pool.fill(), 0u) << "no demand yet: nothing touched";
    void* a = pool.take(3 * kPiece - 100);  // 3 pieces, all fresh
    EXPECT_EQ(pool.stats().cold_bytes_taken, 3 * kPiece);
    EXPECT_EQ(pool.stats().target_bytes, 3 * kPiece);
    EXPECT_EQ(pool.fill(), 3 * kPiece);
    void* b = pool.take(2 * kPiece);  // warm: the target stays
    EXPECT_EQ(pool.stats().warm_bytes_taken, 2 * kPiece);
    EXPECT_EQ(pool.stats().target_bytes, 3 * kPiece);
    void* c = pool.take(4 * kPiece);  // 1 warm, 3 fresh: the target grows by 3
    EXPECT_EQ(pool.stats().warm_bytes_taken, 3 * kPiece);
    EXPECT_EQ(pool.stats().target_bytes, 6 * kPiece);
    EXPECT_EQ(pool.fill(), 6 * kPiece);
    // More than a quarter of the capacity (a group's KV): fresh, and it neither teaches the pool
    // nor goes back to it.
    void* d = pool.take(5 * kPiece);
    EXPECT_EQ(pool.stats().held_bytes, 6 * kPiece);
    EXPECT_EQ(pool.stats().target_bytes, 6 * kPiece);
    pool.give(d, 5 * kPiece);
    EXPECT_EQ(pool.stats().held_bytes, 6 * kPiece);
    // Takes the pool cannot cover raise the target up to the capacity, not past it.
    std::vector<void*> blocks;
    for (int i = 0; i < 8; ++i) blocks.push_back(pool.take(4 * kPiece));
    EXPECT_EQ(pool.stats().target_bytes, 16 * kPiece);
    EXPECT_EQ(pool.stats().warm_bytes_taken, 9 * kPiece);
    for (void* p : blocks) pool.give(p, 4 * kPiece);  // given back: kept up to the capacity
    EXPECT_EQ(pool.stats().held_bytes, 16 * kPiece);
    for (auto [p, n] : {std::pair{a, 3 * kPiece - 100}, {b, 2 * kPiece}, {c, 4 * kPiece}}) pool.give(p, n);
    EXPECT_EQ(pool.stats().held_bytes, 16 * kPiece);
}

// keep_filled() on demand: idle until a take lacks pieces, then fills what it lacked.
TEST(WarmPages, KeepFilledOnDemandFillsWhatTakesLacked) {
    WarmPages pool(8 * kPiece, WarmFill::on_demand);
    Keeper keeper(pool);
    void* a = pool.take(2 * kPiece);
    EXPECT_TRUE(held_reaches(pool, 2 * kPiece)) << "the keeper did not fill what the take lacked";
    EXPECT_EQ(pool.stats().filled_bytes, 2 * kPiece) << "filled past the demand";
    pool.give(a, 2 * kPiece);
}

}  // namespace
}  // namespace cc
