// Our CUDA kernels (everything but the GEMMs, which are cuBLASLt: cuda/gemm.cu).
//
// Exactness (core/backend/backend.h): a row's result depends only on that row's inputs and the K/V it
// attends to. Row kernels (RMSNorm, q/k-norm, RoPE, SwiGLU, ...) compute each row with a fixed
// block shape and a fixed reduction tree, whatever the number of rows. Attention walks the keys in
// tiles and chunks aligned to absolute positions (launch_geometry.h); see attend_chunk.
#include "cuda/kernels.h"

#include "cuda/attention_mma.h"
#include "cuda/attention_mma_kernels.cuh"
#include "cuda/row_kernels.cuh"

#include "core/base/kernel_math.h"
#include "cuda/context.h"
#include "cuda/launch_geometry.h"

#include <cmath>
#include <string>
#include <vector>

namespace cc::cuda::kern {
namespace {

using detail::add_rmsnorm_kernel;
using detail::argmax_kernel;
using detail::attn_combine_kernel;
using detail::rmsnorm_kernel;

dim3 d3(const geom::Dim3& d) {
    return dim3(d.x, d.y, d.z);
}

// ---- row and elementwise kernels -------------------------------------------------------------

__global__ void embed_kernel(const uint16_t* __restrict__ table, const int32_t* __restrict__ tokens,
                             float* __restrict__ x, int dim) {
    const size_t r = blockIdx.x;
    const uint16_t* src = table + size_t(tokens[r]) * size_t(dim);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) x[r * size_t(dim) + i] = km::bf16_to_f32(src[i]);
}

__global__ void f32_to_bf16_kernel(const float* __restrict__ x, uint16_t* __restrict__ y, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = km::f32_to_bf16(x[i]);
}
__global__ void bf16_to_f32_kernel(const uint16_t* __restrict__ x, float* __restrict__ y, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = km::bf16_to_f32(x[i]);
}
__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        x[i] = x[i] + y[i];
}
// x (n_rows, n_cols) += bias (n_cols) broadcast over rows; the same float add as the CPU's.
__global__ void add_bias_kernel(float* __restrict__ x, const float* __restrict__ bias, int64_t n, int64_t n_cols) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        x[i] = x[i] + bias[i % n_cols];
}
__global__ void swiglu_kernel(const float* __restrict__ g, const float* __restrict__ u, uint16_t* __restrict__ out,
                              int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = km::f32_to_bf16(km::swiglu(g[i], u[i]));
}

// ---- q/k-norm, RoPE, KV store --------------------------------------------------------------------

// One warp rotates (and first normalises) one head of head_dim floats in place. The sum of squares
// is a per-lane strided sum then an xor butterfly: every lane ends with the same bits (each step
// adds the same two values, in either order), and the order is the same for every row.
__device__ void norm_rope_head(float* x, const float* norm_w, float eps, const float* cs, const float* sn, int hd) {
    const int lane = threadIdx.x & 31;
    if (norm_w != nullptr) {
        float ss = 0.0f;
        for (int i = lane; i < hd; i += 32) ss = ss + x[i] * x[i];
        for (int off = 16; off > 0; off >>= 1) ss = ss + __shfl_xor_sync(0xffffffffu, ss, off);
        const float inv = km::rms_inv(ss, hd, eps);
        for (int i = lane; i < hd; i += 32) x[i] = km::rms_apply(x[i], inv, norm_w[i]);
        __syncwarp();
    }
    const int half = hd / 2;
    for (int i = lane; i < half; i += 32) km::rope_pair(x[i], x[i + half], cs[i], sn[i]);
    __syncwarp();
}

