#include "ui/panels/query_panel.h"

#include "ui/worker/engine_controller.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFontDatabase>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QTextBrowser>
#include <QVBoxLayout>

namespace cc::ui {

namespace {

QFont monospace() { return QFontDatabase::systemFont(QFontDatabase::FixedFont); }

const char* const kBadgeGreen = "background: #2e7d32; color: white; border-radius: 4px; padding: 3px 8px; font-weight: bold;";
const char* const kBadgeRed = "background: #c62828; color: white; border-radius: 4px; padding: 3px 8px; font-weight: bold;";

QPlainTextEdit* makeOutput(QWidget* parent, const QString& objectName, const QString& tip) {
    auto* out = new QPlainTextEdit(parent);
    out->setObjectName(objectName);
    out->setReadOnly(true);
    out->setFont(monospace());
    out->setToolTip(tip);
    out->setPlaceholderText(QObject::tr("Output appears here as it is generated."));
    return out;
}

void appendPlain(QPlainTextEdit* edit, const QString& text) {
    QScrollBar* bar = edit->verticalScrollBar();
    const bool atEnd = bar->value() == bar->maximum();
    QTextCursor cursor(edit->document());
    cursor.movePosition(QTextCursor::End);
    cursor.insertText(text);
    if (atEnd) bar->setValue(bar->maximum());
}

}  // namespace

QueryPanel::QueryPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine) {
    m_input = new QPlainTextEdit(this);
    m_input->setObjectName(QStringLiteral("queryInput"));
    m_input->setPlaceholderText(tr("Ask something that needs one of the tools…  (Ctrl+Enter sends)"));
    m_input->setToolTip(tr("The next user message. The tool set, the system prompt and the earlier turns are "
                           "reused from the cache; only what is new is prefilled. Ctrl+Enter sends it."));
    m_input->setTabChangesFocus(true);
    m_input->setMaximumHeight(m_input->fontMetrics().lineSpacing() * 3 + 14);   // the turns above get the height
    m_input->setMinimumHeight(m_input->fontMetrics().lineSpacing() * 2 + 14);
    m_input->installEventFilter(this);

    m_mode = new QComboBox(this);
    m_mode->setObjectName(QStringLiteral("modeCombo"));
    m_mode->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_mode->addItem(tr("cached"), int(QueryKind::cached));
    m_mode->addItem(tr("full"), int(QueryKind::full));
    m_mode->addItem(tr("compare"), int(QueryKind::compare));
    m_mode->addItem(tr("per-tool NoPE (experiment)"), int(QueryKind::per_tool_nope));
    m_mode->setItemData(0, tr("Link the compiled prefix KV and prefill only the query"), Qt::ToolTipRole);
    m_mode->setItemData(1, tr("Prefill the whole prompt (the reference)"), Qt::ToolTipRole);
    m_mode->setItemData(2, tr("Run both and check the outputs and logits are bit-identical"), Qt::ToolTipRole);
    m_mode->setItemData(3,
                        tr("The paper's negative result: compile each tool alone, compose them with deferred RoPE, and "
                           "measure against a full prefill (not exact by design)"),
                        Qt::ToolTipRole);
    m_mode->setToolTip(tr("cached: link the stored prefix KV; full: prefill everything; compare: both, checked bit for bit"));
    connect(m_mode, &QComboBox::currentIndexChanged, this, [this] { updateCompareVisibility(); });

    m_maxTokens = new QSpinBox(this);
    m_maxTokens->setObjectName(QStringLiteral("maxTokensSpin"));
    m_maxTokens->setRange(1, 32768);
    m_maxTokens->setValue(64);
    m_maxTokens->setToolTip(tr("Most tokens to generate"));

    m_temperature = new QDoubleSpinBox(this);
    m_temperature->setObjectName(QStringLiteral("temperatureSpin"));
    m_temperature->setRange(0.0, 2.0);
    m_temperature->setSingleStep(0.1);
    m_temperature->setDecimals(2);
    m_temperature->setValue(0.0);
    m_temperature->setSpecialValueText(tr("greedy"));
    m_temperature->setToolTip(tr("Sampling temperature; 0 = greedy (deterministic)"));

    m_ignoreEos = new QCheckBox(tr("Ignore EOS"), this);
    m_ignoreEos->setObjectName(QStringLiteral("ignoreEosCheck"));
    m_ignoreEos->setToolTip(tr("Keep generating past the end-of-turn token, up to the max tokens (for timing decode)"));

    m_strict = new QCheckBox(tr("Strict"), this);
    m_strict->setObjectName(QStringLiteral("strictCheck"));
    m_strict->setToolTip(tr("Mask every tool call's arguments to JSON its tool's schema accepts (like --strict); "
                            "a schema with an unsupported keyword is refused by name"));

    m_runButton = new QPushButton(tr("Send"), this);
    m_runButton->setObjectName(QStringLiteral("runButton"));
    m_runButton->setToolTip(tr("Send the message as the next user turn (Ctrl+Enter)"));
    m_runButton->setDefault(true);
    connect(m_runButton, &QPushButton::clicked, this, &QueryPanel::run);
    m_cancelButton = new QPushButton(tr("Cancel"), this);
    m_cancelButton->setObjectName(QStringLiteral("cancelButton"));
    m_cancelButton->setToolTip(tr("Stop the running turn at its next token"));
    connect(m_cancelButton, &QPushButton::clicked, this, &QueryPanel::cancel);
    m_newButton = new QPushButton(tr("New conversation"), this);
    m_newButton->setObjectName(QStringLiteral("newConversationButton"));
    m_newButton->setToolTip(tr("Forget the turns and start over (the tool set stays compiled)"));
    connect(m_newButton, &QPushButton::clicked, this, &QueryPanel::newConversation);

    auto* controls = new QHBoxLayout;
    auto* modeLabel = new QLabel(tr("Mode:"), this);
    modeLabel->setBuddy(m_mode);
    auto* maxLabel = new QLabel(tr("Max tokens:"), this);
    maxLabel->setBuddy(m_maxTokens);
    auto* tempLabel = new QLabel(tr("Temperature:"), this);
    tempLabel->setBuddy(m_temperature);
    controls->addWidget(modeLabel);
    controls->addWidget(m_mode);
    controls->addSpacing(6);
    controls->addWidget(maxLabel);
    controls->addWidget(m_maxTokens);
    controls->addSpacing(6);
    controls->addWidget(tempLabel);
    controls->addWidget(m_temperature);
    controls->addSpacing(6);
    controls->addWidget(m_ignoreEos);
    controls->addWidget(m_strict);
    controls->addStretch(1);

    // Run / Cancel beside the input, so the options row stays short in a narrow dock.
    auto* buttons = new QVBoxLayout;
    buttons->addWidget(m_runButton);
    buttons->addWidget(m_cancelButton);
    buttons->addStretch(1);
    auto* inputRow = new QHBoxLayout;
    inputRow->addWidget(m_input, 1);
    inputRow->addLayout(buttons);

    m_message = new QLabel(this);
    m_message->setObjectName(QStringLiteral("queryMessage"));
    m_message->setWordWrap(true);
    m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_message->setStyleSheet(QStringLiteral("color: #c62828;"));
    m_message->setToolTip(tr("Why the last query could not run or failed"));
    m_message->hide();

    m_badge = new QLabel(this);
    m_badge->setObjectName(QStringLiteral("compareBadge"));
    m_badge->setToolTip(tr("Compare mode: whether the cached run gave the full prefill's tokens and logits bit for bit"));
    m_badge->hide();

    m_status = new QLabel(this);
    m_status->setObjectName(QStringLiteral("queryStatus"));
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_status->setToolTip(tr("Time to first token, the cache tier the prefix came from, tokens and why generation stopped"));

    m_nope = new QLabel(this);
    m_nope->setObjectName(QStringLiteral("nopeMetrics"));
    m_nope->setWordWrap(true);
    m_nope->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_nope->setToolTip(tr("Per-tool NoPE: how far the composed per-tool K/V moves the output from a full prefill. "
                          "Cosine and KL at the first generated token; mean cosine and top-1 agreement over the full "
                          "run's steps, teacher-forced. The RoPE check compares deferred and standard rotation of the "
                          "same keys. With synthetic weights the figures say nothing about quality: load a real "
                          "checkpoint to measure."));
    m_nope->hide();


    // outputs: the cached (or only) run, and in compare mode the full-prefill run beside it
    auto* mainBox = new QWidget(this);
    m_outputTitle = new QLabel(tr("Reply"), mainBox);
    m_output = makeOutput(mainBox, QStringLiteral("queryOutput"), tr("The last reply, streamed as it is generated"));
    auto* mainLayout = new QVBoxLayout(mainBox);
    mainLayout->setContentsMargins(0, 0, 0, 0);
    mainLayout->addWidget(m_outputTitle);
    mainLayout->addWidget(m_output, 1);
    m_fullBox = new QWidget(this);
    auto* fullTitle = new QLabel(tr("Full prefill (reference)"), m_fullBox);
    m_fullOutput = makeOutput(m_fullBox, QStringLiteral("fullOutput"), tr("Compare mode: the output of the full prefill"));
    auto* fullLayout = new QVBoxLayout(m_fullBox);
    fullLayout->setContentsMargins(0, 0, 0, 0);
    fullLayout->addWidget(fullTitle);
    fullLayout->addWidget(m_fullOutput, 1);
    auto* outputs = new QSplitter(Qt::Horizontal, this);
    outputs->setToolTip(QString());
    outputs->addWidget(mainBox);
    outputs->addWidget(m_fullBox);
    outputs->setChildrenCollapsible(false);

    // the parsed tool call
    // One row, no frame (the Query dock is short at 1280x800): the call's name, and in compare
    // mode the badge at its right; the arguments table under it only when there are arguments.
    m_callBox = new QWidget(this);
    m_callBox->setToolTip(tr("The tool call parsed from the last reply: the tool's name and its arguments"));
    auto* callTitle = new QLabel(tr("<b>Tool call:</b>"), m_callBox);
    m_callName = new QLabel(tr("—"), m_callBox);
    m_callName->setObjectName(QStringLiteral("toolCallName"));
    m_callName->setFont(monospace());
    m_callName->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_callName->setToolTip(tr("The name of the called tool"));
    m_args = new QTableWidget(0, 2, m_callBox);
    m_args->setObjectName(QStringLiteral("toolCallArgs"));
    m_args->setHorizontalHeaderLabels({tr("Argument"), tr("Value (JSON)")});
    m_args->horizontalHeader()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
    m_args->horizontalHeader()->setStretchLastSection(true);
    m_args->verticalHeader()->hide();
    m_args->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_args->setFont(monospace());
    m_args->setToolTip(tr("The call's arguments, each value as compact JSON"));
    m_args->setMaximumHeight(m_args->fontMetrics().lineSpacing() * 6 + 12);
    // at least the header and one row: the dock shares 1280x800 with the others
    m_args->setMinimumHeight(m_args->fontMetrics().lineSpacing() * 2 + 12);
    auto* callRow = new QHBoxLayout;
    callRow->addWidget(callTitle);
    callRow->addWidget(m_callName, 1);
    callRow->addWidget(m_badge);
    auto* callLayout = new QVBoxLayout(m_callBox);
    callLayout->setContentsMargins(0, 0, 0, 0);
    callLayout->addLayout(callRow);
    callLayout->addWidget(m_args);
    m_args->hide();   // shown with a call's arguments: the panel stays short enough for 1280x800

    // the conversation so far
    m_transcript = new QTextBrowser(this);
    m_transcript->setObjectName(QStringLiteral("conversationView"));
    m_transcript->setOpenLinks(false);
    m_transcript->setToolTip(tr("The conversation: each answer with where its prompt came from — the group prefix "
                                "(tools + system prompt, and its cache tier), the earlier turns reused from the "
                                "conversation cache, and the new tokens prefilled now"));
    // Small minimums: the dock shares 1280x800 with the others; the splitter gives them the rest.
    const int line = m_transcript->fontMetrics().lineSpacing();
    m_transcript->setMinimumHeight(line * 2 + 12);
    m_output->setMinimumHeight(line * 2 + 12);
    m_fullOutput->setMinimumHeight(line * 2 + 12);
    m_transcript->setPlaceholderText(tr("The conversation appears here. Compile a tool set, type a message and press "
                                        "Ctrl+Enter; every turn after the first reuses the KV of the turns before."));

    // a result box per tool call of the last reply
    // One band with its title at the left, no frame: the dock stays short enough for 1280x800.
    auto* resultsGroup = new QWidget(this);
    resultsGroup->setObjectName(QStringLiteral("toolResultsBox"));
    resultsGroup->setToolTip(tr("What each called tool returned (edit it), sent back as tool messages with the "
                                "calls' ids; the model then answers again"));
    m_resultsBox = resultsGroup;
    m_resultsRows = new QWidget(resultsGroup);
    auto* rowsLayout = new QVBoxLayout(m_resultsRows);
    rowsLayout->setContentsMargins(0, 0, 0, 0);
    m_sendResults = new QPushButton(tr("Send result(s)"), resultsGroup);
    m_sendResults->setObjectName(QStringLiteral("sendResultsButton"));
    m_sendResults->setToolTip(tr("Append a tool message per call and run the next turn"));
    connect(m_sendResults, &QPushButton::clicked, this, &QueryPanel::sendToolResults);
    auto* resultsLayout = new QHBoxLayout(resultsGroup);
    resultsLayout->setContentsMargins(0, 0, 0, 0);
    resultsLayout->addWidget(new QLabel(tr("<b>Tool results:</b>"), resultsGroup), 0, Qt::AlignTop);
    resultsLayout->addWidget(m_resultsRows, 1);
    resultsLayout->addWidget(m_sendResults, 0, Qt::AlignBottom);
    m_resultsBox->hide();

    // "New conversation" sits on the listing's own header: the options row stays narrow enough
    // for presentation mode's large fonts.
    auto* conversationBox = new QWidget(this);
    auto* conversationHeader = new QHBoxLayout;
    conversationHeader->addWidget(new QLabel(tr("<b>Conversation</b>"), conversationBox));
    conversationHeader->addStretch(1);
    conversationHeader->addWidget(m_newButton);
    auto* conversationLayout = new QVBoxLayout(conversationBox);
    conversationLayout->setContentsMargins(0, 0, 0, 0);
    conversationLayout->setSpacing(2);
    conversationLayout->addLayout(conversationHeader);
    conversationLayout->addWidget(m_transcript, 1);

    auto* views = new QSplitter(Qt::Vertical, this);
    views->addWidget(conversationBox);
    views->addWidget(outputs);
    views->setStretchFactor(0, 3);
    views->setStretchFactor(1, 2);
    views->setChildrenCollapsible(false);

    auto* layout = new QVBoxLayout(this);
    layout->setSpacing(4);   // eight bands share the dock's height at 1280x800
    layout->addWidget(views, 1);
    layout->addWidget(m_callBox);
    layout->addWidget(m_resultsBox);
    layout->addWidget(m_message);
    layout->addWidget(m_status);
    layout->addWidget(m_nope);
    layout->addLayout(controls);
    layout->addLayout(inputRow);

    connect(m_engine, &EngineController::tokens, this, &QueryPanel::onTokens);
    connect(m_engine, &EngineController::queryFinished, this, &QueryPanel::onFinished);
    connect(m_engine, &EngineController::failed, this, &QueryPanel::onFailed);
    connect(m_engine, &EngineController::cancelled, this, &QueryPanel::onCancelled);
    connect(m_engine, &EngineController::busyChanged, this, [this](bool busy, const QString&) {
        // The query job has ended (the controller is idle) without an outcome reaching us.
        if (!busy && m_requestId != 0) endRequest();
    });

    updateCompareVisibility();
    updateButtons();
}

