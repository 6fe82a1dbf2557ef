#include "ui/tool_set_panel.h"

#include "ui/engine_controller.h"

namespace cc::ui {

ToolSetPanel::ToolSetPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine) {}

}  // namespace cc::ui
