// The app's bridge to the engine (DESIGN §10, STYLE "Qt's own threading examples").
//
// EngineWorker owns the cc::Engine and lives on a worker QThread; EngineController lives on the
// GUI thread, owns that thread and the worker, and is what the panels talk to. Requests cross to
// the worker as queued signals, answers come back as queued signals carrying plain value types
// (registered with Q_DECLARE_METATYPE). Nothing here blocks the GUI thread: no
// BlockingQueuedConnection, no waiting on a future. cancel() is the one direct call: it sets an
// atomic flag the engine checks between layers and tokens.
#pragma once

#include "core/engine/engine.h"
#include "core/text/conversation.h"
#include "core/research/paper_bench.h"
#include "core/research/chunk_reuse.h"
#include "core/research/eval_runner.h"
#include "core/research/nope.h"

#include <QList>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QThread>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cc::ui {

// ---- requests (GUI -> worker) ----------------------------------------------------------------

struct ModelRequest {
    std::string spec = cc::default_model_spec();  // builtin:NAME or an HF model directory
    std::string backend = "auto";               // auto | cpu | cuda
    int threads = 0;                            // 0 = all cores
    std::string kvDtype = "auto";               // auto | f32 | bf16 (auto: bf16 on a GPU, f32 on the CPU)
    std::string weights = "stored";             // stored | f32 | bf16 | q8 | bf16dot (CPU backend)
    std::string cacheDir;                       // "" = cc::default_cache_dir()
    uint64_t hostBudgetBytes = uint64_t(4) << 30;
    uint64_t diskBudgetBytes = uint64_t(32) << 30;
    uint64_t gpuBudgetBytes = uint64_t(8) << 30;  // the GPU tier (CUDA backend only)
    std::string remoteUrl;                      // the shared Redis tier, redis://host:port[/db]; "" = none
    // Resident memory kept warm for groups fetched from the remote tier (as serve's --remote-warm-mb:
    // a long-lived process), used only with a remote URL; 0 = fetches land in fresh memory.
    uint64_t remoteWarmBytes = uint64_t(256) << 20;
};

struct ToolsRequest {
    std::string toolsJson;      // the enabled tools: a JSON array (or {"tools": [...]}) as text
    std::string source;         // shown in errors: a file name or "<editor>"
    std::string systemPrompt;
};

// What the Query panel runs: one of the engine's modes, or the per-tool NoPE experiment
// (core/research/nope.h: each tool compiled alone, composed with deferred RoPE, vs a full prefill).
enum class QueryKind { cached, full, compare, per_tool_nope };
QueryKind queryKindOf(cc::QueryMode mode);
const char* queryKindName(QueryKind kind);              // "cached" | "full" | "compare" | "per_tool_nope"
std::optional<QueryKind> parseQueryKind(const QString& name);
QString tierName(cc::Tier tier);                        // cc::tier_name as a label

struct QueryRequest {
    uint64_t id = 0;            // assigned by EngineController::runQuery / runChat
    std::string text;           // a query; for a conversation turn, what the history shows for it
    cc::QueryOptions options;   // options.mode is used for the engine's kinds
    QueryKind kind = QueryKind::cached;
    // A conversation turn (Engine::chat) when set: every message so far, rendered after the
    // compiled tool set and its system prompt. The engine's modes only (not per_tool_nope).
    std::optional<std::vector<cc::ChatMessage>> messages;
    cc::RenderOptions render;
    int turn = 0;               // 1-based turn of the conversation; 0 for a single query
};

struct SweepSet {
    std::string name;           // e.g. "tools_20"
    std::string toolsJson;
    std::string query;
};

struct SweepRequest {
    std::vector<SweepSet> sets; // run in this order
    std::string systemPrompt;
    int repeats = 3;            // per mode per set; the median is plotted
    int maxNewTokens = 8;
};

// The paper's Tables 2 and 3 (core/research/paper_bench) on an engine of its own: the same model, a
// memory-only store, so every compile is a forced miss and the user's cache is neither read nor changed.
struct BenchRequest {
    std::vector<int> toolCounts{5, 10, 20, 50, 100};  // bundled tool sets (first N tools of tools_100.json)
    int nQueries = 30;
    int warmup = 2;
    int maxNewTokens = 16;
    std::string systemPrompt;
};

