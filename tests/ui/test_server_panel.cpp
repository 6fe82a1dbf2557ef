// The Server panel starts the HTTP server on the app's model, shows each request in its log with
// tier and timing split, counts hits, and stops it. Loopback and an ephemeral port only; every
// wait is bounded.
#include "ui/panels/server_panel.h"

#include "tests/ui/ui_test_rig.h"

#include <QPushButton>
#include <QTableWidget>

#include <httplib.h>
#include <nlohmann/json.hpp>

using namespace cc::ui;
using cc::ui::test::Rig;

class TestServerPanel : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() { initResources(); }

    void refusesToStartWithoutAModel() {
        EngineController engine;
        ServerPanel panel(&engine);
        QSignalSpy failed(&panel, &ServerPanel::failed);
        panel.start();
        QCOMPARE(failed.count(), 1);
        QVERIFY(!panel.running());
        QVERIFY(failed.first().first().toString().contains(QStringLiteral("Load a model")));
    }

    void servesLogsAndStops() {
        Rig rig;
        QVERIFY(rig.load());
        ServerPanel panel(&rig.controller);
        panel.setPort(0);
        QSignalSpy started(&panel, &ServerPanel::started);
        QSignalSpy failed(&panel, &ServerPanel::failed);
        panel.start();
        QTRY_VERIFY_WITH_TIMEOUT(!started.isEmpty() || !failed.isEmpty(), cc::ui::test::kTimeoutMs);
        QVERIFY2(failed.isEmpty(), qPrintable(failed.isEmpty() ? QString() : failed.first().first().toString()));
        QVERIFY(panel.running());
        QVERIFY(panel.port() > 0);
        QVERIFY(panel.address().startsWith(QStringLiteral("http://127.0.0.1:")));

        httplib::Client client("127.0.0.1", panel.port());
        client.set_read_timeout(120, 0);
        const nlohmann::json tools = nlohmann::json::parse(sampleToolSetJson(QStringLiteral("tools_5.json")).toStdString());
        nlohmann::json body{{"model", "any"},
                            {"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
                            {"tools", tools},
                            {"max_tokens", 2}};
        for (int i = 0; i < 2; ++i) {
            auto r = client.Post("/v1/chat/completions", body.dump(), "application/json");
            QVERIFY(r);
            QCOMPARE(r->status, 200);
        }
        auto bad = client.Post("/v1/chat/completions", "{not json", "application/json");
        QVERIFY(bad);
        QCOMPARE(bad->status, 400);

        // the log shows the three requests, newest first, with the second one a memory hit
        QTRY_COMPARE_WITH_TIMEOUT(panel.logRows(), 3, 10000);
        QCOMPARE(panel.log()->item(0, ServerPanel::Status)->text(), QStringLiteral("400"));
        QCOMPARE(panel.log()->item(1, ServerPanel::Tier)->text(), QStringLiteral("memory"));
        QCOMPARE(panel.log()->item(2, ServerPanel::Tier)->text(), QStringLiteral("miss"));
        QVERIFY(panel.log()->item(1, ServerPanel::Tokens)->text().contains(QStringLiteral(" / ")));
        QVERIFY(panel.log()->item(1, ServerPanel::Split)->data(Qt::UserRole).toList().size() == 6);
        QTRY_VERIFY_WITH_TIMEOUT(panel.statusText().contains(QStringLiteral("3 requests")), 5000);
        QVERIFY2(panel.statusText().contains(QStringLiteral("hit rate 50%")), qPrintable(panel.statusText()));

        // the panel's engine keeps `serve`'s warm KV pool (the rig's model runs on the CPU backend)
        auto metrics = client.Get("/metrics");
        QVERIFY(metrics);
        const std::string capacity = "contextcache_kv_warm_bytes{state=\"capacity\"} " +
                                     std::to_string(cc::serve::kDefaultKvWarmMb << 20) + "\n";
        QVERIFY2(metrics->body.find(capacity) != std::string::npos, metrics->body.c_str());

        QSignalSpy stopped(&panel, &ServerPanel::stopped);
        panel.stop();
        QCOMPARE(stopped.count(), 1);
        QVERIFY(!panel.running());
        QVERIFY(!client.Get("/health"));
    }
};

QTEST_MAIN(TestServerPanel)
#include "test_server_panel.moc"
