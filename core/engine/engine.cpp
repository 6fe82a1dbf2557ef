#include "core/engine/engine.h"

#include "core/engine/backend_select.h"
#include "core/engine/compare.h"
#include "core/engine/sampler.h"
#include "core/model/builtin_model.h"
#include "core/text/keys.h"
#include "core/base/sha256.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>

namespace cc {
namespace {

// compare mode: `cached` becomes the result, with the full-prefill run and how they compare.
QueryResult record_comparison(QueryResult full, QueryResult cached) {
    cached.mode = "compare";
    const StepDiff diff = compare_steps(full, cached);
    cached.identical = diff.identical;
    cached.max_abs_logit_diff = diff.max_abs_logit_diff;
    cached.first_difference = diff.first_difference;
    cached.full = std::make_shared<QueryResult>(std::move(full));
    return cached;
}

// The earliest occurrence of any of `stops` in `text`, or npos.
size_t first_stop(std::string_view text, const std::vector<std::string>& stops) {
    size_t at = std::string_view::npos;
    for (const auto& s : stops)
        if (!s.empty()) at = std::min(at, text.find(s));
    return at;
}

// The step statistics of the request running on this thread (null outside one): run_forward adds
// each call's steps to it.
thread_local StepStats* tl_request_steps = nullptr;

// Points tl_request_steps at one request's result for the scope of its run.
// With a scheduler, the request also counts as active for the steps' gather window.
class RequestSteps {
public:
    RequestSteps(StepStats& stats, StepScheduler* scheduler) : active_(scheduler), saved_(tl_request_steps) {
        tl_request_steps = &stats;
    }
    ~RequestSteps() { tl_request_steps = saved_; }
    RequestSteps(const RequestSteps&) = delete;
    RequestSteps& operator=(const RequestSteps&) = delete;

private:
    StepScheduler::Active active_;
    StepStats* saved_;
};

// A block for a prompt of `prompt` positions, prefilled now (in chunks, perhaps), and up to
// `reply` more: the prompt's storage is reserved in one piece, the reply's grows as it is decoded
// (a reply usually stops far short of max_new_tokens; KvBlock::reserve).
std::unique_ptr<KvBlock> allocate_for(Backend& backend, size_t prompt, int reply) {
    auto block = backend.allocate_kv(static_cast<int>(prompt) + reply);
    block->reserve(static_cast<int>(prompt));
    return block;
}

}  // namespace

const char* query_mode_name(QueryMode m) {
    switch (m) {
        case QueryMode::cached: return "cached";
        case QueryMode::full: return "full";
        case QueryMode::compare: return "compare";
    }
    return "?";
}

const char* stop_reason_name(StopReason r) {
    switch (r) {
        case StopReason::stop_token: return "stop_token";
        case StopReason::stop_string: return "stop_string";
        case StopReason::max_new_tokens: return "max_new_tokens";
        case StopReason::cancelled: return "cancelled";
    }
    return "?";
}

QueryMode parse_query_mode(const std::string& name) {
    if (name == "cached") return QueryMode::cached;
    if (name == "full") return QueryMode::full;
    if (name == "compare") return QueryMode::compare;
    throw std::invalid_argument("mode must be cached, full or compare, not \"" + name + "\"");
}

Engine::Engine(EngineOptions options) : options_(std::move(options)) {
    if (!options_.backends) options_.backends = cpu_only_backends();
    conversations_ = std::make_unique<ConversationCache>(
        options_.conversation_budget_bytes ? options_.conversation_budget_bytes : options_.cache.host_budget_bytes / 4);
    try {
        cache_ = std::make_unique<GroupStore>(options_.cache);
        for (auto& w : cache_->take_warnings()) warnings_.push_back(std::move(w));
    } catch (const std::exception& e) {
        // An unusable cache directory costs persistence, not answers.
        warnings_.push_back(std::string(e.what()) + "; the cache works in memory only");
        GroupStoreOptions memory_only = options_.cache;
        memory_only.dir.clear();
        cache_ = std::make_unique<GroupStore>(memory_only);
    }
}

Engine::~Engine() {
    try {
        wait_for_persist();
    } catch (...) {
    }
}

std::vector<PersistResult> Engine::wait_for_persist() {
    std::lock_guard lock(persist_mutex_);
    std::vector<PersistResult> results = std::move(reaped_persists_);
    reaped_persists_.clear();
    for (auto& [key, f] : pending_persist_) results.push_back(collect_persist_locked(key, f));
    pending_persist_.clear();
    return results;
}

// A finished write's result: a failure becomes a warning, the current tool set's fields are filled.
PersistResult Engine::collect_persist_locked(const std::string& key, std::future<PersistResult>& done) {
    PersistResult r = done.get();
    if (!r.ok) warnings_.push_back("group " + key.substr(0, 12) + ": not written to the cache: " + r.error);
    if (compile_ && compile_->group_key == key) {
        compile_->persist_ms = r.persist_ms;
        compile_->persisted = r.ok;
        compile_->persist_error = r.error;
    }
    return r;
}

std::vector<std::string> Engine::cache_warnings() {
    std::lock_guard lock(persist_mutex_);
    for (auto& w : cache_->take_warnings()) warnings_.push_back(std::move(w));
    return std::exchange(warnings_, {});
}

const Tokenizer& Engine::tokenizer() const {
    if (!tokenizer_) throw std::runtime_error(info_.spec + ": this model has no tokenizer (weights-only directory); use token ids");
    return *tokenizer_;
}

Backend& Engine::backend() {
    if (!backend_) throw std::logic_error("Engine: load_model() has not been called");
    return *backend_;
}

const ModelInfo& Engine::load_model() {
    Stopwatch clock;
    source_ = resolve_model(options_.model_spec);
    ModelInfo info;
    info.spec = options_.model_spec;
    info.builtin = source_.builtin;
    load_tokenizer(info);
    std::unique_ptr<ModelWeights> weights = load_weights_for(info);
    choose_chat_format(info);
    if (backend_) {
        // A reload: the cache demotes the old backend's device blocks to host memory while that
        // backend (and the weights it reads) still exist; then the old backend is freed before
        // its weights, and before the new one is made.
        wait_for_persist();   // a background write may be reading a block through the old backend
        cache_->set_backend(nullptr);
        conversations_->clear();
        scheduler_.reset();
        backend_.reset();
    }
    weights_ = std::move(weights);
    make_backend(info);
    info.n_threads = options_.n_threads > 0 ? options_.n_threads : static_cast<int>(std::thread::hardware_concurrency());
    info.kv_bytes_per_token = backend_->kv_bytes(1);
    info.load_ms = clock.elapsed_ms();
    info_ = std::move(info);
    token_texts_.clear();  // the tokenizer may have changed
    strict_maskers_.clear();
    compile_.reset();
    linked_ = false;
    tools_.reset();
    conversations_->clear();  // their blocks belong to the old backend
    return info_;
}

void Engine::load_tokenizer(ModelInfo& info) {
    // The bundled one for built-in models; DIR/tokenizer.json when present; --tokenizer overrides.
    tokenizer_.reset();
    if (options_.tokenizer_path || source_.builtin || std::filesystem::exists(source_.dir / "tokenizer.json"))
        tokenizer_ = load_model_tokenizer(source_, options_.tokenizer_path);
    info.has_tokenizer = tokenizer_.has_value();
}

std::unique_ptr<ModelWeights> Engine::load_weights_for(ModelInfo& info) {
    std::unique_ptr<ModelWeights> weights;
    if (source_.builtin) {
        const auto recipe = find_builtin(source_.builtin_name);
        if (!recipe) throw std::runtime_error(options_.model_spec + ": unknown built-in model");
        weights = std::make_unique<ModelWeights>(generate_builtin_weights(*recipe, options_.n_threads, active_flag()));
        // Built from once (make_backend) and never read again: the CPU backend gives the generated
        // matrices' pages back as it packs them.
        mark_matrices_disposable(*weights);
        info.synthetic_weights = !recipe->trained();
        info.fingerprint = sha256_hex(builtin_recipe_text(*recipe));
    } else {
        const ModelConfig config = ModelConfig::from_json(source_.config, (source_.dir / "config.json").string());
        weights = std::make_unique<ModelWeights>(load_weights(source_.dir, config));
        info.fingerprint = options_.cache_dir.empty() ? model_fingerprint(source_)
                                                      : model_fingerprint(source_, options_.cache_dir);
    }
    info.config = weights->config;
    info.family = family_name(info.config.family);
    info.n_params = builtin_parameter_count(info.config);
    for (const auto& s : {&weights->embed, &weights->final_norm}) info.weight_bytes += s->n_bytes;
    for (const auto& l : weights->layers)
        for (const Tensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.bo, &l.q_norm,
                                &l.k_norm, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down})
            info.weight_bytes += t->n_bytes;
    if (!info.config.tie_word_embeddings) info.weight_bytes += weights->lm_head.n_bytes;
    return weights;
}

