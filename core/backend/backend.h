// The backend seam (DESIGN §5, §6): chosen once at start, operations on whole sequences.
//
// Exactness rests on one property every backend must keep: the result for a token row depends
// only on that row's inputs and on the K/V it attends to — never on how many rows are in the
// batch, how they are split across threads, or whether the attended K/V sits in the shared
// prefix block or the private suffix block. Then a cached query (prefix K/V from compile + suffix
// prefill) computes exactly the bits a full prefill computes for the same rows.
#pragma once

#include "core/base/cancelled.h"
#include "core/base/warm_pages.h"
#include "core/model/model_config.h"
#include "core/text/tokenizer.h"

#include <atomic>
#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace cc {

enum class KvDType { f32, bf16 };
const char* kv_dtype_name(KvDType t);  // "f32", "bf16"
KvDType parse_kv_dtype(const std::string& name);  // throws std::invalid_argument naming the value

// How the backend holds weight matrices in memory (`--weights`). `stored` keeps the checkpoint's
// own width (BF16 stays BF16, F32 stays F32, F16 is widened to F32, all exact); the others convert
// once at load: `bf16` rounds F32 to nearest even, `q8` quantises to int8 in blocks of 32 along the
// input dimension with one F16 scale per block (the Q8_0 shape). A conversion changes the model's
// values, so it is part of the backend's numerics id: a cache made with one never links with another.
// `bf16dot` (CPU with AVX-512 BF16 only) holds BF16 weights and also rounds each matrix product's
// activations to BF16, multiplying pairs with VDPBF16PS into F32 sums: twice the arithmetic rate of
// F32 FMA for prefill, the numerics llama.cpp uses for BF16 models; a numerics id of its own.
enum class WeightDType { stored, f32, bf16, q8, bf16dot };
const char* weight_dtype_name(WeightDType t);  // "stored", "f32", "bf16", "q8", "bf16dot"
WeightDType parse_weight_dtype(const std::string& name);  // throws std::invalid_argument naming the value

// K and V of consecutive positions, for every layer; memory owned by the backend.
class KvBlock {
public:
    virtual ~KvBlock() = default;
    virtual int capacity_tokens() const = 0;
    // Positions the block's memory holds now: the capacity, or less for a backend whose storage
    // grows as positions are written (the CPU backend's); what a cache of blocks should count.
    virtual int storage_tokens() const { return capacity_tokens(); }
    virtual int n_tokens() const = 0;
    // The caller will write positions [0, n_tokens) (n_tokens <= capacity_tokens()), e.g. a prompt
    // prefilled in chunks: a backend whose storage grows allocates them now, in one piece
    // (default: nothing to do).
    virtual void reserve(int n_tokens) { (void)n_tokens; }
    virtual void truncate(int n_tokens) = 0;  // forget positions >= n_tokens (e.g. after a compare run)
};

// What a forward pass attends to: positions [0, prefix_tokens) from `prefix` (shared, read-only,
// possibly used by many queries at once), then the positions already in `suffix`. The new tokens
// get positions prefix_tokens + suffix->n_tokens() onwards and their K/V are appended to `suffix`.
struct KvView {
    const KvBlock* prefix = nullptr;
    int prefix_tokens = 0;  // <= prefix->n_tokens(); a shorter view reuses only the first tokens
    KvBlock* suffix = nullptr;
};

// The checks every backend's forward() makes before it touches any state, in the same words for
// all: prefix_tokens within `prefix` (the backend's own block behind kv.prefix, null when
// kv.prefix_tokens is 0), prefix and suffix distinct, token ids within [0, vocab_size), logit rows
// within the batch, and room in `suffix` for the new positions. Throws std::runtime_error.
void check_forward_request(std::span<const token_id> tokens, const KvView& kv, const KvBlock* prefix,
                           const KvBlock& suffix, std::span<const int> logit_rows, int vocab_size);

// One sequence's rows in a multi-sequence step (Backend::forward_batch): its new tokens, its own
// KV view (a shared group prefix, possibly the same block as other sequences', plus its private
// suffix) and the rows whose logits it wants, as forward() takes them, and where those logits go:
// logit_rows.size() x vocab_size floats, row after row, owned by the caller. A caller that keeps
// this storage from step to step (the scheduler, the engine's decode loop) lets a step run without
// fresh memory: a step's logits are 0.6 MB a sequence on a 152k vocabulary, and memory the
// process has not touched yet costs a page fault per 4 KB.
//
// Greedy decoding need not see the logits: where `argmax` is given (logit_rows.size() ids), each
// logit row's greedy token (km::argmax_row's rule: the first largest value, NaN never) goes there,
// and `logits` may then be empty, so that the backend need not bring them back at all (the CUDA
// backend picks the tokens on the device: 4 bytes a row come back instead of 0.6 MB).
struct SequenceRows {
    std::span<const token_id> tokens;
    KvView kv;
    std::span<const int> logit_rows;
    std::span<float> logits;
    std::span<token_id> argmax = {};
};

// forward_batch's checks across sequences (each sequence's own are check_forward_request's): at
// least one sequence, every suffix block present, no block written by one sequence (its suffix)
// read or written by another, and every sequence's logits storage the size its rows need (or none,
// where it asks for its greedy tokens), its argmax storage none or one id a row. Throws
// std::runtime_error naming the sequences.
void check_batch_request(std::span<const SequenceRows> seqs, int vocab_size);

