#include "ui/main_window.h"

#include <QLabel>
#include <QStatusBar>
#include <QVBoxLayout>

namespace cc::ui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setWindowTitle(QStringLiteral("ContextCache"));
    auto* central = new QWidget(this);
    auto* layout = new QVBoxLayout(central);
    auto* title = new QLabel(QStringLiteral("<h2>ContextCache</h2>"
                                            "<p>Persistent KV cache for tool-schema prompt prefixes.</p>"),
                             central);
    title->setObjectName(QStringLiteral("titleLabel"));
    auto* model = new QLabel(QStringLiteral("Model: builtin:qwen3-demo — Qwen3 architecture with the real Qwen3 "
                                            "tokenizer and <b>synthetic weights</b>: timings and exactness are real, "
                                            "generated text is not meaningful."),
                             central);
    model->setObjectName(QStringLiteral("modelLabel"));
    model->setWordWrap(true);
    layout->addWidget(title);
    layout->addWidget(model);
    layout->addStretch(1);
    setCentralWidget(central);
    statusBar()->showMessage(QStringLiteral("builtin:qwen3-demo · backend: cpu"));
    resize(1100, 720);
}

}  // namespace cc::ui
