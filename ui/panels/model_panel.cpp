#include "ui/panels/model_panel.h"

#include "core/model/builtin_model.h"
#include "core/base/paths.h"
#include "core/store/remote_tier.h"
#include "ui/widgets/icons.h"


#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QThread>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <thread>

namespace cc::ui {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

QString humanCount(uint64_t n) {
    if (n >= 1'000'000'000) return QStringLiteral("%1 B").arg(double(n) / 1e9, 0, 'f', 2);
    if (n >= 1'000'000) return QStringLiteral("%1 M").arg(double(n) / 1e6, 0, 'f', 1);
    return QLocale().toString(qulonglong(n));
}

QLabel* valueLabel(QWidget* parent, const QString& name, const QString& tip) {
    auto* label = new QLabel(QStringLiteral("—"), parent);
    label->setObjectName(name);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    label->setToolTip(tip);
    label->setWordWrap(true);
    return label;
}

}  // namespace

ModelPanel::ModelPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine) {
    auto* layout = new QVBoxLayout(this);

    // ---- what to load
    auto* form = new QFormLayout;
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    m_model = new QComboBox(this);
    m_model->setObjectName(QStringLiteral("modelCombo"));
    m_model->setToolTip(tr("The model: a built-in model (Qwen3 architecture, real tokenizer; the small model "
                           "trained here for tool selection, or synthetic weights) or a Hugging Face model directory"));
    m_model->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_model->setMinimumContentsLength(18);
    addBuiltinModels();
    m_browse = new QToolButton(this);
    m_browse->setObjectName(QStringLiteral("browseModelButton"));
    m_browse->setIcon(icon(QStringLiteral("open")));
    m_browse->setToolTip(tr("Choose a Hugging Face model directory (config.json, *.safetensors, tokenizer.json)"));
    connect(m_browse, &QToolButton::clicked, this, &ModelPanel::chooseDirectory);
    auto* modelRow = new QHBoxLayout;
    modelRow->addWidget(m_model, 1);
    modelRow->addWidget(m_browse);
    auto* modelLabel = new QLabel(tr("&Model"), this);
    modelLabel->setBuddy(m_model);
    form->addRow(modelLabel, modelRow);

    m_backend = new QComboBox(this);
    m_backend->setObjectName(QStringLiteral("backendCombo"));
    m_backend->addItem(tr("auto"), QStringLiteral("auto"));
    m_backend->addItem(tr("CPU"), QStringLiteral("cpu"));
    m_backend->addItem(tr("CUDA"), QStringLiteral("cuda"));
    m_backend->setItemData(0, tr("CUDA when a device can run the model, else the CPU"), Qt::ToolTipRole);
    m_backend->setItemData(1, tr("The reference CPU backend (multi-threaded, deterministic)"), Qt::ToolTipRole);
    applyCudaStatus(false, tr("probing for a CUDA device…"));
    form->addRow(tr("&Backend"), m_backend);

    m_threads = new QSpinBox(this);
    m_threads->setObjectName(QStringLiteral("threadsSpin"));
    const int cores = std::max(1, int(std::thread::hardware_concurrency()));
    m_threads->setRange(0, std::max(cores * 2, 64));
    m_threads->setSpecialValueText(tr("all cores (%1)").arg(cores));
    m_threads->setToolTip(tr("CPU threads for the forward pass; 0 = all %1 cores. Results are bit-identical for any count.")
                              .arg(cores));
    form->addRow(tr("&Threads"), m_threads);

    m_kvDtype = new QComboBox(this);
    m_kvDtype->setObjectName(QStringLiteral("kvDtypeCombo"));
    m_kvDtype->addItem(tr("auto (bf16 on a GPU, f32 on the CPU)"), QStringLiteral("auto"));
    m_kvDtype->addItem(QStringLiteral("f32"), QStringLiteral("f32"));
    m_kvDtype->addItem(QStringLiteral("bf16"), QStringLiteral("bf16"));
    m_kvDtype->setToolTip(tr("How the K/V of the prefix are stored: f32 (exact reference) or bf16 (half the bytes). "
                             "auto takes bf16 where the model runs on a GPU and f32 on the CPU, as the CLI does. "
                             "Part of the cache key: groups of one dtype are not used by the other."));
    form->addRow(tr("&KV dtype"), m_kvDtype);

    m_weightFormat = new QComboBox(this);
    m_weightFormat->setObjectName(QStringLiteral("weightsCombo"));
    m_weightFormat->addItem(tr("as stored"), QStringLiteral("stored"));
    m_weightFormat->addItem(QStringLiteral("f32"), QStringLiteral("f32"));
    m_weightFormat->addItem(QStringLiteral("bf16"), QStringLiteral("bf16"));
    m_weightFormat->addItem(tr("q8 (int8, per-block scales)"), QStringLiteral("q8"));
    m_weightFormat->addItem(tr("bf16dot (BF16 activations, AVX-512 BF16)"), QStringLiteral("bf16dot"));
    m_weightFormat->setToolTip(tr("How the CPU backend holds the weight matrices: as the checkpoint stores them, or converted "
                             "at load (bf16 rounds, q8 quantises; decode reads fewer bytes). bf16dot also rounds the "
                             "activations to BF16 and multiplies pairs with AVX-512 BF16 (about 1.7x the prefill "
                             "arithmetic; CPUs with that instruction only). A converted model has its own cache key. "
                             "The CUDA backend takes the weights as stored."));
    form->addRow(tr("&Weights"), m_weightFormat);
    layout->addLayout(form);

    // ---- advanced: the cache
    // Collapsed by default: most sessions never change it, and the dock is short at 1280x800.
    auto* expander = new QToolButton(this);
    expander->setObjectName(QStringLiteral("advancedToggle"));
    expander->setText(tr("Advanced: cache directory, budgets, remote tier"));
    expander->setCheckable(true);
    expander->setAutoRaise(true);
    expander->setArrowType(Qt::RightArrow);
    expander->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    expander->setToolTip(tr("Show or hide where compiled groups are kept and how much they may use"));
    auto* advanced = new QGroupBox(this);
    advanced->setObjectName(QStringLiteral("advancedGroup"));
    advanced->setToolTip(tr("Where compiled groups are kept and how much they may use; applied on the next load"));
    advanced->setVisible(false);
    connect(expander, &QToolButton::toggled, this, [expander, advanced](bool on) {
        expander->setArrowType(on ? Qt::DownArrow : Qt::RightArrow);
        advanced->setVisible(on);
    });
    layout->addWidget(expander);
    auto* advancedForm = new QFormLayout(advanced);
    advancedForm->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    m_cacheDir = new QLineEdit(advanced);
    m_cacheDir->setObjectName(QStringLiteral("cacheDirEdit"));
    m_cacheDir->setPlaceholderText(QString::fromStdString(cc::default_cache_dir().string()));
    m_cacheDir->setToolTip(tr("Cache directory shared with contextcache-cli; empty = %1")
                               .arg(QString::fromStdString(cc::default_cache_dir().string())));
    m_cacheDirBrowse = new QToolButton(advanced);
    m_cacheDirBrowse->setIcon(icon(QStringLiteral("open")));
    m_cacheDirBrowse->setToolTip(tr("Choose the cache directory"));
    connect(m_cacheDirBrowse, &QToolButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Cache directory"), m_cacheDir->text());
        if (!dir.isEmpty()) m_cacheDir->setText(dir);
    });
    auto* dirRow = new QHBoxLayout;
    dirRow->addWidget(m_cacheDir, 1);
    dirRow->addWidget(m_cacheDirBrowse);
    auto* dirLabel = new QLabel(tr("&Directory"), advanced);
    dirLabel->setBuddy(m_cacheDir);
    advancedForm->addRow(dirLabel, dirRow);
    auto budget = [advanced](const QString& name, const QString& tip, double max) {
        auto* spin = new QDoubleSpinBox(advanced);
        spin->setObjectName(name);
        spin->setDecimals(1);
        spin->setRange(0.1, max);
        spin->setSingleStep(0.5);
        spin->setSuffix(QStringLiteral(" GiB"));
        spin->setToolTip(tip);
        return spin;
    };
    m_hostBudget = budget(QStringLiteral("hostBudgetSpin"),
                          tr("Host RAM for compiled groups (memory tier); least recently used groups leave first"), 1024);
    m_diskBudget = budget(QStringLiteral("diskBudgetSpin"),
                          tr("Disk space for group files in the cache directory; least recently used files are removed first"),
                          100000);
    m_gpuBudget = budget(QStringLiteral("gpuBudgetSpin"),
                         tr("Device memory for compiled groups (GPU tier, CUDA backend only); least recently used "
                            "groups move to host memory first"),
                         1024);
    advancedForm->addRow(tr("&Host budget"), m_hostBudget);
    advancedForm->addRow(tr("&GPU budget"), m_gpuBudget);
    advancedForm->addRow(tr("D&isk budget"), m_diskBudget);
    m_remoteUrl = new QLineEdit(advanced);
    m_remoteUrl->setObjectName(QStringLiteral("remoteUrlEdit"));
    m_remoteUrl->setPlaceholderText(tr("none (redis://host:port[/db])"));
    m_remoteUrl->setClearButtonEnabled(true);
    m_remoteUrl->setToolTip(tr("A shared remote tier on Redis (as contextcache-cli --remote): groups missed here are "
                               "fetched from it, compiled groups published to it, shared with other machines and "
                               "replicas running the same model. redis://[[user]:password@]host:port[/db]; empty = "
                               "none. Applied on the next load."));
    auto* remoteLabel = new QLabel(tr("&Remote"), advanced);
    remoteLabel->setBuddy(m_remoteUrl);
    advancedForm->addRow(remoteLabel, m_remoteUrl);
    m_remoteStatus = new QLabel(advanced);
    m_remoteStatus->setObjectName(QStringLiteral("remoteStatus"));
    m_remoteStatus->setWordWrap(true);
    m_remoteStatus->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_remoteStatus->setToolTip(tr("The remote URL as typed, or whether Redis answered at the last load"));
    advancedForm->addRow(QString(), m_remoteStatus);
    m_remoteWarm = new QSpinBox(advanced);
    m_remoteWarm->setObjectName(QStringLiteral("remoteWarmSpin"));
    m_remoteWarm->setRange(0, 1 << 20);
    m_remoteWarm->setSingleStep(64);
    m_remoteWarm->setSuffix(QStringLiteral(" MiB"));
    m_remoteWarm->setSpecialValueText(tr("none"));
    m_remoteWarm->setToolTip(tr("Memory kept resident for groups fetched from the remote tier (as contextcache-cli "
                                "--remote-warm-mb): a fetch lands in pages that are already there instead of "
                                "page-faulting fresh memory, several times faster on machines where that is slow; "
                                "pages come back when the memory tier lets a group go. Used only with a remote URL. "
                                "Applied on the next load."));
    auto* warmLabel = new QLabel(tr("&Warm pool"), advanced);
    warmLabel->setBuddy(m_remoteWarm);
    advancedForm->addRow(warmLabel, m_remoteWarm);
    connect(m_remoteUrl, &QLineEdit::textChanged, this, &ModelPanel::updateRemoteStatus);
    layout->addWidget(advanced);

    // ---- load
    auto* buttons = new QHBoxLayout;
    m_load = new QPushButton(icon(QStringLiteral("model")), tr("&Load"), this);
    m_load->setObjectName(QStringLiteral("loadButton"));
    m_load->setToolTip(tr("Load the model with these settings in the background (Ctrl+L)"));
    connect(m_load, &QPushButton::clicked, this, &ModelPanel::load);
    m_cancel = new QPushButton(icon(QStringLiteral("cancel")), tr("Cancel"), this);
    m_cancel->setObjectName(QStringLiteral("cancelLoadButton"));
    m_cancel->setToolTip(tr("Stop loading (Esc); weights already being generated finish first, and the previous model stays"));
    m_cancel->setEnabled(false);
    connect(m_cancel, &QPushButton::clicked, m_engine, &EngineController::cancel);
    buttons->addWidget(m_load);
    buttons->addWidget(m_cancel);
    buttons->addStretch(1);
    layout->addLayout(buttons);
    m_progress = new QProgressBar(this);
    m_progress->setObjectName(QStringLiteral("loadProgress"));
    m_progress->setToolTip(tr("Loading the model"));
    m_progress->setRange(0, 0);
    m_progress->setVisible(false);
    m_progress->setMaximumHeight(12);
    m_progress->setTextVisible(false);
    layout->addWidget(m_progress);
    m_status = new QLabel(this);
    m_status->setObjectName(QStringLiteral("modelStatus"));
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_status->setToolTip(tr("The state of the last load"));
    layout->addWidget(m_status);

    // ---- what is loaded
    auto* info = new QGroupBox(tr("Loaded model"), this);
    info->setToolTip(tr("What the engine reports for the model in use"));
    auto* infoForm = new QFormLayout(info);
    m_family = valueLabel(info, QStringLiteral("familyValue"), tr("Model family and chat format"));
    m_params = valueLabel(info, QStringLiteral("paramsValue"), tr("Parameter count (tied embeddings counted once)"));
    m_weights = valueLabel(info, QStringLiteral("weightsValue"), tr("Bytes of weights in memory"));
    m_loadTime = valueLabel(info, QStringLiteral("loadTimeValue"), tr("Time to load (or generate) the weights and start the backend"));
    m_fingerprint = valueLabel(info, QStringLiteral("fingerprintValue"), tr("Model fingerprint (part of every cache key)"));
    m_numerics = valueLabel(info, QStringLiteral("numericsValue"), tr("Backend numerics id: backend, ISA and KV dtype (part of every cache key)"));
    m_backendReason = valueLabel(info, QStringLiteral("backendReasonValue"), tr("Why this backend was used"));
    infoForm->addRow(tr("Family"), m_family);
    infoForm->addRow(tr("Parameters"), m_params);
    infoForm->addRow(tr("Weights"), m_weights);
    infoForm->addRow(tr("Load time"), m_loadTime);
    infoForm->addRow(tr("Fingerprint"), m_fingerprint);
    infoForm->addRow(tr("Numerics"), m_numerics);
    infoForm->addRow(tr("Backend"), m_backendReason);
    layout->addWidget(info);
    layout->addStretch(1);

    setRequest(ModelRequest{});
    connect(m_engine, &EngineController::modelLoaded, this, &ModelPanel::showInfo);
    connect(m_engine, &EngineController::busyChanged, this, &ModelPanel::setBusy);
    connect(m_engine, &EngineController::failed, this, [this](const QString& task, const QString& message) {
        if (task != QLatin1String("load")) return;
        m_status->setText(tr("<b>Load failed:</b> %1").arg(message.toHtmlEscaped()));
    });
    connect(m_engine, &EngineController::cancelled, this, [this](const QString& task) {
        if (task == QLatin1String("load")) m_status->setText(tr("Load cancelled; the previous model stays."));
    });
    connect(m_engine, &EngineController::remoteChecked, this, [this](const QString& where, const QString& problem) {
        if (problem.isEmpty())
            showRemoteStatus(tr("Connected to %1: groups are shared through it.").arg(where), false);
        else
            showRemoteStatus(tr("Unreachable: %1. Groups are compiled and kept on this machine until it answers.")
                                 .arg(problem),
                             true);
    });
    probeCuda();
}

