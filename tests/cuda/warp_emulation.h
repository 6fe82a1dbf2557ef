// Runs CUDA kernel code on the CPU, for the kernels in cuda/*.cuh that are written for it
// (CC_CUDA_EMULATE): each block's threads are std::threads, __syncthreads a barrier of the block,
// __shfl_xor_sync and mma.sync exchanges through their warp with a barrier of the warp, and the
// dynamic shared memory a buffer of the block filled with 0xff bytes (a bf16 NaN, a float NaN:
// reading what no thread wrote shows). Blocks run one after another.
//
// mma.sync.m16n8k16 (bf16, f32 accumulate) is computed from the PTX ISA's fragment layouts: each
// lane's d element is its C plus the 16 products in double, rounded to float once. The hardware's
// own rounding inside the instruction is not modelled (a device run measures that); what this
// checks is the kernel's logic: fragment loads against the layouts, masks, tile and chunk walks,
// the online softmax, the merges, the split launch against the tiled one, and what every row gets.
#pragma once

#define CC_CUDA_EMULATE 1

#include <barrier>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define CC_DYNAMIC_SMEM(type, name) type* name = reinterpret_cast<type*>(cc_emu::dynamic_smem())

// CUDA's 8- and 16-byte vector types (the kernels load and store 8 or 16 bytes at a time)
struct alignas(8) uint2 {
    unsigned x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};

namespace cc_emu {

struct Dim {
    unsigned x = 1, y = 1, z = 1;
};

struct Warp {
    std::barrier<> bar{32};
    float f[32] = {};
    uint32_t a[32][4] = {};
    uint32_t b[32][2] = {};
};

struct Block {
    explicit Block(unsigned threads) : bar(threads) {}
    std::barrier<> bar;
    std::vector<unsigned char> smem;
    std::vector<std::unique_ptr<Warp>> warps;
};

struct Thread {
    Dim tid, bid, bdim;
    Block* block = nullptr;
    Warp* warp = nullptr;
    unsigned lane = 0;
};
inline thread_local Thread tls;

inline void* dynamic_smem() {
    return tls.block->smem.data();
}

inline float bf16_value(uint16_t h) {
    const uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// d += a * b for the warp; every lane of the warp calls it with its fragments.
inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    Warp& w = *tls.warp;
    const unsigned lane = tls.lane;
    for (int i = 0; i < 4; ++i) w.a[lane][i] = a[i];
    w.b[lane][0] = b0;
    w.b[lane][1] = b1;
    w.bar.arrive_and_wait();
    float A[16][16], B[16][8];
    for (unsigned l = 0; l < 32; ++l) {
        const unsigned g = l / 4, t = l % 4;
        const unsigned ar[4] = {g, g + 8, g, g + 8}, ac[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
        for (int i = 0; i < 4; ++i) {
            A[ar[i]][ac[i]] = bf16_value(uint16_t(w.a[l][i] & 0xffffu));
            A[ar[i]][ac[i] + 1] = bf16_value(uint16_t(w.a[l][i] >> 16));
        }
        for (unsigned i = 0; i < 2; ++i) {
            B[2 * t + 8 * i][g] = bf16_value(uint16_t(w.b[l][i] & 0xffffu));
            B[2 * t + 8 * i + 1][g] = bf16_value(uint16_t(w.b[l][i] >> 16));
        }
    }
    w.bar.arrive_and_wait();  // every lane has read the fragments
    const unsigned g = lane / 4, t = lane % 4;
    const unsigned dr[4] = {g, g, g + 8, g + 8}, dc[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
    for (int i = 0; i < 4; ++i) {
        double s = d[i];
        for (int k = 0; k < 16; ++k) s += double(A[dr[i]][k]) * double(B[k][dc[i]]);
        d[i] = float(s);
    }
}

// cp.async: each copy's 16 source bytes are read when it is issued, but written to shared memory
// only when the issuing thread's cp_async_wait lets its group complete, in issue order. So a read
// of a stage the thread has not waited for sees the old bytes (the 0xff fill, or the previous
// tile), and a stage read before another thread's wait and the barrier after it races (TSan).
struct AsyncCopy {
    void* dst;
    unsigned char bytes[16];
};
struct AsyncCopies {
    std::vector<AsyncCopy> open;                 // issued since the last commit
    std::vector<std::vector<AsyncCopy>> groups;  // committed, oldest first, not yet written
};
inline thread_local AsyncCopies async_copies;

inline void cp_async_16(void* dst, const void* src, bool valid) {
    AsyncCopy c{dst, {}};
    if (valid) std::memcpy(c.bytes, src, 16);
    async_copies.open.push_back(c);
}
inline void cp_async_commit() {
    async_copies.groups.push_back(std::move(async_copies.open));
    async_copies.open.clear();
}
inline void cp_async_wait(int newest_in_flight) {
    auto& gs = async_copies.groups;
    while (int(gs.size()) > newest_in_flight) {
        for (const AsyncCopy& c : gs.front()) std::memcpy(c.dst, c.bytes, 16);
        gs.erase(gs.begin());
    }
}

// Runs kernel() as grid x block threads; block.y and block.z must be 1.
template <class Kernel>
void launch(Dim grid, Dim block, size_t smem_bytes, Kernel kernel) {
    const unsigned n = block.x;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                Block blk(n);
                blk.smem.assign(smem_bytes, 0xff);
                for (unsigned w = 0; w < (n + 31) / 32; ++w) blk.warps.push_back(std::make_unique<Warp>());
                std::vector<std::thread> threads;
                threads.reserve(n);
                for (unsigned t = 0; t < n; ++t)
                    threads.emplace_back([&, t] {
                        tls.tid = {t, 0, 0};
                        tls.bid = {bx, by, bz};
                        tls.bdim = block;
                        tls.block = &blk;
                        tls.warp = blk.warps[t / 32].get();
                        tls.lane = t % 32;
                        async_copies = {};
                        kernel();
                    });
                for (auto& th : threads) th.join();
            }
}

}  // namespace cc_emu

#define threadIdx (cc_emu::tls.tid)
#define blockIdx (cc_emu::tls.bid)
#define blockDim (cc_emu::tls.bdim)

inline void __syncthreads() {
    cc_emu::tls.block->bar.arrive_and_wait();
}
inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
    cc_emu::Warp& w = *cc_emu::tls.warp;
    w.f[cc_emu::tls.lane] = v;
    w.bar.arrive_and_wait();
    const float r = w.f[cc_emu::tls.lane ^ unsigned(lane_mask)];
    w.bar.arrive_and_wait();
    return r;
}
inline int min(int a, int b) {
    return a < b ? a : b;
}