// Row r of `a`: q/k-norm and RoPE at position `pos`, its K and V into slot `slot` of the block
// parts kv_k / kv_v ([n_kv_heads][kv_cap][head_dim]).
__device__ __forceinline__ void qk_rope_row(const QkRopeArgs& a, int r, int pos, void* kv_k, void* kv_v, int kv_cap,
                                            int slot) {
    const int warp = threadIdx.x / 32, n_warps = blockDim.x / 32, lane = threadIdx.x & 31;
    const int hd = a.head_dim, half = hd / 2;
    const float* cs = a.cos_t + size_t(pos) * size_t(half);
    const float* sn = a.sin_t + size_t(pos) * size_t(half);
    const size_t qd = size_t(a.n_heads) * hd, kvd = size_t(a.n_kv_heads) * hd;
    for (int h = warp; h < a.n_heads + a.n_kv_heads; h += n_warps) {
        if (h < a.n_heads) {
            norm_rope_head(a.q + size_t(r) * qd + size_t(h) * hd, a.q_norm, a.eps, cs, sn, hd);
            continue;
        }
        const int kvh = h - a.n_heads;
        float* k = a.k + size_t(r) * kvd + size_t(kvh) * hd;
        const float* v = a.v + size_t(r) * kvd + size_t(kvh) * hd;
        norm_rope_head(k, a.k_norm, a.eps, cs, sn, hd);
        const size_t dst = (size_t(kvh) * size_t(kv_cap) + size_t(slot)) * size_t(hd);
        for (int i = lane; i < hd; i += 32) {
            if (a.kv_bf16) {
                static_cast<uint16_t*>(kv_k)[dst + i] = km::f32_to_bf16(k[i]);
                static_cast<uint16_t*>(kv_v)[dst + i] = km::f32_to_bf16(v[i]);
            } else {
                static_cast<float*>(kv_k)[dst + i] = k[i];
                static_cast<float*>(kv_v)[dst + i] = v[i];
            }
        }
    }
}

__global__ void qk_rope_kernel(QkRopeArgs a) {
    const int r = blockIdx.x;
    qk_rope_row(a, r, a.first_pos + r, a.kv_k, a.kv_v, a.kv_cap, a.first_slot + r);
}

// Rows of several sequences: row r's position, slot and KV block from rows[r], the block's parts of
// `layer` found as base + (2 * layer + 0 or 1) * part_bytes (CudaKvBlock's layout).
__global__ void qk_rope_rows_kernel(QkRopeArgs a, const RopeRow* rows, int layer) {
    const int r = blockIdx.x;
    const RopeRow w = rows[r];
    qk_rope_row(a, r, w.pos, w.base + (2 * size_t(layer)) * w.part_bytes, w.base + (2 * size_t(layer) + 1) * w.part_bytes,
                w.cap, w.slot);
}

// ---- attention -----------------------------------------------------------------------------------
//
// The canonical computation of one query row (position pos, keys first_key(pos) <= j <= pos):
//   for each chunk c of kAttnChunk positions that holds a visible key, in order:
//     chunk state (m, l, acc[head_dim]) starts empty;
//     for each tile of kAttnKeyTile positions in c that holds a visible key, in order:
//       scores s_j = (fmaf chain of q[d] * k_j[d] over d = 0..head_dim-1) * scale, visible j only;
//       rescale = softmax_tile_begin(state, max s_j); p_j = exp(s_j - m);
//       l = l * rescale, then + p_j in key order; acc[d] = acc[d] * rescale, then fmaf(p_j, v_j[d], .)
//       in key order;
//   total = empty; total (+)= chunk state (softmax_merge, merge_acc) in chunk order;
//   out[d] = acc_total[d] / l_total.
// Tiles and chunks start at absolute multiples of their size, so the sequence of operations is a
// function of pos alone: the same whichever block (prefix or suffix) holds each key, however many
// rows share the launch, and for both kernels below (the tiled one runs the chunks in one block,
// the split one runs each chunk in its own block and merges them in attn_combine_kernel, with the
// same merge arithmetic in the same order).

struct AttnSmem {
    float* q;      // [rows][hd]
    float* k;      // [kAttnKeyTile][hd + 1]
    float* v;      // [kAttnKeyTile][hd]
    float* p;      // [rows][kAttnKeyTile]
    float* acc_c;  // [rows][hd]
    float* acc_t;  // [rows][hd] (tiled kernel only)
    float* st;     // [rows][8]: m_c, l_c, m_t, l_t, rescale, flag, merge scale a, merge scale b
};
enum { kMc = 0, kLc = 1, kMt = 2, kLt = 3, kRescale = 4, kFlag = 5, kSa = 6, kSb = 7 };

