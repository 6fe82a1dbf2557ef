// The Cache panel's table: one row per cached group from a CacheSnapshot (read-only).
// Qt::DisplayRole is formatted text; kSortRole the raw value, so the proxy sorts numbers as numbers.
#pragma once

#include "ui/worker/engine_controller.h"

#include <QAbstractTableModel>

namespace cc::ui {

QString humanBytes(uint64_t bytes);  // "401.2 MiB"

class CacheTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Key, Tools, Tokens, Size, Tier, Created, LastUsed, Hits, ColumnCount };
    static constexpr int kSortRole = Qt::UserRole + 1;
    static constexpr int kKeyRole = Qt::UserRole + 2;  // the full group key, on every column

    using QAbstractTableModel::QAbstractTableModel;
    void setSnapshot(const CacheSnapshot& snapshot);
    const CacheSnapshot& snapshot() const { return m_snapshot; }
    const cc::GroupInfo* group(int row) const;
    int rowOf(const QString& groupKey) const;  // -1 when absent

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    CacheSnapshot m_snapshot;
};

}  // namespace cc::ui
