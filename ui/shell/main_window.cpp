#include "ui/shell/main_window.h"

#include "core/model/builtin_model.h"

#include "ui/research/bench_panel.h"
#include "ui/research/chunk_reuse_panel.h"
#include "ui/panels/cache_panel.h"
#include "ui/research/eval_panel.h"
#include "ui/widgets/icons.h"
#include "ui/widgets/message_banner.h"
#include "ui/panels/model_panel.h"
#include "ui/panels/query_panel.h"
#include "ui/panels/server_panel.h"
#include "ui/widgets/resources.h"
#include "ui/panels/timings_panel.h"
#include "ui/panels/tool_set_panel.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDockWidget>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QMenuBar>
#include <QProgressBar>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QStyleHints>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <unistd.h>

#include <fstream>

namespace cc::ui {

namespace {

constexpr int kStateVersion = 1;        // bump when the dock layout changes shape
constexpr int kMaxBanners = 3;          // error/warning banners kept at once (oldest go first)
constexpr double kPresentationScale = 1.45;
constexpr int kMessageMs = 20000;       // how long an error stays in the status bar

// Resident set size of this process, from /proc/self/statm (pages); 0 where it cannot be read.
qint64 residentBytes() {
    std::ifstream statm("/proc/self/statm");
    long long sizePages = 0, residentPages = 0;
    if (!(statm >> sizePages >> residentPages)) return 0;
    return residentPages * static_cast<long long>(sysconf(_SC_PAGESIZE));
}

QString taskTitle(const QString& task) {
    if (task == QLatin1String("load")) return QObject::tr("Loading model");
    if (task == QLatin1String("compile")) return QObject::tr("Compiling tool set");
    if (task == QLatin1String("query")) return QObject::tr("Running query");
    if (task == QLatin1String("sweep")) return QObject::tr("Tool-count sweep");
    if (task == QLatin1String("verify")) return QObject::tr("Verifying cache");
    return task;
}

// Jobs short enough that a progress bar would only flicker.
bool quietTask(const QString& task) { return task == QLatin1String("cache") || task == QLatin1String("describe"); }

QString compilerText() {
#if defined(__clang__)
    return QStringLiteral("Clang %1").arg(QStringLiteral(__clang_version__));
#elif defined(__GNUC__)
    return QStringLiteral("GCC %1").arg(QStringLiteral(__VERSION__));
#elif defined(_MSC_VER)
    return QStringLiteral("MSVC %1").arg(_MSC_VER);
#else
    return QStringLiteral("unknown compiler");
#endif
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : MainWindow(MainWindowOptions{}, parent) {}

MainWindow::MainWindow(const MainWindowOptions& options, QWidget* parent)
    : QMainWindow(parent), m_options(options), m_engine(new EngineController(options.backends, this)) {
    initResources();
    setWindowTitle(QStringLiteral("ContextCache"));
    setWindowIcon(icon(QStringLiteral("app")));
    setDockOptions(QMainWindow::AnimatedDocks | QMainWindow::AllowTabbedDocks | QMainWindow::AllowNestedDocks);
    m_baseFont = QApplication::font();

    buildDocks();
    buildMenus();
    buildStatusBar();

    connect(m_engine, &EngineController::busyChanged, this, &MainWindow::onBusyChanged);
    connect(m_engine, &EngineController::progress, this, &MainWindow::onProgress);
    connect(m_engine, &EngineController::modelLoaded, this, &MainWindow::onModelLoaded);
    connect(m_engine, &EngineController::cacheListed, this, &MainWindow::onCacheListed);
    connect(m_engine, &EngineController::failed, this, [this](const QString& task, const QString& message) {
        showError(tr("%1 failed: %2").arg(taskTitle(task), message));
        if (task == QLatin1String("load")) {
            // The previous model (if any) is still the one in use.
            const auto* info = m_engine->modelInfo();
            updateModelBanner(info);
        }
    });
    connect(m_engine, &EngineController::warning, this, &MainWindow::showWarning);
    connect(m_engine, &EngineController::cancelled, this, [this](const QString& task) {
        statusBar()->showMessage(tr("%1: cancelled").arg(taskTitle(task)), kMessageMs);
    });
    connect(m_engine, &EngineController::compiled, this, [this](const cc::CompileResult& r) {
        statusBar()->showMessage(tr("Compiled %1 tools, %2 prefix tokens (%3)")
                                     .arg(r.n_tools)
                                     .arg(r.prefix_tokens)
                                     .arg(r.cache_hit ? tr("cache hit: %1").arg(tierName(r.tier))
                                                      : tr("%1 ms").arg(r.compile_ms, 0, 'f', 0)),
                                 kMessageMs);
    });
    // The status bar's cache figure follows the store (debounced: a compile reports twice).
    m_cacheRefresh = new QTimer(this);
    m_cacheRefresh->setSingleShot(true);
    m_cacheRefresh->setInterval(250);
    connect(m_cacheRefresh, &QTimer::timeout, this, [this] {
        if (m_engine->modelInfo()) m_engine->listCache();
    });
    connect(m_engine, &EngineController::cacheChanged, m_cacheRefresh, qOverload<>(&QTimer::start));

    connect(m_toolSetPanel, &ToolSetPanel::errorOccurred, this, &MainWindow::showError);
    // Clicking a sample query runs it.
    connect(m_toolSetPanel, &ToolSetPanel::sampleQueryChosen, this, [this](const QString& text) {
        m_queryPanel->setQuery(text);
        m_queryPanel->run();
    });

    // Fits 1280x800 and up; a saved geometry replaces it in restoreSettings().
    QSize size(1280, 800);
    if (const QScreen* screen = QGuiApplication::primaryScreen())
        size = size.boundedTo(screen->availableSize());
    resize(size);
    applyDefaultLayout();

    if (m_options.useSettings) restoreSettings();
    else setTheme(Theme::system);
    if (!m_options.modelSpec.isEmpty() || !m_options.cacheDir.isEmpty() || m_options.threads >= 0) {
        ModelRequest r = m_modelPanel->request();
        if (!m_options.modelSpec.isEmpty()) r.spec = m_options.modelSpec.toStdString();
        if (!m_options.cacheDir.isEmpty()) r.cacheDir = m_options.cacheDir.toStdString();
        if (m_options.threads >= 0) r.threads = m_options.threads;
        m_modelPanel->setRequest(r);
    }
#if QT_VERSION >= QT_VERSION_CHECK(6, 5, 0)
    connect(QGuiApplication::styleHints(), &QStyleHints::colorSchemeChanged, this, [this] {
        if (m_theme == Theme::system) applyTheme(Theme::system);
    });
#endif
    if (m_options.autoLoad) {
        // what the model about to load is, before it has loaded
        const std::string spec = m_modelPanel->request().spec;
        cc::ModelInfo planned;
        planned.spec = spec;
        planned.builtin = spec.rfind("builtin:", 0) == 0;
        const auto recipe = planned.builtin ? cc::find_builtin(spec.substr(8)) : std::nullopt;
        planned.synthetic_weights = planned.builtin && !(recipe && recipe->trained());
        updateModelBanner(&planned);
        m_modelPanel->load();
    }
}

MainWindow::~MainWindow() {
    // The controller (a child) cancels and joins its thread when it is deleted; stop the job first
    // so that deleting the panels does not wait behind it.
    m_engine->cancel();
}

// ---- docks -----------------------------------------------------------------------------------

QDockWidget* MainWindow::addPanelDock(QWidget* panel, const QString& title, const QString& objectName, const QString& tip) {
    auto* dock = new QDockWidget(title, this);
    dock->setObjectName(objectName);   // saveState()/restoreState() key
    dock->setWidget(panel);
    dock->setToolTip(tip);
    dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable | QDockWidget::DockWidgetClosable);
    dock->toggleViewAction()->setToolTip(tr("Show or hide the %1 panel").arg(title));
    return dock;
}

void MainWindow::buildDocks() {
    m_modelPanel = new ModelPanel(m_engine);
    m_toolSetPanel = new ToolSetPanel(m_engine);
    m_queryPanel = new QueryPanel(m_engine);
    m_timingsPanel = new TimingsPanel(m_engine);
    m_cachePanel = new CachePanel(m_engine);
    m_modelPanel->setObjectName(QStringLiteral("modelPanel"));
    m_toolSetPanel->setObjectName(QStringLiteral("toolSetPanel"));
    m_queryPanel->setObjectName(QStringLiteral("queryPanel"));
    m_timingsPanel->setObjectName(QStringLiteral("timingsPanel"));
    m_cachePanel->setObjectName(QStringLiteral("cachePanel"));

    // The model form is taller than its share of a 800-pixel window: it scrolls rather than clips.
    auto* modelScroll = new QScrollArea;
    modelScroll->setWidget(m_modelPanel);
    modelScroll->setWidgetResizable(true);
    modelScroll->setFrameShape(QFrame::NoFrame);
    modelScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);

