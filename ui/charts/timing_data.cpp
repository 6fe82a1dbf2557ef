#include "ui/charts/timing_data.h"

#include <QFile>
#include <QLocale>
#include <QTextStream>

#include <algorithm>
#include <cmath>

namespace cc::ui {

const QStringList& segmentNames() {
    static const QStringList names{QStringLiteral("lookup"),  QStringLiteral("disk load"),    QStringLiteral("remote load"),
                                   QStringLiteral("upload"),  QStringLiteral("conversation"), QStringLiteral("compile"),
                                   QStringLiteral("prefill"), QStringLiteral("other"),        QStringLiteral("decode")};
    return names;
}

std::array<double, SegCount> segmentValues(const cc::Timings& t) {
    std::array<double, SegCount> v{};
    v[SegLookup] = t.lookup_ms;
    v[SegDiskLoad] = t.disk_load_ms;
    v[SegRemoteLoad] = t.remote_load_ms;
    v[SegUpload] = t.upload_ms;
    v[SegConversation] = t.conversation_link_ms;
    v[SegCompile] = t.compile_ms;
    v[SegPrefill] = t.prefill_ms;
    const double beforeFirst =
        t.lookup_ms + t.disk_load_ms + t.remote_load_ms + t.upload_ms + t.conversation_link_ms + t.compile_ms + t.prefill_ms;
    v[SegOther] = std::max(0.0, t.ttft_ms - beforeFirst);
    v[SegDecode] = t.decode_ms;
    return v;
}

QString segmentLabel(int segment, const cc::Timings& t) {
    const double ms = segmentValues(t)[size_t(segment)];
    const double gbS = segment == SegDiskLoad ? t.disk_load_gb_s : segment == SegRemoteLoad ? t.remote_load_gb_s : 0.0;
    if (gbS > 0) return QStringLiteral("%1 · %2 GB/s").arg(formatMs(ms)).arg(gbS, 0, 'f', 2);
    return formatMs(ms);
}

QString formatMs(double ms) {
    if (std::abs(ms) >= 10000) return QStringLiteral("%1 s").arg(ms / 1000, 0, 'f', 1);
    if (std::abs(ms) >= 1000) return QStringLiteral("%1 s").arg(ms / 1000, 0, 'f', 2);
    if (std::abs(ms) >= 100) return QStringLiteral("%1 ms").arg(ms, 0, 'f', 0);
    if (std::abs(ms) >= 10) return QStringLiteral("%1 ms").arg(ms, 0, 'f', 1);
    if (std::abs(ms) >= 1) return QStringLiteral("%1 ms").arg(ms, 0, 'f', 2);
    return QStringLiteral("%1 ms").arg(ms, 0, 'f', 3);
}

const RequestRecord& TimingsData::addOutcome(const QueryOutcome& outcome) {
    const cc::QueryResult& r = outcome.result;
    RequestRecord rec;
    rec.index = int(m_history.size()) + 1;
    rec.requestId = outcome.requestId;
    rec.query = QString::fromStdString(outcome.query);
    rec.mode = QString::fromStdString(r.mode);
    rec.tier = r.tier;
    rec.nTools = outcome.nTools;
    rec.turn = outcome.turn;
    rec.groupReusedTokens = r.group_reused_tokens;
    rec.conversationReusedTokens = r.conversation_reused_tokens;
    rec.prefilledTokens = r.prefilled_tokens;
    rec.divergedAt = r.diverged_at;
    rec.prefixTokens = r.prefix_tokens;
    rec.suffixTokens = r.suffix_tokens;
    rec.generatedTokens = r.generated_tokens;
    rec.cacheHit = r.cache_hit;
    rec.groupKey = QString::fromStdString(r.group_key);
    rec.timings = r.timings;
    if (r.full) rec.fullTimings = r.full->timings;
    rec.identical = r.identical;
    m_history.push_back(rec);

    // A cached-mode miss computed the prefix inside the query: that is a measured compile.
    if (r.timings.compile_ms > 0) {
        m_compileMs[r.group_key] = r.timings.compile_ms;
        m_compileByPrefix[r.prefix_tokens] = r.timings.compile_ms;
    }
    if (rec.mode == QLatin1String("full")) m_fullTtftByPrefix[r.prefix_tokens] = r.timings.ttft_ms;
    if (r.full) m_fullTtftByPrefix[r.full->prefix_tokens] = r.full->timings.ttft_ms;
    // per-tool NoPE is an experiment, not a cache lookup: only its full-prefill run is counted (above)
    if (rec.mode != QLatin1String("full") && rec.mode != QLatin1String("per_tool_nope")) {
        ++m_counters.lookups;
        if (r.cache_hit) m_hits.push_back(Hit{r.prefix_tokens, r.timings.ttft_ms});
    }
    if (rec.mode == QLatin1String("compare") && r.full) {
        m_lastCompare = int(m_history.size()) - 1;
        m_lastCompareSeq = ++m_seq;
    }
    ++m_counters.queries;
    recount();
    return m_history.back();
}

void TimingsData::noteCompile(const cc::CompileResult& result) {
    if (result.cache_hit || result.compile_ms <= 0) return;
    m_compileMs[result.group_key] = result.compile_ms;
    m_compileByPrefix[result.prefix_tokens] = result.compile_ms;
}

void TimingsData::beginSweep() {
    m_sweep.clear();
    m_sweepSeq.clear();
}

void TimingsData::addSweepPoint(const SweepPoint& point) {
    m_sweep.push_back(point);
    m_sweepSeq.push_back(++m_seq);
    if (point.compileMs > 0) m_compileByPrefix[point.prefixTokens] = point.compileMs;
    if (point.fullTtftMs > 0) m_fullTtftByPrefix[point.prefixTokens] = point.fullTtftMs;
    recount();
}

void TimingsData::recount() {
    m_counters.hits = int(m_hits.size());
    m_counters.hitsCounted = 0;
    m_counters.savedMs = 0;
    for (const Hit& h : m_hits) {
        const auto it = m_fullTtftByPrefix.find(h.prefixTokens);
        if (it == m_fullTtftByPrefix.end()) continue;
        ++m_counters.hitsCounted;
        m_counters.savedMs += it->second - h.ttftMs;
    }
}

Amortisation TimingsData::amortisation(int nTools) const {
    Amortisation a;
    int sweepIdx = -1;
    for (int i = int(m_sweep.size()) - 1; i >= 0; --i)
        if (nTools == 0 || int(m_sweep[size_t(i)].nTools) == nTools) {
            sweepIdx = i;
            break;
        }
    const uint64_t sweepSeq = sweepIdx >= 0 ? m_sweepSeq[size_t(sweepIdx)] : 0;
    if (sweepIdx < 0 && m_lastCompare < 0) return a;
    if (m_lastCompare >= 0 && m_lastCompareSeq > sweepSeq) {
        const RequestRecord& r = m_history[size_t(m_lastCompare)];
        a.fullTtftMs = r.fullTimings->ttft_ms;
        a.cachedTtftMs = r.timings.ttft_ms;
        const auto it = m_compileMs.find(r.groupKey.toStdString());
        a.compileMeasured = it != m_compileMs.end();
        a.compileMs = a.compileMeasured ? it->second : r.fullTimings->prefill_ms;
        a.source = QStringLiteral("request #%1 (compare mode, %2 tools, %3 prefix tokens)")
                       .arg(r.index)
                       .arg(r.nTools)
                       .arg(r.prefixTokens);
    } else {
        const SweepPoint& p = m_sweep[size_t(sweepIdx)];
        a.fullTtftMs = p.fullTtftMs;
        a.cachedTtftMs = p.cachedTtftMs;
        // a set that was already cached compiled in 0 ms during the sweep: use an earlier measurement
        // of the same prefix length when there is one
        const auto earlier = m_compileByPrefix.find(p.prefixTokens);
        a.compileMeasured = p.compileMs > 0 || earlier != m_compileByPrefix.end();
        a.compileMs = p.compileMs > 0 ? p.compileMs : a.compileMeasured ? earlier->second : p.fullTtftMs;
        a.source = QStringLiteral("sweep point %1 (%2 tools, %3 prefix tokens, medians)")
                       .arg(QString::fromStdString(p.name))
                       .arg(p.nTools)
                       .arg(p.prefixTokens);
    }
    a.valid = true;
    a.savingMs = a.fullTtftMs - a.cachedTtftMs;
    a.breakEven = cc::break_even_requests(a.compileMs, a.savingMs);
    return a;
}

namespace {

// Shortest text that reads back as the same double: the CSV holds the engine's numbers exactly.
QString num(double v) {
    return QString::number(v, 'g', QLocale::FloatingPointShortest);
}

QString csvField(const QString& s) {
    if (!s.contains(QLatin1Char(',')) && !s.contains(QLatin1Char('"')) && !s.contains(QLatin1Char('\n'))) return s;
    QString q = s;
    q.replace(QLatin1String("\""), QLatin1String("\"\""));
    return QLatin1Char('"') + q + QLatin1Char('"');
}

bool openForWrite(QFile& file, QString* error) {
    if (file.open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Text)) return true;
    if (error) *error = QStringLiteral("%1: %2").arg(file.fileName(), file.errorString());
    return false;
}

bool finish(QFile& file, QTextStream& out, QString* error) {
    out.flush();
    if (out.status() == QTextStream::Ok && file.error() == QFileDevice::NoError) return true;
    if (error) *error = QStringLiteral("%1: %2").arg(file.fileName(), file.errorString());
    return false;
}

}  // namespace

