// Cache: table of cached groups with verify / delete / evict / open folder and usage against budgets.
#pragma once

#include <QWidget>

namespace cc::ui {

class EngineController;

class CachePanel : public QWidget {
    Q_OBJECT
public:
    explicit CachePanel(EngineController* engine, QWidget* parent = nullptr);


private:
    EngineController* m_engine;
};

}  // namespace cc::ui
