// The main window (DESIGN §10): one EngineController, the five panels in rearrangeable docks,
// banners for the synthetic-weights model and for errors, a status bar with model, backend,
// threads, process memory, cache usage and the running task (progress + Cancel), View menu with
// dock toggles, Reset layout, Theme and Presentation mode; settings persisted with QSettings.
#pragma once

#include "ui/worker/engine_controller.h"
#include "ui/widgets/theme.h"

#include <QMainWindow>
#include <QPointer>
#include <QString>

class QActionGroup;
class QDockWidget;
class QLabel;
class QMenu;
class QProgressBar;
class QTimer;
class QToolButton;
class QVBoxLayout;

namespace cc::ui {

class CachePanel;
class MessageBanner;
class ModelPanel;
class QueryPanel;
class TimingsPanel;
class ToolSetPanel;

struct MainWindowOptions {
    QString modelSpec;          // overrides the saved model ("" = the saved one, else the default)
    QString cacheDir;           // overrides the saved cache directory
    int threads = -1;           // overrides the saved thread count (-1 = keep)
    bool autoLoad = true;       // load the model in the background once the window exists
    bool useSettings = true;    // read and write QSettings (the screenshot runner turns it off)
    std::shared_ptr<const cc::BackendRegistry> backends;  // what app/ wired; null = the CPU backend alone
};

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    explicit MainWindow(const MainWindowOptions& options, QWidget* parent = nullptr);
    ~MainWindow() override;

    EngineController* engine() const { return m_engine; }
    ModelPanel* modelPanel() const { return m_modelPanel; }
    ToolSetPanel* toolSetPanel() const { return m_toolSetPanel; }
    QueryPanel* queryPanel() const { return m_queryPanel; }
    TimingsPanel* timingsPanel() const { return m_timingsPanel; }
    CachePanel* cachePanel() const { return m_cachePanel; }

    Theme theme() const { return m_theme; }
    bool presentationMode() const { return m_presentation; }
    QString aboutText() const;   // what the About dialog shows (versions, CUDA)

public slots:
    void saveSettings() const;
    void restoreSettings();
    void resetLayout();
    void setTheme(cc::ui::Theme theme);
    void setPresentationMode(bool on);
    void showError(const QString& message);     // status bar + a dismissible banner
    void showWarning(const QString& message);
    void importTools();                         // Ctrl+O: a file dialog, then importToolsFile
    void importToolsFile(const QString& path);
    void compileTools();                        // Ctrl+B
    void showAbout();                           // F1

protected:
    void closeEvent(QCloseEvent* event) override;
    void showEvent(QShowEvent* event) override;

private:
    void buildDocks();
    void applyDefaultLayout();
    void applyDefaultSizes();
    void buildMenus();
    void buildStatusBar();
    QDockWidget* addPanelDock(QWidget* panel, const QString& title, const QString& objectName, const QString& tip);
    MessageBanner* addBanner(int kind, const QString& text, const QString& objectName);
    // What a built-in model is: synthetic weights, or the small model trained here.
    void updateModelBanner(const cc::ModelInfo* info);
    void onBusyChanged(bool busy, const QString& task);
    void onProgress(const cc::ui::Progress& progress);
    void onModelLoaded(const cc::ModelInfo& info);
    void onCacheListed(const cc::ui::CacheSnapshot& snapshot);
    void updateMemory();

    MainWindowOptions m_options;
    EngineController* m_engine;
    ModelPanel* m_modelPanel = nullptr;
    ToolSetPanel* m_toolSetPanel = nullptr;
    QueryPanel* m_queryPanel = nullptr;
    TimingsPanel* m_timingsPanel = nullptr;
    CachePanel* m_cachePanel = nullptr;
    QDockWidget* m_modelDock = nullptr;
    QDockWidget* m_toolSetDock = nullptr;
    QDockWidget* m_queryDock = nullptr;
    QDockWidget* m_timingsDock = nullptr;
    QDockWidget* m_cacheDock = nullptr;
    QDockWidget* m_benchDock = nullptr;
    QMenu* m_viewMenu = nullptr;
    QActionGroup* m_themeGroup = nullptr;
    QAction* m_presentationAction = nullptr;

    QVBoxLayout* m_bannerLayout = nullptr;
    MessageBanner* m_syntheticBanner = nullptr;

    QLabel* m_modelLabel = nullptr;
    QLabel* m_backendLabel = nullptr;
    QLabel* m_threadsLabel = nullptr;
    QLabel* m_memoryLabel = nullptr;
    QLabel* m_cacheLabel = nullptr;
    QLabel* m_taskLabel = nullptr;
    QProgressBar* m_progress = nullptr;
    QToolButton* m_cancel = nullptr;
    QTimer* m_memoryTimer = nullptr;
    QTimer* m_cacheRefresh = nullptr;

    Theme m_theme = Theme::system;
    bool m_presentation = false;
    bool m_defaultSizesPending = false;   // dock sizes only take once the window is shown
    QFont m_baseFont;

    // Until ToolSetPanel exposes loadToolsFile/compile, Ctrl+O / Ctrl+B keep the imported set here.
};

}  // namespace cc::ui
