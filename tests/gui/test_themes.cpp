// View › Theme (issue 19): Dark and Light switch the whole application's palette at once, the
// chat's transcript and the attention heatmap follow it (judged from grabbed pixels, not from
// the palette we set), the choice is remembered and applied at the next start, and "Follow the
// system" gives back the palette the platform started the app with.
#include <QAction>
#include <QApplication>
#include <QMenu>
#include <QMenuBar>
#include <QSettings>
#include <QStandardPaths>
#include <QTextBrowser>
#include <QtTest>

#include "attention_heatmap.h"
#include "chat_view.h"
#include "main_window.h"
#include "reference/tiny_model.h"
#include "theme.h"
#include "util/test_paths.h"
#include "window_fixture.h"

using namespace tokenscope;

namespace {
QAction* theme_action(QMainWindow& w, const QString& name) {
    for (QAction* menu : w.menuBar()->actions()) {
        if (!menu->menu()) continue;
        for (QAction* a : menu->menu()->actions())
            if (a->menu())
                for (QAction* t : a->menu()->actions())
                    if (t->data().toString() == name) return t;
    }
    return nullptr;
}

// Mean lightness of a widget's pixels, and the share of pixels far from it (text, marks).
std::pair<double, double> lightness(QWidget* widget) {
    const QImage image = widget->grab().toImage();
    double sum = 0;
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x) sum += QColor(image.pixel(x, y)).lightness();
    const double mean = sum / (image.width() * image.height());
    int far = 0;
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x)
            if (std::abs(QColor(image.pixel(x, y)).lightness() - mean) > 100) ++far;
    return {mean, double(far) / (image.width() * image.height())};
}
}  // namespace

class TestThemes : public QObject {
    Q_OBJECT
    QString model_;
    QPalette start_palette_;

  private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QSettings().remove("view/theme");
        start_palette_ = QApplication::palette();
        model_ =
            QString::fromStdString(test::tiny_model_path("theme_llama", test::TinyModelSpec{}));
    }

    void darkLightAndSystem() {
        auto w = test::open_main_window(
            model_, QString::fromStdString(test::scratch_dir()) + "/themes.sqlite");
        w->resize(1280, 720);
        ui::ChatView* chat = w->chatView();
        chat->addMessage(ui::MessageRole::User,
                         "Readable in both themes? A line of text to find in the pixels.");
        QWidget* transcript = chat->transcript()->viewport();

        QAction* dark = theme_action(*w, "dark");
        QAction* light = theme_action(*w, "light");
        QAction* system = theme_action(*w, "system");
        QVERIFY(dark && light && system);
        QVERIFY(system->isChecked());  // nothing remembered: follow the system

        dark->trigger();
        QApplication::processEvents();
        QVERIFY(app::is_dark(QApplication::palette()));
        QCOMPARE(QSettings().value("view/theme").toString(), QString("dark"));
        const auto [dark_mean, dark_text] = lightness(transcript);
        QVERIFY2(dark_mean < 80, qPrintable(QString::number(dark_mean)));
        QVERIFY2(dark_text > 0.002, qPrintable(QString::number(dark_text)));  // light text on it
        // The heatmap's empty cells (above the diagonal) come from the palette too.
        QVERIFY(QColor(w->attentionView()->maskedColor()).lightness() < 100);

        light->trigger();
        QApplication::processEvents();
        QVERIFY(!app::is_dark(QApplication::palette()));
        const auto [light_mean, light_text] = lightness(transcript);
        QVERIFY2(light_mean > 200, qPrintable(QString::number(light_mean)));
        QVERIFY2(light_text > 0.002, qPrintable(QString::number(light_text)));
        QVERIFY(QColor(w->attentionView()->maskedColor()).lightness() > 150);

        system->trigger();
        QApplication::processEvents();
        QCOMPARE(QApplication::palette().color(QPalette::Base),
                 start_palette_.color(QPalette::Base));
        QCOMPARE(QApplication::palette().color(QPalette::Text),
                 start_palette_.color(QPalette::Text));
        QCOMPARE(QSettings().value("view/theme").toString(), QString("system"));
    }

    // The remembered theme is the one a new window starts in.
    void rememberedAtStart() {
        QSettings().setValue("view/theme", "dark");
        auto w = test::open_main_window(
            model_, QString::fromStdString(test::scratch_dir()) + "/themes2.sqlite");
        QVERIFY(app::is_dark(QApplication::palette()));
        QVERIFY(theme_action(*w, "dark")->isChecked());
        app::apply_theme(app::Theme::System);
        QSettings().remove("view/theme");
    }
};

QTEST_MAIN(TestThemes)
#include "test_themes.moc"
