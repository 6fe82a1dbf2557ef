#include "ui/panels/server_panel.h"

#include "ui/worker/engine_controller.h"

#include <QDateTime>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPainter>
#include <QPushButton>
#include <QSpinBox>
#include <QStyledItemDelegate>
#include <QTableWidget>
#include <QThread>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>

namespace cc::ui {
namespace {

constexpr int kMaxLogRows = 500;

// The request's timing split as a bar: queue | link | compile | prefill | decode, scaled to its total.
struct Split {
    double queue, link, compile, prefill, decode, total;
};

class SplitDelegate : public QStyledItemDelegate {
public:
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override {
        QStyledItemDelegate::paint(painter, option, index);
        const QVariantList v = index.data(Qt::UserRole).toList();
        if (v.size() != 6) return;
        const double total = v[5].toDouble();
        if (total <= 0) return;
        static const QColor colors[5] = {QColor(0x9e, 0x9e, 0x9e), QColor(0x42, 0x85, 0xf4), QColor(0xdb, 0x44, 0x37),
                                         QColor(0xf4, 0xb4, 0x00), QColor(0x0f, 0x9d, 0x58)};
        const QRect r = option.rect.adjusted(2, 4, -2, -4);
        double x = r.left();
        painter->save();
        for (int i = 0; i < 5; ++i) {
            const double w = r.width() * std::min(1.0, v[i].toDouble() / total);
            if (w >= 0.5) painter->fillRect(QRectF(x, r.top(), w, r.height()), colors[i]);
            x += w;
        }
        painter->restore();
    }
};

QString ms(double v) { return v < 10 ? QString::number(v, 'f', 1) : QString::number(v, 'f', 0); }

}  // namespace

ServerPanel::ServerPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine) {
    m_host = new QLineEdit(QStringLiteral("127.0.0.1"));
    m_host->setToolTip(tr("The address to listen on. 127.0.0.1 (loopback) unless you mean to serve other machines."));
    m_port = new QSpinBox;
    m_port->setRange(0, 65535);
    m_port->setValue(8080);
    m_port->setToolTip(tr("0 = any free port"));
    m_apiKey = new QLineEdit;
    m_apiKey->setEchoMode(QLineEdit::Password);
    m_apiKey->setPlaceholderText(tr("none"));
    m_apiKey->setToolTip(tr("Clients must send \"Authorization: Bearer KEY\""));
    m_maxQueue = new QSpinBox;
    m_maxQueue->setRange(1, 4096);
    m_maxQueue->setValue(16);
    m_maxQueue->setToolTip(tr("Requests waiting for the engine; more get 429 Too Many Requests"));
    m_parallel = new QSpinBox;
    m_parallel->setRange(1, 256);
    m_parallel->setValue(std::clamp(4 * std::max(1, QThread::idealThreadCount()), 4, 16));
    m_parallel->setToolTip(tr("Requests served at once: their tokens share the engine's steps (continuous "
                              "batching), each reply still bit-identical to the request alone"));
    m_startButton = new QPushButton(tr("Start"));
    m_stopButton = new QPushButton(tr("Stop"));
    m_address = new QLabel;
    m_address->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_stats = new QLabel;
    m_stats->setWordWrap(true);
    m_message = new QLabel;
    m_message->setWordWrap(true);
    m_message->setStyleSheet(QStringLiteral("color: #c62828"));
    m_log = new QTableWidget(0, NColumns);
    m_log->setHorizontalHeaderLabels({tr("time"), tr("request"), tr("status"), tr("tier"), tr("cached / prompt"),
                                      tr("TTFT ms"), tr("batch"), tr("queue | link | compile | prefill | decode")});
    m_log->horizontalHeader()->setStretchLastSection(true);
    m_log->verticalHeader()->hide();
    m_log->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_log->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_log->setItemDelegateForColumn(Split, new SplitDelegate(m_log));

    auto* form = new QFormLayout;
    auto* hostRow = new QHBoxLayout;
    hostRow->addWidget(m_host, 1);
    hostRow->addWidget(new QLabel(tr("port")));
    hostRow->addWidget(m_port);
    form->addRow(tr("Listen on"), hostRow);
    form->addRow(tr("API key"), m_apiKey);
    auto* requestsRow = new QHBoxLayout;
    requestsRow->addWidget(m_parallel);
    requestsRow->addWidget(new QLabel(tr("at once, queue")));
    requestsRow->addWidget(m_maxQueue);
    requestsRow->addStretch(1);
    form->addRow(tr("Requests"), requestsRow);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_startButton);
    buttons->addWidget(m_stopButton);
    buttons->addWidget(m_address, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addLayout(buttons);
    layout->addWidget(m_message);
    layout->addWidget(m_stats);
    layout->addWidget(m_log, 1);

    m_timer = new QTimer(this);
    m_timer->setInterval(500);
    connect(m_timer, &QTimer::timeout, this, &ServerPanel::refreshStats);
    connect(m_startButton, &QPushButton::clicked, this, &ServerPanel::start);
    connect(m_stopButton, &QPushButton::clicked, this, &ServerPanel::stop);
    connect(m_engine, &EngineController::modelLoaded, this, [this] { refreshEnabled(); });
    refreshEnabled();
    refreshStats();
}

