#include "ui/shell/screenshot_runner.h"

#include "ui/shell/main_window.h"
#include "ui/panels/query_panel.h"
#include "ui/widgets/resources.h"
#include "ui/panels/tool_set_panel.h"

#include <QApplication>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QPixmap>
#include <QRegularExpression>

namespace cc::ui {

QSize parseSize(const QString& text) {
    static const QRegularExpression re(QStringLiteral("^(\\d{2,5})[xX](\\d{2,5})$"));
    const auto m = re.match(text.trimmed());
    if (!m.hasMatch()) return {};
    return {m.captured(1).toInt(), m.captured(2).toInt()};
}

ScreenshotRunner::ScreenshotRunner(MainWindow* window, ScreenshotOptions options, QObject* parent)
    : QObject(parent), m_window(window), m_options(std::move(options)) {
    m_timeout.setSingleShot(true);
    connect(&m_timeout, &QTimer::timeout, this, [this] {
        const QString task = m_window->engine()->currentTask();
        finish(3, tr("timed out after %1 s%2").arg(m_options.timeoutMs / 1000)
                      .arg(task.isEmpty() ? QString() : tr(" (still running: %1)").arg(task)));
    });
    auto* engine = m_window->engine();
    connect(engine, &EngineController::modelLoaded, this, [this] { onModelLoaded(); });
    connect(engine, &EngineController::compiled, this, [this] { onCompiled(); });
    connect(engine, &EngineController::queryFinished, this, &ScreenshotRunner::onQueryFinished);
    connect(engine, &EngineController::failed, this, [this](const QString& task, const QString& message) {
        finish(1, tr("%1 failed: %2").arg(task, message));
    });
    connect(engine, &EngineController::cancelled, this, [this](const QString& task) {
        finish(1, tr("%1 was cancelled").arg(task));
    });
}

void ScreenshotRunner::start() {
    if (m_options.output.isEmpty()) return finish(2, tr("--screenshot needs a file name"));
    if (!m_options.size.isValid() || m_options.size.width() < 320 || m_options.size.height() < 240)
        return finish(2, tr("--size must be WxH, at least 320x240"));
    if (!parseQueryKind(m_options.mode))
        return finish(2, tr("--mode must be cached, full, compare or per_tool_nope, not \"%1\"").arg(m_options.mode));
    if (m_options.sample != 0 && !m_options.toolsFile.isEmpty()) return finish(2, tr("give --tools or --sample, not both"));
    if (m_options.sample != 0 && !sampleToolSetNames().contains(QStringLiteral("tools_%1.json").arg(m_options.sample)))
        return finish(2, tr("--sample must be 5, 10, 20, 50 or 100, not %1").arg(m_options.sample));
    if (!m_options.query.isEmpty() && m_options.sample == 0 && m_options.toolsFile.isEmpty())
        return finish(2, tr("--query needs a tool set (--tools FILE or --sample N)"));
    if (!m_options.toolsFile.isEmpty() && !QFileInfo(m_options.toolsFile).isReadable())
        return finish(1, tr("%1: cannot read the tool set").arg(m_options.toolsFile));
    m_window->resize(m_options.size);
    m_window->show();
    m_timeout.start(m_options.timeoutMs);
    // A model that loaded before start() was called (a fast built-in one) still counts.
    if (m_window->engine()->modelInfo() && !m_window->engine()->busy()) onModelLoaded();
}

void ScreenshotRunner::onModelLoaded() {
    if (m_done || !m_waitingForModel) return;
    m_waitingForModel = false;
    // Through the panels, so the picture shows the set, its keys and the streamed answer.
    ToolSetPanel* tools = m_window->toolSetPanel();
    if (m_options.sample != 0) {
        const QString name = QStringLiteral("tools_%1.json").arg(m_options.sample);
        if (!tools->loadSample(name)) return finish(1, tools->errorText());
    } else if (!m_options.toolsFile.isEmpty()) {
        if (!tools->loadToolsFile(m_options.toolsFile)) return finish(1, tools->errorText());
    } else {
        return grab();
    }
    m_waitingForCompile = true;
    tools->compile();
}

void ScreenshotRunner::onCompiled() {
    if (m_done || !m_waitingForCompile) return;
    m_waitingForCompile = false;
    if (m_options.query.isEmpty()) return grab();
    QueryPanel* query = m_window->queryPanel();
    query->setMode(*parseQueryKind(m_options.mode));
    query->setMaxTokens(m_options.maxNewTokens);
    sendTurn(m_options.query);
}

void ScreenshotRunner::sendTurn(const QString& text) {
    QueryPanel* query = m_window->queryPanel();
    query->setQuery(text);
    connect(query, &QueryPanel::queryStarted, this, [this](quint64 id) { m_queryId = id; }, Qt::SingleShotConnection);
    query->run();
    if (m_queryId == 0) return finish(1, query->messageText().isEmpty() ? tr("the query did not start") : query->messageText());
}

void ScreenshotRunner::onQueryFinished(const QueryOutcome& outcome) {
    if (m_done || m_queryId == 0 || outcome.requestId != m_queryId) return;
    m_queryId = 0;
    if (outcome.result.stop_reason == cc::StopReason::cancelled) return finish(1, tr("the query was cancelled"));
    if (m_nextFollowUp < m_options.followUps.size()) {
        // The panel takes the answer in the same signal; the next turn goes once it has.
        const QString next = m_options.followUps[m_nextFollowUp++];
        QTimer::singleShot(0, this, [this, next] {
            if (!m_done) sendTurn(next);
        });
        return;
    }
    grab();
}

void ScreenshotRunner::grab() {
    // Let the panels take the last answers (cache listing, charts) before the picture.
    QTimer::singleShot(m_options.settleMs, this, [this] {
        if (m_done) return;
        const QImage image = m_window->grab().toImage();
        if (image.isNull()) return finish(1, tr("the window could not be grabbed"));
        // Never hand back a picture of another size than asked for: the docks have a minimum.
        if (m_window->size() != m_options.size)
            return finish(2, tr("the window cannot be %1x%2: its docks need at least %3x%4")
                                 .arg(m_options.size.width()).arg(m_options.size.height())
                                 .arg(m_window->minimumSizeHint().width()).arg(m_window->minimumSizeHint().height()));
        if (!image.save(m_options.output, "PNG"))
            return finish(1, tr("%1: cannot write the PNG").arg(m_options.output));
        finish(0, m_options.output);
    });
}

void ScreenshotRunner::finish(int exitCode, const QString& message) {
    if (m_done) return;
    m_done = true;
    m_timeout.stop();
    m_exitCode = exitCode;
    m_message = message;
    emit finished(exitCode, message);
}

}  // namespace cc::ui
