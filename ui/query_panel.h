// Query: input (Ctrl+Enter), mode, max tokens, temperature, streaming output, parsed tool call, compare badge.
#pragma once

#include <QWidget>

namespace cc::ui {

class EngineController;

class QueryPanel : public QWidget {
    Q_OBJECT
public:
    explicit QueryPanel(EngineController* engine, QWidget* parent = nullptr);

public slots:
    void setQuery(const QString& text);   // puts the text in the input
    void run();                           // runs the input (as Ctrl+Enter does)

private:
    EngineController* m_engine;
};

}  // namespace cc::ui
