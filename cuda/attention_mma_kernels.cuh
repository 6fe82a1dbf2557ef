// The kernels of the tensor-core attention (AttnKernel::mma) and the combine of split partial
// states that the scalar kernels share, in a header so that two programs compile the same code:
// nvcc (cuda/attention_mma.cu, cuda/kernels.cu) and, for the CPU, the emulation of a block's threads,
// warp shuffles and mma.sync in tests/cuda/ (CC_CUDA_EMULATE), which runs it without a GPU.
//
// Attention on tensor cores (issue 34). Opt-in and not yet run on a device: the scalar kernels in
// kernels.cu stay the default and the self-test's reference until a device run shows this
// kernel's self-test rows green (docs/cuda.md, "Tensor-core attention").
//
// Why its bits do not depend on the batch, where the prefix ends, or which launch ran:
// - keys are visited in the scalar kernels' chunks of geom::kAttnChunk absolute positions, and
//   inside a chunk in tiles of geom::kAttnMmaKeyTile absolute positions, always in increasing
//   order; the chunks' states are merged in chunk order with km::softmax_merge, by the block itself
//   (tiled launch) or by combine_partials (split launch), with the same formulas;
// - a score is one chain of mma.sync m16n8k16 over head_dim in steps of 16, starting from zero; a
//   tile's P.V adds to the accumulator in steps of 16 keys; a tensor core computes each output
//   element from its own row and column only, so a (row, head) pair's result does not depend on
//   the other pairs of its tile (the self-test's invariance rows check this on the device);
// - a row's tile maximum and sum are fixed trees (its 16 values in order, then the 4 lanes of its
//   quad by xor-shuffles 1, 2); the maximum is exact in any order;
// - a tile that a row does not see at all (its warp-mates do) leaves the row's state unchanged:
//   m stays, the rescale is exactly 1 (no exp), the sum adds +0 and P.V adds zero products. The one
//   bit that could differ is the sign of an accumulator that is exactly zero, so every output gets
//   + 0.0f (a -0 becomes +0; any other value is unchanged);
// - K/V slots past the view's end are loaded as zeros (0 * NaN would poison a row).
#pragma once

#include "core/base/kernel_math.h"
#include "cuda/attention_args.h"
#include "cuda/launch_geometry.h"
#include "cuda/mma_sync.cuh"

#include <cmath>
#include <cstdint>

namespace cc::cuda::kern::detail {

constexpr int kTile = geom::kAttnMmaKeyTile;
constexpr int kPairs = geom::kAttnMmaPairsPerBlock;
constexpr int kThreads = 32 * geom::kAttnMmaWarps;

// Output element i of an attention launch: f32 into a.out, or rounded to bf16 into a.out_bf16 (the
// fused path: o_proj reads it as is). Both kernel families store through it.
__device__ __forceinline__ void attn_store(const AttnArgs& a, size_t i, float v) {
    if (a.out_bf16 != nullptr)
        a.out_bf16[i] = km::f32_to_bf16(v);
    else
        a.out[i] = v;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    return uint32_t(km::f32_to_bf16(lo)) | (uint32_t(km::f32_to_bf16(hi)) << 16);
}

// 8 consecutive K or V values of position j (absolute) as bf16 pairs (values 2i and 2i + 1 in
// word i, the first in the low half); zeros past the view's end. 16-byte loads: the launcher checks
// that the blocks are 16-byte aligned (their rows are, head_dim being a multiple of 8).
__device__ __forceinline__ uint4 load8(const AttnArgs& a, int part, int kvh, int j, int d0) {
    uint4 r = {0u, 0u, 0u, 0u};
    const int n0 = a.seg[0].n, n_all = a.seg[0].n + a.seg[1].n;
    if (j >= n_all) return r;
    const AttnSeg& sg = j < n0 ? a.seg[0] : a.seg[1];
    const int slot = j < n0 ? j : j - n0;
    const size_t idx = (size_t(kvh) * size_t(sg.cap) + size_t(slot)) * size_t(a.head_dim) + size_t(d0);
    const void* base = part == 0 ? sg.k : sg.v;
    if (a.kv_bf16) return *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + idx);
    const float4* src = reinterpret_cast<const float4*>(static_cast<const float*>(base) + idx);
    const float4 x = src[0], y = src[1];
    r.x = pack_bf16(x.x, x.y);
    r.y = pack_bf16(x.z, x.w);
    r.z = pack_bf16(y.x, y.y);
    r.w = pack_bf16(y.z, y.w);
    return r;
}

