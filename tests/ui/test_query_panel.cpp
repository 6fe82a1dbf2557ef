// QueryPanel against a real EngineController with the tiny built-in model (offscreen).
#include "ui/panels/query_panel.h"

#include "ui/worker/engine_controller.h"
#include "ui/widgets/resources.h"
#include "ui/panels/tool_set_panel.h"
#include "tests/ui/ui_test_rig.h"

#include <QHBoxLayout>

#include <QCheckBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableWidget>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <memory>

using cc::ui::EngineController;
using cc::ui::QueryPanel;

namespace {

using cc::ui::test::kTimeoutMs;
using cc::ui::test::loadedController;

}  // namespace

class TestQueryPanel : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_cacheDir;
    std::unique_ptr<EngineController> m_engine;

private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        cc::ui::initResources();
        QVERIFY(m_cacheDir.isValid());
        m_engine = loadedController(m_cacheDir.path());
        QVERIFY(m_engine);
        QSignalSpy compiled(m_engine.get(), &EngineController::compiled);
        m_engine->compileTools(cc::ui::ToolsRequest{cc::ui::sampleToolSetJson(QStringLiteral("tools_5.json")).toStdString(),
                                                    "tools_5.json", cc::ui::defaultSystemPrompt().toStdString()});
        QVERIFY(compiled.wait(kTimeoutMs));
        QTRY_VERIFY_WITH_TIMEOUT(!m_engine->busy(), kTimeoutMs);
    }
    void cleanupTestCase() { m_engine.reset(); }

    void refusesWithoutACompiledToolSet() {
        QTemporaryDir dir;
        auto engine = loadedController(dir.path());
        QVERIFY(engine);
        QVERIFY(!engine->currentTools());
        QueryPanel panel(engine.get());
        QSignalSpy started(&panel, &QueryPanel::queryStarted);
        panel.setQuery(QStringLiteral("What's the weather in Lisbon?"));
        panel.run();
        QVERIFY(!panel.running());
        QCOMPARE(started.count(), 0);
        QVERIFY2(panel.messageText().contains(QStringLiteral("No tool set is compiled")), qPrintable(panel.messageText()));
        QVERIFY(panel.findChild<QLabel*>(QStringLiteral("queryMessage"))->isVisibleTo(&panel));

        // and without a model at all
        EngineController bare;
        QueryPanel idle(&bare);
        idle.setQuery(QStringLiteral("hello"));
        idle.run();
        QVERIFY(!idle.running());
        QVERIFY(idle.messageText().contains(QStringLiteral("No model is loaded")));
    }

    void ctrlEnterRunsAndStreams() {
        QueryPanel panel(m_engine.get());
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        panel.setMaxTokens(12);
        panel.setIgnoreEos(true);   // synthetic weights may pick the stop token first
        QSignalSpy tokens(m_engine.get(), &EngineController::tokens);
        QSignalSpy finished(m_engine.get(), &EngineController::queryFinished);
        QSignalSpy done(&panel, &QueryPanel::queryDone);
        auto* input = panel.findChild<QPlainTextEdit*>(QStringLiteral("queryInput"));
        QVERIFY(input);
        input->setFocus();
        QTest::keyClicks(input, QStringLiteral("Convert 250 US dollars to euros."));
        QTest::keyClick(input, Qt::Key_Return, Qt::ControlModifier);
        QVERIFY(panel.running());
        QCOMPARE(input->toPlainText(), QStringLiteral("Convert 250 US dollars to euros."));   // Ctrl+Enter typed no newline
        QVERIFY(!panel.findChild<QPushButton*>(QStringLiteral("runButton"))->isEnabled());
        QVERIFY(finished.wait(kTimeoutMs));
        QTRY_COMPARE(done.count(), 1);
        QVERIFY(tokens.count() >= 1);
        const auto outcome = finished.first().at(0).value<cc::ui::QueryOutcome>();
        QCOMPARE(outcome.result.generated_tokens, size_t(12));
        QVERIFY(!panel.outputText().isEmpty());
        QCOMPARE(panel.outputText(), QString::fromStdString(outcome.result.text));
        QVERIFY2(panel.statusText().contains(QStringLiteral("TTFT")) && panel.statusText().contains(QStringLiteral("tier memory")),
                 qPrintable(panel.statusText()));
        QVERIFY(panel.messageText().isEmpty());
        QVERIFY(panel.badgeText().isEmpty());

        // a sent message leaves the input for the next turn
        QVERIFY(input->toPlainText().isEmpty());
        QCOMPARE(panel.turnCount(), 1);
        // Ctrl+Enter on the keypad's Enter too
        QTest::keyClicks(input, QStringLiteral("And to yen?"));
        QTest::keyClick(input, Qt::Key_Enter, Qt::ControlModifier);
        QVERIFY(panel.running());
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 2, kTimeoutMs);
    }

    // The "Strict" toggle reaches the engine: on, the request carries strict and runs (the
    // tools_5 schemas compile); on a tool set whose schema the matcher cannot follow, the window
    // names the tool and the keyword.
    void strictToggleReachesTheEngine() {
        QueryPanel panel(m_engine.get());
        auto* check = panel.findChild<QCheckBox*>(QStringLiteral("strictCheck"));
        QVERIFY(check);
        QVERIFY(!check->isChecked());
        QVERIFY(!panel.options().tool_choice.strict);
        panel.setStrict(true);
        QVERIFY(check->isChecked());
        QVERIFY(panel.options().tool_choice.strict);
        panel.setMaxTokens(6);
        panel.setIgnoreEos(true);
        panel.setQuery(QStringLiteral("What's the weather in Lisbon?"));
        QSignalSpy done(&panel, &QueryPanel::queryDone);
        panel.run();
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, kTimeoutMs);
        QVERIFY2(panel.messageText().isEmpty(), qPrintable(panel.messageText()));

        QTemporaryDir dir;
        auto engine = loadedController(dir.path());
        QVERIFY(engine);
        QSignalSpy compiled(engine.get(), &EngineController::compiled);
        engine->compileTools(cc::ui::ToolsRequest{
            R"([{"type": "function", "function": {"name": "lookup_zip", "description": "Look up a ZIP code.",
                 "parameters": {"type": "object", "properties": {"zip": {"type": "string", "not": {"const": "00000"}}},
                 "required": ["zip"]}}}])",
            "zip.json", cc::ui::defaultSystemPrompt().toStdString()});
        QVERIFY(compiled.wait(kTimeoutMs));
        QTRY_VERIFY_WITH_TIMEOUT(!engine->busy(), kTimeoutMs);
        QueryPanel refused(engine.get());
        refused.setStrict(true);
        refused.setMaxTokens(4);
        refused.setQuery(QStringLiteral("ZIP of Springfield?"));
        refused.run();
        QTRY_VERIFY_WITH_TIMEOUT(!refused.running(), kTimeoutMs);
        QTRY_VERIFY_WITH_TIMEOUT(refused.messageText().contains(QStringLiteral("\"not\"")), kTimeoutMs);
        QVERIFY2(refused.messageText().contains(QStringLiteral("tool \"lookup_zip\"")), qPrintable(refused.messageText()));
    }

    void compareModeSaysIdentical() {
        QueryPanel panel(m_engine.get());
        panel.setMode(cc::ui::QueryKind::compare);
        panel.setMaxTokens(8);
        panel.setIgnoreEos(true);
        panel.setQuery(QStringLiteral("Find me flights from Boston to Denver on 2026-12-03."));
        QSignalSpy done(&panel, &QueryPanel::queryDone);
        panel.run();
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, kTimeoutMs);
        QVERIFY2(panel.badgeText().startsWith(QStringLiteral("identical")), qPrintable(panel.badgeText() + panel.messageText()));
        QVERIFY(panel.badgeText().contains(QStringLiteral("8 tokens")));
        QVERIFY(!panel.fullOutputText().isEmpty());
        QCOMPARE(panel.fullOutputText(), panel.outputText());
        QVERIFY(panel.findChild<QPlainTextEdit*>(QStringLiteral("fullOutput"))->isVisibleTo(&panel));

        // back to cached: no badge, no second output
        panel.setMode(cc::ui::QueryKind::cached);
        panel.setQuery(QStringLiteral("And back on 2026-12-10?"));
        panel.run();
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 2, kTimeoutMs);
        QVERIFY(panel.badgeText().isEmpty());
        QVERIFY(!panel.findChild<QPlainTextEdit*>(QStringLiteral("fullOutput"))->isVisibleTo(&panel));
    }

    void nopeModeShowsTheMetrics() {
        QueryPanel panel(m_engine.get());
        panel.setMode(cc::ui::QueryKind::per_tool_nope);
        QCOMPARE(panel.kind(), cc::ui::QueryKind::per_tool_nope);
        panel.setMaxTokens(4);
        panel.setIgnoreEos(true);
        panel.setQuery(QStringLiteral("What's the weather in Lisbon?"));
        QSignalSpy finished(m_engine.get(), &EngineController::queryFinished);
        QSignalSpy done(&panel, &QueryPanel::queryDone);
        panel.run();
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, kTimeoutMs);
        QCOMPARE(finished.count(), 1);
        const auto outcome = finished.first().at(0).value<cc::ui::QueryOutcome>();
        QVERIFY(outcome.nope.has_value());
        QVERIFY(outcome.result.full);
        const QString text = panel.nopeText();
        QVERIFY2(panel.messageText().isEmpty(), qPrintable(panel.messageText()));
        QVERIFY2(text.contains(QStringLiteral("logit cosine")) && text.contains(QStringLiteral("top-1 agreement")) &&
                     text.contains(QStringLiteral("RoPE check max |diff| 0 across")),
                 qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("5 tools")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("meaningless")), qPrintable(text));   // the built-in model's weights are synthetic
        QVERIFY(panel.badgeText().isEmpty());   // not compare's exactness badge: a difference is the expected result
        // the composed run's output, and the full prefill's beside it
        QCOMPARE(panel.outputText(), QString::fromStdString(outcome.result.text));
        QCOMPARE(panel.fullOutputText(), QString::fromStdString(outcome.result.full->text));
        QVERIFY(panel.findChild<QPlainTextEdit*>(QStringLiteral("fullOutput"))->isVisibleTo(&panel));
        // both runs' calls are named in the report (the Tool call box is hidden in this mode)
        const auto name = [](const std::optional<cc::ToolCall>& c) { return c ? QString::fromStdString(c->name) : QStringLiteral("no call"); };
        QVERIFY2(text.contains(QStringLiteral("tool call: %1 (composed), %2 (full prefill)")
                                   .arg(name(outcome.result.tool_call), name(outcome.result.full->tool_call))),
                 qPrintable(text));
        QVERIFY(!panel.findChild<QLabel*>(QStringLiteral("toolCallName"))->isVisibleTo(&panel));

        // another mode hides the metrics
        panel.setMode(cc::ui::QueryKind::cached);
        panel.run();
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 2, kTimeoutMs);
        QVERIFY(panel.nopeText().isEmpty());
        QVERIFY(panel.findChild<QLabel*>(QStringLiteral("toolCallName"))->isVisibleTo(&panel));
    }

    void cancelStopsALongQuery() {
        QueryPanel panel(m_engine.get());
        panel.setMaxTokens(32768);
        panel.setIgnoreEos(true);
        panel.setQuery(QStringLiteral("Write a very long story."));
        QSignalSpy tokens(m_engine.get(), &EngineController::tokens);
        QSignalSpy finished(m_engine.get(), &EngineController::queryFinished);
        QSignalSpy cancelled(m_engine.get(), &EngineController::cancelled);
        QSignalSpy done(&panel, &QueryPanel::queryDone);
        panel.run();
        QVERIFY(panel.running());
        QVERIFY(tokens.wait(kTimeoutMs));   // it is generating
        auto* cancel = panel.findChild<QPushButton*>(QStringLiteral("cancelButton"));
        QVERIFY(cancel->isEnabled());
        QTest::mouseClick(cancel, Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 20000);
        QVERIFY(!panel.running());
        QVERIFY(cancelled.count() >= 1 || finished.count() == 1);
        if (finished.count() == 1) {
            const auto outcome = finished.first().at(0).value<cc::ui::QueryOutcome>();
            QCOMPARE(outcome.result.stop_reason, cc::StopReason::cancelled);
            QVERIFY(outcome.result.generated_tokens < 32768);
        }
        QVERIFY2(panel.messageText().startsWith(QStringLiteral("Cancelled")), qPrintable(panel.messageText()));
        QVERIFY(panel.messages().empty());   // a cancelled turn is not part of the conversation
        QCOMPARE(panel.query(), QStringLiteral("Write a very long story."));
        QTRY_VERIFY_WITH_TIMEOUT(!m_engine->busy(), kTimeoutMs);
    }
    // The synthetic weights never produce a real tool call or a difference, so these answers are
    // fed to the panel as the controller would deliver them, under the id of a running request.
    void showsToolCallDifferenceAndErrors() {
        QueryPanel panel(m_engine.get());
        panel.setMaxTokens(4);
        panel.setQuery(QStringLiteral("Convert 250 US dollars to euros."));
        QSignalSpy started(&panel, &QueryPanel::queryStarted);
        QSignalSpy done(&panel, &QueryPanel::queryDone);
        panel.run();
        QCOMPARE(started.count(), 1);
        cc::ui::QueryOutcome fake;
        fake.requestId = started.first().at(0).value<quint64>();
        fake.result.text = "<tool_call>...</tool_call>";
        fake.result.tokens = {1, 2, 3, 4};
        fake.result.generated_tokens = 4;
        fake.result.tier = cc::Tier::disk;
        fake.result.stop_reason = cc::StopReason::stop_token;
        fake.result.problem = "group abc: damaged file quarantined, recompiled";
        fake.result.timings.ttft_ms = 42.5;
        cc::ToolCall call;
        call.name = "convert_currency";
        call.arguments = cc::ordered_json::parse(R"({"amount": 250, "from": "USD", "to": "EUR", "extra": {"a": [1, 2]}})");
        fake.result.tool_call = call;
        fake.result.identical = false;
        fake.result.first_difference = 3;
        fake.result.max_abs_logit_diff = 0.25;
        emit m_engine->queryFinished(fake);
        QCOMPARE(done.count(), 1);
        QVERIFY(!panel.running());

        QCOMPARE(panel.toolCallName(), QStringLiteral("convert_currency"));
        auto* args = panel.findChild<QTableWidget*>(QStringLiteral("toolCallArgs"));
        QVERIFY(args);
        QCOMPARE(args->rowCount(), 4);
        QCOMPARE(args->item(0, 0)->text(), QStringLiteral("amount"));
        QCOMPARE(args->item(0, 1)->text(), QStringLiteral("250"));
        QCOMPARE(args->item(1, 1)->text(), QStringLiteral("\"USD\""));
        QCOMPARE(args->item(3, 0)->text(), QStringLiteral("extra"));
        QCOMPARE(args->item(3, 1)->text(), QStringLiteral("{\"a\":[1,2]}"));
        QVERIFY2(panel.badgeText().startsWith(QStringLiteral("differs at token 3")), qPrintable(panel.badgeText()));
        QVERIFY2(panel.statusText().contains(QStringLiteral("TTFT 42.5 ms")) && panel.statusText().contains(QStringLiteral("tier disk")) &&
                     panel.statusText().contains(QStringLiteral("damaged file quarantined")),
                 qPrintable(panel.statusText()));
        // the real answer to that id arrives later and is ignored
        QTRY_VERIFY_WITH_TIMEOUT(!m_engine->busy(), kTimeoutMs);
        QCOMPARE(panel.toolCallName(), QStringLiteral("convert_currency"));

        // a failed query shows its message in the panel
        panel.setQuery(QStringLiteral("And to yen?"));
        panel.run();
        QVERIFY(panel.running());
        emit m_engine->failed(QStringLiteral("query"), QStringLiteral("backend exploded"));
        QVERIFY(!panel.running());
        QVERIFY2(panel.messageText().contains(QStringLiteral("backend exploded")), qPrintable(panel.messageText()));
        QTRY_VERIFY_WITH_TIMEOUT(!m_engine->busy(), kTimeoutMs);
    }

    // Both panels side by side at 1280x800 after a compile and a compare query; the grab is saved
    // to $CC_UI_SHOTS (a directory) for a look by eye.
    void looksRightAt1280x800() {
        QWidget window;
        auto* tools = new cc::ui::ToolSetPanel(m_engine.get(), &window);
        auto* query = new QueryPanel(m_engine.get(), &window);
        auto* layout = new QHBoxLayout(&window);
        layout->addWidget(tools, 2);
        layout->addWidget(query, 3);
        connect(tools, &cc::ui::ToolSetPanel::sampleQueryChosen, query, [query](const QString& text) {
            query->setQuery(text);
            query->run();
        });
        window.resize(1280, 800);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QVERIFY(tools->loadSample(QStringLiteral("tools_20.json")));
        tools->setToolEnabled(QStringLiteral("book_hotel"), false);
        QSignalSpy compiled(m_engine.get(), &EngineController::compiled);
        tools->compile();
        QVERIFY(compiled.wait(kTimeoutMs));
        QTRY_COMPARE_WITH_TIMEOUT(tools->cacheState(), QStringLiteral("memory"), kTimeoutMs);
        query->setMode(cc::ui::QueryKind::compare);
        query->setMaxTokens(24);
        query->setIgnoreEos(true);
        QSignalSpy done(query, &QueryPanel::queryDone);
        emit tools->sampleQueryChosen(cc::ui::sampleQueries(QStringLiteral("tools_20.json")).first());
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, kTimeoutMs);
        QVERIFY(query->badgeText().startsWith(QStringLiteral("identical")));
        const QImage shot = window.grab().toImage();
        QVERIFY(!shot.isNull());
        if (const QString dir = qEnvironmentVariable("CC_UI_SHOTS"); !dir.isEmpty()) {
            QVERIFY(shot.save(dir + QStringLiteral("/tool_query_panels.png")));
            auto* edit = tools->findChild<QPlainTextEdit*>(QStringLiteral("jsonEdit"));
            auto* tabs = tools->findChild<QTabWidget*>();
            tabs->setCurrentIndex(1);
            edit->setPlainText(edit->toPlainText().replace(QStringLiteral("\"check_inventory\""), QStringLiteral("\"check inventory\"")));
            QTRY_VERIFY(!tools->errorText().isEmpty());
            QVERIFY(tools->grab().save(dir + QStringLiteral("/tool_set_panel_error.png")));
            // narrow, as a dock
            cc::ui::ToolSetPanel narrow(m_engine.get());
            QVERIFY(narrow.loadSample(QStringLiteral("tools_unicode.json")));
            narrow.resize(340, 640);
            narrow.show();
            QTRY_COMPARE_WITH_TIMEOUT(narrow.cacheState(), QStringLiteral("not cached"), kTimeoutMs);
            QVERIFY(narrow.grab().save(dir + QStringLiteral("/tool_set_panel_narrow.png")));
            query->setParent(nullptr);
            query->resize(640, 420);
            query->show();
            QVERIFY(query->grab().save(dir + QStringLiteral("/query_panel_small.png")));
            delete query;
        }
    }
};

QTEST_MAIN(TestQueryPanel)
#include "test_query_panel.moc"
