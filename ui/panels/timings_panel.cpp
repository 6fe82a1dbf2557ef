#include "ui/panels/timings_panel.h"

#include "ui/worker/engine_controller.h"
#include "ui/charts/history_model.h"
#include "ui/widgets/resources.h"
#include "ui/charts/timing_charts.h"

#include <QChartView>
#include <QCheckBox>
#include <QEvent>
#include <QFileDialog>
#include <QGraphicsLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QImage>
#include <QItemSelectionModel>
#include <QLabel>
#include <QMessageBox>
#include <QPainter>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include <memory>

namespace cc::ui {

namespace {

QChartView* makeView(QChart* chart, QWidget* parent) {
    auto* view = new QChartView(chart, parent);
    view->setRenderHint(QPainter::Antialiasing);
    view->setMinimumHeight(130);
    return view;
}

QLabel* counterLabel(const QString& tip, QWidget* parent) {
    auto* label = new QLabel(parent);
    QFont f = label->font();
    f.setPointSizeF(std::max(13.0, f.pointSizeF() * 1.3));
    label->setFont(f);
    label->setToolTip(tip);
    label->setTextFormat(Qt::RichText);
    return label;
}

const QStringList kSweepSets{QStringLiteral("tools_5.json"), QStringLiteral("tools_10.json"),
                             QStringLiteral("tools_20.json"), QStringLiteral("tools_50.json"),
                             QStringLiteral("tools_100.json")};

}  // namespace

TimingsPanel::TimingsPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine) {
    auto* layout = new QVBoxLayout(this);

    // ---- counters and export
    auto* top = new QHBoxLayout;
    m_queriesLabel = counterLabel(tr("Finished queries this session, every mode"), this);
    m_hitsLabel = counterLabel(tr("Cached and compare-mode queries whose prefix KV was found in memory or on disk. "
                                  "Full-mode queries do not look the cache up and are not counted."),
                               this);
    m_hitRateLabel = counterLabel(tr("Cache hits ÷ queries that looked the cache up (cached and compare mode)"), this);
    m_savedLabel = counterLabel(
        tr("Sum over cache hits of (full-prefill TTFT − the hit's TTFT). The full TTFT is the latest measured full "
           "run with the same prefix length (a full or compare-mode query, or a sweep point); hits without such a "
           "measurement are left out, and the label says how many were counted. Only TTFT is compared: decode "
           "costs the same either way."),
        this);
    for (QLabel* l : {m_queriesLabel, m_hitsLabel, m_hitRateLabel, m_savedLabel}) {
        l->setObjectName(QStringLiteral("counter"));
        top->addWidget(l);
        top->addSpacing(18);
    }
    top->addStretch(1);
    m_exportPngButton = new QPushButton(tr("Export PNG…"), this);
    m_exportPngButton->setToolTip(
        tr("Save the chart on the current tab as a %1×%2 PNG").arg(exportSize().width()).arg(exportSize().height()));
    m_exportCsvButton = new QPushButton(tr("Export CSV…"), this);
    m_exportCsvButton->setToolTip(
        tr("Save the data behind the current tab as CSV (exact values, milliseconds): "
           "the request history, or the sweep points on the sweep tab"));
    layout->addLayout(top);

    m_tabs = new QTabWidget(this);
    // The export buttons sit in the tab bar's corner: they act on the current tab.
    auto* exportButtons = new QWidget(m_tabs);
    auto* exportLayout = new QHBoxLayout(exportButtons);
    exportLayout->setContentsMargins(0, 0, 0, 2);
    exportLayout->addWidget(m_exportPngButton);
    exportLayout->addWidget(m_exportCsvButton);
    m_tabs->setCornerWidget(exportButtons, Qt::TopRightCorner);
    layout->addWidget(m_tabs, 1);

    // ---- per request + history
    auto* split = new QSplitter(Qt::Vertical, m_tabs);
    m_requestChart = new RequestChart;
    m_requestView = makeView(m_requestChart, split);
    m_requestView->setToolTip(
        tr("The selected request (the latest by default): where its time went, TTFT marked. "
           "In compare mode the full prefill and the cached run side by side."));
    m_historyModel = new HistoryModel(&m_data, this);
    m_historyView = new QTableView(split);
    m_historyView->setObjectName(QStringLiteral("historyTable"));
    m_historyView->setModel(m_historyModel);
    m_historyView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_historyView->setSelectionMode(QAbstractItemView::SingleSelection);
    m_historyView->verticalHeader()->hide();
    m_historyView->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    m_historyView->horizontalHeader()->setStretchLastSection(false);
    m_historyView->setToolTip(tr("Every request of this session; select one to show it in the chart above"));
    split->addWidget(m_requestView);
    split->addWidget(m_historyView);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 1);
    split->setSizes({600, 140});   // the chart gets most of the height; the history scrolls
    m_historyView->setMinimumHeight(56);
    m_tabs->addTab(split, tr("Requests"));
    m_tabs->setTabToolTip(0, tr("Per-request timing split and history"));
    connect(m_historyView->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& current) {
                if (current.isValid()) showRequest(current.row());
            });

    // ---- sweep
    auto* sweepPage = new QWidget(m_tabs);
    auto* sweepLayout = new QVBoxLayout(sweepPage);
    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("Sets:"), sweepPage));
    for (const QString& name : kSweepSets) {
        auto* box = new QCheckBox(QString(name).remove(QStringLiteral(".json")), sweepPage);
        box->setChecked(name != QLatin1String("tools_100.json"));
        box->setToolTip(tr("Include the bundled %1 (its first sample query)").arg(name));
        m_sweepSetBoxes.push_back(box);
        controls->addWidget(box);
    }
    QHBoxLayout* setsRow = controls;   // the progress bar joins it below
    sweepLayout->addLayout(setsRow);
    // A second row, so the panel fits a 1280-pixel-wide window beside the tool set.
    controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("Repeats:"), sweepPage));
    m_repeatsSpin = new QSpinBox(sweepPage);
    m_repeatsSpin->setRange(1, 50);
    m_repeatsSpin->setValue(3);
    m_repeatsSpin->setToolTip(tr("Runs per mode per set; the median TTFT is plotted"));
    controls->addWidget(m_repeatsSpin);
    controls->addWidget(new QLabel(tr("Max tokens:"), sweepPage));
    m_sweepTokensSpin = new QSpinBox(sweepPage);
    m_sweepTokensSpin->setRange(1, 256);
    m_sweepTokensSpin->setValue(8);
    m_sweepTokensSpin->setToolTip(tr("Tokens generated per run (TTFT does not depend on it)"));
    controls->addWidget(m_sweepTokensSpin);
    m_logYBox = new QCheckBox(tr("Log y"), sweepPage);
    m_logYBox->setToolTip(tr("Logarithmic TTFT axis: both curves readable when the speed-up is large"));
    controls->addWidget(m_logYBox);
    controls->addStretch(1);
    m_runSweepButton = new QPushButton(tr("Run sweep"), sweepPage);
    m_runSweepButton->setToolTip(
        tr("Compile each checked set, then time full prefill and cached queries on it. "
           "Your current tool set is restored afterwards."));
    m_cancelSweepButton = new QPushButton(tr("Cancel"), sweepPage);
    m_cancelSweepButton->setObjectName(QStringLiteral("cancelSweepButton"));
    m_runSweepButton->setObjectName(QStringLiteral("runSweepButton"));
    m_cancelSweepButton->setToolTip(tr("Stop the sweep after the current step; finished points stay"));
    controls->addWidget(m_runSweepButton);
    controls->addWidget(m_cancelSweepButton);
    sweepLayout->addLayout(controls);
    m_sweepProgress = new QProgressBar(sweepPage);
    m_sweepProgress->setToolTip(tr("Sweep progress: one step per compile and per timed query"));
    m_sweepProgress->setRange(0, 1);
    m_sweepProgress->setValue(0);
    m_sweepStatus = new QLabel(sweepPage);
    m_sweepStatus->setToolTip(tr("The sweep's current step"));
    // Ignored width: a long step name never widens the window.
    m_sweepStatus->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    setsRow->addSpacing(12);
    setsRow->addWidget(m_sweepProgress, 1);
    setsRow->addWidget(m_sweepStatus, 2);
    m_sweepChart = new SweepChart;
    m_sweepView = makeView(m_sweepChart, sweepPage);
    m_sweepView->setToolTip(
        tr("Median TTFT per tool count, full prefill vs cached; the label on the full curve "
           "gives its TTFT and the speed-up (full ÷ cached)"));
    sweepLayout->addWidget(m_sweepView, 1);
    m_tabs->addTab(sweepPage, tr("Tool-count sweep"));
    m_tabs->setTabToolTip(1, tr("TTFT against the number of tools, both modes"));
    connect(m_logYBox, &QCheckBox::toggled, m_sweepChart, &SweepChart::setLogY);
    connect(m_runSweepButton, &QPushButton::clicked, this,
            [this] { startSweep(checkedSweepSets(), m_repeatsSpin->value(), m_sweepTokensSpin->value()); });
    connect(m_cancelSweepButton, &QPushButton::clicked, this, [this] {
        if (m_engine->currentTask() == QLatin1String("sweep")) m_engine->cancel();
    });
    for (QCheckBox* box : m_sweepSetBoxes) connect(box, &QCheckBox::toggled, this, &TimingsPanel::refreshEnabled);

    // ---- amortisation
    m_amortChart = new AmortisationChart;
    m_amortView = makeView(m_amortChart, m_tabs);
    m_amortView->setToolTip(
        tr("Cumulative time saved after n requests = n × (full TTFT − cached TTFT) − compile. "
           "The line in the top-left corner says which measurement it uses."));
    m_tabs->addTab(m_amortView, tr("Amortisation"));
    m_tabs->setTabToolTip(2, tr("When the one-time compile has paid for itself"));

    connect(m_exportPngButton, &QPushButton::clicked, this, &TimingsPanel::exportPngInteractive);
    connect(m_exportCsvButton, &QPushButton::clicked, this, &TimingsPanel::exportCsvInteractive);
    connect(m_tabs, &QTabWidget::currentChanged, this, &TimingsPanel::refreshEnabled);

    // ---- the engine
    connect(m_engine, &EngineController::queryFinished, this, &TimingsPanel::onQueryFinished);
    connect(m_engine, &EngineController::sweepPoint, this, &TimingsPanel::onSweepPoint);
    connect(m_engine, &EngineController::sweepFinished, this, [this] {
        m_sweepDone = true;
        m_sweepStatus->setText(tr("sweep finished: %1 points").arg(m_data.sweep().size()));
    });
    connect(m_engine, &EngineController::compiled, this, [this](const cc::CompileResult& result) {
        m_data.noteCompile(result);
        refreshAmortisation();
    });
    connect(m_engine, &EngineController::modelLoaded, this, &TimingsPanel::refreshEnabled);
    connect(m_engine, &EngineController::progress, this, [this](const Progress& p) {
        if (p.task != QLatin1String("sweep")) return;
        m_sweepProgress->setRange(0, int(std::max<qint64>(1, p.total)));
        m_sweepProgress->setValue(int(p.done));
        m_sweepStatus->setText(p.text);
    });
    connect(m_engine, &EngineController::busyChanged, this, [this](bool busy, const QString& task) {
        m_sweeping = busy && task == QLatin1String("sweep");
        refreshEnabled();
    });
    connect(m_engine, &EngineController::cancelled, this, [this](const QString& task) {
        if (task == QLatin1String("sweep")) {
            m_sweepDone = true;
            m_sweepStatus->setText(tr("sweep cancelled: %1 points kept").arg(m_data.sweep().size()));
        }
    });
    connect(m_engine, &EngineController::failed, this, [this](const QString& task, const QString& message) {
        if (task == QLatin1String("sweep")) {
            m_sweepDone = true;
            m_sweepStatus->setText(tr("sweep failed: %1").arg(message));
        }
    });

    applyPalette();
    refreshCounters();
    refreshAmortisation();
    refreshEnabled();
}