void ModelPanel::addBuiltinModels() {
    for (const auto& recipe : cc::builtin_recipes()) {
        const QString spec = QStringLiteral("builtin:") + QString::fromStdString(recipe.name);
        const uint64_t params = cc::builtin_parameter_count(recipe.config);
        const double bytes = double(params) * 2.0;   // bf16
        QString label = spec;
        const bool isDefault = "builtin:" + recipe.name == cc::default_model_spec();
        if (recipe.trained()) label += isDefault ? tr("  (default; trained here: tool calls)") : tr("  (trained here: tool calls)");
        else if (isDefault) label += tr("  (default)");
        else if (recipe.name == "qwen3-demo") label += tr("  (synthetic; timing demo)");
        else if (recipe.name == "qwen3-test") label += tr("  (tiny, tests)");
        else label += tr("  (%1 params, %2 — slow on CPU)").arg(humanCount(params), QLocale().formattedDataSize(qint64(bytes)));
        m_model->addItem(icon(QStringLiteral("model")), label, spec);
        m_model->setItemData(m_model->count() - 1, QString::fromStdString(recipe.description), Qt::ToolTipRole);
    }
}

void ModelPanel::selectSpec(const QString& spec) {
    int index = m_model->findData(spec);
    if (index < 0) {
        m_model->addItem(icon(QStringLiteral("open")), spec, spec);
        index = m_model->count() - 1;
        m_model->setItemData(index, tr("Hugging Face model directory %1").arg(spec), Qt::ToolTipRole);
    }
    m_model->setCurrentIndex(index);
}

