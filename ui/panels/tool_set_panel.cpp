#include "ui/panels/tool_set_panel.h"

#include "core/base/json_text.h"
#include "ui/worker/engine_controller.h"
#include "ui/widgets/resources.h"

#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QLocale>
#include <QMimeData>
#include <QPainter>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSaveFile>
#include <QTabWidget>
#include <QTextBlock>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>
#include <exception>

namespace cc::ui {

namespace {

// A one-line label that elides its text in the middle when narrow; the full text is its tooltip.
class ElidedLabel : public QLabel {
public:
    explicit ElidedLabel(QWidget* parent = nullptr) : QLabel(parent) {
        setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
        setTextInteractionFlags(Qt::TextSelectableByMouse);
    }
    void setFullText(const QString& text, const QString& tip) {
        m_full = text;
        setText(text);
        setToolTip(tip);
        update();
    }

protected:
    void paintEvent(QPaintEvent*) override {
        QPainter painter(this);
        const QString shown = fontMetrics().elidedText(m_full, Qt::ElideMiddle, contentsRect().width());
        painter.drawText(contentsRect(), int(alignment()) | Qt::AlignVCenter, shown);
    }

private:
    QString m_full;
};

QFont monospace() { return QFontDatabase::systemFont(QFontDatabase::FixedFont); }

QString firstLine(const QString& text) {
    const qsizetype nl = text.indexOf(QLatin1Char('\n'));
    return nl < 0 ? text : text.left(nl);
}

QString humanBytes(quint64 bytes) { return QLocale().formattedDataSize(qint64(bytes)); }

QString toolsCount(qulonglong n) { return n == 1 ? QObject::tr("1 tool") : QObject::tr("%1 tools").arg(n); }

// The (0-based) line where element `index` of the tools array starts: the root array, or the
// array under the root object's "tools". -1 when not found. A cheap scan: it only has to agree
// with nlohmann on text that parsed.
int lineOfArrayElement(const QString& text, int index) {
    int depth = 0, arrayDepth = -1, line = 0, element = -1;
    bool inString = false, escaped = false, expectStart = false;
    for (const QChar c : text) {
        if (c == QLatin1Char('\n')) ++line;
        if (inString) {
            if (escaped) escaped = false;
            else if (c == QLatin1Char('\\')) escaped = true;
            else if (c == QLatin1Char('"')) inString = false;
            continue;
        }
        if (c.isSpace()) continue;
        if (expectStart && depth == arrayDepth) {
            expectStart = false;
            if (c != QLatin1Char(']') && ++element == index) return line;
        }
        if (c == QLatin1Char('"')) inString = true;
        else if (c == QLatin1Char('[') || c == QLatin1Char('{')) {
            ++depth;
            if (arrayDepth < 0 && c == QLatin1Char('[') && depth <= 2) {
                arrayDepth = depth;
                expectStart = true;
            }
        } else if (c == QLatin1Char(']') || c == QLatin1Char('}')) {
            if (depth == arrayDepth) return -1;
            --depth;
        } else if (c == QLatin1Char(',') && depth == arrayDepth) {
            expectStart = true;
        }
    }
    return -1;
}

// The (0-based) line an error message points at: nlohmann's "at line N, column M", the depth
// check's "(line N)", or the line where "tool I" starts. -1 when the message names no place.
int errorLine(const QString& message, const QString& text) {
    static const QRegularExpression lineRe(QStringLiteral("\\bline (\\d+)"));
    if (const auto m = lineRe.match(message); m.hasMatch()) return m.captured(1).toInt() - 1;
    static const QRegularExpression toolRe(QStringLiteral(": tool (\\d+)\\b"));
    if (const auto m = toolRe.match(message); m.hasMatch()) return lineOfArrayElement(text, m.captured(1).toInt());
    return -1;
}

}  // namespace

ToolSetPanel::ToolSetPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine) {
    setAcceptDrops(true);
    setToolTip(QString());

    // --- top row: samples, import, export
    m_sampleCombo = new QComboBox(this);
    m_sampleCombo->setObjectName(QStringLiteral("sampleCombo"));
    m_sampleCombo->setToolTip(tr("Load one of the bundled sample tool sets"));
    m_sampleCombo->addItem(tr("Sample set…"), QString());
    const QStringList labels = {tr("5 tools"), tr("10 tools"), tr("20 tools"), tr("50 tools"), tr("100 tools"), tr("Unicode")};
    const QStringList names = sampleToolSetNames();
    for (int i = 0; i < names.size(); ++i) m_sampleCombo->addItem(i < labels.size() ? labels[i] : names[i], names[i]);
    connect(m_sampleCombo, &QComboBox::activated, this, [this](int index) {
        const QString name = m_sampleCombo->itemData(index).toString();
        if (!name.isEmpty()) loadSample(name);
    });

    m_importButton = new QPushButton(tr("Import…"), this);
    m_importButton->setToolTip(tr("Load a tools JSON file (an array of tools, or {\"tools\": [...]}); you can also drop a .json file on this panel"));
    connect(m_importButton, &QPushButton::clicked, this, &ToolSetPanel::importFile);
    m_exportButton = new QPushButton(tr("Export…"), this);
    m_exportButton->setToolTip(tr("Save the enabled tools as a pretty JSON array"));
    connect(m_exportButton, &QPushButton::clicked, this, &ToolSetPanel::exportFile);

    auto* top = new QHBoxLayout;
    top->addWidget(m_sampleCombo, 1);
    top->addWidget(m_importButton);
    top->addWidget(m_exportButton);

    // --- tabs: tools, JSON, system prompt
    m_tabs = new QTabWidget(this);
    m_tabs->setToolTip(QString());
    m_tabs->addTab(buildToolsTab(), tr("Tools"));
    m_tabs->addTab(buildJsonTab(), tr("JSON"));
    m_promptEdit = new QPlainTextEdit(this);
    m_promptEdit->setObjectName(QStringLiteral("systemPromptEdit"));
    m_promptEdit->setToolTip(tr("The system prompt rendered before the tool schemas; it is part of the cached prefix and of the group_key"));
    m_promptEdit->setPlainText(defaultSystemPrompt());
    m_promptEdit->viewport()->installEventFilter(this);
    m_tabs->addTab(m_promptEdit, tr("System prompt"));
    m_tabs->setTabToolTip(0, tr("Tick the tools to include in the prefix"));
    m_tabs->setTabToolTip(1, tr("Edit the whole tool set as JSON; it is validated as you type"));
    m_tabs->setTabToolTip(2, tr("The system prompt that precedes the tools"));

    // --- messages (bad files, compile errors)
    m_message = new QLabel(this);
    m_message->setObjectName(QStringLiteral("messageLabel"));
    m_message->setWordWrap(true);
    m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_message->setToolTip(tr("The last problem with a file, a sample or compiling"));
    m_message->hide();

    // --- sample queries
    m_sampleQueriesTitle = new QLabel(tr("Sample queries (click to run):"), this);
    m_sampleQueries = new QListWidget(this);
    m_sampleQueries->setObjectName(QStringLiteral("sampleQueries"));
    m_sampleQueries->setToolTip(tr("Queries this sample set can answer; click one to put it in the Query panel and run it"));
    m_sampleQueries->setTextElideMode(Qt::ElideRight);
    m_sampleQueries->setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    m_sampleQueries->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    connect(m_sampleQueries, &QListWidget::itemClicked, this,
            [this](QListWidgetItem* item) { emit sampleQueryChosen(item->text()); });
    connect(m_sampleQueries, &QListWidget::itemActivated, this,
            [this](QListWidgetItem* item) { emit sampleQueryChosen(item->text()); });
    setSampleQueries({});

    // --- compile row
    m_compileButton = new QPushButton(tr("Compile"), this);
    m_compileButton->setObjectName(QStringLiteral("compileButton"));
    m_compileButton->setToolTip(tr("Compute (or link from the cache) the KV of the system prompt + enabled tools"));
    connect(m_compileButton, &QPushButton::clicked, this, &ToolSetPanel::compile);
    m_cancelButton = new QPushButton(tr("Cancel"), this);
    m_cancelButton->setObjectName(QStringLiteral("compileCancelButton"));
    m_cancelButton->setToolTip(tr("Stop the running compile"));
    connect(m_cancelButton, &QPushButton::clicked, this, [this] { m_engine->cancel(); });
    m_progress = new QProgressBar(this);
    m_progress->setObjectName(QStringLiteral("compileProgress"));
    m_progress->setToolTip(tr("Prefix tokens computed so far"));
    m_progress->setTextVisible(true);
    m_progress->setRange(0, 1);
    m_progress->setValue(0);
    m_progress->setFormat(QString());
    m_compileLabel = new QLabel(this);
    m_compileLabel->setObjectName(QStringLiteral("compileLabel"));
    m_compileLabel->setWordWrap(true);
    m_compileLabel->setToolTip(tr("The result of the last compile"));

    auto* compileRow = new QHBoxLayout;
    compileRow->addWidget(m_compileButton);
    compileRow->addWidget(m_cancelButton);
    compileRow->addWidget(m_progress, 1);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(m_tabs, 1);
    layout->addWidget(m_message);
    layout->addWidget(buildKeysBox());
    layout->addWidget(m_sampleQueriesTitle);
    layout->addWidget(m_sampleQueries);
    layout->addLayout(compileRow);
    layout->addWidget(m_compileLabel);

    m_validateTimer = new QTimer(this);
    m_validateTimer->setSingleShot(true);
    m_validateTimer->setInterval(250);
    connect(m_validateTimer, &QTimer::timeout, this, &ToolSetPanel::validateEditor);
    connect(m_jsonEdit, &QPlainTextEdit::textChanged, this, [this] {
        if (!m_settingEditor) m_validateTimer->start();
    });

    m_describeTimer = new QTimer(this);
    m_describeTimer->setSingleShot(true);
    m_describeTimer->setInterval(150);
    connect(m_describeTimer, &QTimer::timeout, this, &ToolSetPanel::requestDescription);
    connect(m_promptEdit, &QPlainTextEdit::textChanged, this, [this] {
        showLocalKeys();
        m_describeTimer->start();
    });

    connectEngine();
    showLocalKeys();
    updateButtons();
}

