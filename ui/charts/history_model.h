// The Timings panel's request history as a table model over TimingsData's records (read-only).
#pragma once

#include "ui/charts/timing_data.h"

#include <QAbstractTableModel>

namespace cc::ui {

class HistoryModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        Index,
        Turn,
        Query,
        Mode,
        Tier,
        Tools,
        PrefixTokens,
        SuffixTokens,
        ConversationTokens,
        NewTokens,
        Link,
        Prefill,
        Ttft,
        FullTtft,
        Decode,
        Total,
        Identical,
        ColumnCount
    };
    HistoryModel(const TimingsData* data, QObject* parent = nullptr);

    void appended();  // TimingsData grew by one record

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    const TimingsData* m_data;
    int m_rows = 0;
};

}  // namespace cc::ui