ModelRequest ModelPanel::request() const {
    ModelRequest r;
    r.spec = m_model->currentData().toString().toStdString();
    r.backend = m_backend->currentData().toString().toStdString();
    r.threads = m_threads->value();
    r.kvDtype = m_kvDtype->currentData().toString().toStdString();
    r.weights = m_weightFormat->currentData().toString().toStdString();
    r.cacheDir = m_cacheDir->text().trimmed().toStdString();
    r.hostBudgetBytes = uint64_t(m_hostBudget->value() * kGiB);
    r.diskBudgetBytes = uint64_t(m_diskBudget->value() * kGiB);
    r.gpuBudgetBytes = uint64_t(m_gpuBudget->value() * kGiB);
    r.remoteUrl = m_remoteUrl->text().trimmed().toStdString();
    r.remoteWarmBytes = uint64_t(m_remoteWarm->value()) << 20;
    return r;
}

void ModelPanel::setRequest(const ModelRequest& r) {
    selectSpec(QString::fromStdString(r.spec));
    const int backend = m_backend->findData(QString::fromStdString(r.backend));
    m_backend->setCurrentIndex(backend < 0 ? 0 : backend);
    m_threads->setValue(r.threads);
    const int dtype = m_kvDtype->findData(QString::fromStdString(r.kvDtype));
    m_kvDtype->setCurrentIndex(dtype < 0 ? 0 : dtype);
    const int weights = m_weightFormat->findData(QString::fromStdString(r.weights));
    m_weightFormat->setCurrentIndex(weights < 0 ? 0 : weights);
    m_cacheDir->setText(QString::fromStdString(r.cacheDir));
    m_hostBudget->setValue(double(r.hostBudgetBytes) / kGiB);
    m_diskBudget->setValue(double(r.diskBudgetBytes) / kGiB);
    m_gpuBudget->setValue(double(r.gpuBudgetBytes) / kGiB);
    m_remoteUrl->setText(QString::fromStdString(r.remoteUrl));
    m_remoteWarm->setValue(int(std::min<uint64_t>(r.remoteWarmBytes >> 20, uint64_t(m_remoteWarm->maximum()))));
    updateRemoteStatus();
}

