#include "ui/widgets/resources.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <stdexcept>

static void initCcUiResources() { Q_INIT_RESOURCE(resources); }

namespace cc::ui {

void initResources() { initCcUiResources(); }

namespace {

QByteArray readResource(const QString& path) {
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        throw std::runtime_error(path.toStdString() + ": bundled resource is missing (initResources() not called?)");
    return file.readAll();
}

}  // namespace

QString defaultSystemPrompt() { return QString::fromUtf8(readResource(QStringLiteral(":/system_prompt.txt"))); }

QStringList sampleToolSetNames() {
    return {QStringLiteral("tools_5.json"),   QStringLiteral("tools_10.json"),  QStringLiteral("tools_20.json"),
            QStringLiteral("tools_50.json"),  QStringLiteral("tools_100.json"), QStringLiteral("tools_unicode.json")};
}

QString sampleToolSetJson(const QString& name) {
    return QString::fromUtf8(readResource(QStringLiteral(":/toolsets/") + name));
}

QStringList sampleQueries(const QString& toolSetName) {
    const auto doc = QJsonDocument::fromJson(readResource(QStringLiteral(":/toolsets/sample_queries.json")));
    QStringList out;
    for (const auto& v : doc.object().value(toolSetName).toArray()) out << v.toString();
    return out;
}

}  // namespace cc::ui
