#pragma once

#include <QMainWindow>

namespace cc::ui {

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
};

}  // namespace cc::ui
