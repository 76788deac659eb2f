// The attention heatmap: colours of the off-thread renderer at known cells, the widget's
// pixels, tooltips, live rows, the teaching overlay and the layer/head chooser.
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QHelpEvent>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStyleFactory>
#include <QTest>
#include <QToolButton>
#include <QToolTip>
#include <QWheelEvent>
#include <cmath>

#include "attention_heatmap.h"
#include "widget_test_support.h"
#include "heatmap_renderer.h"

using namespace tokenscope::ui;
using tokenscope::ui::test::dark_palette;
using tokenscope::ui::test::save_png;
using tokenscope::ui::test::settle;

namespace {

// The colour map's ends, written out by hand (viridis' first and last colours), so that the
// test does not only compare the implementation with itself.
const QRgb kFirst = qRgb(0x44, 0x01, 0x54);
const QRgb kLast = qRgb(0xFD, 0xE7, 0x25);

AttentionData three_by_three() {
    AttentionData d;
    d.layer = 2;
    d.head = 1;
    d.labels = {QStringLiteral("The"), QStringLiteral(" cat"), QStringLiteral(" sat")};
    d.rows = {{1.0f}, {0.25f, 0.75f}, {0.0f, 0.5f, 0.5f}};
    return d;
}

// A plausible pattern: an attention sink on token 0, a local diagonal, some long-range hits.
AttentionData sample_attention(int n) {
    const QStringList words = QStringLiteral(
                                  "<bos> The cat sat on the mat because it was warm . Then the "
                                  "dog came in , looked at the cat and lay down next to it . "
                                  "Both of them slept until the sun went down and the room grew "
                                  "cold again .")
                                  .split(QLatin1Char(' '));
    AttentionData d;
    d.layer = 5;
    d.head = -1;
    for (int q = 0; q < n; ++q) {
        d.labels << (q == 0 ? words[0] : QStringLiteral(" ") + words[q % words.size()]);
        QVector<float> row(q + 1);
        double sum = 0.0;
        for (int k = 0; k <= q; ++k) {
            double s = (k == 0 ? 3.0 : 0.0) + 2.5 * std::exp(-0.7 * (q - k)) +
                       0.8 * std::sin(0.37 * k * q) * std::sin(0.11 * k);
            if ((q - k) % 7 == 0 && k > 0) s += 1.0;
            row[k] = float(std::exp(s));
            sum += row[k];
        }
        for (float& w : row) w = float(w / sum);
        d.rows << row;
    }
    return d;
}

}  // namespace

class TestAttentionHeatmap : public QObject {
    Q_OBJECT
  private slots:
    void colormapEnds();
    void scalesKeepEnds();
    void rendererColoursAtCellCentres();
    void asyncRendererDropsStaleGenerations();
    void widgetShowsRenderedCells();
    void tooltipForHoveredCell();
    void appendRowGrowsImage();
    void appendRowDuringRender();
    void overlayExplainsCost();
    void selectionChangedFromControls();
    void zoomButtonsAndCtrlWheel();
    void longContextScalesCappedImage();
    void savePanelPngs();
};

void TestAttentionHeatmap::colormapEnds() {
    QCOMPARE(colormap(0.0f), kFirst);
    QCOMPARE(colormap(1.0f), kLast);
    QCOMPARE(colormap(-3.0f), kFirst);
    QCOMPARE(colormap(7.0f), kLast);
    // Sequential: luminance rises monotonically from the first to the last colour.
    double previous = -1.0;
    for (int i = 0; i <= 20; ++i) {
        const QColor c(colormap(float(i) / 20.0f));
        const double luma = 0.2126 * c.redF() + 0.7152 * c.greenF() + 0.0722 * c.blueF();
        QVERIFY2(luma > previous, qPrintable(QString::number(i)));
        previous = luma;
    }
}

void TestAttentionHeatmap::scalesKeepEnds() {
    for (ColorScale s : {ColorScale::Linear, ColorScale::Sqrt, ColorScale::Log}) {
        QCOMPARE(weight_color(0.0f, s), kFirst);
        QCOMPARE(weight_color(1.0f, s), kLast);
        QCOMPARE(weight_color(std::nanf(""), s), kFirst);
    }
    // sqrt(0.25) = 0.5: the same colour as a linear 0.5.
    QCOMPARE(weight_color(0.25f, ColorScale::Sqrt), weight_color(0.5f, ColorScale::Linear));
    QVERIFY(scale_weight(0.01f, ColorScale::Log) > scale_weight(0.01f, ColorScale::Sqrt));
}

