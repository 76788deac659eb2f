// The metrics panel and its sparkline: numbers as given, maximum on the top row.
#include <QApplication>
#include <QDir>
#include <QLabel>
#include <QTest>
#include <QToolButton>

#include "metrics_view.h"
#include "sparkline.h"
#include "speculation_explainer.h"
#include "widget_test_support.h"

using namespace tokenscope::ui;
using tokenscope::ui::test::dark_palette;
using tokenscope::ui::test::kNb;
using tokenscope::ui::test::save_png;
using tokenscope::ui::test::settle;

namespace {

MetricsData sample_metrics() {
    MetricsData d;
    d.ttft_ms = 182.4;
    d.prefill_tokens_per_s = 1534.2;
    d.decode_tokens_per_s = 47.35;
    d.effective_gbps = 11.8;
    d.prompt_tokens = 137;
    d.reused_tokens = 112;
    d.prefilled_tokens = 25;
    for (int i = 0; i < 90; ++i) {
        d.token_ms << 20.0 + 2.0 * std::sin(i * 0.4) + (i % 17 == 5 ? 9.0 : 0.0) + i * 0.03;
    }
    return d;
}

// Rows (in plot coordinates) that contain a pixel close to the line colour.
bool row_has_color(const QImage& img, int y, const QRect& plot, const QColor& color) {
    for (int x = plot.left(); x <= plot.right(); ++x) {
        const QColor c(img.pixel(x, y));
        if (std::abs(c.red() - color.red()) + std::abs(c.green() - color.green()) +
                std::abs(c.blue() - color.blue()) <
            60) {
            return true;
        }
    }
    return false;
}

}  // namespace

class TestMetricsView : public QObject {
    Q_OBJECT
  private slots:
    void sparklineMaxOnTopRow();
    void sparklineScalesFromZero();
    void valuesAsGiven();
    void emptyData();
    void fewPrefilledTokensShowCountNotRate();
    void clearReturnsToEmpty();
    void savePanelPngs();
    void speculationRowAndWhyFree();
};

// With speculation: acceptance, plain rate and speedup next to the (effective) decode rate,
// and the "Why is speculation free?" popup explains with the same numbers. Without: the row
// is hidden and the popup says how to turn it on.
void TestMetricsView::speculationRowAndWhyFree() {
    MetricsView view;
    view.resize(420, 400);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QVERIFY(!view.speculationRowVisible());

    MetricsData m;
    m.decode_tokens_per_s = 60.0;
    m.token_ms = {10, 12, 11};
    m.speculating = true;
    m.verifications = 10;
    m.proposed = 40;
    m.accepted = 30;
    m.current_k = 4;
    m.plain_step_ms = 25.0;  // 40 tok/s plain
    m.verify_step_ms = 50.0;
    m.tokens_per_verification = 4.0;
    m.decode_bytes_per_token = 100'000'000;
    view.setData(m);
    QVERIFY(view.speculationRowVisible());
    QCOMPARE(view.valueText("acceptance"), QStringLiteral("75 % (30/40)"));
    QCOMPARE(view.valueText("plain"), QStringLiteral("40.0\u00a0tok/s"));
    QCOMPARE(view.valueText("speedup"), QStringLiteral("1.50×"));
    QCOMPARE(view.valueText("decode"), QStringLiteral("60.0\u00a0tok/s"));

    QVERIFY(view.whyFreeButton());
    QTest::mouseClick(view.whyFreeButton(), Qt::LeftButton);
    QTRY_VERIFY(view.whyFreePopup() && view.whyFreePopup()->isVisible());
    const QString text = view.whyFreePopup()->text();
    QVERIFY2(text.contains(QStringLiteral("100.0 MB")), qPrintable(text));   // bytes per pass
    QVERIFY2(text.contains(QStringLiteral("25.0 ms")), qPrintable(text));    // plain step
    QVERIFY2(text.contains(QStringLiteral("4.0 GB/s")), qPrintable(text));   // 100 MB / 25 ms
    QVERIFY2(text.contains(QStringLiteral("50.0 ms")), qPrintable(text));    // verification
    QVERIFY2(text.contains(QStringLiteral("2.00× a plain step")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("<b>75 %</b> (30 of 40)")), qPrintable(text));
    // 50 ms / 4 tokens = 12.5 ms per token against 25 ms: 2x faster.
    QVERIFY2(text.contains(QStringLiteral("12.5 ms")) && text.contains(QStringLiteral("2.00× faster")),
             qPrintable(text));
    test::save_png(*view.whyFreePopup(), QStringLiteral("metrics_why_free"));
    view.whyFreePopup()->hide();

    view.setData(MetricsData{});
    QVERIFY(!view.speculationRowVisible());
    QCOMPARE(speculationExplanation(MetricsData{}).contains(QStringLiteral("Speculation is off")),
             true);
}

