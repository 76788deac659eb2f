#pragma once
// Light and dark themes (View › Theme): "System" keeps the palette the platform gave the app at
// start-up (a desktop in dark mode gives a dark one), Light and Dark set Qt's Fusion style with
// a palette of their own, so that they look the same on every desktop. The views paint with the
// palette's roles (Base, Text, Mid…) and translucent tints, which is what keeps the heatmaps,
// charts and the chat readable in both. Remembered in QSettings "view/theme".
#include <QPalette>
#include <QString>

namespace tokenscope::app {

enum class Theme { System, Light, Dark };

QString theme_name(Theme theme);             // "system", "light", "dark" (the settings value)
Theme theme_from_name(const QString& name);  // unknown names: System

QPalette light_palette();
QPalette dark_palette();

// Applies a theme to the running application (style and palette); every widget receives a
// PaletteChange. Call once QApplication exists. The first call remembers the platform's own
// style and palette, which System restores.
void apply_theme(Theme theme);
Theme current_theme();
// The palette is dark: its window colour is darker than its text.
bool is_dark(const QPalette& palette);

}  // namespace tokenscope::app
