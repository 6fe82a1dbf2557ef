// The CUDA backend: the same forward pass as core/cpu/cpu_backend.cpp, with cuBLASLt GEMMs (BF16
// in, FP32 accumulate) and our kernels (cuda/kernels.cu); weights and KV live on the device.
//
// Numerics: the residual stream, norms, RoPE, attention and logits are F32; GEMM inputs
// (normed activations, attention output, SwiGLU output) are rounded to BF16 just before each GEMM
// and weights are stored as BF16. Exactness within this backend: every kernel computes a row
// independently of the batch (kernels.cu, gemm.cu), so a cached query gives the bits of a full
// prefill. Against the CPU backend the results differ by the BF16 rounding, which the self-test
// bounds (selftest.cu); the numerics_id keeps the two backends' groups apart.
#include "cuda/cuda_backend.h"

#include "core/base/kernel_math.h"
#include "cuda/attention_mma.h"
#include "cuda/context.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/launch_geometry.h"
#include "cuda/step_graphs.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace cc::cuda {

Probe probe() {
    Probe result;
    cudaRuntimeGetVersion(&result.runtime_version);
    cudaDriverGetVersion(&result.driver_version);
    int n_devices = 0;
    const cudaError_t err = cudaGetDeviceCount(&n_devices);
    if (err != cudaSuccess || n_devices == 0) {
        result.message = std::string("no CUDA device: ") +
                         (err != cudaSuccess ? cudaGetErrorString(err) : "the driver reports 0 devices");
        cudaGetLastError();  // clear the sticky error so later calls start clean
        return result;
    }
    for (int i = 0; i < n_devices; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
        result.devices.push_back(describe_device(i, prop));
    }
    // A device is only useful to us if cuBLAS can open a handle on it.
    cublasHandle_t handle = nullptr;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
        result.message = "CUDA device found but cuBLAS could not be initialised";
        return result;
    }
    cublasDestroy(handle);
    result.available = !result.devices.empty();
    result.message = result.available ? result.devices.front().name + " (sm_" +
                                            std::to_string(result.devices.front().compute_major) +
                                            std::to_string(result.devices.front().compute_minor) + ")"
                                      : "no CUDA device: properties could not be read";
    return result;
}

std::string cuda_numerics_id(const DeviceInfo& device, const CudaBackendOptions& options) {
    return "cuda/sm" + std::to_string(device.compute_major) + std::to_string(device.compute_minor) + "/bf16/" +
           kv_dtype_name(options.kv_dtype) + (options.mma_attention ? "/attn-mma" : "") +
           (options.own_gemm ? "/gemm-own" : "");
}

namespace {

// An opt-in switch read from the environment: unset, "" or `off` -> false, `on` -> true.
bool env_switch(const char* name, const std::string& off, const std::string& on, const char* on_means) {
    const char* v = std::getenv(name);
    const std::string s = v == nullptr ? "" : v;
    if (s.empty() || s == off) return false;
    if (s == on) return true;
    throw std::runtime_error(std::string(name) + "=" + s + ": takes \"" + off + "\" (the default) or \"" + on + "\" (" +
                             on_means + ", not yet run on a device)");
}

}  // namespace

bool mma_attention_from_env() {
    return env_switch("CONTEXTCACHE_CUDA_ATTENTION", "scalar", "mma", "tensor cores");
}

bool stacked_batch_from_env() {
    return env_switch("CONTEXTCACHE_CUDA_BATCH", "serial", "stacked", "every sequence of a step in one pass");
}

namespace {

// CONTEXTCACHE_CUDA_GRAPHS: unset, "" or "off" -> 0, "on" -> 1 (captured every step), "replay" -> 2
// (captured once per shape and KV-length bucket, then replayed).
int graphs_mode_from_env() {
    const char* v = std::getenv("CONTEXTCACHE_CUDA_GRAPHS");
    const std::string s = v == nullptr ? "" : v;
    if (s.empty() || s == "off") return 0;
    if (s == "on") return 1;
    if (s == "replay") return 2;
    throw std::runtime_error("CONTEXTCACHE_CUDA_GRAPHS=" + s +
                             ": takes \"off\" (the default), \"on\" (small chunks as CUDA graphs, captured every "
                             "step) or \"replay\" (captured once per shape and KV-length bucket, then replayed); "
                             "neither yet run on a device");
}

}  // namespace

bool graphs_from_env() {
    return graphs_mode_from_env() != 0;
}

bool graph_replay_from_env() {
    return graphs_mode_from_env() == 2;
}

bool own_gemm_from_env() {
    return env_switch("CONTEXTCACHE_CUDA_GEMM", "cublaslt", "own", "our own tensor-core GEMMs");
}

bool upload_ring_from_env() {
    return env_switch("CONTEXTCACHE_CUDA_UPLOAD", "staged", "ring", "uploads through a ring of staging slices");
}

bool device_greedy_from_env() {
    return env_switch("CONTEXTCACHE_CUDA_GREEDY", "host", "device", "greedy tokens picked on the device");
}

bool fused_kernels_from_env() {
    return env_switch("CONTEXTCACHE_CUDA_FUSED", "off", "on", "fused residual adds, norms and attention outputs");
}

size_t device_free_bytes(int device) {
    int previous = 0;
    cudaGetDevice(&previous);
    if (cudaSetDevice(device) != cudaSuccess) {
        cudaGetLastError();
        throw CudaError("cudaSetDevice(" + std::to_string(device) + ") failed: no such device");
    }
    size_t free_bytes = 0, total = 0;
    const cudaError_t err = cudaMemGetInfo(&free_bytes, &total);
    cudaSetDevice(previous);
    if (err != cudaSuccess) {
        cudaGetLastError();
        throw CudaError(std::string("cudaMemGetInfo failed: ") + cudaGetErrorName(err));
    }
    return free_bytes;
}

// ---- the backend -------------------------------------------------------------------------------