void TestMetricsView::sparklineMaxOnTopRow() {
    Sparkline s;
    s.resize(200, 48);
    s.setValues({3.0, 10.0, 4.0, 6.0, 2.0});
    const QImage img = s.grab().toImage();
    const QRect plot = s.plotRect();
    QCOMPARE(s.yFor(10.0), plot.top());
    QVERIFY(row_has_color(img, plot.top(), plot, s.lineColor()));
    // Nothing above the plot: the maximum is exactly at the top row.
    QVERIFY(!row_has_color(img, plot.top() - 2, plot, s.lineColor()));
    // The maximum is the second of five points: its pixel lies a quarter of the way across.
    const int x_max = plot.left() + (plot.width() - 1) / 4;
    QColor at_max(img.pixel(x_max, plot.top()));
    QVERIFY2(std::abs(at_max.blue() - s.lineColor().blue()) < 60, qPrintable(at_max.name()));
}

void TestMetricsView::sparklineScalesFromZero() {
    Sparkline s;
    s.resize(200, 48);
    s.setValues({5.0, 10.0});
    const QRect plot = s.plotRect();
    QCOMPARE(s.yFor(0.0), plot.bottom());
    QCOMPARE(s.yFor(10.0), plot.top());
    // Half the maximum: half-way (a scale from zero, not from the minimum).
    QVERIFY(std::abs(s.yFor(5.0) - (plot.top() + plot.bottom()) / 2) <= 1);
    s.setMaxPoints(1);  // only the newest value shown
    QCOMPARE(s.yFor(5.0), plot.bottom() - int(std::lround(0.5 * (plot.height() - 1))));
}

void TestMetricsView::valuesAsGiven() {
    MetricsView view;
    view.setData(sample_metrics());
    QCOMPARE(view.valueText(QStringLiteral("ttft")), QStringLiteral("182 ms"));
    QCOMPARE(view.valueText(QStringLiteral("prefill")),
             QStringLiteral("1") + kNb + QStringLiteral("534") + kNb + QStringLiteral("tok/s"));
    QCOMPARE(view.valueText(QStringLiteral("decode")), QStringLiteral("47.4") + kNb + "tok/s");
    QCOMPARE(view.valueText(QStringLiteral("bandwidth")), QStringLiteral("11.8") + kNb + "GB/s");
    QCOMPARE(view.valueText(QStringLiteral("prompt")), QStringLiteral("137"));
    // 112 of 137 = 81.8%.
    QCOMPARE(view.valueText(QStringLiteral("reused")), QStringLiteral("112 (82%)"));
    QCOMPARE(view.sparkline()->values().size(), 90);
    QVERIFY(view.valueText(QStringLiteral("latency")).contains(QStringLiteral("last 90 tokens")));
}

void TestMetricsView::emptyData() {
    MetricsView view;
    view.setData(MetricsData{});
    QCOMPARE(view.valueText(QStringLiteral("ttft")), QStringLiteral("—"));
    QCOMPARE(view.valueText(QStringLiteral("reused")), QStringLiteral("—"));
    QVERIFY(view.sparkline()->values().isEmpty());
}