__device__ AttnSmem carve(float* base, int rows, int hd, bool with_total) {
    AttnSmem s;
    s.q = base;
    s.k = s.q + rows * hd;
    s.v = s.k + geom::kAttnKeyTile * (hd + 1);
    s.p = s.v + geom::kAttnKeyTile * hd;
    s.acc_c = s.p + rows * geom::kAttnKeyTile;
    s.acc_t = s.acc_c + rows * hd;
    s.st = s.acc_t + (with_total ? rows * hd : 0);
    return s;
}

__device__ inline float kv_at(const void* base, bool bf16, size_t i) {
    return bf16 ? km::bf16_to_f32(static_cast<const uint16_t*>(base)[i]) : static_cast<const float*>(base)[i];
}

__device__ inline bool visible(int j, int pos, int window) {
    return j >= geom::attn_first_key(pos, window) && j <= pos;
}

// Moves key tile [k0, k0 + kAttnKeyTile) of kv head kvh into shared memory as f32. Position j is
// read from the prefix block when j < seg[0].n, else from the suffix block: values move, nothing
// is computed, so a key's bits do not depend on its block. Positions past the end read as 0 (never used).
__device__ void load_tile(const AttnArgs& a, const AttnSmem& s, int kvh, int k0) {
    const int hd = a.head_dim, n_total = a.seg[0].n + a.seg[1].n;
    for (int e = threadIdx.x; e < geom::kAttnKeyTile * hd; e += blockDim.x) {
        const int jj = e / hd, d = e % hd, j = k0 + jj;
        float kv = 0.0f, vv = 0.0f;
        if (j < n_total) {
            const bool in_prefix = j < a.seg[0].n;
            const AttnSeg& sg = in_prefix ? a.seg[0] : a.seg[1];
            const size_t idx =
                (size_t(kvh) * size_t(sg.cap) + size_t(in_prefix ? j : j - a.seg[0].n)) * size_t(hd) + size_t(d);
            kv = kv_at(sg.k, a.kv_bf16, idx);
            vv = kv_at(sg.v, a.kv_bf16, idx);
        }
        s.k[jj * (hd + 1) + d] = kv;
        s.v[jj * hd + d] = vv;
    }
}

