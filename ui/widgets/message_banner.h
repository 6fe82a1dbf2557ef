// A dismissible in-window message (info / warning / error): coloured strip, text, close button.
// Non-modal, so errors are visible without blocking the event loop (or a test).
#pragma once

#include <QColor>
#include <QFrame>

class QLabel;
class QToolButton;

namespace cc::ui {

class MessageBanner : public QFrame {
    Q_OBJECT
public:
    enum class Kind { info, warning, error };
    MessageBanner(Kind kind, const QString& text, QWidget* parent = nullptr);

    Kind kind() const { return m_kind; }
    QString text() const;
    void setText(const QString& text);
    void setClosable(bool closable);
    QToolButton* closeButton() const { return m_close; }
    void refreshColours();   // after the application palette changed (light/dark)

signals:
    void dismissed();   // the close button was clicked (the banner hides itself)

protected:
    void changeEvent(QEvent* event) override;
    void paintEvent(QPaintEvent* event) override;

private:
    void applyColours();

    Kind m_kind;
    QColor m_accent;
    QLabel* m_label;
    QToolButton* m_close;
};

}  // namespace cc::ui