void ModelPanel::restoreSettings(const QSettings& s) {
    const ModelRequest defaults;
    ModelRequest r;
    r.spec = s.value(QStringLiteral("model/spec"), QString::fromStdString(defaults.spec)).toString().toStdString();
    r.backend = s.value(QStringLiteral("model/backend"), QString::fromStdString(defaults.backend)).toString().toStdString();
    r.threads = s.value(QStringLiteral("model/threads"), defaults.threads).toInt();
    r.kvDtype = s.value(QStringLiteral("model/kvDtype"), QString::fromStdString(defaults.kvDtype)).toString().toStdString();
    r.weights = s.value(QStringLiteral("model/weights"), QString::fromStdString(defaults.weights)).toString().toStdString();
    r.cacheDir = s.value(QStringLiteral("model/cacheDir"), QString()).toString().toStdString();
    r.hostBudgetBytes = s.value(QStringLiteral("model/hostBudgetBytes"), qulonglong(defaults.hostBudgetBytes)).toULongLong();
    r.diskBudgetBytes = s.value(QStringLiteral("model/diskBudgetBytes"), qulonglong(defaults.diskBudgetBytes)).toULongLong();
    r.gpuBudgetBytes = s.value(QStringLiteral("model/gpuBudgetBytes"), qulonglong(defaults.gpuBudgetBytes)).toULongLong();
    r.remoteUrl = s.value(QStringLiteral("model/remoteUrl"), QString()).toString().toStdString();
    r.remoteWarmBytes = s.value(QStringLiteral("model/remoteWarmBytes"), qulonglong(defaults.remoteWarmBytes)).toULongLong();
    setRequest(r);
}

