#include "ui/panels/cache_panel.h"

#include "ui/panels/cache_model.h"
#include "ui/worker/engine_controller.h"

#include <QDesktopServices>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QUrl>
#include <QVBoxLayout>

#include <algorithm>
#include <set>

namespace cc::ui {

namespace {

// Usage in permille of the budget, so a few MiB of a 32 GiB budget still moves the bar.
void showUsage(QProgressBar* bar, QLabel* label, const QString& what, uint64_t bytes, uint64_t budget) {
    const double fraction = budget ? double(bytes) / double(budget) : 0.0;
    bar->setRange(0, 1000);
    bar->setValue(int(std::clamp(fraction * 1000.0, 0.0, 1000.0) + 0.5));
    bar->setFormat(QStringLiteral("%1 of %2 (%3%)")
                       .arg(humanBytes(bytes), humanBytes(budget))
                       .arg(fraction * 100, 0, 'f', fraction < 0.1 ? 2 : 1));
    bar->setProperty("bytes", QVariant::fromValue<qulonglong>(bytes));
    bar->setProperty("budgetBytes", QVariant::fromValue<qulonglong>(budget));
    label->setText(what);
}

}  // namespace

CachePanel::CachePanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine) {
    auto* layout = new QVBoxLayout(this);

    auto* buttons = new QHBoxLayout;
    auto button = [&](const QString& text, const QString& tip) {
        auto* b = new QPushButton(text, this);
        b->setToolTip(tip);
        buttons->addWidget(b);
        return b;
    };
    m_refreshButton = button(tr("Refresh"), tr("Read the cache directory and the memory tier again"));
    m_verifyButton = button(tr("Verify"), tr("Read every group file and check its header, size, token ids and "
                                             "per-layer checksums; damaged files are reported and moved aside"));
    m_deleteButton = button(tr("Delete…"), tr("Remove the selected groups from every tier, their files included"));
    m_evictButton =
        button(tr("Evict from memory"), tr("Drop the selected groups from the memory tier; their files "
                                           "stay, so the next use is a disk hit (only for groups on disk)"));
    m_clearButton = button(tr("Clear…"), tr("Remove every group from every tier and delete all group files"));
    m_openButton = button(tr("Open folder"), tr("Open the cache directory in the file manager"));
    buttons->addStretch(1);
    layout->addLayout(buttons);

    m_model = new CacheTableModel(this);
    m_proxy = new QSortFilterProxyModel(this);
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(CacheTableModel::kSortRole);
    m_view = new QTableView(this);
    m_view->setModel(m_proxy);
    m_view->setSortingEnabled(true);
    m_view->sortByColumn(CacheTableModel::LastUsed, Qt::DescendingOrder);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_view->verticalHeader()->hide();
    m_view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_view->horizontalHeader()->setStretchLastSection(false);
    m_view->setToolTip(tr("Cached tool-set groups; click a header to sort, hover a key for the whole of it"));
    layout->addWidget(m_view, 1);

    auto* usage = new QGridLayout;
    m_memoryLabel = new QLabel(tr("Memory tier"), this);
    m_diskLabel = new QLabel(tr("Disk"), this);
    m_memoryBar = new QProgressBar(this);
    m_diskBar = new QProgressBar(this);
    m_memoryBar->setToolTip(
        tr("KV bytes held in host RAM against the host budget; least recently used groups "
           "leave memory first when it is exceeded"));
    m_diskBar->setToolTip(tr("Group file bytes in the cache directory against the disk budget"));
    m_memoryLabel->setToolTip(m_memoryBar->toolTip());
    m_diskLabel->setToolTip(m_diskBar->toolTip());
    usage->addWidget(m_memoryLabel, 0, 0);
    usage->addWidget(m_memoryBar, 0, 1);
    usage->addWidget(m_diskLabel, 1, 0);
    usage->addWidget(m_diskBar, 1, 1);
    // The GPU tier (device KV, CUDA backend only): shown once a snapshot says the backend has one.
    m_gpuLabel = new QLabel(tr("GPU tier"), this);
    m_gpuBar = new QProgressBar(this);
    m_gpuBar->setObjectName(QStringLiteral("gpuTierBar"));
    m_gpuBar->setToolTip(tr("KV bytes held in device memory against the GPU budget; least recently used groups "
                            "move to host memory when it is exceeded"));
    m_gpuLabel->setToolTip(m_gpuBar->toolTip());
    usage->addWidget(m_gpuLabel, 2, 0);
    usage->addWidget(m_gpuBar, 2, 1);
    m_gpuLabel->setVisible(false);
    m_gpuBar->setVisible(false);
    usage->setColumnStretch(1, 1);
    layout->addLayout(usage);
    showUsage(m_memoryBar, m_memoryLabel, tr("Memory tier"), 0, 0);
    showUsage(m_diskBar, m_diskLabel, tr("Disk"), 0, 0);

    m_status = new QLabel(this);
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_status->setToolTip(tr("The cache directory and the result of the last action"));
    layout->addWidget(m_status);

    connect(m_refreshButton, &QPushButton::clicked, this, &CachePanel::refresh);
    connect(m_verifyButton, &QPushButton::clicked, this, &CachePanel::verify);
    connect(m_deleteButton, &QPushButton::clicked, this, &CachePanel::deleteSelected);
    connect(m_evictButton, &QPushButton::clicked, this, &CachePanel::evictSelected);
    connect(m_clearButton, &QPushButton::clicked, this, &CachePanel::clearAll);
    connect(m_openButton, &QPushButton::clicked, this, &CachePanel::openFolder);
    connect(m_view->selectionModel(), &QItemSelectionModel::selectionChanged, this, &CachePanel::refreshEnabled);

    connect(m_engine, &EngineController::cacheListed, this, &CachePanel::onListed);
    connect(m_engine, &EngineController::cacheChanged, this, &CachePanel::refresh);
    connect(m_engine, &EngineController::compiled, this, &CachePanel::refresh);
    connect(m_engine, &EngineController::modelLoaded, this, &CachePanel::refresh);
    connect(m_engine, &EngineController::queryFinished, this, &CachePanel::refresh);  // hits, last used
    connect(m_engine, &EngineController::cacheVerified, this, [this](const QStringList& problems) {
        const QString text = problems.isEmpty()
                                 ? tr("All %1 files verified.").arg(m_model->rowCount())
                                 : tr("%1 problem(s):\n%2").arg(problems.size()).arg(problems.join(QLatin1Char('\n')));
        setStatus(text);
        auto* box = new QMessageBox(problems.isEmpty() ? QMessageBox::Information : QMessageBox::Warning,
                                    tr("Verify cache"), text, QMessageBox::Ok, this);
        box->setAttribute(Qt::WA_DeleteOnClose);
        box->setObjectName(QStringLiteral("verifyMessage"));
        box->open();  // not exec(): never a nested event loop
    });
    connect(m_engine, &EngineController::failed, this, [this](const QString& task, const QString& message) {
        if (task == QLatin1String("cache") || task == QLatin1String("verify")) setStatus(tr("Failed: %1").arg(message));
    });
    refreshEnabled();
}