void Engine::choose_chat_format(ModelInfo& info) {
    format_.reset();
    stop_ids_.clear();
    if (tokenizer_) {
        info.chat_format = options_.chat_format.empty() ? model_chat_format(source_, *tokenizer_) : options_.chat_format;
        format_ = make_chat_format(info.chat_format);
        stop_ids_ = format_->stop_token_ids(*tokenizer_);
    }
    // Stop ids: the chat format's, then config.json's eos ids, then generation_config.json's (which
    // transformers' generate() uses; Qwen2.5 lists <|im_end|> and <|endoftext|> there).
    for (const auto* eos : {&info.config.eos_token_ids, &source_.generation_eos_ids})
        for (int id : *eos)
            if (std::find(stop_ids_.begin(), stop_ids_.end(), id) == stop_ids_.end()) stop_ids_.push_back(id);
}

void Engine::make_backend(ModelInfo& info) {
    // backend_select.cpp decides among the registered backends (auto = CUDA only when the program
    // registered it, a device is present and the model fits; "cuda" without that is an error
    // naming why) and builds it.
    const BackendRegistry& backends = *options_.backends;
    PlannedBackend plan = plan_backend(options_, info.config, backends);
    std::unique_ptr<Backend> fresh;
    try {
        fresh = make_planned_backend(plan, *weights_, options_, backends);
    } catch (const Cancelled&) {
        throw;
    } catch (const std::exception& e) {
        if (options_.backend != "auto" || plan.choice.backend != "cuda") throw;
        // auto: a CUDA backend that cannot be built (e.g. out of device memory) leaves the CPU, and says so.
        EngineOptions cpu_only = options_;
        cpu_only.backend = "cpu";
        plan = plan_backend(cpu_only, info.config, backends);
        plan.choice.reason = std::string("auto: the CUDA backend could not be built (") + e.what() + "); using the CPU";
        fresh = make_planned_backend(plan, *weights_, cpu_only, backends);
    }
    cache_->set_backend(fresh.get());
    backend_ = std::move(fresh);
    if (options_.parallel > 1)
        scheduler_ = std::make_unique<StepScheduler>(
            *backend_, StepSchedulerOptions{.max_step_tokens = options_.step_tokens,
                                            .first_token_rows = options_.first_token_rows,
                                            .first_token_step_rows = options_.first_token_step_rows});
    info.backend_reason = plan.choice.reason;
    info.backend = backend_->name();
    info.numerics = backend_->numerics_id();
    info.weights = weight_dtype_name(options_.weights);
    info.matrix_bytes = backend_->matrix_bytes();
    info.device = plan.device;
    if (info.numerics != plan.numerics) throw std::logic_error("numerics id " + info.numerics + " != planned " + plan.numerics);
}

std::string planned_numerics(const EngineOptions& options) {
    if (options.backend != "auto" && options.backend != "cpu" && options.backend != "cuda")
        throw std::invalid_argument("backend must be auto, cpu or cuda, not \"" + options.backend + "\"");
    // The same decision load_model makes (so keys shown before a load match the loaded engine's).
    return plan_backend(options, planned_model_config(options.model_spec), options.backends ? *options.backends : *cpu_only_backends()).numerics;
}

std::string engine_group_key(const std::string& model_fingerprint, const std::string& chat_format,
                             const std::string& numerics, const ToolSet& tools, const std::string& system_prompt) {
    GroupKeyInputs in;
    in.model_fingerprint = model_fingerprint;
    in.chat_format = chat_format;
    in.backend_numerics = numerics;
    in.system_prompt = system_prompt;
    in.tools_hash = tools.tools_hash();
    return group_key(in);
}

std::string Engine::group_key_for(const ToolSet& tools, const std::string& system_prompt) const {
    return engine_group_key(info_.fingerprint, info_.chat_format, info_.numerics, tools, system_prompt);
}

namespace {

// Token index at which each tool's text starts in the prefix: the line holding the tool's
// "name" field (for Qwen3 that line is the whole tool). Computed from each token's decoded bytes;
// left empty when those do not add up to the prefix text (then no boundary is claimed).
std::vector<int> tool_token_boundaries(const Tokenizer& tokenizer, std::span<const token_id> ids,
                                       const std::string& text, const ToolSet& tools) {
    const std::vector<size_t> token_end = tokenizer.token_end_offsets(ids);
    if ((token_end.empty() ? 0 : token_end.back()) != text.size()) return {};
    std::vector<int> out;
    size_t from = 0;
    for (const auto& tool : tools.tools()) {
        const size_t at = text.find("\"name\": \"" + tool.name + "\"", from);
        if (at == std::string::npos) return {};
        const size_t line = text.rfind('\n', at);
        const size_t start = line == std::string::npos ? 0 : line + 1;
        const auto it = std::upper_bound(token_end.begin(), token_end.end(), start);
        out.push_back(static_cast<int>(it - token_end.begin()));
        from = at + 1;
    }
    return out;
}

}  // namespace