void ModelPanel::saveSettings(QSettings& s) const {
    const ModelRequest r = request();
    s.setValue(QStringLiteral("model/spec"), QString::fromStdString(r.spec));
    s.setValue(QStringLiteral("model/backend"), QString::fromStdString(r.backend));
    s.setValue(QStringLiteral("model/threads"), r.threads);
    s.setValue(QStringLiteral("model/kvDtype"), QString::fromStdString(r.kvDtype));
    s.setValue(QStringLiteral("model/weights"), QString::fromStdString(r.weights));
    s.setValue(QStringLiteral("model/cacheDir"), QString::fromStdString(r.cacheDir));
    s.setValue(QStringLiteral("model/hostBudgetBytes"), qulonglong(r.hostBudgetBytes));
    s.setValue(QStringLiteral("model/gpuBudgetBytes"), qulonglong(r.gpuBudgetBytes));
    s.setValue(QStringLiteral("model/diskBudgetBytes"), qulonglong(r.diskBudgetBytes));
    s.setValue(QStringLiteral("model/remoteUrl"), QString::fromStdString(r.remoteUrl));
    s.setValue(QStringLiteral("model/remoteWarmBytes"), qulonglong(r.remoteWarmBytes));
}

void ModelPanel::load() {
    const ModelRequest r = request();
    // A bad remote URL is refused here, before anything is unloaded (the engine would refuse it too).
    if (const QString problem = remoteUrlProblem(); !problem.isEmpty()) {
        m_status->setText(tr("<b>Not loaded:</b> %1").arg(problem.toHtmlEscaped()));
        showRemoteStatus(problem, true);
        return;
    }
    m_status->setText(tr("Loading %1…").arg(QString::fromStdString(r.spec).toHtmlEscaped()));
    m_engine->loadModel(r);
}

