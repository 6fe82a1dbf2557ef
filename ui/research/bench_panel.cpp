#include "ui/research/bench_panel.h"

#include "ui/research/bench_charts.h"

#include <QChartView>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace cc::ui {

namespace {

// A table filled from the CSV the CLI writes, so the tab and the file can never disagree.
void fillFromCsv(QTableWidget* table, const std::string& csv) {
    std::vector<QStringList> lines;
    std::stringstream ss(csv);
    for (std::string line; std::getline(ss, line);)
        if (!line.empty()) lines.push_back(QString::fromStdString(line).split(QLatin1Char(',')));
    table->clear();
    if (lines.empty()) return;
    table->setColumnCount(int(lines[0].size()));
    table->setHorizontalHeaderLabels(lines[0]);
    table->setRowCount(int(lines.size()) - 1);
    for (int r = 1; r < int(lines.size()); ++r)
        for (int c = 0; c < int(lines[size_t(r)].size()); ++c) {
            const QString raw = lines[size_t(r)][c];
            bool isNumber = false;
            const double v = raw.toDouble(&isNumber);
            // whole numbers as they are, measurements to two decimals; the exact value in the tooltip
            const QString shown = isNumber && v != std::floor(v) ? QString::number(v, 'f', 2) : raw;
            auto* item = new QTableWidgetItem(shown);
            item->setToolTip(raw);
            item->setData(Qt::UserRole, raw);
            item->setTextAlignment(isNumber ? (Qt::AlignRight | Qt::AlignVCenter) : (Qt::AlignLeft | Qt::AlignVCenter));
            item->setFlags(item->flags() & ~Qt::ItemIsEditable);
            table->setItem(r - 1, c, item);
        }
    table->resizeColumnsToContents();
}

QTableWidget* makeTable(QWidget* parent, const QString& tip) {
    auto* t = new QTableWidget(parent);
    t->verticalHeader()->hide();
    t->setToolTip(tip);
    t->setSelectionBehavior(QAbstractItemView::SelectRows);
    return t;
}

bool writeFile(const QString& path, const std::string& text, QString* error) {
    QFile f(path);
    if (f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(text.data(), qint64(text.size())) == qint64(text.size()))
        return true;
    if (error) *error = QStringLiteral("%1: %2").arg(path, f.errorString());
    return false;
}

}  // namespace

BenchPanel::BenchPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine) {
    auto* layout = new QVBoxLayout(this);
    auto* controls = new QHBoxLayout;
    m_counts = new QLineEdit(QStringLiteral("5,10,20,50,100"), this);
    m_counts->setToolTip(tr("Bundled tool sets to measure: the first N tools of tools_100.json, comma-separated"));
    m_nQueries = new QSpinBox(this);
    m_nQueries->setRange(1, 10000);
    m_nQueries->setValue(30);
    m_nQueries->setToolTip(tr("Measured queries per tool set, each run by full prefill and from the cache"));
    m_warmup = new QSpinBox(this);
    m_warmup->setRange(0, 1000);
    m_warmup->setValue(2);
    m_warmup->setToolTip(tr("Unmeasured query pairs per tool set after its compile"));
    m_maxNew = new QSpinBox(this);
    m_maxNew->setRange(1, 4096);
    m_maxNew->setValue(16);
    m_maxNew->setToolTip(tr("Generated tokens per query (the decode part of the timing split)"));
    controls->addWidget(new QLabel(tr("Tools:"), this));
    controls->addWidget(m_counts, 1);
    controls->addWidget(new QLabel(tr("Queries:"), this));
    controls->addWidget(m_nQueries);
    controls->addWidget(new QLabel(tr("Warm-up:"), this));
    controls->addWidget(m_warmup);
    controls->addWidget(new QLabel(tr("Max tokens:"), this));
    controls->addWidget(m_maxNew);
    m_runButton = new QPushButton(tr("Run"), this);
    m_runButton->setToolTip(tr("Measure the paper's Tables 2 and 3 for the loaded model on a second engine with a "
                               "memory-only cache: your cache directory is neither read nor changed"));
    m_cancelButton = new QPushButton(tr("Cancel"), this);
    m_exportButton = new QPushButton(tr("Export…"), this);
    m_exportButton->setToolTip(tr("Write results.json, table2.csv, table3.csv and the three charts as PNG into a folder"));
    layout->addLayout(controls);

    // Buttons and progress on a row of their own: the tab stays narrow enough to share a dock area
    // with the Timings panel in a 1280-pixel window.
    auto* actions = new QHBoxLayout;
    actions->addWidget(m_runButton);
    actions->addWidget(m_cancelButton);
    actions->addWidget(m_exportButton);
    m_progress = new QProgressBar(this);
    m_progress->setRange(0, 1);
    m_progress->setValue(0);
    actions->addWidget(m_progress, 1);
    layout->addLayout(actions);
    m_status = new QLabel(tr("Medians (p50) and p95 over the queries; speed-up, saving and break-even from the medians."), this);
    m_status->setWordWrap(true);
    layout->addWidget(m_status);

    m_tabs = new QTabWidget(this);
    m_table2 = makeTable(this, tr("Table 2 (deployment economics): compile once, save (full - cached) TTFT per request"));
    m_table3 = makeTable(this, tr("Table 3 (TTFT scaling): the cache-hit TTFT split into link and suffix prefill"));
    m_sweepChart = new SweepChart;
    m_splitChart = new RequestChart;
    m_amortChart = new AmortisationChart;
    m_tabs->addTab(m_table2, tr("Table 2"));
    m_tabs->addTab(m_table3, tr("Table 3"));
    for (auto [chart, name] : {std::pair<TimingChart*, QString>{m_sweepChart, tr("TTFT vs tools")},
                               {m_splitChart, tr("Timing split")},
                               {m_amortChart, tr("Amortisation")}}) {
        chart->applyPalette(palette());
        auto* view = new QChartView(chart, this);
        view->setRenderHint(QPainter::Antialiasing);
        m_tabs->addTab(view, name);
    }
    layout->addWidget(m_tabs, 1);

    connect(m_runButton, &QPushButton::clicked, this, &BenchPanel::run);
    connect(m_cancelButton, &QPushButton::clicked, this, &BenchPanel::cancel);
    connect(m_exportButton, &QPushButton::clicked, this, &BenchPanel::exportInteractive);
    connect(m_engine, &EngineController::benchFinished, this, [this](const BenchOutcome& o) {
        showOutcome(o);
        m_status->setText(tr("finished: %1 tool sets, %2 queries each").arg(o.rows.size()).arg(o.options.n_queries));
    });
    connect(m_engine, &EngineController::progress, this, [this](const Progress& p) {
        if (p.task != QLatin1String("bench")) return;
        m_progress->setRange(0, int(std::max<qint64>(1, p.total)));
        m_progress->setValue(int(p.done));
        m_status->setText(p.text);
    });
    connect(m_engine, &EngineController::busyChanged, this, [this](bool busy, const QString& task) {
        const bool was = m_running;
        m_running = busy && task == QLatin1String("bench");
        refreshEnabled();
        if (was && !m_running) emit finished();
    });
    connect(m_engine, &EngineController::cancelled, this, [this](const QString& task) {
        if (task == QLatin1String("bench")) m_status->setText(tr("cancelled"));
    });
    connect(m_engine, &EngineController::failed, this, [this](const QString& task, const QString& message) {
        if (task == QLatin1String("bench")) m_status->setText(tr("failed: %1").arg(message));
    });
    connect(m_engine, &EngineController::modelLoaded, this, &BenchPanel::refreshEnabled);
    refreshEnabled();
}