    m_modelDock = addPanelDock(modelScroll, tr("Model"), QStringLiteral("modelDock"),
                               tr("The model, its backend and threads, and the cache settings"));
    m_toolSetDock = addPanelDock(m_toolSetPanel, tr("Tool set"), QStringLiteral("toolSetDock"),
                                 tr("The tool schemas that form the cached prefix"));
    m_queryDock = addPanelDock(m_queryPanel, tr("Query"), QStringLiteral("queryDock"),
                               tr("Ask a question against the compiled tool set"));
    m_timingsDock = addPanelDock(m_timingsPanel, tr("Timings"), QStringLiteral("timingsDock"),
                                 tr("Where the time goes: link, prefill, decode; cached vs full"));
    m_cacheDock = addPanelDock(m_cachePanel, tr("Cache"), QStringLiteral("cacheDock"),
                               tr("The groups in the cache directory and the memory tier"));
    m_cacheDock->setWindowIcon(icon(QStringLiteral("cache")));
    m_benchDock = addPanelDock(new BenchPanel(m_engine), tr("Benchmarks"), QStringLiteral("benchDock"),
                               tr("The paper's Tables 2 and 3 for the loaded model: TTFT, compile, break-even"));
    addPanelDock(new EvalPanel(m_engine), tr("Evaluation"), QStringLiteral("evalDock"),
                 tr("Tool-calling quality on a dataset: TSA, PF1, EM, FPR, FNR; cached vs full"))->widget()->setObjectName(QStringLiteral("evalPanel"));
    addPanelDock(new ChunkReusePanel(m_engine), tr("Chunk reuse"), QStringLiteral("chunkReuseDock"),
                 tr("Experiment: per-tool K/V reused out of position with seam or selective recompute, vs exact"))
        ->widget()->setObjectName(QStringLiteral("chunkReusePanel"));
    auto* server = new ServerPanel(m_engine);
    server->setObjectName(QStringLiteral("serverPanel"));
    addPanelDock(server, tr("Server"), QStringLiteral("serverDock"),
                 tr("Serve the loaded model over HTTP: OpenAI chat completions, the paper's endpoints, /metrics"));