struct EvalRequest {
    std::string datasetPath;    // a JSONL file, or a Qt resource (":/eval/tool_calls.jsonl") whose
                                // tools_file values resolve inside the resources
    cc::EvalRunOptions options; // mode, limit, max_new_tokens, default system prompt
};

// The approximate chunk-reuse experiment (core/research/chunk_reuse.h) over a dataset.
struct ChunkReuseRequest {
    std::string datasetPath;    // as EvalRequest
    std::vector<cc::ChunkRecompute> settings;
    cc::ChunkReuseSweepOptions options;
};

// ---- answers (worker -> GUI) -----------------------------------------------------------------

struct Progress {
    QString task;               // "load" | "compile" | "query" | "sweep" | "verify"
    qint64 done = 0;
    qint64 total = 0;           // 0 = indeterminate
    QString text;               // e.g. "prefix 1,024 / 2,952 tokens"
};

struct ToolsDescription {
    std::string toolsHash;
    std::string groupKey;
    size_t nTools = 0;
    size_t prefixTokens = 0;
    size_t kvBytes = 0;         // canonical KV bytes of the prefix
    cc::Tier tier = cc::Tier::miss;  // the tier holding the group (miss: not cached)
    // Not cached: why (miss_reason_text: one line per nearest stored group, best first; or that
    // there is none). "" when cached.
    std::string missReason;
};

struct TokenBatch {
    uint64_t requestId = 0;
    QString text;               // the UTF-8 text these tokens completed
    int nTokens = 0;
    bool fullRun = false;       // compare mode: the tokens of the full-prefill run
};

struct QueryOutcome {
    uint64_t requestId = 0;
    std::string query;
    int nTools = 0;
    int turn = 0;               // the conversation turn (QueryRequest::turn); 0 for a single query
    cc::QueryResult result;     // result.full is set in compare mode and for per_tool_nope
    std::optional<cc::NopeReport> nope;  // per_tool_nope: the composed run vs the full prefill
};

struct SweepPoint {
    std::string name;
    size_t nTools = 0;
    size_t prefixTokens = 0;
    double compileMs = 0;
    double cachedTtftMs = 0;    // medians over the repeats
    double fullTtftMs = 0;
    double cachedLinkMs = 0;
    double cachedPrefillMs = 0;
    bool identical = true;      // every cached run gave the full run's tokens
};

struct BenchOutcome {
    cc::PaperBenchOptions options;    // as run
    std::vector<cc::PaperBenchRow> rows;
    cc::ModelInfo model;              // the benchmark engine's (same model, threads and backend)
};

struct CacheSnapshot {
    std::vector<cc::GroupInfo> groups;  // most recently used first
    std::string dir;            // "" for a memory-only store
    uint64_t memoryBytes = 0;
    uint64_t hostBudgetBytes = 0;
    uint64_t diskBytes = 0;
    uint64_t diskBudgetBytes = 0;
    bool onDevice = false;      // the backend keeps KV on a GPU: a "gpu" tier precedes memory
    uint64_t gpuBytes = 0;
    uint64_t gpuBudgetBytes = 0;
};

// ---- the worker (worker thread) --------------------------------------------------------------

class EngineWorker : public QObject {
    Q_OBJECT
public:
    // backends: what the program wired (app/backends.h); null = the CPU backend alone.
    explicit EngineWorker(std::shared_ptr<const cc::BackendRegistry> backends, QObject* parent = nullptr);
    ~EngineWorker() override;

    // Any thread: stops the running job at its next layer/token/step.
    void cancel();

public slots:
    void loadModel(const cc::ui::ModelRequest& request);
    void describeTools(const cc::ui::ToolsRequest& request);
    void compileTools(const cc::ui::ToolsRequest& request);
    void runQuery(const cc::ui::QueryRequest& request);
    void runSweep(const cc::ui::SweepRequest& request);
    void runBench(const cc::ui::BenchRequest& request);
    void runEval(const cc::ui::EvalRequest& request);
    void runChunkReuse(const cc::ui::ChunkReuseRequest& request);
    void listCache();
    void verifyCache();
    void removeGroup(const QString& groupKey);
    void evictGroup(const QString& groupKey);
    void clearCache();

signals:
    void jobStarted(const QString& task);
    void jobFinished(const QString& task);   // after success, failure or cancellation
    void progress(const cc::ui::Progress& progress);
    void failed(const QString& task, const QString& message);
    void cancelled(const QString& task);
    void warning(const QString& message);    // cache problems (quarantined files, failed writes)