QStringList TimingsData::requestsCsvHeader() {
    return {QStringLiteral("index"),         QStringLiteral("request_id"),     QStringLiteral("query"),
            QStringLiteral("mode"),          QStringLiteral("tier"),           QStringLiteral("tools"),
            QStringLiteral("prefix_tokens"), QStringLiteral("suffix_tokens"),  QStringLiteral("generated_tokens"),
            QStringLiteral("tokenize_ms"),   QStringLiteral("lookup_ms"),      QStringLiteral("disk_load_ms"),
            QStringLiteral("upload_ms"),     QStringLiteral("link_ms"),        QStringLiteral("compile_ms"),
            QStringLiteral("prefill_ms"),    QStringLiteral("ttft_ms"),        QStringLiteral("decode_ms"),
            QStringLiteral("total_ms"),      QStringLiteral("identical"),      QStringLiteral("full_prefill_ms"),
            QStringLiteral("full_ttft_ms"),  QStringLiteral("full_decode_ms"), QStringLiteral("full_total_ms"),
            QStringLiteral("turn"),          QStringLiteral("group_reused_tokens"), QStringLiteral("conversation_reused_tokens"),
            QStringLiteral("prefilled_tokens"), QStringLiteral("conversation_link_ms"), QStringLiteral("diverged_at"),
            QStringLiteral("remote_load_ms"), QStringLiteral("remote_load_gb_s"), QStringLiteral("disk_load_gb_s")};
}

