// Batch-invariant BF16 GEMMs (the exactness argument, DESIGN §6 / core/backend/backend.h).
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
//
// When cuBLASLt offers no such algorithm for a shape, the plan falls back to our own kernel
// (gemm_fallback_kernel): slow, but batch-invariant by construction. The description says which.
#include "cuda/gemm.h"

#include "core/base/kernel_math.h"
#include "cuda/launch_geometry.h"

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

// Y[m][n] = sum over k of X[m][k] * W[n][k]: per output, one fmaf chain over k = 0..K-1 from +0.
__global__ void gemm_fallback_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w,
                                     float* __restrict__ y, int m, int n, int k) {
    constexpr int T = geom::kGemmTile, KS = geom::kGemmKStep;
    __shared__ float xs[KS][T + 1];  // [k in step][row of the tile]
    __shared__ float ws[KS][T + 1];
    const int m0 = blockIdx.y * T, n0 = blockIdx.x * T;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    float acc[4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < k; k0 += KS) {
        for (int e = tid; e < KS * T; e += 256) {
            const int kk = e % KS, r = e / KS;
            const bool kin = k0 + kk < k;
            xs[kk][r] = kin && m0 + r < m ? km::bf16_to_f32(x[size_t(m0 + r) * size_t(k) + size_t(k0 + kk)]) : 0.0f;
            ws[kk][r] = kin && n0 + r < n ? km::bf16_to_f32(w[size_t(n0 + r) * size_t(k) + size_t(k0 + kk)]) : 0.0f;
        }
        __syncthreads();
        const int kmax = min(KS, k - k0);
        for (int kk = 0; kk < kmax; ++kk)
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(xs[kk][ty * 4 + i], ws[kk][tx * 4 + j], acc[i][j]);
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const int r = m0 + ty * 4 + i, c = n0 + tx * 4 + j;
            if (r < m && c < n) y[size_t(r) * size_t(n) + size_t(c)] = acc[i][j];
        }
}

}  // namespace

// Column-major view (cuBLAS's): our row-major Y[m][n] is C (n x m, ld n); W[n][k] row-major is a
// k x n column-major matrix used transposed (op T -> n x k); X[m][k] row-major is k x m (op N).
GemmPlan::GemmPlan(const Context& ctx, int n, int k, int max_m, GemmImpl impl) : n_(n), k_(k), max_m_(max_m) {
    if (n <= 0 || k <= 0 || max_m <= 0)
        throw CudaError("GemmPlan: bad shape n=" + std::to_string(n) + " k=" + std::to_string(k) +
                        " max_m=" + std::to_string(max_m));
    if (impl == GemmImpl::own_mma) {
        if (!geom::gemm_mma_shape_ok(n, k))
            throw CudaError("GemmPlan: our tensor-core GEMMs need k to be a multiple of 16, this weight has k=" +
                            std::to_string(k) + " (unset CONTEXTCACHE_CUDA_GEMM to use cuBLASLt)");
        own_ = true;
        description_ = "own mma kernels (rows <= " + std::to_string(geom::kGemmRowsMax) + ": rows kernel, else " +
                       std::to_string(geom::kGemmMmaTile) + "x" + std::to_string(geom::kGemmMmaTile) + " tiles)";
        return;
    }
    if (impl == GemmImpl::fallback) {
        fallback_ = true;
        description_ = "fallback kernel (forced)";
        return;
    }
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
        heur_status = cublasLtMatmulAlgoGetHeuristic(ctx.lt(), op_, a_, b.h, c.h, c.h, pref, 32, results, &n_results);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (heur_status != CUBLAS_STATUS_SUCCESS) n_results = 0;  // no candidate: the fallback kernel

    // The first candidate that, with split-K 1 and no reduction, is valid for every m in [1, max_m].
    bool found = false;
    for (int i = 0; i < n_results && !found; ++i) {
        if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
        cublasLtMatmulAlgo_t algo = results[i].algo;
        const uint32_t splitk = 1;
        const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
        if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk) !=
                CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction,
                                                 sizeof reduction) != CUBLAS_STATUS_SUCCESS)
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
        fallback_ = true;
        description_ = "fallback kernel (cuBLASLt: no algorithm with split-K 1 for every m in 1.." +
                       std::to_string(max_m) + ", " + std::to_string(n_results) + " candidates checked)";
        return;
    }
    description_ = "cublasLt algo " + std::to_string(algo_attr<int>(algo_, CUBLASLT_ALGO_CONFIG_ID)) + " tile " +
                   std::to_string(algo_attr<uint32_t>(algo_, CUBLASLT_ALGO_CONFIG_TILE_ID)) + " stages " +
                   std::to_string(algo_attr<uint32_t>(algo_, CUBLASLT_ALGO_CONFIG_STAGES_ID)) + " splitK " +
                   std::to_string(algo_attr<uint32_t>(algo_, CUBLASLT_ALGO_CONFIG_SPLITK_NUM));
}

GemmPlan::~GemmPlan() {
    if (a_ != nullptr) cublasLtMatrixLayoutDestroy(a_);
    if (op_ != nullptr) cublasLtMatmulDescDestroy(op_);
}

void GemmPlan::check_rows(int m) const {
    if (m < 0 || m > max_m_)
        throw CudaError("GemmPlan::run: " + std::to_string(m) + " rows, the plan for " + std::to_string(n_) + " x " +
                        std::to_string(k_) + " was checked for 1.." + std::to_string(max_m_));
}

void GemmPlan::run(const Context& ctx, const uint16_t* x, const uint16_t* w, float* y, int m) const {
    check_rows(m);
    if (m == 0) return;
    if (own_) {
        gemm_mma(x, w, y, m, n_, k_, ctx.info().sm_count, ctx.stream());
        return;
    }
    if (fallback_) {
        const geom::Launch l = geom::gemm_fallback(m, n_);
        gemm_fallback_kernel<<<dim3(l.grid.x, l.grid.y, l.grid.z), dim3(l.block.x, l.block.y, l.block.z), 0,
                               ctx.stream()>>>(x, w, y, m, n_, k_);
        CC_CUDA_CHECK_LAUNCH("gemm_fallback_kernel");
        return;
    }
    Layout b(CUDA_R_16BF, uint64_t(k_), uint64_t(m), k_), c(CUDA_R_32F, uint64_t(n_), uint64_t(m), n_);
    const float alpha = 1.0f, beta = 0.0f;
    CC_CUBLAS_CHECK(cublasLtMatmul(ctx.lt(), op_, &alpha, w, a_, x, b.h, &beta, y, c.h, y, c.h, &algo_, ctx.workspace(),
                                   ctx.workspace_bytes(), ctx.stream()));
}

void run_projections(const Context& ctx, const uint16_t* x, int m, std::span<const Projection> ps) {
    bool grouped = !ps.empty() && ps.size() <= size_t(kern::kGemmMaxGroup);
    for (const Projection& p : ps) grouped = grouped && p.plan->own() && p.plan->k() == ps[0].plan->k();
    if (!grouped) {
        for (const Projection& p : ps) p.plan->run(ctx, x, p.w, p.y, m);
        return;
    }
    kern::GemmOut outs[kern::kGemmMaxGroup];
    for (size_t i = 0; i < ps.size(); ++i) {
        ps[i].plan->check_rows(m);
        outs[i] = {ps[i].w, ps[i].y, ps[i].plan->n()};
    }
    gemm_mma_group(x, std::span<const kern::GemmOut>(outs, ps.size()), m, ps[0].plan->k(), ctx.info().sm_count,
                   ctx.stream());
}

}  // namespace cc::cuda
