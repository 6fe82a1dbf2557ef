// Benchmarks: the paper's Table 2 (deployment economics) and Table 3 (TTFT scaling) for the loaded
// model, run on the engine worker (EngineController::runBench: an engine of its own with a
// memory-only cache), shown as two tables and the three benchmark charts, exported as
// results.json + table2.csv + table3.csv + PNGs (the same files as `contextcache-cli bench --out/--plot`).
#pragma once

#include "ui/worker/engine_controller.h"

#include <QWidget>

#include <optional>
#include <vector>

class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTabWidget;
class QTableWidget;

namespace cc::ui {

class AmortisationChart;
class RequestChart;
class SweepChart;

class BenchPanel : public QWidget {
    Q_OBJECT
public:
    explicit BenchPanel(EngineController* engine, QWidget* parent = nullptr);

    // The request the controls describe; throws std::invalid_argument for bad tool counts.
    BenchRequest request() const;
    void setToolCounts(const QString& text);      // "5,10,20"
    void setQueries(int nQueries, int warmup, int maxNewTokens);
    void run();                                    // shows an error in the status line when the input is bad
    void cancel();
    // Writes results.json, table2.csv, table3.csv and the three PNGs into `dir`.
    bool exportTo(const QString& dir, QString* error) const;

    const std::optional<BenchOutcome>& outcome() const { return m_outcome; }
    QTableWidget* table2() const { return m_table2; }
    QTableWidget* table3() const { return m_table3; }
    SweepChart* sweepChart() const { return m_sweepChart; }
    RequestChart* splitChart() const { return m_splitChart; }
    AmortisationChart* amortisationChart() const { return m_amortChart; }
    QPushButton* runButton() const { return m_runButton; }
    QPushButton* cancelButton() const { return m_cancelButton; }
    QPushButton* exportButton() const { return m_exportButton; }
    QProgressBar* progressBar() const { return m_progress; }
    QString statusText() const;

signals:
    void finished();  // a run ended (results, failure or cancellation)

private:
    void showOutcome(const BenchOutcome& outcome);
    void refreshEnabled();
    void exportInteractive();

    EngineController* m_engine;
    bool m_running = false;
    std::optional<BenchOutcome> m_outcome;
    QLineEdit* m_counts = nullptr;
    QSpinBox* m_nQueries = nullptr;
    QSpinBox* m_warmup = nullptr;
    QSpinBox* m_maxNew = nullptr;
    QPushButton* m_runButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QPushButton* m_exportButton = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_status = nullptr;
    QTabWidget* m_tabs = nullptr;
    QTableWidget* m_table2 = nullptr;
    QTableWidget* m_table3 = nullptr;
    SweepChart* m_sweepChart = nullptr;
    RequestChart* m_splitChart = nullptr;
    AmortisationChart* m_amortChart = nullptr;
};

}  // namespace cc::ui
