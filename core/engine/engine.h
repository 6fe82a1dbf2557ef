// The engine (DESIGN §8): loads a model, compiles tool sets into the group cache, and answers
// queries in cached / full / compare mode with the timing split. One owner thread calls it (the
// app's worker, the CLI's main); cancel() may be called from any thread. With
// EngineOptions::parallel > 1 (the server), several threads may each run requests at once through
// the request-scoped calls (chat(), generate(), last_logits(), begin_request/end_request), their
// forward calls sharing steps (continuous batching, core/engine/step_scheduler.h); the calls on
// the current tool set (set_tools, select_tools, query) and load_model stay the owner's, with no
// request running.
#pragma once

#include "core/backend/backend.h"
#include "core/base/cancel_token.h"
#include "core/backend/registry.h"
#include "core/engine/conversation_cache.h"
#include "core/engine/miss_reason.h"
#include "core/engine/step_scheduler.h"
#include "core/engine/tool_choice.h"
#include "core/text/chat_format.h"
#include "core/store/group_store.h"
#include "core/model/model_spec.h"
#include "core/base/timings.h"
#include "core/text/tokenizer.h"
#include "core/text/tool_set.h"
#include "core/model/weights.h"

#include <atomic>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace cc {

struct EngineOptions {
    std::string model_spec = default_model_spec();      // builtin:NAME or an HF directory
    std::string backend = "auto";                        // auto | cpu | cuda
    int n_threads = 0;                                   // 0 = all cores
    KvDType kv_dtype = KvDType::f32;
    WeightDType weights = WeightDType::stored;           // --weights: stored | f32 | bf16 | q8 | bf16dot (CPU)
    std::optional<std::filesystem::path> tokenizer_path; // overrides the model's tokenizer
    std::string chat_format;                             // overrides the format chosen from config.json
    std::filesystem::path cache_dir;                     // fingerprints.json (and later the group files);
                                                         // empty = no memo (every file hashed each load)
    GroupStoreOptions cache;                             // cache.dir empty = memory tier only
    // Memory for conversation states (chat(): the KV of recent turns); 0 = a quarter of the
    // cache's host budget.
    size_t conversation_budget_bytes = 0;
    // The backends this program offers (app/ wires them; core/backend/registry.h); null = the
    // CPU backend alone.
    std::shared_ptr<const BackendRegistry> backends;
    // Requests that may run at once (the server's --parallel): above 1 the forward calls of every
    // request in flight are batched into shared steps (StepScheduler) of at most step_tokens rows.
    int parallel = 1;
    int step_tokens = 256;
    // A request's first-token prefill of at most this many rows runs ahead of the decoding
    // requests in a step of its own (StepSchedulerOptions::first_token_rows; 0: off).
    int first_token_rows = 64;
    // At most this many rows of such prefills per step when many arrive together
    // (StepSchedulerOptions::first_token_step_rows; 0: no cap).
    int first_token_step_rows = 128;
    // Host memory made resident for KV blocks when the model loads (the CPU backend's warm KV
    // pool, CpuBackendOptions::kv_warm_bytes; the server's --kv-warm-mb); 0 = none.
    size_t kv_warm_bytes = 0;
    // How that pool fills (CpuBackendOptions::kv_warm_fill; the server's --kv-warm-fill).
    WarmFill kv_warm_fill = WarmFill::on_demand;
};

struct ModelInfo {
    std::string spec;
    bool builtin = false;
    bool synthetic_weights = false;   // built-in models: timings and exactness real, text not
    std::string family;
    std::string fingerprint;
    std::string chat_format;          // "" when the model has no tokenizer (weights-only directory)
    std::string backend;              // "cpu" / "cuda"
    std::string backend_reason;       // why auto picked it, e.g. "no CUDA device: ..."
    std::string numerics;             // backend + KV dtype, e.g. "cpu/f32"
    std::string device;               // what runs it: the CPU's model name, or the GPU's name
    int n_threads = 0;
    ModelConfig config;
    uint64_t n_params = 0;
    size_t weight_bytes = 0;
    std::string weights = "stored";   // --weights: stored | f32 | bf16 | q8 | bf16dot
    size_t matrix_bytes = 0;          // weight matrices as the backend holds them (0: not reported)
    size_t kv_bytes_per_token = 0;
    double load_ms = 0;
    bool has_tokenizer = false;
};