    // No central widget: the docks share the whole window. Banners sit under the menu bar.
    setCorner(Qt::TopLeftCorner, Qt::LeftDockWidgetArea);
    setCorner(Qt::BottomLeftCorner, Qt::LeftDockWidgetArea);
    setCorner(Qt::TopRightCorner, Qt::RightDockWidgetArea);
    setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);
}

void MainWindow::applyDefaultLayout() {
    // Left column: Model over Tool set. Right (wide) column: Query over Timings, Cache and Evaluation tabbed
    // behind Timings. At 1280x800 the left column is a third of the width.
    const QList<QDockWidget*> docks{m_modelDock, m_toolSetDock, m_queryDock, m_timingsDock, m_cacheDock, m_benchDock,
                                    findChild<QDockWidget*>(QStringLiteral("serverDock")),
                                    findChild<QDockWidget*>(QStringLiteral("chunkReuseDock")),
                                    findChild<QDockWidget*>(QStringLiteral("evalDock"))};
    for (auto* dock : docks) {
        removeDockWidget(dock);
        dock->setFloating(false);
    }
    addDockWidget(Qt::LeftDockWidgetArea, m_modelDock);
    addDockWidget(Qt::RightDockWidgetArea, m_queryDock);
    splitDockWidget(m_modelDock, m_toolSetDock, Qt::Vertical);
    splitDockWidget(m_queryDock, m_timingsDock, Qt::Vertical);
    tabifyDockWidget(m_timingsDock, m_cacheDock);
    tabifyDockWidget(m_cacheDock, m_benchDock);
    tabifyDockWidget(m_timingsDock, docks.last());  // Evaluation
    tabifyDockWidget(m_timingsDock, docks[docks.size() - 2]);  // Chunk reuse
    tabifyDockWidget(m_timingsDock, docks[docks.size() - 3]);  // Server
    for (auto* dock : docks) dock->show();
    m_timingsDock->raise();
    m_defaultSizesPending = true;
    if (isVisible()) applyDefaultSizes();
}

