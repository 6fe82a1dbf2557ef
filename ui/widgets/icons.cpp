#include "ui/widgets/icons.h"

#include <QPainter>
#include <QPainterPath>
#include <QPixmap>

namespace cc::ui {

namespace {

// Paints `name` into a 24x24 logical box (the SVGs' view box, scaled for app.svg's 64).
void paintIcon(QPainter& p, const QString& name) {
    p.setRenderHint(QPainter::Antialiasing);
    p.setPen(Qt::NoPen);
    if (name == QLatin1String("app")) {
        p.scale(24.0 / 64.0, 24.0 / 64.0);
        p.setBrush(QColor(0x1f, 0x6f, 0xeb));
        p.drawRoundedRect(QRectF(4, 4, 56, 56), 12, 12);
        p.setBrush(Qt::white);
        p.setOpacity(0.95);
        p.drawRoundedRect(QRectF(14, 16, 36, 7), 2, 2);
        p.setOpacity(0.8);
        p.drawRoundedRect(QRectF(14, 27, 36, 7), 2, 2);
        p.setOpacity(0.65);
        p.drawRoundedRect(QRectF(14, 38, 22, 7), 2, 2);
        p.setOpacity(1);
        p.setBrush(QColor(0xff, 0xd3, 0x3d));
        p.drawPolygon(QPolygonF({{44, 36}, {52, 36}, {46, 44}, {51, 44}, {40, 56}, {43, 47}, {38, 47}}));
    } else if (name == QLatin1String("compile")) {
        p.setBrush(QColor(0x1f, 0x6f, 0xeb));
        p.drawRoundedRect(QRectF(3, 4, 14, 3), 1, 1);
        p.setOpacity(0.8);
        p.drawRoundedRect(QRectF(3, 9, 14, 3), 1, 1);
        p.setOpacity(0.6);
        p.drawRoundedRect(QRectF(3, 14, 9, 3), 1, 1);
        p.setOpacity(1);
        p.setBrush(QColor(0x2d, 0xa4, 0x4e));
        p.drawPolygon(QPolygonF({{15, 12}, {21, 17}, {15, 22}}));
    } else if (name == QLatin1String("run")) {
        p.setBrush(QColor(0x2d, 0xa4, 0x4e));
        p.drawEllipse(QPointF(12, 12), 10, 10);
        p.setBrush(Qt::white);
        p.drawPolygon(QPolygonF({{9.5, 7}, {17, 12}, {9.5, 17}}));
    } else if (name == QLatin1String("cancel")) {
        p.setBrush(QColor(0xcf, 0x22, 0x2e));
        p.drawEllipse(QPointF(12, 12), 10, 10);
        p.setPen(QPen(Qt::white, 2.5, Qt::SolidLine, Qt::RoundCap));
        p.drawLine(QPointF(8, 8), QPointF(16, 16));
        p.drawLine(QPointF(16, 8), QPointF(8, 16));
    } else if (name == QLatin1String("cache")) {
        const QColor c(0x82, 0x50, 0xdf);
        p.setBrush(c);
        p.setOpacity(0.75);
        p.drawRect(QRectF(4, 5, 16, 14));
        p.drawEllipse(QRectF(4, 16, 16, 6));
        p.setOpacity(1);
        p.drawEllipse(QRectF(4, 2, 16, 6));
        p.setPen(QPen(Qt::white, 1.2));
        p.setBrush(Qt::NoBrush);
        p.drawArc(QRectF(4, 9, 16, 6), 180 * 16, 180 * 16);
    } else if (name == QLatin1String("model")) {
        const QColor c(0x09, 0x69, 0xda);
        p.setPen(QPen(c, 1.6));
        for (int x : {9, 15}) {
            p.drawLine(QPointF(x, 2), QPointF(x, 6));
            p.drawLine(QPointF(x, 18), QPointF(x, 22));
            p.drawLine(QPointF(2, x), QPointF(6, x));
            p.drawLine(QPointF(18, x), QPointF(22, x));
        }
        p.setPen(Qt::NoPen);
        p.setBrush(c);
        p.drawRoundedRect(QRectF(6, 6, 12, 12), 2, 2);
        p.setBrush(Qt::white);
        p.drawRoundedRect(QRectF(9, 9, 6, 6), 1, 1);
    } else if (name == QLatin1String("open")) {
        QPainterPath path;
        path.moveTo(2, 6);
        path.lineTo(4, 4);
        path.lineTo(9, 4);
        path.lineTo(11, 6);
        path.lineTo(22, 6);
        path.lineTo(22, 20);
        path.lineTo(2, 20);
        path.closeSubpath();
        p.setBrush(QColor(0xbf, 0x87, 0x00));
        p.drawPath(path);
        p.setPen(QPen(QColor(255, 255, 255, 180), 1.2));
        p.drawLine(QPointF(2, 10), QPointF(22, 10));
    } else if (name == QLatin1String("about")) {
        p.setBrush(QColor(0x57, 0x60, 0x6a));
        p.drawEllipse(QPointF(12, 12), 10, 10);
        p.setBrush(Qt::white);
        p.drawEllipse(QPointF(12, 7.5), 1.5, 1.5);
        p.drawRoundedRect(QRectF(10.8, 10.5, 2.4, 7.5), 1, 1);
    } else if (name == QLatin1String("close")) {
        p.scale(24.0 / 16.0, 24.0 / 16.0);
        p.setPen(QPen(QColor(0x57, 0x60, 0x6a), 2, Qt::SolidLine, Qt::RoundCap));
        p.drawLine(QPointF(4, 4), QPointF(12, 12));
        p.drawLine(QPointF(12, 4), QPointF(4, 12));
    }
}

QIcon paintedIcon(const QString& name) {
    QIcon out;
    for (int size : {16, 24, 32, 48, 64, 128}) {
        QPixmap pixmap(size, size);
        pixmap.fill(Qt::transparent);
        QPainter p(&pixmap);
        p.scale(size / 24.0, size / 24.0);
        paintIcon(p, name);
        p.end();
        out.addPixmap(pixmap);
    }
    return out;
}

}  // namespace

QIcon icon(const QString& name) {
    QIcon result(QStringLiteral(":/icons/%1.svg").arg(name));
    if (result.pixmap(16, 16).isNull()) result = paintedIcon(name);
    return result;
}

}  // namespace cc::ui