QWidget* ToolSetPanel::buildToolsTab() {
    auto* tab = new QWidget(this);
    m_toolList = new QListWidget(tab);
    m_toolList->setObjectName(QStringLiteral("toolList"));
    m_toolList->setToolTip(tr("The tools of the set; untick one to leave it out of the prefix"));
    m_toolList->viewport()->installEventFilter(this);
    connect(m_toolList, &QListWidget::itemChanged, this, [this](QListWidgetItem* item) {
        const QString name = item->data(Qt::UserRole).toString();
        const bool enabled = item->checkState() == Qt::Checked;
        if (enabled == !m_disabled.contains(name)) return;
        if (enabled) m_disabled.remove(name);
        else m_disabled.insert(name);
        enabledSetChanged();
    });
    auto* all = new QPushButton(tr("All"), tab);
    all->setObjectName(QStringLiteral("allButton"));
    all->setToolTip(tr("Enable every tool"));
    connect(all, &QPushButton::clicked, this, [this] {
        if (m_disabled.isEmpty()) return;
        m_disabled.clear();
        rebuildList();
        enabledSetChanged();
    });
    auto* none = new QPushButton(tr("None"), tab);
    none->setObjectName(QStringLiteral("noneButton"));
    none->setToolTip(tr("Disable every tool"));
    connect(none, &QPushButton::clicked, this, [this] {
        if (!m_set) return;
        for (const auto& tool : m_set->tools()) m_disabled.insert(QString::fromStdString(tool.name));
        rebuildList();
        enabledSetChanged();
    });
    auto* row = new QHBoxLayout;
    row->addStretch(1);
    row->addWidget(all);
    row->addWidget(none);
    auto* layout = new QVBoxLayout(tab);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(m_toolList, 1);
    layout->addLayout(row);
    return tab;
}