void MainWindow::applyDefaultSizes() {
    m_defaultSizesPending = false;
    const int w = width(), h = height();
    resizeDocks({m_modelDock, m_queryDock}, {w * 34 / 100, w * 66 / 100}, Qt::Horizontal);
    resizeDocks({m_modelDock, m_toolSetDock}, {h * 42 / 100, h * 58 / 100}, Qt::Vertical);
    // The conversation gets about half: its turns are what a user reads; the request chart keeps
    // its bars readable in the rest (compact below 300 px).
    resizeDocks({m_queryDock, m_timingsDock}, {h * 50 / 100, h * 50 / 100}, Qt::Vertical);
}

void MainWindow::resetLayout() { applyDefaultLayout(); }

// ---- menus -----------------------------------------------------------------------------------

void MainWindow::buildMenus() {
    // The menu bar and the banners share the window's top strip (setMenuWidget), so a banner
    // spans the full width above the docks.
    auto* top = new QWidget(this);
    top->setObjectName(QStringLiteral("topStrip"));
    auto* topLayout = new QVBoxLayout(top);
    topLayout->setContentsMargins(0, 0, 0, 0);
    topLayout->setSpacing(0);
    auto* bar = new QMenuBar(top);
    topLayout->addWidget(bar);
    auto* bannerBox = new QWidget(top);
    m_bannerLayout = new QVBoxLayout(bannerBox);
    m_bannerLayout->setContentsMargins(6, 4, 6, 2);
    m_bannerLayout->setSpacing(4);
    topLayout->addWidget(bannerBox);
    setMenuWidget(top);

    m_syntheticBanner = addBanner(int(MessageBanner::Kind::info), QString(), QStringLiteral("syntheticBanner"));
    m_syntheticBanner->hide();

    auto* file = bar->addMenu(tr("&File"));
    auto* importAction = file->addAction(icon(QStringLiteral("open")), tr("&Import tools…"), this, &MainWindow::importTools);
    importAction->setShortcut(QKeySequence::Open);
    importAction->setToolTip(tr("Import a tool set from a JSON file (Ctrl+O)"));
    importAction->setObjectName(QStringLiteral("importToolsAction"));
    auto* loadAction = file->addAction(icon(QStringLiteral("model")), tr("&Load model"), m_modelPanel, &ModelPanel::load);
    loadAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
    loadAction->setToolTip(tr("Load the model chosen in the Model panel (Ctrl+L)"));
    loadAction->setObjectName(QStringLiteral("loadModelAction"));
    auto* compileAction = file->addAction(icon(QStringLiteral("compile")), tr("&Compile tool set"), this, &MainWindow::compileTools);
    compileAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_B));
    compileAction->setToolTip(tr("Compile the tool set into the cache (Ctrl+B)"));
    compileAction->setObjectName(QStringLiteral("compileAction"));
    auto* cancelAction = file->addAction(icon(QStringLiteral("cancel")), tr("C&ancel"), m_engine, &EngineController::cancel);
    cancelAction->setShortcut(QKeySequence(Qt::Key_Escape));
    cancelAction->setToolTip(tr("Cancel the running job (Esc)"));
    cancelAction->setObjectName(QStringLiteral("cancelAction"));
    file->addSeparator();
    auto* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);
    quit->setToolTip(tr("Cancel any running job and quit"));
    // Shortcuts work while the menu bar is hidden behind a dock too.
    addActions({importAction, loadAction, compileAction, cancelAction, quit});

    m_viewMenu = bar->addMenu(tr("&View"));
    for (auto* dock : {m_modelDock, m_toolSetDock, m_queryDock, m_timingsDock, m_cacheDock, m_benchDock})
        m_viewMenu->addAction(dock->toggleViewAction());
    m_viewMenu->addSeparator();
    auto* reset = m_viewMenu->addAction(tr("&Reset layout"), this, &MainWindow::resetLayout);
    reset->setToolTip(tr("Put every panel back where it starts"));
    reset->setObjectName(QStringLiteral("resetLayoutAction"));
    auto* themeMenu = m_viewMenu->addMenu(tr("&Theme"));
    m_themeGroup = new QActionGroup(this);
    m_themeGroup->setExclusive(true);
    for (const auto& entry : {std::pair{Theme::system, tr("&System")}, std::pair{Theme::light, tr("&Light")},
                              std::pair{Theme::dark, tr("&Dark")}}) {
        const Theme theme = entry.first;   // not a structured binding: clang < 16 cannot capture one
        const QString& label = entry.second;
        auto* action = themeMenu->addAction(label);
        action->setCheckable(true);
        action->setData(themeName(theme));
        action->setObjectName(QStringLiteral("theme_") + themeName(theme));
        action->setToolTip(theme == Theme::system ? tr("Follow the system's colours") : tr("Use the %1 palette").arg(themeName(theme)));
        m_themeGroup->addAction(action);
        connect(action, &QAction::triggered, this, [this, theme] { setTheme(theme); });
    }
    m_presentationAction = m_viewMenu->addAction(tr("&Presentation mode"));
    m_presentationAction->setCheckable(true);
    m_presentationAction->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_P));
    m_presentationAction->setToolTip(tr("Larger fonts for projectors (Ctrl+Shift+P)"));
    m_presentationAction->setObjectName(QStringLiteral("presentationAction"));
    connect(m_presentationAction, &QAction::toggled, this, &MainWindow::setPresentationMode);
    addAction(m_presentationAction);

    auto* help = bar->addMenu(tr("&Help"));
    auto* about = help->addAction(icon(QStringLiteral("about")), tr("&About ContextCache"), this, &MainWindow::showAbout);
    about->setShortcut(QKeySequence(Qt::Key_F1));
    about->setToolTip(tr("Versions, backend and CUDA status (F1)"));
    addAction(about);
}

