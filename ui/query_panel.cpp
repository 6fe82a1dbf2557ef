#include "ui/query_panel.h"

#include "ui/engine_controller.h"

namespace cc::ui {

QueryPanel::QueryPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine) {}

void QueryPanel::setQuery(const QString&) {}
void QueryPanel::run() {}
}  // namespace cc::ui
