// BF16 GEMMs through cuBLASLt with one pinned algorithm per weight shape (the exactness argument
// is in gemm.cu).
#pragma once

#include "cuda/context.h"

#include <cublasLt.h>

#include <cstdint>
#include <string>

namespace cc::cuda {

// Y[m][n] (f32, row-major) = X[m][k] (bf16, row-major) · W[n][k]ᵀ (bf16, row-major as torch's
// Linear weight), FP32 accumulate, for any 1 <= m <= max_m with the same algorithm.
class GemmPlan {
public:
    // force_fallback: skip cuBLASLt and use our kernel (the self-test checks it that way too).
    GemmPlan(const Context& ctx, int n, int k, int max_m, bool force_fallback = false);
    ~GemmPlan();
    GemmPlan(const GemmPlan&) = delete;
    GemmPlan& operator=(const GemmPlan&) = delete;

    void run(const Context& ctx, const uint16_t* x, const uint16_t* w, float* y, int m) const;
    int n() const { return n_; }
    int k() const { return k_; }
    int max_m() const { return max_m_; }
    bool fallback() const { return fallback_; }
    // "cublasLt algo 21 tile 15 stages 8 splitK 1", or "fallback kernel (...)" (for the self-test's
    // table and bug reports).
    const std::string& description() const { return description_; }

private:
    int n_, k_, max_m_;
    cublasLtMatmulDesc_t op_ = nullptr;
    cublasLtMatrixLayout_t a_ = nullptr;
    cublasLtMatmulAlgo_t algo_{};
    size_t algo_workspace_ = 0;
    bool fallback_ = false;
    std::string description_;
};

}  // namespace cc::cuda