QString ModelPanel::remoteUrlProblem() const {
    const std::string url = m_remoteUrl->text().trimmed().toStdString();
    if (url.empty()) return {};
    try {
        cc::parse_redis_url(url);
        return {};
    } catch (const std::invalid_argument& e) {
        return QString::fromStdString(e.what());
    }
}

void ModelPanel::showRemoteStatus(const QString& text, bool error) {
    m_remoteStatus->setText(text);
    m_remoteStatus->setProperty("error", error);
    // The error colour of the palette's text roles is not portable; a red readable on light and dark.
    m_remoteStatus->setStyleSheet(error ? QStringLiteral("color: #d9534f;") : QString());
}

void ModelPanel::updateRemoteStatus() {
    m_remoteWarm->setEnabled(!m_remoteUrl->text().trimmed().isEmpty());
    if (m_remoteUrl->text().trimmed().isEmpty()) {
        showRemoteStatus(tr("No remote tier: groups stay on this machine."), false);
        return;
    }
    const QString problem = remoteUrlProblem();
    if (!problem.isEmpty()) showRemoteStatus(problem, true);
    else showRemoteStatus(tr("Checked at the next load."), false);
}

void ModelPanel::chooseDirectory() {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Hugging Face model directory"));
    if (dir.isEmpty()) return;
    selectSpec(dir);
}

