// ToolSetPanel against a real EngineController with the tiny built-in model (offscreen).
#include "ui/panels/tool_set_panel.h"
#include "tests/ui/ui_test_rig.h"

#include "ui/worker/engine_controller.h"
#include "ui/widgets/resources.h"

#include <QApplication>
#include <QLabel>
#include <QMimeData>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTextBlock>
#include <QtTest>

#include <memory>

using cc::ui::EngineController;
using cc::ui::ToolSetPanel;

namespace {

constexpr int kTimeoutMs = 60000;

void writeFile(const QString& path, const QByteArray& data) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    QCOMPARE(f.write(data), data.size());
}

QListWidgetItem* itemNamed(QListWidget* list, const QString& name) {
    for (int i = 0; i < list->count(); ++i)
        if (list->item(i)->text() == name) return list->item(i);
    return nullptr;
}

}  // namespace

class TestToolSetPanel : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_cacheDir;
    QTemporaryDir m_files;
    std::unique_ptr<EngineController> m_engine;

private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        cc::ui::initResources();
        QVERIFY(m_cacheDir.isValid());
        QVERIFY(m_files.isValid());
        m_engine = cc::ui::test::loadedController(m_cacheDir.path());
        QVERIFY2(m_engine, "the built-in test model did not load");
    }
    void cleanupTestCase() { m_engine.reset(); }

    void sampleFillsListAndQueries() {
        ToolSetPanel panel(m_engine.get());
        panel.resize(480, 760);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        auto* list = panel.findChild<QListWidget*>(QStringLiteral("toolList"));
        QVERIFY(list);
        QCOMPARE(list->count(), 0);

        QVERIFY(panel.loadSample(QStringLiteral("tools_20.json")));
        QCOMPARE(list->count(), 20);
        QCOMPARE(panel.enabledCount(), 20);
        for (int i = 0; i < list->count(); ++i) {
            QCOMPARE(list->item(i)->checkState(), Qt::Checked);
            QVERIFY(!list->item(i)->toolTip().isEmpty());
        }
        QVERIFY(panel.loadSample(QStringLiteral("tools_unicode.json")));
        QCOMPARE(list->count(), 3);
        QVERIFY(itemNamed(list, QStringLiteral("tianqi_chaxun")));

        // every bundled set loads, with 4-6 sample queries (7 with a no-tool one)
        for (const QString& name : cc::ui::sampleToolSetNames()) {
            QVERIFY2(panel.loadSample(name), qPrintable(name));
            const int n = int(cc::ui::sampleQueries(name).size());
            QVERIFY2(n >= 4 && n <= 7, qPrintable(name));
        }

        // a click on a sample query hands it to the main window
        QVERIFY(panel.loadSample(QStringLiteral("tools_5.json")));
        auto* queries = panel.findChild<QListWidget*>(QStringLiteral("sampleQueries"));
        QVERIFY(queries);
        QCOMPARE(queries->count(), int(cc::ui::sampleQueries(QStringLiteral("tools_5.json")).size()));
        QSignalSpy chosen(&panel, &ToolSetPanel::sampleQueryChosen);
        QTRY_VERIFY(queries->isVisible());
        QTest::mouseClick(queries->viewport(), Qt::LeftButton, {}, queries->visualItemRect(queries->item(1)).center());
        QCOMPARE(chosen.count(), 1);
        QCOMPARE(chosen.first().at(0).toString(), queries->item(1)->text());
    }

    void uncheckingChangesGroupKeyAndRecheckingRestoresIt() {
        ToolSetPanel panel(m_engine.get());
        QSignalSpy described(m_engine.get(), &EngineController::toolsDescribed);
        QVERIFY(panel.loadSample(QStringLiteral("tools_5.json")));
        QTRY_VERIFY_WITH_TIMEOUT(!panel.groupKey().isEmpty(), kTimeoutMs);
        QVERIFY(described.count() >= 1);
        const QString key0 = panel.groupKey();
        const QString hash0 = panel.toolsHash();
        QCOMPARE(panel.findChild<QLabel*>(QStringLiteral("groupKeyLabel"))->toolTip().contains(key0), true);

        auto* list = panel.findChild<QListWidget*>(QStringLiteral("toolList"));
        auto* item = itemNamed(list, QStringLiteral("send_email"));
        QVERIFY(item);
        item->setCheckState(Qt::Unchecked);
        QCOMPARE(panel.enabledCount(), 4);
        QVERIFY(!panel.toolsJson().contains(QStringLiteral("send_email")));
        QVERIFY(panel.toolsHash() != hash0);
        QTRY_VERIFY_WITH_TIMEOUT(!panel.groupKey().isEmpty() && panel.groupKey() != key0, kTimeoutMs);
        const auto last = described.last().at(0).value<cc::ui::ToolsDescription>();
        QCOMPARE(last.nTools, size_t(4));
        QCOMPARE(QString::fromStdString(last.groupKey), panel.groupKey());

        item->setCheckState(Qt::Checked);
        QCOMPARE(panel.toolsHash(), hash0);
        QTRY_COMPARE_WITH_TIMEOUT(panel.groupKey(), key0, kTimeoutMs);

        // the system prompt is part of the key too
        panel.setSystemPrompt(QStringLiteral("You are terse."));
        QTRY_VERIFY_WITH_TIMEOUT(!panel.groupKey().isEmpty() && panel.groupKey() != key0, kTimeoutMs);
    }

    void badFilesShowTheirErrorAndKeepTheSet() {
        ToolSetPanel panel(m_engine.get());
        QVERIFY(panel.loadSample(QStringLiteral("tools_5.json")));
        const QString hash0 = panel.toolsHash();
        QSignalSpy errors(&panel, &ToolSetPanel::errorOccurred);

        const QString broken = m_files.filePath(QStringLiteral("broken.json"));
        writeFile(broken, "[{\"name\": \"f\", \"parameters\": {\"type\": \"object\"}");
        QVERIFY(!panel.loadToolsFile(broken));
        QCOMPARE(errors.count(), 1);
        QVERIFY2(errors.last().at(0).toString().contains(broken), qPrintable(errors.last().at(0).toString()));
        QVERIFY(errors.last().at(0).toString().contains(QStringLiteral("invalid JSON")));
        QVERIFY2(panel.errorText().contains(broken), qPrintable(panel.errorText()));
        QCOMPARE(panel.toolCount(), 5);
        QCOMPARE(panel.toolsHash(), hash0);

        const QString schema = m_files.filePath(QStringLiteral("schema.json"));
        writeFile(schema, "[{\"name\": \"ok\", \"parameters\": {\"type\": \"object\", \"properties\": {}}},\n"
                          " {\"name\": \"get_it\", \"parameters\": 5}]");
        QVERIFY(!panel.loadToolsFile(schema));
        QCOMPARE(errors.count(), 2);
        const QString message = errors.last().at(0).toString();
        QVERIFY2(message.contains(schema) && message.contains(QStringLiteral("tool 1")) && message.contains(QStringLiteral("get_it")) &&
                     message.contains(QStringLiteral("parameters")),
                 qPrintable(message));
        QVERIFY(panel.errorText().contains(QStringLiteral("get_it")));
        QCOMPARE(panel.toolCount(), 5);
        QCOMPARE(panel.toolsHash(), hash0);
        QCOMPARE(panel.findChild<QListWidget*>(QStringLiteral("toolList"))->count(), 5);

        QVERIFY(!panel.loadToolsFile(m_files.filePath(QStringLiteral("missing.json"))));
        QCOMPARE(errors.count(), 3);
        QCOMPARE(panel.toolsHash(), hash0);

        // a good file replaces the set and clears the message
        const QString good = m_files.filePath(QStringLiteral("good.json"));
        writeFile(good, "[{\"name\": \"ok\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}]");
        QVERIFY(panel.loadToolsFile(good));
        QCOMPARE(panel.toolCount(), 1);
        QVERIFY(panel.errorText().isEmpty());
    }

    void editorMarksErrorsAsYouTypeAndKeepsTheSet() {
        ToolSetPanel panel(m_engine.get());
        QVERIFY(panel.loadSample(QStringLiteral("tools_5.json")));
        const QString hash0 = panel.toolsHash();
        auto* edit = panel.findChild<QPlainTextEdit*>(QStringLiteral("jsonEdit"));
        auto* error = panel.findChild<QLabel*>(QStringLiteral("jsonErrorLabel"));
        QVERIFY(edit && error);
        QVERIFY(error->isHidden());

        // type a stray character after the array's closing bracket
        edit->moveCursor(QTextCursor::End);
        QTest::keyClicks(edit, QStringLiteral("x"));
        QTRY_VERIFY(!error->isHidden());
        QVERIFY2(panel.errorText().contains(QStringLiteral("invalid JSON")), qPrintable(panel.errorText()));
        QVERIFY(error->text().contains(QStringLiteral("go to line")));
        QVERIFY(!edit->extraSelections().isEmpty());
        QCOMPARE(edit->extraSelections().first().cursor.blockNumber(), edit->document()->blockCount() - 1);
        QCOMPARE(panel.toolCount(), 5);
        QCOMPARE(panel.toolsHash(), hash0);

        // deleting it makes the text valid again
        QTest::keyClick(edit, Qt::Key_Backspace);
        QTRY_VERIFY(error->isHidden());
        QVERIFY(panel.errorText().isEmpty());
        QVERIFY(edit->extraSelections().isEmpty());
        QCOMPARE(panel.toolsHash(), hash0);

        // a schema error marks the line where the offending tool starts
        edit->setPlainText(QStringLiteral("[\n  {\"name\": \"a\", \"parameters\": {\"type\": \"object\", \"properties\": {}}},\n"
                                          "  {\"name\": \"b c\", \"parameters\": {\"type\": \"object\"}}\n]"));
        QTRY_VERIFY(!error->isHidden());
        QVERIFY2(panel.errorText().contains(QStringLiteral("tool 1")) && panel.errorText().contains(QStringLiteral("\"name\"")),
                 qPrintable(panel.errorText()));
        QVERIFY(!edit->extraSelections().isEmpty());
        QCOMPARE(edit->extraSelections().first().cursor.blockNumber(), 2);
        QCOMPARE(panel.toolsHash(), hash0);

        // a valid edit replaces the set
        edit->setPlainText(QStringLiteral("[{\"name\": \"only\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}]"));
        QTRY_COMPARE(panel.toolCount(), 1);
        QVERIFY(error->isHidden());
        QCOMPARE(panel.sourceName(), QStringLiteral("<editor>"));
    }

    void exportLoadsBackToTheSameHash() {
        ToolSetPanel panel(m_engine.get());
        QVERIFY(panel.loadSample(QStringLiteral("tools_10.json")));
        panel.setToolEnabled(QStringLiteral("run_sql_query"), false);
        panel.setToolEnabled(QStringLiteral("send_email"), false);
        QCOMPARE(panel.enabledCount(), 8);
        const QString hash = panel.toolsHash();
        const QString path = m_files.filePath(QStringLiteral("exported.json"));
        QVERIFY(panel.exportToFile(path));

        ToolSetPanel other(m_engine.get());
        QVERIFY(other.loadToolsFile(path));
        QCOMPARE(other.toolCount(), 8);
        QCOMPARE(other.toolsHash(), hash);
        QVERIFY(!other.toolsJson().contains(QStringLiteral("run_sql_query")));
        // pretty: one key per line
        QFile f(path);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY(f.readAll().count('\n') > 20);
    }

    void compileNeedsAModel() {
        EngineController bare;
        ToolSetPanel panel(&bare);
        QVERIFY(panel.loadSample(QStringLiteral("tools_5.json")));
        auto* compile = panel.findChild<QPushButton*>(QStringLiteral("compileButton"));
        QVERIFY(compile);
        QVERIFY(!compile->isEnabled());
        ToolSetPanel loaded(m_engine.get());
        QVERIFY(loaded.loadSample(QStringLiteral("tools_5.json")));
        auto* button = loaded.findChild<QPushButton*>(QStringLiteral("compileButton"));
        QVERIFY(button->isEnabled());
        // nor with every tool unticked
        QTest::mouseClick(loaded.findChild<QPushButton*>(QStringLiteral("noneButton")), Qt::LeftButton);
        QCOMPARE(loaded.enabledCount(), 0);
        QVERIFY(!button->isEnabled());
        QTest::mouseClick(loaded.findChild<QPushButton*>(QStringLiteral("allButton")), Qt::LeftButton);
        QCOMPARE(loaded.enabledCount(), 5);
        QVERIFY(button->isEnabled());
    }

    void compileReportsAndCacheTurnsToMemory() {
        ToolSetPanel panel(m_engine.get());
        QVERIFY(panel.loadSample(QStringLiteral("tools_10.json")));
        panel.setToolEnabled(QStringLiteral("detect_language"), false);   // a group no other test compiles
        QTRY_COMPARE_WITH_TIMEOUT(panel.cacheState(), QStringLiteral("not cached"), kTimeoutMs);
        QSignalSpy compiled(m_engine.get(), &EngineController::compiled);
        auto* button = panel.findChild<QPushButton*>(QStringLiteral("compileButton"));
        QVERIFY(button->isEnabled());
        QTest::mouseClick(button, Qt::LeftButton);
        QVERIFY(!button->isEnabled());
        QVERIFY(panel.findChild<QPushButton*>(QStringLiteral("compileCancelButton"))->isEnabled());
        QVERIFY(compiled.wait(kTimeoutMs));
        const auto result = compiled.first().at(0).value<cc::CompileResult>();
        QCOMPARE(result.n_tools, size_t(9));
        QCOMPARE(QString::fromStdString(result.tools_hash), panel.toolsHash());
        auto* label = panel.findChild<QLabel*>(QStringLiteral("compileLabel"));
        QVERIFY2(label->text().contains(QStringLiteral("Compiled 9 tools")), qPrintable(label->text()));
        QTRY_COMPARE_WITH_TIMEOUT(panel.cacheState(), QStringLiteral("memory"), kTimeoutMs);
        QTRY_VERIFY(button->isEnabled());
        QCOMPARE(QString::fromStdString(m_engine->currentTools()->group_key), panel.groupKey());
    }
    void missReasonFollowsEditsLive() {
        // A stored group of tools_5.json under a system prompt no other test uses, so it is the
        // nearest group of every edit below.
        const QString prompt = QStringLiteral("You route requests to tools (miss reason test).");
        ToolSetPanel panel(m_engine.get());
        panel.setSystemPrompt(prompt);
        QVERIFY(panel.loadSample(QStringLiteral("tools_5.json")));
        auto* label = panel.findChild<QLabel*>(QStringLiteral("missReasonLabel"));
        QVERIFY(label);
        QTRY_COMPARE_WITH_TIMEOUT(panel.cacheState(), QStringLiteral("not cached"), kTimeoutMs);
        QSignalSpy compiled(m_engine.get(), &EngineController::compiled);
        panel.compile();
        QVERIFY(compiled.wait(kTimeoutMs));
        const auto stored = compiled.first().at(0).value<cc::CompileResult>();
        QTRY_COMPARE_WITH_TIMEOUT(panel.cacheState(), QStringLiteral("memory"), kTimeoutMs);
        QVERIFY(panel.missReason().isEmpty());
        QVERIFY(label->isHidden());
        const QString nearest = QStringLiteral("nearest %1").arg(QString::fromStdString(stored.group_key).left(8));

        // removing a tool: the stored group is the nearest, with the tool named
        panel.setToolEnabled(QStringLiteral("send_email"), false);
        QTRY_VERIFY_WITH_TIMEOUT(panel.missReason().contains(QStringLiteral("-send_email")), kTimeoutMs);
        QVERIFY2(panel.missReason().startsWith(nearest), qPrintable(panel.missReason()));
        QVERIFY(panel.missReason().contains(QStringLiteral("prefix tokens reusable")));
        QVERIFY(!label->isHidden());
        QVERIFY2(label->text().contains(QStringLiteral("-send_email")), qPrintable(label->text()));
        panel.setToolEnabled(QStringLiteral("send_email"), true);
        QTRY_COMPARE_WITH_TIMEOUT(panel.cacheState(), QStringLiteral("memory"), kTimeoutMs);
        QVERIFY(label->isHidden());

        // a description edited in the JSON editor: the tool and the field
        auto* edit = panel.findChild<QPlainTextEdit*>(QStringLiteral("jsonEdit"));
        QVERIFY(edit);
        QString text = edit->toPlainText();
        QVERIFY(text.contains(QStringLiteral("Get the current weather for a location.")));
        text.replace(QStringLiteral("Get the current weather for a location."), QStringLiteral("Current weather, by city."));
        edit->setPlainText(text);
        QTRY_VERIFY_WITH_TIMEOUT(panel.missReason().contains(QStringLiteral("~get_current_weather (description)")),
                                 kTimeoutMs);
        QVERIFY2(panel.missReason().startsWith(nearest), qPrintable(panel.missReason()));

        // the system prompt, as it is typed
        QVERIFY(panel.loadSample(QStringLiteral("tools_5.json")));
        QTRY_COMPARE_WITH_TIMEOUT(panel.cacheState(), QStringLiteral("memory"), kTimeoutMs);
        panel.setSystemPrompt(prompt + QStringLiteral(" Be brief."));
        QTRY_VERIFY_WITH_TIMEOUT(panel.missReason().contains(QStringLiteral("system prompt changed")), kTimeoutMs);
        QVERIFY2(panel.missReason().startsWith(nearest + QStringLiteral(" (memory, 5 tools): system prompt changed")),
                 qPrintable(panel.missReason()));
    }

    void droppedFilesLoadOrShowTheirError() {
        ToolSetPanel panel(m_engine.get());
        QVERIFY(panel.loadSample(QStringLiteral("tools_5.json")));
        const QString hash0 = panel.toolsHash();
        QSignalSpy errors(&panel, &ToolSetPanel::errorOccurred);
        auto drop = [](QWidget* target, const QString& path) {
            QMimeData mime;
            mime.setUrls({QUrl::fromLocalFile(path)});
            QDragEnterEvent enter(QPoint(5, 5), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
            QApplication::sendEvent(target, &enter);
            if (!enter.isAccepted()) return false;
            QDropEvent dropEvent(QPointF(5, 5), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
            QApplication::sendEvent(target, &dropEvent);
            return dropEvent.isAccepted();
        };
        const QString bad = m_files.filePath(QStringLiteral("dropped_bad.json"));
        writeFile(bad, "{\"tools\": 3}");
        QVERIFY(drop(&panel, bad));
        QCOMPARE(errors.count(), 1);
        QVERIFY(errors.last().at(0).toString().contains(bad));
        QCOMPARE(panel.toolsHash(), hash0);

        const QString good = m_files.filePath(QStringLiteral("dropped.json"));
        writeFile(good, cc::ui::sampleToolSetJson(QStringLiteral("tools_10.json")).toUtf8());
        QVERIFY(drop(&panel, good));
        QCOMPARE(panel.toolCount(), 10);
        QCOMPARE(panel.sourceName(), good);

        // onto the JSON editor: the file is loaded, not pasted as text
        auto* edit = panel.findChild<QPlainTextEdit*>(QStringLiteral("jsonEdit"));
        QVERIFY(panel.loadSample(QStringLiteral("tools_5.json")));
        QVERIFY(drop(edit->viewport(), good));
        QCOMPARE(panel.toolCount(), 10);
        QVERIFY(!edit->toPlainText().contains(QStringLiteral("file://")));

        // a non-JSON file is refused at the door
        const QString text = m_files.filePath(QStringLiteral("notes.txt"));
        writeFile(text, "hello");
        QVERIFY(!drop(&panel, text));
        QCOMPARE(panel.toolCount(), 10);
    }
};

QTEST_MAIN(TestToolSetPanel)
#include "test_tool_set_panel.moc"