QWidget* ToolSetPanel::buildJsonTab() {
    auto* tab = new QWidget(this);
    m_jsonEdit = new QPlainTextEdit(tab);
    m_jsonEdit->setObjectName(QStringLiteral("jsonEdit"));
    m_jsonEdit->setFont(monospace());
    m_jsonEdit->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_jsonEdit->setTabChangesFocus(false);
    m_jsonEdit->setPlaceholderText(tr("[ {\"name\": \"...\", \"description\": \"...\", \"parameters\": {\"type\": \"object\", \"properties\": {}}} ]"));
    m_jsonEdit->setToolTip(tr("The whole tool set as JSON (OpenAI function format or bare {name, description, parameters}); validated as you type"));
    m_jsonEdit->viewport()->installEventFilter(this);
    m_jsonError = new QLabel(tab);
    m_jsonError->setObjectName(QStringLiteral("jsonErrorLabel"));
    m_jsonError->setWordWrap(true);
    m_jsonError->setStyleSheet(QStringLiteral("color: #c62828;"));
    m_jsonError->setToolTip(tr("What is wrong with the edited JSON; the list keeps the last valid set"));
    m_jsonError->setTextFormat(Qt::RichText);
    m_jsonError->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::LinksAccessibleByMouse);
    connect(m_jsonError, &QLabel::linkActivated, this, [this](const QString& link) {
        if (!link.startsWith(QLatin1String("line:"))) return;
        const QTextBlock block = m_jsonEdit->document()->findBlockByNumber(link.mid(5).toInt());
        if (!block.isValid()) return;
        m_jsonEdit->setTextCursor(QTextCursor(block));
        m_jsonEdit->centerCursor();
        m_jsonEdit->setFocus();
    });
    m_jsonError->hide();
    auto* layout = new QVBoxLayout(tab);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(m_jsonEdit, 1);
    layout->addWidget(m_jsonError);
    return tab;
}

