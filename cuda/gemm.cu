// Batch-invariant BF16 GEMMs (the exactness argument, DESIGN §6 / core/backend.h).
//
// A cached query computes the suffix rows in a batch of a different size, and at different row
// indices, than the full prefill that computed the same rows. cuBLAS's heuristics pick a kernel by
// problem size, and a kernel that splits the K reduction across CTAs (split-K, stream-K) sums in
// an order that depends on the grid: different bits for the same row. So each weight shape gets
// ONE algorithm at load, with split-K forced to 1 and no reduction scheme, checked with
// cublasLtMatmulAlgoCheck for every m in [1, max_m] that the backend will use, and reused for every
// call. Then every output element is one CTA's K loop over the same tiles of K in the same order,
// whatever m is and wherever the row sits: the row's bits do not depend on the batch. (The
// self-test's gemm batch-invariance check measures this on the user's GPU.)
#include "cuda/gemm.h"

#include <string>

namespace cc::cuda {
namespace {

struct Layout {
    cublasLtMatrixLayout_t h = nullptr;
    Layout(cudaDataType_t t, uint64_t rows, uint64_t cols, int64_t ld) {
        CC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&h, t, rows, cols, ld));
    }
    ~Layout() {
        if (h != nullptr) cublasLtMatrixLayoutDestroy(h);
    }
    Layout(const Layout&) = delete;
    Layout& operator=(const Layout&) = delete;
};

template <class T>
T algo_attr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
    T v{};
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof v, &written) != CUBLAS_STATUS_SUCCESS) return T{};
    return v;
}

}  // namespace

// Column-major view (cuBLAS's): our row-major Y[m][n] is C (n x m, ld n); W[n][k] row-major is a
// k x n column-major matrix used transposed (op T -> n x k); X[m][k] row-major is k x m (op N).
GemmPlan::GemmPlan(const Context& ctx, int n, int k, int max_m) : n_(n), k_(k), max_m_(max_m) {
    if (n <= 0 || k <= 0 || max_m <= 0)
        throw CudaError("GemmPlan: bad shape n=" + std::to_string(n) + " k=" + std::to_string(k) + " max_m=" + std::to_string(max_m));
    CC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, CUDA_R_16BF, uint64_t(k), uint64_t(n), k));

    cublasLtMatmulPreference_t pref = nullptr;
    CC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = ctx.workspace_bytes();
    const cublasStatus_t pref_status =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t results[32] = {};
    int n_results = 0;
    cublasStatus_t heur_status = pref_status;
    if (pref_status == CUBLAS_STATUS_SUCCESS) {
        // Ask for the shape of the largest batch: its algorithms are the fast ones for prefill.
        Layout b(CUDA_R_16BF, uint64_t(k), uint64_t(max_m), k), c(CUDA_R_32F, uint64_t(n), uint64_t(max_m), n);
        heur_status = cublasLtMatmulAlgoGetHeuristic(ctx.lt(), op_, a_, b.h, c.h, c.h, pref, 32, results,
                                                     &n_results);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    CC_CUBLAS_CHECK(heur_status);

    // The first candidate that, with split-K 1 and no reduction, is valid for every m in [1, max_m].
    bool found = false;
    for (int i = 0; i < n_results && !found; ++i) {
        if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
        cublasLtMatmulAlgo_t algo = results[i].algo;
        const uint32_t splitk = 1;
        const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
        if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk) !=
                CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction, sizeof reduction) !=
                CUBLAS_STATUS_SUCCESS)
            continue;
        bool ok = true;
        size_t need_ws = 0;
        for (int m = 1; m <= max_m && ok; ++m) {
            Layout b(CUDA_R_16BF, uint64_t(k), uint64_t(m), k), c(CUDA_R_32F, uint64_t(n), uint64_t(m), n);
            cublasLtMatmulHeuristicResult_t check{};
            ok = cublasLtMatmulAlgoCheck(ctx.lt(), op_, a_, b.h, c.h, c.h, &algo, &check) == CUBLAS_STATUS_SUCCESS &&
                 check.workspaceSize <= ctx.workspace_bytes();
            if (ok && check.workspaceSize > need_ws) need_ws = check.workspaceSize;
        }
        if (!ok) continue;
        algo_ = algo;
        algo_workspace_ = need_ws;
        found = true;
    }
    if (!found) {
        cublasLtMatrixLayoutDestroy(a_);
        cublasLtMatmulDescDestroy(op_);
        throw CudaError("cuBLASLt offers no BF16 GEMM algorithm for a " + std::to_string(n) + " x " + std::to_string(k) +
                        " weight that runs with split-K 1 for every batch of 1.." + std::to_string(max_m) + " rows (" +
                        std::to_string(n_results) + " candidates checked); the exactness guarantee needs one. Try a "
                        "smaller --max-batch, or the CPU backend (--backend cpu)");
    }
    description_ = "algo " + std::to_string(algo_attr<int>(algo_, CUBLASLT_ALGO_CONFIG_ID)) + " tile " +
                   std::to_string(algo_attr<uint32_t>(algo_, CUBLASLT_ALGO_CONFIG_TILE_ID)) + " stages " +
                   std::to_string(algo_attr<uint32_t>(algo_, CUBLASLT_ALGO_CONFIG_STAGES_ID)) + " splitK " +
                   std::to_string(algo_attr<uint32_t>(algo_, CUBLASLT_ALGO_CONFIG_SPLITK_NUM));
}

GemmPlan::~GemmPlan() {
    if (a_ != nullptr) cublasLtMatrixLayoutDestroy(a_);
    if (op_ != nullptr) cublasLtMatmulDescDestroy(op_);
}

void GemmPlan::run(const Context& ctx, const uint16_t* x, const uint16_t* w, float* y, int m) const {
    if (m == 0) return;
    if (m < 0 || m > max_m_)
        throw CudaError("GemmPlan::run: " + std::to_string(m) + " rows, the plan for " + std::to_string(n_) + " x " +
                        std::to_string(k_) + " was checked for 1.." + std::to_string(max_m_));
    Layout b(CUDA_R_16BF, uint64_t(k_), uint64_t(m), k_), c(CUDA_R_32F, uint64_t(n_), uint64_t(m), n_);
    const float alpha = 1.0f, beta = 0.0f;
    CC_CUBLAS_CHECK(cublasLtMatmul(ctx.lt(), op_, &alpha, w, a_, x, b.h, &beta, y, c.h, y, c.h, &algo_, ctx.workspace(),
                                   ctx.workspace_bytes(), ctx.stream()));
}

}  // namespace cc::cuda
