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

}  // namespace cc::cuda::kern::detail
