// Light / dark palettes for the whole application, and "System" (follow the platform).
// Qt 6.5+ reports the system colour scheme (QStyleHints::colorScheme) and System follows it live;
// before 6.5 System means the style's standard palette.
#pragma once

#include <QPalette>
#include <QString>

namespace cc::ui {

enum class Theme { system, light, dark };

QString themeName(Theme theme);                 // "system" | "light" | "dark"
Theme parseTheme(const QString& name);           // unknown names give system
QPalette lightPalette();
QPalette darkPalette();
bool systemPrefersDark();                        // false where Qt cannot tell (< 6.5)
void applyTheme(Theme theme);                    // QApplication-wide palette (and Fusion for light/dark)

}  // namespace cc::ui