template <int HD>
struct Smem {
    static constexpr int kQ = HD + 8;     // row stride of q and k (bf16 elements)
    static constexpr int kV = kTile + 8;  // row stride of the transposed value tile
    uint16_t* q;                          // [kPairs][kQ]
    uint16_t* k;                          // [kTile][kQ]
    uint16_t* vt;                         // [HD][kV]
};

// One (row, head) pair of the thread's two accumulator rows (g and g + 8 of its warp's 16).
struct Pair {
    bool valid = false;
    int row = 0, head = 0;
    int lo = 1, pos = 0;  // visible keys lo <= j <= pos (empty when invalid)
    int c_lo = 1, c_hi = 0;
};

template <int HD>
__device__ void load_tile(const AttnArgs& a, const Smem<HD>& s, int kvh, int k0) {
    constexpr int kVec = HD / 8;
    for (int e = threadIdx.x; e < kTile * kVec; e += blockDim.x) {
        const int jj = e / kVec, d0 = (e % kVec) * 8;
        *reinterpret_cast<uint4*>(s.k + jj * Smem<HD>::kQ + d0) = load8(a, 0, kvh, k0 + jj, d0);
        const uint4 v = load8(a, 1, kvh, k0 + jj, d0);
        const uint32_t vw[4] = {v.x, v.y, v.z, v.w};
        for (int i = 0; i < 4; ++i) {
            s.vt[(d0 + 2 * i) * Smem<HD>::kV + jj] = uint16_t(vw[i] & 0xffffu);
            s.vt[(d0 + 2 * i + 1) * Smem<HD>::kV + jj] = uint16_t(vw[i] >> 16);
        }
    }
}

// The warp's chunk c: state (m, l) of its two rows and the weighted V sums o, from zero. Every
// thread of the block calls it (the tiles are loaded together); it ends synchronised.
template <int HD>
__device__ void mma_chunk(const AttnArgs& a, const Smem<HD>& s, int kvh, int c, int block_lo, int block_pos_last,
                          bool warp_active, int warp_lo, int warp_pos_last, const Pair (&pr)[2], float (&m)[2],
                          float (&l)[2], float (&o)[HD / 8][4]) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.0f;
    for (int nd = 0; nd < HD / 8; ++nd)
        for (int i = 0; i < 4; ++i) o[nd][i] = 0.0f;
    const int c_begin = c * geom::kAttnChunk;
    for (int k0 = c_begin; k0 < c_begin + geom::kAttnChunk && k0 <= block_pos_last; k0 += kTile) {
        if (k0 + kTile - 1 < block_lo) continue;  // no row of the block sees this tile (uniform)
        __syncthreads();                          // the previous tile is no longer read
        load_tile<HD>(a, s, kvh, k0);
        __syncthreads();
        if (!warp_active || k0 + kTile - 1 < warp_lo || k0 > warp_pos_last) continue;  // uniform in the warp

        // scores: one mma chain over head_dim per 8 keys
        float sc[kTile / 8][4];
        for (int nb = 0; nb < kTile / 8; ++nb)
            for (int i = 0; i < 4; ++i) sc[nb][i] = 0.0f;
        const uint16_t* qrow = s.q + (warp * 16 + g) * Smem<HD>::kQ + 2 * t;
#pragma unroll
        for (int ks = 0; ks < HD / 16; ++ks) {
            const uint32_t af[4] = {ld32(qrow + ks * 16), ld32(qrow + 8 * Smem<HD>::kQ + ks * 16),
                                    ld32(qrow + ks * 16 + 8), ld32(qrow + 8 * Smem<HD>::kQ + ks * 16 + 8)};
#pragma unroll
            for (int nb = 0; nb < kTile / 8; ++nb) {
                const uint16_t* kb = s.k + (nb * 8 + g) * Smem<HD>::kQ + ks * 16 + 2 * t;
                mma_16816(sc[nb], af, ld32(kb), ld32(kb + 8));
            }
        }
        // scale and mask; the tile's maximum per row
        float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nb = 0; nb < kTile / 8; ++nb)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int r = i / 2, j = k0 + nb * 8 + 2 * t + (i % 2);
                const bool vis = pr[r].lo <= j && j <= pr[r].pos;
                sc[nb][i] = vis ? sc[nb][i] * a.scale : -INFINITY;
                tmax[r] = fmaxf(tmax[r], sc[nb][i]);
            }
        float rescale[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 1));
            tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 2));
            const float m_new = tmax[r] > m[r] ? tmax[r] : m[r];
            // exactly 1 when the maximum stays (a tile this row does not see changes nothing)
            rescale[r] = m_new == m[r] ? 1.0f : (m[r] == -INFINITY ? 0.0f : std::exp(m[r] - m_new));
            m[r] = m_new;
        }
        // probabilities (in place) and the tile's sum per row: the thread's 16 in order, then its quad
        float tsum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int nb = 0; nb < kTile / 8; ++nb)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int r = i / 2;
                const float p = sc[nb][i] == -INFINITY ? 0.0f : std::exp(sc[nb][i] - m[r]);
                sc[nb][i] = p;
                tsum[r] = tsum[r] + p;
            }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            tsum[r] = tsum[r] + __shfl_xor_sync(0xffffffffu, tsum[r], 1);
            tsum[r] = tsum[r] + __shfl_xor_sync(0xffffffffu, tsum[r], 2);
            l[r] = l[r] * rescale[r] + tsum[r];
        }
