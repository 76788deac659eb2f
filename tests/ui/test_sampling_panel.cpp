// SamplingPanel and DistributionChart: slider/spin sync and signals, presets, and the chart's
// shaped distribution against hand-computed float64 softmax.
#include <QCheckBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QSlider>
#include <QTest>
#include <cmath>

#include "distribution_chart.h"
#include "panel_data.h"
#include "sampling_panel.h"

using namespace tokenscope::ui;

namespace {

const QString kShotDir = QStringLiteral("/tmp/tokenscope-panels");

QVector<CandidateData> knownCandidates() {
    // Deliberately not in ranking order: the chart must sort.
    return {{11, QStringLiteral(" cat"), 0.0f, 2.5f},   {12, QStringLiteral(" dog"), 0.0f, 3.1f},
            {13, QStringLiteral(" the"), 0.0f, 1.0f},   {14, QStringLiteral(" a"), 0.0f, 0.2f},
            {15, QStringLiteral(" bird"), 0.0f, -0.7f}, {16, QStringLiteral("\n"), 0.0f, -1.5f}};
}

// softmax(logit / T) in float64, in the chart's row order.
QVector<double> softmaxByHand(const QVector<CandidateData>& rows, double t) {
    double max = -1e300;
    for (const auto& c : rows) max = std::max(max, double(c.logit) / t);
    double sum = 0;
    for (const auto& c : rows) sum += std::exp(double(c.logit) / t - max);
    QVector<double> out;
    for (const auto& c : rows) out.push_back(std::exp(double(c.logit) / t - max) / sum);
    return out;
}

SamplingSettings noCuts(float temperature) {
    SamplingSettings s;
    s.temperature = temperature;
    s.top_k = 0;
    s.top_p = 1.0f;
    s.min_p = 0.0f;
    return s;
}

}  // namespace

class TestSamplingPanel : public QObject {
    Q_OBJECT
  private slots:
    void initTestCase() {
        register_panel_types();
        QDir().mkpath(kShotDir);
    }

    void temperatureSliderEmitsSettings() {
        SamplingPanel panel;
        QSignalSpy spy(&panel, &SamplingPanel::settingsChanged);
        QSlider* slider = panel.slider(QStringLiteral("temperature"));
        QVERIFY(slider);
        slider->setValue(150);
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.at(0).at(0).value<SamplingSettings>().temperature, 1.5f);
        QCOMPARE(panel.spinBox(QStringLiteral("temperature"))->value(), 1.5);
        // Keyboard on the slider: one step = 0.01.
        slider->setFocus();
        QTest::keyClick(slider, Qt::Key_Right);
        QCOMPARE(spy.count(), 2);
        QCOMPARE(spy.at(1).at(0).value<SamplingSettings>().temperature, 1.51f);
        // The spin box drives the slider back, one signal per change.
        panel.spinBox(QStringLiteral("temperature"))->setValue(0.3);
        QCOMPARE(spy.count(), 3);
        QCOMPARE(slider->value(), 30);
        QCOMPARE(panel.chart()->settings().temperature, 0.3f);

        // Integer knobs and the seed.
        panel.slider(QStringLiteral("top_k"))->setValue(7);
        QCOMPARE(spy.last().at(0).value<SamplingSettings>().top_k, 7);
        panel.spinBox(QStringLiteral("max_tokens"))->setValue(1000);
        QCOMPARE(spy.last().at(0).value<SamplingSettings>().max_tokens, 1000);
        panel.fixedSeedBox()->setChecked(true);
        panel.spinBox(QStringLiteral("seed"))->setValue(1234);
        QVERIFY(spy.last().at(0).value<SamplingSettings>().fixed_seed);
        QCOMPARE(spy.last().at(0).value<SamplingSettings>().seed, quint64(1234));

