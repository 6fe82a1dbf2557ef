// The Model panel's remote tier (the app's side of contextcache-cli --remote): the URL reaches the
// engine's options and the settings, a bad URL is said at once and refused at Load (the previous
// model stays), an unreachable Redis is said after the load while the app goes on working (a
// compile is a local miss), and a reachable one is said connected and shares groups.
#include "ui/panels/model_panel.h"

#include "tests/redis_server.h"
#include "tests/ui/ui_test_rig.h"

#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QSettings>
#include <QStandardPaths>

using namespace cc::ui;
using cc::ui::test::Rig;

class TestModelPanel : public QObject {
    Q_OBJECT

    static QLineEdit* urlEdit(ModelPanel& panel) { return panel.findChild<QLineEdit*>(QStringLiteral("remoteUrlEdit")); }
    static QLabel* remoteStatus(ModelPanel& panel) { return panel.findChild<QLabel*>(QStringLiteral("remoteStatus")); }
    static QSpinBox* warmSpin(ModelPanel& panel) { return panel.findChild<QSpinBox*>(QStringLiteral("remoteWarmSpin")); }
    static QLabel* modelStatus(ModelPanel& panel) { return panel.findChild<QLabel*>(QStringLiteral("modelStatus")); }
    static bool isError(QLabel* label) { return label->property("error").toBool(); }

