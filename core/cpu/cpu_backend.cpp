// The CPU backend: one forward pass over a batch of tokens, llama2.c-style straight-line code per
// layer; the heavy lifting (GEMM, attention) is in kernels_<isa>.cpp.
#include "core/cpu/cpu_backend.h"

#include "core/backend/deferred_rope.h"
#include "core/backend/partial_forward.h"

#include "core/base/big_buffer.h"
#include "core/base/warm_pages.h"
#include "core/cpu/kernels.h"
#include "core/base/mapped_file.h"
#include "core/cpu/thread_pool.h"
#include "core/base/kernel_math.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

namespace cc {
namespace {

using cpu::kKeyTile;

template <class T>
using BigVector = std::vector<T, BigAllocator<T>>;   // huge-page backed when large (big_buffer.h)

// KV storage: new elements are left unwritten (WarmAllocator default-initialises), since a
// block's positions are written before they count and zeroing a block first only costs time (the
// whole capacity, max_new_tokens included, at every request; see KvRecycler). Its pool is the
// backend's warm KV pool (CpuBackendOptions::kv_warm_bytes), null without one (big_alloc).
template <class T>
using KvStorage = std::vector<T, WarmAllocator<T>>;

std::string shape_str(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}


float element_to_f32(const std::byte* data, DType t, size_t i) {
    switch (t) {
        case DType::f32: {
            float f;
            std::memcpy(&f, data + 4 * i, 4);
            return f;
        }
        case DType::bf16: {
            uint16_t h;
            std::memcpy(&h, data + 2 * i, 2);
            return km::bf16_to_f32(h);
        }
        case DType::f16: {
            uint16_t h;
            std::memcpy(&h, data + 2 * i, 2);
            return km::f16_to_f32(h);
        }
    }
    return 0.0f;
}

// ---- KV block --------------------------------------------------------------------------------------
//
// Freed KV storage, kept for the next allocation: its pages stay mapped, so a new block needs no
// page faults (on a 512-token prefill of the 0.6B shape the faults of a fresh 59 MB block cost
// about as much as attention). Neither a recycled nor a new buffer is zeroed (writing zeros only
// touches pages, see CpuKvBlock::reserve): nothing reads a position before it is written for its
// value: attention scores whole key tiles but replaces the scores past a row's last key by a
// select (keep_lanes) before the softmax, and reads V rows only up to the last key (the bf16dot
// pairs copy a last odd row next to zeros); export reads [0, n). The test
// cpu_backend.stale_kv_storage_never_reaches_the_logits fills a block's storage with NaN before
// the writes and checks every logit == ordinary blocks'.
// At most kKeep buffers of at most kKeepBytes together; a buffer serves a request of at least a
// quarter of its size. Shared by a backend and its blocks, so a block may outlive its backend.
//
// Storage it does not keep, and storage it has none for, goes to and comes from the backend's warm
// KV pool when there is one (CpuBackendOptions::kv_warm_bytes): resident 2 MiB pieces that a new
// buffer gets by moving page tables (WarmPages), so a request's block is not faulted in on its
// path even when no whole buffer was freed (a server's finished requests keep theirs in the
// conversation cache; its evictions come back here, piece by piece).
class KvRecycler {
public:
    explicit KvRecycler(std::shared_ptr<WarmPages> pool) : pool_(std::move(pool)) {}

    template <class T>
    KvStorage<T> take(size_t n) {
        std::lock_guard lock(mutex_);
        auto& list = buffers<T>();
        for (auto it = list.begin(); it != list.end(); ++it) {
            if (it->capacity() >= n && it->capacity() / 4 <= n) {
                KvStorage<T> v = std::move(*it);
                bytes_ -= v.capacity() * sizeof(T);
                list.erase(it);
                v.resize(n);  // within the capacity: nothing is written
                return v;
            }
        }
        return KvStorage<T>(n, WarmAllocator<T>(pool_));
    }
    template <class T>
    void give(KvStorage<T>&& v) {
        const size_t b = v.capacity() * sizeof(T);
        if (b == 0) return;
        std::lock_guard lock(mutex_);
        auto& list = buffers<T>();
        if (b > kKeepBytes) return;
        while (!list.empty() && (list.size() >= kKeep || bytes_ + b > kKeepBytes)) {
            bytes_ -= list.front().capacity() * sizeof(T);
            list.erase(list.begin());
        }
        bytes_ += b;
        list.push_back(std::move(v));
    }

private:
    static constexpr size_t kKeep = 2;
    static constexpr size_t kKeepBytes = size_t(1) << 30;
    const std::shared_ptr<WarmPages> pool_;  // null: none (storage comes from big_alloc)
    template <class T>
    std::vector<KvStorage<T>>& buffers() {
        if constexpr (std::is_same_v<T, float>) return f32_;
        else return b16_;
    }
    std::mutex mutex_;
    std::vector<KvStorage<float>> f32_;
    std::vector<KvStorage<uint16_t>> b16_;
    size_t bytes_ = 0;   // of both lists (they share the budget)
};

// Per layer, K then V, each for every kv head over `cap` positions (cap = capacity rounded up to
// a key tile):  K [n_kv_heads][cap / 16][head_dim][16]   keys transposed in tiles of 16 positions
//               V [n_kv_heads][cap][head_dim]            one row per position
// Elements are f32 or bf16 (rounded to nearest even when written). export_kv/import_kv convert to
// and from the canonical [n_kv_heads][n_tokens][head_dim] layout.
//
// A linked block (link_kv) is the other kind: read-only, over a canonical image it does not own
// (a group file's mapping, kept alive by `keep_alive_`), per layer K then V, each
// [n_kv_heads][n_tokens][head_dim]. Attention reads its K rows through k_rows_to_tiles, which
// moves them into the tile layout above in L1 scratch, so both kinds give the same scores bit for
// bit. Why not rows for every block: the tile layout lets the score kernel load 16 keys' dimension
// d as one vector with no shuffles, which the private blocks (every prefill and decode step) keep;
// the transpose costs only where a linked group is read, and moves values without arithmetic, so
// exactness holds by construction rather than by a second score kernel matching the first.
class CpuKvBlock final : public KvBlock {
public:
    CpuKvBlock(const void* owner, const ModelConfig& c, bool bf16, const std::byte* image, int n_tokens,
               std::shared_ptr<const void> keep_alive)
        : owner_(owner),
          bf16_(bf16),
          n_layers_(c.n_layers),
          n_kv_(c.n_kv_heads),
          hd_(c.head_dim),
          capacity_(n_tokens),
          cap_(n_tokens),
          n_tokens_(n_tokens),
          image_(image),
          keep_alive_(std::move(keep_alive)) {}

    CpuKvBlock(const void* owner, const ModelConfig& c, bool bf16, int capacity, std::shared_ptr<KvRecycler> recycler)
        : owner_(owner),
          bf16_(bf16),
          n_layers_(c.n_layers),
          n_kv_(c.n_kv_heads),
          hd_(c.head_dim),
          capacity_(capacity),
          recycler_(std::move(recycler)) {
        if (capacity < 0) throw std::runtime_error("allocate_kv: negative capacity " + std::to_string(capacity));
    }
    ~CpuKvBlock() override {
        if (!recycler_) return;
        recycler_->give(std::move(f32_));
        recycler_->give(std::move(b16_));
    }
    CpuKvBlock(const CpuKvBlock&) = delete;
    CpuKvBlock& operator=(const CpuKvBlock&) = delete;

    int capacity_tokens() const override { return capacity_; }
    int storage_tokens() const override { return cap_; }
    int n_tokens() const override { return n_tokens_; }
    void truncate(int n_tokens) override {
        if (n_tokens < 0 || n_tokens > n_tokens_)
            throw std::runtime_error("KvBlock::truncate: " + std::to_string(n_tokens) + " is outside [0, " +
                                     std::to_string(n_tokens_) + "]");
        n_tokens_ = n_tokens;
    }
    void set_n_tokens(int n) { n_tokens_ = n; }

    // Storage for positions [0, n), n <= capacity_tokens(), before they are written. A block is
    // allocated for its prompt plus max_new_tokens, but most replies stop far short of that, and
    // with huge pages every 2 MiB page of the layout below is touched as soon as position 0 is
    // written (a head's K and V span all of cap_): faulting in the whole capacity cost a cache
    // hit 70 ms at max_tokens 512 and 276 ms at 2,048 (0.6B shape, BF16 KV). So storage starts at
    // what is reserved or first written plus a quarter (at least kGrowRoom positions), and grows
    // (at least doubling: the copies add up to less than the final size) up to the capacity.
    // Growing copies the written positions into the new layout unchanged, so no value changes.
    void reserve(int n) override {
        if (n <= cap_ || linked()) return;
        const int want = cap_ == 0 ? n + std::max(kGrowRoom, n / 4) : std::max(n + kGrowRoom, 2 * cap_);
        const int cap = round_up_tile(std::min(capacity_, want));
        if (bf16_)
            b16_ = grown(b16_, cap);
        else
            f32_ = grown(f32_, cap);
        cap_ = cap;
    }
    const void* owner() const { return owner_; }
    bool linked() const { return image_ != nullptr; }  // read-only, over a canonical image