GroupMeta Engine::expected_group(const std::string& group_key, const ToolSet& tools, const std::string& system_prompt,
                                 const std::vector<token_id>& prefix_ids) const {
    GroupMeta g;
    g.group_key = group_key;
    g.tools_hash = tools.tools_hash();
    g.tool_names = tools.names();
    g.prefix_ids = prefix_ids;
    g.model_fingerprint = info_.fingerprint;
    g.chat_format = info_.chat_format;
    g.backend_numerics = info_.numerics;
    g.system_prompt_sha256 = sha256_hex(system_prompt);
    g.tool_texts = canonical_texts(tools);
    g.n_layers = info_.config.n_layers;
    g.n_kv_heads = info_.config.n_kv_heads;
    g.head_dim = info_.config.head_dim;
    g.kv_dtype = backend_->kv_dtype();
    return g;
}

std::shared_ptr<const Group> Engine::link_or_compile(const ToolSet& tools, const std::string& system_prompt,
                                                     const RenderedPrefix& prefix, CompileResult& result,
                                                     Timings* timings) {
    GroupMeta expected = expected_group(result.group_key, tools, system_prompt, prefix.ids);

    // One lookup-or-compile per group at a time in this process: a request that finds another one
    // at work on the same group waits for it, then looks again (a memory hit once that one has
    // linked or compiled it), so concurrent misses compile once and concurrent disk or remote hits
    // load once.
    std::promise<void> done;
    std::shared_future<void> theirs;
    {
        std::lock_guard lock(compiling_mutex_);
        if (const auto it = compiling_.find(result.group_key); it != compiling_.end()) theirs = it->second;
        else compiling_.emplace(result.group_key, done.get_future().share());
    }
    if (theirs.valid()) {
        Stopwatch wait_clock;
        {
            const StepScheduler::Idle idle(scheduler_.get());  // no step waits for this request meanwhile
            while (theirs.wait_for(std::chrono::milliseconds(5)) != std::future_status::ready)
                if (active_flag()->load()) throw Cancelled();
        }
        const double waited_ms = wait_clock.elapsed_ms();
        auto group = link_or_compile(tools, system_prompt, prefix, result, timings);
        if (timings) timings->lookup_ms += waited_ms;  // the wait for the other request is part of the lookup
        return group;
    }
    struct Release {
        Engine& engine;
        const std::string& key;
        std::promise<void>& done;
        ~Release() {
            std::lock_guard lock(engine.compiling_mutex_);
            engine.compiling_.erase(key);
            done.set_value();
        }
    } release{*this, result.group_key, done};

    // link: the cache's tiers (GPU, memory, disk, remote), checked against what the prefix must be
    auto found = cache_->find(result.group_key, prefix.ids, expected, *backend_);
    auto report = [&](const GroupStore::Lookup& f) {
        if (!timings) return;
        timings->lookup_ms = f.lookup_ms;
        timings->disk_load_ms = f.disk_load_ms;
        timings->remote_load_ms = f.remote_load_ms;
        timings->upload_ms = f.upload_ms;
        timings->disk_load_gb_s = f.disk_load_gb_s;
        timings->remote_load_gb_s = f.remote_load_gb_s;
        timings->upload_gb_s = f.upload_gb_s;
    };
    auto hit = [&](const GroupStore::Lookup& f) {
        report(f);
        result.problem = f.problem;
        result.cache_hit = true;
        result.tier = f.tier;
        result.kv_bytes = f.group->kv_bytes;
        return f.group;
    };
    if (found.group) return hit(found);

    // Compile once per cluster: with a remote tier, another replica may be compiling this group
    // now; wait for its publish (bounded), then look again (GroupStore::claim_compile).
    {
        const StepScheduler::Idle idle(scheduler_.get());
        Stopwatch wait_clock;
        const auto claim = cache_->claim_compile(result.group_key);
        found.lookup_ms += wait_clock.elapsed_ms();  // a wait for another replica is part of the lookup
        if (claim == RemoteTier::Claim::published) {
            auto again = cache_->find(result.group_key, prefix.ids, expected, *backend_);
            again.lookup_ms += found.lookup_ms;
            found = std::move(again);
        }
    }
    report(found);
    result.problem = found.problem;
    if (found.group) {
        cache_->release_compile(result.group_key);  // held when a publish came between wait and fetch
        return hit(found);
    }

    // Say why (before this group joins the store), compile, keep in memory, persist in the
    // background (which publishes to the remote tier and releases its lock).
    result.miss_reason = cc::explain_miss(*cache_, expected);
    std::shared_ptr<const Group> group;
    try {
        group = compile_prefix(std::move(expected), tools, prefix, result);
    } catch (...) {
        cache_->release_compile(result.group_key);
        throw;
    }
    if (timings) timings->compile_ms = result.compile_ms;
    cache_->insert(group);
    persist_async(group);
    return group;
}

std::shared_ptr<const Group> Engine::compile_prefix(GroupMeta meta, const ToolSet& tools, const RenderedPrefix& prefix,
                                                    CompileResult& result) {
    // The prefix's K/V, reusing the longest stored prefix it shares (the same system prompt and
    // first tools give the same leading tokens, hence the same K/V bits).
    Stopwatch compile_clock;
    start_call();
    const std::vector<token_id>& ids = prefix.ids;
    const int n = static_cast<int>(ids.size());
    std::unique_ptr<KvBlock> block;
    size_t reused = 0;
    // Below kMinReusedTokens the shared part is only the template's opening (e.g. "<|im_start|>system\n"):
    // copying it costs more than computing it.
    constexpr size_t kMinReusedTokens = 32;
    if (auto match = cache_->longest_prefix(ids, meta); match && match->n_common >= kMinReusedTokens) {
        auto donor = cache_->find(match->group_key, match->prefix_ids, meta, *backend_);
        if (donor.group) {
            reused = std::min(match->n_common, ids.size());
            block = backend_->copy_kv(*donor.group->kv, static_cast<int>(reused), n, n);  // written whole, in chunks
        }
    }
    if (!block) {
        block = backend_->allocate_kv(n);
        block->reserve(n);
    }
    // In chunks, so that progress is reported and a cancel lands within one chunk. Exact: a row's
    // result does not depend on how the rows are batched (the backend contract, backend.h).
    for (size_t done = reused; done < ids.size();) {
        const size_t count = std::min(kForwardChunkTokens, ids.size() - done);
        run_forward(std::span<const token_id>(ids).subspan(done, count), KvView{nullptr, 0, block.get()}, {});
        done += count;
        if (progress_) progress_(EngineProgress{"compile", done, ids.size()});
    }
    meta.created_unix_ms = unix_ms_now();
    meta.tool_token_boundaries = tool_token_boundaries(*tokenizer_, ids, prefix.text, tools);
    auto group = std::make_shared<Group>(std::move(meta));
    group->kv = std::move(block);
    group->kv_bytes = backend_->kv_bytes(n);
    result.compile_ms = compile_clock.elapsed_ms();
    result.cache_hit = false;
    result.tier = Tier::miss;
    result.reused_tokens = reused;
    result.kv_bytes = group->kv_bytes;
    return group;
}