MessageBanner* MainWindow::addBanner(int kind, const QString& text, const QString& objectName) {
    auto* banner = new MessageBanner(static_cast<MessageBanner::Kind>(kind), text);
    banner->setObjectName(objectName);
    if (objectName != QLatin1String("syntheticBanner")) {
        // Keep the newest few; a dismissed banner is deleted, not just hidden.
        connect(banner, &MessageBanner::dismissed, banner, &QObject::deleteLater);
        QList<MessageBanner*> old;
        for (int i = 0; i < m_bannerLayout->count(); ++i)
            if (auto* b = qobject_cast<MessageBanner*>(m_bannerLayout->itemAt(i)->widget()); b && b != m_syntheticBanner)
                old << b;
        while (old.size() >= kMaxBanners) delete old.takeFirst();
    }
    m_bannerLayout->addWidget(banner);
    banner->show();   // a layout shows a widget added to a visible window only later
    return banner;
}

void MainWindow::updateModelBanner(const cc::ModelInfo* info) {
    if (!info || !info->builtin) {
        m_syntheticBanner->hide();
        return;
    }
    const QString spec = QString::fromStdString(info->spec).toHtmlEscaped();
    if (info->synthetic_weights)
        m_syntheticBanner->setText(tr("<b>%1 has synthetic weights</b> — timings and exactness are real, text is not. "
                                      "Load a Hugging Face model directory for meaningful answers.")
                                       .arg(spec));
    else
        m_syntheticBanner->setText(tr("<b>%1: a small model trained here for tool selection, not a general "
                                      "assistant</b> — it picks the wrong tool for about two requests in five, and it often invents "
                                      "argument values instead of copying the user's. Timings and exactness are real.")
                                       .arg(spec));
    m_syntheticBanner->show();
}