Amortisation TimingsPanel::amortisation() const {
    const cc::CompileResult* tools = m_engine->currentTools();
    return m_data.amortisation(tools ? int(tools->n_tools) : 0);
}

SweepRequest TimingsPanel::sweepRequest(const QStringList& setNames, int repeats, int maxNewTokens) {
    SweepRequest request;
    request.systemPrompt = defaultSystemPrompt().toStdString();
    request.repeats = repeats;
    request.maxNewTokens = maxNewTokens;
    for (const QString& name : setNames) {
        SweepSet set;
        set.name = QString(name).remove(QStringLiteral(".json")).toStdString();
        set.toolsJson = sampleToolSetJson(name).toStdString();
        const QStringList queries = sampleQueries(name);
        set.query = queries.isEmpty() ? std::string("What can you do?") : queries.first().toStdString();
        request.sets.push_back(std::move(set));
    }
    return request;
}

void TimingsPanel::startSweep(const QStringList& setNames, int repeats, int maxNewTokens) {
    if (setNames.isEmpty()) return;
    SweepRequest request;
    try {
        request = sweepRequest(setNames, repeats, maxNewTokens);
    } catch (const std::exception& e) {
        m_sweepStatus->setText(QString::fromStdString(e.what()));
        return;
    }
    m_data.beginSweep();
    m_sweepDone = false;
    m_sweepChart->setPoints(m_data.sweep());
    m_sweepProgress->setRange(0, 0);
    m_sweepStatus->setText(tr("sweep queued: %1 sets × %2 repeats").arg(setNames.size()).arg(repeats));
    m_sweeping = true;
    refreshEnabled();
    m_engine->runSweep(request);
}