void TestAttentionHeatmap::rendererColoursAtCellCentres() {
    HeatmapRequest req;
    const AttentionData d = three_by_three();
    req.rows = d.rows;
    req.columns = 3;
    req.cell = 10;
    req.scale = ColorScale::Linear;
    req.masked = qRgb(200, 201, 202);
    req.gap = qRgb(255, 255, 255);
    const QImage img = render_heatmap(req);
    QCOMPARE(img.size(), QSize(30, 30));
    auto at = [&](int q, int k) { return img.pixel(k * 10 + 5, q * 10 + 5); };
    QCOMPARE(at(0, 0), kLast);   // weight 1
    QCOMPARE(at(2, 0), kFirst);  // weight 0
    // 0.5 lies halfway between viridis anchors 4 (#26828E) and 5 (#1F9E89).
    const QColor mid(at(2, 1));
    QVERIFY(std::abs(mid.red() - (0x26 + 0x1F) / 2) <= 1);
    QVERIFY(std::abs(mid.green() - (0x82 + 0x9E) / 2) <= 1);
    QVERIFY(std::abs(mid.blue() - (0x8E + 0x89) / 2) <= 1);
    QCOMPARE(at(2, 2), at(2, 1));
    QCOMPARE(at(1, 0), weight_color(0.25f, ColorScale::Linear));
    QCOMPARE(at(1, 1), weight_color(0.75f, ColorScale::Linear));
    // Causal mask: the upper triangle is the neutral background.
    QCOMPARE(at(0, 1), req.masked);
    QCOMPARE(at(0, 2), req.masked);
    QCOMPARE(at(1, 2), req.masked);
    // Cells of 10 px are separated by a 1 px gap.
    QCOMPARE(img.pixel(9, 5), req.gap);
    QCOMPARE(img.pixel(5, 9), req.gap);
}

void TestAttentionHeatmap::asyncRendererDropsStaleGenerations() {
    HeatmapRenderer renderer;
    QSignalSpy spy(&renderer, &HeatmapRenderer::imageReady);
    HeatmapRequest req;
    req.rows = three_by_three().rows;
    req.columns = 3;
    req.cell = 4;
    renderer.request(req);
    req.cell = 5;
    const quint64 latest = renderer.request(req);
    QTRY_COMPARE(spy.count(), 1);
    QTest::qWait(50);  // a stale result would arrive around now
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).value<quint64>(), latest);
    const QImage img = spy.at(0).at(1).value<QImage>();
    QCOMPARE(img.size(), QSize(15, 15));
    QCOMPARE(spy.at(0).at(2).toInt(), 3);
}

void TestAttentionHeatmap::widgetShowsRenderedCells() {
    AttentionHeatmap w;
    w.resize(640, 480);
    w.setColorScale(ColorScale::Linear);
    w.setCellSize(20);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QSignalSpy updated(&w, &AttentionHeatmap::imageUpdated);
    w.setData(three_by_three());
    QTRY_VERIFY(!w.renderPending());
    QCOMPARE(updated.count(), 1);
    QCOMPARE(w.currentImage().size(), QSize(60, 60));

    const QImage shot = w.viewport()->grab().toImage();
    const auto& rows = w.data().rows;
    for (int q = 0; q < 3; ++q) {
        for (int k = 0; k < 3; ++k) {
            const QPoint c = w.cellCenter(q, k);
            const QRgb expected =
                k <= q ? weight_color(rows[q][k], ColorScale::Linear) : w.maskedColor();
            QCOMPARE(QColor(shot.pixel(c)).name(), QColor(expected).name());
        }
    }
}

void TestAttentionHeatmap::tooltipForHoveredCell() {
    AttentionHeatmap w;
    w.resize(640, 480);
    w.setCellSize(20);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.setData(three_by_three());
    QTRY_VERIFY(!w.renderPending());
    const QString expected = QStringLiteral("query ' sat' (2) → key ' cat' (1): 0.500");
    QCOMPARE(w.toolTipForCell(2, 1), expected);
    QCOMPARE(w.toolTipAt(w.cellCenter(2, 1)), expected);
    QVERIFY(w.toolTipForCell(0, 2).contains(QStringLiteral("masked")));
    QVERIFY(w.toolTipAt(QPoint(1, 1)).isEmpty());  // the label corner

    // The real hover path: a tooltip event on the viewport shows that text.
    const QPoint pos = w.cellCenter(2, 1);
    QHelpEvent help(QEvent::ToolTip, pos, w.viewport()->mapToGlobal(pos));
    QApplication::sendEvent(w.viewport(), &help);
    QTRY_COMPARE(QToolTip::text(), expected);
    QToolTip::hideText();
}

