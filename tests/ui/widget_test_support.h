#pragma once
// Shared by the widget suites: let layouts settle before reading pixels, and keep a PNG of
// what was tested for a person to look at.
#include <QCoreApplication>
#include <QDir>
#include <QEvent>
#include <QWidget>

namespace tokenscope::ui::test {

// Layouts update on a posted LayoutRequest; a relayout can post further resizes (scroll
// areas, word-wrapped labels), so deliver them for a few rounds.
inline void settle() {
    for (int i = 0; i < 3; ++i) {
        QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
        QCoreApplication::processEvents();
    }
}

inline void save_png(QWidget& widget, const QString& name) {
    settle();
    QDir().mkpath(QStringLiteral("/tmp/tokenscope-panels"));
    widget.grab().save(QStringLiteral("/tmp/tokenscope-panels/%1.png").arg(name));
}

}  // namespace tokenscope::ui::test