void TimingsPanel::showRequest(int historyIndex) {
    const auto& h = m_data.history();
    if (historyIndex < 0 || size_t(historyIndex) >= h.size()) return;
    m_requestChart->setRecord(&h[size_t(historyIndex)]);
}

void TimingsPanel::onQueryFinished(const QueryOutcome& outcome) {
    m_data.addOutcome(outcome);
    m_historyModel->appended();
    const int last = int(m_data.history().size()) - 1;
    {
        // follow the newest request; selecting the row shows it in the chart
        const QSignalBlocker block(m_historyView->selectionModel());
        m_historyView->selectRow(last);
    }
    m_historyView->scrollToBottom();
    m_historyView->resizeColumnsToContents();
    m_historyView->setColumnWidth(HistoryModel::Query, std::min(m_historyView->columnWidth(HistoryModel::Query), 360));
    showRequest(last);
    refreshCounters();
    refreshAmortisation();
    refreshEnabled();
}

void TimingsPanel::onSweepPoint(const SweepPoint& point) {
    if (m_sweepDone) {  // a sweep this panel did not start (or a second one)
        m_data.beginSweep();
        m_sweepDone = false;
    }
    m_data.addSweepPoint(point);
    m_sweepChart->setPoints(m_data.sweep());
    refreshCounters();
    refreshAmortisation();
    refreshEnabled();
}