void TestAttentionHeatmap::appendRowGrowsImage() {
    AttentionHeatmap w;
    w.resize(640, 480);
    w.setColorScale(ColorScale::Linear);
    w.setCellSize(20);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.setData(three_by_three());
    QTRY_VERIFY(!w.renderPending());
    QCOMPARE(w.currentImage().size(), QSize(60, 60));

    QSignalSpy updated(&w, &AttentionHeatmap::imageUpdated);
    w.appendRow({0.1f, 0.2f, 0.3f, 0.4f}, QStringLiteral(" on"));
    // Incremental: painted at once on the GUI thread, no new render job.
    QVERIFY(!w.renderPending());
    QCOMPARE(updated.count(), 1);
    const QImage img = w.currentImage();
    QCOMPARE(img.size(), QSize(80, 80));
    QCOMPARE(w.imageRows(), 4);
    QCOMPARE(w.data().labels.last(), QStringLiteral(" on"));
    auto at = [&](int q, int k) { return img.pixel(k * 20 + 10, q * 20 + 10); };
    QCOMPARE(at(3, 3), weight_color(0.4f, ColorScale::Linear));
    QCOMPARE(at(3, 0), weight_color(0.1f, ColorScale::Linear));
    // Earlier queries cannot see the new key.
    for (int q = 0; q < 3; ++q) QCOMPARE(at(q, 3), w.maskedColor());
    QCOMPARE(at(0, 0), kLast);
    // Many more rows: the image keeps growing.
    for (int q = 4; q < 70; ++q) {
        QVector<float> row(q + 1, 1.0f / float(q + 1));
        w.appendRow(row, QStringLiteral(" x"));
    }
    QTRY_VERIFY(!w.renderPending());
    QCOMPARE(w.imageRows(), 70);
    QCOMPARE(w.currentImage().height(), 70 * w.imageCellSize());
}

void TestAttentionHeatmap::appendRowDuringRender() {
    AttentionHeatmap w;
    w.resize(640, 480);
    w.setColorScale(ColorScale::Linear);
    w.setCellSize(10);
    w.setData(three_by_three());
    // The render is still running (no event loop yet): the row joins the finished image.
    w.appendRow({0.0f, 0.0f, 0.0f, 1.0f}, QStringLiteral(" on"));
    QTRY_VERIFY(!w.renderPending());
    const QImage img = w.currentImage();
    QCOMPARE(img.size(), QSize(40, 40));
    QCOMPARE(img.pixel(35, 35), kLast);
    QCOMPARE(img.pixel(5, 35), kFirst);
    QCOMPARE(img.pixel(35, 5), w.maskedColor());

    // Replacing the data makes the running render stale; only the newest data is shown.
    AttentionData other = three_by_three();
    other.rows = {{1.0f}, {1.0f, 0.0f}};
    other.labels = {QStringLiteral("a"), QStringLiteral("b")};
    w.setData(three_by_three());
    w.setData(other);
    QTRY_VERIFY(!w.renderPending());
    QTest::qWait(30);
    QCOMPARE(w.imageRows(), 2);
    QCOMPARE(w.currentImage().pixel(15, 15), kFirst);
}

void TestAttentionHeatmap::overlayExplainsCost() {
    AttentionHeatmap w;
    w.setModelShape(18, 4);
    w.setData(sample_attention(137));
    const QChar nb(0x00A0);
    const QString text = w.overlayText();
    QVERIFY2(text.contains(QStringLiteral("n = 137 tokens: 137×138/2 = 9") + nb +
                           QStringLiteral("453 query-key scores per head per layer")),
             qPrintable(text));
    // 9453 × 4 heads × 18 layers = 680 616.
    QVERIFY(text.contains(QStringLiteral("680") + nb + QStringLiteral("616")));
    QVERIFY(text.contains(QStringLiteral("upper triangle")));
    QVERIFY(!w.overlayVisible());
    w.findChild<QToolButton*>(QStringLiteral("helpButton"))->click();
    QVERIFY(w.overlayVisible());
    w.setOverlayVisible(false);
    QVERIFY(!w.overlayVisible());
}

