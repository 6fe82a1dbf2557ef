#include "ui/message_banner.h"

#include "ui/icons.h"

#include <QApplication>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QToolButton>

namespace cc::ui {

MessageBanner::MessageBanner(Kind kind, const QString& text, QWidget* parent)
    : QFrame(parent), m_kind(kind), m_label(new QLabel(this)), m_close(new QToolButton(this)) {
    setFrameShape(QFrame::StyledPanel);
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
    if (event->type() == QEvent::PaletteChange || event->type() == QEvent::ApplicationPaletteChange) applyColours();
}

void MessageBanner::refreshColours() { applyColours(); }

void MessageBanner::applyColours() {
    // Tinted from the window colour, so the banner is legible in light and dark palettes alike.
    // The application palette: this frame's own one is shadowed by its style sheet.
    const bool dark = QApplication::palette().color(QPalette::Window).lightness() < 128;
    QColor accent = m_kind == Kind::error     ? QColor(0xcf, 0x22, 0x2e)
                    : m_kind == Kind::warning ? QColor(0xbf, 0x87, 0x00)
                                              : QColor(0x1f, 0x6f, 0xeb);
    QColor background = dark ? accent.darker(260) : accent.lighter(185);
    if (!dark && m_kind == Kind::warning) background = QColor(0xff, 0xf3, 0xc4);
    if (!dark && m_kind == Kind::error) background = QColor(0xff, 0xe3, 0xe3);
    if (!dark && m_kind == Kind::info) background = QColor(0xdd, 0xec, 0xff);
    const QColor foreground = dark ? QColor(0xf0, 0xf0, 0xf0) : QColor(0x1f, 0x23, 0x28);
    // A style sheet on this frame only (not the app), with the accent as a left stripe.
    const QString sheet = QStringLiteral("cc--ui--MessageBanner { background: %1; border: 1px solid %2; border-left: 5px solid %2; "
                                 "border-radius: 3px; } cc--ui--MessageBanner QLabel { color: %3; background: transparent; }")
                      .arg(background.name(), accent.name(), foreground.name());
    if (sheet != styleSheet()) setStyleSheet(sheet);   // a sheet change sends events of its own: set it once
}

}  // namespace cc::ui