    size_t head_elems() const { return size_t(cap_) * size_t(hd_); }
    size_t layer_elems() const { return 2 * size_t(n_kv_) * head_elems(); }
    size_t k_index(int layer, int kvh, int pos, int d) const {
        return size_t(layer) * layer_elems() + size_t(kvh) * head_elems() +
               (size_t(pos / kKeyTile) * size_t(hd_) + size_t(d)) * kKeyTile + size_t(pos % kKeyTile);
    }
    size_t v_index(int layer, int kvh, int pos, int d) const {
        return size_t(layer) * layer_elems() + size_t(n_kv_) * head_elems() + size_t(kvh) * head_elems() +
               size_t(pos) * size_t(hd_) + size_t(d);
    }
    const void* at(size_t i) const {
        return bf16_ ? static_cast<const void*>(b16_.data() + i) : static_cast<const void*>(f32_.data() + i);
    }

    // Stores one position's K and V rows of one kv head (head_dim floats each).
    void write(int layer, int kvh, int pos, const float* k, const float* v) {
        for (int d = 0; d < hd_; ++d) {
            const size_t ki = k_index(layer, kvh, pos, d), vi = v_index(layer, kvh, pos, d);
            if (bf16_) {
                b16_[ki] = km::f32_to_bf16(k[d]);
                b16_[vi] = km::f32_to_bf16(v[d]);
            } else {
                f32_[ki] = k[d];
                f32_[vi] = v[d];
            }
        }
    }

    cpu::KvSegment segment(int layer, int first_pos, int n) const {
        cpu::KvSegment s;
        if (linked()) {
            s.k = image_ + (2 * size_t(layer)) * image_part_bytes();
            s.v = image_ + (2 * size_t(layer) + 1) * image_part_bytes();
            s.k_rows = true;
        } else {
            s.k = at(k_index(layer, 0, 0, 0));
            s.v = at(v_index(layer, 0, 0, 0));
        }
        s.capacity = cap_;
        s.first_pos = first_pos;
        s.n_tokens = n;
        return s;
    }

    // Canonical copy of one layer's K (which = 0) or V (which = 1) for positions [0, n).
    void export_part(int layer, int which, int n, std::byte* out) const {
        if (linked()) {  // already canonical; the image's heads are cap_ positions apart
            const size_t row_bytes = size_t(hd_) * (bf16_ ? 2 : 4);
            const std::byte* part = image_ + (2 * size_t(layer) + size_t(which)) * image_part_bytes();
            for (int h = 0; h < n_kv_; ++h)
                std::memcpy(out + size_t(h) * size_t(n) * row_bytes, part + size_t(h) * size_t(cap_) * row_bytes,
                            size_t(n) * row_bytes);
            return;
        }
        if (bf16_)
            copy_part<uint16_t, true>(layer, which, n, reinterpret_cast<uint16_t*>(out), nullptr, n);
        else
            copy_part<float, true>(layer, which, n, reinterpret_cast<float*>(out), nullptr, n);
    }

    // `in`'s heads are `in_stride` positions apart (n in export_kv's image; more in a linked
    // block's image when only its first positions are read).
    void import_part(int layer, int which, int n, const std::byte* in, int in_stride) {
        if (bf16_)
            copy_part<uint16_t, false>(layer, which, n, nullptr, reinterpret_cast<const uint16_t*>(in), in_stride);
        else
            copy_part<float, false>(layer, which, n, nullptr, reinterpret_cast<const float*>(in), in_stride);
    }

    // Positions [0, n) of `src` (a block of the same shape and dtype; n <= its n_tokens) into this
    // block's storage: from an owned block as grown() moves its own (whole K tiles and V rows per
    // head), from a linked one as import_kv reads a canonical image, in place.
    void copy_from(const CpuKvBlock& src, int n) {
        reserve(n);
        if (src.linked()) {
            for (int l = 0; l < n_layers_; ++l)
                for (int which = 0; which < 2; ++which)
                    import_part(l, which, n, src.image_ + (2 * size_t(l) + size_t(which)) * src.image_part_bytes(),
                                src.cap_);
        } else if (bf16_) {
            copy_heads(src.b16_.data(), src.cap_, b16_.data(), cap_, n);
        } else {
            copy_heads(src.f32_.data(), src.cap_, f32_.data(), cap_, n);
        }
        n_tokens_ = n;
    }

private:
    static constexpr int kGrowRoom = 64;  // positions of room at least, when storage is (re)allocated
    static int round_up_tile(int n) { return (n + kKeyTile - 1) / kKeyTile * kKeyTile; }

    // New storage for `cap` positions holding this block's positions [0, n_tokens_); the old
    // storage goes back to the recycler.
    template <class T>
    KvStorage<T> grown(KvStorage<T>& old, int cap) {
        KvStorage<T> fresh = recycler_->take<T>(size_t(n_layers_) * 2 * size_t(n_kv_) * size_t(cap) * size_t(hd_));
        copy_heads(old.data(), cap_, fresh.data(), cap, n_tokens_);
        recycler_->give(std::move(old));
        return fresh;
    }

    // Positions [0, n) of every head from storage laid out for `from_cap` positions into storage laid
    // out for `to_cap`: K as whole tiles of 16 positions, V as rows; either way a head's first
    // positions are a prefix of it.
    template <class T>
    void copy_heads(const T* from, int from_cap, T* to, int to_cap, int n) const {
        if (n <= 0) return;
        const size_t hd = size_t(hd_), k_elems = size_t(round_up_tile(n)) * hd, v_elems = size_t(n) * hd;
        for (int l = 0; l < n_layers_; ++l)
            for (int part = 0; part < 2; ++part)
                for (int h = 0; h < n_kv_; ++h) {
                    const size_t head = size_t(2 * l + part) * size_t(n_kv_) + size_t(h);
                    std::memcpy(to + head * size_t(to_cap) * hd, from + head * size_t(from_cap) * hd,
                                (part == 0 ? k_elems : v_elems) * sizeof(T));
                }
    }

    size_t image_part_bytes() const { return size_t(n_kv_) * size_t(cap_) * size_t(hd_) * (bf16_ ? 2 : 4); }

    // Between the canonical [n_kv_heads, n, head_dim] layout and ours. V rows are stored as in the
    // canonical layout (one memcpy per head); K is stored in tiles of kKeyTile positions, each tile
    // [head_dim][kKeyTile] (so attention reads a key tile's dimension d as one vector): a transpose
    // per tile, walked with running pointers (no index arithmetic per element).
    template <class T, bool kExport>
    void copy_part(int layer, int which, int n, T* out, const T* in, int canon_stride) const {
        T* base = const_cast<T*>(storage<T>());
        const size_t hd = size_t(hd_);
        for (int h = 0; h < n_kv_; ++h) {
            const size_t canon = size_t(h) * size_t(canon_stride) * hd;  // this head's first element, canonical
            if (which == 1) {
                T* ours = base + v_index(layer, h, 0, 0);
                if (kExport) std::memcpy(out + canon, ours, size_t(n) * hd * sizeof(T));
                else std::memcpy(ours, in + canon, size_t(n) * hd * sizeof(T));
                continue;
            }
            T* head = base + k_index(layer, h, 0, 0);
            for (int t0 = 0; t0 < n; t0 += kKeyTile) {
                T* tile = head + size_t(t0 / kKeyTile) * hd * kKeyTile;
                const int tn = std::min<int>(kKeyTile, n - t0);
                for (int dt = 0; dt < tn; ++dt) {
                    const size_t row = canon + size_t(t0 + dt) * hd;
                    T* col = tile + dt;
                    for (size_t d = 0; d < hd; ++d) {
                        if (kExport) out[row + d] = col[d * kKeyTile];
                        else col[d * kKeyTile] = in[row + d];
                    }
                }
            }
        }
    }
    template <class T>
    const T* storage() const {
        if constexpr (std::is_same_v<T, float>) return f32_.data();
        else return b16_.data();
    }

