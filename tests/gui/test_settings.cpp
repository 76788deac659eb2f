// Edit › Settings… (issue 19): the dialog shows the values in use, OK saves them with QSettings
// and offers to reload the model when a load setting changed; reloading applies them (the
// status line names the engine's thread count and the chat template the worker built, which
// come from the engine and the prompt builder, not from the dialog); Cancel changes nothing;
// the models folder feeds File › Models, and the default preset is what a new window starts
// with.
#include <QAction>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include "main_window.h"
#include "reference/tiny_model.h"
#include "sampling_panel.h"
#include "settings_dialog.h"
#include "util/test_paths.h"
#include "window_fixture.h"

using namespace tokenscope;
using app::SettingsDialog;

namespace {
void clear_settings() {
    QSettings s;
    for (const char* key : {"model/threads", "model/context", "model/kv_type", "model/device",
                            "model/chat_template", "sampling/preset", "paths/models"})
        s.remove(key);
}
QString model_status(QMainWindow& w) {
    for (QLabel* l : w.findChildren<QLabel*>())
        if (l->text().contains(QString::fromUtf8("— template:"))) return l->text();
    return {};
}
}  // namespace

class TestSettings : public QObject {
    Q_OBJECT
    QString model_;
    QTemporaryDir dir_;

  private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        clear_settings();
        model_ =
            QString::fromStdString(test::tiny_model_path("settings_llama", test::TinyModelSpec{}));
    }
    void cleanupTestCase() { clear_settings(); }

    void okSavesAndReloadApplies() {
        auto w = test::open_main_window(model_, dir_.path() + "/a.sqlite");
        QVERIFY(w->modelReady());
        QAction* action = test::find_menu_action(*w, "Settings");
        QVERIFY(action);
        QCOMPARE(action->shortcut(), QKeySequence(QStringLiteral("Ctrl+,")));
        QVERIFY2(model_status(*w).contains("1 threads"), qPrintable(model_status(*w)));

        action->trigger();
        auto* dialog = w->findChild<SettingsDialog*>("settingsDialog");
        QVERIFY(dialog);
        // The values in use: the window's (the fixture's 1 thread, 1024 tokens).
        QCOMPARE(dialog->threadsBox()->value(), 1);
        QCOMPARE(dialog->contextBox()->value(), 1024);
        QCOMPARE(dialog->templateBox()->currentData().toString(), QString());
        dialog->threadsBox()->setValue(2);
        dialog->contextBox()->setValue(2048);
        dialog->templateBox()->setCurrentIndex(dialog->templateBox()->findData("chatml"));
        dialog->presetBox()->setCurrentIndex(dialog->presetBox()->findData("creative"));
        dialog->modelsFolderEdit()->setText(dir_.path());
        dialog->accept();

        QSettings s;
        QCOMPARE(s.value("model/threads").toInt(), 2);
        QCOMPARE(s.value("model/context").toInt(), 2048);
        QCOMPARE(s.value("model/chat_template").toString(), QString("chatml"));
        QCOMPARE(s.value("sampling/preset").toString(), QString("creative"));
        QCOMPARE(w->load_options().kv_capacity_tokens, 2048);
        QCOMPARE(w->models_folder(), dir_.path());

        QMessageBox* ask = nullptr;
        QTRY_VERIFY((ask = w->findChild<QMessageBox*>("reloadPrompt")) != nullptr);
        QPushButton* reload = nullptr;
        for (QAbstractButton* b : ask->buttons())
            if (b->text().contains("Reload")) reload = qobject_cast<QPushButton*>(b);
        QVERIFY(reload);
        reload->click();
        QTRY_VERIFY_WITH_TIMEOUT(model_status(*w).contains("2 threads"), 30000);
        QVERIFY2(model_status(*w).contains("chatml"), qPrintable(model_status(*w)));

        // The models folder is the one File › Models lists.
        w->scanModels();
        QMenu* models = nullptr;
        for (QAction* menu : w->menuBar()->actions())
            if (menu->menu())
                for (QAction* a : menu->menu()->actions())
                    if (a->menu() && a->text().contains("Models")) models = a->menu();
        QVERIFY(models);
        QTRY_VERIFY_WITH_TIMEOUT(
            !models->actions().isEmpty() && models->actions().first()->text().contains(dir_.path()),
            10000);
    }

    // Cancel keeps everything; nothing to reload, nothing asked.
    void cancelChangesNothing() {
        clear_settings();
        auto w = test::open_main_window(model_, dir_.path() + "/b.sqlite");
        w->showSettings();
        auto* dialog = w->findChild<SettingsDialog*>("settingsDialog");
        QVERIFY(dialog);
        dialog->threadsBox()->setValue(7);
        dialog->reject();
        QVERIFY(!QSettings().contains("model/threads"));
        QTest::qWait(50);
        QVERIFY(!w->findChild<QMessageBox*>("reloadPrompt"));
        QCOMPARE(w->load_options().threads, 1);
    }

    // The default preset is what a new window's sampling panel starts with.
    void defaultPresetAtStart() {
        QSettings().setValue("sampling/preset", "precise");
        auto w = test::open_main_window(model_, dir_.path() + "/c.sqlite");
        ui::SamplingPanel reference;
        reference.applyPreset(ui::SamplingPanel::Preset::Precise);
        QCOMPARE(w->samplingPanel()->settings().temperature, reference.settings().temperature);
        QCOMPARE(w->samplingPanel()->settings().top_k, reference.settings().top_k);
        reference.applyPreset(ui::SamplingPanel::Preset::Balanced);
        QVERIFY(w->samplingPanel()->settings().temperature != reference.settings().temperature);
        clear_settings();
    }
};

QTEST_MAIN(TestSettings)
#include "test_settings.moc"