namespace {

constexpr size_t kStagingBytes = size_t(32) << 20;  // pinned staging for uploads and downloads

std::string shape_str(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

float element_to_f32(const std::byte* data, DType t, size_t i) {
    uint16_t h;
    switch (t) {
        case DType::f32: {
            float f;
            std::memcpy(&f, data + 4 * i, 4);
            return f;
        }
        case DType::bf16:
            std::memcpy(&h, data + 2 * i, 2);
            return km::bf16_to_f32(h);
        case DType::f16:
            std::memcpy(&h, data + 2 * i, 2);
            return km::f16_to_f32(h);
    }
    return 0.0f;
}

// Device KV block: one allocation, per layer K then V, each [n_kv_heads][cap][head_dim] in the KV
// dtype: the canonical layout with `cap` positions per head, so export/import are strided copies
// (one piece per layer, part and head) and attention reads a position's row contiguously.
class CudaKvBlock final : public KvBlock {
public:
    CudaKvBlock(const void* owner, const Context& ctx, const ModelConfig& c, bool bf16, int capacity)
        : owner_(owner), bf16_(bf16), n_layers_(c.n_layers), n_kv_(c.n_kv_heads), hd_(c.head_dim), cap_(capacity) {
        if (capacity < 0) throw std::runtime_error("allocate_kv: negative capacity " + std::to_string(capacity));
        mem_ =
            ctx.alloc(size_t(n_layers_) * 2 * part_bytes(), "a KV block of " + std::to_string(capacity) + " positions");
    }
    int capacity_tokens() const override { return cap_; }
    int n_tokens() const override { return n_tokens_; }
    void truncate(int n_tokens) override {
        if (n_tokens < 0 || n_tokens > n_tokens_)
            throw std::runtime_error("KvBlock::truncate: " + std::to_string(n_tokens) + " is outside [0, " +
                                     std::to_string(n_tokens_) + "]");
        n_tokens_ = n_tokens;
    }
    void set_n_tokens(int n) { n_tokens_ = n; }
    const void* owner() const { return owner_; }
    size_t elem_bytes() const { return bf16_ ? 2 : 4; }
    size_t part_bytes() const { return size_t(n_kv_) * size_t(cap_) * size_t(hd_) * elem_bytes(); }
    // which = 0: K, 1: V of `layer`: [n_kv_heads][cap][head_dim]
    std::byte* part(int layer, int which) const {
        return mem_.as<std::byte>() + (2 * size_t(layer) + size_t(which)) * part_bytes();
    }

    // Pieces between this block and a canonical image of n positions (per layer K then V, each
    // [n_kv_heads][n][head_dim]): one per (layer, part, head).
    std::vector<Context::Piece> pieces(std::byte* image, int n) const {
        std::vector<Context::Piece> out;
        const size_t row = size_t(hd_) * elem_bytes(), canon_part = size_t(n_kv_) * size_t(n) * row;
        for (int l = 0; l < n_layers_; ++l)
            for (int which = 0; which < 2; ++which)
                for (int h = 0; h < n_kv_; ++h)
                    out.push_back({part(l, which) + size_t(h) * size_t(cap_) * row,
                                   image + (2 * size_t(l) + size_t(which)) * canon_part + size_t(h) * size_t(n) * row,
                                   size_t(n) * row});
        return out;
    }

private:
    const void* owner_;
    bool bf16_;
    int n_layers_, n_kv_, hd_;
    int cap_;
    int n_tokens_ = 0;
    DeviceBuffer mem_;
};

struct DevLayer {
    DeviceBuffer attn_norm;  // (dim) f32
    DeviceBuffer ffn_norm;   // (dim) f32
    DeviceBuffer q_norm;     // (head_dim) f32, Qwen3 only
    DeviceBuffer k_norm;     // (head_dim) f32, Qwen3 only
    DeviceBuffer bq;         // (n_heads * head_dim) f32, qkv_bias only (Qwen2, Llama attention_bias)
    DeviceBuffer bk;         // (n_kv_heads * head_dim) f32, qkv_bias only
    DeviceBuffer bv;         // (n_kv_heads * head_dim) f32, qkv_bias only
    DeviceBuffer bo;         // (dim) f32, o_bias only (Llama attention_bias)
    DeviceBuffer wq;         // (n_heads * head_dim, dim) bf16
    DeviceBuffer wk;         // (n_kv_heads * head_dim, dim) bf16
    DeviceBuffer wv;         // (n_kv_heads * head_dim, dim) bf16
    DeviceBuffer wo;         // (dim, n_heads * head_dim) bf16
    DeviceBuffer w_gate;     // (ffn_dim, dim) bf16
    DeviceBuffer w_up;       // (ffn_dim, dim) bf16
    DeviceBuffer w_down;     // (dim, ffn_dim) bf16
};

const uint16_t* bf(const DeviceBuffer& b) {
    return b.as<const uint16_t>();
}
const float* f32(const DeviceBuffer& b) {
    return b.as<const float>();
}

class CudaBackend final : public Backend {
public:
    CudaBackend(const ModelWeights& weights, const CudaBackendOptions& options)
        : cfg_(weights.config),
          options_(options),
          ctx_(options.device, options.workspace_bytes, kStagingBytes),
          max_rows_(options.max_batch_tokens) {
        ctx_.set_upload_ring(options.upload_ring);
        const ModelConfig& c = cfg_;
        if (c.n_layers <= 0 || c.dim <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 || c.ffn_dim <= 0 ||
            c.vocab_size <= 0)
            throw std::runtime_error("cuda backend: the model config has a non-positive dimension");
        if (c.n_heads % c.n_kv_heads != 0)
            throw std::runtime_error("cuda backend: num_attention_heads " + std::to_string(c.n_heads) +
                                     " is not a multiple of num_key_value_heads " + std::to_string(c.n_kv_heads));
        if (c.head_dim % 2 != 0 || c.head_dim > geom::kMaxHeadDim)
            throw std::runtime_error("cuda backend: head_dim " + std::to_string(c.head_dim) +
                                     " must be even and at most " + std::to_string(geom::kMaxHeadDim));
        if (max_rows_ < 1) throw std::runtime_error("cuda backend: max_batch_tokens must be at least 1");
        if (int(weights.layers.size()) != c.n_layers)
            throw std::runtime_error("cuda backend: " + std::to_string(weights.layers.size()) +
                                     " layers of weights, config has " + std::to_string(c.n_layers));
        rope_.theta = c.rope_theta;
        rope_.head_dim = c.head_dim;
        if (c.rope_scaling.type == "llama3") {
            rope_.factor = c.rope_scaling.factor;
            rope_.low_freq_factor = c.rope_scaling.low_freq_factor;
            rope_.high_freq_factor = c.rope_scaling.high_freq_factor;
            rope_.original_max_position_embeddings = c.rope_scaling.original_max_position_embeddings;
        } else if (!c.rope_scaling.type.empty()) {
            throw std::runtime_error("cuda backend: rope_scaling type \"" + c.rope_scaling.type +
                                     "\" is not supported");
        }
        for (int i = 0; i < c.head_dim / 2; ++i) inv_freq_.push_back(km::rope_inv_freq(i, rope_));

        // weights, uploaded once (matrices as BF16, norm vectors as F32)
        const int64_t qd = int64_t(c.n_heads) * c.head_dim, kvd = int64_t(c.n_kv_heads) * c.head_dim;
        embed_ = mat(weights.embed, "model.embed_tokens.weight", c.vocab_size, c.dim);
        const auto to_vec = [this](const Tensor& t, const std::string& name, int64_t n) { return vec(t, name, n); };
        const auto to_mat = [this](const Tensor& t, const std::string& name, int64_t rows, int64_t cols) {
            return mat(t, name, rows, cols);
        };
        for (int l = 0; l < c.n_layers; ++l)
            layers_.push_back(bind_layer<DevLayer>(c, weights.layers[size_t(l)], l, to_vec, to_mat));
        final_norm_ = vec(weights.final_norm, "model.norm.weight", c.dim);
        tied_ = weights.lm_head.data == nullptr || weights.lm_head.data == weights.embed.data;
        if (!tied_) lm_head_ = mat(weights.lm_head, "lm_head.weight", c.vocab_size, c.dim);

        // activation buffers for max_rows_ rows, allocated once (never inside forward, except the
        // RoPE table and split scratch, which grow with the positions seen)
        const geom::ForwardBuffers fb = geom::plan_buffers(c, max_rows_, 1);
        x_ = ctx_.alloc(fb.x, "activations (x)");
        xn_ = ctx_.alloc(fb.xn, "activations (normed x)");
        q_ = ctx_.alloc(fb.q, "activations (q)");
        k_ = ctx_.alloc(fb.k, "activations (k)");
        v_ = ctx_.alloc(fb.v, "activations (v)");
        att_ = ctx_.alloc(fb.att, "activations (attention)");
        proj_ = ctx_.alloc(fb.proj, "activations (projection)");
        gate_ = ctx_.alloc(fb.gate, "activations (gate)");
        up_ = ctx_.alloc(fb.up, "activations (up)");
        act_ = ctx_.alloc(fb.act, "activations (swiglu)");
        tokens_ = ctx_.alloc(fb.tokens, "token ids");
        sel_ = ctx_.alloc(fb.sel, "logit row indices");
        rope_rows_ = ctx_.alloc(size_t(max_rows_) * sizeof(kern::RopeRow), "the rows of a multi-sequence step");
        logits_ = ctx_.alloc(fb.logits, "logits");
        argmax_ = ctx_.alloc(fb.argmax, "greedy tokens");
        ensure_positions(std::min(std::max(c.max_position_embeddings, 1), 8192));

        // one pinned GEMM algorithm per weight shape (gemm.cu explains why)
        plan_q_ = plan(int(qd), c.dim, max_rows_);
        plan_kv_ = plan(int(kvd), c.dim, max_rows_);
        plan_o_ = plan(c.dim, int(qd), max_rows_);
        plan_up_ = plan(c.ffn_dim, c.dim, max_rows_);
        plan_down_ = plan(c.dim, c.ffn_dim, max_rows_);
        plan_lm_ = plan(c.vocab_size, c.dim, geom::max_logit_rows(max_rows_));

        // Every matrix now lives on the device and the host copies are never read again: a
        // checkpoint's mapped pages are dropped, generated ones the engine gave up are discarded
        // (builtin:qwen3-8b: 16 GB of host memory). Only here, once the backend is whole: if the
        // construction throws, the engine builds the CPU backend from the same, intact, weights.
        release_copied(weights.embed);
        for (const LayerWeights& lw : weights.layers)
            for (const Tensor* t : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down})
                release_copied(*t);
        if (!tied_) release_copied(weights.lm_head);
    }

    std::string name() const override { return "cuda"; }
    std::string numerics_id() const override { return cuda_numerics_id(ctx_.info(), options_); }
    const ModelConfig& config() const override { return cfg_; }
    KvDType kv_dtype() const override { return options_.kv_dtype; }
    bool kv_on_device() const override { return true; }

    std::unique_ptr<KvBlock> allocate_kv(int capacity_tokens) override {
        std::lock_guard lock(mutex_);
        ctx_.make_current();
        return std::make_unique<CudaKvBlock>(this, ctx_, cfg_, bf16_kv(), capacity_tokens);
    }

    std::vector<float> forward(std::span<const token_id> tokens, const KvView& kv, std::span<const int> logit_rows,
                               const std::atomic<bool>* cancel) override;
    // With CudaBackendOptions::stacked_batch, every sequence's rows in one step (run_step);
    // otherwise the base class's one sequence after another.
    void forward_batch(std::span<const SequenceRows> seqs, const std::atomic<bool>* cancel) override;

    void export_kv(const KvBlock& block, int n_tokens, std::span<std::byte> out) const override {
        std::lock_guard lock(mutex_);
        ctx_.make_current();
        const CudaKvBlock& b = own(&block, "export_kv");
        if (n_tokens < 0 || n_tokens > b.n_tokens())
            throw std::runtime_error("export_kv: " + std::to_string(n_tokens) +
                                     " positions requested, the block holds " + std::to_string(b.n_tokens()));
        if (out.size() != kv_bytes(n_tokens))
            throw std::runtime_error("export_kv: output is " + std::to_string(out.size()) + " bytes, expected " +
                                     std::to_string(kv_bytes(n_tokens)));
        const std::vector<Context::Piece> pieces = b.pieces(out.data(), n_tokens);
        ctx_.download_pieces(pieces);
    }

    std::unique_ptr<KvBlock> import_kv(std::span<const std::byte> data, int n_tokens, int capacity_tokens,
                                       int reserve_tokens) override {
        // Checked as on every backend, though device blocks are allocated whole (reserve_tokens
        // names no extra room here).
        check_kv_room("import_kv", n_tokens, capacity_tokens, reserve_tokens);
        std::lock_guard lock(mutex_);
        ctx_.make_current();
        if (data.size() != kv_bytes(n_tokens))
            throw std::runtime_error("import_kv: data is " + std::to_string(data.size()) + " bytes, expected " +
                                     std::to_string(kv_bytes(n_tokens)) + " for " + std::to_string(n_tokens) +
                                     " positions");
        auto block = std::make_unique<CudaKvBlock>(this, ctx_, cfg_, bf16_kv(), capacity_tokens);
        // pieces() takes a mutable image pointer; upload_pieces only reads from it.
        const std::vector<Context::Piece> pieces = block->pieces(const_cast<std::byte*>(data.data()), n_tokens);
        ctx_.upload_pieces(pieces);
        block->set_n_tokens(n_tokens);
        return block;
    }

private:
    bool bf16_kv() const { return options_.kv_dtype == KvDType::bf16; }

    // One sequence of a step, checked: its new tokens against [prefix | suffix], and where the
    // logits of logit_rows go (logit_rows.size() x vocab floats) and their greedy tokens (one id a
    // row); either may be null (SequenceRows::argmax), not both where there are logit rows.
    struct SeqRun {
        std::span<const token_id> tokens;
        const CudaKvBlock* prefix = nullptr;
        int prefix_tokens = 0;
        CudaKvBlock* suffix = nullptr;
        std::span<const int> logit_rows;
        float* logits = nullptr;
        token_id* argmax = nullptr;
    };
    SeqRun checked_run(std::span<const token_id> tokens, const KvView& kv, std::span<const int> logit_rows,
                       float* logits, token_id* argmax = nullptr) const {
        auto* suffix = const_cast<CudaKvBlock*>(&own(kv.suffix, "forward (suffix block)"));
        const CudaKvBlock* prefix = kv.prefix_tokens > 0 ? &own(kv.prefix, "forward (prefix block)") : nullptr;
        check_forward_request(tokens, kv, prefix, *suffix, logit_rows, cfg_.vocab_size);
        return {tokens, prefix, kv.prefix_tokens, suffix, logit_rows, logits, argmax};
    }
    // The forward pass of a step (mutex_ held, every sequence checked): the rows of all sequences
    // stacked and cut into chunks (geom::plan_step_chunks). Suffix blocks grow only when the whole
    // step has run, so an error or a cancel leaves them as they were.
    void run_step(std::span<const SeqRun> seqs, const std::atomic<bool>* cancel);
    // Launches a chunk's layers [l0, l1) (the embedding too when l0 is 0) on the stream; nothing in
    // it synchronises or copies from the host, so it may be captured into a graph. check_cancel,
    // when given, runs before each layer. `logits` false: no row of the chunk asks for logits, so
    // the last layer stops after its K/V store (what later rows attend to); its attention, o_proj
    // and MLP would feed nothing (a long prefill's chunks but the last; the CPU backend trims the
    // same rows and more: llama.cpp's inp_out_ids).
    // replay_positions > 0 (graph replay, replayable(chunk)): every piece's K/V store and attention
    // read their rows' positions and views from rope_rows_ and attn_tables_ (written before the
    // launch), the attention's grid sized for that many positions, so that the launches do not
    // depend on the step and one captured graph serves every step of the shape and bucket.
    void enqueue_layers(std::span<const SeqRun> seqs, const geom::StepChunk& chunk, int l0, int l1, bool logits,
                        const std::function<void()>& check_cancel, int replay_positions = 0);
    // The final norm of the ns rows whose indices sel_ holds, the lm_head over them into logits_,
    // and (device_pick) each row's greedy token into argmax_: launches only, so it may be captured.
    void enqueue_head(int ns, bool device_pick);
    // A piece's attention in layer l: its rows against its own sequence's view [prefix | suffix].
    kern::AttnArgs piece_attention(const SeqRun& s, const geom::StepPiece& p, int l) const;
    // Whether a chunk runs by graph replay (options_.graph_replay): up to geom::kGraphMaxRows rows,
    // every piece through the tensor-core attention's batch launch, all in one launch.
    bool replayable(const geom::StepChunk& chunk) const;
    // x += proj (the residual), then, when then_norm is set, xn = bf16(rmsnorm(x) * then_norm): one
    // launch with options_.fused_kernels (add_rmsnorm), two without; the same bits either way.
    void add_residual(int n, const float* then_norm);

    static void check(const Tensor& t, const std::string& name, std::vector<int64_t> shape) {
        if (t.data == nullptr) throw std::runtime_error("cuda backend: weight " + name + " is missing");
        if (t.shape != shape)
            throw std::runtime_error("cuda backend: weight " + name + " has shape " + shape_str(t.shape) +
                                     ", expected " + shape_str(shape));
        size_t n = 1;
        for (int64_t d : shape) n *= size_t(d);
        if (t.n_bytes != n * dtype_bytes(t.dtype))
            throw std::runtime_error("cuda backend: weight " + name + " holds " + std::to_string(t.n_bytes) +
                                     " bytes, expected " + std::to_string(n * dtype_bytes(t.dtype)) + " for " +
                                     dtype_name(t.dtype));
    }

    // Uploads n elements of t converted to bf16 (out_bf16) or f32, through the pinned staging buffer.
    DeviceBuffer upload(const Tensor& t, const std::string& name, size_t n, bool out_bf16) {
        const size_t eb = out_bf16 ? 2 : 4;
        DeviceBuffer buf = ctx_.alloc(n * eb, "weight " + name);
        const size_t per_piece = ctx_.staging_bytes() / eb;
        std::byte* stage = ctx_.staging();
        for (size_t i0 = 0; i0 < n; i0 += per_piece) {
            const size_t m = std::min(per_piece, n - i0);
            ctx_.sync();  // the previous piece has left the staging buffer
            if (out_bf16 && t.dtype == DType::bf16) {
                std::memcpy(stage, t.data + i0 * 2, m * 2);
            } else {
                for (size_t i = 0; i < m; ++i) {
                    const float f = element_to_f32(t.data, t.dtype, i0 + i);
                    if (out_bf16) {
                        const uint16_t h = km::f32_to_bf16(f);
                        std::memcpy(stage + 2 * i, &h, 2);
                    } else {
                        std::memcpy(stage + 4 * i, &f, 4);
                    }
                }
            }
            CC_CUDA_CHECK(
                cudaMemcpyAsync(buf.as<std::byte>() + i0 * eb, stage, m * eb, cudaMemcpyHostToDevice, ctx_.stream()));
        }
        ctx_.sync();
        return buf;
    }
    DeviceBuffer vec(const Tensor& t, const std::string& name, int64_t n) {
        check(t, name, {n});
        return upload(t, name, size_t(n), false);
    }
    DeviceBuffer mat(const Tensor& t, const std::string& name, int64_t rows, int64_t cols) {
        check(t, name, {rows, cols});
        return upload(t, name, size_t(rows) * size_t(cols), true);
    }

    std::shared_ptr<GemmPlan> plan(int n, int k, int max_m) {
        const std::string key = std::to_string(n) + "x" + std::to_string(k) + "/" + std::to_string(max_m);
        auto it = plans_.find(key);
        if (it != plans_.end()) return it->second;
        auto p =
            std::make_shared<GemmPlan>(ctx_, n, k, max_m, options_.own_gemm ? GemmImpl::own_mma : GemmImpl::cublas_lt);
        plans_.emplace(key, p);
        return p;
    }

    // The RoPE table and the split-attention scratch cover positions [0, n_positions).
    // cos/sin are computed on the host exactly as the CPU backend does (angle = position *
    // inv_freq in double, cos/sin in double, rounded to float once), so both backends rotate by
    // the same floats; the table grows in steps of geom::kRopeTableStep positions.
    void ensure_positions(int n_positions) {
        if (n_positions > rope_positions_) {
            const int positions = geom::rope_table_positions(n_positions);
            const int half = cfg_.head_dim / 2;
            std::vector<float> cs(size_t(positions) * half), sn(size_t(positions) * half);
            for (int p = 0; p < positions; ++p)
                for (int i = 0; i < half; ++i) {
                    const double angle = double(p) * inv_freq_[size_t(i)];
                    cs[size_t(p) * half + i] = float(std::cos(angle));
                    sn[size_t(p) * half + i] = float(std::sin(angle));
                }
            DeviceBuffer c = ctx_.alloc(cs.size() * 4, "the RoPE cos table"),
                         s = ctx_.alloc(sn.size() * 4, "the RoPE sin table");
            ctx_.upload(c.get(), cs.data(), cs.size() * 4);
            ctx_.upload(s.get(), sn.data(), sn.size() * 4);
            forget_graphs();  // they name the tables replaced below
            cos_ = std::move(c);
            sin_ = std::move(s);
            rope_positions_ = positions;
        }
        const size_t need = geom::attn_partial_floats(geom::attn_split_rows(options_.mma_attention), cfg_.n_heads,
                                                      cfg_.head_dim, geom::rope_table_positions(n_positions));
        if (need * 4 > partial_.bytes()) {
            forget_graphs();
            partial_ = ctx_.alloc(need * 4, "split-attention scratch");
        }
    }
    // Graphs keep the device addresses they were captured with: none may outlive a buffer it names.
    void forget_graphs() {
        if (graphs_.empty()) return;
        ctx_.sync();
        graphs_.clear();
    }

    const CudaKvBlock& own(const KvBlock* b, const char* what) const {
        auto* cb = dynamic_cast<const CudaKvBlock*>(b);
        if (cb == nullptr || cb->owner() != this)
            throw std::runtime_error(std::string(what) +
                                     ": the KV block is missing or was not allocated by this CUDA backend");
        return *cb;
    }

    ModelConfig cfg_;
    CudaBackendOptions options_;
    Context ctx_;
    int max_rows_;
    km::RopeParams rope_;
    std::vector<double> inv_freq_;  // (head_dim / 2)
    mutable std::mutex mutex_;      // one call at a time: activations and staging are shared

    DeviceBuffer embed_;  // (vocab, dim) bf16
    std::vector<DevLayer> layers_;
    DeviceBuffer final_norm_;  // (dim) f32
    bool tied_ = false;
    DeviceBuffer lm_head_;  // (vocab, dim) bf16, or empty when tied to embed_

    DeviceBuffer x_, xn_, q_, k_, v_, att_, proj_, gate_, up_, act_, tokens_, sel_, argmax_,
        logits_;              // shapes: geom::ForwardBuffers
    DeviceBuffer cos_, sin_;  // (rope_positions_, head_dim / 2) f32
    int rope_positions_ = 0;
    DeviceBuffer partial_;                  // split-attention partial states
    std::vector<int32_t> step_tokens_;      // a chunk's tokens, host side
    std::vector<Context::Piece> logit_pieces_;  // one lm_head GEMM's rows -> their sequences' storage
    std::vector<float> host_logits_;            // logits that only the host's greedy pick reads (!device_greedy)
    std::vector<int32_t> step_ids_;             // the greedy tokens of one lm_head GEMM's rows (device_greedy)
    std::vector<kern::AttnArgs> attn_;      // a layer's attention, one entry per piece of the chunk
    std::vector<kern::RopeRow> step_rope_;  // a chunk's rows for qk_rope_store_rows, host side
    DeviceBuffer rope_rows_;                // ... and on the device (max_rows_ entries)
    std::vector<int32_t> step_sel_;         // the lm_head's rows (indices into the chunk), host side
    std::vector<Context::Piece> step_uploads_;  // graph replay: a step's uploads, in one call
    std::vector<kern::AttnBatch> step_tables_;  // graph replay: each layer's attention batch, host side
    DeviceBuffer attn_tables_;                  // ... and on the device (n_layers entries)

    std::map<std::string, std::shared_ptr<GemmPlan>> plans_;
    std::shared_ptr<GemmPlan> plan_q_, plan_kv_, plan_o_, plan_up_, plan_down_, plan_lm_;
    StepGraphs graphs_;  // options_.graphs: the small chunks' kernels as graphs (after ctx_: destroyed first)
};

std::vector<float> CudaBackend::forward(std::span<const token_id> tokens, const KvView& kv,
                                        std::span<const int> logit_rows, const std::atomic<bool>* cancel) {
    std::lock_guard lock(mutex_);
    ctx_.make_current();
    std::vector<float> logits(logit_rows.size() * size_t(cfg_.vocab_size));
    const SeqRun one = checked_run(tokens, kv, logit_rows, logits.data());  // before touching any state
    run_step({&one, 1}, cancel);
    return logits;
}

void CudaBackend::forward_batch(std::span<const SequenceRows> seqs, const std::atomic<bool>* cancel) {
    check_batch_request(seqs, cfg_.vocab_size);
    std::lock_guard lock(mutex_);
    ctx_.make_current();
    std::vector<SeqRun> runs;
    for (const SequenceRows& s : seqs)
        runs.push_back(checked_run(s.tokens, s.kv, s.logit_rows, s.logits.empty() ? nullptr : s.logits.data(),
                                   s.argmax.empty() ? nullptr : s.argmax.data()));
    if (options_.stacked_batch) {
        run_step(runs, cancel);
        return;
    }
    // One sequence after another, each the step forward() runs; on a failure the sequences already
    // run are put back as they were (Backend::forward_batch's contract).
    std::vector<int> before;
    for (const SeqRun& r : runs) before.push_back(r.suffix->n_tokens());
    size_t done = 0;
    try {
        for (; done < runs.size(); ++done) run_step({&runs[done], 1}, cancel);
    } catch (...) {
        for (size_t i = 0; i < done; ++i) runs[i].suffix->truncate(before[i]);
        throw;
    }
}

void CudaBackend::run_step(std::span<const SeqRun> seqs, const std::atomic<bool>* cancel) {
    const ModelConfig& c = cfg_;
    std::vector<int> rows_of;   // new rows of each sequence
    std::vector<int> first_of;  // its first row among the stacked rows
    int stacked = 0, max_positions = 0;
    for (const SeqRun& s : seqs) {
        rows_of.push_back(int(s.tokens.size()));
        first_of.push_back(stacked);
        stacked += int(s.tokens.size());
        max_positions = std::max(max_positions, s.prefix_tokens + s.suffix->n_tokens() + int(s.tokens.size()));
    }
    if (stacked == 0) return;
    ensure_positions(max_positions);

    const int vocab = c.vocab_size;
    const cudaStream_t st = ctx_.stream();

    auto check_cancel = [&] {
        if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
            ctx_.sync();  // nothing of this call may still run when the caller goes on
            throw Cancelled();
        }
    };

