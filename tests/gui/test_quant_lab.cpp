// Tools › Quantization lab on a tiny model: the job's rows, the table and the plot filling in,
// the files it writes (opened as the current model), cancelling, the explanation's numbers, and
// the menu entry on a loaded model.
#include <QAction>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QMenuBar>
#include <QPushButton>
#include <QSemaphore>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "main_window.h"
#include "quant/eval_plot.h"
#include "quant_lab_job.h"
#include "quant_lab_text.h"
#include "quant_lab_window.h"
#include "reference/tiny_model.h"
#include "window_fixture.h"

using namespace tokenscope;
using app::QuantLabWindow;

namespace {

QStringList gguf_files(const QString& dir) {
    return QDir(dir).entryList(QDir::Files, QDir::Name);
}

QByteArray file_bytes(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace

class TestQuantLab : public QObject {
    Q_OBJECT
    QString model_;

  private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        // Width 64 and FFN 128: whole 32-blocks, so Q8_0 and Q4_0 apply to every matrix.
        model_ =
            QString::fromStdString(test::tiny_model_path("quant_lab_llama", test::TinyModelSpec{}));
    }

    // Hand-computed: Q8_0 is 34 bytes per 32 weights (8.5 bits), Q4_K 144 per 256 (4.5),
    // Q2_K 84 per 256 (2.625); the KV cache of 2 layers x 2 KV heads x 16 dims at 2 bytes is
    // 2 x 2 x 2 x 16 x 2 = 256 bytes per token, 131072 for 512 tokens.
    void explanationUsesTheModelsNumbers() {
        QCOMPARE(app::bits_per_weight("Q8_0"), 8.5);
        QCOMPARE(app::bits_per_weight("Q4_K"), 4.5);
        QCOMPARE(app::bits_per_weight("q2_k"), 2.625);
        QCOMPARE(app::bits_per_weight("nonsense"), 0.0);
        ui::ModelInfoData info;
        info.name = "tiny";
        info.parameters = 1000000;
        info.weight_bytes = 4000000;  // F32: 32 bits per weight
        info.layers = 2;
        info.kv_heads = 2;
        info.head_dim = 16;
        QCOMPARE(app::kv_bytes_per_token(info), qint64(256));
        const QString html = app::quantization_explanation(info, 512);
        QVERIFY(html.contains("32.00 bits per weight"));
        QVERIFY(html.contains("256 bytes per token"));
        QVERIFY(html.contains(QLocale().toString(0.131072, 'f', 2) + " MB for 512"));
        // Q4_K: 1e6 weights x 4.5 bits = 562500 bytes.
        QVERIFY2(html.contains("At Q4_K: about " + QLocale().toString(0.5625, 'f', 2) + " MB"),
                 qPrintable(html));
        // Without a model, only the general part.
        QVERIFY(!app::quantization_explanation({}, 0).contains("This model"));
    }

    void builtinSampleSplitsInHalves() {
        const QString a = QuantLabWindow::builtinCalibrationText();
        const QString b = QuantLabWindow::builtinEvaluationText();
        QVERIFY(a.size() > 1000);
        QVERIFY(b.size() > 1000);
        QFile f(QStringLiteral(":/text/perplexity_english.txt"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(a + b, QString::fromUtf8(f.readAll()));  // disjoint and complete
    }

    void labelsFollowTheTypes() {
        app::QuantLabRequest r;
        r.types = {"Q8_0", "Q4_0", "F16"};
        QCOMPARE(app::quant_lab_labels(r), (QStringList{"Q8_0", "Q4_0", "F16"}));
        r.calibrate = true;  // the imatrix changes neither Q8_0 nor F16
        QCOMPARE(app::quant_lab_labels(r), (QStringList{"Q8_0", "Q4_0", "Q4_0 + imatrix", "F16"}));
    }

    void runFillsTheTableAndThePlot() {
        QTemporaryDir out;
        QVERIFY(out.isValid());
        QuantLabWindow w;
        w.setBase(model_);
        w.setTypes({"Q8_0", "Q4_0"});
        w.setCalibrate(true);
        w.setOutputDirectory(out.path());
        w.show();
        QSignalSpy done(&w, &QuantLabWindow::runFinished);
        w.start();
        QVERIFY(w.running());
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 240000);
        QCOMPARE(done[0][0].toBool(), false);  // not cancelled
        QCOMPARE(done[0][1].toString(), QString());
        QTableWidget* t = w.table();
        QCOMPARE(t->rowCount(), 4);  // base, Q8_0, Q4_0, Q4_0 + imatrix
        QCOMPARE(t->item(0, 0)->text(), QString("base (original)"));
        QCOMPARE(t->item(3, 0)->text(), QString("Q4_0 + imatrix"));
        QVERIFY(t->item(0, 3)->text().toDouble() > 1.0 ||
                QLocale().toDouble(t->item(0, 3)->text()) > 1.0);  // perplexity
        QStringList paths;
        std::vector<double> kl;
        for (int r = 1; r < 4; ++r) {
            const QString path = t->item(r, 0)->data(Qt::UserRole).toString();
            QVERIFY2(QFileInfo(path).isFile(), qPrintable(path));
            paths << path;
            bool ok = false;
            kl.push_back(QLocale().toDouble(t->item(r, 5)->text(), &ok));
            QVERIFY2(ok && kl.back() >= 0.0, qPrintable(t->item(r, 5)->text()));
        }
        // 8 bits lose far less than 4 (relative rounding error ~0.4 % against ~7 %).
        QVERIFY2(kl[0] < kl[1], qPrintable(QString("%1 %2").arg(kl[0]).arg(kl[1])));
        // The imatrix changes the chosen scales, not the format: the same bits per weight (the
        // file is a few bytes longer for the metadata naming the calibration text), other bytes.
        QCOMPARE(t->item(3, 2)->text(), t->item(2, 2)->text());
        QVERIFY(std::abs(QFileInfo(paths[2]).size() - QFileInfo(paths[1]).size()) < 1024);
        QVERIFY(file_bytes(paths[1]) != file_bytes(paths[2]));
        QCOMPARE(gguf_files(out.path()).size(), 3);  // nothing else left in the folder
        // The plot: the engine's renderer at the plot tab's size, with the three rows' points
        // in the points' colour.
        const QImage plot = w.plot();
        QVERIFY(!plot.isNull());
        QVERIFY(plot.width() >= 320 && plot.height() >= 240);
        int point_pixels = 0;
        for (int y = 0; y < plot.height(); ++y) {
            for (int x = 0; x < plot.width(); ++x)
                point_pixels += (plot.pixel(x, y) & 0xFFFFFF) == quant::kEvalPlotPointRgb;
        }
        QVERIFY2(point_pixels >= 3, qPrintable(QString::number(point_pixels)));

        // Open as current model: the selected row's file.
        QSignalSpy open(&w, &QuantLabWindow::openModelRequested);
        t->selectRow(2);
        auto* button = w.findChild<QPushButton*>();
        for (auto* b : w.findChildren<QPushButton*>()) {
            if (b->text().contains("Open as current model")) button = b;
        }
        QVERIFY(button && button->isEnabled());
        button->click();
        QCOMPARE(open.count(), 1);
        QCOMPARE(open[0][0].toString(), paths[1]);
    }

    // Cancelled before its first tensor: finished(cancelled), and no file at all (each is
    // written under a temporary name and renamed when complete).
    void cancelLeavesNoFile() {
        QTemporaryDir out;
        QVERIFY(out.isValid());
        QuantLabWindow w;
        w.setBase(model_);
        w.setTypes({"Q8_0", "Q4_0", "F16"});
        w.setCalibrate(false);
        w.setOutputDirectory(out.path());
        QSignalSpy done(&w, &QuantLabWindow::runFinished);
        // Hold the job thread until the cancel is in: without this, a busy 2-core machine can
        // run the whole tiny quantization between start() and cancel() (it did in CI).
        QSemaphore released;
        QObject blocker;
        blocker.moveToThread(w.jobThread());
        QMetaObject::invokeMethod(
            &blocker, [&released] { released.acquire(); }, Qt::QueuedConnection);
        w.start();
        w.cancel();
        released.release();
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 60000);
        QCOMPARE(done[0][0].toBool(), true);
        QVERIFY(!w.running());
        QCOMPARE(gguf_files(out.path()), QStringList());
    }

    void badRequestsAreExplained() {
        QuantLabWindow w;
        w.setBase("/nonexistent/model.gguf");
        w.start();
        QVERIFY(!w.running());
        auto* status = w.findChild<QLabel*>("quantStatus");
        QVERIFY(status->text().contains("/nonexistent/model.gguf"));
        w.setBase(model_);
        w.setTypes({});
        w.start();
        QVERIFY(!w.running());
        QVERIFY(status->text().contains("at least one type"));
    }

    // Tools › Quantization lab… on a loaded model: the window opens with that model as the base
    // and its numbers in the explanation.
    void toolsMenuOpensItOnTheModel() {
        QTemporaryDir dir;
        const auto w = test::open_main_window(model_, dir.path() + "/c.sqlite");
        QVERIFY(w->modelReady());
        app::MainWindow& window = *w;
        QAction* action = test::find_menu_action(window, "Quantization lab");
        QVERIFY(action);
        action->trigger();
        auto* lab = window.findChild<QuantLabWindow*>();
        QVERIFY(lab && lab->isVisible());
        QCOMPARE(lab->request().base, model_);
        QVERIFY(lab->explanationHtml().contains("This model"));
        QVERIFY(lab->explanationHtml().contains(QLocale().toString(qint64(1024))));
    }
};

QTEST_MAIN(TestQuantLab)
#include "test_quant_lab.moc"