QWidget* ToolSetPanel::buildKeysBox() {
    auto* box = new QGroupBox(tr("Keys and cache"), this);
    box->setToolTip(tr("What a compile of the enabled tools would use and where its KV is now"));
    auto* form = new QFormLayout(box);
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    form->setLabelAlignment(Qt::AlignRight);

    auto* hash = new ElidedLabel(box);
    hash->setObjectName(QStringLiteral("toolsHashLabel"));
    hash->setFont(monospace());
    m_hashLabel = hash;
    auto* key = new ElidedLabel(box);
    key->setObjectName(QStringLiteral("groupKeyLabel"));
    key->setFont(monospace());
    m_keyLabel = key;
    m_copyKeyButton = new QToolButton(box);
    m_copyKeyButton->setText(tr("Copy"));
    m_copyKeyButton->setToolTip(tr("Copy the group_key to the clipboard"));
    m_copyKeyButton->setAutoRaise(true);
    connect(m_copyKeyButton, &QToolButton::clicked, this, [this] {
        if (!m_groupKey.isEmpty()) QApplication::clipboard()->setText(m_groupKey);
    });
    auto* keyRow = new QHBoxLayout;
    keyRow->setContentsMargins(0, 0, 0, 0);
    keyRow->addWidget(m_keyLabel, 1);
    keyRow->addWidget(m_copyKeyButton);

    m_prefixLabel = new QLabel(box);
    m_prefixLabel->setObjectName(QStringLiteral("prefixLabel"));
    m_prefixLabel->setToolTip(tr("Tokens of the cacheable prefix (system prompt + tool schemas)"));
    m_kvLabel = new QLabel(box);
    m_kvLabel->setObjectName(QStringLiteral("kvLabel"));
    m_kvLabel->setToolTip(tr("Bytes of K/V the prefix takes in the cache"));
    m_stateLabel = new QLabel(box);
    m_stateLabel->setObjectName(QStringLiteral("cacheStateLabel"));
    m_stateLabel->setToolTip(tr("Where this group's KV is: memory (host RAM / GPU), disk, or not cached"));

    auto* sizes = new QHBoxLayout;
    sizes->setContentsMargins(0, 0, 0, 0);
    sizes->addWidget(m_prefixLabel);
    sizes->addSpacing(12);
    sizes->addWidget(new QLabel(tr("KV:"), box));
    sizes->addWidget(m_kvLabel);
    sizes->addStretch(1);

    m_countLabel = new QLabel(box);
    m_countLabel->setObjectName(QStringLiteral("countLabel"));
    m_countLabel->setToolTip(tr("Enabled tools / tools in the set"));
    form->addRow(tr("Tools:"), m_countLabel);
    form->addRow(tr("tools_hash:"), m_hashLabel);
    form->addRow(tr("group_key:"), keyRow);
    form->addRow(tr("Prefix:"), sizes);
    form->addRow(tr("Cache:"), m_stateLabel);
    // Why a set is not cached, live as it is edited: the nearest stored group and what differs.
    m_missLabel = new QLabel(box);
    m_missLabel->setObjectName(QStringLiteral("missReasonLabel"));
    m_missLabel->setWordWrap(true);
    m_missLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_missLabel->setVisible(false);
    form->addRow(m_missLabel);
    return box;
}

void ToolSetPanel::connectEngine() {
    connect(m_engine, &EngineController::modelLoaded, this, &ToolSetPanel::onModelLoaded);
    connect(m_engine, &EngineController::compiled, this, &ToolSetPanel::onCompiled);
    connect(m_engine, &EngineController::cacheChanged, this, [this] { m_describeTimer->start(); });
    connect(m_engine, &EngineController::toolsDescribed, this, &ToolSetPanel::showDescription);
    connect(m_engine, &EngineController::progress, this, &ToolSetPanel::onProgress);
    connect(m_engine, &EngineController::failed, this, &ToolSetPanel::onFailed);
    connect(m_engine, &EngineController::busyChanged, this, &ToolSetPanel::onBusyChanged);
    connect(m_engine, &EngineController::cancelled, this, [this](const QString& task) {
        if (task != QLatin1String("compile")) return;
        m_compileLabel->setText(tr("Compile cancelled; the previous tool set stays current."));
    });
}

// ---- loading ---------------------------------------------------------------------------------

