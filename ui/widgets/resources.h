// The bundled resources (sample tool sets, sample queries, system prompt, icons) compiled into cc_ui.
#pragma once

#include <QString>
#include <QStringList>

namespace cc::ui {

// Registers cc_ui's Qt resources; a static library needs this once before the first ":/..." read.
void initResources();

QString defaultSystemPrompt();            // :/system_prompt.txt
QStringList sampleToolSetNames();         // "tools_5.json", ..., "tools_100.json", "tools_unicode.json"
QString sampleToolSetJson(const QString& name);       // the file's text; throws std::runtime_error when absent
QStringList sampleQueries(const QString& toolSetName); // from :/toolsets/sample_queries.json

}  // namespace cc::ui