void TimingsPanel::refreshCounters() {
    const Counters& c = m_data.counters();
    m_queriesLabel->setText(tr("Queries <b>%1</b>").arg(c.queries));
    m_hitsLabel->setText(tr("Cache hits <b>%1</b>").arg(c.hits));
    m_hitRateLabel->setText(c.lookups ? tr("Hit rate <b>%1%</b>").arg(100.0 * c.hitRate(), 0, 'f', 0)
                                      : tr("Hit rate <b>–</b>"));
    QString saved = tr("Time saved <b>%1</b>").arg(formatMs(c.savedMs));
    if (c.hitsCounted < c.hits)
        saved += tr(" <small>(%1 of %2 hits have a full run to compare)</small>").arg(c.hitsCounted).arg(c.hits);
    m_savedLabel->setText(saved);
}

void TimingsPanel::refreshAmortisation() {
    m_amortChart->setAmortisation(amortisation());
}

QStringList TimingsPanel::checkedSweepSets() const {
    QStringList out;
    for (size_t i = 0; i < m_sweepSetBoxes.size(); ++i)
        if (m_sweepSetBoxes[i]->isChecked()) out << kSweepSets[int(i)];
    return out;
}

void TimingsPanel::refreshEnabled() {
    const bool loaded = m_engine->modelInfo() != nullptr;
    m_runSweepButton->setEnabled(loaded && !m_sweeping && !checkedSweepSets().isEmpty());
    m_cancelSweepButton->setEnabled(m_sweeping);
    const bool onSweep = m_tabs->currentIndex() == 1;
    m_exportCsvButton->setEnabled(onSweep ? !m_data.sweep().empty() : !m_data.history().empty());
}

