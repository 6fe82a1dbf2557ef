// Timings: per-request stacked bar, cached vs full, history, tool-count sweep, amortisation, counters, PNG/CSV export.
//
// The numbers live in TimingsData (plain records, exactly the engine's Timings); the charts and the
// table are views of it, so tests compare history() with the QueryOutcome field by field.
#pragma once

#include "ui/charts/timing_data.h"

#include <QSize>
#include <QWidget>

class QCheckBox;
class QChartView;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTabWidget;
class QTableView;

namespace cc::ui {

class EngineController;
class HistoryModel;
class RequestChart;
class SweepChart;
class AmortisationChart;

class TimingsPanel : public QWidget {
    Q_OBJECT
public:
    explicit TimingsPanel(EngineController* engine, QWidget* parent = nullptr);

    const std::vector<RequestRecord>& history() const { return m_data.history(); }
    const std::vector<SweepPoint>& sweepPoints() const { return m_data.sweep(); }
    const Counters& counters() const { return m_data.counters(); }
    Amortisation amortisation() const;  // what the amortisation chart shows

    RequestChart* requestChart() const { return m_requestChart; }
    SweepChart* sweepChart() const { return m_sweepChart; }
    AmortisationChart* amortisationChart() const { return m_amortChart; }

    // The sweep the "Run sweep" button starts: each named bundled set with its first sample query.
    static SweepRequest sweepRequest(const QStringList& setNames, int repeats, int maxNewTokens);
    void startSweep(const QStringList& setNames, int repeats, int maxNewTokens);
    void showRequest(int historyIndex);  // 0-based; the bar chart shows that request

    // which: "request" | "sweep" | "amortisation"; rendered at exportSize() whatever the window size.
    bool exportPng(const QString& which, const QString& path, QString* error);
    bool exportCsv(const QString& path, QString* error) const;       // the request history
    bool exportSweepCsv(const QString& path, QString* error) const;  // the sweep points
    static QSize exportSize() { return QSize(1600, 900); }

protected:
    void changeEvent(QEvent* event) override;

private:
    void onQueryFinished(const QueryOutcome& outcome);
    void onSweepPoint(const SweepPoint& point);
    void refreshCounters();
    void refreshAmortisation();
    void refreshEnabled();
    void applyPalette();
    void exportPngInteractive();
    void exportCsvInteractive();
    QStringList checkedSweepSets() const;

    EngineController* m_engine;
    TimingsData m_data;
    bool m_sweepDone = true;  // the next sweep point starts a new sweep
    bool m_sweeping = false;

    QTabWidget* m_tabs = nullptr;
    QLabel* m_queriesLabel = nullptr;
    QLabel* m_hitsLabel = nullptr;
    QLabel* m_hitRateLabel = nullptr;
    QLabel* m_savedLabel = nullptr;
    QPushButton* m_exportPngButton = nullptr;
    QPushButton* m_exportCsvButton = nullptr;

    RequestChart* m_requestChart = nullptr;
    QChartView* m_requestView = nullptr;
    HistoryModel* m_historyModel = nullptr;
    QTableView* m_historyView = nullptr;

    SweepChart* m_sweepChart = nullptr;
    QChartView* m_sweepView = nullptr;
    std::vector<QCheckBox*> m_sweepSetBoxes;
    QSpinBox* m_repeatsSpin = nullptr;
    QSpinBox* m_sweepTokensSpin = nullptr;
    QCheckBox* m_logYBox = nullptr;
    QPushButton* m_runSweepButton = nullptr;
    QPushButton* m_cancelSweepButton = nullptr;
    QProgressBar* m_sweepProgress = nullptr;
    QLabel* m_sweepStatus = nullptr;

    AmortisationChart* m_amortChart = nullptr;
    QChartView* m_amortView = nullptr;
};

}  // namespace cc::ui