    const void* owner_;
    bool bf16_;
    int n_layers_, n_kv_, hd_;
    int capacity_;   // as requested
    int cap_ = 0;    // positions the storage holds (rounded up to a key tile; grows up to capacity_, see reserve)
    int n_tokens_ = 0;
    KvStorage<float> f32_;  // owned storage (empty when linked); unwritten past the positions stored
    KvStorage<uint16_t> b16_;
    const std::byte* image_ = nullptr;        // linked: the canonical image, read in place
    std::shared_ptr<const void> keep_alive_;  // linked: owns the image (the file mapping)
    std::shared_ptr<KvRecycler> recycler_;    // owned storage: where it goes when the block does
};

// ---- the backend ---------------------------------------------------------------------------------

// x[i] += bias[i]: a plain float add (the reference for the CUDA bias kernel, which does the same).
void add_bias(float* x, const float* bias, int n) {
    for (int i = 0; i < n; ++i) x[i] = x[i] + bias[i];
}

// A layer's weights as the checkpoint holds them (bind_layer fills it; matrices row-major).
struct LayerSource {
    const float* attn_norm;  // (dim)
    const float* ffn_norm;   // (dim)
    const float* q_norm;     // (head_dim), Qwen3 only
    const float* k_norm;     // (head_dim), Qwen3 only
    const float* bq;         // (n_heads * head_dim), qkv_bias only (Qwen2, Llama attention_bias)
    const float* bk;         // (n_kv_heads * head_dim), qkv_bias only
    const float* bv;         // (n_kv_heads * head_dim), qkv_bias only
    const float* bo;         // (dim), o_bias only (Llama attention_bias)
    cpu::Matrix wq;          // (n_heads * head_dim, dim)
    cpu::Matrix wk;          // (n_kv_heads * head_dim, dim)
    cpu::Matrix wv;          // (n_kv_heads * head_dim, dim)
    cpu::Matrix wo;          // (dim, n_heads * head_dim)
    cpu::Matrix w_gate;      // (ffn_dim, dim)
    cpu::Matrix w_up;        // (ffn_dim, dim)
    cpu::Matrix w_down;      // (dim, ffn_dim)
};

// A layer as the forward pass reads it: vectors as f32, matrices prepacked, q/k/v stacked into one
// matrix and gate/up into another (one GEMM each; every feature keeps its own FMA chain).
struct Layer {
    const float* attn_norm;
    const float* ffn_norm;
    const float* q_norm;
    const float* k_norm;
    const float* bq;
    const float* bk;
    const float* bv;
    const float* bo;
    cpu::Matrix w_qkv;       // (n_heads * head_dim + 2 * n_kv_heads * head_dim, dim): q, k, v rows
    cpu::Matrix wo;          // (dim, n_heads * head_dim)
    cpu::Matrix w_gate_up;   // (2 * ffn_dim, dim): gate rows, then up rows
    cpu::Matrix w_down;      // (dim, ffn_dim)
};

// Activations of one forward call, grown once to the largest batch seen (never per token).
struct Activations {
    BigVector<float> x;      // (T, dim)       residual stream
    BigVector<float> xn;     // (T, dim)       normalised input of a sublayer
    BigVector<float> qkv;    // (T, n_heads * head_dim + 2 * n_kv_heads * head_dim)  q|k|v per row
    BigVector<float> q;      // (T, n_heads * head_dim)
    BigVector<float> k;      // (T, n_kv_heads * head_dim)
    BigVector<float> v;      // (T, n_kv_heads * head_dim)
    BigVector<float> att;    // (T, n_heads * head_dim)
    BigVector<float> proj;   // (T, dim)       o_proj / down_proj output before the residual add
    BigVector<float> gate_up;  // (T, 2 * ffn_dim) gate|up per row
    BigVector<float> gate;   // (T, ffn_dim)   silu(gate) * up
    BigVector<float> cos_t;  // (T, head_dim / 2)
    BigVector<float> sin_t;  // (T, head_dim / 2)
    BigVector<float> logits; // (R, vocab)     forward_batch's stacked logits (several sequences)

    static void grow(BigVector<float>& b, size_t n) {
        if (b.size() < n) b.resize(n);
    }
};

class CpuBackend final : public Backend, public DeferredRope, public PartialForward {
public:
    CpuBackend(const ModelWeights& weights, const CpuBackendOptions& options)
        : weights_(weights),
          cfg_(weights.config),
          kv_dtype_(options.kv_dtype),
          options_(options),
          isa_(cpu::resolve_isa(options.isa)),
          kernels_(cpu::kernels_for(isa_)),
          pool_(options.n_threads > 0 ? options.n_threads : cpu::ThreadPool::available_cores()),
          ws_(pool_.n_threads()),
          kv_pool_(options.kv_warm_bytes >= WarmPages::kPiece
                       ? std::make_shared<WarmPages>(options.kv_warm_bytes, options.kv_warm_fill)
                       : nullptr),
          recycler_(std::make_shared<KvRecycler>(kv_pool_)) {
        // An experiment's switch (the bits are the same either way): CC_CPU_SHARED_PREFIX=0 turns
        // the shared-prefix attention off, to measure what it saves.
        if (const char* env = std::getenv("CC_CPU_SHARED_PREFIX"); env != nullptr && std::string(env) == "0")
            options_.share_prefix_attention = false;
        if (options.weights == WeightDType::bf16dot && !cpu::bf16dot::supported())
            throw std::runtime_error("cpu backend: --weights bf16dot needs AVX-512 BF16 (the vdpbf16ps instruction), which "
                                     "this CPU lacks; use --weights bf16 (BF16 weights, F32 arithmetic)");
        const ModelConfig& c = cfg_;
        if (c.n_layers <= 0 || c.dim <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 ||
            c.ffn_dim <= 0 || c.vocab_size <= 0)
            throw std::runtime_error("cpu backend: the model config has a non-positive dimension");
        if (c.n_heads % c.n_kv_heads != 0)
            throw std::runtime_error("cpu backend: num_attention_heads " + std::to_string(c.n_heads) +
                                     " is not a multiple of num_key_value_heads " + std::to_string(c.n_kv_heads));
        if (c.head_dim % 2 != 0) throw std::runtime_error("cpu backend: head_dim must be even for RoPE");
        if (int(weights.layers.size()) != c.n_layers)
            throw std::runtime_error("cpu backend: " + std::to_string(weights.layers.size()) + " layers of weights, config has " +
                                     std::to_string(c.n_layers));
        check(weights.embed, "model.embed_tokens.weight", {c.vocab_size, c.dim});
        const auto to_vec = [this](const Tensor& t, const std::string& name, int64_t n) { return vec(t, name, n); };
        const auto to_mat = [this](const Tensor& t, const std::string& name, int64_t rows, int64_t cols) {
            return mat(t, name, rows, cols);
        };
        // lm_head first: its source (often the embedding, the largest matrix) is then dropped
        // before the layers' packed copies accumulate, so the load's peak stays near the total.
        final_norm_ = vec(weights.final_norm, "model.norm.weight", c.dim);
        const Tensor& head = weights.lm_head.data != nullptr ? weights.lm_head : weights.embed;
        const std::string head_name = weights.lm_head.data != nullptr ? "lm_head.weight" : "model.embed_tokens.weight (tied lm_head)";
        const cpu::Matrix head_src = mat(head, head_name, c.vocab_size, c.dim);
        lm_head_ = pack({head_src}, head_name);
        // A tied lm_head's panels hold the embedding itself wherever their format holds every
        // source value (F32; BF16 from BF16): a token's row is then read from them, the same
        // values, and the embedding is not kept twice (311 MB on Qwen3-0.6B's shape). Otherwise the
        // embedding is read a row per token from its tensor (faulted back in as needed).
        const bool tied = weights.lm_head.data == nullptr || weights.lm_head.data == weights.embed.data;
        embed_from_head_ = tied && cpu::holds_exactly(lm_head_.format, head_src.bf16);
        release_copied(head);
        if (embed_from_head_) release_copied(weights.embed);
        for (int l = 0; l < c.n_layers; ++l) {
            const LayerSource src = bind_layer<LayerSource>(c, weights.layers[size_t(l)], l, to_vec, to_mat);
            const std::string p = "model.layers." + std::to_string(l) + ".";
            Layer L{src.attn_norm, src.ffn_norm, src.q_norm, src.k_norm, src.bq, src.bk, src.bv, src.bo, {}, {}, {}, {}};
            L.w_qkv = pack({src.wq, src.wk, src.wv}, p + "self_attn.{q,k,v}_proj.weight");
            L.wo = pack({src.wo}, p + "self_attn.o_proj.weight");
            L.w_gate_up = pack({src.w_gate, src.w_up}, p + "mlp.{gate,up}_proj.weight");
            L.w_down = pack({src.w_down}, p + "mlp.down_proj.weight");
            layers_.push_back(L);
            // The packed copies are all the forward pass reads: a checkpoint's mapped pages of
            // these matrices need not stay resident, and generated ones the engine gave up are
            // given back (peak memory ~ packed + one layer's source).
            const LayerWeights& lw = weights.layers[size_t(l)];
            for (const Tensor* t : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down})
                release_copied(*t);
        }
        widened_.clear();  // F16 matrices widened for packing