ServerPanel::~ServerPanel() {
    if (m_server) m_server->stop();
}

bool ServerPanel::running() const { return m_server && m_server->running(); }
int ServerPanel::port() const { return running() ? m_server->port() : 0; }
QString ServerPanel::address() const { return running() ? QString::fromStdString(m_server->address()) : QString(); }
QString ServerPanel::statusText() const { return m_stats->text(); }
int ServerPanel::logRows() const { return m_log->rowCount(); }
void ServerPanel::setPort(int port) { m_port->setValue(port); }
void ServerPanel::setHost(const QString& host) { m_host->setText(host); }

void ServerPanel::start() {
    if (m_starting || running()) return;
    if (!m_engine->modelInfo()) {
        onFailed(tr("Load a model first: the server serves the model the app has loaded."));
        return;
    }
    m_message->clear();
    m_starting = true;
    refreshEnabled();
    m_address->setText(tr("starting: loading the model…"));
    cc::serve::ServerOptions options;
    options.host = m_host->text().trimmed().toStdString();
    options.port = m_port->value();
    options.api_key = m_apiKey->text().toStdString();
    options.max_queue = static_cast<size_t>(m_maxQueue->value());
    cc::EngineOptions engine = m_engine->engineOptions();
    engine.parallel = m_parallel->value();
    // as `serve`: the running replies' KV blocks take warm pages
    engine.kv_warm_bytes = cc::serve::kDefaultKvWarmMb << 20;
    auto server = std::make_shared<cc::serve::Server>(engine, options);
    QPointer<ServerPanel> self(this);
    server->set_request_listener([self](const cc::serve::RequestLogEntry& entry) {
        // a handler thread: hand the entry to the GUI thread
        if (self) QMetaObject::invokeMethod(self, [self, entry] { if (self) self->addEntry(entry); }, Qt::QueuedConnection);
    });
    // Server::start loads the model and binds: off the GUI thread.
    QThread* thread = QThread::create([self, server] {
        try {
            server->start();
            QMetaObject::invokeMethod(self, [self, server] { if (self) self->onStarted(server); }, Qt::QueuedConnection);
        } catch (const std::exception& e) {
            const QString message = QString::fromStdString(e.what());
            QMetaObject::invokeMethod(self, [self, message] { if (self) self->onFailed(message); }, Qt::QueuedConnection);
        }
    });
    connect(thread, &QThread::finished, thread, &QObject::deleteLater);
    thread->start();
}

void ServerPanel::onStarted(std::shared_ptr<cc::serve::Server> server) {
    m_starting = false;
    m_server = std::move(server);
    const QString addr = QString::fromStdString(m_server->address());
    QString text = tr("serving on <b>%1</b> — OpenAI base URL %1/v1").arg(addr);
    if (m_host->text().trimmed() != QStringLiteral("127.0.0.1") && m_host->text().trimmed() != QStringLiteral("localhost"))
        text += tr("<br><span style='color:#c62828'>not loopback: other machines can reach it%1</span>")
                    .arg(m_apiKey->text().isEmpty() ? tr(", and no API key is set") : QString());
    m_address->setText(text);
    m_timer->start();
    refreshEnabled();
    refreshStats();
    emit started(addr);
}

void ServerPanel::onFailed(const QString& message) {
    m_starting = false;
    m_message->setText(tr("The server did not start: %1").arg(message));
    m_address->clear();
    refreshEnabled();
    emit failed(message);
}

