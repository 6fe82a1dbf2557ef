// Model: built-in model or an HF directory, backend, threads, load with progress, the synthetic-weights banner.
#pragma once

#include <QWidget>

namespace cc::ui {

class EngineController;

class ModelPanel : public QWidget {
    Q_OBJECT
public:
    explicit ModelPanel(EngineController* engine, QWidget* parent = nullptr);


private:
    EngineController* m_engine;
};

}  // namespace cc::ui
