// The KV cache panel: block colours for owned/free/shared blocks, the occupancy numbers and
// the size formula with hand-computed numbers.
#include <QApplication>
#include <QDir>
#include <QLabel>
#include <QTest>

#include "kv_cache_view.h"
#include "widget_test_support.h"

using namespace tokenscope::ui;
using tokenscope::ui::test::dark_palette;
using tokenscope::ui::test::kNb;
using tokenscope::ui::test::save_png;
using tokenscope::ui::test::settle;

namespace {

// Gemma 3 270M: 18 layers, 1 KV head, head_dim 256, F16.
KvBlockMapData gemma_cache() {
    KvBlockMapData d;
    d.block_size = 16;
    d.layers = 18;
    d.kv_heads = 1;
    d.head_dim = 256;
    d.element_type = QStringLiteral("f16");
    d.bytes_per_element = 2;
    d.bytes_per_token = 18432;
    d.tokens_used = 1234;
    d.tokens_capacity = 4096;
    d.bytes_used = 1234ull * 18432ull;
    d.bytes_total = 4096ull * 18432ull;
    const int blocks = 256;
    d.block_owner.fill(-1, blocks);
    d.block_refs.fill(0, blocks);
    // Two conversations sharing a 4-block system prompt, then their own blocks.
    for (int i = 0; i < 4; ++i) {
        d.block_owner[i] = 1;
        d.block_refs[i] = 2;
    }
    for (int i = 4; i < 52; ++i) {
        d.block_owner[i] = 1;
        d.block_refs[i] = 1;
    }
    for (int i = 52; i < 70; ++i) {
        d.block_owner[i] = 2;
        d.block_refs[i] = 1;
    }
    for (int i = 90; i < 98; ++i) {
        d.block_owner[i] = 7;
        d.block_refs[i] = 1;
    }
    return d;
}

}  // namespace

class TestKvCacheView : public QObject {
    Q_OBJECT
  private slots:
    void ownerColoursStableAndDistinct();
    void blockCellsHaveOwnerColours();
    void lastWriteIsFramedAndNamed();
    void formulaWithHandComputedNumbers();
    void q8FormulaAndComparison();
    void occupancyNumbers();
    void liveUpdates();
    void tooltipNamesOwner();
    void clearReturnsToEmpty();
    void savePanelPngs();
};

void TestKvCacheView::ownerColoursStableAndDistinct() {
    QCOMPARE(KvBlockMap::ownerColor(3), KvBlockMap::ownerColor(3));
    QVERIFY(KvBlockMap::ownerColor(1) != KvBlockMap::ownerColor(2));
    QVERIFY(KvBlockMap::ownerColor(2) != KvBlockMap::ownerColor(3));
    KvBlockMap map;
    QVERIFY(map.freeColor() != KvBlockMap::ownerColor(0));
    // Free blocks are grey: no hue.
    const QColor free = map.freeColor();
    QVERIFY(std::abs(free.red() - free.green()) <= 2 && std::abs(free.green() - free.blue()) <= 2);
}

