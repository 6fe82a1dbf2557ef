// Timings: per-request stacked bar, cached vs full, history, tool-count sweep, amortisation, counters, PNG/CSV export.
#pragma once

#include <QWidget>

namespace cc::ui {

class EngineController;

class TimingsPanel : public QWidget {
    Q_OBJECT
public:
    explicit TimingsPanel(EngineController* engine, QWidget* parent = nullptr);


private:
    EngineController* m_engine;
};

}  // namespace cc::ui
