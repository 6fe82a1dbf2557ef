#include "ui/worker/engine_controller.h"

#include "core/base/paths.h"
#include "core/engine/backend_select.h"
#include "core/store/remote_tier.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include <QElapsedTimer>

#include <algorithm>
#include <chrono>
#include <exception>
#include <mutex>

namespace cc::ui {

void registerMetaTypes() {
    static const bool once = [] {
        qRegisterMetaType<cc::ModelInfo>();
        qRegisterMetaType<cc::CompileResult>();
        qRegisterMetaType<cc::QueryResult>();
        qRegisterMetaType<ModelRequest>();
        qRegisterMetaType<ToolsRequest>();
        qRegisterMetaType<QueryRequest>();
        qRegisterMetaType<SweepRequest>();
        qRegisterMetaType<Progress>();
        qRegisterMetaType<ToolsDescription>();
        qRegisterMetaType<TokenBatch>();
        qRegisterMetaType<QueryOutcome>();
        qRegisterMetaType<SweepPoint>();
        qRegisterMetaType<QList<SweepPoint>>();
        qRegisterMetaType<CacheSnapshot>();
        qRegisterMetaType<BenchRequest>();
        qRegisterMetaType<BenchOutcome>();
        qRegisterMetaType<EvalRequest>();
        qRegisterMetaType<cc::EvalRecord>();
        qRegisterMetaType<cc::EvalRunResult>();
        qRegisterMetaType<ChunkReuseRequest>();
        qRegisterMetaType<cc::ChunkReuseSweep>();
        return true;
    }();
    (void)once;
}

// ---- worker ----------------------------------------------------------------------------------

struct EngineWorker::State {
    std::mutex engineMutex;        // guards `engine` against cancel() from the GUI thread while it is replaced
    std::unique_ptr<cc::Engine> engine;
    cc::Engine* loading = nullptr; // the engine being loaded (also guarded by engineMutex)
    cc::Engine* bench = nullptr;   // the benchmark's own engine while it runs (also guarded by engineMutex)
    ModelRequest model;
    // the current tool set, to restore it after a sweep
    std::optional<cc::ToolSet> tools;
    std::string systemPrompt;
    // the per-tool NoPE experiment's composed prefix, kept while the tool set stays; a new one per model
    std::unique_ptr<cc::NopeExperiment> nope;
};

namespace {

// Emits jobStarted/jobFinished around a job and turns exceptions into failed()/cancelled().
template <typename Body>
void runJob(EngineWorker* worker, const QString& task, std::atomic<bool>& cancel, Body&& body) {
    cancel.store(false);
    emit worker->jobStarted(task);
    try {
        body();
    } catch (const cc::Cancelled&) {
        emit worker->cancelled(task);
    } catch (const std::exception& e) {
        emit worker->failed(task, QString::fromStdString(e.what()));
    }
    emit worker->jobFinished(task);
}

// Shows an engine that is not yet (or never) the current one to cancel() while this object lives.
class CancelSlot {
public:
    CancelSlot(std::mutex& mutex, cc::Engine*& slot, cc::Engine* engine) : m_mutex(mutex), m_slot(slot) {
        std::lock_guard lock(m_mutex);
        m_slot = engine;
    }
    ~CancelSlot() {
        std::lock_guard lock(m_mutex);
        m_slot = nullptr;
    }
    CancelSlot(const CancelSlot&) = delete;
    CancelSlot& operator=(const CancelSlot&) = delete;

private:
    std::mutex& m_mutex;
    cc::Engine*& m_slot;
};

cc::EngineOptions engineOptions(const ModelRequest& request, const std::shared_ptr<const cc::BackendRegistry>& backends) {
    cc::EngineOptions options;
    options.backends = backends;
    options.model_spec = request.spec;
    options.backend = request.backend;
    options.n_threads = request.threads;
    options.weights = cc::parse_weight_dtype(request.weights);
    // auto: as the CLI (app/cli_common.cpp), BF16 KV where the model will run on a GPU (half the
    // bytes to store, upload and read; what the tensor-core attention reads), the F32 reference on
    // the CPU. A model that cannot be planned fails its load below with its own error.
    options.kv_dtype = cc::KvDType::f32;
    if (request.kvDtype != "auto")
        options.kv_dtype = cc::parse_kv_dtype(request.kvDtype);
    else {
        try {
            if (cc::planned_numerics(options).rfind("cpu", 0) != 0) options.kv_dtype = cc::KvDType::bf16;
        } catch (const std::exception&) {
        }
    }
    options.cache_dir = request.cacheDir.empty() ? cc::default_cache_dir() : std::filesystem::path(request.cacheDir);
    options.cache.dir = options.cache_dir;
    options.cache.host_budget_bytes = request.hostBudgetBytes;
    options.cache.disk_budget_bytes = request.diskBudgetBytes;
    options.cache.gpu_budget_bytes = request.gpuBudgetBytes;
    options.cache.remote.url = request.remoteUrl;   // a bad URL throws here: the load fails, the previous model stays
    if (!request.remoteUrl.empty()) options.cache.remote.warm_bytes = static_cast<size_t>(request.remoteWarmBytes);
    return options;
}

using cc::median;

}  // namespace

cc::EngineOptions EngineController::engineOptions() const { return cc::ui::engineOptions(m_modelRequest, m_backends); }

QueryKind queryKindOf(cc::QueryMode mode) {
    switch (mode) {
        case cc::QueryMode::cached: return QueryKind::cached;
        case cc::QueryMode::full: return QueryKind::full;
        case cc::QueryMode::compare: return QueryKind::compare;
    }
    return QueryKind::cached;
}

const char* queryKindName(QueryKind kind) {
    switch (kind) {
        case QueryKind::cached: return "cached";
        case QueryKind::full: return "full";
        case QueryKind::compare: return "compare";
        case QueryKind::per_tool_nope: return "per_tool_nope";
    }
    return "?";
}

QString tierName(cc::Tier tier) { return QString::fromLatin1(cc::tier_name(tier)); }

std::optional<QueryKind> parseQueryKind(const QString& name) {
    for (const QueryKind k : {QueryKind::cached, QueryKind::full, QueryKind::compare, QueryKind::per_tool_nope})
        if (name == QLatin1String(queryKindName(k))) return k;
    return std::nullopt;
}

EngineWorker::EngineWorker(std::shared_ptr<const cc::BackendRegistry> backends, QObject* parent)
    : QObject(parent), m_state(std::make_unique<State>()), m_backends(std::move(backends)) {}
EngineWorker::~EngineWorker() = default;

void EngineWorker::cancel() {
    m_cancel.store(true);
    // The engine resets its own flag when a step starts; the progress and token callbacks
    // below re-assert it, so a cancel that lands between two steps is not lost.
    std::lock_guard lock(m_state->engineMutex);
    if (m_state->engine) m_state->engine->cancel();
    if (m_state->loading) m_state->loading->cancel();
    if (m_state->bench) m_state->bench->cancel();
}

void EngineWorker::loadModel(const ModelRequest& request) {
    runJob(this, QStringLiteral("load"), m_cancel, [&] {
        emit progress(Progress{QStringLiteral("load"), 0, 0, QStringLiteral("loading %1").arg(QString::fromStdString(request.spec))});
        const cc::EngineOptions options = engineOptions(request, m_backends);
        auto engine = std::make_unique<cc::Engine>(options);
        const CancelSlot loading(m_state->engineMutex, m_state->loading, engine.get());
        if (m_cancel.load()) throw cc::Cancelled();
        // Generating built-in weights stops at the next chunk on cancel (Cancelled); a checkpoint
        // directory is mapped, which has no step to stop at. Either way the previous model stays.
        const cc::ModelInfo info = engine->load_model();
        if (m_cancel.load()) throw cc::Cancelled();
        engine->set_progress_handler([this](const cc::EngineProgress& p) {
            if (m_cancel.load()) m_state->engine->cancel();
            emit progress(Progress{QString::fromStdString(p.stage), qint64(p.done), qint64(p.total),
                                   QStringLiteral("prefix %1 / %2 tokens").arg(p.done).arg(p.total)});
        });
        {
            std::lock_guard lock(m_state->engineMutex);
            std::swap(m_state->engine, engine);
        }
        m_state->nope.reset();  // its composed block belongs to the previous model's backend: freed first
        engine.reset();   // the previous model, outside the lock
        m_state->model = request;
        m_state->tools.reset();
        for (const auto& w : m_state->engine->cache_warnings()) emit warning(QString::fromStdString(w));
        emit modelLoaded(info);
        emit cacheChanged();
        // The remote tier connects lazily: ask it once now, so an unreachable Redis is said at
        // load, not discovered as unexplained misses.
        if (cc::RemoteTier* remote = m_state->engine->cache().remote()) {
            const QString problem = QString::fromStdString(remote->check());
            emit remoteChecked(QString::fromStdString(remote->describe()), problem);
            if (!problem.isEmpty())
                emit warning(QStringLiteral("remote tier unreachable, groups are compiled locally: %1").arg(problem));
        }
    });
}

namespace {

cc::Engine& loaded(const std::unique_ptr<cc::Engine>& engine) {
    if (!engine) throw std::runtime_error("no model is loaded");
    return *engine;
}

}  // namespace

void EngineWorker::describeTools(const ToolsRequest& request) {
    runJob(this, QStringLiteral("describe"), m_cancel, [&] {
        auto& engine = loaded(m_state->engine);
        const auto tools = cc::ToolSet::from_json_text(request.toolsJson, request.source);
        const auto preview = engine.preview_tools(tools, request.systemPrompt, /*explain=*/true);
        ToolsDescription d;
        d.toolsHash = preview.tools_hash;
        d.groupKey = preview.group_key;
        d.nTools = preview.n_tools;
        d.prefixTokens = preview.prefix_tokens;
        d.kvBytes = preview.kv_bytes;
        d.tier = preview.tier;
        if (preview.miss_reason) d.missReason = cc::miss_reason_text(*preview.miss_reason, preview.prefix_tokens);
        emit toolsDescribed(d);
    });
}

void EngineWorker::compileTools(const ToolsRequest& request) {
    runJob(this, QStringLiteral("compile"), m_cancel, [&] {
        auto& engine = loaded(m_state->engine);
        const auto tools = cc::ToolSet::from_json_text(request.toolsJson, request.source);
        const auto result = engine.set_tools(tools, request.systemPrompt);
        m_state->tools = tools;
        m_state->systemPrompt = request.systemPrompt;
        if (!result.problem.empty()) emit warning(QString::fromStdString(result.problem));
        emit compiled(result);
        if (!result.cache_hit) emit cacheChanged();
        // The group file is written in the background; report a failed write once it is known.
        for (const auto& p : engine.wait_for_persist())
            if (!p.ok) emit warning(QStringLiteral("group not saved: %1").arg(QString::fromStdString(p.error)));
        for (const auto& w : engine.cache_warnings()) emit warning(QString::fromStdString(w));
        if (!result.cache_hit) emit cacheChanged();
    });
}

void EngineWorker::runQuery(const QueryRequest& request) {
    runJob(this, QStringLiteral("query"), m_cancel, [&] {
        auto& engine = loaded(m_state->engine);
        if (!engine.current_tools() || (request.messages && !m_state->tools))
            throw std::runtime_error("no tool set is compiled: load a tool set and press Compile");
        if (request.messages && request.kind == QueryKind::per_tool_nope)
            throw std::runtime_error("the per-tool NoPE experiment answers single queries, not conversations");
        // Tokens reach the window in batches (at most one signal per 30 ms), not one signal each.
        TokenBatch batch;
        batch.requestId = request.id;
        QElapsedTimer sinceFlush;
        sinceFlush.start();
        const int total = request.options.max_new_tokens;
        auto flush = [&] {
            if (batch.nTokens == 0) return;
            emit tokens(batch);
            emit progress(Progress{QStringLiteral("query"), qint64(batch.nTokens), qint64(total), QString()});
            batch.text.clear();
            batch.nTokens = 0;
            sinceFlush.restart();
        };
        auto onToken = [&](const cc::TokenEvent& event) {
            if (m_cancel.load()) engine.cancel();
            batch.text += QString::fromStdString(event.text);
            ++batch.nTokens;
            if (sinceFlush.elapsed() >= 30) flush();
        };
        emit progress(Progress{QStringLiteral("query"), 0, qint64(total),
                               QStringLiteral("%1 prefill").arg(QString::fromUtf8(queryKindName(request.kind)))});
        QueryOutcome outcome;
        outcome.requestId = request.id;
        outcome.query = request.text;
        outcome.nTools = static_cast<int>(engine.current_tools()->n_tools);
        outcome.turn = request.turn;
        if (request.messages) {
            // The tool set the user compiled last (a sweep or an evaluation leaves it current again).
            const cc::ChatRequest chat{*m_state->tools, m_state->systemPrompt, *request.messages, request.render};
            outcome.nTools = static_cast<int>(m_state->tools->size());
            outcome.result = engine.chat(chat, request.options, onToken);
        } else if (request.kind == QueryKind::per_tool_nope) {
            if (!m_state->nope) m_state->nope = std::make_unique<cc::NopeExperiment>();
            cc::NopeRun run = m_state->nope->run(engine, request.text, request.options, onToken);
            outcome.result = std::move(run.composed);
            outcome.result.full = std::make_shared<cc::QueryResult>(std::move(run.full));
            outcome.nope = std::move(run.report);
        } else {
            outcome.result = engine.query(request.text, request.options, onToken);
        }
        flush();
        // The per-step logits are for the engine's comparison; the window needs none of them.
        outcome.result.step_logits.clear();
        if (outcome.result.full) outcome.result.full->step_logits.clear();
        if (!outcome.result.problem.empty()) emit warning(QString::fromStdString(outcome.result.problem));
        emit queryFinished(outcome);
        if (outcome.result.stop_reason == cc::StopReason::cancelled) emit cancelled(QStringLiteral("query"));
        for (const auto& p : engine.wait_for_persist())
            if (!p.ok) emit warning(QStringLiteral("group not saved: %1").arg(QString::fromStdString(p.error)));
        // A hit in the first tier changes nothing listed; any other tier promotes (or compiles).
        const cc::Tier firstTier = engine.cache().on_device() ? cc::Tier::gpu : cc::Tier::memory;
        if (outcome.result.tier != firstTier) emit cacheChanged();
    });
}

void EngineWorker::runSweep(const SweepRequest& request) {
    runJob(this, QStringLiteral("sweep"), m_cancel, [&] {
        auto& engine = loaded(m_state->engine);
        // The benchmark's own loop (core/research/paper_bench), on the user's engine and store:
        // no forced miss, one query per set, no warm-up.
        cc::PaperBenchOptions o;
        for (const auto& set : request.sets)
            o.tool_sets.push_back(cc::BenchToolSet{set.name, cc::ToolSet::from_json_text(set.toolsJson, set.name), {set.query}});
        o.queries = {""};  // unused: every set has its own query
        o.n_queries = std::max(1, request.repeats);
        o.warmup = 0;
        o.max_new_tokens = request.maxNewTokens;
        o.system_prompt = request.systemPrompt;
        o.force_miss = false;
        QList<SweepPoint> points;
        auto emitRow = [&](const cc::PaperBenchRow& row) {
            SweepPoint point;
            point.name = row.tool_set;
            point.nTools = row.n_tools;
            point.prefixTokens = row.prefix_tokens;
            point.compileMs = row.compile_ms;
            point.cachedTtftMs = median(row.cached_ttft_ms);
            point.fullTtftMs = median(row.full_ttft_ms);
            point.cachedLinkMs = median(row.cached_link_ms);
            point.cachedPrefillMs = median(row.cached_prefill_ms);
            point.identical = size_t(row.identical_outputs) == row.full_ttft_ms.size();
            points.append(point);
            emit sweepPoint(point);
        };
        cc::run_paper_bench(engine, o, [&](const cc::PaperBenchProgress& p) {
            if (p.finished_row) return emitRow(*p.finished_row);
            emit progress(Progress{QStringLiteral("sweep"), p.done, p.total, QString::fromStdString(p.text)});
            if (m_cancel.load()) throw cc::Cancelled();
        });
        engine.wait_for_persist();
        // Leave the user's tool set current again (a memory hit).
        if (m_state->tools) emit compiled(engine.set_tools(*m_state->tools, m_state->systemPrompt));
        emit sweepFinished(points);
        emit cacheChanged();
    });
}

void EngineWorker::runBench(const BenchRequest& request) {
    runJob(this, QStringLiteral("bench"), m_cancel, [&] {
        loaded(m_state->engine);  // the loaded model's request is the one benchmarked
        cc::PaperBenchOptions o;
        for (const int n : request.toolCounts) o.tool_sets.push_back(cc::bundled_tool_set(n));
        o.queries = cc::bundled_queries();
        o.n_queries = request.nQueries;
        o.warmup = request.warmup;
        o.max_new_tokens = request.maxNewTokens;
        o.system_prompt = request.systemPrompt;
        emit progress(Progress{QStringLiteral("bench"), 0, 0, QStringLiteral("loading a second engine (memory-only cache)")});
        cc::EngineOptions options = engineOptions(m_state->model, m_backends);
        options.cache.dir.clear();
        auto engine = std::make_unique<cc::Engine>(options);
        const CancelSlot benchSlot(m_state->engineMutex, m_state->bench, engine.get());
        if (m_cancel.load()) throw cc::Cancelled();
        BenchOutcome outcome;
        outcome.model = engine->load_model();
        outcome.rows = cc::run_paper_bench(*engine, o, [&](const cc::PaperBenchProgress& p) {
            if (p.finished_row) return;  // the tab shows the rows when the run ends
            emit progress(Progress{QStringLiteral("bench"), p.done, p.total, QString::fromStdString(p.text)});
            if (m_cancel.load()) throw cc::Cancelled();
        });
        outcome.options = std::move(o);
        emit benchFinished(outcome);
    });
}

namespace {

// A dataset file, or a Qt resource whose tools_file values are resolved inside the resources.
cc::EvalDataset loadEvalDataset(const std::string& path) {
    if (!path.starts_with(":/")) return cc::load_eval_dataset(path);
    const QString name = QString::fromStdString(path);
    auto read = [](const QString& resource) {
        QFile file(resource);
        if (!file.open(QIODevice::ReadOnly)) throw std::runtime_error(resource.toStdString() + ": cannot open");
        return file.readAll().toStdString();
    };
    const QString dir = QFileInfo(name).path();
    return cc::parse_eval_dataset(read(name), path, [&](const std::string& toolsFile) {
        const QString resource = QDir::cleanPath(dir + QLatin1Char('/') + QString::fromStdString(toolsFile));
        return cc::ToolSet::from_json_text(read(resource), resource.toStdString());
    });
}

}  // namespace

void EngineWorker::runEval(const EvalRequest& request) {
    runJob(this, QStringLiteral("eval"), m_cancel, [&] {
        auto& engine = loaded(m_state->engine);
        const auto dataset = loadEvalDataset(request.datasetPath);
        const size_t total = request.options.limit ? std::min(request.options.limit, dataset.examples.size()) : dataset.examples.size();
        emit progress(Progress{QStringLiteral("eval"), 0, qint64(total), QStringLiteral("%1 examples").arg(total)});
        // run_eval checks m_cancel between examples; cancel() also stops the query in flight.
        auto result = cc::run_eval(engine, dataset, request.options, [&](const cc::EvalProgress& p) {
            emit evalRecord(*p.last);
            emit progress(Progress{QStringLiteral("eval"), qint64(p.done), qint64(p.total),
                                   QStringLiteral("%1 / %2 examples").arg(p.done).arg(p.total)});
        }, &m_cancel);
        engine.wait_for_persist();
        // Leave the user's tool set current again, as after a sweep.
        if (m_state->tools) emit compiled(engine.set_tools(*m_state->tools, m_state->systemPrompt));
        emit evalFinished(result);
        if (result.cancelled) emit cancelled(QStringLiteral("eval"));
        emit cacheChanged();
    });
}

void EngineWorker::runChunkReuse(const ChunkReuseRequest& request) {
    runJob(this, QStringLiteral("chunk_reuse"), m_cancel, [&] {
        auto& engine = loaded(m_state->engine);
        const auto dataset = loadEvalDataset(request.datasetPath);
        const size_t total = request.options.limit ? std::min(request.options.limit, dataset.examples.size()) : dataset.examples.size();
        emit progress(Progress{QStringLiteral("chunk_reuse"), 0, qint64(total), QStringLiteral("%1 examples").arg(total)});
        auto sweep = cc::run_chunk_reuse_sweep(engine, dataset, request.settings, request.options, [&](size_t done, size_t n) {
            emit progress(Progress{QStringLiteral("chunk_reuse"), qint64(done), qint64(n),
                                   QStringLiteral("%1 / %2 examples").arg(done).arg(n)});
        }, &m_cancel);
        engine.wait_for_persist();
        if (m_state->tools) emit compiled(engine.set_tools(*m_state->tools, m_state->systemPrompt));
        emit chunkReuseFinished(sweep);
        if (sweep.cancelled) emit cancelled(QStringLiteral("chunk_reuse"));
        emit cacheChanged();
    });
}

void EngineWorker::listCache() {
    runJob(this, QStringLiteral("cache"), m_cancel, [&] {
        auto& store = loaded(m_state->engine).cache();
        CacheSnapshot s;
        s.groups = store.list();
        s.dir = store.persistent() ? store.options().dir.string() : std::string();
        s.memoryBytes = store.memory_bytes();
        s.hostBudgetBytes = store.options().host_budget_bytes;
        s.diskBytes = store.persistent() ? store.disk_bytes() : 0;
        s.diskBudgetBytes = store.options().disk_budget_bytes;
        s.onDevice = store.on_device();
        s.gpuBytes = store.gpu_bytes();
        s.gpuBudgetBytes = store.options().gpu_budget_bytes;
        emit cacheListed(s);
    });
}

void EngineWorker::verifyCache() {
    runJob(this, QStringLiteral("verify"), m_cancel, [&] {
        emit progress(Progress{QStringLiteral("verify"), 0, 0, QStringLiteral("reading every group file")});
        const auto problems = loaded(m_state->engine).cache().verify();
        QStringList out;
        for (const auto& p : problems) out << QString::fromStdString(p);
        emit cacheVerified(out);
        if (!out.isEmpty()) emit cacheChanged();
    });
}

void EngineWorker::removeGroup(const QString& groupKey) {
    runJob(this, QStringLiteral("cache"), m_cancel, [&] {
        if (!loaded(m_state->engine).cache().remove(groupKey.toStdString()))
            throw std::runtime_error(groupKey.toStdString() + ": no such group");
        emit cacheChanged();
    });
}

void EngineWorker::evictGroup(const QString& groupKey) {
    runJob(this, QStringLiteral("cache"), m_cancel, [&] {
        if (!loaded(m_state->engine).cache().drop_from_memory(groupKey.toStdString()))
            throw std::runtime_error(groupKey.toStdString() + ": not in the memory tier (or in use)");
        emit cacheChanged();
    });
}

void EngineWorker::clearCache() {
    runJob(this, QStringLiteral("cache"), m_cancel, [&] {
        loaded(m_state->engine).cache().clear();
        emit cacheChanged();
    });
}

// ---- controller ------------------------------------------------------------------------------

EngineController::EngineController(QObject* parent) : EngineController(nullptr, parent) {}

EngineController::EngineController(std::shared_ptr<const cc::BackendRegistry> backends, QObject* parent)
    : QObject(parent), m_backends(backends ? std::move(backends) : cc::cpu_only_backends()) {
    registerMetaTypes();
    m_worker = new EngineWorker(m_backends);
    m_worker->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    m_thread.setObjectName(QStringLiteral("engine"));

    // requests: queued into the worker's thread
    const auto q = Qt::QueuedConnection;
    connect(this, &EngineController::requestLoadModel, m_worker, &EngineWorker::loadModel, q);
    connect(this, &EngineController::requestDescribeTools, m_worker, &EngineWorker::describeTools, q);
    connect(this, &EngineController::requestCompileTools, m_worker, &EngineWorker::compileTools, q);
    connect(this, &EngineController::requestQuery, m_worker, &EngineWorker::runQuery, q);
    connect(this, &EngineController::requestSweep, m_worker, &EngineWorker::runSweep, q);
    connect(this, &EngineController::requestBench, m_worker, &EngineWorker::runBench, q);
    connect(this, &EngineController::requestEval, m_worker, &EngineWorker::runEval, q);
    connect(this, &EngineController::requestChunkReuse, m_worker, &EngineWorker::runChunkReuse, q);
    connect(this, &EngineController::requestListCache, m_worker, &EngineWorker::listCache, q);
    connect(this, &EngineController::requestVerifyCache, m_worker, &EngineWorker::verifyCache, q);
    connect(this, &EngineController::requestRemoveGroup, m_worker, &EngineWorker::removeGroup, q);
    connect(this, &EngineController::requestEvictGroup, m_worker, &EngineWorker::evictGroup, q);
    connect(this, &EngineController::requestClearCache, m_worker, &EngineWorker::clearCache, q);

    // answers: queued back to this (GUI) thread
    connect(m_worker, &EngineWorker::jobStarted, this, [this](const QString& task) {
        m_task = task;
        emit busyChanged(true, task);
    }, q);
    connect(m_worker, &EngineWorker::jobFinished, this, [this](const QString& task) {
        if (--m_pending <= 0) {
            m_pending = 0;
            m_task.clear();
            emit busyChanged(false, task);
        }
    }, q);
    connect(m_worker, &EngineWorker::modelLoaded, this, [this](const cc::ModelInfo& info) {
        m_model = info;
        m_tools.reset();
        emit modelLoaded(info);
    }, q);
    connect(m_worker, &EngineWorker::compiled, this, [this](const cc::CompileResult& result) {
        m_tools = result;
        emit compiled(result);
    }, q);
    connect(m_worker, &EngineWorker::progress, this, &EngineController::progress, q);
    connect(m_worker, &EngineWorker::failed, this, &EngineController::failed, q);
    connect(m_worker, &EngineWorker::cancelled, this, &EngineController::cancelled, q);
    connect(m_worker, &EngineWorker::warning, this, &EngineController::warning, q);
    connect(m_worker, &EngineWorker::remoteChecked, this, &EngineController::remoteChecked, q);
    connect(m_worker, &EngineWorker::toolsDescribed, this, &EngineController::toolsDescribed, q);
    connect(m_worker, &EngineWorker::tokens, this, &EngineController::tokens, q);
    connect(m_worker, &EngineWorker::queryFinished, this, &EngineController::queryFinished, q);
    connect(m_worker, &EngineWorker::sweepPoint, this, &EngineController::sweepPoint, q);
    connect(m_worker, &EngineWorker::sweepFinished, this, &EngineController::sweepFinished, q);
    connect(m_worker, &EngineWorker::benchFinished, this, &EngineController::benchFinished, q);
    connect(m_worker, &EngineWorker::evalRecord, this, &EngineController::evalRecord, q);
    connect(m_worker, &EngineWorker::evalFinished, this, &EngineController::evalFinished, q);
    connect(m_worker, &EngineWorker::chunkReuseFinished, this, &EngineController::chunkReuseFinished, q);
    connect(m_worker, &EngineWorker::cacheListed, this, &EngineController::cacheListed, q);
    connect(m_worker, &EngineWorker::cacheVerified, this, &EngineController::cacheVerified, q);
    connect(m_worker, &EngineWorker::cacheChanged, this, &EngineController::cacheChanged, q);
    m_thread.start();
}

EngineController::~EngineController() {
    m_worker->cancel();
    m_thread.quit();   // the running job stops at its next layer/token; queued requests are dropped
    m_thread.wait();
}

void EngineController::loadModel(const ModelRequest& request) {
    ++m_pending;
    m_modelRequest = request;
    emit requestLoadModel(request);
}
void EngineController::describeTools(const ToolsRequest& request) { ++m_pending; emit requestDescribeTools(request); }
void EngineController::compileTools(const ToolsRequest& request) { ++m_pending; emit requestCompileTools(request); }
uint64_t EngineController::runQuery(const std::string& text, const cc::QueryOptions& options) {
    return runQuery(text, options, queryKindOf(options.mode));
}

uint64_t EngineController::runQuery(const std::string& text, const cc::QueryOptions& options, QueryKind kind) {
    QueryRequest request;
    request.id = m_nextQueryId++;
    request.text = text;
    request.options = options;
    request.kind = kind;
    ++m_pending;
    emit requestQuery(request);
    return request.id;
}
uint64_t EngineController::runChat(const std::vector<cc::ChatMessage>& messages, const cc::QueryOptions& options,
                                   int turn, const std::string& label, const cc::RenderOptions& render) {
    QueryRequest request;
    request.id = m_nextQueryId++;
    request.text = label;
    request.options = options;
    request.kind = queryKindOf(options.mode);
    request.messages = messages;
    request.render = render;
    request.turn = turn;
    ++m_pending;
    emit requestQuery(request);
    return request.id;
}
void EngineController::runSweep(const SweepRequest& request) { ++m_pending; emit requestSweep(request); }
void EngineController::runBench(const BenchRequest& request) { ++m_pending; emit requestBench(request); }
void EngineController::runEval(const EvalRequest& request) { ++m_pending; emit requestEval(request); }
void EngineController::runChunkReuse(const ChunkReuseRequest& request) { ++m_pending; emit requestChunkReuse(request); }
void EngineController::listCache() { ++m_pending; emit requestListCache(); }
void EngineController::verifyCache() { ++m_pending; emit requestVerifyCache(); }
void EngineController::removeGroup(const QString& groupKey) { ++m_pending; emit requestRemoveGroup(groupKey); }
void EngineController::evictGroup(const QString& groupKey) { ++m_pending; emit requestEvictGroup(groupKey); }
void EngineController::clearCache() { ++m_pending; emit requestClearCache(); }
void EngineController::cancel() { m_worker->cancel(); }

}  // namespace cc::ui
