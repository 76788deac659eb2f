#pragma once
// Shared by the widget suites: let layouts settle before reading pixels, and keep a PNG of
// what was tested for a person to look at.
#include <QCoreApplication>
#include <QDir>
#include <QEvent>
#include <QPalette>
#include <QWidget>

namespace tokenscope::ui::test {

// The no-break space the panels put between a number and its unit ("6.0\u00A0GB").
inline const QChar kNb(0x00A0);

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

// A dark palette (every role the panels read) for checking that they follow the palette.
inline QPalette dark_palette() {
    QPalette p;
    p.setColor(QPalette::Window, QColor(0x2B, 0x2B, 0x2E));
    p.setColor(QPalette::WindowText, QColor(0xE6, 0xE6, 0xE6));
    p.setColor(QPalette::Base, QColor(0x1E, 0x1E, 0x20));
    p.setColor(QPalette::AlternateBase, QColor(0x33, 0x33, 0x37));
    p.setColor(QPalette::Text, QColor(0xE6, 0xE6, 0xE6));
    p.setColor(QPalette::PlaceholderText, QColor(0x9A, 0x9A, 0xA0));
    p.setColor(QPalette::Button, QColor(0x3A, 0x3A, 0x3E));
    p.setColor(QPalette::ButtonText, QColor(0xE6, 0xE6, 0xE6));
    p.setColor(QPalette::Highlight, QColor(0x3D, 0x8E, 0xE0));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::ToolTipBase, QColor(0x40, 0x40, 0x46));
    p.setColor(QPalette::ToolTipText, QColor(0xF0, 0xF0, 0xF0));
    p.setColor(QPalette::Mid, QColor(0x55, 0x55, 0x5A));
    return p;
}

}  // namespace tokenscope::ui::test
