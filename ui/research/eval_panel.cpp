#include "ui/research/eval_panel.h"

#include "ui/worker/engine_controller.h"
#include "ui/widgets/resources.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

namespace cc::ui {
namespace {

QString ratio(const std::optional<double>& v) {
    return v ? QString::number(*v, 'f', 3) : QStringLiteral("–");
}

QTableWidgetItem* item(const QString& text, const QString& tip = QString()) {
    auto* it = new QTableWidgetItem(text);
    it->setFlags(it->flags() & ~Qt::ItemIsEditable);
    if (!tip.isEmpty()) it->setToolTip(tip);
    return it;
}

QString callText(const std::optional<cc::ToolCall>& call) {
    if (!call) return QStringLiteral("(no call)");
    return QString::fromStdString(call->name + " " + call->arguments.dump());
}

QTableWidget* makeTable(const QStringList& headers) {
    auto* t = new QTableWidget(0, int(headers.size()));
    t->setHorizontalHeaderLabels(headers);
    t->verticalHeader()->setVisible(false);
    t->setSelectionBehavior(QAbstractItemView::SelectRows);
    t->horizontalHeader()->setStretchLastSection(true);
    return t;
}

}  // namespace

QString EvalPanel::bundledDataset() {
    return QStringLiteral(":/eval/tool_calls.jsonl");
}

EvalPanel::EvalPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine) {
    m_dataset = new QComboBox;
    m_dataset->addItem(tr("Bundled set: 120 queries over tools_5/10/20/50"), bundledDataset());
    m_dataset->setToolTip(tr("A JSONL dataset: one {\"tools\" | \"tools_file\", \"query\", \"expected\"} per line"));
    m_browseButton = new QPushButton(tr("Open…"));
    m_mode = new QComboBox;
    m_mode->addItems({QStringLiteral("both"), QStringLiteral("cached"), QStringLiteral("full"),
                      QStringLiteral("per_tool_nope")});
    m_mode->setEditable(true);  // any other engine mode name (e.g. an experiment) can be typed
    m_mode->setToolTip(tr("both: full prefill and cached path on every query, outputs compared token for token\n"
                          "per_tool_nope: the paper's experiment (each tool's KV computed alone, composed with "
                          "deferred RoPE) against the full prefill of the same prompt"));
    m_limit = new QSpinBox;
    m_limit->setRange(0, 1000000);
    m_limit->setSpecialValueText(tr("all"));
    m_maxTokens = new QSpinBox;
    m_maxTokens->setRange(1, 4096);
    m_maxTokens->setValue(64);
    m_runButton = new QPushButton(tr("Run"));
    m_cancelButton = new QPushButton(tr("Cancel"));
    m_progress = new QProgressBar;
    m_progress->setRange(0, 1);
    m_progress->setValue(0);
    m_warning = new QLabel;
    m_warning->setObjectName(QStringLiteral("evalSyntheticWarning"));
    m_warning->setWordWrap(true);
    m_warning->setStyleSheet(QStringLiteral("color: #b35c00;"));
    m_status = new QLabel;
    m_status->setWordWrap(true);
    m_identical = new QLabel;
    m_summary = makeTable({tr("Mode"), tr("TSA"), tr("PF1"), tr("EM"), tr("FPR"), tr("FNR"), tr("Correct"), tr("Wrong"),
                           tr("FP"), tr("FN"), tr("Mean TTFT ms")});
    m_summary->setToolTip(
        tr("TSA, EM, FNR over tool-call examples; PF1 over correct-tool examples; FPR over no-call examples"));
    m_examples = makeTable({tr("#"), tr("Id"), tr("Tools"), tr("Query"), tr("Expected"), tr("Predicted"),
                            tr("Correct tool"), tr("F1"), tr("Identical")});

    auto* datasetRow = new QHBoxLayout;
    datasetRow->addWidget(m_dataset, 1);
    datasetRow->addWidget(m_browseButton);
    auto* form = new QFormLayout;
    form->addRow(tr("Dataset"), datasetRow);
    auto* options = new QHBoxLayout;
    options->addWidget(new QLabel(tr("Mode")));
    options->addWidget(m_mode);
    options->addWidget(new QLabel(tr("Limit")));
    options->addWidget(m_limit);
    options->addWidget(new QLabel(tr("Max tokens")));
    options->addWidget(m_maxTokens);
    options->addStretch(1);
    options->addWidget(m_runButton);
    options->addWidget(m_cancelButton);
    form->addRow(options);
    auto* tables = new QSplitter(Qt::Vertical);
    tables->addWidget(m_summary);
    tables->addWidget(m_examples);
    tables->setStretchFactor(1, 3);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(m_progress);
    layout->addWidget(m_warning);
    layout->addWidget(m_status);
    layout->addWidget(m_identical);
    layout->addWidget(tables, 1);

    connect(m_runButton, &QPushButton::clicked, this, &EvalPanel::run);
    connect(m_cancelButton, &QPushButton::clicked, this, &EvalPanel::cancel);
    connect(m_browseButton, &QPushButton::clicked, this, &EvalPanel::browse);
    connect(m_engine, &EngineController::evalRecord, this, &EvalPanel::onRecord);
    connect(m_engine, &EngineController::evalFinished, this, &EvalPanel::onFinished);
    connect(m_engine, &EngineController::failed, this, &EvalPanel::onFailed);
    connect(m_engine, &EngineController::progress, this, [this](const Progress& p) {
        if (p.task != QLatin1String("eval")) return;
        m_progress->setRange(0, int(std::max<qint64>(1, p.total)));
        m_progress->setValue(int(p.done));
        m_progress->setFormat(p.text);
    });
    connect(m_engine, &EngineController::modelLoaded, this, [this] {
        updateWarning();
        updateButtons();
    });
    connect(m_engine, &EngineController::busyChanged, this, [this] { updateButtons(); });
    updateWarning();
    updateButtons();
}