// ---- controls --------------------------------------------------------------------------------

QString QueryPanel::query() const { return m_input->toPlainText(); }
void QueryPanel::setQuery(const QString& text) { m_input->setPlainText(text); }

QueryKind QueryPanel::kind() const { return static_cast<QueryKind>(m_mode->currentData().toInt()); }

cc::QueryOptions QueryPanel::options() const {
    cc::QueryOptions o;
    switch (kind()) {
        case QueryKind::cached: o.mode = cc::QueryMode::cached; break;
        case QueryKind::full: o.mode = cc::QueryMode::full; break;
        case QueryKind::compare: o.mode = cc::QueryMode::compare; break;
        case QueryKind::per_tool_nope: o.mode = cc::QueryMode::full; break;  // the experiment runs its own reference
    }
    o.max_new_tokens = m_maxTokens->value();
    o.temperature = float(m_temperature->value());
    o.ignore_eos = m_ignoreEos->isChecked();
    o.tool_choice.strict = m_strict->isChecked();
    return o;
}

void QueryPanel::setMode(QueryKind kind) { m_mode->setCurrentIndex(m_mode->findData(int(kind))); }
void QueryPanel::setMaxTokens(int n) { m_maxTokens->setValue(n); }
void QueryPanel::setTemperature(double t) { m_temperature->setValue(t); }
void QueryPanel::setIgnoreEos(bool on) { m_ignoreEos->setChecked(on); }
void QueryPanel::setStrict(bool on) { m_strict->setChecked(on); }
QString QueryPanel::outputText() const { return m_output->toPlainText(); }
QString QueryPanel::fullOutputText() const { return m_fullOutput->toPlainText(); }
QString QueryPanel::badgeText() const { return m_badge->isHidden() ? QString() : m_badge->text(); }
QString QueryPanel::nopeText() const { return m_nope->isHidden() ? QString() : m_nope->text(); }
QString QueryPanel::statusText() const { return m_status->text(); }
QString QueryPanel::messageText() const { return m_message->isHidden() ? QString() : m_message->text(); }
QString QueryPanel::toolCallName() const { return m_toolCallName; }

