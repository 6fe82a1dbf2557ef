#include "ui/widgets/theme.h"

#include <QApplication>
#include <QStyle>
#include <QStyleFactory>
#include <QStyleHints>

namespace cc::ui {

QString themeName(Theme theme) {
    switch (theme) {
        case Theme::light: return QStringLiteral("light");
        case Theme::dark: return QStringLiteral("dark");
        case Theme::system: break;
    }
    return QStringLiteral("system");
}

Theme parseTheme(const QString& name) {
    if (name == QLatin1String("light")) return Theme::light;
    if (name == QLatin1String("dark")) return Theme::dark;
    return Theme::system;
}

QPalette lightPalette() {
    QPalette p;
    p.setColor(QPalette::Window, QColor(0xf6, 0xf8, 0xfa));
    p.setColor(QPalette::WindowText, QColor(0x1f, 0x23, 0x28));
    p.setColor(QPalette::Base, Qt::white);
    p.setColor(QPalette::AlternateBase, QColor(0xf0, 0xf3, 0xf6));
    p.setColor(QPalette::ToolTipBase, QColor(0xff, 0xff, 0xe8));
    p.setColor(QPalette::ToolTipText, QColor(0x1f, 0x23, 0x28));
    p.setColor(QPalette::PlaceholderText, QColor(0x6e, 0x77, 0x81));
    p.setColor(QPalette::Text, QColor(0x1f, 0x23, 0x28));
    p.setColor(QPalette::Button, QColor(0xf0, 0xf2, 0xf5));
    p.setColor(QPalette::ButtonText, QColor(0x1f, 0x23, 0x28));
    p.setColor(QPalette::BrightText, Qt::red);
    p.setColor(QPalette::Link, QColor(0x09, 0x69, 0xda));
    p.setColor(QPalette::Highlight, QColor(0x1f, 0x6f, 0xeb));
    p.setColor(QPalette::HighlightedText, Qt::white);
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, QColor(0x8c, 0x95, 0x9f));
    return p;
}

QPalette darkPalette() {
    QPalette p;
    p.setColor(QPalette::Window, QColor(0x22, 0x27, 0x2e));
    p.setColor(QPalette::WindowText, QColor(0xe6, 0xed, 0xf3));
    p.setColor(QPalette::Base, QColor(0x16, 0x1b, 0x22));
    p.setColor(QPalette::AlternateBase, QColor(0x1c, 0x21, 0x28));
    p.setColor(QPalette::ToolTipBase, QColor(0x30, 0x36, 0x3d));
    p.setColor(QPalette::ToolTipText, QColor(0xe6, 0xed, 0xf3));
    p.setColor(QPalette::PlaceholderText, QColor(0x8b, 0x94, 0x9e));
    p.setColor(QPalette::Text, QColor(0xe6, 0xed, 0xf3));
    p.setColor(QPalette::Button, QColor(0x2d, 0x33, 0x3b));
    p.setColor(QPalette::ButtonText, QColor(0xe6, 0xed, 0xf3));
    p.setColor(QPalette::BrightText, QColor(0xff, 0x7b, 0x72));
    p.setColor(QPalette::Link, QColor(0x58, 0xa6, 0xff));
    p.setColor(QPalette::Highlight, QColor(0x1f, 0x6f, 0xeb));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Light, QColor(0x3d, 0x44, 0x4d));
    p.setColor(QPalette::Midlight, QColor(0x33, 0x3a, 0x42));
    p.setColor(QPalette::Mid, QColor(0x2a, 0x30, 0x37));
    p.setColor(QPalette::Dark, QColor(0x12, 0x16, 0x1b));
    p.setColor(QPalette::Shadow, Qt::black);
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, QColor(0x6e, 0x76, 0x81));
    return p;
}

bool systemPrefersDark() {
#if QT_VERSION >= QT_VERSION_CHECK(6, 5, 0)
    return QGuiApplication::styleHints()->colorScheme() == Qt::ColorScheme::Dark;
#else
    return false;
#endif
}

void applyTheme(Theme theme) {
    // Hand-made palettes only look right with Fusion (native styles ignore parts of the palette).
    if (theme != Theme::system && QApplication::style()->name().compare(QLatin1String("fusion"), Qt::CaseInsensitive) != 0)
        QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    switch (theme) {
        case Theme::light: QApplication::setPalette(lightPalette()); break;
        case Theme::dark: QApplication::setPalette(darkPalette()); break;
        case Theme::system:
            QApplication::setPalette(systemPrefersDark() ? darkPalette() : QApplication::style()->standardPalette());
            break;
    }
}

}  // namespace cc::ui
