// The attention heatmap: colours of the off-thread renderer at known cells, the widget's
// pixels, tooltips, live rows, the teaching overlay and the layer/head chooser; and what a
// small dock needs: enough rows at a modest size, Fit at long contexts (downsampled), zoom
// that stays where the user looks, help that stays inside the panel.
#include <QAbstractScrollArea>
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QHelpEvent>
#include <QLabel>
#include <QLayout>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStyleFactory>
#include <QTest>
#include <QToolButton>
#include <QToolTip>
#include <QWheelEvent>
#include <cmath>

#include "attention_heatmap.h"
#include "heatmap_renderer.h"
#include "widget_test_support.h"

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

QAbstractScrollArea* scroll_area_of(AttentionHeatmap& w) {
    return qobject_cast<QAbstractScrollArea*>(w.viewport()->parentWidget());
}

// Query rows whose cells (at key 0) are fully inside the painted cell area.
int visible_rows(const AttentionHeatmap& w) {
    const QRect area = w.cellArea();
    int count = 0;
    for (int q = 0; q < w.data().rows.size(); ++q) {
        const QPoint c = w.cellCenter(q, 0);
        const int half = w.cellSize() / 2;
        if (area.contains(c - QPoint(0, half)) && area.contains(c + QPoint(0, half))) ++count;
    }
    return count;
}

// The cell at the bottom-left corner of the cell area is the most likely to be unmasked
// (largest query, smallest key): if it is masked, every visible cell is.
bool shows_unmasked_cells(const AttentionHeatmap& w) {
    const QRect visible = w.cellArea().intersected(w.contentRect());
    if (visible.isEmpty()) return false;
    const auto [q, k] = w.cellAt(visible.bottomLeft());
    return q >= 0 && k <= q;
}

// Shows `w` at 640 x 480 with a linear colour scale and cells of `cell` pixels; false if the
// window never appeared.
bool show_linear(AttentionHeatmap& w, int cell) {
    w.resize(640, 480);
    w.setColorScale(ColorScale::Linear);
    w.setCellSize(cell);
    w.show();
    return QTest::qWaitForWindowExposed(&w);
}