// Computes the chunk state of rows [t0, t0 + nr) (their queries already in s.q) over chunk c, into
// s.st[kMc], s.st[kLc] and s.acc_c. Every thread of the block calls it; it ends synchronised.
__device__ void attend_chunk(const AttnArgs& a, const AttnSmem& s, int t0, int nr, int h, int c) {
    const int hd = a.head_dim, KT = geom::kAttnKeyTile;
    const int kvh = h / (a.n_heads / a.n_kv_heads);
    for (int e = threadIdx.x; e < nr * hd; e += blockDim.x) s.acc_c[e] = 0.0f;
    for (int r = threadIdx.x; r < nr; r += blockDim.x) {
        s.st[r * 8 + kMc] = -INFINITY;
        s.st[r * 8 + kLc] = 0.0f;
    }
    __syncthreads();
    const int pos_first = a.first_pos + t0, pos_last = a.first_pos + t0 + nr - 1;
    const int lo_first = geom::attn_first_key(pos_first, a.window);  // the block's smallest visible key
    const int c_begin = c * geom::kAttnChunk;
    for (int k0 = c_begin; k0 < c_begin + geom::kAttnChunk && k0 <= pos_last; k0 += KT) {
        if (k0 + KT - 1 < lo_first) continue;  // no row sees this tile (uniform across the block)
        load_tile(a, s, kvh, k0);
        __syncthreads();
        // scores of visible (row, key) pairs; -inf elsewhere
        for (int e = threadIdx.x; e < nr * KT; e += blockDim.x) {
            const int r = e / KT, jj = e % KT;
            const int pos = a.first_pos + t0 + r;
            float sc = -INFINITY;
            if (visible(k0 + jj, pos, a.window)) {
                const float* q = s.q + r * hd;
                const float* k = s.k + jj * (hd + 1);
                float dot = 0.0f;
                for (int d = 0; d < hd; ++d) dot = fmaf(q[d], k[d], dot);
                sc = dot * a.scale;
            }
            s.p[e] = sc;
        }
        __syncthreads();
        // per row: the tile's max, the rescale, probabilities and l (key order)
        for (int r = threadIdx.x; r < nr; r += blockDim.x) {
            const int pos = a.first_pos + t0 + r;
            float* p = s.p + r * KT;
            float mx = -INFINITY;
            for (int jj = 0; jj < KT; ++jj)
                if (visible(k0 + jj, pos, a.window) && p[jj] > mx) mx = p[jj];
            if (mx == -INFINITY) {  // no visible key in this tile for this row
                s.st[r * 8 + kFlag] = 0.0f;
                continue;
            }
            km::SoftmaxState st;
            st.m = s.st[r * 8 + kMc];
            st.l = s.st[r * 8 + kLc];
            const float rescale = km::softmax_tile_begin(st, mx);
            float l = st.l;
            for (int jj = 0; jj < KT; ++jj) {
                if (!visible(k0 + jj, pos, a.window)) continue;
                const float pj = std::exp(p[jj] - st.m);
                p[jj] = pj;
                l = l + pj;
            }
            s.st[r * 8 + kMc] = st.m;
            s.st[r * 8 + kLc] = l;
            s.st[r * 8 + kRescale] = rescale;
            s.st[r * 8 + kFlag] = 1.0f;
        }
        __syncthreads();
        // weighted V sums, key order
        for (int e = threadIdx.x; e < nr * hd; e += blockDim.x) {
            const int r = e / hd, d = e % hd;
            if (s.st[r * 8 + kFlag] == 0.0f) continue;
            const int pos = a.first_pos + t0 + r;
            const float* p = s.p + r * KT;
            float acc = s.acc_c[e] * s.st[r * 8 + kRescale];
            for (int jj = 0; jj < KT; ++jj)
                if (visible(k0 + jj, pos, a.window)) acc = fmaf(p[jj], s.v[jj * hd + d], acc);
            s.acc_c[e] = acc;
        }
        __syncthreads();
    }
}

__device__ void load_queries(const AttnArgs& a, const AttnSmem& s, int t0, int nr, int h) {
    const int hd = a.head_dim;
    const size_t qd = size_t(a.n_heads) * hd;
    for (int e = threadIdx.x; e < nr * hd; e += blockDim.x) {
        const int r = e / hd, d = e % hd;
        s.q[e] = a.q[size_t(t0 + r) * qd + size_t(h) * hd + d];
    }
}