// out[j] = the greedy token of logit row j (km::argmax_row) of `logits` (out.size() rows of
// vocab_size floats): what a backend that computes the logits on the host writes to
// SequenceRows::argmax.
void argmax_rows(const float* logits, int vocab_size, std::span<token_id> out);

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;          // "cpu" or "cuda"
    virtual std::string numerics_id() const = 0;   // e.g. "cpu/f32": enters the group_key
    virtual const ModelConfig& config() const = 0;
    virtual KvDType kv_dtype() const = 0;

    virtual std::unique_ptr<KvBlock> allocate_kv(int capacity_tokens) = 0;

    // Runs `tokens` through the model against `kv` and returns the logits of the rows listed in
    // `logit_rows` (indices into `tokens`), row after row, each config().vocab_size floats.
    // `cancel` (optional) is checked between layers; when set the call throws Cancelled and the
    // suffix block is left as it was before the call.
    virtual std::vector<float> forward(std::span<const token_id> tokens, const KvView& kv,
                                       std::span<const int> logit_rows,
                                       const std::atomic<bool>* cancel = nullptr) = 0;

    // Several sequences in one step (DESIGN §8 Batching): sequence i's tokens run against its own
    // view, as forward(seqs[i].tokens, seqs[i].kv, seqs[i].logit_rows) would run them alone, and
    // its logits come back as element i. A backend that batches (the CPU backend) stacks every
    // sequence's rows into each matrix product, so the weights are streamed once per step for all
    // rows; because a row's result depends only on its own inputs and the K/V it attends to (the
    // contract above), every sequence gets exactly the bits it would get alone. Sequence i's
    // logits are written to seqs[i].logits. The default runs the sequences one after another
    // through forward() (the CUDA backend, unless CONTEXTCACHE_CUDA_BATCH=stacked turns on its own:
    // docs/cuda.md). On an error or a cancel no suffix block changes (what was written to the
    // logits storage is then unspecified).
    virtual void forward_batch(std::span<const SequenceRows> seqs, const std::atomic<bool>* cancel = nullptr);

    // The canonical layout the group store writes: per layer, K then V, each
    // [n_kv_heads, n_tokens, head_dim] in kv_dtype(). `out` must be kv_bytes(n_tokens) long.
    virtual void export_kv(const KvBlock& block, int n_tokens, std::span<std::byte> out) const = 0;
    // The block gets storage for positions [0, reserve_tokens) at once (n_tokens <= reserve_tokens
    // <= capacity_tokens; what KvBlock::reserve(reserve_tokens) would give): a caller that goes on
    // to prefill more positions names them here, so the imported ones are not copied again when
    // the block grows. A backend that allocates the whole capacity ignores it.
    virtual std::unique_ptr<KvBlock> import_kv(std::span<const std::byte> data, int n_tokens, int capacity_tokens,
                                               int reserve_tokens) = 0;
    // A new block holding `src`'s positions [0, n_tokens) (the same values), with capacity_tokens and
    // reserve_tokens as import_kv takes them: a conversation turn goes on from a stored state, a
    // compile from a donor group's head. The default exports into host memory and imports that; the
    // CPU backend copies block to block, or from a linked group's image in place (no staging image,
    // half the bytes moved).
    virtual std::unique_ptr<KvBlock> copy_kv(const KvBlock& src, int n_tokens, int capacity_tokens, int reserve_tokens);
    // One layer's slice of export_kv's image (kv_bytes(n_tokens) / n_layers bytes: its K then V),
    // for a backend that can export a layer alone (exports_layers()); the group store then writes a
    // group file a layer at a time and never holds a second copy of the whole KV. The default
    // throws (callers ask exports_layers() first).
    virtual bool exports_layers() const { return false; }
    virtual void export_kv_layer(const KvBlock& block, int n_tokens, int layer, std::span<std::byte> out) const;

    // Links a canonical KV image (as export_kv writes it) for use as a read-only prefix block.
    // A backend that can attend to the canonical layout where it lies reads it in place: the block
    // holds `keep_alive` (e.g. the group file's mapping), so the bytes outlive every query using
    // the block, and it is never written (forward refuses it as a suffix block). The default
    // copies it with import_kv and drops `keep_alive` (a device backend uploads anyway).
    virtual std::unique_ptr<KvBlock> link_kv(std::span<const std::byte> data, int n_tokens,
                                             std::shared_ptr<const void> keep_alive);
    // Whether link_kv reads the bytes in place (no copy; its cost is then ~0).
    virtual bool links_in_place() const { return false; }

    // Whether the engine runs a long prompt as consecutive calls of at most
    // Engine::kForwardChunkTokens rows when no scheduler cuts it into steps, so that a forward
    // pass's activations stay bounded (the bits are the same either way: the contract above). The
    // CPU backend does (measured: docs/benchmarks.md); the CUDA backend keeps one call until a device
    // run measures what chunks cost there.
    virtual bool prefers_chunked_prefill() const { return false; }

    // Whether KV blocks live in device memory (the group store then keeps them in its GPU tier and
    // demotes to host memory as canonical bytes).
    virtual bool kv_on_device() const { return false; }

    size_t kv_bytes(int n_tokens) const;  // canonical bytes for n_tokens positions

    // Bytes of weight matrices the backend holds in its compute format (what one decode step
    // streams: every matrix once, lm_head included); 0 when the backend does not say.
    virtual size_t matrix_bytes() const { return 0; }

    // The counters of the host memory kept warm for KV blocks (BackendOptions::kv_warm_bytes);
    // all zero for a backend without such a pool.
    virtual WarmPages::Stats kv_pool_stats() const { return {}; }

protected:
    // The room import_kv and copy_kv give a block: throws, naming `caller`, unless
    // 0 <= n_tokens <= reserve_tokens <= capacity_tokens.
    static void check_kv_room(const char* caller, int n_tokens, int capacity_tokens, int reserve_tokens);
};

}  // namespace cc