    // Chunks of at most max_rows_ rows, each made of pieces of one sequence's consecutive rows: row
    // results depend neither on the chunking nor on the neighbours (the exactness argument), so only
    // the memory bound decides the cuts.
    for (const geom::StepChunk& chunk : geom::plan_step_chunks(rows_of, max_rows_)) {
        const int n = chunk.n;
        // the rows of this chunk whose logits (or greedy tokens) are asked for
        struct Out {
            float* to;        // the row's logits in its sequence's storage, or null
            token_id* token;  // its greedy token, or null
            int32_t chunk_row;
        };
        std::vector<Out> outs;
        for (size_t si = 0; si < seqs.size(); ++si)
            for (size_t j = 0; j < seqs[si].logit_rows.size(); ++j) {
                const int row = first_of[si] + seqs[si].logit_rows[j] - chunk.first_row;
                if (row >= 0 && row < n)
                    outs.push_back({seqs[si].logits ? seqs[si].logits + j * size_t(vocab) : nullptr,
                                    seqs[si].argmax ? seqs[si].argmax + j : nullptr, row});
            }
        const bool logits = !outs.empty();
        const int max_sel = plan_lm_->max_m();
        // whether rows of `sel` want greedy tokens, and whether the device picks them
        auto wants_tokens = [](std::span<const Out> sel) {
            return std::any_of(sel.begin(), sel.end(), [](const Out& o) { return o.token != nullptr; });
        };
        const bool chunk_pick = wants_tokens(outs) && options_.device_greedy;  // head_in_graph's, below
        step_tokens_.clear();
        for (const geom::StepPiece& p : chunk.pieces) {
            const auto t = seqs[size_t(p.seq)].tokens.subspan(size_t(p.seq_row), size_t(p.n));
            step_tokens_.insert(step_tokens_.end(), t.begin(), t.end());
        }
        const bool replay = replayable(chunk);
        // graph replay: this chunk's final norm, lm_head (and greedy pick) in its graph too, when
        // one lm_head GEMM takes its rows; then a step is one upload, one launch and one download
        const bool head_in_graph = replay && logits && int(outs.size()) <= max_sel;
        if (!replay) ctx_.upload(tokens_.get(), step_tokens_.data(), size_t(n) * sizeof(int32_t));
        if (chunk.pieces.size() > 1 || replay) {  // each row's position, slot and block, for qk_rope_store_rows
            step_rope_.clear();
            for (const geom::StepPiece& p : chunk.pieces) {
                const SeqRun& s = seqs[size_t(p.seq)];
                const int n0 = s.suffix->n_tokens();
                for (int i = 0; i < p.n; ++i)
                    step_rope_.push_back({s.suffix->part(0, 0), s.suffix->part_bytes(), s.suffix->capacity_tokens(),
                                          n0 + p.seq_row + i, s.prefix_tokens + n0 + p.seq_row + i});
            }
            if (!replay) ctx_.upload(rope_rows_.get(), step_rope_.data(), step_rope_.size() * sizeof(kern::RopeRow));
        }
        // The chunk's layers: launched as they are, or (options_.graphs, small chunks) as CUDA graphs
        // of geom::kGraphLayers layers each (step_graphs.h), the next group captured while the GPU
        // runs the one before; a cancel is then checked between groups (nothing may synchronise
        // while capturing). Graph replay: one graph for all layers, captured once per shape and
        // KV-length bucket, every layer's attention batch written to the device first.
        if (replay) {
            int positions = 0;
            for (const geom::StepPiece& p : chunk.pieces) {
                const SeqRun& s = seqs[size_t(p.seq)];
                positions = std::max(positions, s.prefix_tokens + s.suffix->n_tokens() + p.seq_row + p.n);
            }
            const int bucket = geom::graph_positions_bucket(positions, rope_positions_);
            step_tables_.resize(size_t(c.n_layers));
            for (int l = 0; l < c.n_layers; ++l) {
                attn_.clear();
                for (const geom::StepPiece& p : chunk.pieces)
                    attn_.push_back(piece_attention(seqs[size_t(p.seq)], p, l));
                step_tables_[size_t(l)] = kern::attn_mma_batch_of(attn_);
            }
            const size_t table_bytes = step_tables_.size() * sizeof(kern::AttnBatch);
            if (attn_tables_.bytes() < table_bytes) {
                forget_graphs();
                attn_tables_ = ctx_.alloc(table_bytes, "the attention tables of graph replay");
            }
            // everything the graph reads that changes from step to step, in one upload
            auto host = [](auto& v) { return reinterpret_cast<std::byte*>(v.data()); };
            step_uploads_ = {{tokens_.get(), host(step_tokens_), size_t(n) * sizeof(int32_t)},
                             {rope_rows_.get(), host(step_rope_), step_rope_.size() * sizeof(kern::RopeRow)},
                             {attn_tables_.get(), host(step_tables_), table_bytes}};
            if (head_in_graph) {
                step_sel_.clear();
                for (const Out& o : outs) step_sel_.push_back(o.chunk_row);
                step_uploads_.push_back({sel_.get(), host(step_sel_), step_sel_.size() * sizeof(int32_t)});
            }
            ctx_.upload_pieces(step_uploads_);
            std::vector<int> key = geom::graph_key(chunk);
            // -1: replay's keys, never run()'s; the head's rows and pick change its kernels
            key.insert(key.end(),
                       {logits ? 1 : 0, bucket, head_in_graph ? int(outs.size()) : 0, chunk_pick ? 1 : 0, -1});
            check_cancel();
            graphs_.replay(key, st, [&] {
                enqueue_layers(seqs, chunk, 0, c.n_layers, logits, {}, bucket);
                if (head_in_graph) enqueue_head(int(outs.size()), chunk_pick);
            });
        } else if (options_.graphs && n <= geom::kGraphMaxRows) {
            std::vector<int> key = geom::graph_key(chunk);
            key.push_back(logits ? 1 : 0);  // the last layer's kernels depend on it
            key.push_back(0);
            for (int l0 = 0; l0 < c.n_layers; l0 += geom::kGraphLayers) {
                check_cancel();
                key.back() = l0;  // each group its own graph: one may run while the next is captured
                graphs_.run(key, st, [&] {
                    enqueue_layers(seqs, chunk, l0, std::min(l0 + geom::kGraphLayers, c.n_layers), logits, {});
                });
            }
        } else {
            enqueue_layers(seqs, chunk, 0, c.n_layers, logits, check_cancel);
        }
        check_cancel();

        // final norm and lm_head for the requested rows in this chunk (rows may repeat), every
        // sequence's in one GEMM (enqueue_head; in the graph already when head_in_graph); each
        // row's logits then go to its sequence's storage, and its greedy token, where asked for,
        // is picked on the device (options_.device_greedy: only the ids come back) or on the host
        // from the logits
        for (size_t s0 = 0; s0 < outs.size(); s0 += size_t(max_sel)) {
            const int ns = int(std::min(outs.size() - s0, size_t(max_sel)));
            const std::span<const Out> sel(outs.data() + s0, size_t(ns));
            const bool tokens = wants_tokens(sel);
            const bool device_pick = tokens && options_.device_greedy;  // chunk_pick when head_in_graph (one group)
            if (!head_in_graph) {
                step_sel_.clear();
                for (const Out& o : sel) step_sel_.push_back(o.chunk_row);
                ctx_.upload(sel_.get(), step_sel_.data(), size_t(ns) * 4);
                enqueue_head(ns, device_pick);
            }
            // each row's logits from the staging buffer straight into its sequence's storage (one
            // host copy, not two: a step of 16 sequences brings 9.7 MB of logits on a 152k
            // vocabulary); a row whose logits only the host's pick reads, into host_logits_
            logit_pieces_.clear();
            if (tokens && !device_pick) host_logits_.resize(size_t(ns) * size_t(vocab));
            auto row_bytes = [&](int i) -> float* {
                const Out& o = sel[size_t(i)];
                if (o.to != nullptr) return o.to;
                return o.token != nullptr && !device_pick ? host_logits_.data() + size_t(i) * size_t(vocab) : nullptr;
            };
            for (int i = 0; i < ns; ++i)
                if (float* to = row_bytes(i))
                    logit_pieces_.push_back({logits_.as<std::byte>() + size_t(i) * size_t(vocab) * 4,
                                             reinterpret_cast<std::byte*>(to), size_t(vocab) * 4});
            if (device_pick) {
                step_ids_.resize(size_t(ns));
                logit_pieces_.push_back(
                    {argmax_.get(), reinterpret_cast<std::byte*>(step_ids_.data()), size_t(ns) * sizeof(int32_t)});
            }
            ctx_.download_pieces(logit_pieces_);
            for (int i = 0; i < ns; ++i)
                if (token_id* t = sel[size_t(i)].token)
                    *t = device_pick ? token_id(step_ids_[size_t(i)]) : token_id(km::argmax_row(row_bytes(i), vocab));
        }
    }
    ctx_.sync();
    for (const SeqRun& s : seqs) s.suffix->set_n_tokens(s.suffix->n_tokens() + int(s.tokens.size()));
}