// Tiled kernel (prefill): block = (16 rows, one head); chunks in order, merged as they finish.
__global__ void attn_tiled_kernel(AttnArgs a) {
    extern __shared__ float smem[];
    const int hd = a.head_dim;
    const AttnSmem s = carve(smem, geom::kAttnRowsPerBlock, hd, true);
    const int t0 = blockIdx.x * geom::kAttnRowsPerBlock;
    const int nr = min(geom::kAttnRowsPerBlock, a.n_rows - t0);
    const int h = blockIdx.y;
    load_queries(a, s, t0, nr, h);
    for (int e = threadIdx.x; e < nr * hd; e += blockDim.x) s.acc_t[e] = 0.0f;
    for (int r = threadIdx.x; r < nr; r += blockDim.x) {
        s.st[r * 8 + kMt] = -INFINITY;
        s.st[r * 8 + kLt] = 0.0f;
    }
    __syncthreads();
    const int pos_first = a.first_pos + t0, pos_last = a.first_pos + t0 + nr - 1;
    const int c_lo = geom::attn_chunk_of(geom::attn_first_key(pos_first, a.window));
    const int c_hi = geom::attn_chunk_of(pos_last);
    for (int c = c_lo; c <= c_hi; ++c) {
        attend_chunk(a, s, t0, nr, h, c);
        for (int r = threadIdx.x; r < nr; r += blockDim.x) {
            const int pos = a.first_pos + t0 + r;
            const bool sees =
                geom::attn_chunk_of(geom::attn_first_key(pos, a.window)) <= c && c <= geom::attn_chunk_of(pos);
            s.st[r * 8 + kFlag] = sees ? 1.0f : 0.0f;
            if (!sees) continue;
            km::SoftmaxState total, chunk;
            total.m = s.st[r * 8 + kMt];
            total.l = s.st[r * 8 + kLt];
            chunk.m = s.st[r * 8 + kMc];
            chunk.l = s.st[r * 8 + kLc];
            const km::MergeScales f = km::softmax_merge(total, chunk);
            s.st[r * 8 + kMt] = total.m;
            s.st[r * 8 + kLt] = total.l;
            s.st[r * 8 + kSa] = f.a;
            s.st[r * 8 + kSb] = f.b;
        }
        __syncthreads();
        for (int e = threadIdx.x; e < nr * hd; e += blockDim.x) {
            const int r = e / hd;
            if (s.st[r * 8 + kFlag] == 0.0f) continue;
            s.acc_t[e] = km::merge_acc(s.acc_t[e], s.st[r * 8 + kSa], s.acc_c[e], s.st[r * 8 + kSb]);
        }
        __syncthreads();
    }
    const size_t qd = size_t(a.n_heads) * hd;
    for (int e = threadIdx.x; e < nr * hd; e += blockDim.x) {
        const int r = e / hd, d = e % hd;
        detail::attn_store(a, size_t(t0 + r) * qd + size_t(h) * hd + d, s.acc_t[e] / s.st[r * 8 + kLt]);
    }
}

// Split kernel (decode): block = (chunk, head, row); writes the chunk state to
// partial[row][head][chunk] = (m, l, acc[hd]).
__global__ void attn_split_kernel(AttnArgs a, float* __restrict__ partial, int n_chunks) {
    extern __shared__ float smem[];
    const int hd = a.head_dim;
    const int c = blockIdx.x, h = blockIdx.y, t = blockIdx.z;
    const int pos = a.first_pos + t;
    if (c < geom::attn_chunk_of(geom::attn_first_key(pos, a.window)) || c > geom::attn_chunk_of(pos)) return;
    const AttnSmem s = carve(smem, 1, hd, false);
    load_queries(a, s, t, 1, h);
    __syncthreads();
    attend_chunk(a, s, t, 1, h, c);
    float* out =
        partial + ((size_t(t) * size_t(a.n_heads) + size_t(h)) * size_t(n_chunks) + size_t(c)) * (size_t(hd) + 2);
    if (threadIdx.x == 0) {
        out[0] = s.st[kMc];
        out[1] = s.st[kLc];
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) out[2 + d] = s.acc_c[d];
}

void launch_elementwise_check(const char* name) {
    check_cuda(cudaGetLastError(), name, __FILE__, __LINE__);
}

}  // namespace

// ---- launchers ---------------------------------------------------------------------------------------

void embed(const uint16_t* table, const int32_t* tokens, float* x, int n_rows, int dim, cudaStream_t stream) {
    const geom::Launch l = geom::row_blocks(n_rows);
    embed_kernel<<<d3(l.grid), d3(l.block), 0, stream>>>(table, tokens, x, dim);
    CC_CUDA_CHECK_LAUNCH("embed_kernel");
}

void rmsnorm(const float* x, const int32_t* rows, const float* w, void* y, bool y_bf16, int n_rows, int dim, float eps,
             cudaStream_t stream) {
    const geom::Launch l = geom::row_blocks(n_rows);
    if (y_bf16)
        rmsnorm_kernel<true><<<d3(l.grid), d3(l.block), l.smem_bytes, stream>>>(x, rows, w, y, dim, eps);
    else
        rmsnorm_kernel<false><<<d3(l.grid), d3(l.block), l.smem_bytes, stream>>>(x, rows, w, y, dim, eps);
    CC_CUDA_CHECK_LAUNCH("rmsnorm_kernel");
}

