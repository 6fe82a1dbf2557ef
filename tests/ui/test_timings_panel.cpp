// The Timings panel shows exactly what the engine measured: history and chart data equal the
// QueryOutcome's Timings, compare mode draws both runs, the sweep plots both TTFTs, the break-even
// is ceil(compile / saving), and the exports write what they say.
#include "ui/panels/timings_panel.h"

#include "tests/ui/ui_test_rig.h"
#include "ui/charts/timing_charts.h"

#include <QBarSet>
#include <QChartView>
#include <QValueAxis>
#include <QFile>
#include <QHorizontalStackedBarSeries>
#include <QImage>
#include <QLineSeries>
#include <QPushButton>
#include <QScatterSeries>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableView>
#include <QDir>

#include <cmath>
#include <set>
#include <tuple>

using namespace cc::ui;
using cc::ui::test::Rig;

// QCOMPARE on doubles is fuzzy; the panel must hold the engine's numbers bit for bit.
#define EXACT(actual, expected)                                                                       \
    QVERIFY2(double(actual) == double(expected), qPrintable(QStringLiteral("%1: expected %2, got %3") \
                                                                .arg(QStringLiteral(#actual))         \
                                                                .arg(double(expected), 0, 'g', 17)    \
                                                                .arg(double(actual), 0, 'g', 17)))

#define COMPARE_TIMINGS(a, b)                          \
    do {                                               \
        EXACT((a).tokenize_ms, (b).tokenize_ms);       \
        EXACT((a).lookup_ms, (b).lookup_ms);           \
        EXACT((a).disk_load_ms, (b).disk_load_ms);     \
        EXACT((a).upload_ms, (b).upload_ms);           \
        EXACT((a).link_ms, (b).link_ms);               \
        EXACT((a).compile_ms, (b).compile_ms);         \
        EXACT((a).prefill_ms, (b).prefill_ms);         \
        EXACT((a).ttft_ms, (b).ttft_ms);               \
        EXACT((a).decode_ms, (b).decode_ms);           \
        EXACT((a).total_ms, (b).total_ms);             \
        EXACT((a).prefill_tok_s, (b).prefill_tok_s);   \
        EXACT((a).decode_tok_s, (b).decode_tok_s);     \
        EXACT((a).disk_load_gb_s, (b).disk_load_gb_s); \
    } while (0)

class TestTimingsPanel : public QObject {
    Q_OBJECT

    // The bar chart's segment values for bar `bar` equal segmentValues(t), and the TTFT marker sits at t.ttft_ms.
    static bool barMatches(RequestChart* chart, int bar, const cc::Timings& t, QString* why) {
        const auto expected = segmentValues(t);
        for (int s = 0; s < SegCount; ++s) {
            QBarSet* set = chart->segmentSet(s);
            if (set->count() <= bar || set->at(bar) != expected[size_t(s)]) {
                *why = QStringLiteral("bar %1 segment %2: expected %3, got %4")
                           .arg(bar)
                           .arg(segmentNames()[s])
                           .arg(expected[size_t(s)])
                           .arg(set->count() > bar ? set->at(bar) : -1);
                return false;
            }
        }
        const auto marker = chart->ttftMarker(bar)->points();
        if (marker.size() != 2 || marker[0].x() != t.ttft_ms || marker[1].x() != t.ttft_ms) {
            *why = QStringLiteral("bar %1: TTFT marker not at %2").arg(bar).arg(t.ttft_ms);
            return false;
        }
        return true;
    }

private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        initResources();
    }

    // Regression: going from a tiny request (sub-millisecond axis steps) to a long one made Qt
    // Charts build one tick item per old step over the new range (tens of thousands) on the GUI
    // thread: 80 s frozen after a full-prefill query. Every intermediate axis state must be sane.
    void axisChangesNeverAskForThousandsOfTicks() {
        auto* chartPtr = new RequestChart;   // the view owns it
        RequestChart& chart = *chartPtr;
        QChartView view(chartPtr);
        view.resize(900, 300);
        view.show();
        int worst = 0;
        for (QAbstractAxis* a : chart.axes(Qt::Horizontal)) {
            auto* axis = qobject_cast<QValueAxis*>(a);
            QVERIFY(axis);
            connect(axis, &QValueAxis::rangeChanged, this, [axis, &worst](qreal lo, qreal hi) {
                if (axis->tickType() == QValueAxis::TicksDynamic && axis->tickInterval() > 0)
                    worst = std::max(worst, int(std::min(1e9, (hi - lo) / axis->tickInterval())));
            });
        }
        RequestRecord tiny, longRun;
        tiny.index = 1;
        tiny.mode = QStringLiteral("cached");
        tiny.timings.prefill_ms = 0.02;
        tiny.timings.ttft_ms = 0.03;
        tiny.timings.decode_ms = 0.01;
        longRun = tiny;
        longRun.index = 2;
        longRun.mode = QStringLiteral("full");
        longRun.timings.prefill_ms = 9000;
        longRun.timings.ttft_ms = 9001;
        longRun.timings.decode_ms = 3000;
        chart.setRecord(&tiny);
        chart.setRecord(&longRun);
        chart.setRecord(&tiny);
        QVERIFY2(worst <= 100, qPrintable(QStringLiteral("an axis state asked for %1 ticks").arg(worst)));
    }

    // The short request chart (the Timings tab's top strip, compact below 300 px) and a tall one:
    // every value label, the TTFT ones included, lies inside the plot area, so none is drawn over
    // the chart's title or the axis. With CC_UI_SHOTS=<dir> the renders are saved to look at.
    void requestChartLabelsStayInsideThePlot() {
        RequestRecord r;
        r.index = 3;
        r.mode = QStringLiteral("compare");
        r.tier = cc::Tier::memory;
        r.nTools = 20;
        r.prefixTokens = 2400;
        r.suffixTokens = 20;
        r.timings.link_ms = 3;
        r.timings.prefill_ms = 40;
        r.timings.ttft_ms = 48;
        r.timings.decode_ms = 300;
        cc::Timings full;
        full.prefill_ms = 900;
        full.ttft_ms = 910;
        full.decode_ms = 300;
        r.fullTimings = full;
        // and two TTFTs close together (their labels would meet in the gap between the bars)
        RequestRecord close = r;
        close.index = 4;
        close.fullTimings->prefill_ms = 50;
        close.fullTimings->ttft_ms = 60;
        const QString dir = qEnvironmentVariable("CC_UI_SHOTS");
        for (const auto& [record, size] : {std::pair{&r, QSize(900, 180)}, std::pair{&r, QSize(900, 260)},
                                           std::pair{&r, QSize(1200, 420)}, std::pair{&close, QSize(900, 180)}}) {
            auto* chart = new RequestChart;
            QChartView view(chart);
            view.resize(size);
            view.show();
            QVERIFY(QTest::qWaitForWindowExposed(&view));
            chart->setRecord(record);
            QTest::qWait(50);
            if (!dir.isEmpty())
                view.grab().save(dir + QStringLiteral("/request_chart_%1_%2x%3.png")
                                           .arg(record->index).arg(size.width()).arg(size.height()));
            const QRectF plot = chart->plotArea();
            const QStringList texts = chart->labelTexts();
            const QList<QRectF> rects = chart->labelRects();
            QCOMPARE(rects.size(), texts.size());
            int ttftLabels = 0;
            for (int i = 0; i < rects.size(); ++i) {
                if (texts[i].startsWith(QStringLiteral("TTFT"))) ++ttftLabels;
                QVERIFY2(rects[i].top() >= plot.top() - 0.5 && rects[i].bottom() <= plot.bottom() + 0.5,
                         qPrintable(QStringLiteral("%1x%2: label \"%3\" at y %4..%5 leaves the plot (y %6..%7)")
                                        .arg(size.width()).arg(size.height()).arg(texts[i])
                                        .arg(rects[i].top()).arg(rects[i].bottom()).arg(plot.top()).arg(plot.bottom())));
            }
            QCOMPARE(ttftLabels, 2);
            for (int i = 0; i < rects.size(); ++i)
                for (int j = i + 1; j < rects.size(); ++j)
                    QVERIFY2(!rects[i].intersects(rects[j]),
                             qPrintable(QStringLiteral("labels \"%1\" and \"%2\" overlap").arg(texts[i], texts[j])));
        }
    }

    // A segment's value is written inside it only where the text fits between its ends: a short
    // segment on a narrow chart drops its label (white text would run out over the background),
    // the same segment on a wide chart shows it.
    void requestChartSegmentLabelsFitTheirSegments() {
        RequestRecord r;
        r.index = 5;
        r.mode = QStringLiteral("compare");
        r.tier = cc::Tier::memory;
        r.timings.prefill_ms = 30;
        r.timings.ttft_ms = 30;
        r.timings.decode_ms = 25;  // 8% of the axis (to 300 ms): above the 7% rule, narrow in pixels
        cc::Timings full;
        full.prefill_ms = 200;
        full.ttft_ms = 200;
        full.decode_ms = 30;
        r.fullTimings = full;
        const QString decode = formatMs(25.0);
        for (const auto& [width, shown] : {std::pair{500, false}, std::pair{2400, true}}) {
            auto* chart = new RequestChart;
            QChartView view(chart);
            view.resize(width, 260);
            view.show();
            QVERIFY(QTest::qWaitForWindowExposed(&view));
            chart->setRecord(&r);
            QTest::qWait(50);
            const QStringList texts = chart->labelTexts();
            QVERIFY2(texts.contains(decode) == shown,
                     qPrintable(QStringLiteral("%1 px: %2").arg(width).arg(texts.join(QStringLiteral(" | ")))));
            QVERIFY2(texts.contains(formatMs(200.0)), qPrintable(texts.join(QStringLiteral(" | "))));  // a long one
            const QList<QRectF> rects = chart->labelRects();
            QCOMPARE(rects.size(), texts.size());
            for (int i = 0; i < rects.size(); ++i)
                for (int j = i + 1; j < rects.size(); ++j)
                    QVERIFY2(!rects[i].intersects(rects[j]),
                             qPrintable(QStringLiteral("labels \"%1\" and \"%2\" overlap").arg(texts[i], texts[j])));
        }
    }

    void historyAndBarEqualTheEngineTimings() {
        Rig rig;
        TimingsPanel panel(&rig.controller);
        QVERIFY(rig.load());
        const auto compiled = rig.compile();
        QVERIFY(compiled);
        const auto cached = rig.query(cc::QueryMode::cached);
        QVERIFY(cached);
        QCOMPARE(panel.history().size(), size_t(1));
        const RequestRecord& r = panel.history().back();
        COMPARE_TIMINGS(r.timings, cached->result.timings);
        QCOMPARE(r.requestId, cached->requestId);
        QCOMPARE(r.mode, QStringLiteral("cached"));
        QCOMPARE(r.tier, cached->result.tier);
        QCOMPARE(r.prefixTokens, cached->result.prefix_tokens);
        QCOMPARE(r.suffixTokens, cached->result.suffix_tokens);
        QCOMPARE(r.nTools, 5);
        QVERIFY(!r.fullTimings);
        QVERIFY(r.cacheHit);  // compiled just before: a memory hit

        // the chart: one bar, its segments and the TTFT marker from the same numbers
        QCOMPARE(panel.requestChart()->categories().size(), 1);
        QString why;
        QVERIFY2(barMatches(panel.requestChart(), 0, cached->result.timings, &why), qPrintable(why));
        // segments up to the marker add up to TTFT
        const auto seg = segmentValues(cached->result.timings);
        double beforeDecode = 0;
        for (int s = 0; s < SegDecode; ++s) beforeDecode += seg[size_t(s)];
        QVERIFY(std::abs(beforeDecode - cached->result.timings.ttft_ms) < 1e-9);

        // counters: one lookup, one hit, no full run of that prefix yet so nothing counted as saved
        QCOMPARE(panel.counters().queries, 1);
        QCOMPARE(panel.counters().hits, 1);
        QCOMPARE(panel.counters().hitsCounted, 0);
        EXACT(panel.counters().savedMs, 0.0);
    }

    // A remote hit (fetched from the shared Redis tier) shows its remote load as a segment of its
    // own, with the rate, like a disk load; nothing of it is counted as "other". A made-up
    // outcome: the engine's side is tests/store/test_remote_tier.cpp.
    void aRemoteHitShowsItsRemoteLoadSegmentWithItsRate() {
        Rig rig;
        TimingsPanel panel(&rig.controller);
        QueryOutcome outcome;
        outcome.requestId = 7;
        outcome.query = "What's the weather like in Lisbon?";
        outcome.nTools = 20;
        cc::QueryResult& r = outcome.result;
        r.mode = "cached";
        r.tier = cc::Tier::remote;
        r.cache_hit = true;
        r.prefix_tokens = 2902;
        r.suffix_tokens = 12;
        r.generated_tokens = 3;
        cc::Timings& t = r.timings;
        t.lookup_ms = 0.25;
        t.remote_load_ms = 40.0;
        t.remote_load_gb_s = 1.19;
        t.upload_ms = 0.5;
        t.link_ms = t.lookup_ms + t.remote_load_ms + t.upload_ms;
        t.prefill_ms = 30.0;
        t.ttft_ms = 75.0;
        t.decode_ms = 20.0;
        t.total_ms = 95.0;
        emit rig.controller.queryFinished(outcome);
        QTRY_COMPARE_WITH_TIMEOUT(int(panel.history().size()), 1, 5000);

        RequestChart* chart = panel.requestChart();
        QString why;
        QVERIFY2(barMatches(chart, 0, t, &why), qPrintable(why));
        EXACT(chart->segmentSet(SegRemoteLoad)->at(0), 40.0);
        EXACT(chart->segmentSet(SegDiskLoad)->at(0), 0.0);
        EXACT(chart->segmentSet(SegOther)->at(0), 75.0 - (0.25 + 40.0 + 0.5 + 30.0));
        QCOMPARE(chart->segmentSet(SegRemoteLoad)->label(), QStringLiteral("remote load"));
        const QString label = formatMs(40.0) + QStringLiteral(" · 1.19 GB/s");
        QCOMPARE(segmentLabel(SegRemoteLoad, t), label);
        QVERIFY2(chart->labelTexts().contains(label), qPrintable(chart->labelTexts().join(QStringLiteral(" | "))));

        // the table's tooltip and the CSV carry it too
        auto* table = panel.findChild<QTableView*>(QStringLiteral("historyTable"));
        QVERIFY(table);
        const QString tip = table->model()->index(0, 0).data(Qt::ToolTipRole).toString();
        QVERIFY2(tip.contains(QStringLiteral("remote load 40")), qPrintable(tip));
        QVERIFY(TimingsData::requestsCsvHeader().contains(QStringLiteral("remote_load_ms")));
        QVERIFY(TimingsData::requestsCsvHeader().contains(QStringLiteral("remote_load_gb_s")));
        const QString csv = QDir(rig.dir.path()).filePath(QStringLiteral("remote.csv"));
        QString error;
        QVERIFY2(panel.exportCsv(csv, &error), qPrintable(error));
        QFile file(csv);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QStringList lines = QString::fromUtf8(file.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 2);
        const QStringList header = lines[0].split(QLatin1Char(','));
        const QStringList row = lines[1].split(QLatin1Char(','));
        QCOMPARE(row.size(), header.size());
        QCOMPARE(row[header.indexOf(QStringLiteral("tier"))], QStringLiteral("remote"));
        QCOMPARE(row[header.indexOf(QStringLiteral("remote_load_ms"))].toDouble(), 40.0);
        QCOMPARE(row[header.indexOf(QStringLiteral("remote_load_gb_s"))].toDouble(), 1.19);
    }

    void compareModeShowsBothBars() {
        Rig rig;
        TimingsPanel panel(&rig.controller);
        QVERIFY(rig.load());
        QVERIFY(rig.compile());
        const auto outcome = rig.query(cc::QueryMode::compare);
        QVERIFY(outcome);
        QVERIFY(outcome->result.full);
        const RequestRecord& r = panel.history().back();
        QCOMPARE(r.mode, QStringLiteral("compare"));
        QVERIFY(r.fullTimings);
        COMPARE_TIMINGS(r.timings, outcome->result.timings);
        COMPARE_TIMINGS(*r.fullTimings, outcome->result.full->timings);
        QCOMPARE(r.identical, outcome->result.identical);

        RequestChart* chart = panel.requestChart();
        QCOMPARE(chart->categories().size(), 2);
        QCOMPARE(chart->segmentSet(SegPrefill)->count(), 2);
        QString why;
        QVERIFY2(barMatches(chart, 0, outcome->result.full->timings, &why), qPrintable(why));  // bottom: full
        QVERIFY2(barMatches(chart, 1, outcome->result.timings, &why), qPrintable(why));        // top: cached
        QVERIFY(chart->ttftMarker(1)->isVisible());
        // the TTFT labels carry both values
        const QStringList labels = chart->labelTexts();
        QVERIFY(labels.contains(QStringLiteral("TTFT ") + formatMs(outcome->result.timings.ttft_ms)));
        QVERIFY(labels.contains(QStringLiteral("TTFT ") + formatMs(outcome->result.full->timings.ttft_ms)));

        // the cached run of a compare query is a hit with a measured full run of the same prefix
        QCOMPARE(panel.counters().hitsCounted, 1);
        EXACT(panel.counters().savedMs, outcome->result.full->timings.ttft_ms - outcome->result.timings.ttft_ms);

        // a later cached query goes back to one bar
        QVERIFY(rig.query(cc::QueryMode::cached));
        QCOMPARE(chart->categories().size(), 1);
        QCOMPARE(chart->segmentSet(SegPrefill)->count(), 1);
        QVERIFY(!chart->ttftMarker(1)->isVisible());
    }

    void sweepPlotsBothModes() {
        Rig rig;
        TimingsPanel panel(&rig.controller);
        QVERIFY(rig.load());
        QSignalSpy finished(&rig.controller, &EngineController::sweepFinished);
        panel.startSweep({QStringLiteral("tools_5.json"), QStringLiteral("tools_10.json")}, 1, 2);
        QVERIFY(finished.wait(cc::ui::test::kTimeoutMs) || !finished.isEmpty());
        const auto points = finished.first().first().value<QList<SweepPoint>>();
        QCOMPARE(points.size(), 2);
        QCOMPARE(panel.sweepPoints().size(), size_t(2));
        QList<QPointF> cached, full;
        for (int i = 0; i < 2; ++i) {
            const SweepPoint& p = panel.sweepPoints()[size_t(i)];
            QCOMPARE(p.nTools, points[i].nTools);
            EXACT(p.cachedTtftMs, points[i].cachedTtftMs);
            EXACT(p.fullTtftMs, points[i].fullTtftMs);
            QVERIFY(p.cachedTtftMs > 0);
            QVERIFY(p.fullTtftMs > 0);
            cached << QPointF(double(p.nTools), p.cachedTtftMs);
            full << QPointF(double(p.nTools), p.fullTtftMs);
        }
        QCOMPARE(points[0].nTools, size_t(5));
        QCOMPARE(points[1].nTools, size_t(10));
        QCOMPARE(panel.sweepChart()->cachedSeries()->points(), cached);
        QCOMPARE(panel.sweepChart()->fullSeries()->points(), full);
        // a speed-up label per point
        const QString speedup = QString::number(points[1].fullTtftMs / points[1].cachedTtftMs, 'f',
                                                points[1].fullTtftMs / points[1].cachedTtftMs < 10 ? 1 : 0) +
                                QStringLiteral("×");
        bool found = false;
        for (const QString& l : panel.sweepChart()->labelTexts()) found = found || l.endsWith(speedup);
        QVERIFY2(found, qPrintable(panel.sweepChart()->labelTexts().join(QStringLiteral(" | "))));
        // the sweep CSV: a header and a row per point, the TTFTs exact
        QTemporaryDir out;
        QString error;
        QVERIFY2(panel.exportSweepCsv(out.filePath(QStringLiteral("sweep.csv")), &error), qPrintable(error));
        QFile csv(out.filePath(QStringLiteral("sweep.csv")));
        QVERIFY(csv.open(QIODevice::ReadOnly | QIODevice::Text));
        const QStringList lines = QString::fromUtf8(csv.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 3);
        QVERIFY(lines[0].startsWith(QStringLiteral("set,tools,prefix_tokens,compile_ms,cached_ttft_ms,full_ttft_ms")));
        QCOMPARE(lines[2].split(QLatin1Char(','))[0], QStringLiteral("tools_10"));
        EXACT(lines[2].split(QLatin1Char(','))[4].toDouble(), points[1].cachedTtftMs);
        EXACT(lines[2].split(QLatin1Char(','))[5].toDouble(), points[1].fullTtftMs);
        // log y keeps the data
        panel.sweepChart()->setLogY(true);
        QCOMPARE(panel.sweepChart()->cachedSeries()->points(), cached);
        QVERIFY(rig.idle());
    }

    // The sweep's point labels keep off the lines: where the full prefill's line climbs steeply
    // out of a point (20 -> 50 tools here), the label over that point moves to a side the line
    // leaves clear, instead of the line running through its text.
    void sweepLabelsKeepOffTheLines() {
        auto* chart = new SweepChart;
        QChartView view(chart);
        view.resize(1600, 900);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        std::vector<SweepPoint> points;
        for (const auto& [n, full, cached] : {std::tuple{5, 22.9, 2.08}, std::tuple{10, 71.8, 2.68},
                                              std::tuple{20, 118.2, 3.88}, std::tuple{50, 1025.1, 9.07}}) {
            SweepPoint p;
            p.nTools = size_t(n);
            p.fullTtftMs = full;
            p.cachedTtftMs = cached;
            points.push_back(p);
        }
        chart->setPoints(points);
        QTest::qWait(50);
        const QStringList texts = chart->labelTexts();
        const QList<QRectF> rects = chart->labelRects();
        QCOMPARE(texts.size(), 8);
        QCOMPARE(rects.size(), texts.size());
        auto crossing = [&](const QRectF& box) -> QString {
            const QRectF r = box.adjusted(1, 1, -1, -1);
            for (QXYSeries* line :
                 {static_cast<QXYSeries*>(chart->fullSeries()), static_cast<QXYSeries*>(chart->cachedSeries())}) {
                const QList<QPointF> pts = line->points();
                for (qsizetype i = 0; i + 1 < pts.size(); ++i) {
                    const QLineF seg(chart->mapToScene(chart->mapToPosition(pts[i], line)),
                                     chart->mapToScene(chart->mapToPosition(pts[i + 1], line)));
                    const QLineF edges[] = {{r.topLeft(), r.topRight()},
                                            {r.topRight(), r.bottomRight()},
                                            {r.bottomRight(), r.bottomLeft()},
                                            {r.bottomLeft(), r.topLeft()}};
                    bool hit = r.contains(seg.p1()) || r.contains(seg.p2());
                    for (const QLineF& e : edges)
                        hit = hit || seg.intersects(e, nullptr) == QLineF::BoundedIntersection;
                    if (hit) return line->name() + QStringLiteral(" segment %1").arg(i);
                }
            }
            return {};
        };
        int full = 0;
        for (int i = 0; i < texts.size(); ++i) {
            if (!texts[i].endsWith(QStringLiteral("×"))) continue;  // the full prefill's labels: TTFT · speed-up
            ++full;
            const QString hit = crossing(rects[i]);
            QVERIFY2(hit.isEmpty(), qPrintable(QStringLiteral("label \"%1\" is crossed by the %2").arg(texts[i], hit)));
        }
        QCOMPARE(full, 4);
        for (int i = 0; i < rects.size(); ++i)
            for (int j = i + 1; j < rects.size(); ++j)
                QVERIFY2(!rects[i].adjusted(2, 2, -2, -2).intersects(rects[j].adjusted(2, 2, -2, -2)),
                         qPrintable(QStringLiteral("labels \"%1\" and \"%2\" overlap").arg(texts[i], texts[j])));
    }

    void sweepCancelKeepsFinishedPoints() {
        Rig rig;
        TimingsPanel panel(&rig.controller);
        QVERIFY(rig.load());
        QSignalSpy point(&rig.controller, &EngineController::sweepPoint);
        QSignalSpy cancelled(&rig.controller, &EngineController::cancelled);
        panel.startSweep(
            {QStringLiteral("tools_5.json"), QStringLiteral("tools_50.json"), QStringLiteral("tools_100.json")}, 3, 4);
        QVERIFY(point.wait(cc::ui::test::kTimeoutMs) || !point.isEmpty());
        auto* cancel = panel.findChild<QPushButton*>(QStringLiteral("cancelSweepButton"));
        QVERIFY(cancel);
        QVERIFY(cancel->isEnabled());
        cancel->click();
        QTRY_VERIFY_WITH_TIMEOUT(!cancelled.isEmpty(), cc::ui::test::kTimeoutMs);
        QCOMPARE(cancelled.first().first().toString(), QStringLiteral("sweep"));
        QVERIFY(rig.idle());
        QVERIFY(panel.sweepPoints().size() >= 1 && panel.sweepPoints().size() < 3);
        QCOMPARE(panel.sweepChart()->cachedSeries()->count(), int(panel.sweepPoints().size()));
        QTRY_VERIFY(!cancel->isEnabled());
    }

    void breakEvenIsCeilOfCompileOverSaving() {
        Rig rig;
        TimingsPanel panel(&rig.controller);
        QVERIFY(rig.load());
        QVERIFY(!panel.amortisation().valid);
        const auto compiled = rig.compile();
        QVERIFY(compiled);
        QVERIFY(!compiled->cache_hit);  // a fresh cache directory: the compile was measured
        QVERIFY(compiled->compile_ms > 0);
        const auto outcome = rig.query(cc::QueryMode::compare);
        QVERIFY(outcome);
        const double saving = outcome->result.full->timings.ttft_ms - outcome->result.timings.ttft_ms;
        const int expected = saving > 0 ? int(std::ceil(compiled->compile_ms / saving)) : 0;
        const Amortisation a = panel.amortisation();
        QVERIFY(a.valid);
        QVERIFY(a.compileMeasured);
        EXACT(a.compileMs, compiled->compile_ms);
        EXACT(a.savingMs, saving);
        QCOMPARE(a.breakEven, expected);
        QVERIFY(a.source.contains(QStringLiteral("compare")));
        if (expected > 0) {
            const auto marked = panel.amortisationChart()->breakEvenSeries()->points();
            QCOMPARE(marked.size(), 1);
            QCOMPARE(marked[0].x(), double(expected));
            EXACT(marked[0].y(), expected * saving - compiled->compile_ms);
            QVERIFY(marked[0].y() >= 0);
            QVERIFY((expected - 1) * saving - compiled->compile_ms < 0);  // the request before has not paid off
        }
        const auto curve = panel.amortisationChart()->savedSeries()->points();
        QVERIFY(!curve.isEmpty());
        QCOMPARE(curve.first(), QPointF(0, -compiled->compile_ms));
    }

    void csvHasHeaderAndOneRowPerRequest() {
        Rig rig;
        TimingsPanel panel(&rig.controller);
        QVERIFY(rig.load());
        QVERIFY(rig.compile());
        const auto a = rig.query(cc::QueryMode::cached);
        const auto b = rig.query(cc::QueryMode::compare, 2, QStringLiteral("Convert 250 US dollars, to \"euros\"."));
        QVERIFY(a && b);
        QTemporaryDir out;
        const QString path = out.filePath(QStringLiteral("requests.csv"));
        QString error;
        QVERIFY2(panel.exportCsv(path, &error), qPrintable(error));
        QFile file(path);
        QVERIFY(file.open(QIODevice::ReadOnly | QIODevice::Text));
        const QStringList lines = QString::fromUtf8(file.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 3);
        QCOMPARE(lines[0], TimingsData::requestsCsvHeader().join(QLatin1Char(',')));
        const int ttftColumn = int(TimingsData::requestsCsvHeader().indexOf(QStringLiteral("ttft_ms")));
        const QStringList row1 = lines[1].split(QLatin1Char(','));
        QCOMPARE(row1.size(), TimingsData::requestsCsvHeader().size());
        EXACT(row1[ttftColumn].toDouble(), a->result.timings.ttft_ms);  // exact round trip
        QVERIFY(lines[2].contains(QStringLiteral("\"Convert 250 US dollars, to \"\"euros\"\".\"")));
        const int fullTotalColumn = int(TimingsData::requestsCsvHeader().indexOf(QStringLiteral("full_total_ms")));
        const QStringList row2 = lines[2].split(QLatin1Char(','));
        QCOMPARE(row2.size(), TimingsData::requestsCsvHeader().size() + 1);   // the query holds a quoted comma
        QCOMPARE(row2[fullTotalColumn + 1], QString::number(b->result.full->timings.total_ms, 'g', QLocale::FloatingPointShortest));
        const int divergedColumn = int(TimingsData::requestsCsvHeader().indexOf(QStringLiteral("diverged_at")));
        QCOMPARE(row1[divergedColumn], QString());   // diverged_at: a single query has none
        const int remoteColumn = int(TimingsData::requestsCsvHeader().indexOf(QStringLiteral("remote_load_ms")));
        QCOMPARE(row1[remoteColumn], QStringLiteral("0"));   // a memory hit: nothing fetched from a remote tier
        QVERIFY(!panel.exportCsv(out.filePath(QStringLiteral("no/such/dir/x.csv")), &error));
        QVERIFY(!error.isEmpty());
    }

    void pngHasTheExportSize_data() {
        QTest::addColumn<QString>("which");
        QTest::newRow("request") << QStringLiteral("request");
        QTest::newRow("sweep") << QStringLiteral("sweep");
        QTest::newRow("amortisation") << QStringLiteral("amortisation");
    }
    void pngHasTheExportSize() {
        QFETCH(QString, which);
        Rig rig;
        TimingsPanel panel(&rig.controller);
        panel.resize(900, 600);
        QVERIFY(rig.load());
        QVERIFY(rig.compile());
        QVERIFY(rig.query(cc::QueryMode::compare));
        QTemporaryDir out;
        const QString path = out.filePath(which + QStringLiteral(".png"));
        QString error;
        QVERIFY2(panel.exportPng(which, path, &error), qPrintable(error));
        QImage image(path);
        QVERIFY(!image.isNull());
        QCOMPARE(image.size(), TimingsPanel::exportSize());
        std::set<QRgb> colours;
        for (int y = 0; y < image.height(); y += 7)
            for (int x = 0; x < image.width(); x += 7) colours.insert(image.pixel(x, y));
        QVERIFY2(colours.size() > 20, "the image is (nearly) blank");
        QVERIFY(!panel.exportPng(QStringLiteral("pie"), path, &error));
    }

    // Not a check: with CC_UI_SHOTS=<dir> set, saves the panel at a projector-ish size with real data.
    void screenshots() {
        const QString dir = qEnvironmentVariable("CC_UI_SHOTS");
        if (dir.isEmpty()) QSKIP("set CC_UI_SHOTS=<dir> to save screenshots");
        Rig rig;
        TimingsPanel panel(&rig.controller);
        panel.resize(1280, 800);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        QVERIFY(rig.load());
        QVERIFY(rig.compile());
        QVERIFY(rig.query(cc::QueryMode::cached, 8));
        QVERIFY(rig.query(cc::QueryMode::full, 8));
        QVERIFY(rig.query(cc::QueryMode::compare, 8));
        QSignalSpy finished(&rig.controller, &EngineController::sweepFinished);
        panel.startSweep({QStringLiteral("tools_5.json"), QStringLiteral("tools_10.json"),
                          QStringLiteral("tools_20.json"), QStringLiteral("tools_50.json")},
                         1, 2);
        QVERIFY(finished.wait(cc::ui::test::kTimeoutMs) || !finished.isEmpty());
        QVERIFY(rig.idle());
        auto* tabs = panel.findChild<QTabWidget*>();
        for (int i = 0; i < tabs->count(); ++i) {
            tabs->setCurrentIndex(i);
            QTest::qWait(100);
            panel.grab().save(dir + QStringLiteral("/timings_%1.png").arg(i));
        }
        QString error;
        for (const char* which : {"request", "sweep", "amortisation"})
            QVERIFY(panel.exportPng(QString::fromLatin1(which),
                                    dir + QStringLiteral("/export_%1.png").arg(QLatin1String(which)), &error));
        QPalette dark;
        dark.setColor(QPalette::Window, QColor(0x20, 0x20, 0x24));
        dark.setColor(QPalette::WindowText, Qt::white);
        dark.setColor(QPalette::Base, QColor(0x2a, 0x2a, 0x2e));
        dark.setColor(QPalette::Text, Qt::white);
        panel.setPalette(dark);
        for (int i = 0; i < tabs->count(); ++i) {
            tabs->setCurrentIndex(i);
            QTest::qWait(100);
            panel.grab().save(dir + QStringLiteral("/timings_dark_%1.png").arg(i));
        }
        panel.sweepChart()->setLogY(true);
        tabs->setCurrentIndex(1);
        QTest::qWait(100);
        panel.grab().save(dir + QStringLiteral("/timings_dark_logy.png"));
    }

    void followsTheApplicationPalette() {
        Rig rig;
        TimingsPanel panel(&rig.controller);
        QCOMPARE(panel.requestChart()->theme(), QChart::ChartThemeLight);
        QPalette dark;
        dark.setColor(QPalette::Window, QColor(0x20, 0x20, 0x24));
        dark.setColor(QPalette::WindowText, Qt::white);
        panel.setPalette(dark);
        QTRY_COMPARE(panel.requestChart()->theme(), QChart::ChartThemeDark);
        QCOMPARE(panel.sweepChart()->theme(), QChart::ChartThemeDark);
        QVERIFY(panel.requestChart()->axes().first()->labelsFont().pointSizeF() >= 11);
    }
};

QTEST_MAIN(TestTimingsPanel)
#include "test_timings_panel.moc"
