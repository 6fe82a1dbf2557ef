#include "ui/panels/cache_model.h"

#include <QDateTime>
#include <QFontDatabase>

namespace cc::ui {

QString humanBytes(uint64_t bytes) {
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = double(bytes);
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        ++u;
    }
    return u == 0 ? QStringLiteral("%1 B").arg(bytes)
                  : QStringLiteral("%1 %2").arg(v, 0, 'f', v < 10 ? 2 : 1).arg(QString::fromLatin1(units[u]));
}

namespace {

QString when(int64_t unixMs) {
    if (unixMs <= 0) return QStringLiteral("–");
    return QDateTime::fromMSecsSinceEpoch(unixMs).toString(QStringLiteral("yyyy-MM-dd HH:mm:ss"));
}

QString tierText(const cc::GroupInfo& g) {
    if (g.tier == cc::Tier::memory && g.file_bytes > 0) return QStringLiteral("memory + disk");
    if (g.tier == cc::Tier::gpu && g.file_bytes > 0) return QStringLiteral("gpu + disk");
    return tierName(g.tier);
}

}  // namespace

void CacheTableModel::setSnapshot(const CacheSnapshot& snapshot) {
    beginResetModel();
    m_snapshot = snapshot;
    endResetModel();
}

const cc::GroupInfo* CacheTableModel::group(int row) const {
    return row >= 0 && size_t(row) < m_snapshot.groups.size() ? &m_snapshot.groups[size_t(row)] : nullptr;
}

int CacheTableModel::rowOf(const QString& groupKey) const {
    for (size_t i = 0; i < m_snapshot.groups.size(); ++i)
        if (QString::fromStdString(m_snapshot.groups[i].group_key) == groupKey) return int(i);
    return -1;
}

int CacheTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(m_snapshot.groups.size());
}
int CacheTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant CacheTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
    static const char* const names[ColumnCount] = {"Key",  "Tools",   "Tokens",    "Size",
                                                   "Tier", "Created", "Last used", "Hits"};
    static const char* const tips[ColumnCount] = {
        ("group_key: SHA-256 of the model, chat format, numerics, system prompt and tool set (hover a key for all "
         "of it)"),  // one tip: () tells clang it is meant
        "Tools in the group",
        "Prefix tokens whose K/V are stored",
        "Bytes of the group file on disk (or of the KV in memory when not written)",
        "memory: in the host-RAM tier (also on disk when written); disk: in the group file only",
        "When the group was compiled",
        "When a query or a compile last used it",
        "Times it was found in the cache"};
    if (role == Qt::DisplayRole) return QString::fromLatin1(names[section]);
    if (role == Qt::ToolTipRole) return QString::fromLatin1(tips[section]);
    return {};
}

QVariant CacheTableModel::data(const QModelIndex& index, int role) const {
    const cc::GroupInfo* g = index.isValid() ? group(index.row()) : nullptr;
    if (!g) return {};
    const QString key = QString::fromStdString(g->group_key);
    const uint64_t size = g->file_bytes > 0 ? g->file_bytes : g->kv_bytes;
    if (role == kKeyRole) return key;
    if (role == Qt::FontRole && index.column() == Key) return QFontDatabase::systemFont(QFontDatabase::FixedFont);
    if (role == Qt::TextAlignmentRole)
        return index.column() == Tools || index.column() == Tokens || index.column() == Size || index.column() == Hits
                   ? int(Qt::AlignRight | Qt::AlignVCenter)
                   : int(Qt::AlignLeft | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole) {
        QStringList names;
        for (const auto& n : g->tool_names) names << QString::fromStdString(n);
        return QStringLiteral("%1\ntools_hash %2\n%3 tools: %4\nKV %5 · file %6%7")
            .arg(key, QString::fromStdString(g->tools_hash))
            .arg(names.size())
            .arg(names.join(QStringLiteral(", ")))
            .arg(humanBytes(g->kv_bytes), g->file_bytes ? humanBytes(g->file_bytes) : QStringLiteral("not written"),
                 g->in_use ? QStringLiteral("\nin use by the current tool set") : QString());
    }
    if (role == kSortRole) {
        switch (index.column()) {
            case Key:
                return key;
            case Tools:
                return qulonglong(g->tool_names.size());
            case Tokens:
                return qulonglong(g->n_tokens());
            case Size:
                return qulonglong(size);
            case Tier:
                return tierText(*g);
            case Created:
                return qlonglong(g->created_unix_ms);
            case LastUsed:
                return qlonglong(g->last_used_unix_ms);
            case Hits:
                return qulonglong(g->hits);
        }
    }
    if (role != Qt::DisplayRole) return {};
    switch (index.column()) {
        case Key:
            return key.left(12) + QStringLiteral("…");
        case Tools:
            return qulonglong(g->tool_names.size());
        case Tokens:
            return qulonglong(g->n_tokens());
        case Size:
            return humanBytes(size);
        case Tier:
            return tierText(*g);
        case Created:
            return when(g->created_unix_ms);
        case LastUsed:
            return when(g->last_used_unix_ms);
        case Hits:
            return qulonglong(g->hits);
    }
    return {};
}

}  // namespace cc::ui
