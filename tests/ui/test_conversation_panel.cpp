// The Query panel as a conversation (Engine::chat through EngineController::runChat), against a
// real controller with the tiny built-in model (offscreen): turns reuse the turns before them,
// compare mode stays bit-identical, tool results go back with their call ids, New conversation
// starts over; and the Timings model and chart show each turn's split.
#include "ui/panels/query_panel.h"

#include "ui/charts/timing_charts.h"
#include "ui/charts/timing_data.h"
#include "ui/worker/engine_controller.h"
#include "ui/widgets/resources.h"
#include "tests/ui/ui_test_rig.h"

#include <QBarSet>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QtTest>

#include <memory>

using cc::ui::EngineController;
using cc::ui::QueryOutcome;
using cc::ui::QueryPanel;
using cc::ui::test::kTimeoutMs;

class TestConversationPanel : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_cacheDir;
    std::unique_ptr<EngineController> m_engine;

    // Types `text`, sends it with Ctrl+Enter and waits for the turn to end; returns its outcome.
    std::optional<QueryOutcome> sendTurn(QueryPanel& panel, const QString& text) {
        QSignalSpy finished(m_engine.get(), &EngineController::queryFinished);
        QSignalSpy done(&panel, &QueryPanel::queryDone);
        auto* input = panel.findChild<QPlainTextEdit*>(QStringLiteral("queryInput"));
        input->setFocus();
        input->clear();
        QTest::keyClicks(input, text);
        QTest::keyClick(input, Qt::Key_Return, Qt::ControlModifier);
        if (!panel.running()) return std::nullopt;
        if (!done.wait(kTimeoutMs) && done.isEmpty()) return std::nullopt;
        if (finished.isEmpty()) return std::nullopt;
        return finished.last().at(0).value<QueryOutcome>();
    }

