// Cache: table of cached groups with verify / delete / evict / open folder and usage against budgets.
#pragma once

#include <QStringList>
#include <QWidget>

class QLabel;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QTableView;

namespace cc::ui {

class EngineController;
class CacheTableModel;
struct CacheSnapshot;

class CachePanel : public QWidget {
    Q_OBJECT
public:
    explicit CachePanel(EngineController* engine, QWidget* parent = nullptr);

    CacheTableModel* model() const { return m_model; }
    QTableView* view() const { return m_view; }
    QProgressBar* memoryBar() const { return m_memoryBar; }
    QProgressBar* diskBar() const { return m_diskBar; }
    QString statusText() const;
    QStringList selectedKeys() const;

    // Delete and Clear ask first; tests and scripts turn that off.
    void setConfirmDestructive(bool confirm) { m_confirm = confirm; }
    bool selectGroup(const QString& groupKey);  // false when the table does not show it

    void refresh();
    void verify();
    void deleteSelected();
    void evictSelected();
    void clearAll();
    void openFolder();

private:
    void onListed(const CacheSnapshot& snapshot);
    void refreshEnabled();
    void setStatus(const QString& text);
    void renderStatus();

    EngineController* m_engine;
    bool m_confirm = true;
    QString m_message;  // the result of the last action
    CacheTableModel* m_model = nullptr;
    QSortFilterProxyModel* m_proxy = nullptr;
    QTableView* m_view = nullptr;
    QPushButton* m_refreshButton = nullptr;
    QPushButton* m_verifyButton = nullptr;
    QPushButton* m_deleteButton = nullptr;
    QPushButton* m_evictButton = nullptr;
    QPushButton* m_clearButton = nullptr;
    QPushButton* m_openButton = nullptr;
    QProgressBar* m_memoryBar = nullptr;
    QProgressBar* m_diskBar = nullptr;
    QLabel* m_memoryLabel = nullptr;
    QLabel* m_diskLabel = nullptr;
    QProgressBar* m_gpuBar = nullptr;   // hidden unless the backend keeps KV on a GPU
    QLabel* m_gpuLabel = nullptr;
    QLabel* m_status = nullptr;
};

}  // namespace cc::ui