#pragma unroll
        for (int nd = 0; nd < HD / 8; ++nd) {
            o[nd][0] = o[nd][0] * rescale[0];
            o[nd][1] = o[nd][1] * rescale[0];
            o[nd][2] = o[nd][2] * rescale[1];
            o[nd][3] = o[nd][3] * rescale[1];
        }
        // P.V in steps of 16 keys
#pragma unroll
        for (int kk = 0; kk < kTile / 16; ++kk) {
            const uint32_t pf[4] = {pack_bf16(sc[2 * kk][0], sc[2 * kk][1]), pack_bf16(sc[2 * kk][2], sc[2 * kk][3]),
                                    pack_bf16(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                                    pack_bf16(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
#pragma unroll
            for (int nd = 0; nd < HD / 8; ++nd) {
                const uint16_t* vb = s.vt + (nd * 8 + g) * Smem<HD>::kV + kk * 16 + 2 * t;
                mma_16816(o[nd], pf, ld32(vb), ld32(vb + 8));
            }
        }
    }
    __syncthreads();
}

// One block's work: `chunk` (split: the chunk it computes; tiled: unused), KV head `kvh`, block of
// pairs `pair_block`. kSplit: written to partial[row][head][chunk] = (m, l, o[head_dim]) for the
// rows that see the chunk; else every chunk of the block, merged in order, and the output. A block
// past the rows' pairs returns at once (a batch launch sizes its grid for its longest sequence).
template <int HD, bool kSplit>
__device__ __forceinline__ void attn_mma_block(const AttnArgs& a, float* __restrict__ partial, int n_chunks, int chunk,
                                               int kvh, int pair_block) {
    CC_DYNAMIC_SMEM(uint16_t, smem_bf16);
    Smem<HD> s;
    s.q = smem_bf16;
    s.k = s.q + kPairs * Smem<HD>::kQ;
    s.vt = s.k + kTile * Smem<HD>::kQ;
    const int group = a.n_heads / a.n_kv_heads;
    const int pair0 = pair_block * kPairs;
    const int n_pairs = a.n_rows * group;
    if (pair0 >= n_pairs) return;  // uniform
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    const size_t qd = size_t(a.n_heads) * HD;

    // the block's queries as bf16 (zeros past the last pair)
    for (int e = threadIdx.x; e < kPairs * (HD / 2); e += blockDim.x) {
        const int p = e / (HD / 2), d = (e % (HD / 2)) * 2;
        float x0 = 0.0f, x1 = 0.0f;
        if (pair0 + p < n_pairs) {
            const int row = (pair0 + p) / group, head = kvh * group + (pair0 + p) % group;
            const float* src = a.q + size_t(row) * qd + size_t(head) * HD + d;
            x0 = src[0];
            x1 = src[1];
        }
        *reinterpret_cast<uint32_t*>(s.q + p * Smem<HD>::kQ + d) = pack_bf16(x0, x1);
    }
    // the thread's two pairs, its warp's and its block's key ranges
    Pair pr[2];
    for (int r = 0; r < 2; ++r) {
        const int p = pair0 + warp * 16 + g + 8 * r;
        if (p >= n_pairs) continue;
        pr[r].valid = true;
        pr[r].row = p / group;
        pr[r].head = kvh * group + p % group;
        pr[r].pos = a.first_pos + pr[r].row;
        pr[r].lo = geom::attn_first_key(pr[r].pos, a.window);
        pr[r].c_lo = geom::attn_chunk_of(pr[r].lo);
        pr[r].c_hi = geom::attn_chunk_of(pr[r].pos);
    }
    const int last_pair = min(pair0 + kPairs, n_pairs) - 1;
    const int block_pos_first = a.first_pos + pair0 / group, block_pos_last = a.first_pos + last_pair / group;
    const int block_lo = geom::attn_first_key(block_pos_first, a.window);
    const int wp0 = pair0 + warp * 16;
    const bool warp_active = wp0 < n_pairs;
    const int warp_lo = geom::attn_first_key(a.first_pos + wp0 / group, a.window);
    const int warp_pos_last = a.first_pos + (min(wp0 + 16, n_pairs) - 1) / group;
    __syncthreads();

    float m[2], l[2], o[HD / 8][4];
    if (kSplit) {
        const int c = chunk;
        if (c < geom::attn_chunk_of(block_lo) || c > geom::attn_chunk_of(block_pos_last)) return;  // uniform
        mma_chunk<HD>(a, s, kvh, c, block_lo, block_pos_last, warp_active, warp_lo, warp_pos_last, pr, m, l, o);
        for (int r = 0; r < 2; ++r) {
            if (!pr[r].valid || c < pr[r].c_lo || c > pr[r].c_hi) continue;
            float* dst = partial +
                         ((size_t(pr[r].row) * size_t(a.n_heads) + size_t(pr[r].head)) * size_t(n_chunks) + size_t(c)) *
                             (size_t(HD) + 2);
            if (t == 0) {
                dst[0] = m[r];
                dst[1] = l[r];
            }
#pragma unroll
            for (int nd = 0; nd < HD / 8; ++nd) {
                dst[2 + nd * 8 + 2 * t] = o[nd][2 * r];
                dst[2 + nd * 8 + 2 * t + 1] = o[nd][2 * r + 1];
            }
        }
        return;
    }
    km::SoftmaxState total[2];
    float acc[HD / 8][4];
    for (int nd = 0; nd < HD / 8; ++nd)
        for (int i = 0; i < 4; ++i) acc[nd][i] = 0.0f;
    const int c_end = geom::attn_chunk_of(block_pos_last);
    for (int c = geom::attn_chunk_of(block_lo); c <= c_end; ++c) {
        mma_chunk<HD>(a, s, kvh, c, block_lo, block_pos_last, warp_active, warp_lo, warp_pos_last, pr, m, l, o);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            if (!pr[r].valid || c < pr[r].c_lo || c > pr[r].c_hi) continue;
            km::SoftmaxState chunk;
            chunk.m = m[r];
            chunk.l = l[r];
            const km::MergeScales f = km::softmax_merge(total[r], chunk);
#pragma unroll
            for (int nd = 0; nd < HD / 8; ++nd) {
                acc[nd][2 * r] = km::merge_acc(acc[nd][2 * r], f.a, o[nd][2 * r], f.b);
                acc[nd][2 * r + 1] = km::merge_acc(acc[nd][2 * r + 1], f.a, o[nd][2 * r + 1], f.b);
            }
        }
    }
#pragma unroll  // acc stays in registers only with constant indices
    for (int r = 0; r < 2; ++r) {
        if (!pr[r].valid) continue;
        const size_t dst = size_t(pr[r].row) * qd + size_t(pr[r].head) * HD;
#pragma unroll
        for (int nd = 0; nd < HD / 8; ++nd) {
            attn_store(a, dst + nd * 8 + 2 * t, acc[nd][2 * r] / total[r].l + 0.0f);
            attn_store(a, dst + nd * 8 + 2 * t + 1, acc[nd][2 * r + 1] / total[r].l + 0.0f);
        }
    }
}