private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        cc::ui::initResources();
        QVERIFY(m_cacheDir.isValid());
        m_engine = cc::ui::test::loadedController(m_cacheDir.path());
        QVERIFY(m_engine);
        QSignalSpy compiled(m_engine.get(), &EngineController::compiled);
        m_engine->compileTools(cc::ui::ToolsRequest{cc::ui::sampleToolSetJson(QStringLiteral("tools_5.json")).toStdString(),
                                                    "tools_5.json", cc::ui::defaultSystemPrompt().toStdString()});
        QVERIFY(compiled.wait(kTimeoutMs));
        QTRY_VERIFY_WITH_TIMEOUT(!m_engine->busy(), kTimeoutMs);
    }
    void cleanupTestCase() { m_engine.reset(); }

    // Three user turns in compare mode: every turn identical to a full prefill, and turns 2 and 3
    // reuse the conversation before them.
    void threeTurnsReuseTheTurnsBefore() {
        QueryPanel panel(m_engine.get());
        panel.resize(640, 720);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        panel.setMode(cc::ui::QueryKind::compare);
        panel.setMaxTokens(6);
        panel.setIgnoreEos(true);   // synthetic weights may pick the stop token first
        const QStringList turns{QStringLiteral("What's the weather like in Lisbon?"), QStringLiteral("And in Porto?"),
                                QStringLiteral("Convert 250 US dollars to euros.")};
        std::vector<QueryOutcome> outcomes;
        for (const QString& text : turns) {
            const auto outcome = sendTurn(panel, text);
            QVERIFY2(outcome, qPrintable(panel.messageText()));
            outcomes.push_back(*outcome);
            QVERIFY2(panel.badgeText().startsWith(QStringLiteral("identical")), qPrintable(panel.badgeText() + panel.messageText()));
            QCOMPARE(panel.fullOutputText(), panel.outputText());
        }
        QCOMPARE(panel.turnCount(), 3);
        QCOMPARE(panel.messages().size(), size_t(6));   // user, assistant × 3
        for (size_t i = 0; i < outcomes.size(); ++i) {
            const cc::QueryResult& r = outcomes[i].result;
            QCOMPARE(outcomes[i].turn, int(i) + 1);
            QCOMPARE(r.mode, std::string("compare"));
            QVERIFY(r.identical && *r.identical);
            QCOMPARE(r.prompt_tokens, r.group_reused_tokens + r.conversation_reused_tokens + r.prefilled_tokens);
            QVERIFY(r.group_reused_tokens > 0);   // the compiled tool set
            QCOMPARE(r.tier, cc::Tier::memory);
            QCOMPARE(panel.messages()[2 * i].content, turns[int(i)].toStdString());
        }
        QCOMPARE(outcomes[0].result.conversation_reused_tokens, size_t(0));
        QVERIFY2(outcomes[1].result.conversation_reused_tokens > 0, "turn 2 reuses turn 1");
        QVERIFY2(outcomes[2].result.conversation_reused_tokens > outcomes[1].result.conversation_reused_tokens,
                 "turn 3 reuses more than turn 2");
        QVERIFY(outcomes[2].result.prompt_tokens > outcomes[1].result.prompt_tokens);

        // the last turn's reuse line and status, and every turn listed with its own line
        const cc::QueryResult& last = outcomes[2].result;
        const QString line = QStringLiteral("group %1 (memory) + conversation %2 + new %3 tokens, TTFT")
                                 .arg(last.group_reused_tokens)
                                 .arg(last.conversation_reused_tokens)
                                 .arg(last.prefilled_tokens);
        QVERIFY2(panel.lastReuseText().startsWith(line), qPrintable(panel.lastReuseText()));
        QVERIFY2(panel.lastReuseText().contains(QStringLiteral("identical")), qPrintable(panel.lastReuseText()));
        if (last.diverged_at)
            QVERIFY(panel.lastReuseText().contains(QStringLiteral("diverged at %1").arg(*last.diverged_at)));
        QVERIFY2(panel.statusText().contains(QStringLiteral("turn 3")) && panel.statusText().contains(QStringLiteral("tier memory")),
                 qPrintable(panel.statusText()));
        const QString transcript = panel.transcriptText();
        for (const QString& text : turns) QVERIFY2(transcript.contains(text), qPrintable(transcript));
        QVERIFY(transcript.contains(QStringLiteral("Assistant (turn 3)")));
        QCOMPARE(transcript.count(QStringLiteral("+ conversation ")), 3);
        QVERIFY(panel.findChild<QPlainTextEdit*>(QStringLiteral("queryInput"))->toPlainText().isEmpty());
        QCOMPARE(panel.pendingToolCalls(), 0);

        // the Timings model keeps each turn's split; the chart names the turn and the parts
        cc::ui::TimingsData data;
        for (const auto& o : outcomes) data.addOutcome(o);
        const cc::ui::RequestRecord& rec = data.history().back();
        QCOMPARE(rec.turn, 3);
        QCOMPARE(rec.groupReusedTokens, last.group_reused_tokens);
        QCOMPARE(rec.conversationReusedTokens, last.conversation_reused_tokens);
        QCOMPARE(rec.prefilledTokens, last.prefilled_tokens);
        QCOMPARE(cc::ui::segmentValues(rec.timings)[cc::ui::SegConversation], last.timings.conversation_link_ms);
        cc::ui::RequestChart chart;
        chart.setRecord(&rec);
        QVERIFY2(chart.title().startsWith(QStringLiteral("Turn 3 ")) &&
                     chart.title().contains(QStringLiteral("conversation %1").arg(last.conversation_reused_tokens)),
                 qPrintable(chart.title()));
        QCOMPARE(chart.categories(), (QStringList{QStringLiteral("turn 3 · full prefill"), QStringLiteral("turn 3 · cached (memory)")}));
        QCOMPARE(chart.segmentSet(cc::ui::SegConversation)->at(1), last.timings.conversation_link_ms);
        QCOMPARE(chart.segmentSet(cc::ui::SegConversation)->at(0), 0.0);   // the full prefill reuses nothing
        if (const QString dir = qEnvironmentVariable("CC_UI_SHOTS"); !dir.isEmpty())
            QVERIFY(panel.grab().save(dir + QStringLiteral("/conversation_panel.png")));
    }

    // A reply with tool calls (fed to the panel under the running turn's id: synthetic weights
    // never call a tool) gets a result box per call; Send result(s) appends the tool messages with
    // the calls' ids and runs the next turn on the engine.
    void sendsToolResults() {
        QueryPanel panel(m_engine.get());
        panel.resize(640, 720);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        panel.setMaxTokens(4);
        panel.setIgnoreEos(true);
        QSignalSpy started(&panel, &QueryPanel::queryStarted);
        QSignalSpy done(&panel, &QueryPanel::queryDone);
        QSignalSpy finished(m_engine.get(), &EngineController::queryFinished);
        panel.setQuery(QStringLiteral("Convert 250 US dollars to euros and check the weather in Lisbon."));
        panel.run();
        QCOMPARE(started.count(), 1);
        auto* send = panel.findChild<QPushButton*>(QStringLiteral("sendResultsButton"));
        QVERIFY(send);
        QVERIFY(!send->isVisibleTo(&panel));

        QueryOutcome fake;
        fake.requestId = started.first().at(0).value<quint64>();
        fake.turn = 1;
        fake.result.mode = "cached";
        fake.result.text = "<tool_call>…</tool_call>";
        fake.result.tier = cc::Tier::memory;
        fake.result.stop_reason = cc::StopReason::stop_token;
        cc::ParsedReply reply;
        cc::ChatToolCall convert;
        convert.name = "convert_currency";
        convert.arguments = cc::ordered_json::parse(R"({"amount": 250, "from": "USD", "to": "EUR"})");
        cc::ChatToolCall weather;
        weather.name = "get_weather";
        weather.arguments = cc::ordered_json::parse(R"({"city": "Lisbon"})");
        reply.tool_calls = {convert, weather};
        fake.result.reply = reply;
        emit m_engine->queryFinished(fake);
        QCOMPARE(done.count(), 1);
        QVERIFY(!panel.running());

        QCOMPARE(panel.toolCallName(), QStringLiteral("convert_currency"));
        QCOMPARE(panel.pendingToolCalls(), 2);
        QVERIFY(send->isVisibleTo(&panel));
        QVERIFY(send->isEnabled());
        auto* result0 = panel.findChild<QPlainTextEdit*>(QStringLiteral("toolResult0"));
        auto* result1 = panel.findChild<QPlainTextEdit*>(QStringLiteral("toolResult1"));
        QVERIFY(result0 && result1);
        QCOMPARE(result0->toPlainText(), QStringLiteral("{}"));
        QCOMPARE(result1->toPlainText(), QStringLiteral("{}"));
        result0->setPlainText(QStringLiteral(R"({"amount": 231.5, "currency": "EUR"})"));
        QVERIFY(panel.transcriptText().contains(QStringLiteral("tool call convert_currency {\"amount\":250,\"from\":\"USD\",\"to\":\"EUR\"}")));
        if (const QString dir = qEnvironmentVariable("CC_UI_SHOTS"); !dir.isEmpty())
            QVERIFY(panel.grab().save(dir + QStringLiteral("/conversation_tool_results.png")));

        // the engine's real answer to the first id arrives meanwhile and is ignored
        QTest::mouseClick(send, Qt::LeftButton);
        QVERIFY(panel.running());
        QVERIFY(!send->isVisibleTo(&panel));
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 2, kTimeoutMs);
        QVERIFY2(panel.messageText().isEmpty(), qPrintable(panel.messageText()));

        const auto& m = panel.messages();
        QCOMPARE(m.size(), size_t(5));   // user, assistant (2 calls), tool, tool, assistant
        QCOMPARE(m[1].role, cc::ChatMessage::Role::assistant);
        QCOMPARE(m[1].tool_calls.size(), size_t(2));
        QVERIFY(m[1].tool_calls[0].id.starts_with("call_"));
        QVERIFY(m[1].tool_calls[0].id != m[1].tool_calls[1].id);
        QCOMPARE(m[2].role, cc::ChatMessage::Role::tool);
        QCOMPARE(m[2].tool_call_id, m[1].tool_calls[0].id);
        QCOMPARE(m[2].content, std::string(R"({"amount": 231.5, "currency": "EUR"})"));
        QCOMPARE(m[3].tool_call_id, m[1].tool_calls[1].id);
        QCOMPARE(m[3].content, std::string("{}"));
        QCOMPARE(m[4].role, cc::ChatMessage::Role::assistant);
        QCOMPARE(panel.turnCount(), 2);
        const QueryOutcome second = finished.last().at(0).value<QueryOutcome>();
        QCOMPARE(second.turn, 2);
        QVERIFY(second.result.reply.has_value());
        QCOMPARE(panel.outputText(), QString::fromStdString(second.result.text));
        const QString transcript = panel.transcriptText();
        QVERIFY2(transcript.contains(QStringLiteral("Tool result convert_currency (%1)").arg(QString::fromStdString(m[2].tool_call_id))),
                 qPrintable(transcript));
        QVERIFY(transcript.contains(QStringLiteral("231.5")));
        QTRY_VERIFY_WITH_TIMEOUT(!m_engine->busy(), kTimeoutMs);
    }

    // A failed turn leaves the conversation as it was; New conversation forgets every turn.
    void failureRollsBackAndNewConversationResets() {
        QueryPanel panel(m_engine.get());
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        panel.setMaxTokens(3);
        panel.setIgnoreEos(true);
        QSignalSpy done(&panel, &QueryPanel::queryDone);
        panel.setQuery(QStringLiteral("Find me flights from Boston to Denver."));
        panel.run();
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, kTimeoutMs);
        QCOMPARE(panel.turnCount(), 1);
        QCOMPARE(panel.messages().size(), size_t(2));

        panel.setQuery(QStringLiteral("And back on Friday?"));
        panel.run();
        QVERIFY(panel.running());
        emit m_engine->failed(QStringLiteral("query"), QStringLiteral("backend exploded"));
        QVERIFY(!panel.running());
        QVERIFY(panel.messageText().contains(QStringLiteral("backend exploded")));
        QCOMPARE(panel.messages().size(), size_t(2));   // the failed turn's message is not kept...
        QCOMPARE(panel.query(), QStringLiteral("And back on Friday?"));   // ...but stays in the input
        QTRY_VERIFY_WITH_TIMEOUT(!m_engine->busy(), kTimeoutMs);

        QSignalSpy reset(&panel, &QueryPanel::conversationReset);
        auto* button = panel.findChild<QPushButton*>(QStringLiteral("newConversationButton"));
        QVERIFY(button && button->isEnabled());
        QTest::mouseClick(button, Qt::LeftButton);
        QCOMPARE(reset.count(), 1);
        QCOMPARE(panel.turnCount(), 0);
        QVERIFY(panel.messages().empty());
        QVERIFY(panel.transcriptText().trimmed().isEmpty());
        QVERIFY(panel.outputText().isEmpty());
        QVERIFY(panel.lastReuseText().isEmpty());

        // the next message is turn 1 of a new conversation
        QSignalSpy finished(m_engine.get(), &EngineController::queryFinished);
        panel.setQuery(QStringLiteral("What's the weather like in Lisbon?"));
        panel.run();
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 3, kTimeoutMs);
        QCOMPARE(finished.last().at(0).value<QueryOutcome>().turn, 1);
        QCOMPARE(panel.turnCount(), 1);
        QCOMPARE(panel.messages().size(), size_t(2));
        QTRY_VERIFY_WITH_TIMEOUT(!m_engine->busy(), kTimeoutMs);
    }
};

QTEST_MAIN(TestConversationPanel)
#include "test_conversation_panel.moc"