void add_rmsnorm(float* x, const float* y, const float* w, uint16_t* out, int n_rows, int dim, float eps,
                 cudaStream_t stream) {
    const geom::Launch l = geom::row_blocks(n_rows);
    add_rmsnorm_kernel<<<d3(l.grid), d3(l.block), l.smem_bytes, stream>>>(x, y, w, out, dim, eps);
    CC_CUDA_CHECK_LAUNCH("add_rmsnorm_kernel");
}

void f32_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    const geom::Launch l = geom::elementwise(n);
    f32_to_bf16_kernel<<<d3(l.grid), d3(l.block), 0, stream>>>(x, y, n);
    launch_elementwise_check("f32_to_bf16_kernel launch");
}
void bf16_to_f32(const uint16_t* x, float* y, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    const geom::Launch l = geom::elementwise(n);
    bf16_to_f32_kernel<<<d3(l.grid), d3(l.block), 0, stream>>>(x, y, n);
    launch_elementwise_check("bf16_to_f32_kernel launch");
}
void add_inplace(float* x, const float* y, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    const geom::Launch l = geom::elementwise(n);
    add_kernel<<<d3(l.grid), d3(l.block), 0, stream>>>(x, y, n);
    launch_elementwise_check("add_kernel launch");
}
void add_bias_rows(float* x, const float* bias, int n_rows, int n_cols, cudaStream_t stream) {
    const int64_t n = int64_t(n_rows) * n_cols;
    if (n == 0) return;
    const geom::Launch l = geom::elementwise(n);
    add_bias_kernel<<<d3(l.grid), d3(l.block), 0, stream>>>(x, bias, n, n_cols);
    launch_elementwise_check("add_bias_kernel launch");
}
void swiglu(const float* gate, const float* up, uint16_t* out, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    const geom::Launch l = geom::elementwise(n);
    swiglu_kernel<<<d3(l.grid), d3(l.block), 0, stream>>>(gate, up, out, n);
    launch_elementwise_check("swiglu_kernel launch");
}

void qk_rope_store(const QkRopeArgs& args, cudaStream_t stream) {
    if (args.n_rows == 0) return;
    const geom::Launch l = geom::heads_per_row(args.n_rows, args.head_dim);
    qk_rope_kernel<<<d3(l.grid), d3(l.block), 0, stream>>>(args);
    CC_CUDA_CHECK_LAUNCH("qk_rope_kernel");
}

void qk_rope_store_rows(const QkRopeArgs& args, const RopeRow* rows, int layer, cudaStream_t stream) {
    if (args.n_rows == 0) return;
    const geom::Launch l = geom::heads_per_row(args.n_rows, args.head_dim);
    qk_rope_rows_kernel<<<d3(l.grid), d3(l.block), 0, stream>>>(args, rows, layer);
    CC_CUDA_CHECK_LAUNCH("qk_rope_rows_kernel");
}

namespace {

void check_view(const AttnArgs& a) {
    if (a.first_pos + a.n_rows > a.seg[0].n + a.seg[1].n)
        throw CudaError("attention: rows at positions up to " + std::to_string(a.first_pos + a.n_rows - 1) +
                        " but the view holds " + std::to_string(a.seg[0].n + a.seg[1].n) + " positions");
}

}  // namespace

