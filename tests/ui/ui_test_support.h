// Shared helpers of the QTest suites: a controller on a temporary cache, loading and waiting.
#pragma once

#include "ui/worker/engine_controller.h"
#include "ui/widgets/resources.h"

#include <QSignalSpy>
#include <QString>
#include <QTemporaryDir>
#include <QtTest>

namespace cc::ui::test {

inline ModelRequest modelRequest(const QString& cacheDir, const QString& spec = QStringLiteral("builtin:qwen3-test"),
                                 int threads = 1) {
    ModelRequest r;
    r.spec = spec.toStdString();
    r.threads = threads;
    r.cacheDir = cacheDir.toStdString();
    return r;
}

inline ToolsRequest sampleTools(const QString& name) {
    ToolsRequest r;
    r.toolsJson = sampleToolSetJson(name).toStdString();
    r.source = name.toStdString();
    r.systemPrompt = defaultSystemPrompt().toStdString();
    return r;
}

// The failure messages seen so far, for QVERIFY2 output.
inline QString failures(const QSignalSpy& failed) {
    QStringList out;
    for (const auto& args : failed) out << args.at(0).toString() + QStringLiteral(": ") + args.at(1).toString();
    return out.join(QStringLiteral("; "));
}

}  // namespace cc::ui::test
