// The app's icons. resources/icons/*.svg are the sources (bundled in resources.qrc); where Qt's SVG
// icon engine is not installed (qt6-svg is optional), the same shapes are painted with QPainter, so
// every action has an icon either way.
#pragma once

#include <QIcon>
#include <QString>

namespace cc::ui {

// name: "app" | "compile" | "run" | "cancel" | "cache" | "model" | "open" | "about" | "close"
QIcon icon(const QString& name);

}  // namespace cc::ui