void CudaBackend::enqueue_head(int ns, bool device_pick) {
    const cudaStream_t st = ctx_.stream();
    auto* xn = xn_.as<uint16_t>();
    kern::rmsnorm(x_.as<const float>(), sel_.as<const int32_t>(), f32(final_norm_), xn, true, ns, cfg_.dim,
                  float(cfg_.rms_norm_eps), st);
    plan_lm_->run(ctx_, xn, tied_ ? bf(embed_) : bf(lm_head_), logits_.as<float>(), ns);
    if (device_pick) kern::argmax_rows(logits_.as<const float>(), ns, cfg_.vocab_size, argmax_.as<int32_t>(), st);
}

bool CudaBackend::replayable(const geom::StepChunk& chunk) const {
    if (!options_.graphs || !options_.graph_replay || !options_.mma_attention || chunk.n > geom::kGraphMaxRows ||
        !geom::attn_mma_head_dim_ok(cfg_.head_dim))
        return false;
    std::vector<int> rows;
    for (const geom::StepPiece& p : chunk.pieces) {
        if (!geom::attn_mma_use_split(p.n)) return false;
        rows.push_back(p.n);
    }
    return geom::attn_mma_batches(rows).size() == 1;
}

kern::AttnArgs CudaBackend::piece_attention(const SeqRun& s, const geom::StepPiece& p, int l) const {
    const ModelConfig& c = cfg_;
    const int hd = c.head_dim, qd = c.n_heads * hd;
    const int n0 = s.suffix->n_tokens();  // positions the suffix held before this step
    kern::AttnArgs aa;
    if (s.prefix != nullptr)
        aa.seg[0] = {s.prefix->part(l, 0), s.prefix->part(l, 1), s.prefix->capacity_tokens(), s.prefix_tokens};
    aa.seg[1] = {s.suffix->part(l, 0), s.suffix->part(l, 1), s.suffix->capacity_tokens(), n0 + p.seq_row + p.n};
    aa.kv_bf16 = bf16_kv();
    aa.n_heads = c.n_heads;
    aa.n_kv_heads = c.n_kv_heads;
    aa.head_dim = hd;
    aa.window = c.sliding_window;
    aa.scale = float(1.0 / std::sqrt(double(hd)));
    aa.q = q_.as<const float>() + size_t(p.chunk_row) * qd;
    aa.n_rows = p.n;
    aa.first_pos = s.prefix_tokens + n0 + p.seq_row;
    aa.out = att_.as<float>() + size_t(p.chunk_row) * qd;
    if (options_.fused_kernels) aa.out_bf16 = xn_.as<uint16_t>() + size_t(p.chunk_row) * qd;  // o_proj's input, as is
    aa.kernel = options_.mma_attention ? kern::AttnKernel::mma : kern::AttnKernel::scalar;
    return aa;
}