void attention(const AttnArgs& a, float* partial, size_t partial_floats, AttnPath path, cudaStream_t stream) {
    if (a.n_rows == 0) return;
    check_view(a);
    if (a.kernel == AttnKernel::mma && geom::attn_mma_head_dim_ok(a.head_dim)) {
        attention_mma(a, partial, partial_floats,
                      path == AttnPath::split || (path == AttnPath::automatic && geom::attn_mma_use_split(a.n_rows)),
                      stream);
        return;
    }
    const bool split = path == AttnPath::split || (path == AttnPath::automatic && geom::attn_use_split(a.n_rows));
    if (!split) {
        const geom::Launch l = geom::attn_tiled(a.n_rows, a.n_heads, a.n_kv_heads, a.head_dim);
        if (l.smem_bytes > geom::kSmemDefaultBytes)
            CC_CUDA_CHECK(cudaFuncSetAttribute(attn_tiled_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               int(l.smem_bytes)));
        attn_tiled_kernel<<<d3(l.grid), d3(l.block), l.smem_bytes, stream>>>(a);
        CC_CUDA_CHECK_LAUNCH("attn_tiled_kernel");
        return;
    }
    const int n_positions = a.first_pos + a.n_rows;
    const geom::Launch l = geom::attn_split(a.n_rows, a.n_heads, a.n_kv_heads, a.head_dim, n_positions);
    const size_t need = geom::attn_partial_floats(a.n_rows, a.n_heads, a.head_dim, n_positions);
    if (partial == nullptr || partial_floats < need)
        throw CudaError("attention: split scratch holds " + std::to_string(partial_floats) + " floats, " +
                        std::to_string(need) + " needed");
    if (l.smem_bytes > geom::kSmemDefaultBytes)
        CC_CUDA_CHECK(
            cudaFuncSetAttribute(attn_split_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(l.smem_bytes)));
    const int n_chunks = int(l.grid.x);
    attn_split_kernel<<<d3(l.grid), d3(l.block), l.smem_bytes, stream>>>(a, partial, n_chunks);
    CC_CUDA_CHECK_LAUNCH("attn_split_kernel");
    combine_partials(a, partial, n_chunks, false, stream);
}

void attention_batch(std::span<const AttnArgs> seqs, float* partial, size_t partial_floats, cudaStream_t stream) {
    std::vector<AttnArgs> shared;  // the mma kernel's split launches, batched
    for (const AttnArgs& a : seqs) {
        if (a.n_rows == 0) continue;
        if (a.kernel == AttnKernel::mma && geom::attn_mma_head_dim_ok(a.head_dim) && geom::attn_mma_use_split(a.n_rows)) {
            check_view(a);
            shared.push_back(a);
        } else {
            attention(a, partial, partial_floats, AttnPath::automatic, stream);
        }
    }
    if (!shared.empty()) attention_mma_batch(shared, partial, partial_floats, stream);
}

void combine_partials(const AttnArgs& a, const float* partial, int n_chunks, bool canonical_zero, cudaStream_t stream) {
    const geom::Launch lc = geom::attn_combine(a.n_rows, a.n_heads, a.head_dim);
    if (canonical_zero)
        attn_combine_kernel<true><<<d3(lc.grid), d3(lc.block), 0, stream>>>(a, partial, n_chunks);
    else
        attn_combine_kernel<false><<<d3(lc.grid), d3(lc.block), 0, stream>>>(a, partial, n_chunks);
    CC_CUDA_CHECK_LAUNCH("attn_combine_kernel");
}

void argmax_rows(const float* logits, int n_rows, int vocab, int32_t* out, cudaStream_t stream) {
    if (n_rows == 0) return;
    const geom::Launch l = geom::argmax_blocks(n_rows);
    argmax_kernel<<<d3(l.grid), d3(l.block), l.smem_bytes, stream>>>(logits, vocab, out, 0, 1.0f, 0, 0);
    CC_CUDA_CHECK_LAUNCH("argmax_kernel");
}

void sample_rows(const float* logits, int n_rows, int vocab, float temperature, uint64_t seed, uint64_t step,
                 int32_t* out, cudaStream_t stream) {
    if (n_rows == 0) return;
    if (!(temperature > 0.0f)) throw CudaError("sample_rows: temperature must be > 0 (use argmax_rows for greedy)");
    const geom::Launch l = geom::argmax_blocks(n_rows);
    argmax_kernel<<<d3(l.grid), d3(l.block), l.smem_bytes, stream>>>(logits, vocab, out, 1, temperature, seed, step);
    CC_CUDA_CHECK_LAUNCH("sample_kernel");
}

}  // namespace cc::cuda::kern