    void modelLoaded(const cc::ModelInfo& info);
    // After a load with a remote tier: `where` is its URL without the password, `problem` ""
    // when Redis answered, else why not (the engine works on: lookups miss it, compiles stay local).
    void remoteChecked(const QString& where, const QString& problem);
    void toolsDescribed(const cc::ui::ToolsDescription& description);
    void compiled(const cc::CompileResult& result);
    void tokens(const cc::ui::TokenBatch& batch);
    void queryFinished(const cc::ui::QueryOutcome& outcome);
    void sweepPoint(const cc::ui::SweepPoint& point);
    void sweepFinished(const QList<cc::ui::SweepPoint>& points);
    void benchFinished(const cc::ui::BenchOutcome& outcome);
    void evalRecord(const cc::EvalRecord& record);          // one example done
    void evalFinished(const cc::EvalRunResult& result);     // also after a cancel (partial)
    void chunkReuseFinished(const cc::ChunkReuseSweep& sweep);  // also after a cancel (partial)
    void cacheListed(const cc::ui::CacheSnapshot& snapshot);
    void cacheVerified(const QStringList& problems);
    void cacheChanged();                     // compiled, evicted, removed or cleared

private:
    struct State;
    std::unique_ptr<State> m_state;
    std::shared_ptr<const cc::BackendRegistry> m_backends;
    std::atomic<bool> m_cancel{false};
};

// ---- the controller (GUI thread) -------------------------------------------------------------

class EngineController : public QObject {
    Q_OBJECT
public:
    explicit EngineController(QObject* parent = nullptr);  // the CPU backend alone
    // backends: what the program wired (app/backends.h); null = the CPU backend alone.
    explicit EngineController(std::shared_ptr<const cc::BackendRegistry> backends, QObject* parent = nullptr);
    // Cancels the running job, then quit() + wait() on the worker thread.
    ~EngineController() override;

    bool busy() const { return !m_task.isEmpty(); }
    QString currentTask() const { return m_task; }
    const cc::ModelInfo* modelInfo() const { return m_model ? &*m_model : nullptr; }
    const cc::CompileResult* currentTools() const { return m_tools ? &*m_tools : nullptr; }
    const ModelRequest& lastModelRequest() const { return m_modelRequest; }
    // The engine options of the last model request (what the app's engine was built with), for
    // another engine on the same model and cache directory (the Server panel's).
    cc::EngineOptions engineOptions() const;
    EngineWorker* worker() const { return m_worker; }   // for connecting to its signals
    // The GPU probe of the wired backends (any thread; it initialises the driver, so not on the
    // GUI thread), and whether a GPU backend was wired at all.
    cc::CudaProbeSummary probeGpu() const { return m_backends->probe_gpu(); }
    bool gpuBackendBuilt() const { return m_backends->find("cuda") != nullptr; }

