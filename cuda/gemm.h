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
    GemmPlan(const Context& ctx, int n, int k, int max_m);
    ~GemmPlan();
    GemmPlan(const GemmPlan&) = delete;
    GemmPlan& operator=(const GemmPlan&) = delete;

    void run(const Context& ctx, const uint16_t* x, const uint16_t* w, float* y, int m) const;
    int n() const { return n_; }
    int k() const { return k_; }
    int max_m() const { return max_m_; }
    // "algo 21 tile 128x128 stages 4 splitK 1" (for the self-test's table and bug reports).
    const std::string& description() const { return description_; }

private:
    int n_, k_, max_m_;
    cublasLtMatmulDesc_t op_ = nullptr;
    cublasLtMatrixLayout_t a_ = nullptr;
    cublasLtMatmulAlgo_t algo_{};
    size_t algo_workspace_ = 0;
    std::string description_;
};

}  // namespace cc::cuda
