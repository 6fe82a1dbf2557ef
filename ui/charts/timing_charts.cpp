#include "ui/charts/timing_charts.h"

#include <QBarCategoryAxis>
#include <QChartView>
#include <QGraphicsLayout>
#include <QImage>
#include <QPainter>
#include <QGraphicsSceneResizeEvent>
#include <QBarSet>
#include <QFont>
#include <QGraphicsSimpleTextItem>
#include <QHorizontalStackedBarSeries>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPen>
#include <QScatterSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

namespace cc::ui {

namespace {

constexpr double kAxisPt = 12;   // axis labels and titles
constexpr double kLabelPt = 12;  // value labels on bars and points
constexpr double kTitlePt = 15;
constexpr double kLegendPt = 12;

QFont pointFont(double pt, bool bold = false) {
    QFont f;
    f.setPointSizeF(pt);
    f.setBold(bold);
    return f;
}

// Readable text on a filled segment.
QColor onColor(const QColor& fill) {
    return fill.lightnessF() > 0.55 ? QColor(Qt::black) : QColor(Qt::white);
}

QColor cachedColor(bool dark) {
    return dark ? QColor(0x56, 0xB4, 0xE9) : QColor(0x00, 0x72, 0xB2);
}
QColor fullColor(bool dark) {
    return dark ? QColor(0xF0, 0x8C, 0x3C) : QColor(0xD5, 0x5E, 0x00);
}
QColor savedColor(bool dark) {
    return dark ? QColor(0x3C, 0xC8, 0x96) : QColor(0x00, 0x9E, 0x73);
}

// Round steps (1, 2, 5 x 10^k) and a label format with just enough decimals: "500", "2.5", "0.05".
void niceAxis(QValueAxis* axis, double lo, double hi, int targetTicks, bool integer) {
    if (!(hi > lo)) hi = lo + 1;
    double step = (hi - lo) / std::max(1, targetTicks);
    const double mag = std::pow(10.0, std::floor(std::log10(step)));
    const double f = step / mag;
    step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
    if (integer) step = std::max(1.0, std::round(step));
    // Fixed ticks while the range and interval change: with dynamic ticks, a new range under the
    // old interval (e.g. 0..3,000 ms under a 0.1 ms step) makes Qt Charts build tens of thousands
    // of tick items on the GUI thread before the new interval arrives.
    axis->setTickType(QValueAxis::TicksFixed);
    axis->setRange(std::floor(lo / step) * step, std::ceil(hi / step) * step);
    axis->setTickAnchor(0);
    axis->setTickInterval(step);
    axis->setTickType(QValueAxis::TicksDynamic);
    const int decimals = integer ? 0 : std::max(0, int(-std::floor(std::log10(step) + 1e-9)));
    axis->setLabelFormat(QStringLiteral("%.%1f").arg(decimals));
}

}  // namespace

bool paletteIsDark(const QPalette& palette) {
    return palette.color(QPalette::Window).lightness() < 128;
}

QColor segmentColor(int segment) {
    // Okabe-Ito: distinguishable with the common colour-vision deficiencies, on white and on dark grey.
    // Remote load, a ninth, is Paul Tol's wine: apart from all eight, readable with either text colour.
    static const QColor colors[SegCount] = {
        QColor(0xE6, 0x9F, 0x00), QColor(0x56, 0xB4, 0xE9), QColor(0x88, 0x22, 0x55), QColor(0x00, 0x9E, 0x73),
        QColor(0xF0, 0xE4, 0x42), QColor(0xCC, 0x79, 0xA7), QColor(0x00, 0x72, 0xB2), QColor(0x99, 0x99, 0x99),
        QColor(0xD5, 0x5E, 0x00)};
    return colors[segment];
}

// ---- labels ----------------------------------------------------------------------------------

void ChartLabels::clear() {
    for (auto& l : m_labels) delete l.item;
    m_labels.clear();
}

void ChartLabels::add(QPointF value, QAbstractSeries* series, const QString& text, const QColor& color, Place place,
                      bool bold) {
    auto* item = new QGraphicsSimpleTextItem(text, m_chart);
    item->setFont(pointFont(kLabelPt, bold));
    item->setBrush(color);
    item->setZValue(100);
    m_labels.push_back(Label{value, series, item, place});
}

void ChartLabels::addInside(QPointF value, double span, QAbstractSeries* series, const QString& text,
                            const QColor& color) {
    add(value, series, text, color, Center);
    m_labels.back().span = span;
}

QPointF ChartLabels::placed(const Label& l, Place place, const QRectF& plot) const {
    const QPointF p = m_chart->mapToPosition(l.value, l.series);
    const QRectF r = l.item->boundingRect();
    QPointF at;
    switch (place) {
        case Center:
            at = p - QPointF(r.width() / 2, r.height() / 2);
            break;
        case Above:
            at = p - QPointF(r.width() / 2, r.height() + 6);
            break;
        case Below:
            at = p + QPointF(-r.width() / 2, 6);
            break;
        case Right:
            at = p + QPointF(8, -r.height() / 2);
            break;
        case AboveLeft:
            at = p - QPointF(r.width() + 8, r.height() + 2);
            break;
        case AboveRight:
            at = p + QPointF(8, -r.height() - 2);
            break;
    }
    // keep it inside the plot area: never over the title, the axis or the legend
    at.setX(std::clamp(at.x(), plot.left() + 2, std::max(plot.left() + 2, plot.right() - r.width() - 2)));
    at.setY(std::clamp(at.y(), plot.top() + 1, std::max(plot.top() + 1, plot.bottom() - r.height() - 1)));
    // and off the labels placed before it: beside one it would cover, on its point's side
    for (const auto& before : m_labels) {
        if (&before == &l) break;
        const QRectF other =
            before.item->isVisible() ? before.item->mapRectToParent(before.item->boundingRect()) : QRectF();
        // (text boxes carry a little padding: boxes that only touch, by a pixel or two, leave
        // both texts legible and stay where they are)
        if (!other.isValid() || !other.adjusted(2, 2, -2, -2).intersects(QRectF(at, r.size()).adjusted(2, 2, -2, -2)))
            continue;
        const bool left = p.x() < other.center().x() && other.left() - r.width() - 6 >= plot.left();
        at.setX(left ? other.left() - r.width() - 6 : other.right() + 6);
    }
    return at;
}

bool ChartLabels::crossesALine(const QRectF& box) const {
    const QRectF r = box.adjusted(1, 1, -1, -1);  // a line grazing the padding leaves the text legible
    const QLineF edges[] = {{r.topLeft(), r.topRight()},
                            {r.topRight(), r.bottomRight()},
                            {r.bottomRight(), r.bottomLeft()},
                            {r.bottomLeft(), r.topLeft()}};
    for (QXYSeries* line : m_avoid) {
        const QList<QPointF> points = line->points();
        for (qsizetype i = 0; i + 1 < points.size(); ++i) {
            const QLineF seg(m_chart->mapToPosition(points[i], line), m_chart->mapToPosition(points[i + 1], line));
            if (r.contains(seg.p1()) || r.contains(seg.p2())) return true;
            for (const QLineF& e : edges)
                if (seg.intersects(e, nullptr) == QLineF::BoundedIntersection) return true;
        }
    }
    return false;
}

void ChartLabels::reposition() {
    const QRectF plot = m_chart->plotArea();
    for (auto& l : m_labels) {
        const QRectF r = l.item->boundingRect();
        if (l.span > 0 && plot.isValid()) {
            const QPointF half(l.span / 2, 0);
            const double px = std::abs(m_chart->mapToPosition(l.value + half, l.series).x() -
                                       m_chart->mapToPosition(l.value - half, l.series).x());
            l.dropped = r.width() + 8 > px;  // 4 px of the segment's colour each side
        }
        QPointF at = placed(l, l.place, plot);
        if (l.place != Center && !m_avoid.empty() && crossesALine(QRectF(at, r.size()))) {
            for (const Place other : {AboveLeft, AboveRight, Above, Right, Below}) {
                if (other == l.place) continue;
                const QPointF alt = placed(l, other, plot);
                if (crossesALine(QRectF(alt, r.size()))) continue;
                at = alt;
                break;
            }
        }
        l.item->setPos(at);
        l.item->setVisible(plot.isValid() && !l.dropped);
    }
}

QList<QRectF> ChartLabels::sceneRects() const {
    QList<QRectF> out;
    for (const auto& l : m_labels)
        if (!l.dropped) out << l.item->sceneBoundingRect();
    return out;
}

QStringList ChartLabels::texts() const {
    QStringList out;
    for (const auto& l : m_labels)
        if (!l.dropped) out << l.item->text();
    return out;
}

// ---- base ------------------------------------------------------------------------------------

TimingChart::TimingChart(QGraphicsItem* parent) : QChart(parent) {
    setAnimationOptions(QChart::NoAnimation);  // live data: no animations (STYLE §8)
    legend()->setAlignment(Qt::AlignBottom);
    m_subtitle = new QGraphicsSimpleTextItem(this);
    m_subtitle->setFont(pointFont(kLabelPt - 1));
    m_subtitle->setZValue(100);
    connect(this, &QChart::plotAreaChanged, this, [this] {
        m_labels.reposition();
        m_subtitle->setPos(plotArea().topLeft() + QPointF(10, 8));
    });
}

void TimingChart::setSubtitle(const QString& text) {
    m_subtitle->setText(text);
    m_subtitle->setPos(plotArea().topLeft() + QPointF(10, 8));
}

QString TimingChart::subtitle() const {
    return m_subtitle->text();
}

void TimingChart::applyPalette(const QPalette& palette) {
    m_dark = paletteIsDark(palette);
    setTheme(m_dark ? QChart::ChartThemeDark : QChart::ChartThemeLight);
    setTitleFont(pointFont(kTitlePt, true));
    legend()->setFont(pointFont(kLegendPt));
    for (QAbstractAxis* axis : axes()) styleAxis(axis);
    m_subtitle->setBrush(textColor());
    restyle();
}

void TimingChart::styleAxis(QAbstractAxis* axis) {
    axis->setLabelsFont(pointFont(kAxisPt));
    axis->setTitleFont(pointFont(kAxisPt, true));
}

QColor TimingChart::textColor() const {
    return m_dark ? QColor(0xF0, 0xF0, 0xF0) : QColor(0x20, 0x20, 0x20);
}

// ---- request ---------------------------------------------------------------------------------

RequestChart::RequestChart(QGraphicsItem* parent) : TimingChart(parent) {
    m_bars = new QHorizontalStackedBarSeries(this);
    m_bars->setBarWidth(0.5);
    for (int s = 0; s < SegCount; ++s) {
        auto* set = new QBarSet(segmentNames()[s], m_bars);
        m_sets.push_back(set);
        m_bars->append(set);
    }
    addSeries(m_bars);
    m_categoryAxis = new QBarCategoryAxis(this);
    m_msAxis = new QValueAxis(this);
    m_msAxis->setTitleText(QStringLiteral("milliseconds since the request was submitted"));
    addAxis(m_categoryAxis, Qt::AlignLeft);
    addAxis(m_msAxis, Qt::AlignBottom);
    m_bars->attachAxis(m_categoryAxis);
    m_bars->attachAxis(m_msAxis);
    for (int i = 0; i < 2; ++i) {
        auto* marker = new QLineSeries(this);
        marker->setName(QStringLiteral("TTFT"));
        addSeries(marker);
        marker->attachAxis(m_msAxis);
        marker->attachAxis(m_categoryAxis);
        m_markers.push_back(marker);
    }
    legend()->markers(m_markers[1]).value(0)->setVisible(false);
    applyPalette(QPalette());
    setRecord(nullptr);
}

void RequestChart::resizeEvent(QGraphicsSceneResizeEvent* event) {
    TimingChart::resizeEvent(event);
    constexpr double kCompactHeight = 300;
    const bool compact = size().height() < kCompactHeight;
    if (compact == m_compact) return;
    m_compact = compact;
    applyCompact();
}

void RequestChart::applyCompact() {
    legend()->setVisible(!m_compact);
    m_msAxis->setTitleVisible(!m_compact);
    setTitleFont(pointFont(m_compact ? kAxisPt : kTitlePt, true));
    setMargins(m_compact ? QMargins(4, 0, 4, 0) : QMargins(20, 20, 20, 20));
}

QStringList RequestChart::categories() const {
    return m_categoryAxis->categories();
}

void RequestChart::setRecord(const RequestRecord* record) {
    m_shown.clear();
    QStringList categories;
    if (record && record->fullTimings) {
        m_shown = {*record->fullTimings, record->timings};
        const bool nope = record->mode == QLatin1String("per_tool_nope");
        categories = {QStringLiteral("full prefill"),
                      nope ? QStringLiteral("per-tool NoPE") : QStringLiteral("cached (%1)").arg(tierName(record->tier))};
    } else if (record) {
        m_shown = {record->timings};
        categories = {record->mode == QLatin1String("full") ? QStringLiteral("full prefill")
                                                            : QStringLiteral("cached (%1)").arg(tierName(record->tier))};
    }
    if (record && record->turn > 0)
        for (QString& c : categories) c = QStringLiteral("turn %1 · %2").arg(record->turn).arg(c);
    if (record && record->turn > 0)
        // A conversation turn: where its prompt came from, in tokens (the bars give the times).
        // (The mode and the tier are on the bars' labels: the title stays short enough for 1280x800.)
        setTitle(QStringLiteral("Turn %1 (#%2) · group %3 + conversation %4 + new %5 tokens%6")
                     .arg(record->turn)
                     .arg(record->index)
                     .arg(record->groupReusedTokens)
                     .arg(record->conversationReusedTokens)
                     .arg(record->prefilledTokens)
                     .arg(record->divergedAt ? QStringLiteral(" · diverged at %1").arg(*record->divergedAt) : QString()));
    else if (record)
        setTitle(QStringLiteral("Request #%1 · %2 · %3 tools · %4 + %5 tokens")
                     .arg(record->index)
                     .arg(record->mode)
                     .arg(record->nTools)
                     .arg(record->prefixTokens)
                     .arg(record->suffixTokens));
    else
        setTitle(QStringLiteral("No request yet: run a query (compare mode shows cached and full side by side)"));

    double maxEnd = 0;
    std::vector<std::array<double, SegCount>> values;
    for (const auto& t : m_shown) {
        values.push_back(segmentValues(t));
        double end = 0;
        for (double v : values.back()) end += v;
        maxEnd = std::max(maxEnd, end);
    }
    for (int s = 0; s < SegCount; ++s) {
        QBarSet* set = m_sets[size_t(s)];
        set->remove(0, set->count());
        QList<qreal> row;
        double sum = 0;
        for (const auto& v : values) {
            row << v[size_t(s)];
            sum += v[size_t(s)];
        }
        set->append(row);
        // a segment that is zero in every bar is left out of the legend
        if (auto* lm = legend()->markers(m_bars).value(s)) lm->setVisible(sum > 0 || s == SegPrefill);
    }
    m_categoryAxis->setCategories(categories.isEmpty() ? QStringList{QString()} : categories);
    niceAxis(m_msAxis, 0, maxEnd > 0 ? maxEnd * 1.15 : 1.0, 8, false);
    for (size_t i = 0; i < m_markers.size(); ++i) {
        if (i < m_shown.size()) {
            const double ttft = m_shown[i].ttft_ms;
            m_markers[i]->replace(QList<QPointF>{QPointF(ttft, double(i) - 0.3), QPointF(ttft, double(i) + 0.3)});
            m_markers[i]->setVisible(true);
        } else {
            m_markers[i]->clear();
            m_markers[i]->setVisible(false);
        }
    }
    legend()->markers(m_markers[1]).value(0)->setVisible(false);
    relabel();
}

void RequestChart::restyle() {
    if (m_compact) applyCompact();   // a theme change resets the title font
    for (int s = 0; s < SegCount; ++s) {
        m_sets[size_t(s)]->setColor(segmentColor(s));
        m_sets[size_t(s)]->setBorderColor(segmentColor(s));
    }
    for (auto* marker : m_markers) {
        QPen pen(textColor());
        pen.setWidthF(3);
        pen.setStyle(Qt::DashLine);
        marker->setPen(pen);
    }
    relabel();
}

void RequestChart::relabel() {
    m_labels.clear();
    const double range = m_msAxis->max() - m_msAxis->min();
    for (size_t i = 0; i < m_shown.size(); ++i) {
        const auto v = segmentValues(m_shown[i]);
        double start = 0;
        for (int s = 0; s < SegCount; ++s) {
            // a value inside its segment where it fits; the small ones are in the table and the CSV
            if (v[size_t(s)] >= range * 0.07)
                m_labels.addInside(QPointF(start + v[size_t(s)] / 2, double(i)), v[size_t(s)], m_bars,
                                   segmentLabel(s, m_shown[i]), onColor(segmentColor(s)));
            start += v[size_t(s)];
        }
        // Above the marker's top end, in the gap over the bar -- but the topmost of two bars has
        // only a thin strip above it (the category axis ends half a bar-pitch up), where the label
        // would cover the title: its label goes below its marker's bottom end, into the gap
        // between the bars.
        const bool below = m_shown.size() > 1 && i + 1 == m_shown.size();
        m_labels.add(QPointF(m_shown[i].ttft_ms, double(i) + (below ? -0.3 : 0.3)), m_markers[i],
                     QStringLiteral("TTFT %1").arg(formatMs(m_shown[i].ttft_ms)), textColor(),
                     below ? ChartLabels::Below : ChartLabels::Above, true);
        m_labels.add(QPointF(start, double(i)), m_bars, formatMs(start), textColor(), ChartLabels::Right);
    }
    m_labels.reposition();
}

// ---- sweep -----------------------------------------------------------------------------------

SweepChart::SweepChart(QGraphicsItem* parent) : TimingChart(parent) {
    m_full = new QLineSeries(this);
    m_full->setName(QStringLiteral("full prefill TTFT"));
    m_cached = new QLineSeries(this);
    m_cached->setName(QStringLiteral("cached TTFT"));
    m_fullDots = new QScatterSeries(this);
    m_cachedDots = new QScatterSeries(this);
    // log2 tools: 5, 10, 20, 50 spread evenly instead of crowding the left edge
    m_toolsAxis = new QLogValueAxis(this);
    m_toolsAxis->setBase(2);
    m_toolsAxis->setTitleText(QStringLiteral("number of tools (log scale)"));
    m_toolsAxis->setLabelFormat(QStringLiteral("%g"));
    m_linearY = new QValueAxis(this);
    m_linearY->setTitleText(QStringLiteral("TTFT (ms, median)"));
    m_logAxis = new QLogValueAxis(this);
    m_logAxis->setTitleText(QStringLiteral("TTFT (ms, median, log scale)"));
    m_logAxis->setLabelFormat(QStringLiteral("%g"));
    m_logAxis->setBase(10);
    m_logAxis->setMinorTickCount(8);
    addAxis(m_toolsAxis, Qt::AlignBottom);
    addAxis(m_linearY, Qt::AlignLeft);
    for (QXYSeries* s : {static_cast<QXYSeries*>(m_full), static_cast<QXYSeries*>(m_cached),
                         static_cast<QXYSeries*>(m_fullDots), static_cast<QXYSeries*>(m_cachedDots)}) {
        addSeries(s);
        s->attachAxis(m_toolsAxis);
        s->attachAxis(m_linearY);
    }
    legend()->markers(m_fullDots).value(0)->setVisible(false);
    legend()->markers(m_cachedDots).value(0)->setVisible(false);
    m_labels.avoidLines({m_full, m_cached});
    applyPalette(QPalette());
    setPoints({});
}

void SweepChart::setPoints(const std::vector<SweepPoint>& points) {
    m_points = points;
    QList<QPointF> cached, full;
    for (const auto& p : points) {
        cached << QPointF(double(p.nTools), p.cachedTtftMs);
        full << QPointF(double(p.nTools), p.fullTtftMs);
    }
    m_cached->replace(cached);
    m_full->replace(full);
    m_cachedDots->replace(cached);
    m_fullDots->replace(full);
    setTitle(points.empty() ? QStringLiteral("Tool-count sweep: press Run sweep")
                            : QStringLiteral("TTFT vs number of tools · speed-up = full ÷ cached"));
    rescale();
}

void SweepChart::setLogY(bool logY) {
    if (logY == m_logY) return;
    m_logY = logY;
    QAbstractAxis* from = logY ? static_cast<QAbstractAxis*>(m_linearY) : m_logAxis;
    QAbstractAxis* to = logY ? static_cast<QAbstractAxis*>(m_logAxis) : m_linearY;
    for (QAbstractSeries* s : series()) s->detachAxis(from);
    removeAxis(from);
    from->setParent(this);  // removeAxis gives it back; keep it for the next toggle
    addAxis(to, Qt::AlignLeft);
    styleAxis(to);
    for (QAbstractSeries* s : series()) s->attachAxis(to);
    rescale();
}

void SweepChart::rescale() {
    double minTools = 4, maxTools = 8, minMs = 0, maxMs = 1;
    bool first = true;
    for (const auto& p : m_points) {
        maxTools = std::max(maxTools, double(p.nTools) * 1.25);
        minTools = std::min(minTools, std::max(1.0, double(p.nTools) / 1.25));
        for (double v : {p.cachedTtftMs, p.fullTtftMs}) {
            if (v <= 0) continue;
            minMs = first ? v : std::min(minMs, v);
            maxMs = first ? v : std::max(maxMs, v);
            first = false;
        }
    }
    m_toolsAxis->setRange(std::pow(2.0, std::floor(std::log2(minTools))),
                          std::pow(2.0, std::ceil(std::log2(maxTools))));
    niceAxis(m_linearY, 0, maxMs * 1.2, 6, false);
    const double lo = first ? 0.1 : std::pow(10.0, std::floor(std::log10(minMs)));
    const double hi = first ? 10 : maxMs * 2;  // room for the labels above the top point
    m_logAxis->setRange(lo, std::max(hi, lo * 10));
    relabel();
}

void SweepChart::restyle() {
    for (auto [line, dots, color] :
         {std::tuple{m_cached, m_cachedDots, cachedColor(m_dark)}, std::tuple{m_full, m_fullDots, fullColor(m_dark)}}) {
        QPen pen(color);
        pen.setWidthF(3);
        line->setPen(pen);
        dots->setColor(color);
        dots->setBorderColor(color);
        dots->setMarkerSize(12);
    }
    relabel();
}

void SweepChart::relabel() {
    m_labels.clear();
    for (const auto& p : m_points) {
        const double x = double(p.nTools);
        const double speedup = p.cachedTtftMs > 0 ? p.fullTtftMs / p.cachedTtftMs : 0.0;
        m_labels.add(QPointF(x, p.fullTtftMs), m_full,
                     QStringLiteral("%1 · %2×").arg(formatMs(p.fullTtftMs)).arg(speedup, 0, 'f', speedup < 10 ? 1 : 0),
                     fullColor(m_dark), ChartLabels::Above, true);
        m_labels.add(QPointF(x, p.cachedTtftMs), m_cached, formatMs(p.cachedTtftMs), cachedColor(m_dark),
                     ChartLabels::AboveRight);
    }
    m_labels.reposition();
}

// ---- amortisation ----------------------------------------------------------------------------

AmortisationChart::AmortisationChart(QGraphicsItem* parent) : TimingChart(parent) {
    m_zero = new QLineSeries(this);
    m_saved = new QLineSeries(this);
    m_saved->setName(QStringLiteral("cumulative time saved"));
    m_breakEven = new QScatterSeries(this);
    m_breakEven->setName(QStringLiteral("break-even"));
    m_requestsAxis = new QValueAxis(this);
    m_requestsAxis->setTitleText(QStringLiteral("number of requests with this tool set"));
    m_savedAxis = new QValueAxis(this);
    m_savedAxis->setTitleText(QStringLiteral("time saved (ms)"));
    addAxis(m_requestsAxis, Qt::AlignBottom);
    addAxis(m_savedAxis, Qt::AlignLeft);
    for (QXYSeries* s :
         {static_cast<QXYSeries*>(m_zero), static_cast<QXYSeries*>(m_saved), static_cast<QXYSeries*>(m_breakEven)}) {
        addSeries(s);
        s->attachAxis(m_requestsAxis);
        s->attachAxis(m_savedAxis);
    }
    legend()->markers(m_zero).value(0)->setVisible(false);
    applyPalette(QPalette());
    setAmortisation(Amortisation{});
}

void AmortisationChart::setAmortisation(const Amortisation& a) {
    m_a = a;
    if (!a.valid) {
        m_n = 0;
        m_saved->clear();
        m_breakEven->clear();
        m_zero->clear();
        setTitle(QStringLiteral("Amortisation: run a compare-mode query or a sweep"));
        setSubtitle(QString());
        m_requestsAxis->setRange(0, 10);
        m_savedAxis->setRange(-1, 1);
        relabel();
        return;
    }
    m_n = a.breakEven > 0 ? std::clamp(2 * a.breakEven, 10, 1000000) : 20;
    QList<QPointF> saved;
    const int step = std::max(1, m_n / 200);
    for (int k = 0; k <= m_n; k += step) saved << QPointF(k, a.savedAfter(k));
    if (saved.back().x() != m_n) saved << QPointF(m_n, a.savedAfter(m_n));
    m_saved->replace(saved);
    m_zero->replace(QList<QPointF>{QPointF(0, 0), QPointF(m_n, 0)});
    if (a.breakEven > 0)
        m_breakEven->replace(QList<QPointF>{QPointF(a.breakEven, a.savedAfter(a.breakEven))});
    else
        m_breakEven->clear();
    const double lo = std::min(0.0, std::min(a.savedAfter(0), a.savedAfter(m_n)));
    const double hi = std::max(0.0, std::max(a.savedAfter(0), a.savedAfter(m_n)));
    const double pad = std::max(1e-3, (hi - lo) * 0.15);
    niceAxis(m_requestsAxis, 0, m_n, 10, true);
    niceAxis(m_savedAxis, lo - pad, hi + pad, 6, false);
    setTitle(QStringLiteral("Time saved · compile %1%2 once, then %3 saved per request")
                 .arg(formatMs(a.compileMs), a.compileMeasured ? QString() : QStringLiteral(" (est.)"),
                      formatMs(a.savingMs)));
    QString sub =
        QStringLiteral("after %1 requests: %2 saved · from %3").arg(m_n).arg(formatMs(a.savedAfter(m_n)), a.source);
    if (!a.compileMeasured)
        sub += QStringLiteral("\ncompile not measured this session (it was cached): the full prefill stands in");
    setSubtitle(sub);
    relabel();
}

void AmortisationChart::restyle() {
    QPen pen(savedColor(m_dark));
    pen.setWidthF(3);
    m_saved->setPen(pen);
    QPen zero(textColor());
    zero.setWidthF(1.5);
    zero.setStyle(Qt::DashLine);
    m_zero->setPen(zero);
    m_breakEven->setColor(fullColor(m_dark));
    m_breakEven->setBorderColor(fullColor(m_dark));
    m_breakEven->setMarkerSize(16);
    relabel();
}

void AmortisationChart::relabel() {
    m_labels.clear();
    if (m_a.valid && m_a.breakEven > 0)
        m_labels.add(QPointF(m_a.breakEven, m_a.savedAfter(m_a.breakEven)), m_breakEven,
                     QStringLiteral("break-even at request %1").arg(m_a.breakEven), fullColor(m_dark),
                     ChartLabels::AboveLeft, true);
    if (m_a.valid && m_a.breakEven == 0)
        m_labels.add(QPointF(m_n / 2.0, 0), m_zero, QStringLiteral("no saving measured: never breaks even"),
                     textColor(), ChartLabels::Above, true);
    m_labels.reposition();
}

bool renderChartPng(TimingChart* chart, const QPalette& palette, QSize size, const QString& path, QString* error) {
    chart->applyPalette(palette);
    chart->setBackgroundRoundness(0);  // the background fills the whole image
    chart->layout()->setContentsMargins(0, 0, 0, 0);
    QChartView view(chart);  // owns the chart
    view.setRenderHint(QPainter::Antialiasing);
    view.resize(size);
    chart->resize(size);
    chart->setPos(0, 0);
    view.scene()->setSceneRect(QRectF(QPointF(0, 0), QSizeF(size)));
    QImage image(size, QImage::Format_ARGB32);
    image.fill(chart->backgroundBrush().color());
    {
        QPainter painter(&image);
        painter.setRenderHint(QPainter::Antialiasing);
        painter.setRenderHint(QPainter::TextAntialiasing);
        view.scene()->render(&painter, QRectF(image.rect()), QRectF(QPointF(0, 0), QSizeF(size)));
    }
    if (!image.save(path, "PNG")) {
        if (error) *error = QStringLiteral("%1: could not write the PNG").arg(path);
        return false;
    }
    return true;
}

}  // namespace cc::ui