struct CompileResult {
    std::string group_key;
    std::string tools_hash;
    size_t n_tools = 0;
    std::vector<std::string> tool_names;
    size_t prefix_tokens = 0;
    bool cache_hit = false;
    Tier tier = Tier::miss;           // where the link found the group (miss: compiled)
    size_t reused_tokens = 0;         // prefix tokens taken from another stored group (longest-prefix reuse)
    double compile_ms = 0;            // forward pass over the prefix (0 on a hit)
    double persist_ms = 0;            // writing the group file (in the background; see Engine::wait_for_persist)
    bool persisted = false;           // the group file was written
    std::string persist_error;        // a failed write is a warning: the answer is still given
    size_t kv_bytes = 0;
    std::string problem;              // a stored entry that was refused, if any
    // On a miss (Tier::miss): the nearest stored groups and what differs; null on a hit and
    // before any link (select_tools).
    std::optional<MissReason> miss_reason;
    // reused_tokens as a percentage of prefix_tokens (what a tool-set edit kept of a stored group).
    double reused_percent() const { return prefix_tokens ? 100.0 * double(reused_tokens) / double(prefix_tokens) : 0.0; }
};

// cached: link the stored prefix, prefill the query; full: prefill the whole prompt; compare: both,
// and whether they are identical. (Experiments such as per-tool NoPE live in core/research, on
// this engine's public API.)
enum class QueryMode { cached, full, compare };
const char* query_mode_name(QueryMode m);
QueryMode parse_query_mode(const std::string& name);  // throws naming the value

struct QueryOptions {
    QueryMode mode = QueryMode::cached;
    int max_new_tokens = 64;
    float temperature = 0.0f;         // 0 = greedy
    float top_p = 1.0f;
    uint64_t seed = 0;
    bool ignore_eos = false;          // do not stop on the chat format's stop tokens
    bool keep_logits = false;         // keep each step's logits in QueryResult::step_logits (compare mode always does)
    // Stop strings (the OpenAI `stop`): generation ends when the decoded text contains one; the
    // text is cut before it (the tokens keep the ids generated).
    std::vector<std::string> stop;
    // required / a named function: the reply is made to open with a call to an offered tool
    // (ToolCallConstraint: the call's opening markup and name are fed or masked, the arguments
    // are the model's unless the call is strict). auto / none: no constraint, except that strict
    // calls (tool_choice.strict, or tools marked "strict": true) mask the name and arguments of
    // any call the model opens under auto (json_schema_constraint.h). query() and chat() throw
    // std::invalid_argument when the choice needs tools and there are none, names a tool that is
    // not offered, the chat format has no call markup, or a strict tool's schema uses a keyword
    // the matcher does not support (naming the tool and the keyword).
    ToolChoice tool_choice;
};

enum class StopReason { stop_token, stop_string, max_new_tokens, cancelled };
const char* stop_reason_name(StopReason r);  // "stop_token" | "stop_string" | "max_new_tokens" | "cancelled"

struct TokenEvent {
    int index = 0;                    // 0 = the first generated token
    token_id id = 0;
    std::string text;                 // complete UTF-8 that this token completed (may be empty)
};