bool QueryPanel::eventFilter(QObject* watched, QEvent* event) {
    if (watched == m_input && event->type() == QEvent::KeyPress) {
        auto* key = static_cast<QKeyEvent*>(event);
        if ((key->key() == Qt::Key_Return || key->key() == Qt::Key_Enter) && (key->modifiers() & Qt::ControlModifier)) {
            run();
            return true;
        }
    }
    return QWidget::eventFilter(watched, event);
}

void QueryPanel::updateCompareVisibility() {
    const bool compare = kind() == QueryKind::compare;
    const bool nope = kind() == QueryKind::per_tool_nope;
    m_fullBox->setVisible(compare || nope);
    m_outputTitle->setText(compare ? tr("Reply — cached (linked prefix and turns)") : nope ? tr("Per-tool NoPE (composed)") : tr("Reply"));
    // The NoPE report names both runs' calls; the box's height goes to the report, so the window
    // still fits 1280x800.
    m_callBox->setVisible(!nope);
}

void QueryPanel::updateButtons() {
    m_runButton->setEnabled(m_requestId == 0);
    m_cancelButton->setEnabled(m_requestId != 0);
    m_newButton->setEnabled(m_requestId == 0);
    m_sendResults->setEnabled(m_requestId == 0 && !m_pendingCalls.empty());
}

