// Server: the HTTP server of `contextcache-cli serve` (core/serve), started from the app on the
// model the app has loaded: address, start/stop, a live request log with each request's timing
// bar and tier, hit rate and queue depth. The server runs its own engine (its own thread and
// weights) over the same cache directory, so groups compiled by either are shared through disk.
#pragma once

#include "core/serve/server.h"

#include <QPointer>
#include <QWidget>

#include <memory>

class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTimer;

namespace cc::ui {

class EngineController;

class ServerPanel : public QWidget {
    Q_OBJECT
public:
    explicit ServerPanel(EngineController* engine, QWidget* parent = nullptr);
    ~ServerPanel() override;  // stops the server first (its threads call back into this panel)

    bool running() const;
    int port() const;                 // the bound port while running, else 0
    QString address() const;          // "http://HOST:PORT" while running, else ""
    QString statusText() const;
    int logRows() const;
    QTableWidget* log() const { return m_log; }
    void setPort(int port);           // 0 = an ephemeral port
    void setHost(const QString& host);

    // Request log columns.
    enum Column { Time, Request, Status, Tier, Tokens, Ttft, Batch, Split, NColumns };

public slots:
    void start();   // in the background: the server loads its model first
    void stop();

signals:
    void started(const QString& address);
    void stopped();
    void failed(const QString& message);

private:
    void onStarted(std::shared_ptr<cc::serve::Server> server);
    void onFailed(const QString& message);
    void addEntry(const cc::serve::RequestLogEntry& entry);
    void refreshStats();
    void refreshEnabled();

    EngineController* m_engine;
    std::shared_ptr<cc::serve::Server> m_server;
    bool m_starting = false;
    QLineEdit* m_host = nullptr;
    QSpinBox* m_port = nullptr;
    QLineEdit* m_apiKey = nullptr;
    QSpinBox* m_maxQueue = nullptr;
    QSpinBox* m_parallel = nullptr;
    QPushButton* m_startButton = nullptr;
    QPushButton* m_stopButton = nullptr;
    QLabel* m_address = nullptr;
    QLabel* m_stats = nullptr;
    QLabel* m_message = nullptr;
    QTableWidget* m_log = nullptr;
    QTimer* m_timer = nullptr;
};

}  // namespace cc::ui