// ---- status bar ------------------------------------------------------------------------------

void MainWindow::buildStatusBar() {
    auto* bar = statusBar();
    auto label = [this](const QString& name, const QString& tip) {
        auto* l = new QLabel(this);
        l->setObjectName(name);
        l->setToolTip(tip);
        l->setContentsMargins(6, 0, 6, 0);
        return l;
    };
    m_taskLabel = label(QStringLiteral("taskLabel"), tr("The job the engine is running"));
    m_progress = new QProgressBar(this);
    m_progress->setObjectName(QStringLiteral("taskProgress"));
    m_progress->setToolTip(tr("Progress of the running job"));
    m_progress->setFixedWidth(160);
    m_progress->setMaximumHeight(16);
    m_cancel = new QToolButton(this);
    m_cancel->setObjectName(QStringLiteral("cancelButton"));
    m_cancel->setIcon(icon(QStringLiteral("cancel")));
    m_cancel->setText(tr("Cancel"));
    m_cancel->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    m_cancel->setAutoRaise(true);
    m_cancel->setToolTip(tr("Cancel the running job (Esc)"));
    connect(m_cancel, &QToolButton::clicked, m_engine, &EngineController::cancel);
    m_modelLabel = label(QStringLiteral("modelLabel"), tr("The loaded model"));
    m_modelLabel->setText(tr("no model"));
    m_backendLabel = label(QStringLiteral("backendLabel"), tr("Backend and numerics"));
    m_threadsLabel = label(QStringLiteral("threadsLabel"), tr("CPU threads of the forward pass"));
    m_memoryLabel = label(QStringLiteral("memoryLabel"), tr("Resident memory of this process (RSS)"));
    m_cacheLabel = label(QStringLiteral("cacheLabel"), tr("Cache usage: memory tier and disk, against their budgets"));
    bar->addWidget(m_taskLabel);
    bar->addWidget(m_progress);
    bar->addWidget(m_cancel);
    for (auto* w : {m_modelLabel, m_backendLabel, m_threadsLabel, m_memoryLabel, m_cacheLabel}) bar->addPermanentWidget(w);
    onBusyChanged(false, QString());

    m_memoryTimer = new QTimer(this);
    m_memoryTimer->setInterval(1000);
    connect(m_memoryTimer, &QTimer::timeout, this, &MainWindow::updateMemory);
    m_memoryTimer->start();
    updateMemory();
}

void MainWindow::updateMemory() {
    m_memoryLabel->setText(tr("RSS %1").arg(QLocale().formattedDataSize(residentBytes(), 1)));
}

void MainWindow::onBusyChanged(bool busy, const QString& task) {
    const bool show = busy && !quietTask(task);
    m_taskLabel->setVisible(show);
    m_progress->setVisible(show);
    m_cancel->setVisible(show);
    if (show) {
        m_taskLabel->setText(taskTitle(task) + QStringLiteral("…"));
        m_progress->setRange(0, 0);   // indeterminate until the first progress report
    }
}

void MainWindow::onProgress(const Progress& p) {
    if (!m_progress->isVisible()) return;
    if (p.total > 0) {
        // Progress counts can exceed int: scale to per-mille.
        m_progress->setRange(0, 1000);
        m_progress->setValue(int(std::min<qint64>(1000, p.done * 1000 / p.total)));
    } else {
        m_progress->setRange(0, 0);
    }
    const QString title = taskTitle(m_engine->currentTask().isEmpty() ? p.task : m_engine->currentTask());
    m_taskLabel->setText(p.text.isEmpty() ? title + QStringLiteral("…") : QStringLiteral("%1: %2").arg(title, p.text));
}

