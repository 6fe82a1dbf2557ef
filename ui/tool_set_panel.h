// Tool set: checkbox list, validating JSON editor, import/export, drag and drop, bundled samples with sample queries, keys and cache state, Compile.
#pragma once

#include <QWidget>

namespace cc::ui {

class EngineController;

class ToolSetPanel : public QWidget {
    Q_OBJECT
public:
    explicit ToolSetPanel(EngineController* engine, QWidget* parent = nullptr);

signals:
    // The user clicked a sample query of the loaded sample set.
    void sampleQueryChosen(const QString& text);

private:
    EngineController* m_engine;
};

}  // namespace cc::ui