bool ToolSetPanel::applyJson(const QString& text, const QString& source, bool fromEditor, QString* error) {
    try {
        const QByteArray utf8 = text.toUtf8();
        auto set = cc::ToolSet::from_json_text(std::string_view(utf8.constData(), size_t(utf8.size())), source.toStdString());
        // Keep the user's unticks for tools that are still there.
        QSet<QString> names;
        for (const auto& tool : set.tools()) names.insert(QString::fromStdString(tool.name));
        m_disabled.intersect(names);
        m_set = std::move(set);
    } catch (const std::exception& e) {
        if (error) *error = QString::fromUtf8(e.what());
        return false;
    }
    m_source = source;
    if (!fromEditor) {
        m_settingEditor = true;
        m_jsonEdit->setPlainText(text);
        m_settingEditor = false;
        m_validateTimer->stop();
    }
    clearEditorError();
    rebuildList();
    enabledSetChanged();
    return true;
}

bool ToolSetPanel::loadToolsFile(const QString& path) {
    QFile file(path);
    QString error;
    if (!file.open(QIODevice::ReadOnly)) {
        error = QStringLiteral("%1: cannot open: %2").arg(path, file.errorString());
    } else {
        const QString text = QString::fromUtf8(file.readAll());
        if (applyJson(text, path, false, &error)) {
            showMessage(QString(), false);
            m_sampleCombo->setCurrentIndex(0);
            setSampleQueries({});
            return true;
        }
    }
    // The error already names the file (the source); say the previous set stays.
    showMessage(tr("Not loaded — %1. The previous tool set is kept.").arg(error), true);
    emit errorOccurred(error);
    return false;
}

bool ToolSetPanel::loadSample(const QString& name) {
    QString error;
    try {
        const QString text = sampleToolSetJson(name);
        if (applyJson(text, name, false, &error)) {
            showMessage(QString(), false);
            const int index = m_sampleCombo->findData(name);
            if (index >= 0) m_sampleCombo->setCurrentIndex(index);
            setSampleQueries(sampleQueries(name));
            return true;
        }
    } catch (const std::exception& e) {
        error = QString::fromUtf8(e.what());
    }
    showMessage(tr("Sample not loaded — %1").arg(error), true);
    emit errorOccurred(error);
    return false;
}

bool ToolSetPanel::exportToFile(const QString& path) {
    QSaveFile file(path);
    const QByteArray data = toolsJson().toUtf8();
    if (!file.open(QIODevice::WriteOnly) || file.write(data) != data.size() || !file.commit()) {
        const QString error = QStringLiteral("%1: cannot write: %2").arg(path, file.errorString());
        showMessage(error, true);
        emit errorOccurred(error);
        return false;
    }
    showMessage(tr("Saved %1 to %2").arg(toolsCount(qulonglong(enabledCount())), path), false);
    return true;
}

void ToolSetPanel::importFile() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Import tools"), QString(),
                                                      tr("JSON files (*.json);;All files (*)"));
    if (!path.isEmpty()) loadToolsFile(path);
}

void ToolSetPanel::exportFile() {
    if (!m_set) {
        showMessage(tr("Nothing to export: load a tool set first."), true);
        return;
    }
    QString suggested = QFileInfo(m_source).completeBaseName();
    if (suggested.isEmpty() || suggested.startsWith(QLatin1Char('<'))) suggested = QStringLiteral("tools");
    const QString path = QFileDialog::getSaveFileName(this, tr("Export enabled tools"), suggested + QStringLiteral("_enabled.json"),
                                                      tr("JSON files (*.json)"));
    if (!path.isEmpty()) exportToFile(path);
}

// ---- the editor ------------------------------------------------------------------------------

void ToolSetPanel::validateEditor() {
    const QString text = m_jsonEdit->toPlainText();
    QString error;
    if (applyJson(text, QStringLiteral("<editor>"), true, &error)) {
        m_sampleCombo->setCurrentIndex(0);
        return;
    }
    markEditorError(error, text);
}

void ToolSetPanel::markEditorError(const QString& message, const QString& text) {
    const int line = errorLine(message, text);
    m_editorError = message;
    QString shown = message.toHtmlEscaped();
    if (line >= 0) shown += QStringLiteral(" &nbsp;<a href=\"line:%1\">%2</a>").arg(line).arg(tr("go to line %1").arg(line + 1));
    m_jsonError->setText(shown + tr(" — the list keeps the last valid set."));
    m_jsonError->show();
    m_tabs->setTabText(1, tr("JSON ⚠"));
    QList<QTextEdit::ExtraSelection> marks;
    const QTextBlock block = m_jsonEdit->document()->findBlockByNumber(line);
    if (line >= 0 && block.isValid()) {
        QTextEdit::ExtraSelection mark;
        mark.format.setBackground(QColor(255, 205, 210));
        mark.format.setProperty(QTextFormat::FullWidthSelection, true);
        mark.cursor = QTextCursor(block);
        marks << mark;
    }
    m_jsonEdit->setExtraSelections(marks);
}