    // Queue requests; each returns immediately. Jobs run one after another in request order.
    void loadModel(const ModelRequest& request);
    void describeTools(const ToolsRequest& request);
    void compileTools(const ToolsRequest& request);
    // Returns the request id. Runs options.mode, or the per-tool NoPE experiment when `kind` says so.
    uint64_t runQuery(const std::string& text, const cc::QueryOptions& options);
    uint64_t runQuery(const std::string& text, const cc::QueryOptions& options, QueryKind kind);
    // A conversation turn: Engine::chat on the compiled tool set + system prompt and `messages`
    // (the history so far, ending with a user message or tool results). Answers as runQuery does
    // (tokens, queryFinished with QueryOutcome::turn, failed/cancelled under the task "query").
    // `label` is the outcome's query text (the user's message, or a note for tool results).
    uint64_t runChat(const std::vector<cc::ChatMessage>& messages, const cc::QueryOptions& options, int turn,
                     const std::string& label, const cc::RenderOptions& render = {});
    void runSweep(const SweepRequest& request);
    void runBench(const BenchRequest& request);
    void runEval(const EvalRequest& request);
    void runChunkReuse(const ChunkReuseRequest& request);
    void listCache();
    void verifyCache();
    void removeGroup(const QString& groupKey);
    void evictGroup(const QString& groupKey);
    void clearCache();
    void cancel();   // the running job (queued ones still run)

signals:
    // Re-emitted from the worker (already on the GUI thread) so panels connect in one place.
    void busyChanged(bool busy, const QString& task);
    void progress(const cc::ui::Progress& progress);
    void failed(const QString& task, const QString& message);
    void cancelled(const QString& task);
    void warning(const QString& message);
    void modelLoaded(const cc::ModelInfo& info);
    void remoteChecked(const QString& where, const QString& problem);   // EngineWorker::remoteChecked
    void toolsDescribed(const cc::ui::ToolsDescription& description);
    void compiled(const cc::CompileResult& result);
    void tokens(const cc::ui::TokenBatch& batch);
    void queryFinished(const cc::ui::QueryOutcome& outcome);
    void sweepPoint(const cc::ui::SweepPoint& point);
    void sweepFinished(const QList<cc::ui::SweepPoint>& points);
    void benchFinished(const cc::ui::BenchOutcome& outcome);
    void evalRecord(const cc::EvalRecord& record);
    void evalFinished(const cc::EvalRunResult& result);
    void chunkReuseFinished(const cc::ChunkReuseSweep& sweep);
    void cacheListed(const cc::ui::CacheSnapshot& snapshot);
    void cacheVerified(const QStringList& problems);
    void cacheChanged();

    // internal: queued into the worker
    void requestLoadModel(const cc::ui::ModelRequest& request);
    void requestDescribeTools(const cc::ui::ToolsRequest& request);
    void requestCompileTools(const cc::ui::ToolsRequest& request);
    void requestQuery(const cc::ui::QueryRequest& request);
    void requestSweep(const cc::ui::SweepRequest& request);
    void requestBench(const cc::ui::BenchRequest& request);
    void requestEval(const cc::ui::EvalRequest& request);
    void requestChunkReuse(const cc::ui::ChunkReuseRequest& request);
    void requestListCache();
    void requestVerifyCache();
    void requestRemoveGroup(const QString& groupKey);
    void requestEvictGroup(const QString& groupKey);
    void requestClearCache();

private:
    QThread m_thread;
    EngineWorker* m_worker = nullptr;   // lives on m_thread; deleted when it finishes
    QString m_task;
    int m_pending = 0;
    uint64_t m_nextQueryId = 1;
    ModelRequest m_modelRequest;
    std::shared_ptr<const cc::BackendRegistry> m_backends;  // never null
    std::optional<cc::ModelInfo> m_model;
    std::optional<cc::CompileResult> m_tools;
};

void registerMetaTypes();   // once, before the first connection (EngineController's constructor calls it)

}  // namespace cc::ui

Q_DECLARE_METATYPE(cc::ModelInfo)
Q_DECLARE_METATYPE(cc::CompileResult)
Q_DECLARE_METATYPE(cc::QueryResult)
Q_DECLARE_METATYPE(cc::ui::ModelRequest)
Q_DECLARE_METATYPE(cc::ui::ToolsRequest)
Q_DECLARE_METATYPE(cc::ui::QueryRequest)
Q_DECLARE_METATYPE(cc::ui::SweepRequest)
Q_DECLARE_METATYPE(cc::ui::Progress)
Q_DECLARE_METATYPE(cc::ui::ToolsDescription)
Q_DECLARE_METATYPE(cc::ui::TokenBatch)
Q_DECLARE_METATYPE(cc::ui::QueryOutcome)
Q_DECLARE_METATYPE(cc::ui::SweepPoint)
Q_DECLARE_METATYPE(cc::ui::CacheSnapshot)
Q_DECLARE_METATYPE(cc::ui::BenchRequest)
Q_DECLARE_METATYPE(cc::ui::BenchOutcome)
Q_DECLARE_METATYPE(cc::ui::EvalRequest)
Q_DECLARE_METATYPE(cc::EvalRecord)
Q_DECLARE_METATYPE(cc::EvalRunResult)
Q_DECLARE_METATYPE(cc::ui::ChunkReuseRequest)
Q_DECLARE_METATYPE(cc::ChunkReuseSweep)
