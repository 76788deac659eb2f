#include "theme.h"

#include <QApplication>
#include <QStyle>
#include <QStyleFactory>

namespace tokenscope::app {

namespace {
struct PlatformLook {
    QString style;
    QPalette palette;
};

const PlatformLook& platform_look() {
    static const PlatformLook look{QApplication::style()->name(), QApplication::palette()};
    return look;
}

Theme g_current = Theme::System;
}  // namespace

QString theme_name(Theme theme) {
    switch (theme) {
        case Theme::Light:
            return QStringLiteral("light");
        case Theme::Dark:
            return QStringLiteral("dark");
        case Theme::System:
            break;
    }
    return QStringLiteral("system");
}

Theme theme_from_name(const QString& name) {
    if (name == QLatin1String("light")) return Theme::Light;
    if (name == QLatin1String("dark")) return Theme::Dark;
    return Theme::System;
}

QPalette light_palette() {
    QPalette p;
    p.setColor(QPalette::Window, QColor(0xEF, 0xEF, 0xEF));
    p.setColor(QPalette::WindowText, QColor(0x1E, 0x1E, 0x1E));
    p.setColor(QPalette::Base, Qt::white);
    p.setColor(QPalette::AlternateBase, QColor(0xF5, 0xF5, 0xF5));
    p.setColor(QPalette::ToolTipBase, QColor(0xFF, 0xFF, 0xDC));
    p.setColor(QPalette::ToolTipText, Qt::black);
    p.setColor(QPalette::PlaceholderText, QColor(0x80, 0x80, 0x80));
    p.setColor(QPalette::Text, QColor(0x1E, 0x1E, 0x1E));
    p.setColor(QPalette::Button, QColor(0xEF, 0xEF, 0xEF));
    p.setColor(QPalette::ButtonText, QColor(0x1E, 0x1E, 0x1E));
    p.setColor(QPalette::BrightText, Qt::red);
    p.setColor(QPalette::Light, Qt::white);
    p.setColor(QPalette::Midlight, QColor(0xE3, 0xE3, 0xE3));
    p.setColor(QPalette::Mid, QColor(0xA0, 0xA0, 0xA0));
    p.setColor(QPalette::Dark, QColor(0x80, 0x80, 0x80));
    p.setColor(QPalette::Shadow, QColor(0x50, 0x50, 0x50));
    p.setColor(QPalette::Highlight, QColor(0x30, 0x8C, 0xC6));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(0x00, 0x55, 0xC4));
    p.setColor(QPalette::LinkVisited, QColor(0x6A, 0x3D, 0xB0));
    p.setColor(QPalette::Disabled, QPalette::Text, QColor(0x9A, 0x9A, 0x9A));
    p.setColor(QPalette::Disabled, QPalette::WindowText, QColor(0x9A, 0x9A, 0x9A));
    p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(0x9A, 0x9A, 0x9A));
    return p;
}

QPalette dark_palette() {
    QPalette p;
    p.setColor(QPalette::Window, QColor(0x2B, 0x2B, 0x2E));
    p.setColor(QPalette::WindowText, QColor(0xE6, 0xE6, 0xE6));
    p.setColor(QPalette::Base, QColor(0x1E, 0x1E, 0x21));
    p.setColor(QPalette::AlternateBase, QColor(0x26, 0x26, 0x2A));
    p.setColor(QPalette::ToolTipBase, QColor(0x3A, 0x3A, 0x3F));
    p.setColor(QPalette::ToolTipText, QColor(0xEE, 0xEE, 0xEE));
    p.setColor(QPalette::PlaceholderText, QColor(0x8E, 0x8E, 0x94));
    p.setColor(QPalette::Text, QColor(0xE6, 0xE6, 0xE6));
    p.setColor(QPalette::Button, QColor(0x35, 0x35, 0x3A));
    p.setColor(QPalette::ButtonText, QColor(0xE6, 0xE6, 0xE6));
    p.setColor(QPalette::BrightText, QColor(0xFF, 0x6B, 0x6B));
    p.setColor(QPalette::Light, QColor(0x4A, 0x4A, 0x50));
    p.setColor(QPalette::Midlight, QColor(0x3E, 0x3E, 0x44));
    p.setColor(QPalette::Mid, QColor(0x5A, 0x5A, 0x60));
    p.setColor(QPalette::Dark, QColor(0x18, 0x18, 0x1A));
    p.setColor(QPalette::Shadow, QColor(0x0C, 0x0C, 0x0E));
    p.setColor(QPalette::Highlight, QColor(0x3D, 0x8E, 0xC9));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(0x7C, 0xB7, 0xFF));
    p.setColor(QPalette::LinkVisited, QColor(0xB3, 0x9D, 0xFF));
    p.setColor(QPalette::Disabled, QPalette::Text, QColor(0x78, 0x78, 0x7E));
    p.setColor(QPalette::Disabled, QPalette::WindowText, QColor(0x78, 0x78, 0x7E));
    p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(0x78, 0x78, 0x7E));
    return p;
}

void apply_theme(Theme theme) {
    const PlatformLook& platform = platform_look();  // captured before the first change
    g_current = theme;
    if (theme == Theme::System) {
        if (QStyle* style = QStyleFactory::create(platform.style)) QApplication::setStyle(style);
        QApplication::setPalette(platform.palette);
        return;
    }
    if (QApplication::style()->name() != QLatin1String("fusion"))
        QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    QApplication::setPalette(theme == Theme::Dark ? dark_palette() : light_palette());
}

Theme current_theme() {
    return g_current;
}

bool is_dark(const QPalette& palette) {
    return palette.color(QPalette::Window).lightness() <
           palette.color(QPalette::WindowText).lightness();
}

}  // namespace tokenscope::app
