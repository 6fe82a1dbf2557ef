#include "ui/cache_panel.h"

#include "ui/engine_controller.h"

namespace cc::ui {

CachePanel::CachePanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine) {}

}  // namespace cc::ui