        rope_.theta = c.rope_theta;
        rope_.head_dim = c.head_dim;
        if (c.rope_scaling.type == "llama3") {
            rope_.factor = c.rope_scaling.factor;
            rope_.low_freq_factor = c.rope_scaling.low_freq_factor;
            rope_.high_freq_factor = c.rope_scaling.high_freq_factor;
            rope_.original_max_position_embeddings = c.rope_scaling.original_max_position_embeddings;
        } else if (!c.rope_scaling.type.empty()) {
            throw std::runtime_error("cpu backend: rope_scaling type \"" + c.rope_scaling.type + "\" is not supported");
        }
        for (int i = 0; i < c.head_dim / 2; ++i) inv_freq_.push_back(km::rope_inv_freq(i, rope_));
        // Last: nothing below throws, so the thread is always joined by the destructor.
        if (kv_pool_ && !options.kv_warm_refill)
            kv_pool_->fill();  // once, here: no thread runs beside the caller's takes and gives
        else if (kv_pool_)
            kv_fill_ = std::thread([pool = kv_pool_] {
                // The lowest priority (per thread on Linux): filling takes CPU time the requests
                // leave idle. Failure leaves the default, which is only less polite.
                setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
                pool->keep_filled();
            });
    }
    ~CpuBackend() override {
        if (kv_pool_) kv_pool_->stop();  // blocks may outlive the backend; they hold the pool
        if (kv_fill_.joinable()) kv_fill_.join();
    }
    CpuBackend(const CpuBackend&) = delete;
    CpuBackend& operator=(const CpuBackend&) = delete;

    std::string name() const override { return "cpu"; }
    std::string numerics_id() const override {
        CpuBackendOptions o = options_;
        o.isa = cpu::isa_name(isa_);
        return cpu_numerics_id(o);
    }
    const ModelConfig& config() const override { return cfg_; }
    KvDType kv_dtype() const override { return kv_dtype_; }
    WarmPages::Stats kv_pool_stats() const override { return kv_pool_ ? kv_pool_->stats() : WarmPages::Stats{}; }

    std::unique_ptr<KvBlock> allocate_kv(int capacity_tokens) override {
        return std::make_unique<CpuKvBlock>(this, cfg_, kv_dtype_ == KvDType::bf16, capacity_tokens, recycler_);
    }

    std::vector<float> forward(std::span<const token_id> tokens, const KvView& kv, std::span<const int> logit_rows,
                               const std::atomic<bool>* cancel) override {
        return forward_impl(tokens, kv, logit_rows, cancel, nullptr, cfg_.n_layers);
    }

    void forward_batch(std::span<const SequenceRows> seqs, const std::atomic<bool>* cancel) override {
        check_batch_request(seqs, cfg_.vocab_size);
        // Every sequence's rows stacked, each matrix product run once over all of them.
        std::vector<SeqPlan> plans;
        std::vector<token_id> tokens;
        std::vector<int> rows;
        for (const SequenceRows& s : seqs) {
            plans.push_back(plan_sequence(s.tokens, s.kv, s.logit_rows, int(tokens.size())));
            for (int r : s.logit_rows) rows.push_back(plans.back().row0 + r);
            tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
        }
        const size_t vocab = size_t(cfg_.vocab_size);
        std::lock_guard lock(mutex_);
        if (seqs.size() == 1 && !seqs[0].logits.empty()) {  // the lm_head writes straight into the caller's storage
            forward_rows(tokens, plans, rows, seqs[0].logits.data(), cancel, nullptr, cfg_.n_layers, nullptr);
            argmax_rows(seqs[0].logits.data(), cfg_.vocab_size, seqs[0].argmax);
            return;
        }
        // Several, or greedy tokens only: the lm_head's one GEMM writes every sequence's rows into
        // the step's logits buffer, then each sequence's go to its storage (and its greedy tokens
        // are picked there). The buffer is kept from step to step (no fresh pages) while it is
        // decode-sized; a step asking for more rows (a chunk of a prompt whose every row's logits
        // are kept) gets one for itself.
        const size_t need = rows.size() * vocab;
        BigVector<float> once;
        BigVector<float>& buffer = rows.size() <= kKeptLogitRows ? act_.logits : once;
        Activations::grow(buffer, need);
        forward_rows(tokens, plans, rows, buffer.data(), cancel, nullptr, cfg_.n_layers, nullptr);
        const float* at = buffer.data();
        for (const SequenceRows& s : seqs) {
            if (!s.logits.empty()) std::copy_n(at, s.logits.size(), s.logits.data());
            argmax_rows(at, cfg_.vocab_size, s.argmax);
            at += s.logit_rows.size() * vocab;
        }
    }

    void forward_at_positions(std::span<const token_id> tokens, std::span<const int> positions, std::span<std::byte> image,
                              int n_tokens, int n_layers, const std::atomic<bool>* cancel) override {
        if (n_layers < 1 || n_layers > cfg_.n_layers)
            throw std::runtime_error("forward_at_positions: " + std::to_string(n_layers) + " layers requested, the model has " +
                                     std::to_string(cfg_.n_layers));
        if (positions.size() != tokens.size())
            throw std::runtime_error("forward_at_positions: " + std::to_string(positions.size()) + " positions for " +
                                     std::to_string(tokens.size()) + " tokens");
        if (image.size() != kv_bytes(n_tokens))
            throw std::runtime_error("forward_at_positions: the image is " + std::to_string(image.size()) + " bytes, expected " +
                                     std::to_string(kv_bytes(n_tokens)) + " for " + std::to_string(n_tokens) + " positions");
        for (size_t t = 0; t < positions.size(); ++t)
            if (positions[t] < 0 || positions[t] >= n_tokens || (t > 0 && positions[t] <= positions[t - 1]))
                throw std::runtime_error("forward_at_positions: positions must ascend strictly within [0, " +
                                         std::to_string(n_tokens) + "), position " + std::to_string(t) + " is " +
                                         std::to_string(positions[t]));
        CpuKvBlock linked(this, cfg_, kv_dtype_ == KvDType::bf16, image.data(), n_tokens, nullptr);
        auto scratch = allocate_kv(0);  // the checks' suffix block; nothing is written to it
        const SparseRows sparse{positions, image.data(), &linked};
        forward_impl(tokens, KvView{nullptr, 0, scratch.get()}, {}, cancel, nullptr, n_layers, &sparse);
    }

    std::vector<float> forward_capture_unrotated(std::span<const token_id> tokens, const KvView& kv,
                                                 std::span<const int> logit_rows, KvBlock& unrotated,
                                                 const std::atomic<bool>* cancel) override {
        auto* u = const_cast<CpuKvBlock*>(&own(&unrotated, "forward_capture_unrotated (unrotated block)"));
        if (u->linked()) throw std::runtime_error("forward_capture_unrotated: the unrotated block is a read-only linked block");
        if (u == kv.suffix || u == kv.prefix)
            throw std::runtime_error("forward_capture_unrotated: the unrotated block is also the view's prefix or suffix block");
        if (int64_t(u->n_tokens()) + int64_t(tokens.size()) > u->capacity_tokens())
            throw std::runtime_error("forward_capture_unrotated: the unrotated block holds " + std::to_string(u->n_tokens()) +
                                     " of " + std::to_string(u->capacity_tokens()) + " positions, " +
                                     std::to_string(tokens.size()) + " more do not fit");
        return forward_impl(tokens, kv, logit_rows, cancel, u, cfg_.n_layers);
    }