// Issue 11, item 13: after Regenerate 172 of 173 prompt tokens came from the cache and 1 was
// computed in 52.9 ms; the panel said "Prefill 18.9 tok/s", a rate of nothing.
void TestMetricsView::fewPrefilledTokensShowCountNotRate() {
    MetricsData d;
    d.ttft_ms = 52.9;
    d.prefill_tokens_per_s = 1000.0 / 52.9;  // 18.9: what the worker computes for 1 token
    d.prompt_tokens = 173;
    d.reused_tokens = 172;
    d.prefilled_tokens = 1;
    d.decode_tokens_per_s = 41.2;
    d.token_ms = {24.0, 24.5, 23.9};
    MetricsView view;
    view.setData(d);
    const QString prefill = view.valueText(QStringLiteral("prefill"));
    QCOMPARE(prefill, QStringLiteral("1 token (172 reused)"));
    QVERIFY(!prefill.contains(QStringLiteral("tok/s")));
    QVERIFY2(view.valueToolTip(QStringLiteral("prefill")).contains(QStringLiteral("KV cache")),
             qPrintable(view.valueToolTip(QStringLiteral("prefill"))));
    // Time to first token is always shown.
    QCOMPARE(view.valueText(QStringLiteral("ttft")), QStringLiteral("52.9 ms"));
    QCOMPARE(view.valueText(QStringLiteral("reused")), QStringLiteral("172 (99%)"));

    // 15 tokens: still a count, plural; at the threshold (16) the rate is back, with its tip.
    d.prefilled_tokens = 15;
    d.reused_tokens = 158;
    view.setData(d);
    QCOMPARE(view.valueText(QStringLiteral("prefill")), QStringLiteral("15 tokens (158 reused)"));
    d.prefilled_tokens = 16;
    d.reused_tokens = 157;
    d.prefill_tokens_per_s = 302.4;
    view.setData(d);
    QCOMPARE(view.valueText(QStringLiteral("prefill")), QStringLiteral("302") + kNb + "tok/s");
    QVERIFY(view.valueToolTip(QStringLiteral("prefill")).contains(QStringLiteral("per second")));

    // A first turn of 5 tokens, nothing reused: the count alone.
    d.prompt_tokens = 5;
    d.reused_tokens = 0;
    d.prefilled_tokens = 5;
    view.setData(d);
    QCOMPARE(view.valueText(QStringLiteral("prefill")), QStringLiteral("5 tokens"));
}

// For a conversation switch: nothing of the previous conversation's numbers stays.
void TestMetricsView::clearReturnsToEmpty() {
    MetricsView view;
    view.setData(sample_metrics());
    QVERIFY(view.valueText(QStringLiteral("prefill")).contains(QStringLiteral("tok/s")));
    view.clear();
    for (const char* key : {"ttft", "prefill", "decode", "bandwidth", "prompt", "reused"})
        QCOMPARE(view.valueText(QLatin1String(key)), QStringLiteral("—"));
    QVERIFY(view.sparkline()->values().isEmpty());
    QCOMPARE(view.valueText(QStringLiteral("latency")),
             QStringLiteral("Per-token latency: no tokens yet"));
    QCOMPARE(view.data().prompt_tokens, qint64(0));
}

void TestMetricsView::savePanelPngs() {
    MetricsView view;
    view.resize(460, 240);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setData(sample_metrics());
    save_png(view, QStringLiteral("metrics_light"));
    view.setPalette(dark_palette());
    save_png(view, QStringLiteral("metrics_dark"));
    // After Regenerate: 1 token computed, 172 reused.
    MetricsData regenerated = sample_metrics();
    regenerated.ttft_ms = 52.9;
    regenerated.prefill_tokens_per_s = 18.9;
    regenerated.prompt_tokens = 173;
    regenerated.reused_tokens = 172;
    regenerated.prefilled_tokens = 1;
    view.setPalette(QPalette());
    view.setData(regenerated);
    save_png(view, QStringLiteral("metrics_regenerate"));
}

QTEST_MAIN(TestMetricsView)
#include "test_metrics_view.moc"
