// Evaluation: tool-calling quality on a dataset (core/research/eval). Pick a dataset (the bundled
// set by default), a mode and a limit; Run sends EngineController::runEval, Cancel stops it. Shows
// progress, the per-mode summary (TSA, PF1, EM, FPR, FNR), the identical-output count in both mode,
// the per-tool NoPE means (first-token cosine, KL, top-1 agreement) in per_tool_nope mode, one row
// per finished example, and a warning when the model's weights are synthetic.
#pragma once

#include "core/research/eval_runner.h"

#include <QString>
#include <QWidget>

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace cc::ui {

class EngineController;

class EvalPanel : public QWidget {
    Q_OBJECT
public:
    explicit EvalPanel(EngineController* engine, QWidget* parent = nullptr);

    static QString bundledDataset();  // ":/eval/tool_calls.jsonl"
    QString datasetPath() const;
    void setDatasetPath(const QString& path);  // a file, or the bundled resource
    void setMode(const QString& mode);         // both | cached | full | per_tool_nope | any engine mode name
    void setLimit(int n);                      // 0 = all
    void setMaxTokens(int n);
    bool running() const { return m_running; }

    QTableWidget* summaryTable() const { return m_summary; }
    QTableWidget* examplesTable() const { return m_examples; }
    QString identicalText() const;
    QString nopeText() const;     // per_tool_nope: the means of the examples' NoPE reports (on the status line); else ""
    QString warningText() const;  // "" when the weights are real
    QString statusText() const;
    const cc::EvalRunResult* lastResult() const { return m_hasResult ? &m_result : nullptr; }

public slots:
    void run();
    void cancel();
    void browse();

private:
    void onRecord(const cc::EvalRecord& record);
    void onFinished(const cc::EvalRunResult& result);
    void onFailed(const QString& task, const QString& message);
    void showSummary(const std::vector<cc::EvalModeSummary>& summaries);
    void updateWarning();
    void updateButtons();

    EngineController* m_engine;
    bool m_running = false;
    bool m_hasResult = false;
    cc::EvalRunResult m_result;
    std::vector<cc::EvalRecord> m_records;  // of the running (or last) run

    QComboBox* m_dataset = nullptr;
    QPushButton* m_browseButton = nullptr;
    QComboBox* m_mode = nullptr;
    QSpinBox* m_limit = nullptr;
    QSpinBox* m_maxTokens = nullptr;
    QPushButton* m_runButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_warning = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_identical = nullptr;
    QString m_nopeText;   // per_tool_nope: the NoPE means, shown on the status line
    QTableWidget* m_summary = nullptr;
    QTableWidget* m_examples = nullptr;
};

}  // namespace cc::ui