void CudaBackend::enqueue_layers(std::span<const SeqRun> seqs, const geom::StepChunk& chunk, int l0, int l1,
                                 bool logits, const std::function<void()>& check_cancel, int replay_positions) {
    const ModelConfig& c = cfg_;
    const int n = chunk.n;
    const int dim = c.dim, hd = c.head_dim, ffn = c.ffn_dim;
    const int qd = c.n_heads * hd, kvd = c.n_kv_heads * hd;
    const float eps = float(c.rms_norm_eps);
    const cudaStream_t st = ctx_.stream();
    auto* xn = xn_.as<uint16_t>();
    auto* act = act_.as<uint16_t>();
    if (l0 == 0) kern::embed(bf(embed_), tokens_.as<const int32_t>(), x_.as<float>(), n, dim, st);

    for (int l = l0; l < l1; ++l) {
        if (check_cancel) check_cancel();
        const DevLayer& L = layers_[size_t(l)];

        // attention: xn = bf16(rmsnorm(x)) (fused: the layer before left it there, with its last
        // residual add); q, k, v projections over every row of the chunk
        if (!options_.fused_kernels || l == 0)
            kern::rmsnorm(x_.as<float>(), nullptr, f32(L.attn_norm), xn, true, n, dim, eps, st);
        const Projection qkv[] = {{plan_q_.get(), bf(L.wq), q_.as<float>()},
                                  {plan_kv_.get(), bf(L.wk), k_.as<float>()},
                                  {plan_kv_.get(), bf(L.wv), v_.as<float>()}};
        run_projections(ctx_, xn, n, qkv);
        if (c.qkv_bias) {
            kern::add_bias_rows(q_.as<float>(), f32(L.bq), n, qd, st);
            kern::add_bias_rows(k_.as<float>(), f32(L.bk), n, kvd, st);
            kern::add_bias_rows(v_.as<float>(), f32(L.bv), n, kvd, st);
        }

        // per piece, against its own sequence's view: Qwen3 q/k-norm, RoPE, its K and V into
        // its suffix block, then attention over [prefix | suffix] (every piece's in as few
        // launches as the kernel allows: a sequence appears once in a chunk, so no piece reads
        // K/V that another piece of the chunk writes)
        kern::QkRopeArgs qa;
        qa.q = q_.as<float>();
        qa.k = k_.as<float>();
        qa.v = v_.as<const float>();
        qa.n_rows = n;
        qa.n_heads = c.n_heads;
        qa.n_kv_heads = c.n_kv_heads;
        qa.head_dim = hd;
        qa.q_norm = c.qk_norm ? f32(L.q_norm) : nullptr;
        qa.k_norm = c.qk_norm ? f32(L.k_norm) : nullptr;
        qa.eps = eps;
        qa.cos_t = f32(cos_);
        qa.sin_t = f32(sin_);
        qa.kv_bf16 = bf16_kv();
        const bool by_rows = chunk.pieces.size() > 1 || replay_positions > 0;
        if (by_rows)  // every sequence's rows in one launch (rope_rows_, written before)
            kern::qk_rope_store_rows(qa, rope_rows_.as<const kern::RopeRow>(), l, st);
        const bool rest = logits || l < c.n_layers - 1;  // whether anything reads this layer's output
        attn_.clear();
        for (const geom::StepPiece& p : chunk.pieces) {
            const SeqRun& s = seqs[size_t(p.seq)];
            if (!by_rows) {
                const int n0 = s.suffix->n_tokens();  // positions the suffix held before this step
                qa.first_pos = s.prefix_tokens + n0 + p.seq_row;
                qa.kv_k = s.suffix->part(l, 0);
                qa.kv_v = s.suffix->part(l, 1);
                qa.kv_cap = s.suffix->capacity_tokens();
                qa.first_slot = n0 + p.seq_row;
                kern::qk_rope_store(qa, st);
            }
            if (rest && replay_positions == 0) attn_.push_back(piece_attention(s, p, l));
        }
        if (!rest) break;  // the last layer of a chunk without logits: its K/V are stored, nothing reads the rest
        if (replay_positions > 0)  // this layer's batch as the table on the device will hold it when the graph runs
            kern::attention_mma_batch_table(step_tables_[size_t(l)], attn_tables_.as<const kern::AttnBatch>(), l,
                                            replay_positions, partial_.as<float>(), partial_.bytes() / 4, st);
        else
            kern::attention_batch(attn_, partial_.as<float>(), partial_.bytes() / 4, st);

        // o_proj and the residual (fused: attention wrote its output as bf16 into xn already)
        if (!options_.fused_kernels) kern::f32_to_bf16(att_.as<const float>(), xn, int64_t(n) * qd, st);
        plan_o_->run(ctx_, xn, bf(L.wo), proj_.as<float>(), n);
        if (c.o_bias) kern::add_bias_rows(proj_.as<float>(), f32(L.bo), n, dim, st);
        add_residual(n, f32(L.ffn_norm));

        // MLP: down(bf16(silu(gate(xn)) * up(xn))), then the residual (and, fused, the next
        // layer's attention norm; the last layer's output goes to the final norm of the chosen rows)
        if (options_.fused_kernels && plan_up_->own() && n <= geom::kGemmRowsMax) {
            // decode and short chunks: gate, up and SwiGLU in one launch of the rows kernel's form
            gemm_mma_swiglu(xn, bf(L.w_gate), bf(L.w_up), act, n, ffn, dim, ctx_.info().sm_count, st);
        } else {
            const Projection gate_up[] = {{plan_up_.get(), bf(L.w_gate), gate_.as<float>()},
                                          {plan_up_.get(), bf(L.w_up), up_.as<float>()}};
            run_projections(ctx_, xn, n, gate_up);
            kern::swiglu(gate_.as<const float>(), up_.as<const float>(), act, int64_t(n) * ffn, st);
        }
        plan_down_->run(ctx_, act, bf(L.w_down), proj_.as<float>(), n);
        const bool norm_next = options_.fused_kernels && l + 1 < c.n_layers;
        add_residual(n, norm_next ? f32(layers_[size_t(l + 1)].attn_norm) : nullptr);
    }
}

