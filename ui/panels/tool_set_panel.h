// Tool set: checkbox list, validating JSON editor, import/export, drag and drop, bundled samples with sample queries, keys and cache state, Compile.
//
// The panel keeps the last valid tool set (from a sample, a file or the editor). The editor holds
// every tool of that set; the checkboxes pick the enabled subset, which is what toolsJson(),
// describeTools (keys, prefix tokens, cache state) and Compile use. A bad file or a bad edit shows
// its error and never replaces the last valid set.
#pragma once

#include "core/text/tool_set.h"

#include <QSet>
#include <QString>
#include <QWidget>

#include <optional>

class QComboBox;
class QDragEnterEvent;
class QDropEvent;
class QMimeData;
class QLabel;
class QListWidget;
class QListWidgetItem;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QTabWidget;
class QTimer;
class QToolButton;

namespace cc {
struct CompileResult;
struct ModelInfo;
}  // namespace cc

namespace cc::ui {

class EngineController;
struct Progress;
struct ToolsDescription;

class ToolSetPanel : public QWidget {
    Q_OBJECT
public:
    explicit ToolSetPanel(EngineController* engine, QWidget* parent = nullptr);

    // Loads a tools file; on error shows it (and emits errorOccurred) and keeps the previous set.
    // Returns whether the file was loaded.
    bool loadToolsFile(const QString& path);
    // Loads a bundled sample set by file name, e.g. "tools_20.json".
    bool loadSample(const QString& name);
    // Writes the enabled tools as a pretty JSON array; on error shows it and returns false.
    bool exportToFile(const QString& path);

    QString toolsJson() const;     // the enabled tools as a JSON array (pretty)
    QString toolsHash() const;     // tools_hash of the enabled tools ("" without a valid set)
    QString systemPrompt() const;
    void setSystemPrompt(const QString& text);
    int toolCount() const;         // tools in the last valid set
    int enabledCount() const;
    QString sourceName() const { return m_source; }
    // Enables or disables a tool by name (as clicking its checkbox does).
    void setToolEnabled(const QString& name, bool enabled);
    QString errorText() const;     // the editor's error (plain text), else the visible file error; "" when none
    QString groupKey() const { return m_groupKey; }     // from the last description, "" before one
    QString cacheState() const { return m_cacheState; } // "gpu" | "memory" | "disk" | "not cached" | ""
    // Not cached: why (the nearest stored groups and what differs, as the last description said);
    // "" when cached or before a description.
    QString missReason() const { return m_missReason; }

public slots:
    void compile();
    void importFile();              // asks for a file with QFileDialog
    void exportFile();              // asks for a path with QFileDialog

signals:
    // The user clicked a sample query of the loaded sample set.
    void sampleQueryChosen(const QString& text);
    // A file or sample could not be loaded, or compiling failed: for the status bar.
    void errorOccurred(const QString& message);
    // The enabled set changed (checkbox, file, sample or a valid edit).
    void toolsChanged();

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    QWidget* buildToolsTab();
    QWidget* buildJsonTab();
    QWidget* buildKeysBox();
    void connectEngine();

    // Parses `text`; on success it becomes the set (the editor shows it when `fromEditor` is false).
    bool applyJson(const QString& text, const QString& source, bool fromEditor, QString* error);
    void rebuildList();
    void validateEditor();
    void markEditorError(const QString& message, const QString& text);
    void clearEditorError();
    void showMessage(const QString& text, bool error);
    void enabledSetChanged();
    void requestDescription();
    void showDescription(const ToolsDescription& description);
    void showLocalKeys();
    void setSampleQueries(const QStringList& queries);
    void updateButtons();
    void onModelLoaded(const cc::ModelInfo& info);
    void onCompiled(const cc::CompileResult& result);
    void onProgress(const Progress& progress);
    void onFailed(const QString& task, const QString& message);
    void onBusyChanged(bool busy, const QString& task);
    std::optional<cc::ToolSet> enabledSet() const;
    static QString localJsonPath(const QMimeData* mime);

    EngineController* m_engine;

    std::optional<cc::ToolSet> m_set;      // the last valid set (all tools, canonical order)
    QSet<QString> m_disabled;              // names unchecked by the user
    QString m_source = QStringLiteral("<editor>");
    bool m_messageIsError = false;         // m_message shows a problem (not a notice)
    bool m_settingEditor = false;          // the editor text is being set by the panel

    // describeTools is coalesced: one in flight; a change meanwhile sends one more when it ends.
    bool m_describeInFlight = false;
    bool m_describeDirty = false;
    bool m_compiling = false;
    QString m_editorError;                 // the editor's current error, "" when its text is valid
    QString m_groupKey;
    QString m_cacheState;
    QString m_missReason;

    QComboBox* m_sampleCombo = nullptr;
    QPushButton* m_importButton = nullptr;
    QPushButton* m_exportButton = nullptr;
    QTabWidget* m_tabs = nullptr;
    QListWidget* m_toolList = nullptr;
    QPlainTextEdit* m_jsonEdit = nullptr;
    QLabel* m_jsonError = nullptr;
    QPlainTextEdit* m_promptEdit = nullptr;
    QLabel* m_message = nullptr;
    QLabel* m_countLabel = nullptr;
    QLabel* m_hashLabel = nullptr;
    QLabel* m_keyLabel = nullptr;
    QToolButton* m_copyKeyButton = nullptr;
    QLabel* m_prefixLabel = nullptr;
    QLabel* m_kvLabel = nullptr;
    QLabel* m_stateLabel = nullptr;
    QLabel* m_missLabel = nullptr;
    QLabel* m_sampleQueriesTitle = nullptr;
    QListWidget* m_sampleQueries = nullptr;
    QPushButton* m_compileButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_compileLabel = nullptr;
    QTimer* m_validateTimer = nullptr;
    QTimer* m_describeTimer = nullptr;
};

}  // namespace cc::ui