QString EvalPanel::datasetPath() const {
    return m_dataset->currentData().toString();
}

void EvalPanel::setDatasetPath(const QString& path) {
    int i = m_dataset->findData(path);
    if (i < 0) {
        m_dataset->addItem(path, path);
        i = m_dataset->count() - 1;
    }
    m_dataset->setCurrentIndex(i);
}

void EvalPanel::setMode(const QString& mode) {
    m_mode->setCurrentText(mode);
}
void EvalPanel::setLimit(int n) {
    m_limit->setValue(n);
}
void EvalPanel::setMaxTokens(int n) {
    m_maxTokens->setValue(n);
}

QString EvalPanel::identicalText() const {
    return m_identical->text();
}
QString EvalPanel::nopeText() const {
    return m_nopeText;
}
QString EvalPanel::warningText() const {
    return m_warning->isHidden() ? QString() : m_warning->text();
}
QString EvalPanel::statusText() const {
    return m_status->text();
}

void EvalPanel::browse() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open an evaluation dataset"), QString(),
                                                      tr("JSON lines (*.jsonl);;All files (*)"));
    if (!path.isEmpty()) setDatasetPath(path);
}

void EvalPanel::run() {
    if (m_running || !m_engine->modelInfo()) return;
    EvalRequest request;
    request.datasetPath = datasetPath().toStdString();
    request.options.mode = m_mode->currentText().trimmed().toStdString();
    try {
        cc::eval_query_mode(request.options.mode);
    } catch (const std::exception& e) {
        m_status->setText(QString::fromStdString(e.what()));
        return;
    }
    request.options.limit = size_t(m_limit->value());
    request.options.query.max_new_tokens = m_maxTokens->value();
    request.options.system_prompt = defaultSystemPrompt().toStdString();
    m_records.clear();
    m_hasResult = false;
    m_examples->setRowCount(0);
    m_summary->setRowCount(0);
    m_identical->clear();
    m_nopeText.clear();
    m_status->setToolTip(QString());
    m_status->setText(tr("Running %1 on %2…").arg(m_mode->currentText(), m_dataset->currentText()));
    m_running = true;
    updateButtons();
    m_engine->runEval(request);
}

void EvalPanel::cancel() {
    if (m_running) m_engine->cancel();
}

void EvalPanel::onRecord(const cc::EvalRecord& record) {
    if (!m_running) return;
    m_records.push_back(record);
    const int row = m_examples->rowCount();
    m_examples->insertRow(row);
    const auto& primary = record.outputs.front();
    QString predicted;
    for (const auto& o : record.outputs)
        predicted += (predicted.isEmpty() ? QString() : QStringLiteral("  |  ")) + QString::fromStdString(o.mode) +
                     QStringLiteral(": ") + callText(o.tool_call);
    const QString expected =
        record.expected ? QString::fromStdString(record.expected->name + " " + record.expected->arguments.dump())
                        : QStringLiteral("(no call)");
    const bool ok = record.expected ? primary.score.correct_tool : !primary.score.false_positive;
    m_examples->setItem(row, 0, item(QString::number(record.index + 1)));
    m_examples->setItem(row, 1, item(QString::fromStdString(record.id), QString::fromStdString(record.source)));
    m_examples->setItem(row, 2, item(QString::number(record.n_tools), QString::fromStdString(record.tools_label)));
    m_examples->setItem(row, 3, item(QString::fromStdString(record.query), QString::fromStdString(record.query)));
    m_examples->setItem(row, 4, item(expected, expected));
    m_examples->setItem(row, 5, item(predicted, QString::fromStdString(primary.text)));
    m_examples->setItem(row, 6, item(ok ? tr("yes") : tr("no")));
    m_examples->setItem(row, 7,
                        item(primary.score.f1 ? QString::number(*primary.score.f1, 'f', 3) : QStringLiteral("–")));
    m_examples->setItem(
        row, 8,
        item(record.identical_tokens ? (*record.identical_tokens ? tr("identical") : tr("DIFFERENT")) : QString()));
    showSummary(cc::summarize_records(m_records));
}