void CudaBackend::add_residual(int n, const float* then_norm) {
    const int dim = cfg_.dim;
    const float eps = float(cfg_.rms_norm_eps);
    const cudaStream_t st = ctx_.stream();
    if (then_norm != nullptr && options_.fused_kernels) {
        kern::add_rmsnorm(x_.as<float>(), proj_.as<const float>(), then_norm, xn_.as<uint16_t>(), n, dim, eps, st);
        return;
    }
    kern::add_inplace(x_.as<float>(), proj_.as<const float>(), int64_t(n) * dim, st);
    if (then_norm != nullptr)
        kern::rmsnorm(x_.as<float>(), nullptr, then_norm, xn_.as<uint16_t>(), true, n, dim, eps, st);
}

}  // namespace

size_t cuda_required_bytes(const ModelConfig& config, const CudaBackendOptions& options) {
    const int positions = geom::rope_table_positions(std::min(std::max(config.max_position_embeddings, 1), 8192));
    const size_t rope = 2 * size_t(positions) * size_t(config.head_dim / 2) * 4;
    size_t bytes = geom::weight_bytes(config) +
                   geom::plan_buffers(config, options.max_batch_tokens, positions, options.mma_attention).total() +
                   rope + options.workspace_bytes;
    // Each weight and activation is its own cudaMalloc, which rounds up: 256 KiB allowed per buffer.
    const size_t n_buffers = size_t(config.n_layers) * 11 + 20;
    return bytes + n_buffers * (size_t(256) << 10);
}

std::unique_ptr<Backend> make_cuda_backend(const ModelWeights& weights, const CudaBackendOptions& options) {
    // before the device is touched, so that a wrong combination is named wherever it is made
    if (options.graph_replay && (!options.graphs || !options.mma_attention))
        throw std::runtime_error(
            "cuda backend: graph replay (CONTEXTCACHE_CUDA_GRAPHS=replay) replays the tensor-core attention's "
            "batch launch: it needs graphs on and CONTEXTCACHE_CUDA_ATTENTION=mma");
    return std::make_unique<CudaBackend>(weights, options);
}

}  // namespace cc::cuda
