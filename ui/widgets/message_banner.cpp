#include "ui/widgets/message_banner.h"

#include "ui/widgets/icons.h"

#include <QApplication>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QToolButton>

namespace cc::ui {

MessageBanner::MessageBanner(Kind kind, const QString& text, QWidget* parent)
    : QFrame(parent), m_kind(kind), m_label(new QLabel(this)), m_close(new QToolButton(this)) {
    setFrameShape(QFrame::NoFrame);
    setAutoFillBackground(true);
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(10, 4, 4, 4);
    auto* badge = new QLabel(this);
    badge->setText(kind == Kind::error ? tr("Error") : kind == Kind::warning ? tr("Warning") : tr("Note"));
    QFont bold = badge->font();
    bold.setBold(true);
    badge->setFont(bold);
    m_label->setWordWrap(true);
    m_label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_label->setText(text);
    m_label->setToolTip(text);
    m_close->setIcon(icon(QStringLiteral("close")));
    m_close->setAutoRaise(true);
    m_close->setToolTip(tr("Dismiss this message"));
    m_close->setAccessibleName(tr("Dismiss"));
    layout->addWidget(badge, 0, Qt::AlignTop);
    layout->addWidget(m_label, 1);
    layout->addWidget(m_close, 0, Qt::AlignTop);
    connect(m_close, &QToolButton::clicked, this, [this] {
        hide();
        emit dismissed();
    });
    applyColours();
}

QString MessageBanner::text() const { return m_label->text(); }

void MessageBanner::setText(const QString& text) {
    m_label->setText(text);
    m_label->setToolTip(text);
}

void MessageBanner::setClosable(bool closable) { m_close->setVisible(closable); }

void MessageBanner::changeEvent(QEvent* event) {
    QFrame::changeEvent(event);
    if (event->type() == QEvent::ApplicationPaletteChange) applyColours();
}

void MessageBanner::refreshColours() { applyColours(); }

void MessageBanner::applyColours() {
    // Tinted from the application palette, so the banner is legible in light and dark alike.
    // A palette, not a style sheet: a style sheet would stop the window's font (presentation
    // mode) from reaching the labels.
    const bool dark = QApplication::palette().color(QPalette::Window).lightness() < 128;
    m_accent = m_kind == Kind::error     ? QColor(0xcf, 0x22, 0x2e)
               : m_kind == Kind::warning ? QColor(0xbf, 0x87, 0x00)
                                         : QColor(0x1f, 0x6f, 0xeb);
    QColor background;
    if (dark) background = m_accent.darker(260);
    else if (m_kind == Kind::warning) background = QColor(0xff, 0xf3, 0xc4);
    else if (m_kind == Kind::error) background = QColor(0xff, 0xe3, 0xe3);
    else background = QColor(0xdd, 0xec, 0xff);
    const QColor foreground = dark ? QColor(0xf0, 0xf0, 0xf0) : QColor(0x1f, 0x23, 0x28);
    QPalette p = palette();
    p.setColor(QPalette::Window, background);
    p.setColor(QPalette::WindowText, foreground);
    p.setColor(QPalette::Text, foreground);
    setPalette(p);
}

void MessageBanner::paintEvent(QPaintEvent* event) {
    QFrame::paintEvent(event);
    QPainter painter(this);
    painter.fillRect(QRect(0, 0, 5, height()), m_accent);   // the kind's stripe on the left
    painter.setPen(m_accent);
    painter.drawRect(rect().adjusted(0, 0, -1, -1));
}

}  // namespace cc::ui