void Engine::persist_async(const std::shared_ptr<const Group>& group) {
    if (!cache_->persistent() && !cache_->remote()) return;
    // The file is written while the query goes on (wait_for_persist collects the result). The
    // block is immutable from here on, so a backend that exports a layer alone feeds the file a
    // layer at a time from the block itself (no second copy of the group's KV); otherwise the
    // canonical bytes are taken now.
    GroupStore* store = cache_.get();
    const int n = static_cast<int>(group->prefix_ids.size());
    std::future<PersistResult> done;
    // The future's state keeps its lambda until the write is collected: a group held there would
    // count as in use (exempt from the memory budget and disk gc), so the task moves it out and
    // releases it when the write ends. (An init-capture: a plain copy of the const parameter
    // would be a const member, which std::move could not empty.)
    if (backend_->exports_layers()) {
        const Backend* backend = backend_.get();   // outlives the write: a reload waits for it first
        done = std::async(std::launch::async, [store, held = std::shared_ptr<const Group>(group), backend, n]() mutable {
            const std::shared_ptr<const Group> g = std::move(held);
            return store->persist(g, [&](int layer, std::span<std::byte> out) {
                backend->export_kv_layer(*g->kv, n, layer, out);
            });
        });
    } else {
        std::vector<std::byte> canonical(group->kv_bytes);
        backend_->export_kv(*group->kv, n, canonical);
        done = std::async(std::launch::async, [store, held = std::shared_ptr<const Group>(group),
                                               bytes = std::move(canonical)]() mutable {
            const std::shared_ptr<const Group> g = std::move(held);
            return store->persist(g, std::move(bytes));
        });
    }
    std::lock_guard lock(persist_mutex_);
    reap_persists_locked();
    pending_persist_.emplace_back(group->group_key, std::move(done));
}