    // The panel's form set to the tiny test model in the rig's cache directory, with `url`.
    static void setForm(ModelPanel& panel, const Rig& rig, const QString& url) {
        ModelRequest r = rig.model;
        r.remoteUrl = url.toStdString();
        panel.setRequest(r);
    }

private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        initResources();
    }

    void theUrlReachesTheRequestAndTheSettings() {
        Rig rig;
        ModelPanel panel(&rig.controller);
        QVERIFY(urlEdit(panel));
        QVERIFY(remoteStatus(panel));
        QCOMPARE(panel.request().remoteUrl, std::string());
        QVERIFY(!isError(remoteStatus(panel)));
        urlEdit(panel)->setText(QStringLiteral("  redis://127.0.0.1:6390/2 "));
        QCOMPARE(panel.request().remoteUrl, std::string("redis://127.0.0.1:6390/2"));
        QVERIFY(!isError(remoteStatus(panel)));

        QSettings settings(QDir(rig.dir.path()).filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
        panel.saveSettings(settings);
        ModelPanel other(&rig.controller);
        QCOMPARE(other.request().remoteUrl, std::string());
        other.restoreSettings(settings);
        QCOMPARE(other.request().remoteUrl, std::string("redis://127.0.0.1:6390/2"));
    }

    // The warm pool (serve's --remote-warm-mb): 256 MiB as serve, a long-lived process; editable only
    // with a URL; kept in the settings; and it reaches the remote tier's options only with a URL.
    void theWarmPoolFollowsTheUrl() {
        Rig rig;
        ModelPanel panel(&rig.controller);
        QSpinBox* warm = warmSpin(panel);
        QVERIFY(warm);
        QCOMPARE(warm->value(), 256);
        QCOMPARE(panel.request().remoteWarmBytes, uint64_t(256) << 20);
        QVERIFY(!warm->isEnabled());
        urlEdit(panel)->setText(QStringLiteral("redis://127.0.0.1:6390"));
        QVERIFY(warm->isEnabled());
        warm->setValue(64);
        QCOMPARE(panel.request().remoteWarmBytes, uint64_t(64) << 20);

        QSettings settings(QDir(rig.dir.path()).filePath(QStringLiteral("w.ini")), QSettings::IniFormat);
        panel.saveSettings(settings);
        ModelPanel other(&rig.controller);
        other.restoreSettings(settings);
        QCOMPARE(other.request().remoteWarmBytes, uint64_t(64) << 20);
        QVERIFY(warmSpin(other)->isEnabled());

        ModelRequest r = rig.model;   // no URL: no pool, whatever the spin box says (with one: below)
        r.remoteWarmBytes = uint64_t(64) << 20;
        QSignalSpy loaded(&rig.controller, &EngineController::modelLoaded);
        rig.controller.loadModel(r);
        QCOMPARE(rig.controller.engineOptions().cache.remote.warm_bytes, size_t(0));
        QVERIFY(loaded.wait(cc::ui::test::kTimeoutMs) || !loaded.isEmpty());
    }

    // The KV width starts at auto, which is the F32 reference on the CPU (BF16 on a GPU, as the
    // CLI: only a device run can show that side); a width chosen or restored stays as it is.
    void theKvDtypeStartsAtAutoWhichIsF32OnTheCpu() {
        Rig rig;
        ModelPanel panel(&rig.controller);
        QCOMPARE(panel.request().kvDtype, std::string("auto"));
        ModelRequest r = rig.model;
        r.kvDtype = panel.request().kvDtype;
        rig.controller.loadModel(r);
        QCOMPARE(int(rig.controller.engineOptions().kv_dtype), int(cc::KvDType::f32));
        r.kvDtype = "bf16";
        rig.controller.loadModel(r);
        QCOMPARE(int(rig.controller.engineOptions().kv_dtype), int(cc::KvDType::bf16));
        panel.setRequest(r);
        QCOMPARE(panel.request().kvDtype, std::string("bf16"));
        QSettings settings(QDir(rig.dir.path()).filePath(QStringLiteral("kv.ini")), QSettings::IniFormat);
        settings.setValue(QStringLiteral("model/kvDtype"), QStringLiteral("f32"));   // saved by an older version
        panel.restoreSettings(settings);
        QCOMPARE(panel.request().kvDtype, std::string("f32"));
        QVERIFY(rig.idle());   // both loads have run before the rig goes
    }

    void aBadUrlIsSaidAndRefusedAtLoad() {
        Rig rig;
        ModelPanel panel(&rig.controller);
        QVERIFY(rig.load());   // a model in use, which a refused load must leave in place
        setForm(panel, rig, QStringLiteral("http://127.0.0.1:6379"));
        QVERIFY(isError(remoteStatus(panel)));
        QVERIFY2(remoteStatus(panel)->text().contains(QStringLiteral("redis://")), qPrintable(remoteStatus(panel)->text()));
        QSignalSpy started(&rig.controller, &EngineController::requestLoadModel);
        auto* loadButton = panel.findChild<QPushButton*>(QStringLiteral("loadButton"));
        QTRY_VERIFY(loadButton->isEnabled());   // the load's end (busyChanged) arrives after modelLoaded
        loadButton->click();
        QVERIFY2(modelStatus(panel)->text().contains(QStringLiteral("must start with redis://")),
                 qPrintable(modelStatus(panel)->text()));
        QTest::qWait(200);
        QVERIFY(started.isEmpty());   // no load job was queued
        QVERIFY(rig.controller.modelInfo());
        urlEdit(panel)->setText(QStringLiteral("redis://h:99999"));
        QVERIFY(isError(remoteStatus(panel)));
        QVERIFY(remoteStatus(panel)->text().contains(QStringLiteral("port")));
        urlEdit(panel)->clear();
        QVERIFY(!isError(remoteStatus(panel)));
    }

    void anUnreachableRedisIsSaidAndTheAppWorksOn() {
        Rig rig;
        ModelPanel panel(&rig.controller);
        const int port = cc::test::free_loopback_port();   // nothing listens there
        QVERIFY(port > 0);
        setForm(panel, rig, QStringLiteral("redis://127.0.0.1:%1").arg(port));
        QSignalSpy loaded(&rig.controller, &EngineController::modelLoaded);
        QSignalSpy checked(&rig.controller, &EngineController::remoteChecked);
        panel.load();
        QVERIFY(loaded.wait(cc::ui::test::kTimeoutMs) || !loaded.isEmpty());
        QTRY_VERIFY_WITH_TIMEOUT(!checked.isEmpty(), 20000);
        QVERIFY(!checked.first().at(1).toString().isEmpty());
        QTRY_VERIFY(isError(remoteStatus(panel)));
        QVERIFY2(remoteStatus(panel)->text().startsWith(QStringLiteral("Unreachable")), qPrintable(remoteStatus(panel)->text()));
        QVERIFY(remoteStatus(panel)->text().contains(QString::number(port)));
        // the engine goes on: a compile is a local miss
        const auto compiled = rig.compile();
        QVERIFY(compiled);
        QCOMPARE(compiled->tier, cc::Tier::miss);
    }

    void aReachableRedisIsSaidConnectedAndSharesGroups() {
        if (cc::test::RedisServer::binary().empty()) QSKIP("redis-server is not installed (apt install redis-server)");
        QTemporaryDir redisDir;
        cc::test::RedisServer redis(redisDir.path().toStdString());
        QVERIFY2(redis.ok(), redis.log().c_str());
        const QString url = QString::fromStdString(redis.url());

        Rig a;   // publishes
        {
            ModelPanel panel(&a.controller);
            setForm(panel, a, url);
            QSignalSpy checked(&a.controller, &EngineController::remoteChecked);
            QSignalSpy loaded(&a.controller, &EngineController::modelLoaded);
            panel.load();
            QVERIFY(loaded.wait(cc::ui::test::kTimeoutMs) || !loaded.isEmpty());
            QTRY_VERIFY_WITH_TIMEOUT(!checked.isEmpty(), 20000);
            QCOMPARE(checked.first().at(1).toString(), QString());
            QVERIFY2(remoteStatus(panel)->text().startsWith(QStringLiteral("Connected")), qPrintable(remoteStatus(panel)->text()));
            QVERIFY(!isError(remoteStatus(panel)));
            const auto compiled = a.compile();
            QVERIFY(compiled);
            QCOMPARE(compiled->tier, cc::Tier::miss);
        }
        Rig b;   // another cache directory, the same Redis: a remote hit, fetched into the warm pool
        ModelPanel panel(&b.controller);
        setForm(panel, b, url);
        QSignalSpy loaded(&b.controller, &EngineController::modelLoaded);
        panel.load();
        QVERIFY(loaded.wait(cc::ui::test::kTimeoutMs) || !loaded.isEmpty());
        QCOMPARE(b.controller.engineOptions().cache.remote.warm_bytes, size_t(256) << 20);
        const auto compiled = b.compile();
        QVERIFY(compiled);
        QCOMPARE(compiled->tier, cc::Tier::remote);
    }
};

QTEST_MAIN(TestModelPanel)
#include "test_model_panel.moc"
