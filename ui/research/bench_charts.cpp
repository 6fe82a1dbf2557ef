#include "ui/research/bench_charts.h"

#include <QApplication>
#include <QDir>
#include <QStyle>

#include <cstdlib>
#include <memory>

namespace cc::ui {

int benchFocusRow(const std::vector<cc::PaperBenchRow>& rows) {
    for (size_t i = 0; i < rows.size(); ++i)
        if (rows[i].n_tools == 20) return int(i);
    return int(rows.size()) - 1;
}

std::vector<SweepPoint> benchSweepPoints(const std::vector<cc::PaperBenchRow>& rows) {
    std::vector<SweepPoint> points;
    for (const auto& r : rows) {
        SweepPoint p;
        p.name = r.tool_set;
        p.nTools = r.n_tools;
        p.prefixTokens = r.prefix_tokens;
        p.compileMs = r.compile_ms;
        p.cachedTtftMs = cc::median(r.cached_ttft_ms);
        p.fullTtftMs = cc::median(r.full_ttft_ms);
        p.cachedLinkMs = cc::median(r.cached_link_ms);
        p.cachedPrefillMs = cc::median(r.cached_prefill_ms);
        p.identical = size_t(r.identical_outputs) == r.full_ttft_ms.size();
        points.push_back(p);
    }
    return points;
}

RequestRecord benchSplitRecord(const cc::PaperBenchRow& row) {
    RequestRecord rec;
    rec.index = 1;
    rec.mode = QStringLiteral("compare");
    rec.tier = cc::Tier::memory;
    rec.nTools = int(row.n_tools);
    rec.prefixTokens = row.prefix_tokens;
    rec.suffixTokens = size_t(cc::median(row.full_prompt_tokens)) - row.prefix_tokens;
    rec.cacheHit = true;
    cc::Timings cached;
    cached.lookup_ms = cached.link_ms = cc::median(row.cached_link_ms);
    cached.prefill_ms = cc::median(row.cached_prefill_ms);
    cached.ttft_ms = cc::median(row.cached_ttft_ms);
    cached.decode_ms = cc::median(row.cached_decode_ms);
    cached.total_ms = cached.ttft_ms + cached.decode_ms;
    cc::Timings full;
    full.prefill_ms = cc::median(row.full_prefill_ms);
    full.ttft_ms = cc::median(row.full_ttft_ms);
    full.decode_ms = cc::median(row.full_decode_ms);
    full.total_ms = full.ttft_ms + full.decode_ms;
    rec.timings = cached;
    rec.fullTimings = full;
    rec.identical = size_t(row.identical_outputs) == row.full_ttft_ms.size();
    return rec;
}

Amortisation benchAmortisation(const cc::PaperBenchRow& row) {
    Amortisation a;
    a.valid = true;
    a.source = QStringLiteral("benchmark %1 (%2 tools, %3 prefix tokens, medians of %4 queries)")
                   .arg(QString::fromStdString(row.tool_set))
                   .arg(row.n_tools)
                   .arg(row.prefix_tokens)
                   .arg(row.full_ttft_ms.size());
    a.compileMs = row.compile_ms;
    a.fullTtftMs = cc::median(row.full_ttft_ms);
    a.cachedTtftMs = cc::median(row.cached_ttft_ms);
    a.savingMs = row.saving_per_request_ms();
    a.breakEven = row.break_even_requests();
    return a;
}

QStringList benchChartFiles() {
    return {QStringLiteral("ttft_vs_tools.png"), QStringLiteral("timing_split.png"), QStringLiteral("amortisation.png")};
}

bool writeBenchCharts(const std::vector<cc::PaperBenchRow>& rows, const QString& dir, const QPalette& palette,
                      QString* error) {
    const int focus = benchFocusRow(rows);
    if (focus < 0) {
        if (error) *error = QStringLiteral("no benchmark results to plot");
        return false;
    }
    if (!QDir().mkpath(dir)) {
        if (error) *error = QStringLiteral("%1: cannot create the directory").arg(dir);
        return false;
    }
    const QStringList files = benchChartFiles();
    const cc::PaperBenchRow& row = rows[size_t(focus)];

    auto* sweep = new SweepChart;
    sweep->setPoints(benchSweepPoints(rows));
    sweep->setTitle(QStringLiteral("TTFT vs number of tools · medians of %1 queries").arg(row.full_ttft_ms.size()));
    if (!renderChartPng(sweep, palette, benchChartSize(), QDir(dir).filePath(files[0]), error)) return false;

    auto* split = new RequestChart;
    const RequestRecord record = benchSplitRecord(row);
    split->setRecord(&record);
    split->setTitle(QStringLiteral("Timing split · %1 tools · %2 + %3 tokens · medians of %4 queries")
                        .arg(row.n_tools)
                        .arg(record.prefixTokens)
                        .arg(record.suffixTokens)
                        .arg(row.full_ttft_ms.size()));
    if (!renderChartPng(split, palette, benchChartSize(), QDir(dir).filePath(files[1]), error)) return false;

    auto* amort = new AmortisationChart;
    amort->setAmortisation(benchAmortisation(row));
    return renderChartPng(amort, palette, benchChartSize(), QDir(dir).filePath(files[2]), error);
}

}  // namespace cc::ui