BenchRequest BenchPanel::request() const {
    BenchRequest r;
    r.toolCounts.clear();
    for (const QString& part : m_counts->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        bool ok = false;
        const int n = part.trimmed().toInt(&ok);
        if (!ok || n < 1 || n > 100)
            throw std::invalid_argument(QStringLiteral("tool counts: \"%1\" is not a number from 1 to 100").arg(part.trimmed()).toStdString());
        r.toolCounts.push_back(n);
    }
    if (r.toolCounts.empty()) throw std::invalid_argument("tool counts: give at least one, e.g. 5,10,20");
    r.nQueries = m_nQueries->value();
    r.warmup = m_warmup->value();
    r.maxNewTokens = m_maxNew->value();
    r.systemPrompt = cc::bundled_system_prompt();
    return r;
}

void BenchPanel::setToolCounts(const QString& text) { m_counts->setText(text); }

void BenchPanel::setQueries(int nQueries, int warmup, int maxNewTokens) {
    m_nQueries->setValue(nQueries);
    m_warmup->setValue(warmup);
    m_maxNew->setValue(maxNewTokens);
}

void BenchPanel::run() {
    BenchRequest r;
    try {
        r = request();
    } catch (const std::invalid_argument& e) {
        m_status->setText(QString::fromStdString(e.what()));
        return;
    }
    m_status->setText(tr("starting…"));
    m_engine->runBench(r);
}

void BenchPanel::cancel() {
    if (m_running) m_engine->cancel();
}

QString BenchPanel::statusText() const { return m_status->text(); }

void BenchPanel::showOutcome(const BenchOutcome& outcome) {
    m_outcome = outcome;
    fillFromCsv(m_table2, cc::table2_csv(outcome.rows));
    fillFromCsv(m_table3, cc::table3_csv(outcome.rows));
    m_sweepChart->setPoints(benchSweepPoints(outcome.rows));
    const int focus = benchFocusRow(outcome.rows);
    if (focus >= 0) {
        const RequestRecord record = benchSplitRecord(outcome.rows[size_t(focus)]);
        m_splitChart->setRecord(&record);  // the chart copies what it draws
        m_amortChart->setAmortisation(benchAmortisation(outcome.rows[size_t(focus)]));
    }
    refreshEnabled();
}

bool BenchPanel::exportTo(const QString& dir, QString* error) const {
    if (!m_outcome) {
        if (error) *error = tr("no benchmark results yet: press Run");
        return false;
    }
    if (!QDir().mkpath(dir)) {
        if (error) *error = tr("%1: cannot create the directory").arg(dir);
        return false;
    }
    const QDir d(dir);
    const auto json = cc::paper_bench_json(m_outcome->rows, m_outcome->options, m_outcome->model);
    return writeFile(d.filePath(QStringLiteral("results.json")), json.dump(2) + "\n", error) &&
           writeFile(d.filePath(QStringLiteral("table2.csv")), cc::table2_csv(m_outcome->rows), error) &&
           writeFile(d.filePath(QStringLiteral("table3.csv")), cc::table3_csv(m_outcome->rows), error) &&
           writeBenchCharts(m_outcome->rows, dir, palette(), error);
}

void BenchPanel::exportInteractive() {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Export the benchmark into a folder"));
    if (dir.isEmpty()) return;
    QString error;
    if (!exportTo(dir, &error)) QMessageBox::warning(this, tr("Export"), error);
    else m_status->setText(tr("exported to %1").arg(dir));
}

void BenchPanel::refreshEnabled() {
    const bool loaded = m_engine->modelInfo() != nullptr;
    m_runButton->setEnabled(loaded && !m_running && !m_engine->busy());
    m_cancelButton->setEnabled(m_running);
    m_exportButton->setEnabled(m_outcome.has_value() && !m_running);
}

}  // namespace cc::ui
