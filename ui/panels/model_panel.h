// Model: built-in model or an HF directory, backend, threads, KV dtype, cache directory, budgets and
// the shared remote tier (Redis URL); loads in the background with progress and Cancel, and shows
// what was loaded (ModelInfo) and whether the remote tier answered.
#pragma once

#include "ui/worker/engine_controller.h"

#include <QWidget>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSettings;
class QSpinBox;
class QToolButton;

namespace cc::ui {

class ModelPanel : public QWidget {
    Q_OBJECT
public:
    explicit ModelPanel(EngineController* engine, QWidget* parent = nullptr);

    // The request the form describes / fills the form from one (a directory not in the list is added).
    ModelRequest request() const;
    void setRequest(const ModelRequest& request);

    void restoreSettings(const QSettings& settings);   // keys under "model/"
    void saveSettings(QSettings& settings) const;

    // CUDA as the About dialog and the backend tooltip tell it: the device probe and what the engine does with it.
    QString cudaStatus() const { return m_cudaStatus; }

public slots:
    void load();              // loads request() (Ctrl+L)
    void chooseDirectory();   // a QFileDialog for an HF model directory

private:
    void addBuiltinModels();
    void selectSpec(const QString& spec);
    void probeCuda();
    void applyCudaStatus(bool deviceFound, const QString& message);
    void showInfo(const cc::ModelInfo& info);
    void setBusy(bool busy, const QString& task);
    // The remote URL as typed: "" when empty or valid, else why not (cc::parse_redis_url's message).
    QString remoteUrlProblem() const;
    void showRemoteStatus(const QString& text, bool error);
    void updateRemoteStatus();   // as typed: none / to be checked at the next load / invalid

    EngineController* m_engine;
    QComboBox* m_model;
    QToolButton* m_browse;
    QComboBox* m_backend;
    QSpinBox* m_threads;
    QComboBox* m_kvDtype;
    QComboBox* m_weightFormat;
    QLineEdit* m_cacheDir;
    QToolButton* m_cacheDirBrowse;
    QDoubleSpinBox* m_hostBudget;   // GiB
    QDoubleSpinBox* m_gpuBudget;    // GiB
    QDoubleSpinBox* m_diskBudget;   // GiB
    QLineEdit* m_remoteUrl;         // redis://host:port[/db], empty = no remote tier
    QLabel* m_remoteStatus;         // what the URL is, or what the last load found there
    QSpinBox* m_remoteWarm;         // MiB kept warm for fetched groups; enabled with a URL
    QPushButton* m_load;
    QPushButton* m_cancel;
    QProgressBar* m_progress;
    QLabel* m_status;               // "loaded in 812 ms" / the load error
    QLabel* m_family;
    QLabel* m_params;
    QLabel* m_weights;
    QLabel* m_loadTime;
    QLabel* m_fingerprint;
    QLabel* m_numerics;
    QLabel* m_backendReason;
    QString m_cudaStatus;
};

}  // namespace cc::ui
