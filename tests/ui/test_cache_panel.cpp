// The Cache panel lists what the store holds, and its actions reach the store: Delete removes the
// group file, Evict leaves it on disk only, the usage bars show the snapshot's bytes.
#include "ui/panels/cache_panel.h"

#include "tests/ui/ui_test_rig.h"
#include "ui/panels/cache_model.h"

#include <QFileInfo>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QStandardPaths>
#include <QTableView>

using namespace cc::ui;
using cc::ui::test::Rig;

class TestCachePanel : public QObject {
    Q_OBJECT

    static QString cell(CachePanel& panel, const QString& key, int column) {
        const int row = panel.model()->rowOf(key);
        return row < 0 ? QString() : panel.model()->index(row, column).data().toString();
    }

private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        initResources();
    }

    void showsACompiledGroupAndDeletesIt() {
        Rig rig;
        CachePanel panel(&rig.controller);
        panel.setConfirmDestructive(false);
        QVERIFY(rig.load());
        const auto compiled = rig.compile();
        QVERIFY(compiled);
        const QString key = QString::fromStdString(compiled->group_key);
        const QString file =
            QString::fromStdString(rig.model.cacheDir) + QStringLiteral("/groups/") + key + QStringLiteral(".kv");
        QTRY_VERIFY_WITH_TIMEOUT(panel.model()->rowOf(key) >= 0, 10000);
        QVERIFY(QFileInfo::exists(file));
        const int row = panel.model()->rowOf(key);
        QCOMPARE(panel.model()->index(row, CacheTableModel::Tokens).data().toULongLong(),
                 qulonglong(compiled->prefix_tokens));
        QCOMPARE(panel.model()->index(row, CacheTableModel::Tools).data().toInt(), 5);
        QVERIFY(cell(panel, key, CacheTableModel::Key).startsWith(key.left(12)));
        QVERIFY(panel.model()->index(row, CacheTableModel::Key).data(Qt::ToolTipRole).toString().contains(key));
        QCOMPARE(panel.view()->model()->rowCount(), 1);

        QVERIFY(panel.selectedKeys().isEmpty());
        QVERIFY(panel.selectGroup(key));
        QCOMPARE(panel.selectedKeys(), QStringList{key});
        panel.deleteSelected();
        QTRY_VERIFY_WITH_TIMEOUT(panel.model()->rowOf(key) < 0, 10000);
        QVERIFY(rig.idle());
        QVERIFY(!QFileInfo::exists(file));
        QCOMPARE(panel.view()->model()->rowCount(), 0);
    }

    void evictLeavesTheGroupOnDisk() {
        Rig rig;
        CachePanel panel(&rig.controller);
        QVERIFY(rig.load());
        const auto compiled = rig.compile();
        QVERIFY(compiled);
        const QString key = QString::fromStdString(compiled->group_key);
        QTRY_COMPARE_WITH_TIMEOUT(cell(panel, key, CacheTableModel::Tier), QStringLiteral("memory + disk"), 10000);
        QVERIFY(panel.selectGroup(key));
        panel.evictSelected();
        QTRY_COMPARE_WITH_TIMEOUT(cell(panel, key, CacheTableModel::Tier), QStringLiteral("disk"), 10000);
        // the selection survives the refresh, and Evict is now pointless
        QCOMPARE(panel.selectedKeys(), QStringList{key});
        QPushButton* evict = nullptr;
        for (auto* b : panel.findChildren<QPushButton*>())
            if (b->text() == QStringLiteral("Evict from memory")) evict = b;
        QVERIFY(evict);
        QVERIFY(!evict->isEnabled());
    }

    void usageBarsShowTheSnapshotBytes() {
        Rig rig(uint64_t(4) << 20, uint64_t(8) << 20);  // small budgets so a tiny group moves the bars
        CachePanel panel(&rig.controller);
        QSignalSpy listed(&rig.controller, &EngineController::cacheListed);
        QVERIFY(rig.load());
        QVERIFY(rig.compile());
        QVERIFY(rig.idle());
        panel.refresh();
        QVERIFY(rig.idle());
        QVERIFY(!listed.isEmpty());
        const auto snapshot = listed.last().first().value<CacheSnapshot>();
        QVERIFY(snapshot.memoryBytes > 0);
        QVERIFY(snapshot.diskBytes > 0);
        QCOMPARE(snapshot.hostBudgetBytes, uint64_t(4) << 20);
        QCOMPARE(panel.memoryBar()->value(), int(1000.0 * double(snapshot.memoryBytes) / double(4 << 20) + 0.5));
        QCOMPARE(panel.diskBar()->value(), int(1000.0 * double(snapshot.diskBytes) / double(8 << 20) + 0.5));
        QVERIFY(panel.memoryBar()->value() > 0);
        QVERIFY(panel.memoryBar()->text().contains(humanBytes(snapshot.memoryBytes)));
        QVERIFY(panel.memoryBar()->text().contains(QStringLiteral("4.00 MiB")));
        QVERIFY(panel.diskBar()->text().contains(humanBytes(snapshot.diskBytes)));
        QCOMPARE(panel.memoryBar()->property("bytes").toULongLong(), qulonglong(snapshot.memoryBytes));
    }

    void verifyReportsAllFiles() {
        Rig rig;
        CachePanel panel(&rig.controller);
        QVERIFY(rig.load());
        QVERIFY(rig.compile());
        QVERIFY(rig.compile(QStringLiteral("tools_10.json")));
        QTRY_COMPARE_WITH_TIMEOUT(panel.model()->rowCount(), 2, 10000);
        panel.verify();
        QTRY_VERIFY_WITH_TIMEOUT(panel.statusText().contains(QStringLiteral("All 2 files verified")), 20000);
    }

    void clearRemovesEverything() {
        Rig rig;
        CachePanel panel(&rig.controller);
        panel.setConfirmDestructive(false);
        QVERIFY(rig.load());
        QVERIFY(rig.compile());
        QTRY_COMPARE_WITH_TIMEOUT(panel.model()->rowCount(), 1, 10000);
        panel.clearAll();
        QTRY_COMPARE_WITH_TIMEOUT(panel.model()->rowCount(), 0, 10000);
        QVERIFY(QDir(QString::fromStdString(rig.model.cacheDir) + QStringLiteral("/groups"))
                    .entryList({QStringLiteral("*.kv")}, QDir::Files)
                    .isEmpty());
    }

    // Not a check: with CC_UI_SHOTS=<dir> set, saves the panel with real data.
    void screenshots() {
        const QString dir = qEnvironmentVariable("CC_UI_SHOTS");
        if (dir.isEmpty()) QSKIP("set CC_UI_SHOTS=<dir> to save screenshots");
        Rig rig(uint64_t(4) << 20, uint64_t(64) << 20);
        CachePanel panel(&rig.controller);
        panel.resize(1280, 600);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        QVERIFY(rig.load());
        QVERIFY(rig.compile());
        QVERIFY(rig.compile(QStringLiteral("tools_10.json")));
        QVERIFY(rig.compile(QStringLiteral("tools_20.json")));
        QTRY_COMPARE_WITH_TIMEOUT(panel.model()->rowCount(), 3, 10000);
        QVERIFY(panel.selectGroup(QString::fromStdString(rig.controller.currentTools()->group_key)));
        QTest::qWait(100);
        panel.grab().save(dir + QStringLiteral("/cache.png"));
    }

    void sortsNumbersAsNumbers() {
        CacheTableModel model;
        CacheSnapshot s;
        for (size_t tokens : {900u, 10000u, 95u}) {
            cc::GroupInfo g;
            g.group_key = std::string(64, char('a' + s.groups.size()));
            g.prefix_ids.resize(tokens);
            s.groups.push_back(g);
        }
        model.setSnapshot(s);
        QSortFilterProxyModel proxy;
        proxy.setSourceModel(&model);
        proxy.setSortRole(CacheTableModel::kSortRole);
        proxy.sort(CacheTableModel::Tokens, Qt::AscendingOrder);
        QCOMPARE(proxy.index(0, CacheTableModel::Tokens).data().toULongLong(), 95ull);
        QCOMPARE(proxy.index(1, CacheTableModel::Tokens).data().toULongLong(), 900ull);
        QCOMPARE(proxy.index(2, CacheTableModel::Tokens).data().toULongLong(), 10000ull);
        QCOMPARE(humanBytes(1536), QStringLiteral("1.50 KiB"));
        QCOMPARE(humanBytes(512), QStringLiteral("512 B"));
    }
};

QTEST_MAIN(TestCachePanel)
#include "test_cache_panel.moc"
