#include "ui/model_panel.h"

#include "ui/engine_controller.h"

namespace cc::ui {

ModelPanel::ModelPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine) {}

}  // namespace cc::ui
