#include "ui/timings_panel.h"

#include "ui/engine_controller.h"

namespace cc::ui {

TimingsPanel::TimingsPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine) {}

}  // namespace cc::ui