void EvalPanel::onFinished(const cc::EvalRunResult& result) {
    if (!m_running) return;
    m_running = false;
    m_result = result;
    m_hasResult = true;
    showSummary(result.summaries);
    if (result.n_compared)
        m_identical->setText(tr("Identical outputs (token for token): %1 / %2; bit-identical logits: %3 / %2")
                                 .arg(result.n_identical_tokens)
                                 .arg(result.n_compared)
                                 .arg(result.n_identical_logits));
    // The NoPE means share the status line: a line of their own would make the window's minimum
    // height exceed 800 px with the default model's two-line banner.
    const cc::NopeMeans nope = cc::nope_means(result.records);
    m_nopeText = nope.n ? tr("NoPE vs full, means over %1: first-token cosine %2 · KL %3 nats · top-1 %4%5")
                              .arg(nope.n)
                              .arg(nope.logit_cosine_first, 0, 'f', 6)
                              .arg(nope.kl_first, 0, 'g', 3)
                              .arg(nope.top1_agreement, 0, 'f', 3)
                              .arg(nope.nan_figures ? tr(" (%1 not finite, left out)").arg(nope.nan_figures) : QString())
                        : QString();
    m_status->setToolTip(nope.n ? tr("Per-tool NoPE vs full prefill, the means of the examples' reports: the logit cosine "
                                     "and KL(full ‖ composed) at the first generated position, and the teacher-forced "
                                     "top-1 agreement over the full run's steps")
                                : QString());
    const size_t n = result.records.size();
    const QString examples = n == 1 ? tr("1 example") : tr("%1 examples").arg(n);
    const QString done = result.cancelled ? tr("Cancelled after %1; the figures cover those.").arg(examples)
                                          : tr("Done: %1.").arg(examples);
    m_status->setText(m_nopeText.isEmpty() ? done : done + QLatin1Char(' ') + m_nopeText);
    updateWarning();
    updateButtons();
}

void EvalPanel::onFailed(const QString& task, const QString& message) {
    if (task != QLatin1String("eval") || !m_running) return;
    m_running = false;
    m_status->setText(tr("Evaluation failed: %1").arg(message));
    updateButtons();
}

void EvalPanel::showSummary(const std::vector<cc::EvalModeSummary>& summaries) {
    m_summary->setRowCount(int(summaries.size()));
    for (int row = 0; row < int(summaries.size()); ++row) {
        const auto& s = summaries[size_t(row)];
        const auto& m = s.metrics;
        const QStringList cells{QString::fromStdString(s.mode),
                                ratio(m.tsa),
                                ratio(m.pf1),
                                ratio(m.em),
                                ratio(m.fpr),
                                ratio(m.fnr),
                                QString::number(m.n_correct_tool),
                                QString::number(m.n_wrong_tool),
                                QString::number(m.n_false_positive),
                                QString::number(m.n_false_negative),
                                QString::number(s.mean_ttft_ms, 'f', 1)};
        for (int c = 0; c < cells.size(); ++c) m_summary->setItem(row, c, item(cells[c]));
    }
}

void EvalPanel::updateWarning() {
    const auto* info = m_engine->modelInfo();
    const bool synthetic = info && info->synthetic_weights;
    m_warning->setVisible(synthetic);
    if (synthetic)
        m_warning->setText(tr("<b>%1</b>: %2")
                               .arg(QString::fromStdString(info->spec).toHtmlEscaped(),
                                    QString::fromUtf8(cc::kSyntheticEvalWarning).toHtmlEscaped()));
}

void EvalPanel::updateButtons() {
    m_runButton->setEnabled(!m_running && m_engine->modelInfo() && !m_engine->busy());
    m_cancelButton->setEnabled(m_running);
    m_dataset->setEnabled(!m_running);
    m_browseButton->setEnabled(!m_running);
}

}  // namespace cc::ui