void MainWindow::onModelLoaded(const cc::ModelInfo& info) {
    const QString spec = QString::fromStdString(info.spec);
    m_modelLabel->setText(spec.startsWith(QLatin1String("builtin:")) ? spec : QFileInfo(spec).fileName());
    m_modelLabel->setToolTip(tr("The loaded model: %1 (%2)").arg(spec, QString::fromStdString(info.family)));
    m_backendLabel->setText(QString::fromStdString(info.numerics));
    m_backendLabel->setToolTip(tr("Backend %1: %2").arg(QString::fromStdString(info.backend),
                                                        QString::fromStdString(info.backend_reason)));
    m_threadsLabel->setText(tr("%n thread(s)", nullptr, info.n_threads));
    setWindowTitle(tr("ContextCache — %1").arg(m_modelLabel->text()));
    updateModelBanner(&info);
    statusBar()->showMessage(tr("Loaded %1 in %2 ms").arg(spec).arg(info.load_ms, 0, 'f', 0), kMessageMs);
    m_engine->listCache();
}

void MainWindow::onCacheListed(const CacheSnapshot& s) {
    const QLocale locale;
    QString text = tr("cache %1 / %2 RAM").arg(locale.formattedDataSize(qint64(s.memoryBytes), 1),
                                               locale.formattedDataSize(qint64(s.hostBudgetBytes), 0));
    if (!s.dir.empty())
        text += tr(" · %1 / %2 disk").arg(locale.formattedDataSize(qint64(s.diskBytes), 1),
                                          locale.formattedDataSize(qint64(s.diskBudgetBytes), 0));
    m_cacheLabel->setText(text);
    m_cacheLabel->setToolTip(tr("%n group(s) in %1", nullptr, int(s.groups.size()))
                                 .arg(s.dir.empty() ? tr("memory only") : QString::fromStdString(s.dir)));
}

// ---- messages --------------------------------------------------------------------------------

void MainWindow::showError(const QString& message) {
    statusBar()->showMessage(message, kMessageMs);
    addBanner(int(MessageBanner::Kind::error), message.toHtmlEscaped(), QStringLiteral("errorBanner"));
}

void MainWindow::showWarning(const QString& message) {
    statusBar()->showMessage(tr("Warning: %1").arg(message), kMessageMs);
    // The same warning again (a cache problem reported per job) does not stack up.
    for (auto* b : findChildren<MessageBanner*>(QStringLiteral("warningBanner")))
        if (b->text() == message.toHtmlEscaped()) return;
    addBanner(int(MessageBanner::Kind::warning), message.toHtmlEscaped(), QStringLiteral("warningBanner"));
}

// ---- tools ------------------------------------------

void MainWindow::importTools() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Import tools"), QString(),
                                                      tr("Tool sets (*.json);;All files (*)"));
    if (!path.isEmpty()) importToolsFile(path);
}

void MainWindow::importToolsFile(const QString& path) {
    // The panel validates and shows the set (or shows the error and keeps the previous one).
    if (m_toolSetPanel->loadToolsFile(path)) m_toolSetPanel->compile();
}

void MainWindow::compileTools() { m_toolSetPanel->compile(); }

// ---- view ------------------------------------------------------------------------------------

void MainWindow::setTheme(Theme theme) {
    m_theme = theme;
    applyTheme(theme);
    for (auto* banner : findChildren<MessageBanner*>()) banner->refreshColours();
    for (auto* action : m_themeGroup->actions())
        if (action->data().toString() == themeName(theme)) action->setChecked(true);
}

void MainWindow::setPresentationMode(bool on) {
    m_presentation = on;
    QFont font = m_baseFont;
    if (on) {
        if (font.pointSizeF() > 0) font.setPointSizeF(font.pointSizeF() * kPresentationScale);
        else font.setPixelSize(int(font.pixelSize() * kPresentationScale));
    }
    setFont(font);   // propagates to every panel and dock of this window
    if (m_presentationAction->isChecked() != on) m_presentationAction->setChecked(on);
}

