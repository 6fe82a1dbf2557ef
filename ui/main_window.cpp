#include "ui/main_window.h"

#include <QLabel>

namespace cc::ui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setWindowTitle(QStringLiteral("ContextCache"));
    setCentralWidget(new QLabel(QStringLiteral("ContextCache"), this));
    resize(1100, 720);
}

}  // namespace cc::ui
