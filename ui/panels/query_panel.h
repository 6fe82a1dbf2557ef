// Query: input (Ctrl+Enter), mode, max tokens, temperature, streaming output, parsed tool call, compare badge,
// and the per-tool NoPE experiment's metrics.
//
// One request at a time: run() sends the input to EngineController::runQuery and keeps its id;
// token batches and the outcome of that id are shown, anything else is ignored.
#pragma once

#include "core/engine/engine.h"
#include "ui/worker/engine_controller.h"

#include <QString>
#include <QWidget>

#include <cstdint>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QGroupBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace cc::ui {

class EngineController;
struct QueryOutcome;
struct TokenBatch;

class QueryPanel : public QWidget {
    Q_OBJECT
public:
    explicit QueryPanel(EngineController* engine, QWidget* parent = nullptr);

    QString query() const;
    cc::QueryOptions options() const;            // from the mode, max tokens, temperature and ignore-EOS controls
    QueryKind kind() const;                      // the mode control: an engine mode or the per-tool NoPE experiment
    void setMode(QueryKind kind);
    void setMaxTokens(int n);
    void setTemperature(double t);
    void setIgnoreEos(bool on);
    bool running() const { return m_requestId != 0; }
    QString outputText() const;                  // the (cached or only) run's output
    QString fullOutputText() const;              // compare mode: the full-prefill run's output
    QString badgeText() const;                   // compare mode: "identical — ..." / "differs at token i ..."
    QString nopeText() const;                    // per-tool NoPE mode: the metrics vs full prefill, "" otherwise
    QString statusText() const;                  // TTFT, tier, tokens, stop reason, problem
    QString messageText() const;                 // the visible error / refusal, "" when none
    QString toolCallName() const;                // "" when the output has no tool call

public slots:
    void setQuery(const QString& text);   // puts the text in the input
    void run();                           // runs the input (as Ctrl+Enter does)
    void cancel();                        // stops the running query

signals:
    void queryStarted(quint64 requestId);
    void queryDone(quint64 requestId);    // finished, failed or cancelled

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void onTokens(const TokenBatch& batch);
    void onFinished(const QueryOutcome& outcome);
    void onFailed(const QString& task, const QString& message);
    void onCancelled(const QString& task);
    void showToolCall(const cc::QueryResult& result);
    void showBadge(const cc::QueryResult& result);
    void showNope(const QueryOutcome& outcome);
    void showMessage(const QString& text);
    void endRequest();
    void updateButtons();
    void updateCompareVisibility();

    EngineController* m_engine;
    uint64_t m_requestId = 0;   // the running request, 0 when none
    QString m_toolCallName;     // of the last result, "" when it had no tool call

    QPlainTextEdit* m_input = nullptr;
    QComboBox* m_mode = nullptr;
    QSpinBox* m_maxTokens = nullptr;
    QDoubleSpinBox* m_temperature = nullptr;
    QCheckBox* m_ignoreEos = nullptr;
    QPushButton* m_runButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QLabel* m_message = nullptr;
    QLabel* m_badge = nullptr;
    QLabel* m_nope = nullptr;         // per-tool NoPE metrics
    QLabel* m_status = nullptr;
    QLabel* m_outputTitle = nullptr;
    QPlainTextEdit* m_output = nullptr;
    QWidget* m_fullBox = nullptr;
    QPlainTextEdit* m_fullOutput = nullptr;
    QGroupBox* m_callBox = nullptr;
    QLabel* m_callName = nullptr;
    QTableWidget* m_args = nullptr;
};

}  // namespace cc::ui
