// BF16 GEMMs through cuBLASLt with one pinned algorithm per weight shape (the exactness argument
// is in gemm.cu), or through our own tensor-core kernels (gemm_mma_kernels.cuh, opt-in).
#pragma once

#include "cuda/context.h"
#include "cuda/gemm_args.h"

#include <cublasLt.h>

#include <cstdint>
#include <span>
#include <string>

namespace cc::cuda {

// Which kernels a plan runs.
enum class GemmImpl {
    cublas_lt,  // one pinned cuBLASLt algorithm (the fallback kernel where cuBLASLt offers none)
    fallback,   // our scalar fallback kernel, forced (the self-test checks it that way too)
    own_mma,    // our tensor-core family: the rows kernel up to geom::kGemmRowsMax rows, else tiled
};

// Our tensor-core family (gemm_mma_kernels.cuh): m <= geom::kGemmRowsMax rows through the rows
// kernel, more through the tiled one, in blocks of 128 rows or, where those would leave some of the
// device's sm_count SMs idle, of 64 (kern::gemm_kernel_for; sm_count 0: always 128); a row gets the
// same bits from each. k a multiple of 16.
void gemm_mma(const uint16_t* x, const uint16_t* w, float* y, int m, int n, int k, int sm_count, cudaStream_t stream);
// Up to kern::kGemmMaxGroup weights that read the same X, in one launch of that family: each output
// gets the bits gemm_mma gives it alone (kern::GemmGroup).
void gemm_mma_group(const uint16_t* x, std::span<const kern::GemmOut> outs, int m, int k, int sm_count,
                    cudaStream_t stream);
// The same with the kernel named (the self-test and the benchmarks compare them; the rows kernel
// takes at most geom::kGemmRowsMax rows).
void gemm_mma_launch(const uint16_t* x, std::span<const kern::GemmOut> outs, int m, int k, kern::GemmKernel kernel,
                     cudaStream_t stream);

// act[m][n] (bf16) = bf16(swiglu(X · W_gateᵀ, X · W_upᵀ)) for m <= geom::kGemmRowsMax rows in one
// launch of the rows kernel's SwiGLU form (CudaBackendOptions::fused_kernels): the bits of
// gemm_mma_group over {gate, up} followed by kern::swiglu, without the f32 gate and up in memory.
// sm_count: for the depth of its loads (geom::gemm_rows_deep; 0: never deep).
void gemm_mma_swiglu(const uint16_t* x, const uint16_t* w_gate, const uint16_t* w_up, uint16_t* act, int m, int n,
                     int k, int sm_count, cudaStream_t stream);

// Y[m][n] (f32, row-major) = X[m][k] (bf16, row-major) · W[n][k]ᵀ (bf16, row-major as torch's
// Linear weight), FP32 accumulate, for any 1 <= m <= max_m with the same arithmetic.
class GemmPlan {
public:
    // own_mma needs k to be a multiple of 16 (geom::gemm_mma_shape_ok); CudaError otherwise.
    GemmPlan(const Context& ctx, int n, int k, int max_m, GemmImpl impl = GemmImpl::cublas_lt);
    ~GemmPlan();
    GemmPlan(const GemmPlan&) = delete;
    GemmPlan& operator=(const GemmPlan&) = delete;

    void run(const Context& ctx, const uint16_t* x, const uint16_t* w, float* y, int m) const;
    void check_rows(int m) const;  // CudaError unless 0 <= m <= max_m
    int n() const { return n_; }
    int k() const { return k_; }
    int max_m() const { return max_m_; }
    bool fallback() const { return fallback_; }
    bool own() const { return own_; }
    // "cublasLt algo 21 tile 15 stages 8 splitK 1", "fallback kernel (...)" or "own mma kernels"
    // (for the self-test's table and bug reports).
    const std::string& description() const { return description_; }

private:
    int n_, k_, max_m_;
    cublasLtMatmulDesc_t op_ = nullptr;
    cublasLtMatrixLayout_t a_ = nullptr;
    cublasLtMatmulAlgo_t algo_{};
    size_t algo_workspace_ = 0;
    bool fallback_ = false;
    bool own_ = false;
    std::string description_;
};

// Projections of the same rows X through several weights (q, k, v; gate, up). Where every plan
// runs our own kernels with the same k, one grouped launch (gemm_mma_group: more blocks for the
// small k/v weights, fewer launches); otherwise one call per plan. The bits are each plan's own.
struct Projection {
    const GemmPlan* plan = nullptr;
    const uint16_t* w = nullptr;
    float* y = nullptr;
};
void run_projections(const Context& ctx, const uint16_t* x, int m, std::span<const Projection> ps);

}  // namespace cc::cuda
