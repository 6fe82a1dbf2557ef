#include "ui/charts/history_model.h"

namespace cc::ui {

HistoryModel::HistoryModel(const TimingsData* data, QObject* parent)
    : QAbstractTableModel(parent), m_data(data), m_rows(int(data->history().size())) {}

void HistoryModel::appended() {
    const int n = int(m_data->history().size());
    if (n <= m_rows) return;
    beginInsertRows({}, m_rows, n - 1);
    m_rows = n;
    endInsertRows();
}

int HistoryModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : m_rows;
}
int HistoryModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant HistoryModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal) return {};
    static const char* const names[ColumnCount] = {
        "#",        "Turn",       "Query",   "Mode",         "Tier",      "Tools",    "Prefix tok", "Suffix tok",
        "Conv tok", "New tok",    "Link ms", "Prefill ms",   "TTFT ms",   "Full TTFT ms", "Decode ms", "Total ms",
        "Identical"};
    static const char* const tips[ColumnCount] = {
        "Request number in this session",
        "The conversation turn (empty for a single query)",
        "The query text (a turn: the user's message)",
        ("cached: link the stored prefix KV and prefill the query only; full: prefill the whole prompt; "
         "compare: both, and check the output is bit-identical"),  // one tip: () tells clang it is meant
        "Where the prefix KV came from: memory, disk, remote (the shared Redis tier), or miss (computed; full runs are always a miss)",
        "Tools in the current tool set",
        "Tokens of the cacheable prefix (system prompt + tool schemas)",
        "Tokens of the query suffix (prefilled on every request)",
        "Prompt tokens reused from a stored conversation state (the turns before)",
        "Prompt tokens computed by this request (the rest of the prompt)",
        "lookup + disk or remote load + upload of the stored KV",
        "Forward pass over the suffix (cached) or the whole prompt (full)",
        "Time to first token: submit to the first sampled token",
        "Compare mode: the full-prefill run's TTFT",
        "The tokens after the first",
        "Submit to the last token",
        "Compare mode: tokens and logits of the cached run equal the full run's bit for bit"};
    if (section < 0 || section >= ColumnCount) return {};
    if (role == Qt::DisplayRole) return QString::fromUtf8(names[section]);
    if (role == Qt::ToolTipRole) return QString::fromUtf8(tips[section]);
    return {};
}

QVariant HistoryModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= m_rows) return {};
    const RequestRecord& r = m_data->history()[size_t(index.row())];
    const cc::Timings& t = r.timings;
    auto ms = [](double v) { return QString::number(v, 'f', 2); };
    if (role == Qt::TextAlignmentRole)
        return index.column() == Query ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole) {
        QString tip = QStringLiteral(
                          "#%1 %2\n%3 · tier %4\nlookup %5 · disk load %6 · remote load %7 · upload %8 · link %9\n"
                          "compile %10 · prefill %11 · TTFT %12 · decode %13 · total %14 ms")
                          .arg(r.index)
                          .arg(r.query, r.mode, tierName(r.tier))
                          .arg(t.lookup_ms)
                          .arg(t.disk_load_ms)
                          .arg(t.remote_load_ms)
                          .arg(t.upload_ms)
                          .arg(t.link_ms)
                          .arg(t.compile_ms)
                          .arg(t.prefill_ms)
                          .arg(t.ttft_ms)
                          .arg(t.decode_ms)
                          .arg(t.total_ms);
        if (r.fullTimings)
            tip += QStringLiteral("\nfull run: prefill %1 · TTFT %2 · decode %3 · total %4 ms")
                       .arg(r.fullTimings->prefill_ms)
                       .arg(r.fullTimings->ttft_ms)
                       .arg(r.fullTimings->decode_ms)
                       .arg(r.fullTimings->total_ms);
        return tip;
    }
    if (role != Qt::DisplayRole) return {};
    switch (index.column()) {
        case Index:
            return r.index;
        case Turn:
            return r.turn > 0 ? QVariant(r.turn) : QVariant(QString());
        case Query:
            return r.query;
        case Mode:
            return r.mode;
        case Tier:
            return tierName(r.tier);
        case Tools:
            return r.nTools;
        case PrefixTokens:
            return qulonglong(r.prefixTokens);
        case SuffixTokens:
            return qulonglong(r.suffixTokens);
        case ConversationTokens:
            return qulonglong(r.conversationReusedTokens);
        case NewTokens:
            return qulonglong(r.prefilledTokens);
        case Link:
            return ms(t.link_ms);
        case Prefill:
            return ms(t.prefill_ms);
        case Ttft:
            return ms(t.ttft_ms);
        case FullTtft:
            return r.fullTimings ? ms(r.fullTimings->ttft_ms) : QString();
        case Decode:
            return ms(t.decode_ms);
        case Total:
            return ms(t.total_ms);
        case Identical:
            return r.identical ? QString::fromLatin1(*r.identical ? "yes" : "NO") : QString();
    }
    return {};
}

}  // namespace cc::ui