void ServerPanel::stop() {
    if (!m_server) return;
    m_server->stop();
    m_server.reset();
    m_timer->stop();
    m_address->setText(tr("stopped"));
    refreshEnabled();
    refreshStats();
    emit stopped();
}

void ServerPanel::addEntry(const cc::serve::RequestLogEntry& e) {
    m_log->insertRow(0);
    const auto item = [](const QString& text) {
        auto* it = new QTableWidgetItem(text);
        it->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
        return it;
    };
    m_log->setItem(0, Time, item(QDateTime::fromMSecsSinceEpoch(e.unix_ms).toString(QStringLiteral("HH:mm:ss.zzz"))));
    m_log->setItem(0, Request, item(QString::fromStdString(e.method + " " + e.endpoint) + (e.stream ? tr(" (stream)") : QString())));
    auto* status = item(QString::number(e.status));
    if (!e.error.empty()) status->setToolTip(QString::fromStdString(e.error));
    if (e.status >= 400) status->setForeground(QColor(0xc6, 0x28, 0x28));
    m_log->setItem(0, Status, status);
    m_log->setItem(0, Tier, item(e.tier ? tierName(*e.tier) : QStringLiteral("—")));
    m_log->setItem(0, Tokens, item(e.prompt_tokens ? QStringLiteral("%1 / %2").arg(e.cached_tokens).arg(e.prompt_tokens)
                                                   : QStringLiteral("—")));
    m_log->setItem(0, Ttft, item(e.ttft_ms > 0 ? ms(e.ttft_ms) : QStringLiteral("—")));
    auto* batch = item(e.batch_sequences > 0 ? QString::number(e.batch_sequences) : QStringLiteral("—"));
    batch->setToolTip(tr("the most requests that shared one engine step with this one"));
    m_log->setItem(0, Batch, batch);
    auto* split = item(QString());
    split->setData(Qt::UserRole, QVariantList{e.queue_ms, e.link_ms, e.compile_ms, e.prefill_ms, e.decode_ms, e.total_ms});
    split->setToolTip(tr("queue %1 ms | link %2 | compile %3 | prefill %4 | decode %5 | total %6 ms")
                          .arg(ms(e.queue_ms), ms(e.link_ms), ms(e.compile_ms), ms(e.prefill_ms), ms(e.decode_ms),
                               ms(e.total_ms)));
    m_log->setItem(0, Split, split);
    while (m_log->rowCount() > kMaxLogRows) m_log->removeRow(m_log->rowCount() - 1);
    refreshStats();
}

void ServerPanel::refreshStats() {
    if (!m_server) {
        m_stats->setText(m_engine->modelInfo() ? tr("Not serving. Start serves the loaded model over HTTP "
                                                   "(OpenAI chat completions, the paper's endpoints, /metrics).")
                                               : tr("Not serving. Load a model first."));
        return;
    }
    const auto s = m_server->snapshot();
    QStringList tiers;
    for (const auto& [tier, n] : cc::serve::by_tier_names(s.by_tier)) tiers << QStringLiteral("%1 %2").arg(QString::fromStdString(tier)).arg(n);
    m_stats->setText(tr("%1 requests · hit rate %2% (%3) · queue %4 / %5%6 · %7 tokens reused, %8 prefilled · "
                        "%9 rejected (429), %10 cancelled · running %11 / %12")
                         .arg(s.requests)
                         .arg(QString::number(100.0 * s.hit_rate, 'f', 0))
                         .arg(tiers.isEmpty() ? tr("no lookups yet") : tiers.join(QStringLiteral(", ")))
                         .arg(s.queue_depth)
                         .arg(s.max_queue)
                         .arg(s.busy ? tr(", busy") : QString())
                         .arg(s.reused_tokens)
                         .arg(s.prefilled_tokens)
                         .arg(s.rejected_queue_full)
                         .arg(s.cancelled)
                         .arg(s.running)
                         .arg(s.parallel));
}

void ServerPanel::refreshEnabled() {
    const bool on = running();
    m_startButton->setEnabled(!on && !m_starting && m_engine->modelInfo());
    m_stopButton->setEnabled(on);
    for (QWidget* w : {static_cast<QWidget*>(m_host), static_cast<QWidget*>(m_port), static_cast<QWidget*>(m_apiKey),
                       static_cast<QWidget*>(m_maxQueue), static_cast<QWidget*>(m_parallel)})
        w->setEnabled(!on && !m_starting);
}

}  // namespace cc::ui