void ToolSetPanel::clearEditorError() {
    m_editorError.clear();
    m_jsonError->clear();
    m_jsonError->hide();
    m_tabs->setTabText(1, tr("JSON"));
    m_jsonEdit->setExtraSelections({});
}

QString ToolSetPanel::errorText() const {
    if (!m_editorError.isEmpty()) return m_editorError;
    if (m_messageIsError) return m_message->text();
    return QString();
}

void ToolSetPanel::showMessage(const QString& text, bool error) {
    m_message->setText(text);
    m_messageIsError = error && !text.isEmpty();
    m_message->setStyleSheet(error ? QStringLiteral("color: #c62828;") : QString());
    m_message->setVisible(!text.isEmpty());
}

// ---- the list and the enabled set ------------------------------------------------------------

void ToolSetPanel::rebuildList() {
    const QSignalBlocker block(m_toolList);
    m_toolList->clear();
    if (!m_set) return;
    for (const auto& tool : m_set->tools()) {
        const QString name = QString::fromStdString(tool.name);
        QString description;
        const auto& fn = tool.schema.at("function");
        if (fn.contains("description") && fn["description"].is_string())
            description = QString::fromStdString(fn["description"].get<std::string>());
        auto* item = new QListWidgetItem(name, m_toolList);
        item->setData(Qt::UserRole, name);
        item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsUserCheckable);
        item->setCheckState(m_disabled.contains(name) ? Qt::Unchecked : Qt::Checked);
        item->setToolTip(description.isEmpty() ? name : name + QStringLiteral(" — ") + firstLine(description));
    }
}

void ToolSetPanel::setToolEnabled(const QString& name, bool enabled) {
    for (int i = 0; i < m_toolList->count(); ++i) {
        auto* item = m_toolList->item(i);
        if (item->data(Qt::UserRole).toString() == name) item->setCheckState(enabled ? Qt::Checked : Qt::Unchecked);
    }
}

std::optional<cc::ToolSet> ToolSetPanel::enabledSet() const {
    if (!m_set) return std::nullopt;
    if (m_disabled.isEmpty()) return m_set;
    std::vector<cc::Tool> tools;
    for (const auto& tool : m_set->tools())
        if (!m_disabled.contains(QString::fromStdString(tool.name))) tools.push_back(tool);
    return cc::ToolSet::from_tools(std::move(tools), m_source.toStdString());
}

QString ToolSetPanel::toolsJson() const {
    const auto set = enabledSet();
    if (!set) return QStringLiteral("[]");
    return QString::fromStdString(set->to_json().dump(2, ' ', false)) + QLatin1Char('\n');
}

QString ToolSetPanel::toolsHash() const {
    const auto set = enabledSet();
    return set ? QString::fromStdString(set->tools_hash()) : QString();
}

QString ToolSetPanel::systemPrompt() const { return m_promptEdit->toPlainText(); }
void ToolSetPanel::setSystemPrompt(const QString& text) { m_promptEdit->setPlainText(text); }
int ToolSetPanel::toolCount() const { return m_set ? int(m_set->size()) : 0; }
int ToolSetPanel::enabledCount() const { return toolCount() - int(m_disabled.size()); }

void ToolSetPanel::enabledSetChanged() {
    showLocalKeys();
    updateButtons();
    m_describeTimer->start();
    emit toolsChanged();
}

// ---- keys and cache state --------------------------------------------------------------------

void ToolSetPanel::showLocalKeys() {
    m_countLabel->setText(m_set ? tr("%1 of %2 tools enabled").arg(enabledCount()).arg(toolCount()) : tr("No tool set: pick a sample set, import a file or drop one here"));
    const QString hash = toolsHash();
    static_cast<ElidedLabel*>(m_hashLabel)->setFullText(hash.isEmpty() ? tr("—") : hash,
                                                       hash.isEmpty() ? tr("tools_hash: load a tool set") : tr("tools_hash (order-invariant): %1").arg(hash));
    // The other keys need the model: they arrive with toolsDescribed.
    m_groupKey.clear();
    m_cacheState.clear();
    const bool model = m_engine->modelInfo() != nullptr;
    const QString pending = model ? tr("…") : tr("— (load a model)");
    static_cast<ElidedLabel*>(m_keyLabel)->setFullText(pending, tr("group_key: needs a loaded model and a tool set"));
    m_copyKeyButton->setEnabled(false);
    m_prefixLabel->setText(pending);
    m_kvLabel->setText(pending);
    m_stateLabel->setText(pending);
    m_stateLabel->setStyleSheet(QString());
    m_missReason.clear();
    m_missLabel->setVisible(false);
}

