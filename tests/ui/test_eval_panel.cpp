// The Evaluation panel runs the bundled set on the worker thread: progress, per-example rows, the
// per-mode summary, identical outputs in both mode, the per-tool NoPE means, the synthetic-weights
// warning, and Cancel.
#include "ui/research/eval_panel.h"

#include "tests/ui/ui_test_rig.h"

#include <QProgressBar>
#include <QPushButton>
#include <QStandardPaths>
#include <QTableWidget>

using namespace cc::ui;
using cc::ui::test::Rig;

// Runs the panel's evaluation to its end: "" when it started, finished and did not fail, else why not.
QString runToTheEnd(Rig& rig, EvalPanel& panel) {
    QSignalSpy finished(&rig.controller, &EngineController::evalFinished);
    QSignalSpy failed(&rig.controller, &EngineController::failed);
    panel.run();
    if (!panel.running()) return QStringLiteral("did not start: ") + panel.statusText();
    if (!finished.wait(test::kTimeoutMs)) return QStringLiteral("did not finish in time");
    return failed.isEmpty() ? QString() : failed.first().at(1).toString();
}

class TestEvalPanel : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        initResources();
    }

    void runsTheBundledSetInBothModes() {
        Rig rig;
        EvalPanel panel(&rig.controller);
        QCOMPARE(panel.datasetPath(), EvalPanel::bundledDataset());
        QVERIFY(rig.load());
        QTRY_VERIFY(!panel.warningText().isEmpty());  // builtin:qwen3-test has synthetic weights
        QVERIFY(panel.warningText().contains(QStringLiteral("synthetic weights")));
        panel.setMode(QStringLiteral("both"));
        panel.setLimit(4);
        panel.setMaxTokens(3);
        const QString error = runToTheEnd(rig, panel);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QVERIFY(!panel.running());
        QCOMPARE(panel.examplesTable()->rowCount(), 4);
        QCOMPARE(panel.summaryTable()->rowCount(), 2);
        QCOMPARE(panel.summaryTable()->item(0, 0)->text(), QStringLiteral("cached"));
        QCOMPARE(panel.summaryTable()->item(1, 0)->text(), QStringLiteral("full"));
        for (int row = 0; row < 4; ++row)
            QCOMPARE(panel.examplesTable()->item(row, 8)->text(), QStringLiteral("identical"));
        QVERIFY2(panel.identicalText().contains(QStringLiteral("4 / 4")), qPrintable(panel.identicalText()));
        const auto* result = panel.lastResult();
        QVERIFY(result);
        QCOMPARE(result->n_identical_tokens, size_t(4));
        QVERIFY(result->synthetic_weights);
        // the bundled set's first four examples all expect a call (tools_5 weather queries)
        QCOMPARE(result->summaries[0].metrics.n_tool_call, size_t(4));
        QVERIFY(rig.idle());
    }

    void perToolNopeModeShowsTheMeansOfTheReports() {
        Rig rig;
        EvalPanel panel(&rig.controller);
        QVERIFY(rig.load());
        panel.setMode(QStringLiteral("per_tool_nope"));
        panel.setLimit(2);
        panel.setMaxTokens(3);
        const QString error = runToTheEnd(rig, panel);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        const auto* result = panel.lastResult();
        QVERIFY(result);
        QCOMPARE(result->records.size(), size_t(2));
        const cc::NopeMeans means = cc::nope_means(result->records);
        QCOMPARE(means.n, size_t(2));  // every example carries the composed run's report
        const QString text = panel.nopeText();
        QVERIFY2(text.contains(QStringLiteral("means over 2:")), qPrintable(text));
        QVERIFY2(panel.statusText().endsWith(text), qPrintable(panel.statusText()));
        QVERIFY2(text.contains(QString::number(means.logit_cosine_first, 'f', 6)), qPrintable(text));
        QVERIFY2(text.contains(QString::number(means.top1_agreement, 'f', 3)), qPrintable(text));
        QCOMPARE(panel.summaryTable()->rowCount(), 2);  // full and per_tool_nope
        // a later run in another mode clears it
        panel.setMode(QStringLiteral("cached"));
        const QString again = runToTheEnd(rig, panel);
        QVERIFY2(again.isEmpty(), qPrintable(again));
        QVERIFY(panel.nopeText().isEmpty());
        QVERIFY(rig.idle());
    }

    void badModeIsRefusedBeforeRunning() {
        Rig rig;
        EvalPanel panel(&rig.controller);
        QVERIFY(rig.load());
        panel.setMode(QStringLiteral("sideways"));
        panel.run();
        QVERIFY(!panel.running());
        QVERIFY2(panel.statusText().contains(QStringLiteral("sideways")), qPrintable(panel.statusText()));
    }

    void badDatasetFileShowsTheError() {
        Rig rig;
        EvalPanel panel(&rig.controller);
        QVERIFY(rig.load());
        const QString path = rig.dir.path() + QStringLiteral("/bad.jsonl");
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("{\"query\": \"q\", \"expected\": null}\n");
        f.close();
        panel.setDatasetPath(path);
        QSignalSpy failed(&rig.controller, &EngineController::failed);
        panel.run();
        QVERIFY(failed.wait(test::kTimeoutMs));
        QTRY_VERIFY(!panel.running());
        QVERIFY2(panel.statusText().contains(QStringLiteral("bad.jsonl:1")), qPrintable(panel.statusText()));
    }

    void cancelStopsEarly() {
        Rig rig;
        EvalPanel panel(&rig.controller);
        QVERIFY(rig.load());
        panel.setMode(QStringLiteral("cached"));
        panel.setMaxTokens(2);
        QSignalSpy finished(&rig.controller, &EngineController::evalFinished);
        QSignalSpy record(&rig.controller, &EngineController::evalRecord);
        panel.run();
        QVERIFY(record.wait(test::kTimeoutMs));  // one example done, then cancel
        panel.cancel();
        QVERIFY(finished.wait(test::kTimeoutMs) || !finished.isEmpty());
        const auto result = finished.first().first().value<cc::EvalRunResult>();
        QVERIFY(result.cancelled);
        QVERIFY(result.records.size() < 120);
        QVERIFY2(panel.statusText().contains(QStringLiteral("Cancelled")), qPrintable(panel.statusText()));
        QVERIFY(rig.idle());
    }
};

QTEST_MAIN(TestEvalPanel)
#include "test_eval_panel.moc"