// The step just taken: its block framed in the highlight colour with a tick at the slot, and a
// line that names positions, block, slot and the bytes (18 432 B per token for Gemma 3 270M,
// gemma_cache()'s formula; 2 tokens: 36 864 B = 36.9 kB).
void TestKvCacheView::lastWriteIsFramedAndNamed() {
    KvCacheView view;
    view.resize(420, 600);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    KvBlockMapData d = gemma_cache();
    view.setData(d);
    settle();
    QVERIFY(view.lastWriteText().isEmpty());
    QVERIFY(!view.findChild<QLabel*>("lastWrite")->isVisible());
    d.last_owner = 1;
    d.last_block = 40;
    d.last_slot = 9;
    d.last_position = 648;
    d.last_count = 1;
    view.setData(d);
    settle();
    // format_bytes keeps number and unit together with a no-break space.
    const QChar nbsp(0x00A0);
    QCOMPARE(
        view.lastWriteText(),
        QStringLiteral("Last write: 1 token (position 648) of sequence 1 → block 40, slot 9 of 16 "
                       "· +18.4") +
            nbsp + QStringLiteral("kB"));
    QVERIFY(view.findChild<QLabel*>("lastWrite")->isVisible());
    KvBlockMap* map = view.blockMap();
    const QImage shot = map->grab().toImage();
    const QRect r = map->blockRect(40);
    const QString highlight = map->palette().color(QPalette::Highlight).name();
    QCOMPARE(QColor(shot.pixel(r.left() + 1, r.center().y())).name(), highlight);
    QCOMPARE(QColor(shot.pixel(r.right() - 1, r.center().y())).name(), highlight);
    // The tick: the text colour somewhere in the middle of the cell's width (slot 9 of 16),
    // where an unmarked cell has the owner colour only.
    const QString text = map->palette().color(QPalette::Text).name();
    bool tick = false;
    for (int x = r.left() + 3; x < r.right() - 2; ++x)
        tick = tick || QColor(shot.pixel(x, r.center().y())).name() == text;
    QVERIFY(tick);
    const QRect other = map->blockRect(41);
    QCOMPARE(QColor(shot.pixel(other.left() + 1, other.center().y())).name(),
             KvBlockMap::ownerColor(1).name());
    d.last_count = 2;
    d.last_position = 647;
    view.setData(d);
    QVERIFY2(view.lastWriteText().contains(QStringLiteral("2 tokens (positions 647–648)")),
             qPrintable(view.lastWriteText()));
    QVERIFY2(view.lastWriteText().contains(QStringLiteral("+36.9") + nbsp + QStringLiteral("kB")),
             qPrintable(view.lastWriteText()));
}

void TestKvCacheView::blockCellsHaveOwnerColours() {
    KvCacheView view;
    view.resize(420, 600);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    const KvBlockMapData d = gemma_cache();
    view.setData(d);
    settle();
    KvBlockMap* map = view.blockMap();
    QCOMPARE(map->blockCount(), 256);
    const QImage shot = map->grab().toImage();
    auto center = [&](int i) { return shot.pixel(map->blockRect(i).center()); };
    QCOMPARE(QColor(center(10)).name(), KvBlockMap::ownerColor(1).name());
    QCOMPARE(QColor(center(60)).name(), KvBlockMap::ownerColor(2).name());
    QCOMPARE(QColor(center(95)).name(), KvBlockMap::ownerColor(7).name());
    QCOMPARE(QColor(center(80)).name(), map->freeColor().name());
    QCOMPARE(QColor(center(255)).name(), map->freeColor().name());
    // Shared blocks are framed in the text colour.
    const QRect shared = map->blockRect(1);
    QCOMPARE(QColor(shot.pixel(shared.topLeft())).name(),
             map->palette().color(QPalette::Text).name());
    // An unshared block has no frame.
    QCOMPARE(QColor(shot.pixel(map->blockRect(10).topLeft())).name(),
             KvBlockMap::ownerColor(1).name());
    // Blocks do not overlap and stay inside the widget.
    QVERIFY(!map->blockRect(0).intersects(map->blockRect(1)));
    QVERIFY(map->rect().contains(map->blockRect(255)));
}

void TestKvCacheView::formulaWithHandComputedNumbers() {
    KvCacheView view;
    view.setData(gemma_cache());
    const QString formula = view.formulaText();
    // 2 × 18 × 1 × 256 × 2 = 18 432 B per token; × 1 234 tokens = 22 745 088 B = 22.7 MB.
    const QString expected = QStringLiteral(
                                 "2 (K and V) × 18 layers × 1 kv heads × 256 head dim "
                                 "× 2 B (f16) = 18") +
                             kNb + QStringLiteral("432 B per token; × 1") + kNb +
                             QStringLiteral("234 tokens = 22.7") + kNb + QStringLiteral("MB");
    QCOMPARE(formula, expected);
    // Computed here when the engine did not send its number.
    KvBlockMapData d = gemma_cache();
    d.bytes_per_token = 0;
    view.setData(d);
    QVERIFY(view.formulaText().contains(QStringLiteral("= 18") + kNb + QStringLiteral("432 B")));
}

