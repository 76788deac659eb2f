// View › Theme: System, Light or Dark (theme.h), remembered in QSettings "view/theme" and applied
// when the window is built, so the app starts in the theme the user chose.
#include <QActionGroup>
#include <QMenu>
#include <QSettings>

#include "main_window.h"
#include "theme.h"

namespace tokenscope::app {

void MainWindow::build_theme_menu(QMenu* view) {
    QMenu* menu = view->addMenu(tr("&Theme"));
    auto* group = new QActionGroup(menu);
    group->setExclusive(true);
    const Theme remembered = theme_from_name(QSettings().value("view/theme").toString());
    const std::pair<Theme, QString> choices[] = {{Theme::System, tr("Follow the &system")},
                                                 {Theme::Light, tr("&Light")},
                                                 {Theme::Dark, tr("&Dark")}};
    for (const auto& [theme, label] : choices) {
        QAction* a = menu->addAction(label);
        a->setCheckable(true);
        a->setChecked(theme == remembered);
        a->setData(theme_name(theme));
        group->addAction(a);
        connect(a, &QAction::triggered, this, [theme] {
            apply_theme(theme);
            QSettings().setValue("view/theme", theme_name(theme));
        });
    }
    if (remembered != current_theme()) apply_theme(remembered);
}

}  // namespace tokenscope::app