// Where a sequence of an AttnBatch has its partial states in the scratch, in floats.
CC_HD inline size_t attn_partial_offset(const AttnArgs& a, int row0, int n_chunks) {
    return size_t(row0) * size_t(a.n_heads) * size_t(n_chunks) * (size_t(a.head_dim) + 2);
}

// grid = (chunk or 1, KV head, block of pairs).
template <int HD, bool kSplit>
__global__ void __launch_bounds__(kThreads) attn_mma_kernel(AttnArgs a, float* __restrict__ partial, int n_chunks) {
    attn_mma_block<HD, kSplit>(a, partial, n_chunks, blockIdx.x, blockIdx.y, blockIdx.z);
}

// Several sequences' split launches in one (the sequences of a decode step): grid = (chunk, KV
// head, sequence * b.pair_blocks + block of pairs). Each block computes exactly what the block at
// (chunk, KV head, block of pairs) of the sequence's own split launch computes, into the
// sequence's rows of the scratch, so every sequence gets the bits it gets alone.
template <int HD>
__device__ __forceinline__ void attn_mma_batch_block(const AttnBatch& b, float* __restrict__ partial, int n_chunks) {
    const int seq = blockIdx.z / b.pair_blocks;
    const AttnArgs& a = b.seq[seq];
    attn_mma_block<HD, true>(a, partial + attn_partial_offset(a, b.partial_row0[seq], n_chunks), n_chunks, blockIdx.x,
                             blockIdx.y, blockIdx.z % b.pair_blocks);
}
template <int HD>
__global__ void __launch_bounds__(kThreads)
    attn_mma_batch_kernel(AttnBatch b, float* __restrict__ partial, int n_chunks) {
    attn_mma_batch_block<HD>(b, partial, n_chunks);
}

