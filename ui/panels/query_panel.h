// Query: a conversation with the model over the compiled tool set (Engine::chat). The turns are
// listed (user, assistant text, assistant tool calls, tool results, each answer with its reuse
// line: group + conversation + new tokens); the input at the bottom (Ctrl+Enter) sends a user
// turn; a reply with tool calls gets an editable result box per call and "Send result(s)"; "New
// conversation" starts over. Mode, max tokens, temperature; the last reply streams in, with the
// full prefill's beside it and the identical/differs badge in compare mode. The per-tool NoPE
// experiment stays a single query (not part of the conversation), with its metrics.
//
// One request at a time: run() sends the turn to EngineController::runChat (or runQuery for NoPE)
// and keeps its id; token batches and the outcome of that id are shown, anything else is ignored.
// A turn that fails or is cancelled leaves the conversation as it was before it.
#pragma once

#include "core/engine/engine.h"
#include "core/engine/tool_call_ids.h"
#include "ui/worker/engine_controller.h"

#include <QString>
#include <QWidget>

#include <cstdint>
#include <vector>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QGroupBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTextBrowser;

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
    void setStrict(bool on);  // strict tool calls (the "Strict calls" toggle)
    bool running() const { return m_requestId != 0; }
    QString outputText() const;                  // the (cached or only) run's output
    QString fullOutputText() const;              // compare mode: the full-prefill run's output
    QString badgeText() const;                   // compare mode: "identical — ..." / "differs at token i ..."
    QString nopeText() const;                    // per-tool NoPE mode: the metrics vs full prefill, "" otherwise
    QString statusText() const;                  // TTFT, tier, tokens, stop reason, problem
    QString messageText() const;                 // the visible error / refusal, "" when none
    QString toolCallName() const;                // the last reply's (first) tool call, "" when none

    // The conversation: its messages (after the system prompt), the turns answered, the listing.
    const std::vector<cc::ChatMessage>& messages() const { return m_messages; }
    int turnCount() const { return m_turns; }
    QString transcriptText() const;              // the listing as plain text
    QString lastReuseText() const;               // "group N (tier) + conversation M + new K tokens, TTFT x ms"
    int pendingToolCalls() const;                // calls of the last reply awaiting a result
    void setToolResult(int call, const QString& text);

public slots:
    void setQuery(const QString& text);   // puts the text in the input
    void run();                           // sends the input as a user turn (Ctrl+Enter); NoPE mode: a single query
    void cancel();                        // stops the running turn
    void sendToolResults();               // appends a tool message per pending call and runs the next turn
    void newConversation();               // forgets the turns (not while one runs)

signals:
    void queryStarted(quint64 requestId);
    void queryDone(quint64 requestId);    // finished, failed or cancelled
    void conversationReset();

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void onTokens(const TokenBatch& batch);
    void onFinished(const QueryOutcome& outcome);
    void onFailed(const QString& task, const QString& message);
    void onCancelled(const QString& task);
    void startTurn(const QString& label);
    void rollBack();                      // drops what the running turn added to the conversation
    void renderTranscript();
    void showToolResults(const std::vector<cc::ChatToolCall>& calls);
    QString reuseLine(const cc::QueryResult& result) const;
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
    bool m_chatRequest = false; // the running request is a conversation turn (not a NoPE query)

    // the conversation
    std::vector<cc::ChatMessage> m_messages;  // after the system prompt
    std::vector<QString> m_notes;             // per message: an answer's reuse line, else ""
    size_t m_turnStart = 0;                   // m_messages.size() before the running turn
    int m_turns = 0;                          // answered turns
    cc::ToolCallIds m_callIds{0x5eed};        // ids for the replies' tool calls
    std::vector<cc::ChatToolCall> m_pendingCalls;  // the last reply's calls, ids assigned
    QString m_lastReuse;

    QPlainTextEdit* m_input = nullptr;
    QComboBox* m_mode = nullptr;
    QSpinBox* m_maxTokens = nullptr;
    QDoubleSpinBox* m_temperature = nullptr;
    QCheckBox* m_ignoreEos = nullptr;
    QCheckBox* m_strict = nullptr;
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
    QWidget* m_callBox = nullptr;       // the name row (with the compare badge) and the arguments
    QLabel* m_callName = nullptr;
    QTableWidget* m_args = nullptr;
    QTextBrowser* m_transcript = nullptr;
    QPushButton* m_newButton = nullptr;
    QWidget* m_resultsBox = nullptr;
    QWidget* m_resultsRows = nullptr;
    std::vector<QPlainTextEdit*> m_resultEdits;
    QPushButton* m_sendResults = nullptr;
};

}  // namespace cc::ui