        // Programmatic settings do not echo back.
        const int before = spy.count();
        panel.setSettings(SamplingSettings{});
        QCOMPARE(spy.count(), before);
        QCOMPARE(slider->value(), 80);
    }

    void presetsSetTheDocumentedValues() {
        SamplingPanel panel;
        QSignalSpy spy(&panel, &SamplingPanel::settingsChanged);
        struct Expect {
            SamplingPanel::Preset preset;
            float t;
            int k;
            float p;
            float m;
        };
        const Expect expected[] = {{SamplingPanel::Preset::Precise, 0.2f, 20, 0.9f, 0.1f},
                                   {SamplingPanel::Preset::Balanced, 0.8f, 40, 0.95f, 0.05f},
                                   {SamplingPanel::Preset::Creative, 1.2f, 100, 0.98f, 0.02f}};
        panel.spinBox(QStringLiteral("max_tokens"))->setValue(777);
        for (const Expect& e : expected) {
            spy.clear();
            QTest::mouseClick(panel.presetButton(e.preset), Qt::LeftButton);
            QCOMPARE(spy.count(), 1);
            const auto s = spy.at(0).at(0).value<SamplingSettings>();
            QCOMPARE(s.temperature, e.t);
            QCOMPARE(s.top_k, e.k);
            QCOMPARE(s.top_p, e.p);
            QCOMPARE(s.min_p, e.m);
            QCOMPARE(s.max_tokens, 777);  // presets leave the rest alone
            QVERIFY(panel.presetButton(e.preset)->isChecked());
            QCOMPARE(panel.settings().temperature, e.t);
        }
        panel.slider(QStringLiteral("temperature"))->setValue(150);
        QVERIFY(!panel.presetButton(SamplingPanel::Preset::Creative)->isChecked());
    }

    void shapedDistributionIsSoftmaxOverTemperature() {
        DistributionChart chart;
        chart.setLastStep(knownCandidates());
        const auto& rows = chart.candidates();
        QCOMPARE(rows.size(), 6);
        QCOMPARE(rows.front().id, 12);  // highest logit first
        for (const double t : {0.25, 0.5, 1.0, 1.5, 2.0}) {
            chart.setSettings(noCuts(float(t)));
            const QVector<double> expected = softmaxByHand(rows, t);
            const QVector<double>& shaped = chart.shapedProbabilities();
            double sum = 0;
            for (int i = 0; i < rows.size(); ++i) {
                QVERIFY2(std::abs(shaped[i] - expected[i]) < 1e-6,
                         qPrintable(QStringLiteral("T=%1 row %2: %3 vs %4")
                                        .arg(t)
                                        .arg(i)
                                        .arg(shaped[i], 0, 'g', 10)
                                        .arg(expected[i], 0, 'g', 10)));
                sum += shaped[i];
            }
            QVERIFY(std::abs(sum - 1.0) < 1e-6);
            // Raw is always T = 1.
            const QVector<double> raw = softmaxByHand(rows, 1.0);
            for (int i = 0; i < rows.size(); ++i)
                QVERIFY(std::abs(chart.rawProbabilities()[i] - raw[i]) < 1e-12);
        }
        // Temperature 0: greedy.
        chart.setSettings(noCuts(0.0f));
        QCOMPARE(chart.shapedProbabilities()[0], 1.0);
        QCOMPARE(chart.shapedProbabilities()[1], 0.0);
    }

    void topKTwoLeavesTwoBars() {
        SamplingPanel panel;
        panel.setLastStep(knownCandidates());
        SamplingSettings s = noCuts(0.8f);
        panel.setSettings(s);
        panel.slider(QStringLiteral("top_k"))->setValue(2);
        const QVector<double>& shaped = panel.chart()->shapedProbabilities();
        int nonzero = 0;
        for (double p : shaped) nonzero += p > 0.0;
        QCOMPARE(nonzero, 2);
        QVERIFY(shaped[0] > 0 && shaped[1] > 0);  // the two best
        // Renormalised over the two: softmax of their logits / T.
        const QVector<double> two = softmaxByHand(panel.chart()->candidates().mid(0, 2), 0.8);
        QVERIFY(std::abs(shaped[0] - two[0]) < 1e-6);

        // top-p and min-p cut too, in the engine's order (at temperature 1).
        s = noCuts(1.0f);
        s.top_p = 0.5f;
        panel.setSettings(s);
        int kept = 0;
        for (double p : panel.chart()->shapedProbabilities()) kept += p > 0.0;
        QCOMPARE(kept, 1);  // " dog" alone holds > 50 %
        s = noCuts(1.0f);
        s.min_p = 0.2f;  // keep p >= 0.2 * p_max  <=>  logit >= 3.1 + ln 0.2 = 1.49
        panel.setSettings(s);
        kept = 0;
        for (double p : panel.chart()->shapedProbabilities()) kept += p > 0.0;
        QCOMPARE(kept, 2);
    }

    void screenshot() {
        SamplingPanel panel;
        panel.resize(420, 720);
        QVector<CandidateData> step;
        const char* pieces[] = {" the", " a",    " this", " that",  " its",  " an",   " my",
                                " our", " your", " one",  " some",  " each", " any",  "\n",
                                ",",    " his",  " her",  " their", " no",   " every"};
        for (int i = 0; i < 20; ++i)
            step.push_back({100 + i, QString::fromUtf8(pieces[i]), 0.0f, 6.0f - 0.45f * i});
        panel.setLastStep(step);
        panel.applyPreset(SamplingPanel::Preset::Balanced);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        QVERIFY(panel.grab().save(kShotDir + QStringLiteral("/sampling_panel.png")));
        panel.applyPreset(SamplingPanel::Preset::Creative);
        QVERIFY(panel.chart()->grab().save(kShotDir +
                                           QStringLiteral("/distribution_chart_creative.png")));
    }
};

QTEST_MAIN(TestSamplingPanel)
#include "test_sampling_panel.moc"