void ToolSetPanel::requestDescription() {
    if (!m_set || !m_engine->modelInfo()) return;
    if (m_describeInFlight) {
        m_describeDirty = true;
        return;
    }
    m_describeInFlight = true;
    m_describeDirty = false;
    m_engine->describeTools(ToolsRequest{toolsJson().toStdString(), m_source.toStdString(), systemPrompt().toStdString()});
}

void ToolSetPanel::showDescription(const ToolsDescription& d) {
    m_describeInFlight = false;
    if (m_describeDirty) {
        requestDescription();   // the set changed meanwhile: this answer is stale
        return;
    }
    // Someone else's description (another panel, a stale one) is not ours to show.
    if (QString::fromStdString(d.toolsHash) != toolsHash()) return;
    m_groupKey = QString::fromStdString(d.groupKey);
    m_cacheState = d.tier == cc::Tier::miss ? QStringLiteral("not cached") : tierName(d.tier);
    static_cast<ElidedLabel*>(m_keyLabel)->setFullText(m_groupKey, tr("group_key: %1").arg(m_groupKey));
    m_copyKeyButton->setEnabled(true);
    m_prefixLabel->setText(tr("%1 tokens").arg(QLocale().toString(qulonglong(d.prefixTokens))));
    m_kvLabel->setText(humanBytes(d.kvBytes));
    m_stateLabel->setText(m_cacheState);
    const QString color = d.tier == cc::Tier::gpu      ? QStringLiteral("#6a1b9a")
                          : d.tier == cc::Tier::memory ? QStringLiteral("#2e7d32")
                          : d.tier == cc::Tier::disk   ? QStringLiteral("#1565c0")
                          : d.tier == cc::Tier::remote ? QStringLiteral("#00838f")
                                                       : QStringLiteral("#757575");
    m_stateLabel->setStyleSheet(QStringLiteral("color: %1; font-weight: bold;").arg(color));
    m_missReason = QString::fromStdString(d.missReason);
    // The nearest group on the label; every one of them in the tooltip.
    m_missLabel->setText(m_missReason.isEmpty() ? QString() : tr("Why not cached: %1").arg(m_missReason.section(QLatin1Char('\n'), 0, 0)));
    m_missLabel->setToolTip(m_missReason);
    m_missLabel->setVisible(!m_missReason.isEmpty());
}

// ---- sample queries --------------------------------------------------------------------------

void ToolSetPanel::setSampleQueries(const QStringList& queries) {
    m_sampleQueries->clear();
    for (const QString& q : queries) {
        auto* item = new QListWidgetItem(q, m_sampleQueries);
        item->setToolTip(tr("Run: %1").arg(q));
    }
    // Tall enough for every query of a bundled set (up to 7) without a scroll bar.
    const int rows = std::min(int(queries.size()), 7);
    m_sampleQueries->setFixedHeight(m_sampleQueries->sizeHintForRow(0) * rows + 2 * m_sampleQueries->frameWidth() + 2);
    m_sampleQueries->setVisible(!queries.isEmpty());
    m_sampleQueriesTitle->setVisible(!queries.isEmpty());
}

// ---- compile ---------------------------------------------------------------------------------

void ToolSetPanel::compile() {
    if (!m_engine->modelInfo()) {
        showMessage(tr("Load a model before compiling."), true);
        return;
    }
    if (!m_set || enabledCount() == 0) {
        showMessage(m_set ? tr("Enable at least one tool before compiling.") : tr("Load a tool set before compiling."), true);
        return;
    }
    showMessage(QString(), false);
    m_compiling = true;
    m_progress->setRange(0, 0);
    m_progress->setFormat(tr("compiling…"));
    m_compileLabel->setText(tr("Compiling %1…").arg(toolsCount(qulonglong(enabledCount()))));
    updateButtons();
    m_engine->compileTools(ToolsRequest{toolsJson().toStdString(), m_source.toStdString(), systemPrompt().toStdString()});
}

void ToolSetPanel::onModelLoaded(const cc::ModelInfo&) {
    updateButtons();
    showLocalKeys();
    m_describeInFlight = false;
    m_describeDirty = false;
    requestDescription();
}