    void rope_rotate_kv_range(std::span<std::byte> canonical, int n_tokens, int first,
                              std::span<const int> positions) const override {
        if (n_tokens < 0) throw std::runtime_error("rope_rotate_kv: negative n_tokens");
        if (canonical.size() != kv_bytes(n_tokens))
            throw std::runtime_error("rope_rotate_kv: the image is " + std::to_string(canonical.size()) + " bytes, expected " +
                                     std::to_string(kv_bytes(n_tokens)) + " for " + std::to_string(n_tokens) + " positions");
        if (first < 0 || int64_t(first) + int64_t(positions.size()) > n_tokens)
            throw std::runtime_error("rope_rotate_kv: " + std::to_string(positions.size()) + " positions from " +
                                     std::to_string(first) + " do not fit " + std::to_string(n_tokens) + " tokens");
        for (int p : positions)
            if (p < 0) throw std::runtime_error("rope_rotate_kv: negative position " + std::to_string(p));
        const ModelConfig& c = cfg_;
        const int hd = c.head_dim, half = hd / 2;
        const bool bf16 = kv_dtype_ == KvDType::bf16;
        const size_t elem = bf16 ? 2 : 4;
        const size_t n = positions.size();
        const size_t part_bytes = size_t(c.n_kv_heads) * size_t(n_tokens) * size_t(hd) * elem;  // one layer's K
        // the tables once per position, then every K row in memory order
        std::vector<float> cs(n * size_t(half)), sn(n * size_t(half));
        for (size_t t = 0; t < n; ++t) rope_angles(positions[t], &cs[t * size_t(half)], &sn[t * size_t(half)]);
        std::vector<float> row(static_cast<size_t>(hd));
        for (int l = 0; l < c.n_layers; ++l) {
            std::byte* k_part = canonical.data() + 2 * size_t(l) * part_bytes;  // K of layer l: [n_kv_heads, n_tokens, head_dim]
            for (int h = 0; h < c.n_kv_heads; ++h)
                for (size_t t = 0; t < n; ++t) {
                    std::byte* r = k_part + (size_t(h) * size_t(n_tokens) + size_t(first) + t) * size_t(hd) * elem;
                    if (bf16) {
                        for (int d = 0; d < hd; ++d) {
                            uint16_t b;
                            std::memcpy(&b, r + size_t(d) * 2, 2);
                            row[size_t(d)] = km::bf16_to_f32(b);
                        }
                    } else {
                        std::memcpy(row.data(), r, size_t(hd) * 4);
                    }
                    km::rope_rotate(row.data(), &cs[t * size_t(half)], &sn[t * size_t(half)], half);
                    if (bf16) {
                        for (int d = 0; d < hd; ++d) {
                            const uint16_t b = km::f32_to_bf16(row[size_t(d)]);
                            std::memcpy(r + size_t(d) * 2, &b, 2);
                        }
                    } else {
                        std::memcpy(r, row.data(), size_t(hd) * 4);
                    }
                }
        }
    }

    void export_kv(const KvBlock& block, int n_tokens, std::span<std::byte> out) const override {
        const CpuKvBlock& b = own(&block, "export_kv");
        if (n_tokens < 0 || n_tokens > b.n_tokens())
            throw std::runtime_error("export_kv: " + std::to_string(n_tokens) + " positions requested, the block holds " +
                                     std::to_string(b.n_tokens()));
        if (out.size() != kv_bytes(n_tokens))
            throw std::runtime_error("export_kv: output is " + std::to_string(out.size()) + " bytes, expected " +
                                     std::to_string(kv_bytes(n_tokens)));
        const size_t part = kv_bytes(n_tokens) / (2 * size_t(cfg_.n_layers));
        for (int l = 0; l < cfg_.n_layers; ++l)
            for (int which = 0; which < 2; ++which) b.export_part(l, which, n_tokens, out.data() + (2 * size_t(l) + size_t(which)) * part);
    }

    bool exports_layers() const override { return true; }
    void export_kv_layer(const KvBlock& block, int n_tokens, int layer, std::span<std::byte> out) const override {
        const CpuKvBlock& b = own(&block, "export_kv_layer");
        if (n_tokens < 0 || n_tokens > b.n_tokens())
            throw std::runtime_error("export_kv_layer: " + std::to_string(n_tokens) +
                                     " positions requested, the block holds " + std::to_string(b.n_tokens()));
        if (layer < 0 || layer >= cfg_.n_layers)
            throw std::runtime_error("export_kv_layer: layer " + std::to_string(layer) + " is outside [0, " +
                                     std::to_string(cfg_.n_layers) + ")");
        const size_t part = kv_bytes(n_tokens) / (2 * size_t(cfg_.n_layers));
        if (out.size() != 2 * part)
            throw std::runtime_error("export_kv_layer: output is " + std::to_string(out.size()) + " bytes, expected " +
                                     std::to_string(2 * part));
        for (int which = 0; which < 2; ++which) b.export_part(layer, which, n_tokens, out.data() + size_t(which) * part);
    }

    std::unique_ptr<KvBlock> import_kv(std::span<const std::byte> data, int n_tokens, int capacity_tokens,
                                       int reserve_tokens) override {
        check_kv_room("import_kv", n_tokens, capacity_tokens, reserve_tokens);
        if (data.size() != kv_bytes(n_tokens))
            throw std::runtime_error("import_kv: data is " + std::to_string(data.size()) + " bytes, expected " +
                                     std::to_string(kv_bytes(n_tokens)) + " for " + std::to_string(n_tokens) + " positions");
        auto block = std::make_unique<CpuKvBlock>(this, cfg_, kv_dtype_ == KvDType::bf16, capacity_tokens, recycler_);
        block->reserve(reserve_tokens);
        const size_t part = kv_bytes(n_tokens) / (2 * size_t(cfg_.n_layers));
        for (int l = 0; l < cfg_.n_layers; ++l)
            for (int which = 0; which < 2; ++which)
                block->import_part(l, which, n_tokens, data.data() + (2 * size_t(l) + size_t(which)) * part, n_tokens);
        block->set_n_tokens(n_tokens);
        return block;
    }

    std::unique_ptr<KvBlock> copy_kv(const KvBlock& src, int n_tokens, int capacity_tokens,
                                     int reserve_tokens) override {
        const auto* from = dynamic_cast<const CpuKvBlock*>(&src);
        if (from == nullptr || from->owner() != this)
            return Backend::copy_kv(src, n_tokens, capacity_tokens, reserve_tokens);
        if (n_tokens > src.n_tokens())
            throw std::runtime_error("copy_kv: " + std::to_string(n_tokens) + " positions requested, the block holds " +
                                     std::to_string(src.n_tokens()));
        check_kv_room("copy_kv", n_tokens, capacity_tokens, reserve_tokens);
        auto block = std::make_unique<CpuKvBlock>(this, cfg_, kv_dtype_ == KvDType::bf16, capacity_tokens, recycler_);
        block->reserve(reserve_tokens);
        block->copy_from(*from, n_tokens);
        return block;
    }

    // Zero copy: the block reads `data` where it lies. Only the size is checked here; the caller
    // (the group store) has verified the bytes' checksums before linking them.
    std::unique_ptr<KvBlock> link_kv(std::span<const std::byte> data, int n_tokens, std::shared_ptr<const void> keep_alive) override {
        if (n_tokens < 0) throw std::runtime_error("link_kv: negative n_tokens");
        if (data.size() != kv_bytes(n_tokens))
            throw std::runtime_error("link_kv: data is " + std::to_string(data.size()) + " bytes, expected " +
                                     std::to_string(kv_bytes(n_tokens)) + " for " + std::to_string(n_tokens) + " positions");
        return std::make_unique<CpuKvBlock>(this, cfg_, kv_dtype_ == KvDType::bf16, data.data(), n_tokens, std::move(keep_alive));
    }
    bool links_in_place() const override { return true; }
    bool prefers_chunked_prefill() const override { return true; }
    size_t matrix_bytes() const override { return weight_bytes_; }

private:
    static void check(const Tensor& t, const std::string& name, std::vector<int64_t> shape) {
        if (t.data == nullptr) throw std::runtime_error("cpu backend: weight " + name + " is missing");
        if (t.shape != shape)
            throw std::runtime_error("cpu backend: weight " + name + " has shape " + shape_str(t.shape) + ", expected " +
                                     shape_str(shape));
        size_t n = 1;
        for (int64_t d : shape) n *= size_t(d);
        if (t.n_bytes != n * dtype_bytes(t.dtype))
            throw std::runtime_error("cpu backend: weight " + name + " holds " + std::to_string(t.n_bytes) + " bytes, expected " +
                                     std::to_string(n * dtype_bytes(t.dtype)) + " for " + dtype_name(t.dtype));
    }

    // A vector weight as f32 (converted once when stored as BF16/F16).
    const float* vec(const Tensor& t, const std::string& name, int64_t n) {
        check(t, name, {n});
        std::vector<float>& out = owned_.emplace_back(size_t(n));
        for (int64_t i = 0; i < n; ++i) out[size_t(i)] = element_to_f32(t.data, t.dtype, size_t(i));
        return out.data();
    }

    // A matrix as the checkpoint holds it, row-major: F32 and BF16 in place, F16 widened to F32
    // (exact) until it is packed.
    cpu::Matrix mat(const Tensor& t, const std::string& name, int64_t rows, int64_t cols) {
        check(t, name, {rows, cols});
        cpu::Matrix src;
        src.rows = rows;
        src.cols = cols;
        if (t.dtype == DType::f16) {
            std::vector<float>& wide = widened_.emplace_back(size_t(rows * cols));
            for (size_t i = 0; i < wide.size(); ++i) wide[i] = element_to_f32(t.data, t.dtype, i);
            src.data = wide.data();
        } else {
            src.data = t.data;
            src.bf16 = t.dtype == DType::bf16;
        }
        return src;
    }

