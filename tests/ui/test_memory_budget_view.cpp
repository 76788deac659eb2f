// The memory budget: segment proportions of the stacked bar against available RAM, the GPU
// bar only with a GPU, and the numbers.
#include <QApplication>
#include <QDir>
#include <QTest>

#include "memory_budget_view.h"
#include "number_format.h"
#include "util/byte_format.h"
#include "widget_test_support.h"

using namespace tokenscope::ui;
using tokenscope::ui::test::dark_palette;
using tokenscope::ui::test::kNb;
using tokenscope::ui::test::save_png;
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
    void sameUnitsAsTheCli();
    void clearReturnsToEmpty();
    void savePanelPngs();
};

constexpr quint64 kGiB = 1024ull * 1024 * 1024;
constexpr quint64 kMiB = 1024ull * 1024;

void TestMemoryBudgetView::barProportions() {
    MemoryBudgetView view;
    view.resize(500, 200);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    MemoryBudgetData d;
    // available RAM is read with the model loaded: the CPU backend's cache and scratch are no
    // longer in it, so the model can use 2 + 1/2 + 1/2 = 3 GiB. Weights 1/3, KV 1/6,
    // activations 1/6 of the bar, the rest (available RAM not taken by the weights) free.
    d.available_ram_bytes = 2 * kGiB;
    d.weights_bytes = kGiB;
    d.kv_cache_bytes = 512 * kMiB;
    d.activation_bytes = 512 * kMiB;
    view.setData(d);
    settle();
    QCOMPARE(view.ramCapacity(), 3 * kGiB);
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
    QVERIFY2(std::abs(weights - w / 3) <= 1.5, qPrintable(QString::number(weights)));
    QVERIFY2(std::abs(kv - w / 6) <= 1.5, qPrintable(QString::number(kv)));
    QVERIFY2(std::abs(act - w / 6) <= 1.5, qPrintable(QString::number(act)));
    // Segments are stacked left to right in that order.
    QVERIFY(bar->segmentRect(0).right() < bar->segmentRect(1).left());
    QVERIFY(bar->segmentRect(1).right() < bar->segmentRect(2).left());
    QCOMPARE(bar->segmentRect(0).left(), track.left());
    // Binary units throughout, and available RAM as the plain number, named as in the CLI.
    const QString text = view.ramText();
    QCOMPARE(text, QStringLiteral("Weights 1.0") + kNb + QStringLiteral("GiB + KV cache 512") +
                       kNb + QStringLiteral("MiB + activations 512") + kNb +
                       QStringLiteral("MiB = 2.0") + kNb +
                       QStringLiteral("GiB; available RAM: 2.0") + kNb + QStringLiteral("GiB"));
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
        view.gpuText().startsWith(QStringLiteral("5.6") + kNb + QStringLiteral("GiB used of 22.4") +
                                  kNb + QStringLiteral("GiB (25%)")),
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
    QVERIFY2(view.ramText().contains(QStringLiteral("on the GPU")) &&
                 !view.ramText().contains(QStringLiteral("does not fit")),
             qPrintable(view.ramText()));
    const QRect ram = view.ramBar()->trackRect();
    // 0.3 GB of 16 GB: under 2 % of the track, and no KV segment (4 GB would be a quarter).
    QVERIFY2(view.ramBar()->segmentRect(0).width() <= ram.width() * 0.02 + 1.5,
             qPrintable(QString::number(view.ramBar()->segmentRect(0).width())));
    QVERIFY(view.ramBar()->segmentRect(1).width() <= 0);
}

// Issue 11, item 14: the app said "24.1 GB available", the CLI "23.5 GiB". Both now print
// byte_format::binary's string (the app with a no-break space before the unit).
void TestMemoryBudgetView::sameUnitsAsTheCli() {
    const struct {
        quint64 bytes;
        const char* expected;
    } cases[] = {
        {0, "0 B"},
        {1023, "1023 B"},
        {1024, "1.0 KiB"},
        {512 * kMiB, "512 MiB"},
        {99 * kMiB + 1000 * 1024, "100 MiB"},   // 99.98 MiB: no "100.0"
        {1023 * kMiB + 900 * 1024, "1.0 GiB"},  // 1023.9 MiB: no "1024 MiB"
        {quint64(23.5 * double(kGiB)), "23.5 GiB"},
        {24'100'000'000ull, "22.4 GiB"},  // the app's old "24.1 GB"
        {3 * kGiB * 1024, "3.0 TiB"},
    };
    for (const auto& c : cases) {
        const QString cli = QString::fromStdString(tokenscope::byte_format::binary(c.bytes));
        QCOMPARE(cli, QString::fromLatin1(c.expected));
        QString app = format_binary_bytes(c.bytes);
        QVERIFY2(!app.contains(u' '), qPrintable(app));  // never wraps between number and unit
        QCOMPARE(app.replace(kNb, u' '), cli);
    }
    QCOMPARE(available_ram_name(), QStringLiteral("available RAM"));
    QCOMPARE(available_ram_name().toStdString(),
             std::string(tokenscope::byte_format::kAvailableRamName));

    // The panel prints available RAM with that function and that name.
    MemoryBudgetView view;
    MemoryBudgetData d;
    d.available_ram_bytes = 24'100'000'000ull;
    d.weights_bytes = 253 * kMiB;
    view.setData(d);
    QVERIFY2(view.ramText().endsWith(QStringLiteral("available RAM: ") +
                                     format_binary_bytes(d.available_ram_bytes)),
             qPrintable(view.ramText()));
    QVERIFY(!view.ramText().contains(QStringLiteral("GB")));
    d.gpu_total_bytes = 8 * kGiB;
    d.gpu_used_bytes = 2 * kGiB;
    view.setData(d);
    QVERIFY2(view.ramText().endsWith(QStringLiteral("available RAM: 22.4") + kNb + "GiB"),
             qPrintable(view.ramText()));
}

// For unloading a model: no numbers, an empty bar, no GPU section.
void TestMemoryBudgetView::clearReturnsToEmpty() {
    MemoryBudgetView view;
    view.resize(460, 240);
    MemoryBudgetData d;
    d.available_ram_bytes = 8 * kGiB;
    d.weights_bytes = kGiB;
    d.gpu_total_bytes = 8 * kGiB;
    d.gpu_used_bytes = 2 * kGiB;
    view.setData(d);
    QVERIFY(view.gpuVisible());
    view.clear();
    QVERIFY(!view.gpuVisible());
    QCOMPARE(view.ramText(), QStringLiteral("No model loaded."));
    QCOMPARE(view.ramCapacity(), quint64(0));
    for (int i = 0; i < view.ramBar()->segmentCount(); ++i)
        QVERIFY(view.ramBar()->segmentRect(i).width() <= 0);
    QCOMPARE(view.data().weights_bytes, quint64(0));
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
