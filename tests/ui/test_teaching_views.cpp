// The teaching widgets fed known data, offscreen: HeadGrid renders each head's weights in the
// heatmap's colours and enlarges a clicked head; HeadOverview colours cells by the chosen
// measure and reports clicks; StepView shows a step's pipeline and browses steps; exports write
// PNGs of the right size, well-formed SVG, and the numbers as CSV/JSON.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QToolButton>
#include <QXmlStreamReader>
#include <QtTest>

#include "distribution_chart.h"
#include "export_actions.h"
#include "head_grid.h"
#include "head_overview.h"
#include "heatmap_renderer.h"
#include "step_view.h"
#include "widget_test_support.h"

using namespace tokenscope::ui;

namespace {

// Four heads over three query rows: head h puts weight on key (q - h) clamped at 0.
HeadGridData grid_data(int first_query = 0, int rows = 3) {
    HeadGridData d;
    d.layer = 2;
    d.first_query = first_query;
    for (int i = 0; i < first_query + rows; ++i) d.labels << QStringLiteral("t%1").arg(i);
    for (int h = 0; h < 4; ++h) {
        QVector<QVector<float>> head;
        for (int r = 0; r < rows; ++r) {
            const int q = first_query + r;
            QVector<float> row(q + 1, 0.0f);
            row[std::max(0, q - h)] = 1.0f;
            head.push_back(row);
        }
        d.heads.push_back(head);
    }
    return d;
}

StepData step_data(int index, bool prefill) {
    StepData s;
    s.index = index;
    s.prefill = prefill;
    s.attention = prefill ? grid_data(0, 3) : grid_data(2 + index, 1);
    s.inputs =
        prefill ? QStringList{"t0", "t1", "t2"} : QStringList{QStringLiteral("t%1").arg(2 + index)};
    s.token.id = 7;
    s.token.text = QStringLiteral(" cat");
    s.token.probability = 0.5f;
    s.token.logprob = std::log(0.25f);
    s.token.before = {{7, " cat", 0.25f, 2.0f}, {8, " dog", 0.2f, 1.8f}, {9, " the", 0.1f, 1.1f}};
    s.flops = prefill ? 3e9 : 1e9;
    s.attention_flops = 1e6;
    s.weight_bytes = 1e8;
    s.kv_read_bytes = 1e5;
    s.kv_write_bytes = 1e4;
    s.kv_position = prefill ? 2 : 2 + index;
    return s;
}

QByteArray read(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace

class TestTeachingViews : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

  private slots:
    void headGridRendersEveryHead() {
        HeadGrid grid;
        grid.resize(400, 300);
        grid.show();
        QSignalSpy ready(&grid, &HeadGrid::imagesReady);
        grid.setData(grid_data());
        QVERIFY(ready.wait(5000));
        QCOMPARE(grid.headImages().size(), 4);
        for (int h = 0; h < 4; ++h) {
            const QImage& img = grid.headImages()[h];
            QCOMPARE(img.size(), QSize(3, 3));  // keys x rows
            // Row 2: weight 1 on key max(0, 2 - h), 0 elsewhere; key > row masked.
            QCOMPARE(img.pixel(std::max(0, 2 - h), 2), weight_color(1.0f, ColorScale::Sqrt));
            QCOMPARE(img.pixel(1, 0), grid.palette().color(QPalette::AlternateBase).rgb());
        }
        test::save_png(grid, "head_grid");
    }

    void clickEnlargesAHead() {
        HeadGrid grid;
        grid.resize(400, 300);
        grid.show();
        QSignalSpy ready(&grid, &HeadGrid::imagesReady);
        grid.setData(grid_data());
        QVERIFY(ready.wait(5000));
        QSignalSpy clicked(&grid, &HeadGrid::headClicked);
        const QRect r = grid.panelRect(3);
        QVERIFY(!r.isEmpty());
        QTest::mouseClick(&grid, Qt::LeftButton, {}, r.center());
        QCOMPARE(clicked.count(), 1);
        QCOMPARE(clicked[0][0].toInt(), 3);
        QCOMPARE(grid.enlargedHead(), 3);
        QVERIFY(grid.panelRect(0).isEmpty());
        test::save_png(grid, "head_grid_enlarged");
        QTest::mouseClick(&grid, Qt::LeftButton, {}, QPoint(50, 50));
        QCOMPARE(grid.enlargedHead(), -1);
    }

    // PNG: the widget painted at 2x (the exported size), non-empty; SVG well-formed with one
    // rect per lower-triangle cell; CSV and JSON hold the weights.
    void headGridExports() {
        HeadGrid grid;
        grid.resize(300, 200);
        grid.show();
        QSignalSpy ready(&grid, &HeadGrid::imagesReady);
        grid.setData(grid_data());
        QVERIFY(ready.wait(5000));
        ExportSource source;
        source.image = [&] { return grid.renderImage(2.0); };
        const auto e = attentionExport(grid.data());
        source.svg = [e] {
            return QString::fromStdString(tokenscope::inspect::attention_grid_svg(e, {}));
        };
        source.csv = [e] { return QString::fromStdString(tokenscope::inspect::attention_csv(e)); };
        source.json = [e] {
            return QString::fromStdString(tokenscope::inspect::attention_json(e));
        };
        const QString png = dir_.filePath("grid.png");
        QVERIFY(exportTo(&grid, source, png));
        QImage image(png);
        QCOMPARE(image.size(), QSize(600, 400));
        // Not blank: some pixel has viridis' top colour.
        bool bright = false;
        for (int y = 0; y < image.height() && !bright; ++y)
            for (int x = 0; x < image.width() && !bright; ++x)
                bright = (image.pixel(x, y) & 0xFFFFFF) ==
                         (weight_color(1.0f, ColorScale::Sqrt) & 0xFFFFFF);
        QVERIFY(bright);

        const QString svg = dir_.filePath("grid.svg");
        QVERIFY(exportTo(&grid, source, svg));
        QXmlStreamReader xml(read(svg));
        int rects = 0;
        while (!xml.atEnd())
            if (xml.readNext() == QXmlStreamReader::StartElement &&
                xml.name() == QLatin1String("rect"))
                ++rects;
        QVERIFY2(!xml.hasError(), qPrintable(xml.errorString()));
        QCOMPARE(rects, 1 + 4 * (1 + 6));  // page, and per head its background and 6 cells

        const QString json = dir_.filePath("grid.json");
        QVERIFY(exportTo(&grid, source, json));
        const QJsonArray matrices =
            QJsonDocument::fromJson(read(json)).object()["matrices"].toArray();
        QCOMPARE(matrices.size(), 4);
        QCOMPARE(matrices[1].toObject()["rows"].toArray()[2].toArray()[1].toDouble(), 1.0);
        const QString csv = dir_.filePath("grid.csv");
        QVERIFY(exportTo(&grid, source, csv));
        QCOMPARE(read(csv).trimmed().split('\n').size(), 1 + 4 * 6);

        QString error;
        QVERIFY(!exportTo(&grid, ExportSource{}, dir_.filePath("grid.csv"), &error));
        QVERIFY(error.contains("csv"));
    }

    // The distribution chart's PNG is the widget grabbed: exactly its size.
    void chartPngIsTheWidgetSize() {
        DistributionChart chart;
        chart.resize(320, 240);
        chart.show();
        chart.setLastStep(step_data(0, true).token.before);
        test::settle();
        const QString png = dir_.filePath("chart.png");
        QVERIFY(exportTo(&chart, ExportSource{}, png));
        QImage image(png);
        QCOMPARE(image.size(), QSize(320, 240) * chart.devicePixelRatio());
        QVERIFY(QFile(png).size() > 1000);
        const QString svg = distributionSvg(chart.candidates(), chart.rawProbabilities(),
                                            chart.shapedProbabilities());
        QXmlStreamReader xml(svg);
        while (!xml.atEnd()) xml.readNext();
        QVERIFY2(!xml.hasError(), qPrintable(xml.errorString()));
        QVERIFY(svg.contains("dog"));
        const QStringList lines = distributionCsv(chart.candidates(), chart.rawProbabilities(),
                                                  chart.shapedProbabilities())
                                      .trimmed()
                                      .split('\n');
        QCOMPARE(lines.size(), 4);
        QVERIFY(lines[1].startsWith("1,7,\" cat\","));
    }

    void overviewColoursAndClicks() {
        HeadOverview overview;
        overview.resize(300, 260);
        overview.show();
        HeadOverviewData d;
        d.layers = 3;
        d.heads = 4;
        d.rows = 10;
        for (int i = 0; i < 12; ++i) {
            d.entropy << float(i) / 11.0f;
            d.distance << float(11 - i);
        }
        overview.setData(d);
        test::settle();
        const QImage img = overview.map()->grab().toImage();
        const QRect top = overview.cellRect(2, 3);  // the largest entropy
        QCOMPARE(img.pixel(top.center()) & 0xFFFFFF, colormap(1.0f) & 0xFFFFFF);
        overview.setMeasure(HeadOverview::Measure::Distance);
        QCOMPARE(overview.value(0, 0), 11.0f);
        const QImage img2 = overview.map()->grab().toImage();
        QCOMPARE(img2.pixel(overview.cellRect(0, 0).center()) & 0xFFFFFF,
                 colormap(1.0f) & 0xFFFFFF);
        QSignalSpy chosen(&overview, &HeadOverview::headChosen);
        QTest::mouseClick(overview.map(), Qt::LeftButton, {}, overview.cellRect(1, 2).center());
        QCOMPARE(chosen.count(), 1);
        QCOMPARE(chosen[0][0].toInt(), 1);
        QCOMPARE(chosen[0][1].toInt(), 2);
        test::save_png(overview, "head_overview");
    }

    void stepViewBrowsesSteps() {
        StepView view;
        view.resize(520, 640);
        view.show();
        view.setModelShape(4, 4);
        QSignalSpy step(&view, &StepView::stepRequested);
        QTest::mouseClick(view.stepButton(), Qt::LeftButton);
        QCOMPARE(step.count(), 1);
        QVERIFY(!view.backButton()->isEnabled());
        StepData first = step_data(0, true);
        first.attention.layer = 0;
        view.addStep(first);
        QVERIFY(view.titleText().startsWith("Prefill"));
        QVERIFY(view.costText().contains("GFLOP"));
        QVERIFY(view.sampledText().contains("0.500"));
        StepData second = step_data(1, false);
        second.attention.layer = 0;
        view.addStep(second);
        QCOMPARE(view.currentStep(), 1);
        QVERIFY(view.titleText().startsWith("Decode"));
        QCOMPARE(view.headGrid()->data().rows(), 1);
        QCOMPARE(view.chart()->candidates().size(), 3);
        test::save_png(view, "step_view");
        QTest::mouseClick(view.backButton(), Qt::LeftButton);
        QCOMPARE(view.currentStep(), 0);
        QCOMPARE(view.headGrid()->data().rows(), 3);
        QVERIFY(view.forwardButton()->isEnabled());
        // Another layer: the view asks for the shown step's rows of that layer.
        QSignalSpy wanted(&view, &StepView::attentionRequested);
        view.findChild<QSpinBox*>()->setValue(3);
        QCOMPARE(wanted.count(), 1);
        QCOMPARE(wanted[0][0].toInt(), 3);
        QCOMPARE(wanted[0][1].toInt(), 0);
        QCOMPARE(wanted[0][2].toInt(), 3);
        HeadGridData layer3 = grid_data(0, 3);
        layer3.layer = 3;
        view.setStepAttention(layer3);
        QCOMPARE(view.shownStep()->attention.layer, 3);
    }
};

QTEST_MAIN(TestTeachingViews)
#include "test_teaching_views.moc"