void TestKvCacheView::q8FormulaAndComparison() {
    KvCacheView view;
    KvBlockMapData d = gemma_cache();
    view.setData(d);
    // Q8: 2 × 18 × 1 × (256 × 1 + 4 scale) = 9 360 B per token; full cache of 4 096 tokens:
    // F16 75 497 472 B = 75.5 MB, Q8 38 338 560 B = 38.3 MB, 49% less.
    const QString cmp = view.comparisonText();
    QVERIFY2(cmp.contains(QStringLiteral("F16 18") + kNb + QStringLiteral("432 B/token = 75.5") +
                          kNb + QStringLiteral("MB")),
             qPrintable(cmp));
    QVERIFY2(cmp.contains(QStringLiteral("Q8 9") + kNb + QStringLiteral("360 B/token = 38.3") +
                          kNb + QStringLiteral("MB (49% less")),
             qPrintable(cmp));
    d.element_type = QStringLiteral("q8");
    d.bytes_per_element = 1;
    d.bytes_per_token = 9360;
    view.setData(d);
    QVERIFY2(
        view.formulaText().contains(QStringLiteral("× (256 head dim × 1 B + 4 B scale) (q8) = 9") +
                                    kNb + QStringLiteral("360 B per token")),
        qPrintable(view.formulaText()));
}

void TestKvCacheView::occupancyNumbers() {
    KvCacheView view;
    view.setData(gemma_cache());
    QCOMPARE(view.occupancy(), 1234.0 / 4096.0);
    const QString text = view.occupancyText();
    // 70 + 8 blocks in use, 4 of them shared.
    QVERIFY2(text.contains(QStringLiteral("1") + kNb + QStringLiteral("234 / 4") + kNb +
                           QStringLiteral("096 tokens")),
             qPrintable(text));
    QVERIFY(text.contains(QStringLiteral("78 / 256 blocks of 16 tokens")));
    QVERIFY(text.contains(QStringLiteral("4 shared")));
    QVERIFY(text.contains(QStringLiteral("22.7") + kNb + QStringLiteral("MB / 75.5") + kNb +
                          QStringLiteral("MB")));
}

void TestKvCacheView::liveUpdates() {
    KvCacheView view;
    view.resize(420, 600);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    KvBlockMapData d = gemma_cache();
    view.setData(d);
    settle();
    KvBlockMap* map = view.blockMap();
    QCOMPARE(QColor(map->grab().toImage().pixel(map->blockRect(80).center())).name(),
             map->freeColor().name());
    d.block_owner[80] = 9;
    d.block_refs[80] = 1;
    view.setData(d);
    settle();
    QCOMPARE(QColor(map->grab().toImage().pixel(map->blockRect(80).center())).name(),
             KvBlockMap::ownerColor(9).name());
}

void TestKvCacheView::tooltipNamesOwner() {
    KvCacheView view;
    view.setData(gemma_cache());
    QVERIFY(view.blockMap()->toolTipForBlock(60).contains(QStringLiteral("sequence 2")));
    QVERIFY(view.blockMap()->toolTipForBlock(2).contains(QStringLiteral("shared by 2")));
    QVERIFY(view.blockMap()->toolTipForBlock(80).contains(QStringLiteral("free")));
    QVERIFY(view.blockMap()->toolTipForBlock(60).contains(QStringLiteral("slots 960–975")));
}

// For unloading a model: no blocks, an empty gauge, the formula's "load a model" hint.
void TestKvCacheView::clearReturnsToEmpty() {
    KvCacheView view;
    view.setData(gemma_cache());
    QVERIFY(view.blockMap()->blockCount() > 0);
    QVERIFY(view.occupancy() > 0.0);
    const QString empty_formula = KvCacheView().formulaText();
    QVERIFY(view.formulaText() != empty_formula);
    view.clear();
    QCOMPARE(view.blockMap()->blockCount(), 0);
    QCOMPARE(view.occupancy(), 0.0);
    QCOMPARE(view.formulaText(), empty_formula);
    QVERIFY(view.formulaText().startsWith(QStringLiteral("Load a model")));
    QVERIFY(view.comparisonText().isEmpty());
    QCOMPARE(view.occupancyText(), KvCacheView().occupancyText());
}

void TestKvCacheView::savePanelPngs() {
    KvCacheView view;
    view.resize(460, 560);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setData(gemma_cache());
    save_png(view, QStringLiteral("kv_cache_light"));
    view.setPalette(dark_palette());
    save_png(view, QStringLiteral("kv_cache_dark"));
}

QTEST_MAIN(TestKvCacheView)
#include "test_kv_cache_view.moc"
