// --screenshot: the runner (in-process) and the built binary write a PNG of the requested size
// after loading, compiling and querying; bad input exits non-zero with the reason.
#include "ui/shell/main_window.h"
#include "ui/shell/screenshot_runner.h"
#include "ui/panels/query_panel.h"
#include "ui/research/eval_panel.h"
#include "ui/widgets/message_banner.h"
#include "ui_test_support.h"

#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QProcess>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

using namespace cc::ui;

class TestScreenshot : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;

    MainWindowOptions windowOptions() const {
        MainWindowOptions o;
        o.modelSpec = QStringLiteral("builtin:qwen3-test");
        o.cacheDir = m_dir.filePath(QStringLiteral("cache"));
        o.threads = 1;
        o.useSettings = false;
        return o;
    }

    // Not one flat colour: something was drawn.
    static int distinctColours(const QImage& image) {
        QSet<QRgb> seen;
        for (int y = 0; y < image.height(); y += 7)
            for (int x = 0; x < image.width(); x += 7) seen.insert(image.pixel(x, y));
        return int(seen.size());
    }

private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(m_dir.isValid());
    }

    void parsesSizes() {
        QCOMPARE(parseSize(QStringLiteral("1280x800")), QSize(1280, 800));
        QCOMPARE(parseSize(QStringLiteral("1920X1080")), QSize(1920, 1080));
        QVERIFY(!parseSize(QStringLiteral("1280")).isValid());
        QVERIFY(!parseSize(QStringLiteral("axb")).isValid());
    }

    // Every mode's results (the per-tool NoPE report is the tallest) fit the default 1280x800.
    void runnerWritesAPngAfterCompileAndQuery_data() {
        QTest::addColumn<QString>("mode");
        QTest::addColumn<int>("sample");
        QTest::newRow("compare") << QStringLiteral("compare") << 5;
        QTest::newRow("per_tool_nope") << QStringLiteral("per_tool_nope") << 20;
    }

    void runnerWritesAPngAfterCompileAndQuery() {
        QFETCH(QString, mode);
        QFETCH(int, sample);
        MainWindow window(windowOptions());
        ScreenshotOptions o;
        o.output = m_dir.filePath(QStringLiteral("runner-%1.png").arg(mode));
        o.sample = sample;
        o.query = QStringLiteral("What's the weather in Lisbon?");
        o.mode = mode;
        o.maxNewTokens = 8;
        o.size = QSize(1280, 800);
        ScreenshotRunner runner(&window, o);
        QSignalSpy compiled(window.engine(), &EngineController::compiled);
        QSignalSpy answered(window.engine(), &EngineController::queryFinished);
        runner.start();
        QTRY_VERIFY_WITH_TIMEOUT(runner.isFinished(), 180000);
        QVERIFY2(runner.exitCode() == 0, qPrintable(runner.message()));
        QCOMPARE(compiled.count(), 1);
        QCOMPARE(answered.count(), 1);
        const auto outcome = answered.first().at(0).value<QueryOutcome>();
        if (mode == QStringLiteral("compare")) QVERIFY(outcome.result.identical.value_or(false));
        else QVERIFY(outcome.nope.has_value());
        QVERIFY(QFileInfo(o.output).size() > 0);
        const QImage image(o.output);
        QVERIFY(!image.isNull());
        QCOMPARE(image.size(), QSize(1280, 800));
        QVERIFY(distinctColours(image) > 4);
    }

    // The command docs/app.md makes its screenshot with, on the programs' default model (the trained
    // builtin:toolcaller): its banner is two lines at 1280 px, and the window must still fit
    // 1280x800 (a label of its own for the Evaluation tab's NoPE means pushed the minimum to 811),
    // with the answer a real tool call, identical to the full prefill's.
    void defaultModelScreenshotFits1280x800WithARealToolCall() {
        MainWindowOptions wo = windowOptions();
        wo.modelSpec = QStringLiteral("builtin:toolcaller");
        MainWindow window(wo);
        ScreenshotOptions o;
        o.output = m_dir.filePath(QStringLiteral("runner-toolcaller.png"));
        o.sample = 20;
        o.query = QStringLiteral("What's the weather like in Lisbon right now?");
        o.mode = QStringLiteral("compare");
        o.maxNewTokens = 64;
        o.size = QSize(1280, 800);
        ScreenshotRunner runner(&window, o);
        QSignalSpy answered(window.engine(), &EngineController::queryFinished);
        runner.start();
        QTRY_VERIFY_WITH_TIMEOUT(runner.isFinished(), 180000);
        QVERIFY2(runner.exitCode() == 0, qPrintable(runner.message()));
        auto* banner = window.findChild<MessageBanner*>(QStringLiteral("syntheticBanner"));
        QVERIFY(banner && banner->isVisible());
        QVERIFY2(banner->text().contains(QStringLiteral("trained here for tool selection")), qPrintable(banner->text()));
        QCOMPARE(answered.count(), 1);
        const auto outcome = answered.first().at(0).value<QueryOutcome>();
        QVERIFY(outcome.result.identical.value_or(false));
        QVERIFY2(outcome.result.tool_call.has_value(), outcome.result.text.c_str());
        QVERIFY(!outcome.result.tool_call->name.empty());
        QCOMPARE(QImage(o.output).size(), QSize(1280, 800));
        QVERIFY2(window.minimumSizeHint().height() <= 800, qPrintable(QString::number(window.minimumSizeHint().height())));
        // ... and still after the Evaluation tab has shown a per_tool_nope run's means.
        auto* eval = window.findChild<EvalPanel*>();
        QVERIFY(eval);
        eval->setMode(QStringLiteral("per_tool_nope"));
        eval->setLimit(1);
        eval->setMaxTokens(2);
        QSignalSpy evaluated(window.engine(), &EngineController::evalFinished);
        eval->run();
        QVERIFY2(eval->running(), qPrintable(eval->statusText()));
        QVERIFY(evaluated.wait(180000));
        QVERIFY2(!eval->nopeText().isEmpty(), qPrintable(eval->statusText()));
        QVERIFY2(eval->statusText().startsWith(QStringLiteral("Done: 1 example. NoPE")), qPrintable(eval->statusText()));
        QVERIFY2(window.minimumSizeHint().height() <= 800, qPrintable(QString::number(window.minimumSizeHint().height())));
    }

    // Repeated --query: the turns of a conversation, each sent after the answer to the one before.
    void runnerRunsAConversation() {
        MainWindow window(windowOptions());
        ScreenshotOptions o;
        o.output = m_dir.filePath(QStringLiteral("runner-conversation.png"));
        o.sample = 5;
        o.query = QStringLiteral("What's the weather in Lisbon?");
        o.followUps = {QStringLiteral("And in Porto?"), QStringLiteral("Convert 250 US dollars to euros.")};
        o.mode = QStringLiteral("compare");
        o.maxNewTokens = 6;
        ScreenshotRunner runner(&window, o);
        QSignalSpy answered(window.engine(), &EngineController::queryFinished);
        runner.start();
        QTRY_VERIFY_WITH_TIMEOUT(runner.isFinished(), 180000);
        QVERIFY2(runner.exitCode() == 0, qPrintable(runner.message()));
        QCOMPARE(answered.count(), 3);
        for (int i = 0; i < 3; ++i) {
            const auto outcome = answered.at(i).at(0).value<QueryOutcome>();
            QCOMPARE(outcome.turn, i + 1);
            QVERIFY(outcome.result.identical.value_or(false));
            if (i > 0) QVERIFY(outcome.result.conversation_reused_tokens > 0);
        }
        QCOMPARE(window.queryPanel()->turnCount(), 3);
        const QImage image(o.output);
        QCOMPARE(image.size(), QSize(1280, 800));
    }

    void runnerFailsOnABadToolSet() {
        const QString tools = m_dir.filePath(QStringLiteral("broken.json"));
        QFile file(tools);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write("[{\"name\": ");
        file.close();
        MainWindow window(windowOptions());
        ScreenshotOptions o;
        o.output = m_dir.filePath(QStringLiteral("never.png"));
        o.toolsFile = tools;
        ScreenshotRunner runner(&window, o);
        runner.start();
        QTRY_VERIFY_WITH_TIMEOUT(runner.isFinished(), 120000);
        QCOMPARE(runner.exitCode(), 1);
        QVERIFY2(runner.message().contains(QStringLiteral("broken.json")), qPrintable(runner.message()));
        QVERIFY(!QFileInfo::exists(o.output));
    }

    void runnerRefusesBadOptions() {
        MainWindow window(windowOptions());
        ScreenshotOptions o;
        o.output = m_dir.filePath(QStringLiteral("never.png"));
        o.sample = 7;
        ScreenshotRunner runner(&window, o);
        runner.start();
        QVERIFY(runner.isFinished());
        QCOMPARE(runner.exitCode(), 2);
        QVERIFY(runner.message().contains(QStringLiteral("--sample")));
    }

    void binaryWritesAPng() {
        const QString out = m_dir.filePath(QStringLiteral("binary.png"));
        QProcess process;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        process.setProcessEnvironment(env);
        process.start(QStringLiteral(CC_GUI_PATH),
                      {QStringLiteral("--screenshot"), out, QStringLiteral("--model"), QStringLiteral("builtin:qwen3-test"),
                       QStringLiteral("--cache-dir"), m_dir.filePath(QStringLiteral("cache")), QStringLiteral("--threads"),
                       QStringLiteral("1"), QStringLiteral("--sample"), QStringLiteral("10"), QStringLiteral("--query"),
                       QStringLiteral("Book a table for two"), QStringLiteral("--max-new-tokens"), QStringLiteral("4"),
                       QStringLiteral("--size"), QStringLiteral("1400x900")});
        QVERIFY(process.waitForFinished(180000));
        QVERIFY2(process.exitStatus() == QProcess::NormalExit && process.exitCode() == 0,
                 qPrintable(QString::fromLocal8Bit(process.readAllStandardError())));
        const QImage image(out);
        QCOMPARE(image.size(), QSize(1400, 900));
    }

    void binaryFailsWithAMessage() {
        QProcess process;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        process.setProcessEnvironment(env);
        const QString out = m_dir.filePath(QStringLiteral("bad-model.png"));
        process.start(QStringLiteral(CC_GUI_PATH), {QStringLiteral("--screenshot"), out, QStringLiteral("--model"),
                                                    m_dir.filePath(QStringLiteral("no_such_model")), QStringLiteral("--cache-dir"),
                                                    m_dir.filePath(QStringLiteral("cache"))});
        QVERIFY(process.waitForFinished(120000));
        QVERIFY(process.exitCode() != 0);
        const QString err = QString::fromLocal8Bit(process.readAllStandardError());
        QVERIFY2(err.contains(QStringLiteral("no_such_model")), qPrintable(err));
        QVERIFY(!QFileInfo::exists(out));
    }
};

QTEST_MAIN(TestScreenshot)
#include "test_screenshot.moc"
