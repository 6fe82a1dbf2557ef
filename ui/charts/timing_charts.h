// The Timings panel's three charts. Each is a QChart filled from the plain data in timing_data.h
// by setData(); the panel shows one instance in a QChartView and builds a second, off screen, to
// export a PNG at a fixed resolution. Projector-legible: 12 pt axis labels, value labels on the
// bars and points, a colour-blind-safe palette (Okabe-Ito) that reads on the light and dark themes.
#pragma once

#include "ui/charts/timing_data.h"

#include <QChart>
#include <QColor>
#include <QPalette>

#include <vector>

class QAbstractSeries;
class QBarCategoryAxis;
class QBarSet;
class QGraphicsSimpleTextItem;
class QHorizontalStackedBarSeries;
class QLineSeries;
class QScatterSeries;
class QXYSeries;
class QValueAxis;
class QLogValueAxis;

namespace cc::ui {

bool paletteIsDark(const QPalette& palette);
QColor segmentColor(int segment);

// Text items pinned to data points: repositioned whenever the plot area moves.
class ChartLabels {
public:
    explicit ChartLabels(QChart* chart) : m_chart(chart) {}
    enum Place { Center, Above, Right, Below, AboveLeft, AboveRight };
    void clear();
    void add(QPointF value, QAbstractSeries* series, const QString& text, const QColor& color, Place place,
             bool bold = false);
    // A Center label inside a bar segment `span` wide (in the value axis's units) around `value`:
    // drawn only where its text fits the segment's pixels (a short segment's value is in the table).
    void addInside(QPointF value, double span, QAbstractSeries* series, const QString& text, const QColor& color);
    // Lines the point labels keep off: a label whose place would put a segment of one of them
    // through its text goes to the first of its other places (above left, above right, above,
    // right, below) that is clear, or stays where it was asked to be when none is.
    void avoidLines(std::vector<QXYSeries*> lines) { m_avoid = std::move(lines); }
    void reposition();
    QStringList texts() const;         // the labels drawn (or to be drawn once the chart has a plot area)
    QList<QRectF> sceneRects() const;  // where each of them is drawn, in the chart's scene

private:
    struct Label {
        QPointF value;
        QAbstractSeries* series;
        QGraphicsSimpleTextItem* item;
        Place place;
        double span = 0;       // addInside's segment width; 0: none
        bool dropped = false;  // its text does not fit its segment: not drawn
    };
    // Where `l` is drawn at `place`: beside its point, inside the plot, off the labels before it.
    QPointF placed(const Label& l, Place place, const QRectF& plot) const;
    bool crossesALine(const QRectF& r) const;

    QChart* m_chart;
    std::vector<Label> m_labels;
    std::vector<QXYSeries*> m_avoid;
};

class TimingChart : public QChart {
    Q_OBJECT
public:
    explicit TimingChart(QGraphicsItem* parent = nullptr);
    // ChartThemeLight or ChartThemeDark, then our fonts and colours again (a theme resets them).
    void applyPalette(const QPalette& palette);
    QStringList labelTexts() const { return m_labels.texts(); }
    QList<QRectF> labelRects() const { return m_labels.sceneRects(); }
    // A smaller line of text inside the plot's top-left corner (where the numbers come from).
    void setSubtitle(const QString& text);
    QString subtitle() const;

protected:
    virtual void restyle() = 0;
    void styleAxis(QAbstractAxis* axis);
    QColor textColor() const;
    ChartLabels m_labels{this};
    QGraphicsSimpleTextItem* m_subtitle = nullptr;
    bool m_dark = false;
};

// One request: a horizontal stacked bar per run (two in compare mode: full prefill and cached),
// TTFT marked on each bar by a vertical line with its value.
class RequestChart : public TimingChart {
    Q_OBJECT
public:
    explicit RequestChart(QGraphicsItem* parent = nullptr);
    void setRecord(const RequestRecord* record);  // nullptr: empty

    QHorizontalStackedBarSeries* barSeries() const { return m_bars; }
    QBarSet* segmentSet(int segment) const { return m_sets[size_t(segment)]; }
    QLineSeries* ttftMarker(int bar) const { return m_markers[size_t(bar)]; }
    QStringList categories() const;

protected:
    void restyle() override;
    // Below kCompactHeight the legend and the axis title give their room to the bars (a
    // 1280x800 window): the segment colours are named in the tooltip and the history table.
    void resizeEvent(QGraphicsSceneResizeEvent* event) override;

private:
    void relabel();
    void applyCompact();
    bool m_compact = false;
    QHorizontalStackedBarSeries* m_bars;
    std::vector<QBarSet*> m_sets;
    std::vector<QLineSeries*> m_markers;  // one per bar, at most two bars
    QBarCategoryAxis* m_categoryAxis;
    QValueAxis* m_msAxis;
    std::vector<cc::Timings> m_shown;  // the bars, bottom to top
};

// TTFT vs number of tools, full prefill and cached, with the speed-up at each point.
class SweepChart : public TimingChart {
    Q_OBJECT
public:
    explicit SweepChart(QGraphicsItem* parent = nullptr);
    void setPoints(const std::vector<SweepPoint>& points);
    void setLogY(bool logY);
    bool logY() const { return m_logY; }

    QLineSeries* cachedSeries() const { return m_cached; }
    QLineSeries* fullSeries() const { return m_full; }

protected:
    void restyle() override;

private:
    void rescale();
    void relabel();
    QLineSeries* m_cached;
    QLineSeries* m_full;
    QScatterSeries* m_cachedDots;
    QScatterSeries* m_fullDots;
    QLogValueAxis* m_toolsAxis;
    QValueAxis* m_linearY;
    QLogValueAxis* m_logAxis;
    bool m_logY = false;
    std::vector<SweepPoint> m_points;
};

// Cumulative time saved after n requests = n x (full TTFT - cached TTFT) - compile, break-even marked.
class AmortisationChart : public TimingChart {
    Q_OBJECT
public:
    explicit AmortisationChart(QGraphicsItem* parent = nullptr);
    void setAmortisation(const Amortisation& a);

    QLineSeries* savedSeries() const { return m_saved; }
    QScatterSeries* breakEvenSeries() const { return m_breakEven; }
    int requestsShown() const { return m_n; }

protected:
    void restyle() override;

private:
    void relabel();
    QLineSeries* m_saved;
    QLineSeries* m_zero;
    QScatterSeries* m_breakEven;
    QValueAxis* m_requestsAxis;
    QValueAxis* m_savedAxis;
    Amortisation m_a;
    int m_n = 0;
};

// Lays `chart` out at `size` off screen (a QChartView of its own, which takes ownership of it) in
// `palette`'s light or dark theme and writes it as a PNG: the image does not depend on any window's
// size, and the text is as large relative to the image as on screen. False with `error` set when
// the file cannot be written.
bool renderChartPng(TimingChart* chart, const QPalette& palette, QSize size, const QString& path, QString* error);

}  // namespace cc::ui