struct QueryResult {
    std::string mode;
    std::string text;
    std::vector<token_id> tokens;     // generated ids
    std::optional<ToolCall> tool_call;
    bool cache_hit = false;
    Tier tier = Tier::miss;
    std::string group_key;
    size_t prefix_tokens = 0;
    size_t suffix_tokens = 0;
    size_t generated_tokens = 0;      // every token of the reply, forced ones included
    size_t forced_tokens = 0;         // of those, fed by the tool_choice constraint without sampling
    size_t reused_tokens = 0;
    StopReason stop_reason = StopReason::max_new_tokens;
    std::string problem;              // a stored group that was refused (damaged, foreign) and recompiled
    std::optional<MissReason> miss_reason;  // the group's link missed: why (null on a hit, and in full mode)
    // Where the prompt's tokens came from: prompt_tokens = group_reused_tokens (linked from the
    // group, `tier` says from where) + conversation_reused_tokens (a stored conversation state) +
    // prefilled_tokens (computed by this request). Full mode: everything is prefilled.
    size_t prompt_tokens = 0;
    size_t group_reused_tokens = 0;
    size_t conversation_reused_tokens = 0;
    size_t prefilled_tokens = 0;
    Tier conversation_tier = Tier::miss;  // memory when a stored conversation state was reused
    // The prompt position at which the best stored conversation state stopped matching the
    // request's ids (a history edit, a template that re-renders an earlier turn, or generated ids
    // that re-tokenise differently at a seam); reuse ended there. Null when nothing diverged.
    std::optional<size_t> diverged_at;
    std::optional<ParsedReply> reply;  // chat: the reply as the chat format reads it (content, tool calls)
    Timings timings;
    // The shared steps that ran this request's rows (all zero when the engine does not batch).
    StepStats batch;
    std::vector<std::vector<float>> step_logits;  // logits before each generated token (compare, keep_logits)
    // compare mode: the full-prefill run and the comparison
    std::shared_ptr<QueryResult> full;
    std::optional<bool> identical;
    double max_abs_logit_diff = 0;
    std::optional<size_t> first_difference;  // index of the first generated position that differs
};

// One request of a conversation: the group (tools + system prompt) and the messages after it.
struct ChatRequest {
    ToolSet tools;
    std::string system_prompt;
    std::vector<ChatMessage> messages;
    RenderOptions render;
};

// The memory tier of conversation states (the KV of a rendered conversation and its reply after
// the group prefix), kept for exact reuse by the next turn.
struct ConversationCacheStats {
    size_t entries = 0;
    size_t bytes = 0;
    size_t budget_bytes = 0;
    size_t lookups = 0;
    size_t hits = 0;            // lookups that reused at least one conversation token
    size_t evictions = 0;
};

// What set_tools would do for a tool set, without computing anything (the app shows it live).
struct ToolsPreview {
    std::string tools_hash;
    std::string group_key;
    size_t n_tools = 0;
    size_t prefix_tokens = 0;
    size_t kv_bytes = 0;              // canonical KV bytes of the prefix
    Tier tier = Tier::miss;           // the tier holding the group (miss: not cached)
    std::optional<MissReason> miss_reason;  // when not cached and asked for (preview_tools(..., true))
};

// Reported during long steps (a compile's prefix forward, chunk by chunk).
struct EngineProgress {
    std::string stage;                // "compile"
    size_t done = 0;                  // tokens
    size_t total = 0;
};

struct GenerateResult {
    std::vector<token_id> ids;        // generated only
    std::string text;                 // "" without a tokenizer
    Timings timings;
};

// The backend numerics id load_model() will report for these options ("cpu/avx512/f32", ...),
// and so the one that enters the group_key. Throws for an unknown or unavailable backend.
std::string planned_numerics(const EngineOptions& options);

// The group_key of a tool set for a model, as Engine::set_tools computes it.
std::string engine_group_key(const std::string& model_fingerprint, const std::string& chat_format,
                             const std::string& numerics, const ToolSet& tools, const std::string& system_prompt);

class Engine {
public:
    explicit Engine(EngineOptions options);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Loads (or generates) the weights and picks the backend. Throws naming the file and problem.
    // cancel() stops the generation of built-in weights (throws Cancelled); loading a checkpoint
    // maps its files and is not interrupted.
    const ModelInfo& load_model();
    bool loaded() const { return backend_ != nullptr; }
    const ModelInfo& model_info() const { return info_; }

    // Renders and tokenizes the prefix, then links it from the cache or computes it (a miss).
    CompileResult set_tools(const ToolSet& tools, const std::string& system_prompt);
    // Makes the tool set current without linking it: the next cached query links it and reports
    // where *its* prefix came from (a disk load or a compile then lies inside that query's TTFT),
    // and current_tools() shows that link afterwards. What a one-shot request (the CLI's query)
    // uses; set_tools is the explicit "compile now".
    ToolsPreview select_tools(const ToolSet& tools, const std::string& system_prompt);
    const std::optional<CompileResult>& current_tools() const { return compile_; }
    // Keys, prefix length and cache tier of a tool set; renders and tokenizes only. With
    // `explain`, a set that is not cached also gets its miss_reason (the stored groups' headers
    // are read: a few ms per hundred groups).
    ToolsPreview preview_tools(const ToolSet& tools, const std::string& system_prompt, bool explain = false);
    // Why this tool set would miss: null when its group is stored (any tier).
    std::optional<MissReason> explain_miss(const ToolSet& tools, const std::string& system_prompt);
    // Called on the engine's thread during long steps; may call cancel().
    void set_progress_handler(std::function<void(const EngineProgress&)> handler) { progress_ = std::move(handler); }

