// The batch demo: the timeline view against hand-made data, the window against a tiny model
// (a real engine, its real schedule), and the Tools menu entry.
#include <QAction>
#include <QApplication>
#include <QHelpEvent>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMenuBar>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QToolTip>
#include <QXmlStreamReader>
#include <QtTest>

#include "batch_demo_window.h"
#include "batch_timeline_view.h"
#include "main_window.h"
#include "reference/tiny_model.h"
#include "window_fixture.h"

using namespace tokenscope;
using ui::BatchTimelineCell;

class TestBatchDemo : public QObject {
    Q_OBJECT
    QString model_;

  private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        model_ = QString::fromStdString(
            test::tiny_model_path("batch_demo_llama", test::TinyModelSpec{}));
    }

    // Three requests over four steps, drawn: each cell's centre has its kind's colour, absent
    // cells are background, and the CSV lists exactly the present cells.
    void viewPaintsTheData() {
        ui::BatchTimelineData d;
        d.rows = {"a", "b", "c"};
        d.budget = 8;
        using C = BatchTimelineCell;
        d.steps = {{{C::Prefill, 8}, {}, {}},
                   {{C::Prefill, 4}, {C::Prefill, 4}, {}},
                   {{C::Decode, 1}, {C::Waiting, 0}, {C::Prefill, 7}},
                   {{C::Decode, 1}, {C::Preempted, 0}, {C::Decode, 1}}};
        QCOMPARE(d.scheduledTokens(1), 8);
        QCOMPARE(d.scheduledTokens(3), 2);
        ui::BatchTimelineView view;
        view.resize(600, 240);
        view.setData(d);
        const QImage image = view.render();
        auto centre_colour = [&](int step, int row) {
            const QRect r = view.cellRect(step, row);
            // Off the text: a quarter of the way in.
            return QColor(image.pixel(r.left() + r.width() / 4, r.top() + r.height() / 4));
        };
        QCOMPARE(centre_colour(0, 0), ui::batchKindColor(C::Prefill));
        QCOMPARE(centre_colour(2, 0), ui::batchKindColor(C::Decode));
        QCOMPARE(centre_colour(2, 1), ui::batchKindColor(C::Waiting));
        QCOMPARE(centre_colour(3, 1), ui::batchKindColor(C::Preempted));
        QCOMPARE(centre_colour(0, 1), view.palette().color(QPalette::Base));  // not yet joined
        // Hovering a cell names it (the view is shown so the tooltip can appear).
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        const QRect hovered = view.cellRect(3, 1);
        QHelpEvent help(QEvent::ToolTip, hovered.center(), view.mapToGlobal(hovered.center()));
        QApplication::sendEvent(&view, &help);
        QTRY_COMPARE(QToolTip::text(), QString("step 3, request 2: preempted"));
        const QStringList lines = d.csv().trimmed().split('\n');
        QCOMPARE(lines.size(), 1 + 9);  // header + the nine present cells
        QCOMPARE(lines[1], QString("0,1,prefill,8"));
        QVERIFY(lines.contains("3,2,preempted,0"));

        // JSON: the same nine cells, step by step.
        const QJsonObject json = QJsonDocument::fromJson(d.json().toUtf8()).object();
        QCOMPARE(json["budget"].toInt(), 8);
        QCOMPARE(json["requests"].toArray().size(), 3);
        const QJsonArray steps = json["steps"].toArray();
        QCOMPARE(steps.size(), 4);
        int cells = 0;
        for (const auto& step : steps) cells += step.toArray().size();
        QCOMPARE(cells, 9);
        QCOMPARE(steps[2].toArray()[2].toObject()["kind"].toString(), QString("prefill"));
        QCOMPARE(steps[2].toArray()[2].toObject()["tokens"].toInt(), 7);
        QCOMPARE(steps[2].toArray()[2].toObject()["request"].toInt(), 3);

        // SVG: well-formed, one rectangle per cell in its kind's colour (4 prefill chunks,
        // 3 decode tokens, 1 waiting, 1 preempted), one bar per step.
        QXmlStreamReader svg(d.svg());
        QMap<QString, int> rects;
        while (!svg.atEnd()) {
            if (svg.readNext() != QXmlStreamReader::StartElement || svg.name() != u"rect") continue;
            const QString kind = svg.attributes().value("class").toString();
            if (kind.isEmpty()) continue;  // the background
            ++rects[kind];
            if (kind == "prefill")
                QCOMPARE(svg.attributes().value("fill").toString(),
                         ui::batchKindColor(C::Prefill).name());
        }
        QVERIFY2(!svg.hasError(), qPrintable(svg.errorString()));
        QCOMPARE(rects["prefill"], 4);
        QCOMPARE(rects["decode"], 3);
        QCOMPARE(rects["waiting"], 1);
        QCOMPARE(rects["preempted"], 1);
        QCOMPARE(rects["bar"], 4);
    }

    // A server's budget (512) far above its decode steps (2-4 tokens): the bars are scaled to
    // the steps, so the 4-token step's bar stands tall, and no budget line is drawn; with a
    // budget the steps reach (8), the line is there.
    void offScaleBudgetKeepsTheBarsVisible() {
        using C = BatchTimelineCell;
        const auto bar_and_line = [](int budget) {
            ui::BatchTimelineData d;
            d.rows = {"a", "b", "c", "d"};
            d.budget = budget;
            d.steps = {{{C::Decode, 1}, {C::Decode, 1}, {C::Decode, 1}, {C::Decode, 1}},
                       {{C::Decode, 1}, {C::Decode, 1}, {}, {}}};
            ui::BatchTimelineView view;
            view.resize(600, 240);
            view.setData(d);
            const QImage image = view.render();
            const int x = view.cellRect(0, 0).center().x();
            int grey = 0, red = 0;
            for (int y = 0; y < view.cellRect(0, 0).top(); ++y)
                if (QColor(image.pixel(x, y)) == QColor(0x8C, 0x8C, 0x8C)) ++grey;
            // Right of the labels (the budget's label is in the line's colour too).
            for (int y = 0; y < image.height(); ++y)
                for (int xx = view.cellRect(0, 0).left(); xx < image.width(); ++xx)
                    if (QColor(image.pixel(xx, y)) == QColor(0xC0, 0x39, 0x2B)) ++red;
            return std::pair{grey, red};
        };
        const auto [tall, no_line] = bar_and_line(512);
        QVERIFY2(tall >= 20, qPrintable(QString::number(tall)));
        QCOMPARE(no_line, 0);
        const auto [half, line] = bar_and_line(8);
        QVERIFY2(half >= 8 && half < tall, qPrintable(QString::number(half)));  // 4 of 8
        QVERIFY(line > 0);
    }

    // A real run: 3 prompts, a budget of 8 tokens and a 96-token cache on a tiny model.
    void windowRunsTheEngine() {
        app::BatchDemoWindow w;
        w.setModelPath(model_);
        w.setPrompts({"Once upon a time there was a little robot who", "The weather today is",
                      "A small village near the sea"});
        w.setLimits(/*max_tokens=*/24, /*budget=*/8, /*kv=*/96, /*stagger=*/2);
        w.show();
        QSignalSpy done(&w, &app::BatchDemoWindow::runFinished);
        w.start();
        QVERIFY(w.running());
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 120000);
        QCOMPARE(done[0][0].toString(), QString());
        const ui::BatchTimelineData& d = w.timeline()->data();
        QCOMPARE(d.rows.size(), 3);
        QCOMPARE(d.budget, 8);
        QVERIFY(d.steps.size() > 24);
        bool chunked = false, decode = false;
        for (int s = 0; s < d.steps.size(); ++s) {
            QVERIFY(d.scheduledTokens(s) <= 8);
            for (const auto& c : d.steps[s]) {
                chunked |= c.kind == BatchTimelineCell::Prefill && c.tokens == 8;
                decode |= c.kind == BatchTimelineCell::Decode;
            }
        }
        QVERIFY(chunked && decode);
        QVERIFY2(w.summary().contains("tok/s together"), qPrintable(w.summary()));
        QVERIFY(w.summary().contains("first request alone"));
        QVERIFY(!w.timeline()->render().isNull());
    }

    void withoutAModelItSaysSo() {
        app::BatchDemoWindow w;
        w.start();
        QVERIFY(!w.running());
        QVERIFY(w.summary().contains("Load a local model"));
    }

    void toolsMenuOpensIt() {
        QTemporaryDir dir;
        const auto w = test::open_main_window(model_, dir.path() + "/c.sqlite");
        QVERIFY(w->modelReady());
        app::MainWindow& window = *w;
        QAction* action = test::find_menu_action(window, "Batch demo");
        QVERIFY(action);
        action->trigger();
        auto* demo = window.findChild<app::BatchDemoWindow*>();
        QVERIFY(demo && demo->isVisible());
        QCOMPARE(demo->settings().model_path, model_);
    }
};

QTEST_MAIN(TestBatchDemo)
#include "test_batch_demo.moc"
