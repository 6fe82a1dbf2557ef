// mma.sync m16n8k16 (bf16 operands, f32 accumulators) and the small helpers the tensor-core
// kernels share (attention_mma_kernels.cuh, gemm_mma_kernels.cuh). Compiled by nvcc, and on the CPU
// by the emulation in tests/cuda/warp_emulation.h (CC_CUDA_EMULATE).
#pragma once

#include <cstdint>

#ifndef CC_CUDA_EMULATE
#define CC_DYNAMIC_SMEM(type, name) extern __shared__ __align__(16) type name[]
#endif

namespace cc::cuda::kern::detail {

// d += a (16x16, row-major) * b (16x8, column-major), bf16 operands, f32 accumulators; fragment
// layouts of the PTX ISA ("Matrix Fragments for mma.m16n8k16"): lane = 4 * g + t holds
// a: (g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..); b: (k 2t..2t+1, n g), (k 2t+8.., n g);
// d: (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(CC_CUDA_EMULATE)
    cc_emu::mma_16816(d, a, b0, b1);
#else
    __trap();  // bf16 mma needs sm_80; cuda/CMakeLists.txt builds for sm_80 and sm_90 only
#endif
}

__device__ __forceinline__ uint32_t ld32(const uint16_t* p) {
    return *reinterpret_cast<const uint32_t*>(p);
}

// cp.async (sm_80+): 16 bytes from global to shared memory without passing through registers;
// `valid` false writes 16 zero bytes instead (src-size 0: nothing is read, `src` is not touched).
// The copies a thread issued become a group at cp_async_commit(); cp_async_wait<N>() returns when
// at most N of the thread's newest groups are still in flight. Another thread sees the bytes only
// after its own wait and a __syncthreads() (the emulation defers every write until that wait, so
// a missing one shows there).
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
#elif defined(CC_CUDA_EMULATE)
    cc_emu::cp_async_16(smem_dst, src, valid);
#else
    __trap();
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#elif defined(CC_CUDA_EMULATE)
    cc_emu::cp_async_commit();
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#elif defined(CC_CUDA_EMULATE)
    cc_emu::cp_async_wait(N);
#endif
}

}  // namespace cc::cuda::kern::detail