bool TimingsData::writeRequestsCsv(const QString& path, QString* error) const {
    QFile file(path);
    if (!openForWrite(file, error)) return false;
    QTextStream out(&file);
    out << requestsCsvHeader().join(QLatin1Char(',')) << '\n';
    for (const RequestRecord& r : m_history) {
        const cc::Timings& t = r.timings;
        QStringList row{QString::number(r.index),
                        QString::number(r.requestId),
                        csvField(r.query),
                        r.mode,
                        tierName(r.tier),
                        QString::number(r.nTools),
                        QString::number(r.prefixTokens),
                        QString::number(r.suffixTokens),
                        QString::number(r.generatedTokens),
                        num(t.tokenize_ms),
                        num(t.lookup_ms),
                        num(t.disk_load_ms),
                        num(t.upload_ms),
                        num(t.link_ms),
                        num(t.compile_ms),
                        num(t.prefill_ms),
                        num(t.ttft_ms),
                        num(t.decode_ms),
                        num(t.total_ms),
                        r.identical ? QString::fromLatin1(*r.identical ? "true" : "false") : QString()};
        if (r.fullTimings)
            row << num(r.fullTimings->prefill_ms) << num(r.fullTimings->ttft_ms) << num(r.fullTimings->decode_ms)
                << num(r.fullTimings->total_ms);
        else
            row << QString() << QString() << QString() << QString();
        row << QString::number(r.turn) << QString::number(r.groupReusedTokens) << QString::number(r.conversationReusedTokens)
            << QString::number(r.prefilledTokens) << num(t.conversation_link_ms)
            << (r.divergedAt ? QString::number(*r.divergedAt) : QString()) << num(t.remote_load_ms)
            << num(t.remote_load_gb_s) << num(t.disk_load_gb_s);
        out << row.join(QLatin1Char(',')) << '\n';
    }
    return finish(file, out, error);
}

bool TimingsData::writeSweepCsv(const QString& path, QString* error) const {
    QFile file(path);
    if (!openForWrite(file, error)) return false;
    QTextStream out(&file);
    out << "set,tools,prefix_tokens,compile_ms,cached_ttft_ms,full_ttft_ms,speedup,cached_link_ms,"
           "cached_prefill_ms,identical\n";
    for (const SweepPoint& p : m_sweep) {
        const double speedup = p.cachedTtftMs > 0 ? p.fullTtftMs / p.cachedTtftMs : 0.0;
        out << csvField(QString::fromStdString(p.name)) << ',' << p.nTools << ',' << p.prefixTokens << ','
            << num(p.compileMs) << ',' << num(p.cachedTtftMs) << ',' << num(p.fullTtftMs) << ',' << num(speedup) << ','
            << num(p.cachedLinkMs) << ',' << num(p.cachedPrefillMs) << ',' << (p.identical ? "true" : "false") << '\n';
    }
    return finish(file, out, error);
}

}  // namespace cc::ui
