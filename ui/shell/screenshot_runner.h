// Headless orchestration for `contextcache --screenshot FILE ...`: wait for the model, optionally
// load and compile a tool set, optionally run a query (and more user turns of the conversation),
// then save a PNG of the whole window.
// Lives in cc_ui so tests drive it in-process; finished() carries the exit code and the message.
#pragma once

#include "ui/worker/engine_controller.h"

#include <QObject>
#include <QSize>
#include <QString>
#include <QStringList>
#include <QTimer>

namespace cc::ui {

class MainWindow;

struct ScreenshotOptions {
    QString output;              // the PNG to write
    QString toolsFile;           // a tool set file, or
    int sample = 0;              // a bundled sample set: 5/10/20/50/100 -> tools_N.json (0 = none)
    QString query;               // run this query after the compile ("" = none)
    QStringList followUps;       // then these user turns, each after the answer to the one before
    QString mode = QStringLiteral("cached");   // cached | full | compare
    int maxNewTokens = 32;
    QSize size{1280, 800};
    int timeoutMs = 300000;      // the whole run, model load included
    int settleMs = 300;          // after the last answer, before the grab (panels repaint)
};

// Parses "WxH" ("1280x800"); returns an invalid size for anything else.
QSize parseSize(const QString& text);

class ScreenshotRunner : public QObject {
    Q_OBJECT
public:
    // The window must have been made with autoLoad (its model load is what the runner waits for first).
    ScreenshotRunner(MainWindow* window, ScreenshotOptions options, QObject* parent = nullptr);

    // Validates the options, shows the window at the requested size and starts waiting.
    void start();
    bool isFinished() const { return m_done; }
    int exitCode() const { return m_exitCode; }
    QString message() const { return m_message; }

signals:
    void finished(int exitCode, const QString& message);   // 0 and the PNG path, or non-zero and the error

private:
    void onModelLoaded();
    void onCompiled();
    void onQueryFinished(const cc::ui::QueryOutcome& outcome);
    void sendTurn(const QString& text);
    void grab();
    void finish(int exitCode, const QString& message);

    MainWindow* m_window;
    ScreenshotOptions m_options;
    QTimer m_timeout;
    uint64_t m_queryId = 0;
    int m_nextFollowUp = 0;
    bool m_waitingForModel = true;
    bool m_waitingForCompile = false;
    bool m_done = false;
    int m_exitCode = -1;
    QString m_message;
};

}  // namespace cc::ui