    QueryResult query(const std::string& text, const QueryOptions& options,
                      const std::function<void(const TokenEvent&)>& on_token = {});

    // A turn of a conversation: renders the whole conversation with the chat format, links (or
    // compiles) the group prefix of request.tools + request.system_prompt, reuses the longest
    // stored conversation state whose token ids begin the rendered prompt, prefills the rest and
    // generates the reply; then keeps the new state (prompt + reply ids) for the next turn.
    // cached: as described; full: prefills the whole rendered conversation from nothing; compare:
    // both, as query() does. Does not change the current tool set of set_tools()/query().
    QueryResult chat(const ChatRequest& request, const QueryOptions& options,
                     const std::function<void(const TokenEvent&)>& on_token = {});
    // The rendered ids of a conversation (what chat() prefills in full mode).
    std::vector<token_id> conversation_ids(const ChatRequest& request);
    ConversationCacheStats conversation_stats() const;
    void clear_conversations();
    const ChatFormat& chat_format() const;

    // A prefill of more rows than this runs as consecutive forward calls of at most this many (a
    // compile always; a request's prompt when no scheduler cuts it into steps and the backend
    // prefers_chunked_prefill()), so a forward pass's activations stay bounded whatever the
    // prompt's length. The bits do not depend on it.
    static constexpr size_t kForwardChunkTokens = 512;

    // Raw language model, no chat format: greedy continuation of `prompt_ids`.
    GenerateResult generate(const std::vector<token_id>& prompt_ids, int max_new_tokens, bool ignore_eos);
    std::vector<float> last_logits(const std::vector<token_id>& prompt_ids);
    std::vector<token_id> encode_prompt(const std::string& text);  // BOS per the tokenizer's post-processor
    // The ids that end a query: the chat format's, then config.json's and generation_config.json's
    // eos ids (after load_model()).
    const std::vector<token_id>& stop_ids() const { return stop_ids_; }

    // ---- cancelling ------------------------------------------------------------------------------
    // cancel() (any thread) cancels the current request at its next token, layer or chunk. A
    // request is, by default, one call: each call starts with the engine's flag cleared, so a
    // cancel() that comes between two calls stops neither. An owner that must not lose such a
    // cancel (the server: a client hangs up just before its job starts) opens a request with its
    // own token: every call until end_request() runs under `token`, which whoever holds a copy
    // may cancel before or during those calls; the next request has another token, so the
    // cancel never reaches it. A request belongs to the thread that opened it (begin/end on that
    // thread; they nest nothing); with parallel > 1 each request thread opens its own, and
    // cancel() then cancels every open request.
    void begin_request(CancelToken token);
    void end_request();
    void cancel();
    // The flag of the current request, for long steps an experiment runs on the backend itself;
    // valid until end_request() (or for the engine's life outside a request).
    const std::atomic<bool>& cancel_flag() const { return *active_flag(); }

    // ---- for experiments built on the engine (core/research) -----------------------------------
    // The current tool set's rendered prefix; valid until the next set_tools() or load_model().
    // Throws std::logic_error before set_tools().
    struct PrefixRef {
        const ToolSet& tools;
        const std::string& system_prompt;
        std::span<const token_id> ids;
        const std::string& text;
        const CompileResult& compile;
    };
    PrefixRef current_prefix() const;
    // The query's rendered suffix ids after the current prefix (ids(prefix) + these == ids(full prompt)).
    std::vector<token_id> query_suffix_ids(const std::string& text);
    // Prefills `ids` against `view`, then samples and decodes exactly as query() does (sampling,
    // stop tokens, streaming, keep_logits); fills tokens, text, tool_call, stop_reason and the
    // prefill/ttft/decode/total timings from `submit`. `view.suffix` needs room for ids and
    // max_new_tokens more.
    QueryResult continue_from(std::span<const token_id> ids, const KvView& view, const QueryOptions& options,
                              const std::function<void(const TokenEvent&)>& on_token, const Stopwatch& submit);
    // Passes `p` to the progress handler, if any.
    void report_progress(const EngineProgress& p) {
        if (progress_) progress_(p);
    }

