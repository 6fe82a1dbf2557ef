// Shared by the panel tests: a real EngineController on the tiny built-in model, with its cache in
// a temporary directory.
#pragma once

#include "ui/worker/engine_controller.h"
#include "ui/widgets/resources.h"

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <memory>

namespace cc::ui::test {

constexpr int kTimeoutMs = 120000;

// The tiny built-in model on the CPU, with its cache in `cacheDir`.
inline ModelRequest testModelRequest(const QString& cacheDir) {
    ModelRequest model;
    model.spec = "builtin:qwen3-test";
    model.backend = "cpu";
    model.threads = 2;
    model.cacheDir = cacheDir.toStdString();
    return model;
}

// A controller with that model loaded; null when it did not load in time.
inline std::unique_ptr<EngineController> loadedController(const QString& cacheDir) {
    auto engine = std::make_unique<EngineController>();
    QSignalSpy loaded(engine.get(), &EngineController::modelLoaded);
    engine->loadModel(testModelRequest(cacheDir));
    if (!loaded.wait(kTimeoutMs) && loaded.isEmpty()) return nullptr;
    return engine;
}

struct Rig {
    QTemporaryDir dir;
    EngineController controller;
    ModelRequest model;

    explicit Rig(uint64_t hostBudgetBytes = uint64_t(4) << 30, uint64_t diskBudgetBytes = uint64_t(32) << 30) {
        model = testModelRequest(dir.path());
        model.hostBudgetBytes = hostBudgetBytes;
        model.diskBudgetBytes = diskBudgetBytes;
    }

    // Waits until every job queued so far has run: jobs run in request order, so the answer to a
    // listCache queued now comes after all of them. (busy() alone is false until a queued job starts.)
    // Needs a loaded model.
    bool idle(int timeoutMs = kTimeoutMs) {
        QSignalSpy listed(&controller, &EngineController::cacheListed);
        controller.listCache();
        return listed.wait(timeoutMs) || !listed.isEmpty();
    }

    bool load() {
        QSignalSpy loaded(&controller, &EngineController::modelLoaded);
        controller.loadModel(model);
        return loaded.wait(kTimeoutMs) || loaded.count() > 0;
    }

    // Compiles a bundled set and returns the CompileResult (waits for its background write too).
    std::optional<cc::CompileResult> compile(const QString& setName = QStringLiteral("tools_5.json")) {
        QSignalSpy compiled(&controller, &EngineController::compiled);
        controller.compileTools(ToolsRequest{sampleToolSetJson(setName).toStdString(), setName.toStdString(),
                                             defaultSystemPrompt().toStdString()});
        if (!compiled.wait(kTimeoutMs) && compiled.isEmpty()) return std::nullopt;
        if (!idle()) return std::nullopt;
        return compiled.first().first().value<cc::CompileResult>();
    }

    std::optional<QueryOutcome> query(cc::QueryMode mode, int maxNewTokens = 3,
                                      const QString& text = QStringLiteral("What's the weather like in Lisbon?")) {
        QSignalSpy finished(&controller, &EngineController::queryFinished);
        cc::QueryOptions options;
        options.mode = mode;
        options.max_new_tokens = maxNewTokens;
        controller.runQuery(text.toStdString(), options);
        if (!finished.wait(kTimeoutMs) && finished.isEmpty()) return std::nullopt;
        return finished.first().first().value<QueryOutcome>();
    }
};

}  // namespace cc::ui::test