    // Matrices (rows stacked in order) prepacked once into the GEMM's panels (kernels.h) in the
    // chosen format: stored keeps BF16 as BF16 and F32 (and widened F16) as F32.
    cpu::Matrix pack(std::initializer_list<cpu::Matrix> parts, const std::string& name) {
        const bool all_bf16 = std::all_of(parts.begin(), parts.end(), [](const cpu::Matrix& m) { return m.bf16; });
        cpu::WFormat f = all_bf16 ? cpu::WFormat::bf16 : cpu::WFormat::f32;
        switch (options_.weights) {
            case WeightDType::stored: break;
            case WeightDType::f32: f = cpu::WFormat::f32; break;
            case WeightDType::bf16: f = cpu::WFormat::bf16; break;
            case WeightDType::q8: f = cpu::WFormat::q8; break;
            case WeightDType::bf16dot: f = cpu::WFormat::bf16dot; break;
        }
        const int nr = f == cpu::WFormat::bf16dot ? cpu::bf16dot::panel_width() : kernels_.gemm_nr;
        try {
            cpu::PackedMatrix& p = packed_.emplace_back(
                cpu::pack_matrix(pool_, std::span<const cpu::Matrix>(parts.begin(), parts.size()), f, nr));
            weight_bytes_ += p.bytes;
            return p.view;
        } catch (const std::bad_alloc&) {
            throw std::runtime_error("cpu backend: out of memory packing weight " + name + " as " + cpu::wformat_name(f));
        }
    }

    // forward_at_positions: rows at the given positions of a canonical image, written there and
    // attending to the image through `linked` (a block over the same bytes).
    struct SparseRows {
        std::span<const int> positions;
        std::byte* image = nullptr;
        const CpuKvBlock* linked = nullptr;
    };
    // One sequence of a step: rows [row0, row0 + n_rows) of the stacked batch, against its own
    // prefix (P positions) and suffix block (n0 positions before the step).
    struct SeqPlan {
        int row0 = 0, n_rows = 0;
        const CpuKvBlock* prefix = nullptr;
        int P = 0;
        CpuKvBlock* suffix = nullptr;
        int n0 = 0;
    };
    // The view's blocks checked and resolved (check_forward_request) into a plan at `row0`.
    SeqPlan plan_sequence(std::span<const token_id> tokens, const KvView& kv, std::span<const int> logit_rows, int row0) const;
    std::vector<float> forward_impl(std::span<const token_id> tokens, const KvView& kv, std::span<const int> logit_rows,
                                    const std::atomic<bool>* cancel, CpuKvBlock* unrotated, int run_layers,
                                    const SparseRows* sparse = nullptr);
    // The forward pass over the stacked rows of one or more sequences; logit_rows index the stack,
    // and their logits go to `logits` (logit_rows.size() x vocab floats; unused when run_layers
    // stops short of the last layer).
    void forward_rows(std::span<const token_id> tokens, std::span<const SeqPlan> seqs, std::span<const int> logit_rows,
                      float* logits, const std::atomic<bool>* cancel, CpuKvBlock* unrotated, int run_layers,
                      const SparseRows* sparse);
    // One position's K and V rows of one kv head into a canonical image of n_tokens positions,
    // rounded as a block stores them (bf16: to nearest even).
    void write_canonical(std::byte* image, int n_tokens, int layer, int kvh, int pos, const float* k, const float* v) const {
        const size_t elem = kv_dtype_ == KvDType::bf16 ? 2 : 4;
        const size_t part = size_t(cfg_.n_kv_heads) * size_t(n_tokens) * size_t(cfg_.head_dim);  // elements of one K or V
        const size_t row = (size_t(kvh) * size_t(n_tokens) + size_t(pos)) * size_t(cfg_.head_dim);
        std::byte* kd = image + ((2 * size_t(layer)) * part + row) * elem;
        std::byte* vd = image + ((2 * size_t(layer) + 1) * part + row) * elem;
        for (int d = 0; d < cfg_.head_dim; ++d) {
            if (elem == 2) {
                const uint16_t kb = km::f32_to_bf16(k[d]), vb = km::f32_to_bf16(v[d]);
                std::memcpy(kd + 2 * size_t(d), &kb, 2);
                std::memcpy(vd + 2 * size_t(d), &vb, 2);
            } else {
                std::memcpy(kd + 4 * size_t(d), &k[d], 4);
                std::memcpy(vd + 4 * size_t(d), &v[d], 4);
            }
        }
    }

    // cos and sin of RoPE at absolute position `pos` for each rotation pair (head_dim / 2 floats
    // each): the angle in double, rounded to float once. The forward pass and rope_rotate_kv both
    // use this, so deferred rotation reproduces the forward pass's keys.
    void rope_angles(int pos, float* cos_out, float* sin_out) const {
        for (size_t i = 0; i < inv_freq_.size(); ++i) {
            const double angle = double(pos) * inv_freq_[i];
            cos_out[i] = float(std::cos(angle));
            sin_out[i] = float(std::sin(angle));
        }
    }

    const CpuKvBlock& own(const KvBlock* b, const char* what) const {
        auto* cb = dynamic_cast<const CpuKvBlock*>(b);
        if (cb == nullptr || cb->owner() != this)
            throw std::runtime_error(std::string(what) + ": the KV block is missing or was not allocated by this CPU backend");
        return *cb;
    }

    // Runs fn(row) for rows [0, n) on the pool, in chunks.
    void for_rows(int n, const std::function<void(int)>& fn) {
        const int chunk = std::max(1, n / (4 * pool_.n_threads()));
        pool_.parallel_for((n + chunk - 1) / chunk, [&](int64_t c, int) {
            const int end = std::min(n, int(c + 1) * chunk);
            for (int r = int(c) * chunk; r < end; ++r) fn(r);
        });
    }