void ToolSetPanel::onCompiled(const cc::CompileResult& r) {
    const QString how = r.cache_hit ? tr("linked from %1").arg(tierName(r.tier))
                                    : tr("computed in %1 ms").arg(r.compile_ms, 0, 'f', 1);
    QString text = tr("Compiled %1: %2 prefix tokens, %3")
                       .arg(toolsCount(r.n_tools), QLocale().toString(qulonglong(r.prefix_tokens)), how);
    if (r.reused_tokens > 0)
        text += tr(" (%1 of them, %2%, reused from a stored group)")
                    .arg(QLocale().toString(qulonglong(r.reused_tokens)))
                    .arg(r.reused_percent(), 0, 'f', 1);
    if (!r.problem.empty()) text += tr(" — %1").arg(QString::fromStdString(r.problem));
    m_compileLabel->setText(text);
    m_progress->setRange(0, 1);
    m_progress->setValue(1);
    m_progress->setFormat(tr("done"));
    m_compiling = false;
    updateButtons();
    m_describeTimer->start();
}

void ToolSetPanel::onProgress(const Progress& p) {
    if (p.task != QLatin1String("compile") || !m_compiling) return;
    if (p.total > 0) {
        m_progress->setRange(0, int(p.total));
        m_progress->setValue(int(p.done));
        m_progress->setFormat(p.text.isEmpty() ? QStringLiteral("%p%") : p.text);
    }
}

void ToolSetPanel::onFailed(const QString& task, const QString& message) {
    if (task == QLatin1String("describe")) {
        m_describeInFlight = false;
        if (m_describeDirty) requestDescription();
        else {
            m_stateLabel->setText(tr("—"));
            m_stateLabel->setToolTip(message);
        }
        return;
    }
    if (task != QLatin1String("compile")) return;
    m_compiling = false;
    m_progress->setRange(0, 1);
    m_progress->setValue(0);
    m_progress->setFormat(QString());
    m_compileLabel->setText(QString());
    showMessage(tr("Compile failed: %1").arg(message), true);
    emit errorOccurred(message);
    updateButtons();
}

void ToolSetPanel::onBusyChanged(bool busy, const QString&) {
    // The compile's job ended (done, failed or cancelled) once the controller is idle.
    if (!busy && m_compiling) {
        m_compiling = false;
        m_progress->setRange(0, 1);
        m_progress->setValue(0);
        m_progress->setFormat(QString());
    }
    updateButtons();
}

void ToolSetPanel::updateButtons() {
    const bool model = m_engine->modelInfo() != nullptr;
    m_compileButton->setEnabled(model && m_set && enabledCount() > 0 && !m_compiling);
    m_compileButton->setToolTip(model ? tr("Compute (or link from the cache) the KV of the system prompt + enabled tools")
                                      : tr("Load a model first"));
    m_cancelButton->setEnabled(m_compiling);
    m_exportButton->setEnabled(m_set.has_value());
}

// ---- drag and drop ---------------------------------------------------------------------------

QString ToolSetPanel::localJsonPath(const QMimeData* mime) {
    if (!mime || !mime->hasUrls()) return QString();
    for (const QUrl& url : mime->urls())
        if (url.isLocalFile() && url.toLocalFile().endsWith(QStringLiteral(".json"), Qt::CaseInsensitive)) return url.toLocalFile();
    return QString();
}

void ToolSetPanel::dragEnterEvent(QDragEnterEvent* event) {
    if (!localJsonPath(event->mimeData()).isEmpty()) event->acceptProposedAction();
}

void ToolSetPanel::dropEvent(QDropEvent* event) {
    const QString path = localJsonPath(event->mimeData());
    if (path.isEmpty()) return;
    event->acceptProposedAction();
    loadToolsFile(path);
}

bool ToolSetPanel::eventFilter(QObject* watched, QEvent* event) {
    // The editors and the list would take a dropped file as text: a .json file loads the set instead.
    if (event->type() == QEvent::DragEnter || event->type() == QEvent::DragMove) {
        auto* drag = static_cast<QDragMoveEvent*>(event);
        if (!localJsonPath(drag->mimeData()).isEmpty()) {
            drag->acceptProposedAction();
            return true;
        }
    } else if (event->type() == QEvent::Drop) {
        auto* drop = static_cast<QDropEvent*>(event);
        const QString path = localJsonPath(drop->mimeData());
        if (!path.isEmpty()) {
            drop->acceptProposedAction();
            loadToolsFile(path);
            return true;
        }
    }
    return QWidget::eventFilter(watched, event);
}

}  // namespace cc::ui