void QueryPanel::showMessage(const QString& text) {
    m_message->setText(text);
    m_message->setVisible(!text.isEmpty());
}

// ---- running ---------------------------------------------------------------------------------

void QueryPanel::run() {
    if (m_requestId != 0) return;   // one at a time; Cancel first
    const QString text = query().trimmed();
    if (text.isEmpty()) {
        showMessage(tr("Type a message first."));
        return;
    }
    if (!m_engine->modelInfo()) {
        showMessage(tr("No model is loaded: load a model, then compile a tool set."));
        return;
    }
    if (!m_engine->currentTools()) {
        showMessage(tr("No tool set is compiled: load a tool set and press Compile first."));
        return;
    }
    if (kind() == QueryKind::per_tool_nope) {
        // A single-query experiment: the conversation is left as it is.
        startTurn(QString());
        m_status->setText(tr("Running the full prefill, then each tool alone and the composed run…"));
        m_chatRequest = false;
        m_requestId = m_engine->runQuery(text.toStdString(), options(), QueryKind::per_tool_nope);
        updateButtons();
        emit queryStarted(m_requestId);
        return;
    }
    // A user message while tool calls wait for results leaves those calls unanswered: the chat
    // templates render that as it is.
    m_messages.push_back(cc::ChatMessage::user(text.toStdString()));
    m_notes.emplace_back();
    startTurn(text);
}