    GroupStore& cache() { return *cache_; }
    // The step scheduler's totals since load (zeros when the engine does not batch); any thread.
    SchedulerTotals step_totals() const { return scheduler_ ? scheduler_->totals() : SchedulerTotals{}; }
    // The backend's warm KV pool (EngineOptions::kv_warm_bytes): zeros without one or a model.
    WarmPages::Stats kv_pool_stats() const { return backend_ ? backend_->kv_pool_stats() : WarmPages::Stats{}; }
    // Waits for the background writes of newly compiled groups; returns their results (and fills
    // persist_ms / persisted / persist_error of current_tools()).
    std::vector<PersistResult> wait_for_persist();
    // Problems met by the cache (damaged files quarantined, index rebuilt, failed writes).
    std::vector<std::string> cache_warnings();
    const Tokenizer& tokenizer() const;
    Backend& backend();

private:
    // load_model's steps, in order; each fills its part of `info`.
    void load_tokenizer(ModelInfo& info);
    std::unique_ptr<ModelWeights> load_weights_for(ModelInfo& info);  // generates (built-in) or maps; fingerprint
    void choose_chat_format(ModelInfo& info);  // the format and its stop ids (+ the config's eos ids)
    void make_backend(ModelInfo& info);        // plans over the registry and builds the backend over weights_
    void require_chat_model();  // a loaded model with a tokenizer and a chat format, else throws
    // The data path of a prefix: link it from the cache's tiers, or compile it (a miss), keep it
    // in memory and persist it in the background. Fills result (hit, tier, compile_ms, ...) and,
    // for a query, the link timings.
    std::shared_ptr<const Group> link_or_compile(const ToolSet& tools, const std::string& system_prompt,
                                                 const RenderedPrefix& prefix, CompileResult& result, Timings* timings);
    // The record of the group that serves this prefix: what a stored group must match.
    GroupMeta expected_group(const std::string& group_key, const ToolSet& tools, const std::string& system_prompt,
                             const std::vector<token_id>& prefix_ids) const;
    // Computes the prefix's K/V (reusing the longest stored prefix it shares): the group `meta` describes.
    std::shared_ptr<const Group> compile_prefix(GroupMeta meta, const ToolSet& tools, const RenderedPrefix& prefix,
                                                CompileResult& result);
    // Writes the group file in the background (persistent caches only); see wait_for_persist.
    void persist_async(const std::shared_ptr<const Group>& group);
    void reap_persists_locked();   // collects finished writes (persist_mutex_ held)
    PersistResult collect_persist_locked(const std::string& key, std::future<PersistResult>& done);
    // The one place the engine renders a tool set's prefix (the current set's, a conversation's
    // group, a preview).
    RenderedPrefix render_prefix(const ToolSet& tools, const std::string& system_prompt) const;
    // Makes `tools` + `system_prompt` the current tool set, its prefix rendered (set_tools, select_tools).
    void render_current(const ToolSet& tools, const std::string& system_prompt);
    // The current tool set's keys, names and prefix length, before any link.
    CompileResult describe_current() const;
    QueryResult run_chat(const ChatRequest& request, const QueryOptions& options,
                         const std::function<void(const TokenEvent&)>& on_token, bool cached);
    QueryResult run_cached(const std::string& text, const QueryOptions& options,
                           const std::function<void(const TokenEvent&)>& on_token);
    QueryResult run_full(const std::string& text, const QueryOptions& options,
                         const std::function<void(const TokenEvent&)>& on_token);
    // Forwards the prompt ids against `view`, then samples and decodes; fills timings.
    void prefill_and_decode(std::span<const token_id> ids, const KvView& view, const QueryOptions& options,
                            const std::function<void(const TokenEvent&)>& on_token, QueryResult& result,
                            const Stopwatch& submit, ToolCallConstraint* constraint);
    // Samples and decodes after the prompt's last logits until a stop id (unless ignore_eos),
    // max_new_tokens or a cancel; fills tokens, step_logits, stop_reason, generated_tokens and the
    // ttft/decode timings. Streams token text when the model has a tokenizer.
    void decode_loop(std::vector<float> first_logits, const KvView& view, const QueryOptions& options,
                     std::span<const token_id> stop_ids, const std::function<void(const TokenEvent&)>& on_token,
                     QueryResult& result, const Stopwatch& submit_clock, ToolCallConstraint* constraint = nullptr);
    // Runs `ids` through the model; leaves the last row's logits (the next token's) in `logits`.
    // With keep_all, the rows before it are appended to `kept`.
    void forward_rows(std::span<const token_id> ids, const KvView& view, bool keep_all,
                      std::vector<std::vector<float>>& kept, std::vector<float>& logits);
    // Every forward call of a request goes through here: to the backend, or into a shared step
    // when the engine batches (parallel > 1), under the calling thread's cancel flag. The logits
    // go to `logits`, resized to logit_rows.size() x vocab: the decode loop passes the same vector
    // every step, so its storage is reused rather than faulted in fresh each token. `kind` tells
    // the scheduler which call gives the request its first token (it may run ahead of decode rows).
    // The scheduler cuts long calls into steps of step_tokens rows; without one, a call of more
    // than kForwardChunkTokens rows runs in chunks of that many (bounded activations). With
    // `argmax` (one id a logit row), the backend picks each row's greedy token instead and
    // `logits` is left empty (SequenceRows::argmax: the GPU brings back the tokens only).
    void run_forward(std::span<const token_id> ids, const KvView& view, std::span<const int> logit_rows,
                     std::vector<float>& logits, CallKind kind = CallKind::later, std::span<token_id> argmax = {});
    std::vector<float> run_forward(std::span<const token_id> ids, const KvView& view, std::span<const int> logit_rows,
                                   CallKind kind = CallKind::later);
    // The constraint options.tool_choice asks for over `tools` (null for auto/none); throws
    // std::invalid_argument naming what is wrong (no tools, a name not offered, no call markup).
    std::unique_ptr<ToolCallConstraint> call_constraint(const ToolSet& tools, const ToolChoice& choice);
    // Each id's decoded text (special tokens ""), built on first use for the name mask.
    const std::vector<std::string>& token_texts();
    // A call starts: outside a request, the engine's own flag is cleared (see begin_request).
    void start_call();
    const std::atomic<bool>* active_flag() const;
    std::string group_key_for(const ToolSet& tools, const std::string& system_prompt) const;

