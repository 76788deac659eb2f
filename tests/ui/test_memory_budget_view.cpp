// The memory budget: segment proportions of the stacked bar against available RAM, the GPU
// bar only with a GPU, and the numbers.
#include <QApplication>
#include <QDir>
#include <QTest>

#include "memory_budget_view.h"
#include "widget_test_support.h"

using namespace tokenscope::ui;
using tokenscope::ui::test::dark_palette;
using tokenscope::ui::test::save_png;
using tokenscope::ui::test::kNb;
using tokenscope::ui::test::settle;

namespace {

// Pixels of `color` along the middle row of the bar's track.
int run_length(const QImage& img, const QRect& track, const QColor& color) {
    int n = 0;
    const int y = track.center().y();
    for (int x = track.left(); x <= track.right(); ++x) {
        if (QColor(img.pixel(x, y)).name() == color.name()) ++n;
    }
    return n;
}

}  // namespace

class TestMemoryBudgetView : public QObject {
    Q_OBJECT
  private slots:
    void barProportions();
    void overBudgetScalesToSum();
    void gpuBarOnlyWithGpu();
    void savePanelPngs();
};

void TestMemoryBudgetView::barProportions() {
    MemoryBudgetView view;
    view.resize(500, 200);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    MemoryBudgetData d;
    // 4 GB available: weights 1/4, KV 1/8, activations 1/16, the rest free.
    d.available_ram_bytes = 4'000'000'000ull;
    d.weights_bytes = 1'000'000'000ull;
    d.kv_cache_bytes = 500'000'000ull;
    d.activation_bytes = 250'000'000ull;
    view.setData(d);
    settle();
    StackedBar* bar = view.ramBar();
    const QImage img = bar->grab().toImage();
    const QRect track = bar->trackRect();
    const double w = track.width();
    const int weights =
        run_length(img, track, MemoryBudgetView::segmentColor(MemoryBudgetView::Weights));
    const int kv =
        run_length(img, track, MemoryBudgetView::segmentColor(MemoryBudgetView::KvCache));
    const int act =
        run_length(img, track, MemoryBudgetView::segmentColor(MemoryBudgetView::Activations));
    QVERIFY2(std::abs(weights - w / 4) <= 1.5, qPrintable(QString::number(weights)));
    QVERIFY2(std::abs(kv - w / 8) <= 1.5, qPrintable(QString::number(kv)));
    QVERIFY2(std::abs(act - w / 16) <= 1.5, qPrintable(QString::number(act)));
    // Segments are stacked left to right in that order.
    QVERIFY(bar->segmentRect(0).right() < bar->segmentRect(1).left());
    QVERIFY(bar->segmentRect(1).right() < bar->segmentRect(2).left());
    QCOMPARE(bar->segmentRect(0).left(), track.left());
    const QString text = view.ramText();
    QVERIFY2(text.contains(
                 QStringLiteral("Weights 1.0") + kNb + QStringLiteral("GB + KV cache 500") + kNb +
                 QStringLiteral("MB + activations 250") + kNb + QStringLiteral("MB = 1.8") + kNb +
                 QStringLiteral("GB of 4.0") + kNb + QStringLiteral("GB available (44%)")),
             qPrintable(text));
}

void TestMemoryBudgetView::overBudgetScalesToSum() {
    MemoryBudgetView view;
    view.resize(500, 200);
    MemoryBudgetData d;
    d.available_ram_bytes = 1'000'000'000ull;
    d.weights_bytes = 1'500'000'000ull;
    d.kv_cache_bytes = 500'000'000ull;
    view.setData(d);
    const QRect track = view.ramBar()->trackRect();
    // The bar now spans the 2 GB sum: weights take 3/4 of it.
    QVERIFY(std::abs(view.ramBar()->segmentRect(0).width() - track.width() * 0.75) <= 1.5);
    QVERIFY(view.ramText().contains(QStringLiteral("does not fit")));
}

void TestMemoryBudgetView::gpuBarOnlyWithGpu() {
    MemoryBudgetView view;
    MemoryBudgetData d;
    d.available_ram_bytes = 16'000'000'000ull;
    d.weights_bytes = 300'000'000ull;
    view.setData(d);
    QVERIFY(!view.gpuVisible());
    d.gpu_total_bytes = 24'000'000'000ull;
    d.gpu_used_bytes = 6'000'000'000ull;
    view.setData(d);
    QVERIFY(view.gpuVisible());
    QVERIFY2(
        view.gpuText().startsWith(QStringLiteral("6.0") + kNb + QStringLiteral("GB used of 24.0") +
                                  kNb + QStringLiteral("GB (25%)")),
        qPrintable(view.gpuText()));
    // Model parts (0.3 GB) plus "other" fill the used quarter of the device bar.
    view.resize(500, 260);
    const QRect track = view.gpuBar()->trackRect();
    const int used = view.gpuBar()->segmentRect(3).right() - track.left() + 1;
    QVERIFY2(std::abs(used - track.width() * 0.25) <= 2.5, qPrintable(QString::number(used)));
    // With a GPU the cache is on the device: the RAM bar holds the weights alone.
    d.kv_cache_bytes = 4'000'000'000ull;
    d.activation_bytes = 1'000'000'000ull;
    view.setData(d);
    QVERIFY2(view.ramText().contains(QStringLiteral("on the GPU")) && !view.ramText().contains(QStringLiteral("does not fit")),
             qPrintable(view.ramText()));
    const QRect ram = view.ramBar()->trackRect();
    // 0.3 GB of 16 GB: under 2 % of the track, and no KV segment (4 GB would be a quarter).
    QVERIFY2(view.ramBar()->segmentRect(0).width() <= ram.width() * 0.02 + 1.5,
             qPrintable(QString::number(view.ramBar()->segmentRect(0).width())));
    QVERIFY(view.ramBar()->segmentRect(1).width() <= 0);
}

void TestMemoryBudgetView::savePanelPngs() {
    MemoryBudgetView view;
    view.resize(460, 240);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    MemoryBudgetData d;
    d.available_ram_bytes = 2'400'000'000ull;
    d.weights_bytes = 253'000'000ull;
    d.kv_cache_bytes = 75'500'000ull;
    d.activation_bytes = 21'000'000ull;
    d.gpu_total_bytes = 8'000'000'000ull;
    d.gpu_used_bytes = 1'200'000'000ull;
    view.setData(d);
    save_png(view, QStringLiteral("memory_budget_light"));
    view.setPalette(dark_palette());
    save_png(view, QStringLiteral("memory_budget_dark"));
}

QTEST_MAIN(TestMemoryBudgetView)
#include "test_memory_budget_view.moc"