void QueryPanel::sendToolResults() {
    if (m_requestId != 0 || m_pendingCalls.empty()) return;
    for (size_t i = 0; i < m_pendingCalls.size(); ++i) {
        const QString text = i < m_resultEdits.size() ? m_resultEdits[i]->toPlainText() : QStringLiteral("{}");
        cc::ChatMessage m = cc::ChatMessage::tool_result(m_pendingCalls[i].id, text.toStdString());
        m.name = m_pendingCalls[i].name;
        m_messages.push_back(std::move(m));
        m_notes.emplace_back();
    }
    startTurn(tr("(%n tool result(s))", nullptr, int(m_pendingCalls.size())));
}

// Sends m_messages as the next turn; m_turnStart marks what to drop if it does not complete.
void QueryPanel::startTurn(const QString& label) {
    showMessage(QString());
    m_output->clear();
    m_fullOutput->clear();
    m_badge->hide();
    m_nope->hide();
    m_callName->setText(tr("—"));
    m_toolCallName.clear();
    m_args->setRowCount(0);
    updateCompareVisibility();
    if (kind() == QueryKind::per_tool_nope) return;   // the conversation (and any calls awaiting results) stays
    showToolResults({});
    const QueryKind k = kind();
    m_status->setText(k == QueryKind::compare ? tr("Turn %1: running the full prefill, then the cached run…").arg(m_turns + 1)
                                              : tr("Turn %1: running (%2)…").arg(m_turns + 1).arg(QString::fromUtf8(queryKindName(k))));
    m_chatRequest = true;
    m_pendingCalls.clear();
    m_requestId = m_engine->runChat(m_messages, options(), m_turns + 1, label.toStdString());
    renderTranscript();
    updateButtons();
    emit queryStarted(m_requestId);
}

void QueryPanel::rollBack() {
    if (!m_chatRequest) return;
    // The turn's own messages (its user message or tool results) were added from m_turnStart on.
    m_messages.resize(m_turnStart);
    m_notes.resize(m_turnStart);
    // Tool results that did not get an answer: the calls wait for them again.
    if (!m_messages.empty() && m_messages.back().role == cc::ChatMessage::Role::assistant) {
        m_pendingCalls = m_messages.back().tool_calls;
        showToolResults(m_pendingCalls);
    }
}

void QueryPanel::newConversation() {
    if (m_requestId != 0) return;
    m_messages.clear();
    m_notes.clear();
    m_turns = 0;
    m_turnStart = 0;
    m_pendingCalls.clear();
    m_lastReuse.clear();
    m_output->clear();
    m_fullOutput->clear();
    m_badge->hide();
    m_nope->hide();
    m_callName->setText(tr("—"));
    m_toolCallName.clear();
    m_args->setRowCount(0);
    m_args->hide();
    showToolResults({});
    showMessage(QString());
    m_status->setText(QString());
    renderTranscript();
    emit conversationReset();
}

void QueryPanel::cancel() {
    if (m_requestId == 0) return;
    m_engine->cancel();
    m_status->setText(tr("Cancelling…"));
}

void QueryPanel::endRequest() {
    const uint64_t id = m_requestId;
    m_requestId = 0;
    m_turnStart = m_messages.size();
    if (m_chatRequest) renderTranscript();
    updateButtons();
    emit queryDone(id);
}

void QueryPanel::onTokens(const TokenBatch& batch) {
    if (batch.requestId != m_requestId || m_requestId == 0) return;
    appendPlain(batch.fullRun ? m_fullOutput : m_output, batch.text);
}

