// The Benchmarks tab runs core/research/paper_bench on the worker (an engine of its own: the user's cache is
// untouched), shows Tables 2 and 3 exactly as the CSV files hold them, draws the three charts and
// exports JSON, CSV and PNG; Cancel stops it. `contextcache-cli bench --out DIR` + `contextcache --plot-bench DIR` render the same
// charts offscreen. A tiny configuration on builtin:qwen3-test; timings are never asserted.
#include "ui/research/bench_panel.h"

#include "core/research/paper_bench.h"
#include "tests/ui/ui_test_rig.h"
#include "ui/research/bench_charts.h"
#include "ui/charts/timing_charts.h"

#include <QDir>
#include <QFile>
#include <QImage>
#include <QLineSeries>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QStandardPaths>
#include <QTableWidget>

#include <nlohmann/json.hpp>

using namespace cc::ui;
using cc::ui::test::Rig;

class TestBenchPanel : public QObject {
    Q_OBJECT

    static QStringList headers(QTableWidget* t) {
        QStringList out;
        for (int c = 0; c < t->columnCount(); ++c) out << t->horizontalHeaderItem(c)->text();
        return out;
    }
    static QStringList columns(const std::vector<std::string>& names) {
        QStringList out;
        for (const auto& n : names) out << QString::fromStdString(n);
        return out;
    }
    static void verifyPngs(const QString& dir) {
        for (const QString& name : benchChartFiles()) {
            const QImage image(dir + QLatin1Char('/') + name);
            QVERIFY2(!image.isNull(), qPrintable(dir + "/" + name));
            QCOMPARE(image.size(), benchChartSize());
        }
    }

private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        initResources();
    }

    void runsShowsAndExports() {
        Rig rig;
        BenchPanel panel(&rig.controller);
        QVERIFY(!panel.runButton()->isEnabled());  // no model yet
        QVERIFY(rig.load());
        QTRY_VERIFY(panel.runButton()->isEnabled());  // once the load job has finished
        QVERIFY(!panel.exportButton()->isEnabled());
        panel.setToolCounts(QStringLiteral("5, 10"));
        panel.setQueries(3, 0, 2);
        QSignalSpy finished(&panel, &BenchPanel::finished);
        panel.run();
        QVERIFY(finished.wait(cc::ui::test::kTimeoutMs) || !finished.isEmpty());
        QVERIFY2(panel.outcome().has_value(), qPrintable(panel.statusText()));
        const auto& rows = panel.outcome()->rows;
        QCOMPARE(rows.size(), size_t(2));
        QCOMPARE(rows[0].n_tools, size_t(5));
        QCOMPARE(rows[1].full_ttft_ms.size(), size_t(3));
        QCOMPARE(rows[1].identical_outputs, 3);
        QCOMPARE(panel.outcome()->model.spec, std::string("builtin:qwen3-test"));
        QCOMPARE(panel.progressBar()->value(), panel.progressBar()->maximum());

        // the tables are the CSV files
        QCOMPARE(panel.table2()->rowCount(), 2);
        QCOMPARE(headers(panel.table2()), columns(cc::table2_columns()));
        QCOMPARE(panel.table3()->rowCount(), 2);
        QCOMPARE(headers(panel.table3()), columns(cc::table3_columns()));
        const int prefixCol = int(columns(cc::table3_columns()).indexOf(QStringLiteral("prefix_tokens")));
        QCOMPARE(panel.table3()->item(1, prefixCol)->text(), QString::number(rows[1].prefix_tokens));

        // the charts: one sweep point per tool set, the focus row's split and amortisation
        QCOMPARE(panel.sweepChart()->cachedSeries()->count(), 2);
        QCOMPARE(panel.sweepChart()->fullSeries()->at(1).y(), cc::median(rows[1].full_ttft_ms));
        QCOMPARE(panel.splitChart()->categories().size(), 2);
        QVERIFY(panel.amortisationChart()->savedSeries()->count() > 0);

        // the user's cache was neither read nor written: its store holds nothing
        QSignalSpy listed(&rig.controller, &EngineController::cacheListed);
        rig.controller.listCache();
        QVERIFY(listed.wait(cc::ui::test::kTimeoutMs) || !listed.isEmpty());
        QVERIFY(listed.first().first().value<CacheSnapshot>().groups.empty());

        QVERIFY(panel.exportButton()->isEnabled());
        const QString out = rig.dir.path() + QStringLiteral("/export");
        QString error;
        QVERIFY2(panel.exportTo(out, &error), qPrintable(error));
        QFile results(out + QStringLiteral("/results.json"));
        QVERIFY(results.open(QIODevice::ReadOnly));
        const auto json = nlohmann::json::parse(results.readAll().toStdString());
        QCOMPARE(json["rows"].size(), size_t(2));
        QCOMPARE(json["run"]["model"].get<std::string>(), std::string("builtin:qwen3-test"));
        QFile t2(out + QStringLiteral("/table2.csv"));
        QVERIFY(t2.open(QIODevice::ReadOnly));
        QCOMPARE(t2.readAll().toStdString(), cc::table2_csv(rows));
        verifyPngs(out);
    }

    void badToolCountsAreShownNotRun() {
        Rig rig;
        BenchPanel panel(&rig.controller);
        QVERIFY(rig.load());
        QSignalSpy jobs(&rig.controller, &EngineController::busyChanged);
        panel.setToolCounts(QStringLiteral("5,abc"));
        panel.run();
        QVERIFY2(panel.statusText().contains(QStringLiteral("\"abc\"")), qPrintable(panel.statusText()));
        panel.setToolCounts(QStringLiteral("101"));
        panel.run();
        QVERIFY2(panel.statusText().contains(QStringLiteral("1 to 100")), qPrintable(panel.statusText()));
        QVERIFY(rig.idle());  // every queued job has run: none of them was a benchmark
        for (const auto& args : jobs) QVERIFY(args.at(1).toString() != QLatin1String("bench"));
        QString error;
        QVERIFY(!panel.exportTo(rig.dir.path(), &error));
        QVERIFY(error.contains(QStringLiteral("no benchmark results")));
    }

    void cancelStopsTheRun() {
        Rig rig;
        BenchPanel panel(&rig.controller);
        QVERIFY(rig.load());
        panel.setToolCounts(QStringLiteral("5,10,20"));
        panel.setQueries(500, 0, 2);
        QSignalSpy progress(&rig.controller, &EngineController::progress);
        QSignalSpy finished(&panel, &BenchPanel::finished);
        panel.run();
        // wait for the first measured step, then cancel
        QVERIFY(QTest::qWaitFor([&] { return panel.cancelButton()->isEnabled() && progress.count() > 2; },
                                cc::ui::test::kTimeoutMs));
        panel.cancelButton()->click();
        QVERIFY(finished.wait(cc::ui::test::kTimeoutMs) || !finished.isEmpty());
        QVERIFY(!panel.outcome().has_value());
        QCOMPARE(panel.statusText(), QStringLiteral("cancelled"));
        QTRY_VERIFY(panel.runButton()->isEnabled());
    }

    void appPlotsTheCliResults() {
        QTemporaryDir dir;
        QProcess cli;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("XDG_CACHE_HOME"), dir.path() + QStringLiteral("/xdg"));
        env.remove(QStringLiteral("QT_QPA_PLATFORM"));  // the CLI picks offscreen itself
        cli.setProcessEnvironment(env);
        cli.start(QStringLiteral(CC_CLI_PATH),
                  {QStringLiteral("--model"), QStringLiteral("builtin:qwen3-test"), QStringLiteral("bench"),
                   QStringLiteral("--tool-counts"), QStringLiteral("5,20"), QStringLiteral("--n-queries"),
                   QStringLiteral("3"), QStringLiteral("--warmup"), QStringLiteral("0"),
                   QStringLiteral("--max-new-tokens"), QStringLiteral("2"), QStringLiteral("--json"),
                   QStringLiteral("--out"), dir.path() + QStringLiteral("/plots")});
        QVERIFY(cli.waitForFinished(cc::ui::test::kTimeoutMs));
        QVERIFY2(cli.exitCode() == 0, cli.readAllStandardError().constData());
        const auto json = nlohmann::json::parse(cli.readAllStandardOutput().toStdString());
        QCOMPARE(json["rows"].size(), size_t(2));

        QProcess app;
        app.setProcessEnvironment(env);
        app.start(QStringLiteral(CC_GUI_PATH), {QStringLiteral("--platform"), QStringLiteral("offscreen"),
                                                QStringLiteral("--plot-bench"), dir.path() + QStringLiteral("/plots")});
        QVERIFY(app.waitForFinished(cc::ui::test::kTimeoutMs));
        QVERIFY2(app.exitCode() == 0, app.readAllStandardError().constData());
        verifyPngs(dir.path() + QStringLiteral("/plots"));

        // Not a results file: a clear error naming it, and no chart.
        QFile bad(dir.path() + QStringLiteral("/bad/results.json"));
        QVERIFY(QDir().mkpath(dir.path() + QStringLiteral("/bad")) && bad.open(QIODevice::WriteOnly));
        bad.write("{\"benchmark\": \"something else\"}");
        bad.close();
        app.start(QStringLiteral(CC_GUI_PATH), {QStringLiteral("--platform"), QStringLiteral("offscreen"),
                                                QStringLiteral("--plot-bench"), dir.path() + QStringLiteral("/bad")});
        QVERIFY(app.waitForFinished(cc::ui::test::kTimeoutMs));
        QCOMPARE(app.exitCode(), 1);
        QVERIFY(QString::fromUtf8(app.readAllStandardError()).contains(QStringLiteral("not a paper_tables result")));
        QVERIFY(!QFile::exists(dir.path() + QStringLiteral("/bad/ttft_vs_tools.png")));
    }
};

QTEST_MAIN(TestBenchPanel)
#include "test_bench_panel.moc"
