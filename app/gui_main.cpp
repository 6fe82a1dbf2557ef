// contextcache: the desktop app. With --screenshot it renders the window headless (works with
// QT_QPA_PLATFORM=offscreen) after loading the model and, optionally, a tool set and a query.
#include "app/backends.h"
#include "core/research/paper_bench.h"
#include "ui/research/bench_charts.h"
#include "ui/shell/main_window.h"
#include "ui/shell/screenshot_runner.h"
#include "ui/widgets/theme.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QStyle>

#include <cstdio>
#include <exception>
#include <fstream>

#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("ContextCache"));
    QApplication::setApplicationName(QStringLiteral("ContextCache"));
    QApplication::setApplicationVersion(QStringLiteral("0.1.0"));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("ContextCache desktop app"));
    parser.addHelpOption();
    parser.addVersionOption();
    const QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                        QStringLiteral("Render the main window to a PNG file and exit (0 on success)."),
                                        QStringLiteral("file"));
    const QCommandLineOption model(QStringLiteral("model"), QStringLiteral("builtin:NAME or a model directory."),
                                   QStringLiteral("spec"));
    const QCommandLineOption cacheDir(QStringLiteral("cache-dir"), QStringLiteral("Cache directory."), QStringLiteral("dir"));
    const QCommandLineOption threads(QStringLiteral("threads"), QStringLiteral("CPU threads (0 = all cores)."),
                                     QStringLiteral("n"));
    const QCommandLineOption tools(QStringLiteral("tools"), QStringLiteral("Screenshot: compile this tool set file."),
                                   QStringLiteral("file"));
    const QCommandLineOption sample(QStringLiteral("sample"),
                                    QStringLiteral("Screenshot: compile the bundled set of N tools (5, 10, 20, 50, 100)."),
                                    QStringLiteral("n"));
    const QCommandLineOption query(QStringLiteral("query"),
                                   QStringLiteral("Screenshot: run this query; repeat it for more turns of the conversation."),
                                   QStringLiteral("text"));
    const QCommandLineOption mode(QStringLiteral("mode"), QStringLiteral("Screenshot: cached, full, compare or per_tool_nope."),
                                  QStringLiteral("mode"), QStringLiteral("cached"));
    const QCommandLineOption maxTokens(QStringLiteral("max-new-tokens"), QStringLiteral("Screenshot: tokens to generate."),
                                       QStringLiteral("n"), QStringLiteral("32"));
    const QCommandLineOption size(QStringLiteral("size"), QStringLiteral("Screenshot: window size WxH."),
                                  QStringLiteral("WxH"), QStringLiteral("1280x800"));
    const QCommandLineOption theme(QStringLiteral("theme"), QStringLiteral("Screenshot: system, light or dark."),
                                   QStringLiteral("theme"), QStringLiteral("system"));
    const QCommandLineOption presentation(QStringLiteral("presentation"), QStringLiteral("Screenshot: presentation mode (large fonts)."));
    const QCommandLineOption timeout(QStringLiteral("timeout"), QStringLiteral("Screenshot: give up after S seconds."),
                                     QStringLiteral("s"), QStringLiteral("300"));
    const QCommandLineOption plotBench(QStringLiteral("plot-bench"),
                                       QStringLiteral("Draw the three charts of `contextcache-cli bench --out DIR`'s DIR/results.json "
                                                      "into DIR as PNG (light theme) and exit."),
                                       QStringLiteral("dir"));
    parser.addOptions({plotBench, screenshot, model, cacheDir, threads, tools, sample, query, mode, maxTokens, size, theme, presentation, timeout});
    parser.process(app);

    auto fail = [](const QString& message, int code) {
        std::fprintf(stderr, "contextcache: %s\n", message.toLocal8Bit().constData());
        return code;
    };

    if (parser.isSet(plotBench)) {
        const QString dir = parser.value(plotBench);
        const std::string results = QDir(dir).filePath(QStringLiteral("results.json")).toStdString();
        try {
            std::ifstream in(results);
            if (!in) return fail(QStringLiteral("%1: cannot be read").arg(QString::fromStdString(results)), 1);
            nlohmann::json json;
            try {
                json = nlohmann::json::parse(in);
            } catch (const nlohmann::json::parse_error& e) {
                return fail(QStringLiteral("%1: not JSON: %2").arg(QString::fromStdString(results), QString::fromUtf8(e.what())), 1);
            }
            const auto rows = cc::paper_bench_rows_from_json(json, results);
            QString error;
            // the light theme whatever the desktop's: a chart in a paper or a slide
            if (!cc::ui::writeBenchCharts(rows, dir, QApplication::style()->standardPalette(), &error)) return fail(error, 1);
        } catch (const std::exception& e) {
            return fail(QString::fromUtf8(e.what()), 1);
        }
        return 0;
    }

    cc::ui::MainWindowOptions options;
    options.backends = cc::app::available_backends();
    options.modelSpec = parser.value(model);
    options.cacheDir = parser.value(cacheDir);
    bool ok = true;
    if (parser.isSet(threads)) {
        options.threads = parser.value(threads).toInt(&ok);
        if (!ok || options.threads < 0) return fail(QStringLiteral("--threads must be a number >= 0"), 2);
    }

    if (!parser.isSet(screenshot)) {
        cc::ui::MainWindow window(options);
        window.show();
        return app.exec();
    }

    // Headless: the user's saved layout and model settings are neither read nor overwritten.
    options.useSettings = false;
    cc::ui::ScreenshotOptions shot;
    shot.output = parser.value(screenshot);
    shot.toolsFile = parser.value(tools);
    if (parser.isSet(sample)) {
        shot.sample = parser.value(sample).toInt(&ok);
        if (!ok) return fail(QStringLiteral("--sample must be 5, 10, 20, 50 or 100"), 2);
    }
    const QStringList turns = parser.values(query);
    shot.query = turns.value(0);
    shot.followUps = turns.mid(1);
    shot.mode = parser.value(mode);
    shot.maxNewTokens = parser.value(maxTokens).toInt(&ok);
    if (!ok || shot.maxNewTokens < 1) return fail(QStringLiteral("--max-new-tokens must be a number >= 1"), 2);
    shot.size = cc::ui::parseSize(parser.value(size));
    const int timeoutS = parser.value(timeout).toInt(&ok);
    if (!ok || timeoutS < 1) return fail(QStringLiteral("--timeout must be a number of seconds >= 1"), 2);
    shot.timeoutMs = timeoutS * 1000;
    const QString themeName = parser.value(theme);
    if (themeName != QLatin1String("system") && themeName != QLatin1String("light") && themeName != QLatin1String("dark"))
        return fail(QStringLiteral("--theme must be system, light or dark"), 2);

    cc::ui::MainWindow window(options);
    window.setTheme(cc::ui::parseTheme(themeName));
    window.setPresentationMode(parser.isSet(presentation));
    cc::ui::ScreenshotRunner runner(&window, shot);
    int code = 0;
    QObject::connect(&runner, &cc::ui::ScreenshotRunner::finished, &app, [&code](int exitCode, const QString& message) {
        code = exitCode;
        if (exitCode != 0) std::fprintf(stderr, "contextcache: %s\n", message.toLocal8Bit().constData());
        QApplication::exit(exitCode);
    });
    runner.start();
    if (runner.isFinished()) return code;
    return app.exec();
}