void ModelPanel::probeCuda() {
    if (!m_engine->gpuBackendBuilt()) {
        applyCudaStatus(false, tr("this build has no CUDA backend (built without the CUDA toolkit)"));
        return;
    }
    // The probe initialises the CUDA runtime (can take a second): off the GUI thread.
    auto result = std::make_shared<cc::CudaProbeSummary>();
    const EngineController* engine = m_engine;
    QThread* thread = QThread::create([result, engine] { *result = engine->probeGpu(); });
    connect(thread, &QThread::finished, this, [this, result] {
        applyCudaStatus(result->available, QString::fromStdString(result->message));
    });
    connect(thread, &QThread::finished, thread, &QObject::deleteLater);
    thread->start();
}

void ModelPanel::applyCudaStatus(bool deviceFound, const QString& message) {
    // CUDA can be chosen when the probe finds a device; whether a model fits is the engine's call
    // at load (core/backend/backend_choice.h), and its reason is shown next to "Backend" once loaded.
    m_cudaStatus = deviceFound ? tr("CUDA device found: %1. \"auto\" uses it when the model fits in its free memory.").arg(message)
                               : tr("%1. Models run on the CPU.").arg(message);
    if (auto* model = qobject_cast<QStandardItemModel*>(m_backend->model())) {
        if (auto* item = model->item(2)) {
            item->setEnabled(deviceFound);
            item->setToolTip(m_cudaStatus);
        }
    }
    m_backend->setToolTip(tr("Backend: auto, CPU or CUDA.\n%1").arg(m_cudaStatus));
}

void ModelPanel::showInfo(const cc::ModelInfo& info) {
    const QLocale locale;
    m_family->setText(QStringLiteral("%1 · %2").arg(QString::fromStdString(info.family),
                                                    info.chat_format.empty() ? tr("no tokenizer")
                                                                             : QString::fromStdString(info.chat_format)));
    m_params->setText(humanCount(info.n_params));
    m_weights->setText(locale.formattedDataSize(qint64(info.weight_bytes)) +
                       (info.synthetic_weights ? tr(" (synthetic)") : QString()) +
                       (info.matrix_bytes > 0 ? tr(" · matrices in memory: %1 as %2")
                                                    .arg(locale.formattedDataSize(qint64(info.matrix_bytes)),
                                                         QString::fromStdString(info.weights))
                                              : QString()));
    m_loadTime->setText(tr("%1 ms").arg(info.load_ms, 0, 'f', 0));
    const QString fp = QString::fromStdString(info.fingerprint);
    m_fingerprint->setText(fp.left(12));
    m_fingerprint->setToolTip(tr("Model fingerprint (part of every cache key): %1").arg(fp));
    m_numerics->setText(QString::fromStdString(info.numerics));
    if (info.backend == "cuda")
        m_backendReason->setText(tr("%1 on %2 — %3")
                                     .arg(QString::fromStdString(info.backend), QString::fromStdString(info.device),
                                          QString::fromStdString(info.backend_reason)));
    else
        m_backendReason->setText(tr("%1, %2 threads — %3")
                                     .arg(QString::fromStdString(info.backend))
                                     .arg(info.n_threads)
                                     .arg(QString::fromStdString(info.backend_reason)));
    m_status->setText(tr("Loaded <b>%1</b> in %2 ms.").arg(QString::fromStdString(info.spec).toHtmlEscaped())
                          .arg(info.load_ms, 0, 'f', 0));
}

void ModelPanel::setBusy(bool busy, const QString& task) {
    const bool loading = busy && task == QLatin1String("load");
    m_load->setEnabled(!loading);
    m_cancel->setEnabled(loading);
    m_progress->setVisible(loading);
}

}  // namespace cc::ui