    EngineOptions options_;
    ModelInfo info_;
    ModelSource source_;
    std::optional<Tokenizer> tokenizer_;
    std::unique_ptr<ChatFormat> format_;
    std::unique_ptr<ModelWeights> weights_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<GroupStore> cache_;
    std::unique_ptr<StepScheduler> scheduler_;  // parallel > 1: the shared steps (destroyed before backend_)
    mutable std::mutex persist_mutex_;          // pending_persist_ and warnings_ (requests persist from their threads)
    std::vector<std::pair<std::string, std::future<PersistResult>>> pending_persist_;
    std::vector<PersistResult> reaped_persists_;   // finished writes collected early (reap_persists_locked)
    std::vector<std::string> warnings_;
    std::atomic<bool> cancel_{false};      // the flag of a call outside a request
    // The open requests' tokens (begin_request), one per thread that runs one.
    std::map<std::thread::id, CancelToken> requests_;
    mutable std::mutex request_mutex_;     // guards requests_ against cancel() from other threads
    // Groups being compiled now, by key: a request that misses a group another request is
    // compiling waits for that compile instead of doing it again.
    std::map<std::string, std::shared_future<void>> compiling_;
    std::mutex compiling_mutex_;
    std::mutex texts_mutex_;               // token_texts_ is built once, by the first request that needs it
    std::vector<std::string> token_texts_;
    SchemaMaskerCache strict_maskers_;     // strict calls' argument masks, per schema (json_schema_constraint.h)
    std::function<void(const EngineProgress&)> progress_;

    // the current tool set
    std::optional<ToolSet> tools_;
    std::string system_prompt_;
    RenderedPrefix prefix_;
    std::optional<CompileResult> compile_;
    bool linked_ = false;  // compile_ describes a link (set_tools, or a query after select_tools)
    std::vector<token_id> stop_ids_;
    std::unique_ptr<ConversationCache> conversations_;
};

}  // namespace cc