QString MainWindow::aboutText() const {
    const auto* info = m_engine->modelInfo();
    QString text = tr("<h3>ContextCache %1</h3>"
                      "<p>Persistent KV cache for tool-schema prompt prefixes: compile a tool set once, answer "
                      "queries from the cached prefix, bit-identical to a full prefill.</p>")
                       .arg(QCoreApplication::applicationVersion().toHtmlEscaped());
    text += tr("<table>"
               "<tr><td>Qt</td><td>%1 (built with %2)</td></tr>"
               "<tr><td>Compiler</td><td>%3</td></tr>"
               "<tr><td>C++</td><td>%4</td></tr>")
                .arg(QString::fromLatin1(qVersion()), QStringLiteral(QT_VERSION_STR), compilerText().toHtmlEscaped())
                .arg(__cplusplus);
    if (m_engine->gpuBackendBuilt())
        text += tr("<tr><td>CUDA</td><td>built with the CUDA backend. %1</td></tr>").arg(m_modelPanel->cudaStatus().toHtmlEscaped());
    else
        text += tr("<tr><td>CUDA</td><td>not available: %1</td></tr>").arg(m_modelPanel->cudaStatus().toHtmlEscaped());
    if (info)
        text += tr("<tr><td>Model</td><td>%1</td></tr><tr><td>Backend</td><td>%2 — %3</td></tr>")
                    .arg(QString::fromStdString(info->spec).toHtmlEscaped(), QString::fromStdString(info->numerics).toHtmlEscaped(),
                         QString::fromStdString(info->backend_reason).toHtmlEscaped());
    text += QStringLiteral("</table>");
    return text;
}

void MainWindow::showAbout() {
    // Non-modal: the engine keeps reporting while it is open.
    auto* dialog = new QDialog(this);
    dialog->setObjectName(QStringLiteral("aboutDialog"));
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->setWindowTitle(tr("About ContextCache"));
    auto* layout = new QVBoxLayout(dialog);
    auto* row = new QHBoxLayout;
    auto* logo = new QLabel(dialog);
    logo->setPixmap(icon(QStringLiteral("app")).pixmap(64, 64));
    logo->setToolTip(tr("ContextCache"));
    auto* text = new QLabel(aboutText(), dialog);
    text->setWordWrap(true);
    text->setTextInteractionFlags(Qt::TextSelectableByMouse);
    text->setToolTip(tr("Versions and backend status"));
    row->addWidget(logo, 0, Qt::AlignTop);
    row->addWidget(text, 1);
    layout->addLayout(row);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, dialog);
    buttons->button(QDialogButtonBox::Close)->setToolTip(tr("Close this window"));
    connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::close);
    layout->addWidget(buttons);
    dialog->resize(560, dialog->sizeHint().height());
    dialog->show();
}

// ---- settings --------------------------------------------------------------------------------

void MainWindow::saveSettings() const {
    if (!m_options.useSettings) return;
    QSettings s;
    m_modelPanel->saveSettings(s);
    s.setValue(QStringLiteral("window/geometry"), saveGeometry());
    s.setValue(QStringLiteral("window/state"), saveState(kStateVersion));
    s.setValue(QStringLiteral("view/theme"), themeName(m_theme));
    s.setValue(QStringLiteral("view/presentation"), m_presentation);
    s.sync();
}

void MainWindow::restoreSettings() {
    QSettings s;
    m_modelPanel->restoreSettings(s);
    if (const QByteArray g = s.value(QStringLiteral("window/geometry")).toByteArray(); !g.isEmpty()) restoreGeometry(g);
    if (const QByteArray st = s.value(QStringLiteral("window/state")).toByteArray(); !st.isEmpty())
        m_defaultSizesPending = !restoreState(st, kStateVersion);
    setTheme(parseTheme(s.value(QStringLiteral("view/theme")).toString()));
    setPresentationMode(s.value(QStringLiteral("view/presentation"), false).toBool());
}

void MainWindow::showEvent(QShowEvent* event) {
    QMainWindow::showEvent(event);
    if (m_defaultSizesPending) applyDefaultSizes();
}

void MainWindow::closeEvent(QCloseEvent* event) {
    // Never waits here: the running job is told to stop; the controller joins its thread when the
    // window is destroyed, by which time the job has reached its next cancellation point.
    m_engine->cancel();
    saveSettings();
    event->accept();
}

}  // namespace cc::ui