    const ModelWeights& weights_;
    ModelConfig cfg_;
    KvDType kv_dtype_;
    CpuBackendOptions options_;
    static constexpr size_t kEmbedRowsPerRelease = 256;
    static constexpr size_t kKeptLogitRows = 32;  // act_.logits' largest size in rows (19 MB at a 152k vocabulary)
    size_t embed_rows_since_release_ = 0;   // rows looked up in a mapped embedding since its pages were dropped
    cpu::Isa isa_;
    const cpu::Kernels& kernels_;
    cpu::ThreadPool pool_;
    cpu::Workspace ws_;
    std::vector<std::vector<float>> owned_;  // norm and bias vectors, as f32
    std::deque<cpu::PackedMatrix> packed_;    // every weight matrix, prepacked
    std::vector<std::vector<float>> widened_; // F16 matrices as F32, only while packing
    size_t weight_bytes_ = 0;                 // bytes of packed_
    std::vector<Layer> layers_;
    const float* final_norm_ = nullptr;       // (dim)
    cpu::Matrix lm_head_;                     // (vocab, dim)
    bool embed_from_head_ = false;            // token rows read from lm_head_'s panels (tied, exact format)
    km::RopeParams rope_;
    std::vector<double> inv_freq_;            // (head_dim / 2)
    std::mutex mutex_;                        // one forward at a time: activations and scratch are shared
    Activations act_;
    std::shared_ptr<WarmPages> kv_pool_;      // resident pages for KV storage (options.kv_warm_bytes); null: none
    std::shared_ptr<KvRecycler> recycler_;    // freed KV storage (over kv_pool_)
    std::thread kv_fill_;                     // fills kv_pool_ (and refills it below half), off the requests' path
};

CpuBackend::SeqPlan CpuBackend::plan_sequence(std::span<const token_id> tokens, const KvView& kv,
                                              std::span<const int> logit_rows, int row0) const {
    SeqPlan plan;
    plan.suffix = const_cast<CpuKvBlock*>(&own(kv.suffix, "forward (suffix block)"));
    if (plan.suffix->linked()) throw std::runtime_error("forward: the suffix block is a read-only linked block");
    plan.prefix = kv.prefix_tokens > 0 ? &own(kv.prefix, "forward (prefix block)") : nullptr;
    check_forward_request(tokens, kv, plan.prefix, *plan.suffix, logit_rows, cfg_.vocab_size);
    plan.row0 = row0;
    plan.n_rows = int(tokens.size());
    plan.P = kv.prefix_tokens;
    plan.n0 = plan.suffix->n_tokens();
    return plan;
}

std::vector<float> CpuBackend::forward_impl(std::span<const token_id> tokens, const KvView& kv, std::span<const int> logit_rows,
                                            const std::atomic<bool>* cancel, CpuKvBlock* unrotated, int run_layers,
                                            const SparseRows* sparse) {
    std::lock_guard lock(mutex_);
    // ---- validate the request before touching any state
    SeqPlan plan;
    if (sparse == nullptr) {
        plan = plan_sequence(tokens, kv, logit_rows, 0);
    } else {
        plan.suffix = const_cast<CpuKvBlock*>(&own(kv.suffix, "forward (suffix block)"));
        plan.n_rows = int(tokens.size());
        for (token_id id : tokens)
            if (id < 0 || id >= cfg_.vocab_size)
                throw std::runtime_error("forward_at_positions: token id " + std::to_string(id) + " is outside [0, " +
                                         std::to_string(cfg_.vocab_size) + ")");
    }
    std::vector<float> logits;
    if (!logit_rows.empty() && run_layers == cfg_.n_layers) logits.resize(logit_rows.size() * size_t(cfg_.vocab_size));
    forward_rows(tokens, std::span<const SeqPlan>(&plan, 1), logit_rows, logits.data(), cancel, unrotated, run_layers, sparse);
    return logits;
}

void CpuBackend::forward_rows(std::span<const token_id> tokens, std::span<const SeqPlan> seqs, std::span<const int> logit_rows,
                              float* logits, const std::atomic<bool>* cancel, CpuKvBlock* unrotated, int run_layers,
                              const SparseRows* sparse) {
    const ModelConfig& c = cfg_;
    const int T = int(tokens.size());
    if (T == 0) return;

    const int dim = c.dim, hd = c.head_dim, half = hd / 2, ffn = c.ffn_dim;
    const int qd = c.n_heads * hd, kvd = c.n_kv_heads * hd;
    const float eps = float(c.rms_norm_eps);
    const size_t Tz = size_t(T);
    Activations& a = act_;
    Activations::grow(a.x, Tz * dim);
    Activations::grow(a.xn, Tz * dim);
    Activations::grow(a.qkv, Tz * (qd + 2 * kvd));
    Activations::grow(a.q, Tz * qd);
    Activations::grow(a.k, Tz * kvd);
    Activations::grow(a.v, Tz * kvd);
    Activations::grow(a.att, Tz * qd);
    Activations::grow(a.proj, Tz * dim);
    Activations::grow(a.gate_up, Tz * 2 * ffn);
    Activations::grow(a.gate, Tz * ffn);
    Activations::grow(a.cos_t, Tz * half);
    Activations::grow(a.sin_t, Tz * half);

    // Each row's sequence, its absolute position and its slot in that sequence's suffix block.
    std::vector<int> seq_of(Tz);
    for (size_t s = 0; s < seqs.size(); ++s)
        for (int t = seqs[s].row0; t < seqs[s].row0 + seqs[s].n_rows; ++t) seq_of[size_t(t)] = int(s);
    auto slot = [&](int t) { const SeqPlan& sp = seqs[size_t(seq_of[size_t(t)])]; return sp.n0 + t - sp.row0; };
    auto position = [&](int t) {
        return sparse != nullptr ? sparse->positions[size_t(t)] : seqs[size_t(seq_of[size_t(t)])].P + slot(t);
    };
    // RoPE angles in double, rounded to float once: (position * inv_freq).
    for (int t = 0; t < T; ++t) rope_angles(position(t), &a.cos_t[size_t(t) * half], &a.sin_t[size_t(t) * half]);
    const int u0 = unrotated != nullptr ? unrotated->n_tokens() : 0;  // where captured pre-RoPE K/V go
    // storage for the positions this step writes (blocks grow on demand: CpuKvBlock::reserve)
    if (sparse == nullptr)
        for (const SeqPlan& sp : seqs) sp.suffix->reserve(sp.n0 + sp.n_rows);
    if (unrotated != nullptr) unrotated->reserve(u0 + T);

    // token embeddings
    for_rows(T, [&](int t) {
        float* x = &a.x[size_t(t) * dim];
        if (embed_from_head_) return cpu::unpack_row(lm_head_, tokens[size_t(t)], x);
        const size_t row = size_t(tokens[size_t(t)]) * size_t(dim);
        for (int i = 0; i < dim; ++i) x[i] = element_to_f32(weights_.embed.data, weights_.embed.dtype, row + size_t(i));
    });
    // A mapped embedding's rows fault in with their neighbours (the kernel maps up to 64 KB around
    // each 2 KB row), so a prefill of a few thousand distinct tokens makes ~150 MB of the
    // checkpoint resident again for nothing: drop the mapping's pages every few hundred rows (they
    // stay in the page cache; the next lookups are minor faults).
    if (weights_.embed.file_mapped && !embed_from_head_) {
        embed_rows_since_release_ += size_t(T);
        if (embed_rows_since_release_ >= kEmbedRowsPerRelease) {
            release_mapped_pages(weights_.embed.data, weights_.embed.n_bytes);
            embed_rows_since_release_ = 0;
        }
    }

    auto check_cancel = [&] {
        if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) throw Cancelled();
    };

    // Which sequences attend together: those over the same prefix block and length share one
    // attention call per layer (options_.share_prefix_attention), the others run alone.
    std::vector<std::vector<int>> prefix_sharing;
    for (size_t s = 0; s < seqs.size(); ++s) {
        const SeqPlan& sp = seqs[s];
        auto same = std::find_if(prefix_sharing.begin(), prefix_sharing.end(), [&](const std::vector<int>& g) {
            const SeqPlan& o = seqs[size_t(g.front())];
            return options_.share_prefix_attention && sp.prefix != nullptr && o.prefix == sp.prefix && o.P == sp.P;
        });
        if (same != prefix_sharing.end()) same->push_back(int(s));
        else prefix_sharing.push_back({int(s)});
    }
    // The last layer runs on past its K/V only for the rows whose logits are asked for (llama.cpp's
    // inp_out_ids): the other rows' outputs of that layer would feed nothing. `kept` ascending and
    // unique, `compact[t]` row t's place among them (-1: not kept). Their bits do not change: a
    // row's attention, GEMMs and norms are the same chains whichever other rows run beside it.
    std::vector<int> kept, compact;
    bool trim_last = false;
    if (run_layers == c.n_layers && sparse == nullptr) {
        kept.assign(logit_rows.begin(), logit_rows.end());
        std::sort(kept.begin(), kept.end());
        kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
        trim_last = int(kept.size()) < T;
        if (trim_last) {
            compact.assign(Tz, -1);
            for (size_t j = 0; j < kept.size(); ++j) compact[size_t(kept[j])] = int(j);
        }
    }
    struct {
        std::vector<cpu::KvSegment> suffixes;
        std::vector<int> row_seq, row_pos;
        std::vector<const float*> row_q;
        std::vector<float*> row_out;
        void clear() {
            suffixes.clear();
            row_seq.clear();
            row_pos.clear();
            row_q.clear();
            row_out.clear();
        }
    } share;

