// The CPU backend's compute kernels, one table per instruction set (scalar, AVX2+FMA, AVX-512).
//
// The exactness contract (core/backend/backend.h) is kept by construction here:
// - GEMM: every output element y[m][n] is the chain acc = fma(x[m][k], w[n][k], acc) over
//   k = 0, 1, ..., K-1 starting from +0, whatever the block, tile, thread or batch size. Blocking
//   over K stores the running float and reloads it, which is exact. (The AVX-512 kernel keeps 16
//   output columns in the lanes of a register and broadcasts x; the order per element is the same.)
// - Attention: each (query row, head) computes every score q·k as an FMA chain over head_dim,
//   keys in the lanes of a vector of 16 keys (keys stored as rows are first moved into that tile
//   layout, which moves values and computes nothing); the softmax sum uses lane = absolute key position
//   mod the vector width, then a fixed reduction tree; P·V is an FMA chain over the key positions in
//   order, head_dim in the lanes. None of it depends on which block (prefix or suffix) holds a
//   key, on the other rows of the batch, or on the threads.
// The ISA path is chosen once per backend; different paths give different (equally valid) bits,
// so the path is part of the backend's numerics id.
#pragma once

#include "core/cpu/thread_pool.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cc::cpu {

enum class Isa { scalar, avx2, avx512 };
const char* isa_name(Isa isa);                 // "scalar", "avx2", "avx512"
Isa parse_isa(const std::string& name);        // throws std::runtime_error naming the value
bool isa_supported(Isa isa);                   // by this CPU (and OS)
Isa best_isa();
// `requested` = "" (auto) or a name; auto reads CC_CPU_ISA, else picks the best supported path.
// A path the CPU lacks is an error, never a silent fallback.
Isa resolve_isa(const std::string& requested);

// Keys are stored in tiles of 16 consecutive positions, transposed: [head_dim][16]. Then 16 scores
// are one vector of FMA chains over head_dim with q broadcast, and no horizontal sums are needed.
inline constexpr int kKeyTile = 16;

// How a packed weight matrix holds its elements.
enum class WFormat { f32, bf16, q8, bf16dot };
const char* wformat_name(WFormat f);  // "f32", "bf16", "q8", "bf16dot"
inline constexpr int kQ8Block = 32;   // q8: one F16 scale per 32 consecutive inputs of a feature

// A weight matrix (rows = out features N, cols = in features K): either row-major F32 or BF16 at
// `data` (read in place; the GEMM packs it per call), or prepacked once at load (`panels`, made by
// pack_matrix for one ISA's panel width `nr`): features in panels of nr, each panel [K][nr]
// contiguous, features past N zero. q8 panels hold int8 values and, at `scales`, per panel
// [ceil(K / 32)][nr] F16 scales; the weight is float(q) * scale, a product of an 8-bit and an
// 11-bit significand, so exact in F32. Every format reaches the FMA as an exact F32 value, so the
// GEMM's per-element FMA chain (and with it the exactness contract) is the same in all of them.
// bf16dot is the exception, a different product: BF16 weights in pairs along K, each panel
// [ceil(K / 2)][nr] of 32-bit pairs (element 2kp in the low half, 2kp+1 in the high half, 0 past K),
// multiplied by activations rounded to BF16 with AVX-512 BF16's VDPBF16PS (two products summed into
// each F32 lane per instruction: twice the F32 FMA's arithmetic). Only bf16dot::gemm reads it.
struct Matrix {
    const void* data = nullptr;
    bool bf16 = false;
    int64_t rows = 0;
    int64_t cols = 0;
    const void* panels = nullptr;      // prepacked (then `data` is not read)
    const uint16_t* scales = nullptr;  // q8 only
    WFormat format = WFormat::f32;     // of the panels
    int nr = 0;                        // panel width the panels were packed for
};

// Owns a prepacked matrix; `view` is what the GEMM takes.
// unique_ptr's deleter for what big_alloc gave (core/base/big_buffer.h: huge pages when large).
struct BigFree {
    size_t bytes = 0;
    void operator()(void* p) const;
};