// A full render of `d` with the widget's own colours, linear scale: what an image the widget
// grew row by row must equal.
QImage full_render_like(const AttentionHeatmap& w, const AttentionData& d, int cell, int ds = 1) {
    HeatmapRequest req;
    req.rows = d.rows;
    req.columns = int(d.rows.size());
    req.cell = cell;
    req.tokens_per_pixel = ds;
    req.scale = ColorScale::Linear;
    req.masked = w.maskedColor();
    req.gap = w.palette().color(QPalette::Base).rgb();
    return render_heatmap(req);
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
    void setDataThatExtendsPaintsOnlyNewRows();
    void overlayExplainsCost();
    void selectionChangedFromControls();
    void zoomButtonsAndCtrlWheel();
    void longContextScalesCappedImage();
    void savePanelPngs();
    void compactPanelShowsTwentyRows();
    void pooledRenderKeepsStrongWeights();
    void fitDownsamplesLongContexts_data();
    void fitDownsamplesLongContexts();
    void downsampledAppendMatchesFullRender();
    void zoomFromFitStaysOnTheMatrix();
    void zoomOutKeepsScrolledCentre();
    void ctrlWheelKeepsCellUnderCursor();
    void overlayStaysInsidePanel_data();
    void overlayStaysInsidePanel();
    void clearShowsPlaceholder();
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
    QVERIFY(show_linear(w, 20));
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
    QVERIFY(show_linear(w, 20));
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

// The worker sends the whole matrix a few times a second during a reply, each time the last
// one plus the new tokens' rows: those rows are painted onto the shown image (no render job),
// and the result is the image a full render of the new data gives. Any change to a shown row,
// or another head, renders everything again.
void TestAttentionHeatmap::setDataThatExtendsPaintsOnlyNewRows() {
    AttentionHeatmap w;
    QVERIFY(show_linear(w, 6));
    const AttentionData full = sample_attention(40);
    AttentionData start = full;
    start.rows.resize(30);
    start.labels.resize(30);
    w.setData(start);
    QTRY_VERIFY(!w.renderPending());
    QCOMPARE(w.imageRows(), 30);

    auto full_render = [&](const AttentionData& d) { return full_render_like(w, d, 6); };
    QSignalSpy updated(&w, &AttentionHeatmap::imageUpdated);
    w.setData(full);
    QVERIFY(!w.renderPending());  // painted at once, on this thread
    QCOMPARE(updated.count(), 1);
    QCOMPARE(w.imageRows(), 40);
    QCOMPARE(w.data().labels.size(), 40);
    QCOMPARE(w.currentImage(), full_render(full));

    // Many more tokens, a few at a time: painted into the room the render left, and when that
    // runs out, rendered again on the pool with more room (never grown on the GUI thread). The
    // first render (30 rows) left room for 128 tokens (30 + 64, in steps of 64); the one at 131
    // tokens for 256: so one render on the way to 200, and the image equals a full render.
    const AttentionData longer = sample_attention(200);
    int renders = 0;
    for (int n = 47; n <= 200; n = n == 200 ? 201 : std::min(n + 7, 200)) {
        AttentionData part = longer;
        part.rows.resize(n);
        part.labels.resize(n);
        w.setData(part);
        if (w.renderPending()) {
            ++renders;
            QTRY_VERIFY(!w.renderPending());
        }
    }
    QCOMPARE(renders, 1);
    QCOMPARE(w.imageRows(), 200);
    QCOMPARE(w.currentImage(), full_render(longer));
    w.setData(full);  // not an extension of 200 rows: rendered again
    QTRY_VERIFY(!w.renderPending());

    // A shown row that changed (a rolled-back proposal's row, say): everything again.
    AttentionData changed = full;
    changed.rows[12][3] += 0.25f;
    w.setData(changed);
    QVERIFY(w.renderPending());
    QTRY_VERIFY(!w.renderPending());
    QCOMPARE(w.currentImage(), full_render(changed));

    // Another head with the same rows and more: a new matrix, not an extension.
    AttentionData other_head = full;
    other_head.head = 3;
    w.setData(other_head);
    QVERIFY(w.renderPending());
    QTRY_VERIFY(!w.renderPending());
    QCOMPARE(w.currentImage(), full_render(other_head));
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

// Issue 11: a dock on a 1280x720 screen (about 420x360) showed only ~8 query rows; the panel
// refused to shrink below 320x260.
void TestAttentionHeatmap::compactPanelShowsTwentyRows() {
    AttentionHeatmap w;
    w.setModelShape(18, 4);
    QVERIFY2(w.minimumSizeHint().width() <= 300 && w.minimumSizeHint().height() <= 220,
             qPrintable(QStringLiteral("%1x%2")
                            .arg(w.minimumSizeHint().width())
                            .arg(w.minimumSizeHint().height())));
    // The layout itself must fit that hint, or the controls would overlap in a small dock.
    const QSize layout_min = w.layout()->minimumSize();
    QVERIFY2(layout_min.width() <= 300 && layout_min.height() <= 220,
             qPrintable(QStringLiteral("%1x%2").arg(layout_min.width()).arg(layout_min.height())));

    w.resize(420, 360);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.setData(sample_attention(120));
    QTRY_VERIFY(!w.renderPending());
    settle();
    QVERIFY2(visible_rows(w) >= 20, qPrintable(QString::number(visible_rows(w))));
    // The map gets most of the height: controls, legend and status take little.
    QVERIFY2(w.cellArea().height() >= 360 * 6 / 10,
             qPrintable(QString::number(w.cellArea().height())));
    // Every control is inside the panel, none clipped off the right edge.
    for (const char* name :
         {"layerBox", "headBox", "scaleBox", "zoomIn", "zoomOut", "zoomFit", "helpButton"}) {
        auto* child = w.findChild<QWidget*>(QLatin1String(name));
        QVERIFY2(child && w.rect().contains(child->geometry()), name);
    }
    // Still readable: the automatic cell size does not drop below labels' size.
    QVERIFY(w.cellSize() >= 6);
    save_png(w, QStringLiteral("attention_420x360"));

    // On a big panel the default is the full 14 px.
    w.resize(900, 800);
    settle();
    QCOMPARE(w.cellSize(), 14);
}

void TestAttentionHeatmap::pooledRenderKeepsStrongWeights() {
    HeatmapRequest req;
    // Five tokens: row 3 has one strong weight on key 2; everything else is faint.
    req.rows = {{1.0f},
                {0.5f, 0.5f},
                {0.1f, 0.1f, 0.8f},
                {0.05f, 0.0f, 0.9f, 0.05f},
                {0.2f, 0.2f, 0.2f, 0.2f, 0.2f}};
    req.columns = 5;
    req.cell = 1;
    req.tokens_per_pixel = 2;
    req.scale = ColorScale::Linear;
    req.masked = qRgb(200, 201, 202);
    const QImage img = render_heatmap(req);
    // ceil(5 / 2) pixels per side.
    QCOMPARE(img.size(), QSize(3, 3));
    QCOMPARE(img.pixel(0, 0), weight_color(1.0f, ColorScale::Linear));  // q 0-1, k 0-1
    QCOMPARE(img.pixel(1, 0), req.masked);                              // q 0-1, k 2-3
    QCOMPARE(img.pixel(2, 0), req.masked);                              // q 0-1, k 4
    QCOMPARE(img.pixel(1, 1), weight_color(0.9f, ColorScale::Linear));  // the strong weight
    QCOMPARE(img.pixel(0, 1), weight_color(0.1f, ColorScale::Linear));  // q 2-3, k 0-1
    QCOMPARE(img.pixel(2, 1), req.masked);                              // q 2-3, k 4
    QCOMPARE(img.pixel(2, 2), weight_color(0.2f, ColorScale::Linear));  // q 4, k 4
    QCOMPARE(heatmap_extent(5, req), 3);

    // The worker path gives the same image and reports its downsampling.
    HeatmapRenderer renderer;
    QSignalSpy spy(&renderer, &HeatmapRenderer::imageReady);
    renderer.request(req);
    QTRY_COMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(1).value<QImage>(), img);
    QCOMPARE(spy.at(0).at(2).toInt(), 5);
    QCOMPARE(spy.at(0).at(4).toInt(), 2);
}

void TestAttentionHeatmap::fitDownsamplesLongContexts_data() {
    QTest::addColumn<int>("tokens");
    QTest::newRow("684") << 684;
    QTest::newRow("2000") << 2000;
}

// Issue 11: Fit at 684 tokens dropped to 1 px per token and still needed scroll bars.
void TestAttentionHeatmap::fitDownsamplesLongContexts() {
    QFETCH(int, tokens);
    AttentionHeatmap w;
    w.setColorScale(ColorScale::Sqrt);
    w.resize(420, 360);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.setData(sample_attention(tokens));
    QTRY_VERIFY(!w.renderPending());
    w.zoomToFit();
    QTRY_VERIFY(!w.renderPending());
    settle();

    const QRect area = w.cellArea();
    const QRect content = w.contentRect();
    QVERIFY2(area.contains(content),
             qPrintable(QStringLiteral("content %1x%2 at %3,%4 vs area %5x%6 at %7,%8")
                            .arg(content.width())
                            .arg(content.height())
                            .arg(content.x())
                            .arg(content.y())
                            .arg(area.width())
                            .arg(area.height())
                            .arg(area.x())
                            .arg(area.y())));
    auto* scroll = scroll_area_of(w);
    QVERIFY(scroll);
    QCOMPARE(scroll->horizontalScrollBar()->maximum(), 0);
    QCOMPARE(scroll->verticalScrollBar()->maximum(), 0);
    QVERIFY(!scroll->horizontalScrollBar()->isVisible());
    QVERIFY(!scroll->verticalScrollBar()->isVisible());

    // Several tokens per pixel, rendered that way (not scaled down from a larger image).
    const int ds = w.tokensPerPixel();
    QVERIFY2(ds > 1, qPrintable(QString::number(ds)));
    QCOMPARE(w.cellSize(), 1);
    QCOMPARE(w.imageTokensPerPixel(), ds);
    const QImage img = w.currentImage();
    QCOMPARE(img.width(), (tokens + ds - 1) / ds);
    QVERIFY(img.width() <= area.width() && img.height() <= area.height());
    // ...and the user is told.
    const QString note = QStringLiteral("1 px = %1 tokens").arg(ds);
    QCOMPARE(w.scaleNote(), note);
    auto* note_label = w.findChild<QLabel*>(QStringLiteral("scaleNote"));
    QVERIFY(note_label && note_label->isVisible());
    QCOMPARE(note_label->text(), note);
    QVERIFY(w.rect().contains(note_label->geometry()));

    // Max-pooling: the on-screen pixel of a block is its strongest weight.
    const QImage shot = w.viewport()->grab().toImage();
    const auto& rows = w.data().rows;
    for (auto [bq, bk] : {std::pair{0, 0}, std::pair{5, 2}, std::pair{40, 39}, std::pair{60, 1}}) {
        float peak = 0.0f;
        for (int q = bq * ds; q < std::min(tokens, (bq + 1) * ds); ++q) {
            for (int k = bk * ds; k < std::min(q + 1, (bk + 1) * ds); ++k) {
                peak = std::max(peak, rows[q][k]);
            }
        }
        const QPoint at = w.cellCenter(bq * ds, bk * ds);
        QCOMPARE(QColor(shot.pixel(at)).name(),
                 QColor(weight_color(peak, ColorScale::Sqrt)).name());
    }
    QCOMPARE(QColor(shot.pixel(w.cellCenter(0, tokens - 1))).name(),
             QColor(w.maskedColor()).name());
    save_png(w, QStringLiteral("attention_fit_%1").arg(tokens));

    // Zooming back in leaves downsampling: the note goes away at 1 px per token.
    while (w.tokensPerPixel() > 1) w.zoomIn();
    QCOMPARE(w.cellSize(), 1);
    QVERIFY(w.scaleNote().isEmpty());
    QVERIFY(!note_label->isVisible());
}

// Live rows while downsampled are pooled into the existing image; the result must equal a
// full render of the same data.
void TestAttentionHeatmap::downsampledAppendMatchesFullRender() {
    AttentionHeatmap w;
    w.setColorScale(ColorScale::Linear);
    w.resize(420, 360);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    const AttentionData full = sample_attention(700);
    AttentionData start = full;
    start.rows.resize(650);
    start.labels.resize(650);
    w.setData(start);
    w.zoomToFit();
    QTRY_VERIFY(!w.renderPending());
    const int ds = w.imageTokensPerPixel();
    QVERIFY(ds > 1);
    // 650 is not a multiple of 3 or 4: the first appended rows join a partial block.
    for (int q = 650; q < 700; ++q) {
        w.appendRow(full.rows[q], full.labels[q]);
        QVERIFY(!w.renderPending());
    }
    QCOMPARE(w.imageTokensPerPixel(), ds);
    QCOMPARE(w.currentImage(), full_render_like(w, full, 1, ds));
}

namespace {

// After a zoom the cell `before` is at viewport position `at` (the cursor, or the view's
// centre for the buttons), except along an axis where the new scroll position had to be
// clamped (the matrix is narrower than the view there, or the cell is near its edge).
// Compares along the axes that were not clamped; returns how many it compared (-1: failed).
int expect_cell_at(AttentionHeatmap& w, const QPoint& at, std::pair<int, int> before, int tolerance,
                   const QString& where) {
    auto* scroll = scroll_area_of(w);
    const auto after = w.cellAt(at);
    auto free = [](const QScrollBar* bar) {
        return bar->value() > 0 && bar->value() < bar->maximum();
    };
    int checked = 0;
    if (free(scroll->verticalScrollBar())) {
        if (std::abs(after.first - before.first) > tolerance) {
            QTest::qFail(qPrintable(QStringLiteral("query %1 -> %2: %3")
                                        .arg(before.first)
                                        .arg(after.first)
                                        .arg(where)),
                         __FILE__, __LINE__);
            return -1;
        }
        ++checked;
    }
    if (free(scroll->horizontalScrollBar())) {
        if (std::abs(after.second - before.second) > tolerance) {
            QTest::qFail(qPrintable(QStringLiteral("key %1 -> %2: %3")
                                        .arg(before.second)
                                        .arg(after.second)
                                        .arg(where)),
                         __FILE__, __LINE__);
            return -1;
        }
        ++checked;
    }
    return checked;
}

}  // namespace

// Issue 11: zooming in after Fit landed in the masked upper-right triangle.
void TestAttentionHeatmap::zoomFromFitStaysOnTheMatrix() {
    for (int tokens : {684, 2000}) {
        AttentionHeatmap w;
        w.resize(420, 360);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.setData(sample_attention(tokens));
        w.zoomToFit();
        settle();
        // Fit shows the whole matrix; the centre of what is visible is on the diagonal.
        {
            const auto [q, k] = w.cellAt(w.cellArea().intersected(w.contentRect()).center());
            QVERIFY2(std::abs(q - tokens / 2) <= w.tokensPerPixel() &&
                         std::abs(k - tokens / 2) <= w.tokensPerPixel(),
                     qPrintable(QStringLiteral("%1, %2").arg(q).arg(k)));
        }
        int checked = 0;
        while (w.cellSize() < 14) {
            // zoomIn() brings the centre of the visible part of the matrix to the view's
            // centre.
            const QPoint anchor = w.cellArea().intersected(w.contentRect()).center();
            const auto before = w.cellAt(anchor);
            const int tolerance = w.tokensPerPixel() + 1;
            w.zoomIn();
            settle();
            const auto [q, k] = w.cellAt(w.cellArea().intersected(w.contentRect()).center());
            const QString where = QStringLiteral("%1 tokens at %2 px (1/%3): centre %4, %5")
                                      .arg(tokens)
                                      .arg(w.cellSize())
                                      .arg(w.tokensPerPixel())
                                      .arg(q)
                                      .arg(k);
            const int n = expect_cell_at(w, w.cellArea().center(), before, tolerance, where);
            if (n < 0) return;
            checked += n;
            QVERIFY2(shows_unmasked_cells(w), qPrintable(where));
            // Still looking at the middle of the diagonal, not wandering off.
            QVERIFY2(
                std::abs(q - tokens / 2) <= tokens / 10 && std::abs(k - tokens / 2) <= tokens / 10,
                qPrintable(where));
        }
        QVERIFY2(checked >= 6, qPrintable(QString::number(checked)));
        QTRY_VERIFY(!w.renderPending());
        save_png(w, QStringLiteral("attention_zoomed_%1").arg(tokens));
    }
}

// Zooming out with the view scrolled deep into a long context keeps its centre (the old code
// read the position after the new scroll range had clamped it).
void TestAttentionHeatmap::zoomOutKeepsScrolledCentre() {
    AttentionHeatmap w;
    w.resize(420, 360);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.setData(sample_attention(684));
    w.setCellSize(14);
    settle();
    auto* scroll = scroll_area_of(w);
    const QRect area = w.cellArea();
    // Put cell (640, 600) in the middle of the view.
    scroll->horizontalScrollBar()->setValue(600 * 14 + 7 - area.width() / 2);
    scroll->verticalScrollBar()->setValue(640 * 14 + 7 - area.height() / 2);
    const auto [q0, k0] = w.cellAt(area.center());
    QVERIFY(std::abs(q0 - 640) <= 1 && std::abs(k0 - 600) <= 1);
    for (int step = 0; step < 4; ++step) {  // 14 -> 12 -> 10 -> 8 -> 6 px
        w.zoomOut();
        settle();
        const auto [q, k] = w.cellAt(w.cellArea().center());
        QVERIFY2(std::abs(q - q0) <= 1 && std::abs(k - k0) <= 1,
                 qPrintable(QStringLiteral("%1 px: %2, %3").arg(w.cellSize()).arg(q).arg(k)));
        QVERIFY(shows_unmasked_cells(w));
    }
    QCOMPARE(w.cellSize(), 6);
}

void TestAttentionHeatmap::ctrlWheelKeepsCellUnderCursor() {
    AttentionHeatmap w;
    w.resize(420, 360);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.setData(sample_attention(684));
    w.zoomToFit();
    settle();
    const QRect content = w.cellArea().intersected(w.contentRect());
    const QPoint pos = content.topLeft() + QPoint(content.width() / 3, content.height() * 3 / 4);
    const auto [q0, k0] = w.cellAt(pos);
    QVERIFY(q0 >= k0);
    int checked = 0;
    for (int i = 0; i < 6; ++i) {
        const auto before = w.cellAt(pos);
        const int tolerance = w.tokensPerPixel() + 1;
        QWheelEvent wheel(pos, w.viewport()->mapToGlobal(pos), QPoint(), QPoint(0, 120),
                          Qt::NoButton, Qt::ControlModifier, Qt::NoScrollPhase, false);
        QApplication::sendEvent(w.viewport(), &wheel);
        settle();
        const auto [q, k] = w.cellAt(pos);
        const QString where = QStringLiteral("%1 px 1/%2: %3, %4 (started at %5, %6)")
                                  .arg(w.cellSize())
                                  .arg(w.tokensPerPixel())
                                  .arg(q)
                                  .arg(k)
                                  .arg(q0)
                                  .arg(k0);
        const int n = expect_cell_at(w, pos, before, tolerance, where);
        if (n < 0) return;
        checked += n;
        // Overall the cursor stays on the region it started on.
        QVERIFY2(std::abs(q - q0) <= 40 && std::abs(k - k0) <= 80, qPrintable(where));
    }
    QVERIFY2(checked >= 6, qPrintable(QString::number(checked)));
    QVERIFY(w.cellSize() >= 4);
}

void TestAttentionHeatmap::overlayStaysInsidePanel_data() {
    QTest::addColumn<QSize>("size");
    QTest::newRow("dock 420x360") << QSize(420, 360);
    QTest::newRow("short dock 420x280") << QSize(420, 280);
    QTest::newRow("wide 1280x720") << QSize(1280, 720);
    QTest::newRow("minimum") << QSize(260, 200);
}

// Issue 11: the "?" help was cut off in a small dock and drawn over floating panels.
void TestAttentionHeatmap::overlayStaysInsidePanel() {
    QFETCH(QSize, size);
    AttentionHeatmap w;
    w.setModelShape(18, 4);
    w.resize(size);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.setData(sample_attention(684));
    w.findChild<QToolButton*>(QStringLiteral("helpButton"))->click();
    QVERIFY(w.overlayVisible());
    settle();

    // The label that shows the help text, and the box around it that is a child of the panel.
    QLabel* text = nullptr;
    for (auto* label : w.findChildren<QLabel*>()) {
        if (label->text() == w.overlayText()) text = label;
    }
    QVERIFY(text);
    QWidget* box = text;
    while (box->parentWidget() != &w) {
        QVERIFY(box->parentWidget());
        box = box->parentWidget();
    }
    QVERIFY(!box->isWindow());
    QVERIFY(!text->isWindow());
    QVERIFY(box->isVisible());
    const QString geometry = QStringLiteral("%1x%2 at %3,%4")
                                 .arg(box->width())
                                 .arg(box->height())
                                 .arg(box->x())
                                 .arg(box->y());
    QVERIFY2(w.rect().contains(box->geometry()), qPrintable(geometry));
    // The help button stays reachable to close it.
    auto* help = w.findChild<QToolButton*>(QStringLiteral("helpButton"));
    QVERIFY2(!box->geometry().intersects(help->geometry()), qPrintable(geometry));
    // Wrapped to the box: the label has the height its text needs at its width...
    QVERIFY(text->width() <= box->width());
    QVERIFY2(text->height() >= text->heightForWidth(text->width()),
             qPrintable(QStringLiteral("%1 < %2")
                            .arg(text->height())
                            .arg(text->heightForWidth(text->width()))));
    // ...and what does not fit in the box can be scrolled to.
    auto* scroll = qobject_cast<QScrollArea*>(box);
    const int shown = scroll ? scroll->viewport()->height() : box->height();
    if (text->height() > shown) {
        QVERIFY(scroll);
        QVERIFY(scroll->verticalScrollBar()->isVisible());
        QVERIFY(scroll->verticalScrollBar()->maximum() >= text->height() - shown);
    }
    QTRY_VERIFY(!w.renderPending());
    save_png(w, QStringLiteral("attention_overlay_%1x%2").arg(size.width()).arg(size.height()));

    // Hidden with the panel (a separate window would stay on screen).
    w.hide();
    QVERIFY(!box->isVisible());
    w.show();
    QVERIFY(box->isVisible());
}

void TestAttentionHeatmap::clearShowsPlaceholder() {
    AttentionHeatmap w;
    w.resize(420, 360);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    const QImage blank = w.viewport()->grab().toImage();
    const QString default_text = w.placeholderText();
    QVERIFY(!default_text.isEmpty());
    w.setData(three_by_three());
    QTRY_VERIFY(!w.renderPending());
    const QString message = QStringLiteral("No attention captured for this conversation yet");
    w.clear(message);
    QVERIFY(w.data().rows.isEmpty());
    QCOMPARE(w.placeholderText(), message);
    QTRY_VERIFY(!w.renderPending());
    QVERIFY(w.currentImage().isNull());
    // Another text is painted than the default one.
    settle();
    QVERIFY(w.viewport()->grab().toImage() != blank);
    save_png(w, QStringLiteral("attention_cleared"));
    // New data shows the matrix; a plain clear() brings the default hint back.
    w.setData(three_by_three());
    QTRY_VERIFY(!w.renderPending());
    QCOMPARE(w.imageRows(), 3);
    w.clear();
    QCOMPARE(w.placeholderText(), default_text);
}

QTEST_MAIN(TestAttentionHeatmap)
#include "test_attention_heatmap.moc"