QString CachePanel::statusText() const {
    return m_status->text();
}

void CachePanel::setStatus(const QString& text) {
    m_message = text;
    renderStatus();
}

void CachePanel::renderStatus() {
    const CacheSnapshot& s = m_model->snapshot();
    QString head =
        s.dir.empty() ? tr("Memory-only cache") : tr("Cache directory: %1").arg(QString::fromStdString(s.dir));
    head += tr(" · %n group(s)", nullptr, int(s.groups.size()));
    m_status->setText(m_message.isEmpty() ? head : head + QLatin1Char('\n') + m_message);
}

QStringList CachePanel::selectedKeys() const {
    QStringList keys;
    for (const QModelIndex& index : m_view->selectionModel()->selectedRows())
        keys << index.data(CacheTableModel::kKeyRole).toString();
    return keys;
}

bool CachePanel::selectGroup(const QString& groupKey) {
    const int row = m_model->rowOf(groupKey);
    if (row < 0) return false;
    const QModelIndex index = m_proxy->mapFromSource(m_model->index(row, 0));
    m_view->selectionModel()->select(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    m_view->setCurrentIndex(index);
    return true;
}

void CachePanel::refresh() {
    if (m_engine->modelInfo()) m_engine->listCache();
}

void CachePanel::onListed(const CacheSnapshot& snapshot) {
    const QStringList selected = selectedKeys();
    m_model->setSnapshot(snapshot);
    for (const QString& key : selected) {
        const int row = m_model->rowOf(key);
        if (row < 0) continue;
        m_view->selectionModel()->select(m_proxy->mapFromSource(m_model->index(row, 0)),
                                         QItemSelectionModel::Select | QItemSelectionModel::Rows);
    }
    showUsage(m_memoryBar, m_memoryLabel, tr("Memory tier"), snapshot.memoryBytes, snapshot.hostBudgetBytes);
    m_gpuLabel->setVisible(snapshot.onDevice);
    m_gpuBar->setVisible(snapshot.onDevice);
    if (snapshot.onDevice) showUsage(m_gpuBar, m_gpuLabel, tr("GPU tier"), snapshot.gpuBytes, snapshot.gpuBudgetBytes);
    if (snapshot.dir.empty()) {
        showUsage(m_diskBar, m_diskLabel, tr("Disk (none: memory-only cache)"), 0, 0);
    } else {
        showUsage(m_diskBar, m_diskLabel, tr("Disk"), snapshot.diskBytes, snapshot.diskBudgetBytes);
    }
    renderStatus();
    refreshEnabled();
}

void CachePanel::refreshEnabled() {
    const bool loaded = m_engine->modelInfo() != nullptr;
    const CacheSnapshot& s = m_model->snapshot();
    const bool persistent = !s.dir.empty();
    const bool any = !s.groups.empty();
    bool evictable = false;
    int nSelected = 0;
    for (const QModelIndex& index : m_view->selectionModel()->selectedRows()) {
        ++nSelected;
        const cc::GroupInfo* g = m_model->group(m_proxy->mapToSource(index).row());
        // a group only in memory would be lost, not evicted
        if (g && (g->tier == cc::Tier::memory || g->tier == cc::Tier::gpu) && g->file_bytes > 0) evictable = true;
    }
    m_refreshButton->setEnabled(loaded);
    m_verifyButton->setEnabled(loaded && persistent && any);
    m_deleteButton->setEnabled(loaded && nSelected > 0);
    m_evictButton->setEnabled(loaded && evictable);
    m_clearButton->setEnabled(loaded && any);
    m_openButton->setEnabled(persistent);
}

void CachePanel::verify() {
    setStatus(tr("Verifying…"));
    m_engine->verifyCache();
}

void CachePanel::deleteSelected() {
    const QStringList keys = selectedKeys();
    if (keys.isEmpty()) return;
    if (m_confirm) {
        QStringList shortKeys;
        for (const QString& k : keys) shortKeys << k.left(16);
        const auto answer = QMessageBox::question(
            this, tr("Delete cached groups"),
            tr("Delete %n group(s) from memory and disk?\n%1\nThe next use recompiles them.", nullptr, int(keys.size()))
                .arg(shortKeys.join(QLatin1Char('\n'))));
        if (answer != QMessageBox::Yes) return;
    }
    for (const QString& key : keys) m_engine->removeGroup(key);
    setStatus(tr("Deleted %n group(s).", nullptr, int(keys.size())));
}

void CachePanel::evictSelected() {
    int n = 0;
    for (const QModelIndex& index : m_view->selectionModel()->selectedRows()) {
        const cc::GroupInfo* g = m_model->group(m_proxy->mapToSource(index).row());
        if (!g || (g->tier != cc::Tier::memory && g->tier != cc::Tier::gpu) || g->file_bytes == 0) continue;
        m_engine->evictGroup(QString::fromStdString(g->group_key));
        ++n;
    }
    if (n) setStatus(tr("Evicted %n group(s) from memory; they stay on disk.", nullptr, n));
}

void CachePanel::clearAll() {
    if (m_model->snapshot().groups.empty()) return;
    if (m_confirm && QMessageBox::question(this, tr("Clear the cache"),
                                           tr("Remove all %1 groups from every tier and delete their files?")
                                               .arg(m_model->snapshot().groups.size())) != QMessageBox::Yes)
        return;
    m_engine->clearCache();
    setStatus(tr("Cache cleared."));
}

void CachePanel::openFolder() {
    const QString dir = QString::fromStdString(m_model->snapshot().dir);
    if (!dir.isEmpty()) QDesktopServices::openUrl(QUrl::fromLocalFile(dir));
}

}  // namespace cc::ui