void TimingsPanel::changeEvent(QEvent* event) {
    if (event->type() == QEvent::PaletteChange || event->type() == QEvent::ApplicationPaletteChange ||
        event->type() == QEvent::StyleChange)
        applyPalette();
    QWidget::changeEvent(event);
}

void TimingsPanel::applyPalette() {
    for (TimingChart* chart : {static_cast<TimingChart*>(m_requestChart), static_cast<TimingChart*>(m_sweepChart),
                               static_cast<TimingChart*>(m_amortChart)})
        chart->applyPalette(palette());
}

bool TimingsPanel::exportPng(const QString& which, const QString& path, QString* error) {
    // A second chart with the same data, laid out at the export size off screen: the PNG does not
    // depend on the window's size, and the text is as large relative to the image as on screen.
    TimingChart* chart = nullptr;
    if (which == QLatin1String("request")) {
        auto* c = new RequestChart;
        const auto& h = m_data.history();
        const QModelIndex current = m_historyView->currentIndex();
        const int row = current.isValid() ? current.row() : int(h.size()) - 1;
        c->setRecord(row >= 0 && size_t(row) < h.size() ? &h[size_t(row)] : nullptr);
        chart = c;
    } else if (which == QLatin1String("sweep")) {
        auto* c = new SweepChart;
        c->setPoints(m_data.sweep());
        c->setLogY(m_sweepChart->logY());
        chart = c;
    } else if (which == QLatin1String("amortisation")) {
        auto* c = new AmortisationChart;
        c->setAmortisation(amortisation());
        chart = c;
    } else {
        if (error) *error = tr("unknown chart \"%1\": request, sweep or amortisation").arg(which);
        return false;
    }
    return renderChartPng(chart, palette(), exportSize(), path, error);
}

bool TimingsPanel::exportCsv(const QString& path, QString* error) const {
    return m_data.writeRequestsCsv(path, error);
}
bool TimingsPanel::exportSweepCsv(const QString& path, QString* error) const {
    return m_data.writeSweepCsv(path, error);
}

void TimingsPanel::exportPngInteractive() {
    static const char* const names[] = {"request", "sweep", "amortisation"};
    const QString which = QString::fromLatin1(names[std::clamp(m_tabs->currentIndex(), 0, 2)]);
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export chart as PNG"), QStringLiteral("contextcache-%1.png").arg(which), tr("PNG images (*.png)"));
    if (path.isEmpty()) return;
    QString error;
    if (!exportPng(which, path, &error)) QMessageBox::warning(this, tr("Export PNG"), error);
}

void TimingsPanel::exportCsvInteractive() {
    const bool sweep = m_tabs->currentIndex() == 1;
    const QString path = QFileDialog::getSaveFileName(
        this, sweep ? tr("Export sweep as CSV") : tr("Export request history as CSV"),
        sweep ? QStringLiteral("contextcache-sweep.csv") : QStringLiteral("contextcache-requests.csv"),
        tr("CSV files (*.csv)"));
    if (path.isEmpty()) return;
    QString error;
    if (!(sweep ? exportSweepCsv(path, &error) : exportCsv(path, &error)))
        QMessageBox::warning(this, tr("Export CSV"), error);
}

}  // namespace cc::ui