    for (int l = 0; l < run_layers; ++l) {
        check_cancel();
        const Layer& L = layers_[size_t(l)];
        const bool trimmed = trim_last && l == c.n_layers - 1;
        auto out_row = [&](int t) { return trimmed ? compact[size_t(t)] : t; };  // row t's place after attention

        // attention: xn = rmsnorm(x); q, k, v projections
        for_rows(T, [&](int t) { kernels_.rmsnorm(&a.x[size_t(t) * dim], L.attn_norm, &a.xn[size_t(t) * dim], dim, eps); });
        kernels_.gemm(pool_, ws_, a.xn.data(), T, L.w_qkv, a.qkv.data());
        // q, k, v out of the stacked row; biases (Qwen2): one float add per element after the
        // GEMM, row by row, so a token's q/k/v are the same bits whichever batch it is computed in
        // (cached and full prefill agree)
        for_rows(T, [&](int t) {
            const float* row = &a.qkv[size_t(t) * size_t(qd + 2 * kvd)];
            std::memcpy(&a.q[size_t(t) * qd], row, size_t(qd) * sizeof(float));
            std::memcpy(&a.k[size_t(t) * kvd], row + qd, size_t(kvd) * sizeof(float));
            std::memcpy(&a.v[size_t(t) * kvd], row + qd + kvd, size_t(kvd) * sizeof(float));
            if (L.bq) {
                add_bias(&a.q[size_t(t) * qd], L.bq, qd);
                add_bias(&a.k[size_t(t) * kvd], L.bk, kvd);
                add_bias(&a.v[size_t(t) * kvd], L.bv, kvd);
            }
        });

        // per head: Qwen3 q/k RMSNorm, then RoPE; K and V of the new positions into the row's
        // sequence's suffix block
        for_rows(T, [&](int t) {
            float* q = &a.q[size_t(t) * qd];
            float* k = &a.k[size_t(t) * kvd];
            const float* cs = &a.cos_t[size_t(t) * half];
            const float* sn = &a.sin_t[size_t(t) * half];
            for (int h = 0; h < c.n_heads; ++h) {
                if (L.q_norm) kernels_.rmsnorm(q + h * hd, L.q_norm, q + h * hd, hd, eps);
                km::rope_rotate(q + h * hd, cs, sn, half);
            }
            for (int h = 0; h < c.n_kv_heads; ++h) {
                if (L.k_norm) kernels_.rmsnorm(k + h * hd, L.k_norm, k + h * hd, hd, eps);
                if (unrotated != nullptr) unrotated->write(l, h, u0 + t, k + h * hd, &a.v[size_t(t) * kvd + size_t(h) * hd]);
                km::rope_rotate(k + h * hd, cs, sn, half);
                if (sparse != nullptr) write_canonical(sparse->image, sparse->linked->n_tokens(), l, h, position(t), k + h * hd,
                                                       &a.v[size_t(t) * kvd + size_t(h) * hd]);
                else seqs[size_t(seq_of[size_t(t)])].suffix->write(l, h, slot(t), k + h * hd, &a.v[size_t(t) * kvd + size_t(h) * hd]);
            }
        });

        // attention over [prefix | suffix], each sequence against its own view, then o_proj and
        // the residual
        cpu::AttentionArgs args;
        args.kv_bf16 = kv_dtype_ == KvDType::bf16;
        args.bf16_dot = bf16_attention(options_);
        args.n_heads = c.n_heads;
        args.n_kv_heads = c.n_kv_heads;
        args.head_dim = hd;
        args.window = c.sliding_window;
        args.scale = float(1.0 / std::sqrt(double(hd)));
        if (sparse != nullptr) {
            // one row at a time: row t attends to the image's positions [0, p], its own K/V
            // (written above) and every earlier row's included
            for (int t = 0; t < T; ++t) {
                const int p = position(t);
                args.seg[0] = sparse->linked->segment(l, 0, p + 1);
                args.seg[1] = sparse->linked->segment(l, p + 1, 0);
                args.q = &a.q[size_t(t) * qd];
                args.n_rows = 1;
                args.first_pos = p;
                args.out = &a.att[size_t(t) * qd];
                kernels_.attention(pool_, ws_, args);
            }
        } else {
            for (const std::vector<int>& shared : prefix_sharing) {
                const SeqPlan& first = seqs[size_t(shared.front())];
                args.seg[0] = first.prefix != nullptr ? first.prefix->segment(l, 0, first.P) : cpu::KvSegment{};
                args.seg[0].first_pos = 0;
                args.seg[0].n_tokens = first.P;
                if (shared.size() == 1) {
                    // each run of consecutive rows that go on (all of them but in a trimmed layer)
                    // as a call of its own, its suffix segment ending at the run's last row
                    for (int r0 = 0; r0 < first.n_rows;) {
                        if (out_row(first.row0 + r0) < 0) {
                            ++r0;
                            continue;
                        }
                        int r1 = r0 + 1;
                        while (r1 < first.n_rows && out_row(first.row0 + r1) >= 0) ++r1;
                        args.seg[1] = first.suffix->segment(l, first.P, first.n0 + r1);
                        args.q = &a.q[size_t(first.row0 + r0) * qd];
                        args.n_rows = r1 - r0;
                        args.first_pos = first.P + first.n0 + r0;
                        args.out = &a.att[size_t(out_row(first.row0 + r0)) * qd];
                        args.suffixes = nullptr;
                        kernels_.attention(pool_, ws_, args);
                        r0 = r1;
                    }
                    continue;
                }
                // several sequences over this prefix: one call, each row against its own suffix
                share.clear();
                for (size_t k = 0; k < shared.size(); ++k) {
                    const SeqPlan& sp = seqs[size_t(shared[k])];
                    share.suffixes.push_back(sp.suffix->segment(l, sp.P, sp.n0 + sp.n_rows));
                    for (int r = 0; r < sp.n_rows; ++r) {
                        if (out_row(sp.row0 + r) < 0) continue;
                        share.row_seq.push_back(int(k));
                        share.row_pos.push_back(sp.P + sp.n0 + r);
                        share.row_q.push_back(&a.q[size_t(sp.row0 + r) * qd]);
                        share.row_out.push_back(&a.att[size_t(out_row(sp.row0 + r)) * qd]);
                    }
                }
                if (share.row_seq.empty()) continue;
                args.suffixes = share.suffixes.data();
                args.row_seq = share.row_seq.data();
                args.row_pos = share.row_pos.data();
                args.row_q = share.row_q.data();
                args.row_out = share.row_out.data();
                args.n_rows = int(share.row_seq.size());
                kernels_.attention(pool_, ws_, args);
                args.suffixes = nullptr;
            }
        }
        // From here on a trimmed layer runs the kept rows only, moved to the front of the residual.
        int rows = T;
        if (trimmed) {
            rows = int(kept.size());
            for (int j = 0; j < rows; ++j)
                if (kept[size_t(j)] != j)
                    std::memcpy(&a.x[size_t(j) * dim], &a.x[size_t(kept[size_t(j)]) * dim],
                                size_t(dim) * sizeof(float));
            if (rows == 0) continue;
        }
        kernels_.gemm(pool_, ws_, a.att.data(), rows, L.wo, a.proj.data());
        if (L.bo) for_rows(rows, [&](int t) { add_bias(&a.proj[size_t(t) * dim], L.bo, dim); });
        for_rows(rows, [&](int t) {
            for (int i = 0; i < dim; ++i)
                a.x[size_t(t) * dim + i] = a.x[size_t(t) * dim + i] + a.proj[size_t(t) * dim + i];
        });

        // MLP: down(silu(gate(xn)) * up(xn)), then the residual
        for_rows(rows,
                 [&](int t) { kernels_.rmsnorm(&a.x[size_t(t) * dim], L.ffn_norm, &a.xn[size_t(t) * dim], dim, eps); });
        kernels_.gemm(pool_, ws_, a.xn.data(), rows, L.w_gate_up, a.gate_up.data());
        for_rows(rows, [&](int t) {
            const float* row = &a.gate_up[size_t(t) * 2 * ffn];
            kernels_.swiglu(row, row + ffn, &a.gate[size_t(t) * ffn], ffn);
        });
        kernels_.gemm(pool_, ws_, a.gate.data(), rows, L.w_down, a.proj.data());
        for_rows(rows, [&](int t) {
            for (int i = 0; i < dim; ++i)
                a.x[size_t(t) * dim + i] = a.x[size_t(t) * dim + i] + a.proj[size_t(t) * dim + i];
        });
    }
    check_cancel();

    // final norm and lm_head, only for the requested rows
    if (!logit_rows.empty() && run_layers == c.n_layers) {
        const int R = int(logit_rows.size());
        Activations::grow(a.xn, size_t(R) * dim);  // rows may repeat, so R can exceed T
        for (int r = 0; r < R; ++r)
            kernels_.rmsnorm(
                &a.x[size_t(trim_last ? compact[size_t(logit_rows[size_t(r)])] : logit_rows[size_t(r)]) * dim],
                final_norm_, &a.xn[size_t(r) * dim], dim, eps);
        kernels_.gemm(pool_, ws_, a.xn.data(), R, lm_head_, logits);
    }
    if (sparse == nullptr)
        for (const SeqPlan& sp : seqs) sp.suffix->set_n_tokens(sp.n0 + sp.n_rows);
    if (unrotated != nullptr) unrotated->set_n_tokens(u0 + T);
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const ModelWeights& weights, const CpuBackendOptions& options) {
    return std::make_unique<CpuBackend>(weights, options);
}

BackendEntry cpu_backend_entry() {
    BackendEntry e;
    e.name = "cpu";
    const auto cpu_options = [](const BackendOptions& o) {
        CpuBackendOptions cpu;
        cpu.n_threads = o.n_threads;
        cpu.kv_dtype = o.kv_dtype;
        cpu.weights = o.weights;
        cpu.kv_warm_bytes = o.kv_warm_bytes;
        cpu.kv_warm_fill = o.kv_warm_fill;
        return cpu;
    };
    e.numerics_id = [cpu_options](const BackendOptions& o, const CudaProbeSummary&) { return cpu_numerics_id(cpu_options(o)); };
    e.make = [cpu_options](const ModelWeights& w, const BackendOptions& o) { return make_cpu_backend(w, cpu_options(o)); };
    return e;
}

}  // namespace cc
