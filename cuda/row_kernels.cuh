// RMSNorm, the residual add fused into the RMSNorm that follows it (CudaBackendOptions::
// fused_rows), and a row's argmax (greedy tokens on the device, CudaBackendOptions::device_greedy):
// one block of geom::kRowThreads threads per row. Compiled by nvcc (kernels.cu) and by the CPU
// emulation (tests/cuda/test_row_kernels_emulated.cpp, CC_CUDA_EMULATE).
//
// A row's bits: thread t sums the squares of elements t, t + 256, ... in index order, then a fixed
// tree over the 256 partial sums; the same order for every row, every batch and both kernels. The
// fused kernel adds each element in the thread that then squares it, so x and the normalised row
// get exactly the bits of add_inplace followed by rmsnorm_kernel.
#pragma once

#include "core/base/kernel_math.h"
#include "cuda/mma_sync.cuh"  // CC_DYNAMIC_SMEM

#include <cstddef>
#include <cstdint>

namespace cc::cuda::kern::detail {

// The sum of v over the block's threads: a fixed tree over blockDim.x (a power of two) values in
// shared memory; every thread returns the same total.
__device__ __forceinline__ float block_sum(float v, float* red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = red[threadIdx.x] + red[threadIdx.x + s];
        __syncthreads();
    }
    const float total = red[0];
    __syncthreads();  // red may be reused
    return total;
}

// y[r] = rmsnorm(x[rows ? rows[r] : r]) * w, as f32 or bf16; block r does row r.
template <bool kOutBf16>
__global__ void rmsnorm_kernel(const float* __restrict__ x, const int32_t* __restrict__ rows,
                               const float* __restrict__ w, void* __restrict__ y, int dim, float eps) {
    CC_DYNAMIC_SMEM(float, red);
    const size_t r = blockIdx.x;
    const size_t src = rows != nullptr ? size_t(rows[r]) : r;
    const float* xr = x + src * size_t(dim);
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) ss = ss + xr[i] * xr[i];
    const float inv = km::rms_inv(block_sum(ss, red), dim, eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        const float v = km::rms_apply(xr[i], inv, w[i]);
        if constexpr (kOutBf16)
            static_cast<uint16_t*>(y)[r * size_t(dim) + i] = km::f32_to_bf16(v);
        else
            static_cast<float*>(y)[r * size_t(dim) + i] = v;
    }
}

// x[r] += y[r] (the residual), then out[r] = bf16(rmsnorm(x[r]) * w) (the next norm's output, the
// next GEMM's input): one launch and one pass over x instead of two. Each thread reads back only
// the elements it wrote itself.
__global__ void add_rmsnorm_kernel(float* __restrict__ x, const float* __restrict__ y, const float* __restrict__ w,
                                   uint16_t* __restrict__ out, int dim, float eps) {
    CC_DYNAMIC_SMEM(float, red);
    const size_t r = blockIdx.x;
    float* xr = x + r * size_t(dim);
    const float* yr = y + r * size_t(dim);
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        const float v = xr[i] + yr[i];
        xr[i] = v;
        ss = ss + v * v;
    }
    const float inv = km::rms_inv(block_sum(ss, red), dim, eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        out[r * size_t(dim) + i] = km::f32_to_bf16(km::rms_apply(xr[i], inv, w[i]));
}

// (value, index) reduction with a fixed tree: the larger value wins, the lower index on equal values
// (-0 == +0); NaN never wins (every comparison with NaN is false).
__device__ __forceinline__ void better(float& v, int& i, float v2, int i2) {
    if (v2 > v || (v2 == v && i2 < i)) {
        v = v2;
        i = i2;
    }
}

// out[r] = the index of row r's largest logit: the lowest among equal maxima, never a NaN's, 0 for
// a row of NaN; km::argmax_row's pick, so a greedy token chosen here is the host's. sample != 0:
// the largest km::gumbel_score(logit, temperature, km::uniform01(seed, step, r * vocab + i)), a
// draw from softmax(logits / temperature). Shared memory: blockDim.x floats, then as many ints.
__global__ void argmax_kernel(const float* __restrict__ logits, int vocab, int32_t* __restrict__ out, int sample,
                              float temperature, uint64_t seed, uint64_t step) {
    CC_DYNAMIC_SMEM(float, sv);
    int* si = reinterpret_cast<int*>(sv + blockDim.x);
    const size_t r = blockIdx.x;
    const float* row = logits + r * size_t(vocab);
    float best = -INFINITY;
    int best_i = vocab;  // "none yet": any real index is lower
    for (int i = int(threadIdx.x); i < vocab; i += int(blockDim.x)) {
        float v = row[i];
        if (sample) v = km::gumbel_score(v, temperature, km::uniform01(seed, step, r * size_t(vocab) + size_t(i)));
        better(best, best_i, v, i);
    }
    sv[threadIdx.x] = best;
    si[threadIdx.x] = best_i;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float v = sv[threadIdx.x];
            int i = si[threadIdx.x];
            better(v, i, sv[threadIdx.x + s], si[threadIdx.x + s]);
            sv[threadIdx.x] = v;
            si[threadIdx.x] = i;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) out[r] = si[0] < vocab ? si[0] : 0;
}

}  // namespace cc::cuda::kern::detail