// A finished write's future still owns what its task captured (the group, any canonical copy):
// a long-running server that never calls wait_for_persist would keep every compiled group alive.
// Finished ones are collected here, their failures kept as warnings.
void Engine::reap_persists_locked() {
    std::erase_if(pending_persist_, [this](auto& pending) {
        auto& [key, f] = pending;
        if (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
        PersistResult r = collect_persist_locked(key, f);
        // Kept for wait_for_persist, bounded: a server that never asks keeps only the latest.
        constexpr size_t kKeepReaped = 64;
        if (reaped_persists_.size() >= kKeepReaped) reaped_persists_.erase(reaped_persists_.begin());
        reaped_persists_.push_back(std::move(r));
        return true;
    });
}

void Engine::begin_request(CancelToken token) {
    std::lock_guard lock(request_mutex_);
    requests_.insert_or_assign(std::this_thread::get_id(), std::move(token));
}

void Engine::end_request() {
    std::lock_guard lock(request_mutex_);
    requests_.erase(std::this_thread::get_id());
}

void Engine::cancel() {
    std::lock_guard lock(request_mutex_);
    if (requests_.empty()) cancel_.store(true);
    for (auto& [thread, token] : requests_) token.cancel();
}

void Engine::start_call() {
    // Inside a request its token decides; a token is never cleared.
    std::lock_guard lock(request_mutex_);
    if (!requests_.contains(std::this_thread::get_id())) cancel_.store(false);
}

const std::atomic<bool>* Engine::active_flag() const {
    // A thread's entry changes only on that thread, so the flag stays valid while it runs calls.
    std::lock_guard lock(request_mutex_);
    const auto it = requests_.find(std::this_thread::get_id());
    return it != requests_.end() ? it->second.flag() : &cancel_;
}

const std::vector<std::string>& Engine::token_texts() {
    std::lock_guard lock(texts_mutex_);
    if (token_texts_.empty()) {
        const Tokenizer& tok = tokenizer();
        token_texts_.resize(tok.vocab_size());
        for (size_t id = 0; id < token_texts_.size(); ++id) {
            const token_id one = static_cast<token_id>(id);
            token_texts_[id] = tok.decode(std::span<const token_id>(&one, 1), /*skip_special_tokens=*/true);
        }
    }
    return token_texts_;
}

std::unique_ptr<ToolCallConstraint> Engine::call_constraint(const ToolSet& tools, const ToolChoice& choice) {
    // Strict calls (--strict, or tools marked "strict": true) mask the arguments too, also under
    // auto; none constrains nothing.
    const bool strict = choice.mode != ToolChoice::Mode::none && !tools.empty() &&
                        (choice.strict || std::any_of(tools.tools().begin(), tools.tools().end(), tool_is_strict));
    if (!choice.forces_call() && !strict) return nullptr;
    const std::string what = choice.forces_call() ? "tool_choice " + (choice.mode == ToolChoice::Mode::required
                                                                          ? std::string("required")
                                                                          : "\"" + choice.function + "\"")
                                                  : std::string("strict tool calls");
    if (tools.empty()) throw std::invalid_argument(what + " needs tools, and none are given");
    std::vector<std::string> names = tools.names();
    if (choice.mode == ToolChoice::Mode::function) {
        if (std::find(names.begin(), names.end(), choice.function) == names.end())
            throw std::invalid_argument(what + ": no tool of that name is offered (tools: " + [&] {
                std::string list;
                for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
                return list;
            }() + ")");
        names = {choice.function};
    }
    const auto markup = format_->tool_call_markup();
    if (!markup)
        throw std::invalid_argument(what + ": the " + std::string(format_->id()) +
                                    " chat format has no tool-call markup to " +
                                    (choice.forces_call() ? "force; use auto or none" : "constrain"));
    // The masks read each token's text on its own, which is that token's text in context only for
    // byte-level tokenizers (a SentencePiece token drops its leading space alone).
    if ((names.size() > 1 || strict) && tokenizer().model_kind() != "byte_level_bpe")
        throw std::invalid_argument(what + ": constraining the name needs a byte-level BPE tokenizer, not " +
                                    std::string(tokenizer().model_kind()));
    if (!strict) {
        const std::vector<std::string>& texts = names.size() > 1 ? token_texts() : token_texts_;
        return std::make_unique<ToolCallConstraint>(*markup, *tokenizer_, std::move(names), texts);
    }
    if (!choice.forces_call() && !ToolCallConstraint::can_watch(*markup, *tokenizer_))
        throw std::invalid_argument(what + " under tool_choice auto: the " + std::string(format_->id()) +
                                    " chat format's calls neither open with one token the decoder can watch for nor "
                                    "open the reply; use tool_choice required or a function's name");
    const std::vector<std::string>& texts = token_texts();
    std::vector<std::shared_ptr<SchemaMasker>> schemas;
    for (const auto& name : names) {
        const Tool& tool = *std::find_if(tools.tools().begin(), tools.tools().end(), [&](const Tool& t) { return t.name == name; });
        if (choice.strict || tool_is_strict(tool))  // throws naming the tool and an unsupported keyword
            schemas.push_back(strict_maskers_.get(strict_arguments_schema(tool), "}" + markup->close,
                                                  "tool \"" + name + "\"", texts));
        else
            schemas.push_back(nullptr);
    }
    return std::make_unique<ToolCallConstraint>(*markup, *tokenizer_, std::move(names), texts, std::move(schemas),
                                                choice.forces_call());
}

void Engine::require_chat_model() {
    if (!backend_) throw std::logic_error("Engine: load_model() has not been called");
    if (!format_) tokenizer();  // throws: no tokenizer, no chat format
}

RenderedPrefix Engine::render_prefix(const ToolSet& tools, const std::string& system_prompt) const {
    return cc::render_prefix(*format_, *tokenizer_, tools, system_prompt);
}

void Engine::render_current(const ToolSet& tools, const std::string& system_prompt) {
    prefix_ = render_prefix(tools, system_prompt);
    tools_ = tools;
    system_prompt_ = system_prompt;
}

CompileResult Engine::describe_current() const {
    CompileResult result;
    result.tools_hash = tools_->tools_hash();
    result.n_tools = tools_->size();
    result.tool_names = tools_->names();
    result.group_key = group_key_for(*tools_, system_prompt_);
    result.prefix_tokens = prefix_.ids.size();
    return result;
}

CompileResult Engine::set_tools(const ToolSet& tools, const std::string& system_prompt) {
    require_chat_model();
    render_current(tools, system_prompt);
    CompileResult result = describe_current();
    link_or_compile(tools, system_prompt, prefix_, result, nullptr);
    compile_ = result;
    linked_ = true;
    return result;
}

ToolsPreview Engine::select_tools(const ToolSet& tools, const std::string& system_prompt) {
    require_chat_model();
    render_current(tools, system_prompt);
    CompileResult result = describe_current();
    result.kv_bytes = backend_->kv_bytes(static_cast<int>(prefix_.ids.size()));
    result.tier = cache_->tier_of(result.group_key);
    compile_ = result;
    linked_ = false;
    ToolsPreview out;
    out.tools_hash = result.tools_hash;
    out.group_key = result.group_key;
    out.n_tools = result.n_tools;
    out.prefix_tokens = result.prefix_tokens;
    out.kv_bytes = result.kv_bytes;
    out.tier = result.tier;
    return out;
}

ToolsPreview Engine::preview_tools(const ToolSet& tools, const std::string& system_prompt, bool explain) {
    require_chat_model();
    ToolsPreview out;
    out.tools_hash = tools.tools_hash();
    out.group_key = group_key_for(tools, system_prompt);
    out.n_tools = tools.size();
    const std::vector<token_id> prefix_ids = render_prefix(tools, system_prompt).ids;
    out.prefix_tokens = prefix_ids.size();
    out.kv_bytes = backend_->kv_bytes(static_cast<int>(out.prefix_tokens));
    out.tier = cache_->tier_of(out.group_key);
    if (explain && out.tier == Tier::miss)
        out.miss_reason = cc::explain_miss(*cache_, expected_group(out.group_key, tools, system_prompt, prefix_ids));
    return out;
}

std::optional<MissReason> Engine::explain_miss(const ToolSet& tools, const std::string& system_prompt) {
    const ToolsPreview preview = preview_tools(tools, system_prompt, true);
    return preview.miss_reason;
}

QueryResult Engine::query(const std::string& text, const QueryOptions& options,
                          const std::function<void(const TokenEvent&)>& on_token) {
    if (!compile_) throw std::logic_error("Engine: set_tools() must be called before query()");
    if (options.max_new_tokens < 1) throw std::invalid_argument("max_new_tokens must be at least 1");
    call_constraint(*tools_, options.tool_choice);  // throws before any work when the choice cannot be met
    if (options.mode == QueryMode::cached) return run_cached(text, options, on_token);
    if (options.mode == QueryMode::full) return run_full(text, options, on_token);

    // compare: the full prefill first (it is the reference), then the cached path; both keep the
    // logits of every generated position (decode_loop keeps them in compare mode).
    QueryResult full = run_full(text, options, {});
    return record_comparison(std::move(full), run_cached(text, options, on_token));
}

QueryResult Engine::run_cached(const std::string& text, const QueryOptions& options,
                               const std::function<void(const TokenEvent&)>& on_token) {
    Stopwatch submit;
    QueryResult result;
    result.mode = query_mode_name(options.mode);
    start_call();
    const RequestSteps steps(result.batch, scheduler_.get());

    // The prefix was rendered by set_tools / select_tools (prefix_); its ids are checked against
    // the stored group's.
    Stopwatch tokenize_clock;
    const std::vector<token_id> suffix_ids = query_suffix_ids(text);
    result.timings.tokenize_ms = tokenize_clock.elapsed_ms();

    CompileResult link;
    link.group_key = compile_->group_key;
    const auto group = link_or_compile(*tools_, system_prompt_, prefix_, link, &result.timings);
    result.timings.link_ms = result.timings.lookup_ms + result.timings.disk_load_ms + result.timings.remote_load_ms + result.timings.upload_ms;
    result.cache_hit = link.cache_hit;
    result.tier = link.tier;
    result.problem = link.problem;
    result.miss_reason = link.miss_reason;
    result.reused_tokens = link.reused_tokens;
    result.group_key = link.group_key;
    result.prefix_tokens = group->prefix_ids.size();
    result.suffix_tokens = suffix_ids.size();
    result.prompt_tokens = result.prefix_tokens + result.suffix_tokens;
    result.group_reused_tokens = link.cache_hit ? result.prefix_tokens : link.reused_tokens;
    result.prefilled_tokens = result.prompt_tokens - result.group_reused_tokens;
    if (!linked_) {
        // The first query after select_tools did the link: current_tools() reports it.
        CompileResult described = describe_current();
        described.cache_hit = link.cache_hit;
        described.tier = link.tier;
        described.reused_tokens = link.reused_tokens;
        described.compile_ms = link.compile_ms;
        described.kv_bytes = link.kv_bytes;
        described.problem = link.problem;
        described.miss_reason = link.miss_reason;
        compile_ = std::move(described);
        linked_ = true;
    }

    const int n_prefix = static_cast<int>(group->prefix_ids.size());
    auto suffix_block = allocate_for(*backend_, suffix_ids.size(), options.max_new_tokens);
    prefill_and_decode(suffix_ids, KvView{group->kv.get(), n_prefix, suffix_block.get()}, options, on_token,
                       result, submit, call_constraint(*tools_, options.tool_choice).get());
    return result;
}

void Engine::prefill_and_decode(std::span<const token_id> ids, const KvView& view, const QueryOptions& options,
                                const std::function<void(const TokenEvent&)>& on_token, QueryResult& result,
                                const Stopwatch& submit, ToolCallConstraint* constraint) {
    Stopwatch prefill_clock;
    const int last_row = static_cast<int>(ids.size()) - 1;
    auto logits = run_forward(ids, view, std::span<const int>(&last_row, 1), CallKind::first_token);
    result.timings.prefill_ms = prefill_clock.elapsed_ms();
    result.timings.prefill_tok_s = static_cast<double>(ids.size()) / (result.timings.prefill_ms / 1000.0);
    decode_loop(std::move(logits), view, options, stop_ids_, on_token, result, submit, constraint);
    result.text = tokenizer_->decode(result.tokens, /*skip_special_tokens=*/true);
    if (result.stop_reason == StopReason::stop_string)
        if (const size_t at = first_stop(result.text, options.stop); at != std::string::npos) result.text.resize(at);
    result.tool_call = format_->parse_tool_call(result.text);
    result.timings.total_ms = submit.elapsed_ms();
}

Engine::PrefixRef Engine::current_prefix() const {
    if (!compile_ || !tools_) throw std::logic_error("Engine: set_tools() has not been called");
    return PrefixRef{*tools_, system_prompt_, prefix_.ids, prefix_.text, *compile_};
}

std::vector<token_id> Engine::query_suffix_ids(const std::string& text) {
    if (!compile_) throw std::logic_error("Engine: set_tools() must be called before query_suffix_ids()");
    const auto suffix_pieces = format_->suffix_pieces(text, system_prompt_);
    auto ids = tokenize_suffix(*format_, *tokenizer_, prefix_.pieces, prefix_.ids, suffix_pieces);
    if (ids.empty()) throw std::runtime_error("the rendered query suffix is empty");
    return ids;
}

QueryResult Engine::continue_from(std::span<const token_id> ids, const KvView& view, const QueryOptions& options,
                                  const std::function<void(const TokenEvent&)>& on_token, const Stopwatch& submit) {
    require_chat_model();
    if (ids.empty()) throw std::invalid_argument("continue_from: no tokens to prefill");
    if (options.max_new_tokens < 1) throw std::invalid_argument("max_new_tokens must be at least 1");
    QueryResult result;
    result.mode = query_mode_name(options.mode);
    // a pending cancel() stays pending
    prefill_and_decode(ids, view, options, on_token, result, submit,
                       call_constraint(tools_ ? *tools_ : ToolSet{}, options.tool_choice).get());
    return result;
}

QueryResult Engine::run_full(const std::string& text, const QueryOptions& options,
                             const std::function<void(const TokenEvent&)>& on_token) {
    Stopwatch submit;
    QueryResult result;
    result.mode = query_mode_name(options.mode);
    start_call();
    const RequestSteps steps(result.batch, scheduler_.get());

    Stopwatch tokenize_clock;
    const RenderedPrompt rendered = render_prompt(*format_, *tokenizer_, *tools_, system_prompt_, text);
    const auto ids = rendered.full_ids();
    result.timings.tokenize_ms = tokenize_clock.elapsed_ms();
    result.cache_hit = false;
    result.tier = Tier::miss;
    result.group_key = compile_->group_key;
    result.prefix_tokens = rendered.prefix_ids.size();
    result.suffix_tokens = rendered.suffix_ids.size();
    result.prompt_tokens = ids.size();
    result.prefilled_tokens = ids.size();

    auto block = allocate_for(*backend_, ids.size(), options.max_new_tokens);
    prefill_and_decode(ids, KvView{nullptr, 0, block.get()}, options, on_token, result, submit,
                       call_constraint(*tools_, options.tool_choice).get());
    return result;
}

void Engine::run_forward(std::span<const token_id> ids, const KvView& view, std::span<const int> logit_rows,
                         std::vector<float>& logits, CallKind kind, std::span<token_id> argmax) {
    const bool tokens_only = !argmax.empty();
    logits.resize(tokens_only ? 0 : logit_rows.size() * static_cast<size_t>(info_.config.vocab_size));
    if (scheduler_) {
        scheduler_->forward(ids, view, logit_rows, logits, active_flag(), tl_request_steps, kind, argmax);
        return;
    }
    if (ids.size() <= kForwardChunkTokens || !backend_->prefers_chunked_prefill()) {
        const SequenceRows seq{ids, view, logit_rows, logits, argmax};
        backend_->forward_batch(std::span<const SequenceRows>(&seq, 1), active_flag());
        return;
    }
    // A long prompt (a full prefill, a long new message) runs in chunks of kForwardChunkTokens rows
    // where the backend prefers it (the CPU's), as a compile does, so that a forward pass's activations stay bounded
    // whatever the prompt's length (~T x (2 dim + 2 qkv + 3 ffn) floats: ~90 KB a row on the 0.6B shape, ~250 KB on the
    // 8B). Exact: a row's result does not depend on how the rows are batched (backend.h). As one
    // call would, a failure or a cancel leaves the suffix block as it was.
    const size_t vocab = static_cast<size_t>(info_.config.vocab_size);
    for (int r : logit_rows)
        if (r < 0 || static_cast<size_t>(r) >= ids.size())
            throw std::invalid_argument("forward: logit row " + std::to_string(r) + " is outside [0, " +
                                        std::to_string(ids.size()) + ")");
    const int before = view.suffix->n_tokens();
    std::vector<int> rows;
    std::vector<size_t> slots;
    std::vector<float> part;
    std::vector<token_id> part_ids;
    try {
        for (size_t start = 0; start < ids.size(); start += kForwardChunkTokens) {
            const size_t count = std::min(kForwardChunkTokens, ids.size() - start);
            rows.clear();
            slots.clear();
            for (size_t j = 0; j < logit_rows.size(); ++j)
                if (const auto r = static_cast<size_t>(logit_rows[j]); r >= start && r < start + count) {
                    rows.push_back(static_cast<int>(r - start));
                    slots.push_back(j);
                }
            part.resize(tokens_only ? 0 : rows.size() * vocab);
            part_ids.resize(tokens_only ? rows.size() : 0);
            const SequenceRows seq{ids.subspan(start, count), view, rows, part, part_ids};
            backend_->forward_batch(std::span<const SequenceRows>(&seq, 1), active_flag());
            for (size_t k = 0; k < slots.size(); ++k) {
                if (tokens_only)
                    argmax[slots[k]] = part_ids[k];
                else
                    std::copy_n(part.begin() + static_cast<std::ptrdiff_t>(k * vocab), vocab,
                                logits.begin() + static_cast<std::ptrdiff_t>(slots[k] * vocab));
            }
        }
    } catch (...) {
        view.suffix->truncate(before);
        throw;
    }
}

std::vector<float> Engine::run_forward(std::span<const token_id> ids, const KvView& view,
                                       std::span<const int> logit_rows, CallKind kind) {
    std::vector<float> logits;
    run_forward(ids, view, logit_rows, logits, kind);
    return logits;
}

void Engine::forward_rows(std::span<const token_id> ids, const KvView& view, bool keep_all,
                          std::vector<std::vector<float>>& kept, std::vector<float>& logits) {
    // Rows before the last are the logits before ids[1..]; the last row is the next token's.
    std::vector<int> rows;
    for (size_t r = keep_all ? 0 : ids.size() - 1; r < ids.size(); ++r) rows.push_back(static_cast<int>(r));
    run_forward(ids, view, rows, logits);
    const size_t vocab = static_cast<size_t>(info_.config.vocab_size);
    for (size_t r = 0; r + 1 < rows.size(); ++r)
        kept.emplace_back(logits.begin() + static_cast<std::ptrdiff_t>(r * vocab),
                          logits.begin() + static_cast<std::ptrdiff_t>((r + 1) * vocab));
    logits.erase(logits.begin(), logits.end() - static_cast<std::ptrdiff_t>(vocab));
}

void Engine::decode_loop(std::vector<float> logits, const KvView& view, const QueryOptions& options,
                         std::span<const token_id> stop_ids, const std::function<void(const TokenEvent&)>& on_token,
                         QueryResult& result, const Stopwatch& submit, ToolCallConstraint* constraint) {
    std::mt19937_64 rng(options.seed);
    std::optional<IncrementalDecoder> stream;
    if (tokenizer_) stream.emplace(*tokenizer_, /*skip_special_tokens=*/true);
    const bool keep_logits = options.keep_logits || options.mode == QueryMode::compare;
    // Greedy with nothing else reading the logits (none kept, no constraint's mask): after the
    // first token the backend picks each token itself, by sample_token's greedy rule
    // (km::argmax_row), so the tokens are the same; on a GPU a decode step then brings back 4 bytes
    // instead of a row of logits, and the host does not scan them.
    const bool backend_picks = options.temperature <= 0.0f && !keep_logits && constraint == nullptr;
    token_id picked = -1;     // the token the backend picked at the last forward, if it did
    std::string text_so_far;  // for stop strings
    size_t longest_stop = 0;
    for (const auto& s : options.stop) longest_stop = std::max(longest_stop, s.size());
    Stopwatch decode_clock;
    result.stop_reason = StopReason::max_new_tokens;
    const size_t max_tokens = static_cast<size_t>(options.max_new_tokens);
    // Each round appends one sampled token, or the span the constraint feeds: never sampled, run
    // through the model as one forward before it is emitted (`logits` are then the model's logits
    // before the span's first token; with keep_logits every row is kept, one per token).
    for (bool first = true; result.tokens.size() < max_tokens; first = false) {
        if (!first && active_flag()->load()) {
            result.stop_reason = StopReason::cancelled;
            break;
        }
        std::vector<token_id> next = constraint ? constraint->take_forced() : std::vector<token_id>{};
        const bool forced = !next.empty();
        const size_t n_logits_before = result.step_logits.size();
        const int n_fed_before = view.suffix->n_tokens();
        if (forced) {
            next.resize(std::min(next.size(), max_tokens - result.tokens.size()));
            if (keep_logits) result.step_logits.push_back(logits);
            try {
                forward_rows(next, view, keep_logits, result.step_logits, logits);
            } catch (const Cancelled&) {
                result.step_logits.resize(n_logits_before);
                result.stop_reason = StopReason::cancelled;
                break;
            }
        } else {
            if (keep_logits) result.step_logits.push_back(logits);
            if (constraint) constraint->mask(logits);
            next.push_back(picked >= 0 ? picked : sample_token(logits, options.temperature, options.top_p, rng));
            picked = -1;
            if (constraint) constraint->accept(next.back());
        }
        size_t n_emitted = 0;
        bool stopped = false;
        for (const token_id token : next) {
            result.tokens.push_back(token);
            ++n_emitted;
            if (result.tokens.size() == 1) {
                result.timings.ttft_ms = submit.elapsed_ms();
                decode_clock.restart();
            }
            const std::string piece = stream ? stream->push(token) : std::string();
            if (on_token) on_token(TokenEvent{static_cast<int>(result.tokens.size()) - 1, token, piece});
            // A forced token is markup, never the end of the reply.
            const bool is_stop = !forced && std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
            if (is_stop && !options.ignore_eos) {
                result.stop_reason = StopReason::stop_token;
                stopped = true;
                break;
            }
            if (!options.stop.empty()) {
                // Only the new text and the longest stop string's worth before it can hold a new match.
                const size_t from = text_so_far.size() > longest_stop ? text_so_far.size() - longest_stop : 0;
                text_so_far += piece;
                if (first_stop(std::string_view(text_so_far).substr(from), options.stop) != std::string::npos) {
                    result.stop_reason = StopReason::stop_string;
                    stopped = true;
                    break;
                }
            }
        }
        if (forced) {
            result.forced_tokens += n_emitted;
            if (n_emitted < next.size()) {
                // A stop string inside the span: the KV and the logits keep the emitted part only.
                view.suffix->truncate(n_fed_before + static_cast<int>(n_emitted));
                if (keep_logits) result.step_logits.resize(n_logits_before + n_emitted);
            }
        }
        if (stopped || result.tokens.size() == max_tokens) break;
        if (forced) continue;  // already fed
        try {
            if (backend_picks) {
                const int last = static_cast<int>(next.size()) - 1;
                run_forward(next, view, std::span<const int>(&last, 1), logits, CallKind::later,
                            std::span<token_id>(&picked, 1));
            } else {
                forward_rows(next, view, false, result.step_logits, logits);
            }
        } catch (const Cancelled&) {
            result.stop_reason = StopReason::cancelled;
            break;
        }
    }
    if (stream)
        if (const std::string tail = stream->flush(); !tail.empty() && on_token)
            on_token(TokenEvent{static_cast<int>(result.tokens.size()), -1, tail});
    result.generated_tokens = result.tokens.size();
    result.timings.decode_ms = result.tokens.size() > 1 ? decode_clock.elapsed_ms() : 0.0;
    result.timings.decode_tok_s =
        result.timings.decode_ms > 0 ? (result.tokens.size() - 1) / (result.timings.decode_ms / 1000.0) : 0.0;
}

// ---- conversations ---------------------------------------------------------------------------

const ChatFormat& Engine::chat_format() const {
    if (!format_) throw std::logic_error("Engine: no chat format (load a model with a tokenizer)");
    return *format_;
}

std::vector<token_id> Engine::conversation_ids(const ChatRequest& request) {
    require_chat_model();
    const auto pieces = format_->conversation_pieces(request.tools, request.system_prompt, request.messages, request.render);
    return tokenize_pieces(*tokenizer_, pieces);
}

ConversationCacheStats Engine::conversation_stats() const {
    ConversationCacheStats s;
    s.entries = conversations_->entries();
    s.bytes = conversations_->bytes();
    s.budget_bytes = conversations_->budget_bytes();
    s.lookups = conversations_->lookups();
    s.hits = conversations_->hits();
    s.evictions = conversations_->evictions();
    return s;
}

void Engine::clear_conversations() { conversations_->clear(); }

QueryResult Engine::chat(const ChatRequest& request, const QueryOptions& options,
                         const std::function<void(const TokenEvent&)>& on_token) {
    require_chat_model();
    if (request.messages.empty()) throw std::invalid_argument("a conversation needs at least one message");
    if (options.max_new_tokens < 1) throw std::invalid_argument("max_new_tokens must be at least 1");
    call_constraint(request.tools, options.tool_choice);  // throws before any work when the choice cannot be met
    if (options.mode == QueryMode::cached) return run_chat(request, options, on_token, true);
    if (options.mode == QueryMode::full) return run_chat(request, options, on_token, false);
    QueryResult full = run_chat(request, options, {}, false);
    return record_comparison(std::move(full), run_chat(request, options, on_token, true));
}

QueryResult Engine::run_chat(const ChatRequest& request, const QueryOptions& options,
                             const std::function<void(const TokenEvent&)>& on_token, bool cached) {
    Stopwatch submit;
    QueryResult result;
    result.mode = query_mode_name(options.mode);
    start_call();
    const RequestSteps steps(result.batch, scheduler_.get());

    // Render the whole conversation, and the group prefix on its own: the group serves this
    // request when its ids begin the prompt (always, except mistral with several user turns).
    Stopwatch tokenize_clock;
    const RenderedPrefix prefix = render_prefix(request.tools, request.system_prompt);
    const std::vector<token_id> ids = conversation_ids(request);
    result.timings.tokenize_ms = tokenize_clock.elapsed_ms();
    if (ids.empty()) throw std::runtime_error("the rendered conversation has no tokens");
    const bool group_in_front = prefix.ids.size() < ids.size() &&
                                std::equal(prefix.ids.begin(), prefix.ids.end(), ids.begin());
    result.group_key = group_key_for(request.tools, request.system_prompt);
    result.prompt_tokens = ids.size();
    result.prefix_tokens = group_in_front ? prefix.ids.size() : 0;
    result.suffix_tokens = ids.size() - result.prefix_tokens;
    const int capacity_after = options.max_new_tokens;

    if (!cached) {
        result.prefilled_tokens = ids.size();
        auto block = allocate_for(*backend_, ids.size(), capacity_after);
        prefill_and_decode(ids, KvView{nullptr, 0, block.get()}, options, on_token, result, submit,
                           call_constraint(request.tools, options.tool_choice).get());
        result.reply = format_->parse_reply(result.text);
        return result;
    }

    // 1. the group prefix, from the cache's tiers or compiled now (inside this request's TTFT)
    std::shared_ptr<const Group> group;
    size_t group_tokens = 0;
    if (group_in_front) {
        CompileResult link;
        link.group_key = result.group_key;
        group = link_or_compile(request.tools, request.system_prompt, prefix, link, &result.timings);
        result.cache_hit = link.cache_hit;
        result.tier = link.tier;
        result.problem = link.problem;
        result.miss_reason = link.miss_reason;
        result.reused_tokens = link.reused_tokens;
        group_tokens = prefix.ids.size();
        result.group_reused_tokens = link.cache_hit ? group_tokens : link.reused_tokens;
    }

    // 2. the longest stored conversation state that begins the prompt (at least one token is left
    //    to prefill: its logits are the first token's)
    Stopwatch conversation_clock;
    const ConversationMatch match = conversations_->longest_prefix(result.group_key, ids, group_tokens);
    const size_t reuse_to = match.state ? std::min(match.n_common, ids.size() - 1) : group_tokens;
    const int prompt = static_cast<int>(ids.size() - group_tokens);  // the prompt's positions, prefilled now
    const int capacity = prompt + capacity_after;
    std::unique_ptr<KvBlock> block;
    if (reuse_to > group_tokens) {
        const int n_copy = static_cast<int>(reuse_to - group_tokens);
        block = backend_->copy_kv(*match.state->block, n_copy, capacity, prompt);
        result.conversation_reused_tokens = static_cast<size_t>(n_copy);
        result.conversation_tier = Tier::memory;
    } else {
        block = backend_->allocate_kv(capacity);
        block->reserve(prompt);
    }
    result.diverged_at = match.diverged_at;
    result.timings.conversation_link_ms = conversation_clock.elapsed_ms();
    result.timings.link_ms = result.timings.lookup_ms + result.timings.disk_load_ms + result.timings.remote_load_ms +
                             result.timings.upload_ms + result.timings.conversation_link_ms;
    const size_t start = std::max(reuse_to, group_tokens);
    result.prefilled_tokens = ids.size() - result.group_reused_tokens - result.conversation_reused_tokens;

    // 3. prefill the rest, generate, and keep the new state for the next turn
    const KvView view{group ? group->kv.get() : nullptr, static_cast<int>(group_tokens), block.get()};
    prefill_and_decode(std::span<const token_id>(ids).subspan(start), view, options, on_token, result, submit,
                       call_constraint(request.tools, options.tool_choice).get());
    result.reply = format_->parse_reply(result.text);

    auto state = std::make_shared<ConversationState>();
    state->group_key = result.group_key;
    state->group_tokens = group_tokens;
    state->ids = ids;
    state->ids.insert(state->ids.end(), result.tokens.begin(), result.tokens.end());
    state->ids.resize(group_tokens + static_cast<size_t>(block->n_tokens()));  // the ids whose K/V the block holds
    state->bytes = backend_->kv_bytes(block->storage_tokens());
    state->block = std::move(block);
    conversations_->insert(std::move(state));
    return result;
}

GenerateResult Engine::generate(const std::vector<token_id>& prompt_ids, int max_new_tokens, bool ignore_eos) {
    if (!backend_) throw std::logic_error("Engine: load_model() has not been called");
    if (prompt_ids.empty()) throw std::invalid_argument("generate: the prompt has no tokens");
    if (max_new_tokens < 1) throw std::invalid_argument("max_new_tokens must be at least 1");
    Stopwatch submit;
    start_call();
    auto block = allocate_for(*backend_, prompt_ids.size(), max_new_tokens);
    const KvView view{nullptr, 0, block.get()};
    const int last = static_cast<int>(prompt_ids.size()) - 1;
    auto logits = run_forward(prompt_ids, view, std::span<const int>(&last, 1), CallKind::first_token);
    // The raw language model: greedy, ended by config.json's and generation_config.json's eos ids
    // (not the chat format's).
    std::vector<token_id> eos_ids = info_.config.eos_token_ids;
    eos_ids.insert(eos_ids.end(), source_.generation_eos_ids.begin(), source_.generation_eos_ids.end());
    QueryOptions greedy;
    greedy.max_new_tokens = max_new_tokens;
    greedy.ignore_eos = ignore_eos;
    QueryResult run;
    run.timings.prefill_ms = submit.elapsed_ms();
    decode_loop(std::move(logits), view, greedy, eos_ids, {}, run, submit);
    GenerateResult out;
    out.ids = std::move(run.tokens);
    out.timings = run.timings;
    out.timings.total_ms = submit.elapsed_ms();
    if (tokenizer_) out.text = tokenizer_->decode(out.ids, true);
    return out;
}

std::vector<float> Engine::last_logits(const std::vector<token_id>& prompt_ids) {
    if (!backend_) throw std::logic_error("Engine: load_model() has not been called");
    if (prompt_ids.empty()) throw std::invalid_argument("logits: the prompt has no tokens");
    auto block = backend_->allocate_kv(static_cast<int>(prompt_ids.size()));
    const int last = static_cast<int>(prompt_ids.size()) - 1;
    return run_forward(prompt_ids, KvView{nullptr, 0, block.get()}, std::span<const int>(&last, 1));
}

std::vector<token_id> Engine::encode_prompt(const std::string& text) {
    return tokenizer().encode(text, EncodeMode::plain, /*add_special_tokens=*/true);
}

}  // namespace cc