QString QueryPanel::reuseLine(const cc::QueryResult& r) const {
    QString line = tr("group %1 (%2) + conversation %3 + new %4 tokens, TTFT %5 ms")
                       .arg(r.group_reused_tokens)
                       .arg(tierName(r.tier))
                       .arg(r.conversation_reused_tokens)
                       .arg(r.prefilled_tokens)
                       .arg(r.timings.ttft_ms, 0, 'f', 1);
    if (r.diverged_at) line += tr(", diverged at %1").arg(*r.diverged_at);
    if (r.full) line += tr(" · full prefill TTFT %1 ms").arg(r.full->timings.ttft_ms, 0, 'f', 1);
    if (r.identical) line += *r.identical ? tr(" · identical") : tr(" · DIFFERS");
    return line;
}

void QueryPanel::onFinished(const QueryOutcome& outcome) {
    if (outcome.requestId != m_requestId || m_requestId == 0) return;
    const cc::QueryResult& r = outcome.result;
    m_output->setPlainText(QString::fromStdString(r.text));
    if (r.full) m_fullOutput->setPlainText(QString::fromStdString(r.full->text));
    showToolCall(r);
    showBadge(r);
    showNope(outcome);

    QStringList parts;
    if (outcome.turn > 0) parts << tr("turn %1").arg(outcome.turn);
    parts << tr("TTFT %1 ms").arg(r.timings.ttft_ms, 0, 'f', 1);
    if (r.full) parts << tr("full TTFT %1 ms").arg(r.full->timings.ttft_ms, 0, 'f', 1);
    parts << tr("tier %1").arg(tierName(r.tier));
    if (outcome.nTools > 0) parts << tr("%1 tools").arg(outcome.nTools);
    if (outcome.turn > 0)
        parts << tr("%1 prompt tokens = group %2 + conversation %3 + new %4")
                     .arg(r.prompt_tokens)
                     .arg(r.group_reused_tokens)
                     .arg(r.conversation_reused_tokens)
                     .arg(r.prefilled_tokens);
    else
        parts << tr("%1 prefix + %2 query tokens").arg(r.prefix_tokens).arg(r.suffix_tokens);
    if (r.diverged_at) parts << tr("diverged at %1").arg(*r.diverged_at);
    parts << tr("%1 generated").arg(r.generated_tokens == 1 ? tr("1 token") : tr("%1 tokens").arg(r.generated_tokens));
    if (r.timings.decode_tok_s > 0) parts << tr("%1 tok/s").arg(r.timings.decode_tok_s, 0, 'f', 1);
    parts << tr("stop: %1").arg(QString::fromUtf8(cc::stop_reason_name(r.stop_reason)));
    QString status = parts.join(QStringLiteral("  ·  "));
    if (!r.problem.empty()) status += QStringLiteral("\n") + tr("Problem: %1").arg(QString::fromStdString(r.problem));
    m_status->setText(status);
    if (r.stop_reason == cc::StopReason::cancelled) {
        showMessage(tr("Cancelled after %1 generated token(s).").arg(r.generated_tokens));
        rollBack();
        endRequest();
        return;
    }
    if (m_chatRequest) {
        // The reply becomes the next turn's assistant message, its calls given ids.
        cc::ChatMessage reply = r.reply ? cc::assistant_message(*r.reply) : cc::ChatMessage::assistant(r.text);
        const std::string format = m_engine->modelInfo() ? m_engine->modelInfo()->chat_format : std::string();
        for (auto& call : reply.tool_calls) call.id = m_callIds.next(format);
        m_pendingCalls = reply.tool_calls;
        m_messages.push_back(std::move(reply));
        m_lastReuse = reuseLine(r);
        m_notes.push_back(m_lastReuse);
        ++m_turns;
        m_input->clear();
        showToolResults(m_pendingCalls);
    }
    endRequest();
}

void QueryPanel::onFailed(const QString& task, const QString& message) {
    if (task != QLatin1String("query") || m_requestId == 0) return;
    showMessage(tr("Query failed: %1").arg(message));
    m_status->setText(QString());
    rollBack();
    endRequest();
}

void QueryPanel::onCancelled(const QString& task) {
    if (task != QLatin1String("query")) return;
    if (m_requestId == 0) return;   // the outcome (stop reason "cancelled") came first
    showMessage(tr("Cancelled."));
    m_status->setText(QString());
    rollBack();
    endRequest();
}

// ---- the conversation ------------------------------------------------------------------------