struct PackedMatrix {
    std::unique_ptr<std::byte[], BigFree> storage;
    size_t bytes = 0;
    Matrix view;
};
// Packs `src` (row-major F32 or BF16) into `format` panels of width `nr` on the pool. F32 -> BF16
// rounds to nearest even; q8 takes per block scale = f16(max |w| / 127), q = round(w / scale).
PackedMatrix pack_matrix(ThreadPool& pool, const Matrix& src, WFormat format, int nr);
// The same for the rows of several matrices stacked in order (equal cols), as one matrix: e.g.
// q, k and v projections as one GEMM. Each output feature keeps its own FMA chain, so a stacked
// GEMM gives every feature the bits its own matrix would.
PackedMatrix pack_matrix(ThreadPool& pool, std::span<const Matrix> parts, WFormat format, int nr);
// Whether `format` holds every value of a `source_bf16` (else F32) matrix exactly: F32 always,
// BF16 and bf16dot only from BF16, q8 never.
bool holds_exactly(WFormat format, bool source_bf16);
// Row `row` (an output feature) of prepacked F32, BF16 or bf16dot panels, as F32: `cols` values
// into `out`, the values pack_matrix stored. Not for q8 (throws std::logic_error).
void unpack_row(const Matrix& packed, int64_t row, float* out);

// One K/V segment of one layer: positions [first_pos, first_pos + n_tokens).
// K comes in one of two layouts: tiled (a block the backend allocated and writes) or canonical rows
// (a read-only block linked in place from a group file's mapping, DESIGN §7); V is rows in both.
struct KvSegment {
    const void* k = nullptr;   // tiled: [n_kv_heads][capacity / 16][head_dim][16]
                               // k_rows: [n_kv_heads][capacity][head_dim]
    const void* v = nullptr;   // [n_kv_heads][capacity][head_dim]
    int capacity = 0;          // positions stored per head (a multiple of kKeyTile when tiled)
    bool k_rows = false;       // K in the canonical row layout
    int first_pos = 0;
    int n_tokens = 0;
};

struct AttentionArgs {
    bool kv_bf16 = false;
    int n_heads = 0, n_kv_heads = 0, head_dim = 0;
    int window = 0;            // sliding window: key j is seen by position p iff p - window < j <= p; 0 = none
    float scale = 1.0f;
    KvSegment seg[2];          // prefix then suffix; seg[1].first_pos == seg[0].first_pos + seg[0].n_tokens
    const float* q = nullptr;  // [n_rows][n_heads][head_dim], row t at position first_pos + t
    int n_rows = 0;
    int first_pos = 0;         // every position of the rows lies inside seg[1] (or seg[0] when seg[1] is empty)
    float* out = nullptr;      // [n_rows][n_heads * head_dim]
    // QK and P·V with VDPBF16PS (bf16dot:: above): q and the softmax weights rounded to BF16. Needs
    // kv_bf16 and bf16dot::supported().
    bool bf16_dot = false;
    // Several sequences over one prefix seg[0] (continuous batching: the prefix's K and V are read
    // once per kv head for all of them). When `suffixes` is set, row t (of n_rows) belongs to
    // sequence row_seq[t] (rows in ascending sequence order), lies at position row_pos[t] of that
    // sequence's suffix segment suffixes[row_seq[t]], reads its query at row_q[t] and writes
    // row_out[t]; q, first_pos and seg[1] are then unused. Each row's result is the bits it gets
    // in a call of its own (every score, weight and accumulator is its own chain, in the same order).
    const KvSegment* suffixes = nullptr;
    const int* row_seq = nullptr;
    const int* row_pos = nullptr;
    const float* const* row_q = nullptr;
    float* const* row_out = nullptr;
};

// Scratch owned by the backend, grown once to the largest call (never shrunk).
// Buffers are 64-byte aligned and zero-initialised when (re)allocated, with some slack at the end
// for padded vector reads.
class Workspace {
public:
    explicit Workspace(int n_threads) : per_thread_(size_t(n_threads)) {}
    float* shared(size_t n_floats);                 // one buffer for all threads
    float* per_thread(int thread, size_t n_floats); // one buffer per thread (thread < n_threads)
    int n_threads() const { return int(per_thread_.size()); }
private:
    struct Buffer {
        std::unique_ptr<float[], BigFree> data;
        size_t size = 0;
    };
    static float* grow(Buffer& b, size_t n_floats);
    Buffer shared_;
    std::vector<Buffer> per_thread_;
};