void TestAttentionHeatmap::selectionChangedFromControls() {
    AttentionHeatmap w;
    w.setModelShape(18, 4);
    QSignalSpy spy(&w, &AttentionHeatmap::selectionChanged);
    auto* head = w.findChild<QComboBox*>(QStringLiteral("headBox"));
    auto* layer = w.findChild<QSpinBox*>(QStringLiteral("layerBox"));
    QVERIFY(head && layer);
    QCOMPARE(head->count(), 5);  // mean + 4 heads
    QCOMPARE(layer->maximum(), 17);
    head->setCurrentIndex(2);
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.last().at(0).toInt(), 0);
    QCOMPARE(spy.last().at(1).toInt(), 1);
    layer->setValue(7);
    QCOMPARE(spy.count(), 2);
    QCOMPARE(spy.last().at(0).toInt(), 7);
    QCOMPARE(spy.last().at(1).toInt(), 1);
    head->setCurrentIndex(0);
    QCOMPARE(spy.last().at(1).toInt(), -1);  // mean over heads
    // Data arriving for a selection updates the controls without echoing a request.
    AttentionData d = three_by_three();
    d.layer = 3;
    d.head = 2;
    w.setData(d);
    QCOMPARE(spy.count(), 3);
    QCOMPARE(layer->value(), 3);
    QCOMPARE(head->currentData().toInt(), 2);
}

void TestAttentionHeatmap::zoomButtonsAndCtrlWheel() {
    AttentionHeatmap w;
    w.resize(500, 400);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.setData(sample_attention(60));
    w.setCellSize(8);
    w.zoomIn();
    QCOMPARE(w.cellSize(), 10);
    w.zoomOut();
    w.zoomOut();
    QCOMPARE(w.cellSize(), 6);
    const QPoint pos = w.cellCenter(2, 2);
    QWheelEvent wheel(pos, w.viewport()->mapToGlobal(pos), QPoint(), QPoint(0, 120), Qt::NoButton,
                      Qt::ControlModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(w.viewport(), &wheel);
    QCOMPARE(w.cellSize(), 8);
    w.zoomToFit();
    QVERIFY(w.cellSize() * 60 <= w.viewport()->width());
    QTRY_VERIFY(!w.renderPending());
    QCOMPARE(w.imageCellSize(), w.cellSize());
}

void TestAttentionHeatmap::longContextScalesCappedImage() {
    AttentionHeatmap w;
    w.resize(500, 400);
    w.setColorScale(ColorScale::Linear);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.setCellSize(8);
    w.setData(sample_attention(1200));
    QTRY_VERIFY(!w.renderPending());
    // 1200 keys × 8 px would be 9600 px wide: rendered at 3 px per cell (≤ 4096 px), shown
    // at 8 px by nearest-neighbour scaling.
    QCOMPARE(w.imageCellSize(), 3);
    QCOMPARE(w.currentImage().size(), QSize(3600, 3600));
    QCOMPARE(w.cellSize(), 8);
    settle();
    const QImage shot = w.viewport()->grab().toImage();
    const auto& rows = w.data().rows;
    for (auto [q, k] : {std::pair{0, 0}, std::pair{5, 2}, std::pair{9, 9}, std::pair{3, 7}}) {
        const QRgb expected =
            k <= q ? weight_color(rows[q][k], ColorScale::Linear) : w.maskedColor();
        QCOMPARE(QColor(shot.pixel(w.cellCenter(q, k))).name(), QColor(expected).name());
    }
}

void TestAttentionHeatmap::savePanelPngs() {
    AttentionHeatmap w;
    w.setModelShape(18, 4);
    w.resize(720, 620);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.setData(sample_attention(36));
    w.setCellSize(14);
    QTRY_VERIFY(!w.renderPending());
    save_png(w, QStringLiteral("attention_light"));
    w.setOverlayVisible(true);
    save_png(w, QStringLiteral("attention_light_overlay"));
    w.setOverlayVisible(false);
    w.setPalette(dark_palette());
    QTRY_VERIFY(!w.renderPending());
    save_png(w, QStringLiteral("attention_dark"));
    w.setOverlayVisible(true);
    save_png(w, QStringLiteral("attention_dark_overlay"));
}

QTEST_MAIN(TestAttentionHeatmap)
#include "test_attention_heatmap.moc"
