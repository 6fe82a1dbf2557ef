// The Timings panel's model: plain records of what the engine measured, kept apart from the chart
// widgets so tests compare them with the QueryOutcome field by field, and the derived numbers
// (counters, amortisation) computed from them in one place.
#pragma once

#include "core/research/amortisation.h"
#include "ui/worker/engine_controller.h"

#include <QPointF>
#include <QString>
#include <QStringList>

#include <array>
#include <map>
#include <optional>
#include <vector>

namespace cc::ui {

// One finished query, exactly as the engine reported it.
struct RequestRecord {
    int index = 0;  // 1-based, in arrival order
    uint64_t requestId = 0;
    QString query;
    QString mode;  // cached | full | compare
    cc::Tier tier = cc::Tier::miss;  // where the prefix came from (full runs: always miss)
    int nTools = 0;
    int turn = 0;   // the conversation turn (1-based); 0 for a single query
    size_t prefixTokens = 0;
    size_t suffixTokens = 0;
    // Where the prompt came from (the run; in compare mode the cached run): group prefix +
    // stored conversation state + prefilled now = the whole prompt.
    size_t groupReusedTokens = 0;
    size_t conversationReusedTokens = 0;
    size_t prefilledTokens = 0;
    std::optional<size_t> divergedAt;
    size_t generatedTokens = 0;
    bool cacheHit = false;
    QString groupKey;
    cc::Timings timings;                     // the run (in compare mode: the cached run)
    std::optional<cc::Timings> fullTimings;  // compare mode: the full-prefill run
    std::optional<bool> identical;           // compare mode: bit-identical tokens and logits
};

// The stacked bar's segments, in drawing order. Up to the TTFT marker they add up to ttft_ms:
// "other" is what TTFT holds besides link, compile and prefill (tokenising the query, sampling the
// first token). compile is non-zero only for a cached-mode miss (the prefix computed in the query).
// lookup + disk load + remote load + upload link the group prefix (remote load: fetched from the
// shared Redis tier and verified); "conversation" copies a stored conversation state (a turn after
// the first); prefill computes only the new tokens.
enum Segment {
    SegLookup, SegDiskLoad, SegRemoteLoad, SegUpload, SegConversation, SegCompile, SegPrefill, SegOther, SegDecode,
    SegCount
};
const QStringList& segmentNames();
std::array<double, SegCount> segmentValues(const cc::Timings& t);
// A segment's label: its duration, and for the loads their rate ("12.3 ms · 1.52 GB/s").
QString segmentLabel(int segment, const cc::Timings& t);

struct Counters {
    int queries = 0;      // every finished query
    int lookups = 0;      // queries that went through the cache (cached and compare mode)
    int hits = 0;         // of those, found in memory or on disk
    int hitsCounted = 0;  // hits with a measured full run of the same prefix length
    double savedMs = 0;   // sum over counted hits of (full TTFT - its TTFT)
    double hitRate() const { return lookups ? double(hits) / lookups : 0.0; }
};

struct Amortisation {
    bool valid = false;
    QString source;               // where the numbers come from, for the chart subtitle
    double compileMs = 0;         // the one-time cost
    bool compileMeasured = true;  // false: no compile of this prefix measured this session; the full
                                  // run stands in (its prefill, or a sweep point's full TTFT)
    double fullTtftMs = 0;
    double cachedTtftMs = 0;
    double savingMs = 0;  // per request: full TTFT - cached TTFT
    int breakEven = 0;    // first request at which the saving covers the compile; 0 = never
    double savedAfter(int requests) const { return cc::saved_after_ms(requests, compileMs, savingMs); }
};

class TimingsData {
public:
    const RequestRecord& addOutcome(const QueryOutcome& outcome);
    void noteCompile(const cc::CompileResult& result);
    void beginSweep();
    void addSweepPoint(const SweepPoint& point);

    const std::vector<RequestRecord>& history() const { return m_history; }
    const std::vector<SweepPoint>& sweep() const { return m_sweep; }
    const Counters& counters() const { return m_counters; }
    // From the most recent of: the latest sweep point with `nTools` tools (any sweep point when
    // nTools is 0), the latest compare-mode request.
    Amortisation amortisation(int nTools) const;

    bool writeRequestsCsv(const QString& path, QString* error) const;
    bool writeSweepCsv(const QString& path, QString* error) const;
    static QStringList requestsCsvHeader();

private:
    void recount();

    std::vector<RequestRecord> m_history;
    std::vector<SweepPoint> m_sweep;
    std::vector<uint64_t> m_sweepSeq;  // arrival sequence of each sweep point
    uint64_t m_seq = 0;
    uint64_t m_lastCompareSeq = 0;
    int m_lastCompare = -1;                       // index into m_history
    std::map<std::string, double> m_compileMs;    // group_key -> measured compile (a miss)
    std::map<size_t, double> m_compileByPrefix;   // prefix tokens -> measured compile (sweep points carry no key)
    std::map<size_t, double> m_fullTtftByPrefix;  // prefix tokens -> latest measured full TTFT
    struct Hit {
        size_t prefixTokens;
        double ttftMs;
    };
    std::vector<Hit> m_hits;
    Counters m_counters;
};

// "12.3 ms", "1.23 s"
QString formatMs(double ms);

}  // namespace cc::ui
