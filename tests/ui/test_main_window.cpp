// The main window builds and shows without a display (QT_QPA_PLATFORM=offscreen).
#include "ui/main_window.h"

#include <QLabel>
#include <QtTest>

class TestMainWindow : public QObject {
    Q_OBJECT
private slots:
    void showsAndSaysWeightsAreSynthetic() {
        cc::ui::MainWindow window;
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        auto* model = window.findChild<QLabel*>(QStringLiteral("modelLabel"));
        QVERIFY(model);
        QVERIFY(model->text().contains(QStringLiteral("synthetic weights")));
        const QImage shot = window.grab().toImage();
        QVERIFY(!shot.isNull());
        QCOMPARE(shot.width(), window.width() * int(shot.devicePixelRatio()));
    }
};

QTEST_MAIN(TestMainWindow)
#include "test_main_window.moc"
