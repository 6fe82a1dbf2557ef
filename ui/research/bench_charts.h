// The benchmark's three charts (paper Tables 2 and 3 as pictures), drawn by the Timings panel's
// chart classes from a core/research/paper_bench result: TTFT vs tools (SweepChart), the timing split of one
// tool set's median request (RequestChart: full prefill and cached bars), and the amortisation curve
// (AmortisationChart). Shared by the Benchmarks tab and `contextcache --plot-bench DIR`.
#pragma once

#include "core/research/paper_bench.h"
#include "ui/charts/timing_charts.h"
#include "ui/charts/timing_data.h"

#include <QPalette>
#include <QSize>
#include <QString>
#include <QStringList>

#include <string>
#include <vector>

namespace cc::ui {

// The row the split and amortisation charts show: the one with 20 tools (the paper's Table 2), else
// the last. -1 when there are no rows.
int benchFocusRow(const std::vector<cc::PaperBenchRow>& rows);

std::vector<SweepPoint> benchSweepPoints(const std::vector<cc::PaperBenchRow>& rows);  // medians
// A compare-mode record whose two runs are the row's medians (link drawn as the memory-tier lookup).
RequestRecord benchSplitRecord(const cc::PaperBenchRow& row);
Amortisation benchAmortisation(const cc::PaperBenchRow& row);

// The PNG file names, in chart order: ttft_vs_tools.png, timing_split.png, amortisation.png.
QStringList benchChartFiles();
inline QSize benchChartSize() { return QSize(1600, 900); }

// Renders the three charts into `dir` (created when missing). False with `error` naming the file.
bool writeBenchCharts(const std::vector<cc::PaperBenchRow>& rows, const QString& dir, const QPalette& palette,
                      QString* error);


}  // namespace cc::ui