namespace {

QString callText(const cc::ChatToolCall& call) {
    return QString::fromStdString(call.name) + QLatin1Char(' ') +
           QString::fromStdString(call.arguments_text ? *call.arguments_text
                                                      : call.arguments.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

QString paragraphs(const QString& text) {
    return text.toHtmlEscaped().replace(QLatin1Char('\n'), QLatin1String("<br>"));
}

}  // namespace

void QueryPanel::renderTranscript() {
    QString html;
    const auto callName = [this](const std::string& id) {
        for (const auto& m : m_messages)
            for (const auto& c : m.tool_calls)
                if (c.id == id) return QString::fromStdString(c.name);
        return QString();
    };
    int turn = 0;
    for (size_t i = 0; i < m_messages.size(); ++i) {
        const cc::ChatMessage& m = m_messages[i];
        switch (m.role) {
            case cc::ChatMessage::Role::system:
                html += tr("<p><b>System:</b> %1</p>").arg(paragraphs(QString::fromStdString(m.content)));
                break;
            case cc::ChatMessage::Role::user:
                html += tr("<p><b>You:</b> %1</p>").arg(paragraphs(QString::fromStdString(m.content)));
                break;
            case cc::ChatMessage::Role::assistant: {
                ++turn;
                QString body = paragraphs(QString::fromStdString(m.content));
                for (const auto& c : m.tool_calls)
                    body += tr("<br>→ tool call <code>%1</code> <span style=\"color:#888\">(%2)</span>")
                                .arg(callText(c).toHtmlEscaped(), QString::fromStdString(c.id).toHtmlEscaped());
                html += tr("<p><b>Assistant</b> (turn %1): %2").arg(turn).arg(body);
                if (i < m_notes.size() && !m_notes[i].isEmpty())
                    html += QStringLiteral("<br><small style=\"color:#888\">%1</small>").arg(m_notes[i].toHtmlEscaped());
                html += QStringLiteral("</p>");
                break;
            }
            case cc::ChatMessage::Role::tool:
                html += tr("<p><b>Tool result</b> %1 <span style=\"color:#888\">(%2)</span>: <code>%3</code></p>")
                            .arg(callName(m.tool_call_id).toHtmlEscaped(), QString::fromStdString(m.tool_call_id).toHtmlEscaped(),
                                 paragraphs(QString::fromStdString(m.content)));
                break;
        }
    }
    if (m_requestId != 0 && m_chatRequest)
        html += tr("<p><b>Assistant</b> (turn %1): <i>generating — the reply streams in below</i></p>").arg(m_turns + 1);
    m_transcript->setHtml(html);
    QScrollBar* bar = m_transcript->verticalScrollBar();
    bar->setValue(bar->maximum());
}

void QueryPanel::showToolResults(const std::vector<cc::ChatToolCall>& calls) {
    for (QWidget* w : m_resultsRows->findChildren<QWidget*>(QString(), Qt::FindDirectChildrenOnly)) delete w;
    m_resultEdits.clear();
    auto* rows = static_cast<QVBoxLayout*>(m_resultsRows->layout());
    for (size_t i = 0; i < calls.size(); ++i) {
        auto* row = new QWidget(m_resultsRows);
        auto* rowLayout = new QHBoxLayout(row);
        rowLayout->setContentsMargins(0, 0, 0, 0);
        auto* label = new QLabel(tr("%1 <span style=\"color:#888\">(%2)</span>")
                                     .arg(QString::fromStdString(calls[i].name).toHtmlEscaped(),
                                          QString::fromStdString(calls[i].id).toHtmlEscaped()),
                                 row);
        auto* edit = new QPlainTextEdit(QStringLiteral("{}"), row);
        edit->setObjectName(QStringLiteral("toolResult%1").arg(i));
        edit->setFont(monospace());
        edit->setTabChangesFocus(true);
        edit->setToolTip(tr("The result of %1, as the tool would return it (usually JSON)").arg(QString::fromStdString(calls[i].name)));
        edit->setFixedHeight(edit->fontMetrics().lineSpacing() + 14);   // one line shown; it scrolls
        rowLayout->addWidget(label);
        rowLayout->addWidget(edit, 1);
        rows->addWidget(row);
        m_resultEdits.push_back(edit);
    }
    m_resultsBox->setVisible(!calls.empty());
    updateButtons();
}

int QueryPanel::pendingToolCalls() const { return int(m_pendingCalls.size()); }

void QueryPanel::setToolResult(int call, const QString& text) {
    if (call >= 0 && size_t(call) < m_resultEdits.size()) m_resultEdits[size_t(call)]->setPlainText(text);
}

QString QueryPanel::transcriptText() const { return m_transcript->toPlainText(); }
QString QueryPanel::lastReuseText() const { return m_lastReuse; }

void QueryPanel::showToolCall(const cc::QueryResult& r) {
    m_args->setRowCount(0);
    if (r.reply && !r.reply->tool_calls.empty()) {
        // A conversation reply: every call's arguments, named by the call when there are several.
        const auto& calls = r.reply->tool_calls;
        m_toolCallName = QString::fromStdString(calls.front().name);
        QStringList names;
        for (const auto& c : calls) names << QString::fromStdString(c.name);
        m_callName->setText(r.reply->tool_calls_valid ? names.join(QStringLiteral(", "))
                                                      : tr("%1  (arguments are not a valid JSON object)").arg(names.join(QStringLiteral(", "))));
        int row = 0;
        for (const auto& c : calls) {
            for (auto it = c.arguments.begin(); it != c.arguments.end(); ++it, ++row) {
                m_args->setRowCount(row + 1);
                const QString key = QString::fromStdString(it.key());
                m_args->setItem(row, 0, new QTableWidgetItem(calls.size() > 1 ? QString::fromStdString(c.name) + QLatin1Char('.') + key : key));
                auto* value = new QTableWidgetItem(QString::fromStdString(it.value().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
                value->setToolTip(value->text());
                m_args->setItem(row, 1, value);
            }
        }
        m_args->setVisible(row > 0);
        return;
    }
    m_args->setVisible(bool(r.tool_call));
    if (!r.tool_call) {
        m_callName->setText(tr("— (no tool call in the output)"));
        m_toolCallName.clear();
        return;
    }
    const cc::ToolCall& call = *r.tool_call;
    const QString name = QString::fromStdString(call.name);
    m_toolCallName = name;
    m_callName->setText(call.arguments_valid ? name : tr("%1  (arguments are not a valid JSON object)").arg(name));
    if (!call.arguments_valid) {
        m_args->setRowCount(1);
        m_args->setItem(0, 0, new QTableWidgetItem(tr("(raw)")));
        auto* raw = new QTableWidgetItem(QString::fromStdString(call.raw));
        raw->setToolTip(raw->text());
        m_args->setItem(0, 1, raw);
        return;
    }
    int row = 0;
    m_args->setRowCount(int(call.arguments.size()));
    for (auto it = call.arguments.begin(); it != call.arguments.end(); ++it, ++row) {
        auto* key = new QTableWidgetItem(QString::fromStdString(it.key()));
        auto* value = new QTableWidgetItem(QString::fromStdString(it.value().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
        value->setToolTip(value->text());
        m_args->setItem(row, 0, key);
        m_args->setItem(row, 1, value);
    }
}

void QueryPanel::showBadge(const cc::QueryResult& r) {
    if (!r.identical.has_value()) {
        m_badge->hide();
        return;
    }
    if (*r.identical) {
        m_badge->setText(tr("identical — %1 tokens, logits bit-identical").arg(r.tokens.size()));
        m_badge->setStyleSheet(QString::fromLatin1(kBadgeGreen));
    } else {
        const size_t at = r.first_difference.value_or(0);
        m_badge->setText(tr("differs at token %1 (max |Δ logit| %2)").arg(at).arg(r.max_abs_logit_diff, 0, 'g', 3));
        m_badge->setStyleSheet(QString::fromLatin1(kBadgeRed));
    }
    m_badge->show();
}

void QueryPanel::showNope(const QueryOutcome& outcome) {
    if (!outcome.nope) {
        m_nope->hide();
        return;
    }
    const cc::QueryResult& r = outcome.result;
    const cc::NopeReport& n = *outcome.nope;
    // Four short lines (about 90 characters): the Query dock at 1280x800 shows them unwrapped (a
    // docked label only gets the height of its unwrapped text, so a wrapped line would be cut off).
    QString output = n.identical_tokens ? tr("identical tokens") : tr("different tokens");
    if (n.first_difference) output += tr(" (first difference at token %1)").arg(*n.first_difference);
    QStringList lines;
    lines << tr("<b>Per-tool NoPE vs full prefill</b>: %1 tools compiled alone, composed with deferred RoPE%2")
                 .arg(n.n_tools)
                 .arg(n.reused ? tr(" (reused)") : QString());
    lines << tr("logit cosine %1 first, %2 mean over %3 steps · top-1 agreement %4 · KL(full ‖ NoPE) %5 nats")
                 .arg(n.logit_cosine_first, 0, 'f', 4)
                 .arg(n.logit_cosine_mean, 0, 'f', 4)
                 .arg(n.compared_steps)
                 .arg(n.top1_agreement, 0, 'f', 3)
                 .arg(n.kl_first, 0, 'g', 4);
    const auto callName = [](const std::optional<cc::ToolCall>& call) {  // tr() is static
        return call ? QString::fromStdString(call->name) : tr("no call");
    };
    lines << tr("output: %1 · tool call: %2 (composed), %3 (full prefill)")
                 .arg(output, callName(r.tool_call), r.full ? callName(r.full->tool_call) : tr("—"));
    QString rope = tr("RoPE check max |diff| %1 across %2 layers (%3 KV)")
                       .arg(n.rope_check_max_abs_diff, 0, 'g', 3)
                       .arg(n.rope_check_per_layer.size())
                       .arg(QString::fromStdString(n.kv_dtype));
    if (const cc::ModelInfo* info = m_engine->modelInfo(); info && info->synthetic_weights)
        rope += tr(" · <i>synthetic weights: these figures are meaningless</i>");
    lines << rope;
    m_nope->setText(lines.join(QStringLiteral("<br>")));
    m_nope->show();
}

}  // namespace cc::ui