struct Kernels {
    Isa isa;
    int gemm_nr;  // the panel width pack_matrix must use for this table's GEMM
    // Y[M][N] = X[M][K] · W[N][K]ᵀ (W: rows N, cols K); Y row-major with leading dimension N.
    // A single row (decode) over prepacked panels streams each weight byte once, several panels
    // at a time so that enough independent FMA chains are in flight.
    void (*gemm)(ThreadPool& pool, Workspace& ws, const float* x, int m, const Matrix& w, float* y);
    // y = rmsnorm(x) * w over n elements (HF semantics, sum of squares with lane = i mod width).
    void (*rmsnorm)(const float* x, const float* w, float* y, int n, float eps);
    // out[i] = silu(gate[i]) * up[i].
    void (*swiglu)(const float* gate, const float* up, float* out, int64_t n);
    // exp of n floats (the vector exp the kernels use; exposed for tests).
    void (*exp)(const float* x, float* y, int64_t n);
    void (*attention)(ThreadPool& pool, Workspace& ws, const AttentionArgs& args);
};

const Kernels& kernels_for(Isa isa);

// The bf16dot GEMM (kernels_bf16dot.cpp): y = x · wᵀ with x rounded to BF16 (nearest even) and w
// packed as WFormat::bf16dot with panel_width() features per panel. Each output element is one
// chain of VDPBF16PS over the pairs in order from +0, whatever m, the blocking or the threads, so
// one row (decode) and many (prefill) give the same bits. The instruction's rounding is the CPU's
// (Intel documents round-to-nearest with denormals flushed; other vendors' may differ), so its
// results are exact across runs on one CPU model, not across vendors.
namespace bf16dot {
bool supported();  // AVX-512 BF16 on this CPU (and OS)
// "intel", "amd" or "other" (from CPUID): whose VDPBF16PS rounds the results, so part of the
// numerics id of the bf16dot format.
std::string cpu_vendor();
int panel_width();
void gemm(ThreadPool& pool, Workspace& ws, const float* x, int m, const Matrix& w, float* y);

// Attention with VDPBF16PS (AttentionArgs::bf16_dot; the attention kernel drives these pieces).
// Scores: q rounded to BF16 (as round_row), pairs along head_dim, acc = dpbf16(acc, k-pair, q-pair)
// over the pairs in order from +0, then * scale. P·V: the softmax weights rounded to BF16, pairs of
// key positions (2i, 2i+1) counted from position 0, one dpbf16 chain per output element over the
// pairs in order. So both chains depend only on absolute positions, never on blocking or threads.
inline constexpr int kQkRows = 8;  // vrows per qk call at most
// n floats to BF16, nearest even, bit for bit km::f32_to_bf16; out[n] = 0 when n is odd.
void round_row(const float* x, int n, uint16_t* out);
// out[r][t * 16 + i] = score of vrow r against key i of tile t (tiles 1 or 2, consecutive at k):
// q_pairs[p * q_stride + r] is pair p of vrow r; k tiles are [head_dim][16] BF16 (k_f32 false) or
// [head_dim][16] F32 holding BF16 values (k_f32 true).
void qk(int rows, int tiles, const uint32_t* q_pairs, int q_stride, const void* k, bool k_f32, int hd, float scale,
        float* const* out);
// Rows per pv call at most, for this head_dim.
int pv_group_rows(int hd);
// acc[r] += sum over pairs i in [i0, i1) of e_pairs[r][i] · (v row 2i, v row 2i+1): v points at row
// 2 * i0, rows hd apart. acc rows hold round_up(hd, 32) floats in the pair order (unpermute fixes it).
void pv(int rows, const uint32_t* const* e_pairs, int i0, int i1, const uint16_t* v, int hd, float* const* acc);
// acc (round_up(hd, 32) floats) from pv's lane order back to column order.
void unpermute(float* acc, int hd);
}  // namespace bf16dot

namespace scalar { const Kernels& table(); }
namespace avx2 { const Kernels& table(); }
namespace avx512 { const Kernels& table(); }

}  // namespace cc::cpu