// One (head, row)'s combine: its chunks' partial states merged in chunk order, divided by l.
// kCanonicalZero (the mma kernel's): + 0.0f on each output, so a -0 is written as +0 (see the
// top of this file: the mma kernel's tiles may add a row's zero probabilities to an accumulator of -0).
template <bool kCanonicalZero>
__device__ __forceinline__ void attn_combine_row(const AttnArgs& a, const float* __restrict__ partial, int n_chunks,
                                                 int h, int t) {
    const int hd = a.head_dim;
    const int pos = a.first_pos + t;
    const int c_lo = geom::attn_chunk_of(geom::attn_first_key(pos, a.window)), c_hi = geom::attn_chunk_of(pos);
    const float* base = partial + (size_t(t) * size_t(a.n_heads) + size_t(h)) * size_t(n_chunks) * (size_t(hd) + 2);
    const size_t qd = size_t(a.n_heads) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        km::SoftmaxState total;
        float acc = 0.0f;
        for (int c = c_lo; c <= c_hi; ++c) {
            const float* part = base + size_t(c) * (size_t(hd) + 2);
            km::SoftmaxState chunk;
            chunk.m = part[0];
            chunk.l = part[1];
            const km::MergeScales f = km::softmax_merge(total, chunk);
            acc = km::merge_acc(acc, f.a, part[2 + d], f.b);
        }
        const float o = acc / total.l;
        attn_store(a, size_t(t) * qd + size_t(h) * hd + d, kCanonicalZero ? o + 0.0f : o);
    }
}

// grid = (head, row).
template <bool kCanonicalZero>
__global__ void attn_combine_kernel(AttnArgs a, const float* __restrict__ partial, int n_chunks) {
    attn_combine_row<kCanonicalZero>(a, partial, n_chunks, blockIdx.x, blockIdx.y);
}

// The combine of attn_mma_batch_kernel's partial states: grid = (head, row, sequence); rows past a
// sequence's return. (A template, as every kernel in this header, so that two programs may include it.)
template <bool kCanonicalZero>
__device__ __forceinline__ void attn_combine_batch_block(const AttnBatch& b, const float* __restrict__ partial,
                                                         int n_chunks) {
    const AttnArgs& a = b.seq[blockIdx.z];
    if (int(blockIdx.y) >= a.n_rows) return;
    attn_combine_row<kCanonicalZero>(a, partial + attn_partial_offset(a, b.partial_row0[blockIdx.z], n_chunks),
                                     n_chunks, blockIdx.x, blockIdx.y);
}
template <bool kCanonicalZero>
__global__ void attn_combine_batch_kernel(AttnBatch b, const float* __restrict__ partial, int n_chunks) {
    attn_combine_batch_block<kCanonicalZero>(b, partial, n_chunks);
}

// The two kernels above for graph replay (CudaBackendOptions::graph_replay): the batch is read
// from device memory, tables[layer], which the host rewrites before each launch of the graph,
// instead of from the launch's arguments, which a captured graph keeps. n_chunks (the grid's and
// the scratch's) is the KV-length bucket's (geom::graph_positions_bucket): the same blocks run the
// same code on the same values as the launches above, so every sequence gets the same bits.
template <int HD>
__global__ void __launch_bounds__(kThreads) attn_mma_batch_table_kernel(const AttnBatch* __restrict__ tables, int layer,
                                                                        float* __restrict__ partial, int n_chunks) {
    attn_mma_batch_block<HD>(tables[layer], partial, n_chunks);
}
template <bool kCanonicalZero>
__global__ void attn_combine_batch_table_kernel(const AttnBatch* __restrict__ tables, int layer,
                                                const float* __restrict__ partial, int n_chunks) {
    attn_combine_batch_block<kCanonicalZero>(tables[layer], partial, n_chunks);
}

}  // namespace cc::cuda::kern::detail
