// SamplingPanel and DistributionChart: slider/spin sync and signals, presets, and the chart's
// shaped distribution against hand-computed float64 softmax.
#include <QCheckBox>
#include <QDir>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QSpinBox>
#include <QGroupBox>
#include <QHelpEvent>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QSlider>
#include <QTest>
#include <QToolTip>
#include <cmath>

#include "distribution_chart.h"
#include "message_document.h"
#include "panel_data.h"
#include "sampling_panel.h"
#include "speculation_controls.h"
#include "token_inspector.h"
#include "widget_test_support.h"

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

// Every text a user can read in `root`: labels, group box titles, buttons and tooltips.
QStringList visibleTexts(QWidget* root) {
    QStringList texts{root->toolTip()};
    for (QWidget* w : root->findChildren<QWidget*>()) {
        texts << w->toolTip();
        if (auto* label = qobject_cast<QLabel*>(w)) texts << label->text();
        if (auto* box = qobject_cast<QGroupBox*>(w)) texts << box->title();
        if (auto* button = qobject_cast<QAbstractButton*>(w)) texts << button->text();
    }
    return texts;
}

// The names issue 11 found for the same two distributions; none may be left.
const QStringList kOldNames = {QStringLiteral("raw vs"), QStringLiteral("shaped"),
                               QStringLiteral("before shaping"), QStringLiteral("after settings"),
                               QStringLiteral("Model's distribution")};

void expectNoOldNames(const QStringList& texts) {
    for (const QString& text : texts) {
        for (const QString& old : kOldNames)
            QVERIFY2(!text.contains(old, Qt::CaseInsensitive),
                     qPrintable(QStringLiteral("'%1' still says '%2'").arg(text, old)));
    }
}

// Pixels close to `color` in `image`.
int pixelsNear(const QImage& image, const QColor& color) {
    int n = 0;
    for (int y = 0; y < image.height(); ++y) {
        for (int x = 0; x < image.width(); ++x) {
            const QColor c(image.pixel(x, y));
            n += std::abs(c.red() - color.red()) + std::abs(c.green() - color.green()) +
                     std::abs(c.blue() - color.blue()) <
                 30;
        }
    }
    return n;
}

TokenData parisToken() {
    TokenData t;
    t.id = 1234;
    t.text = QStringLiteral(" Paris");
    t.probability = 0.61f;
    t.logprob = -0.6f;
    t.before = {{1234, QStringLiteral(" Paris"), 0.55f, 9.0f},
                {2001, QStringLiteral(" the"), 0.2f, 8.0f},
                {2002, QStringLiteral(" France"), 0.1f, 7.2f},
                {2003, QStringLiteral(" Lyon"), 0.05f, 6.5f}};
    t.after = t.before.mid(0, 2);
    return t;
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
    // The speculation controls emit exactly the chosen setting, once per user change; a draft
    // needs a file (the picker opens, and cancelling it goes back without a signal); max k
    // is only an input while speculation is on; setSettings does not emit.
    void speculationControlsEmitTheChoice() {
        SamplingPanel panel;
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        SpeculationControls* c = panel.speculationControls();
        QVERIFY(c);
        QSignalSpy changed(c, &SpeculationControls::speculationChanged);
        auto last = [&] { return changed.last().at(0).value<SpeculationSettings>(); };
        QCOMPARE(c->settings().mode, SpeculationSettings::Mode::Off);
        QVERIFY(!c->maxKBox()->isEnabled());
        QVERIFY(!c->draftPathEdit()->isEnabled());

        c->modeBox()->setCurrentIndex(c->modeBox()->findData(int(SpeculationSettings::Mode::Lookup)));
        QCOMPARE(changed.count(), 1);
        QCOMPARE(last().mode, SpeculationSettings::Mode::Lookup);
        QCOMPARE(last().max_k, 8);
        QVERIFY(c->maxKBox()->isEnabled());

        c->maxKBox()->setValue(12);
        QCOMPARE(changed.count(), 2);
        QCOMPARE(last().max_k, 12);
        QCOMPARE(last().mode, SpeculationSettings::Mode::Lookup);

        // Draft without a file: the picker is asked; "cancel" restores prompt lookup silently.
        int asked = 0;
        c->setDraftPicker([&] {
            ++asked;
            return QString();
        });
        c->modeBox()->setCurrentIndex(c->modeBox()->findData(int(SpeculationSettings::Mode::Draft)));
        QCOMPARE(asked, 1);
        QCOMPARE(changed.count(), 2);
        QCOMPARE(c->settings().mode, SpeculationSettings::Mode::Lookup);
        // A chosen file: one signal with the path.
        c->setDraftPicker([] { return QStringLiteral("/models/draft.gguf"); });
        c->modeBox()->setCurrentIndex(c->modeBox()->findData(int(SpeculationSettings::Mode::Draft)));
        QCOMPARE(changed.count(), 3);
        QCOMPARE(last().mode, SpeculationSettings::Mode::Draft);
        QCOMPARE(last().draft_path, QStringLiteral("/models/draft.gguf"));
        QCOMPARE(last().max_k, 12);
        QVERIFY(c->browseButton()->isEnabled());

        // The live k.
        c->setCurrentK(5);
        QCOMPARE(c->currentKLabel()->text(), QStringLiteral("now: 5"));
        c->setCurrentK(0);
        QVERIFY(c->currentKLabel()->text().contains(QStringLiteral("paused")));

        // From outside (QSettings, the engine's answer): shown, not emitted.
        SpeculationSettings off;
        c->setSettings(off);
        QCOMPARE(changed.count(), 3);
        QCOMPARE(c->settings(), off);
        QCOMPARE(c->currentKLabel()->text(), QStringLiteral("now: —"));
        QCOMPARE(speculationModeFromName(speculationModeName(SpeculationSettings::Mode::Draft)),
                 SpeculationSettings::Mode::Draft);
        QCOMPARE(speculationModeFromName(QStringLiteral("nonsense")), SpeculationSettings::Mode::Off);
    }

    // The token panel explains a token from a verification step: its origin, what the step
    // proposed, how much was accepted, and where the model disagreed with both probabilities.
    void tokenInspectorShowsTheVerification() {
        TokenInspector inspector;
        inspector.setToken(parisToken());
        QVERIFY(inspector.speculationText().isEmpty());  // a plain token: no section

        auto step = std::make_shared<SpeculationStepData>();
        step->k = 4;
        step->proposed = {{11, QStringLiteral(" quick"), 0, 0},
                          {12, QStringLiteral(" brown"), 0, 0},
                          {13, QStringLiteral(" cat"), 0, 0},
                          {14, QStringLiteral(" jumps"), 0, 0}};
        step->accepted = 2;
        step->tokens = 3;
        step->step_ms = 21.5;
        step->rejected = {13, QStringLiteral(" cat"), 0.02f, 0};
        step->rejected_q = 1.0f;
        step->target = {15, QStringLiteral(" fox"), 0.93f, 0};
        TokenData accepted = parisToken();
        accepted.text = QStringLiteral(" brown");
        accepted.origin = TokenOrigin::Accepted;
        accepted.speculation = step;
        inspector.setToken(accepted);
        const QString text = inspector.speculationText();
        QVERIFY2(text.contains(QStringLiteral("Accepted guess")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("Proposed (k = 4)")), qPrintable(text));
        const QString proposed = QStringLiteral("“%1” “%2” “%3” “%4”")
                                     .arg(visiblePiece(QStringLiteral(" quick")),
                                          visiblePiece(QStringLiteral(" brown")),
                                          visiblePiece(QStringLiteral(" cat")),
                                          visiblePiece(QStringLiteral(" jumps")));
        QVERIFY2(text.contains(proposed), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("Accepted: 2 of 4")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("produced 3 tokens")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("disagreed at “%1” (p %2")
                                   .arg(visiblePiece(QStringLiteral(" cat")))
                                   .arg(formatProbability(0.02f))),
                 qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("q %1").arg(formatProbability(1.0f))), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("chose “%1” (p %2)")
                                   .arg(visiblePiece(QStringLiteral(" fox")))
                                   .arg(formatProbability(0.93f))),
                 qPrintable(text));
        // The rejected proposal is struck through in the rich text.
        QVERIFY(inspector.speculationLabel()->text().contains(
            QStringLiteral("<s>“%1”</s>").arg(visiblePiece(QStringLiteral(" cat")).toHtmlEscaped())));

        TokenData corrected = accepted;
        corrected.origin = TokenOrigin::Corrected;
        inspector.setToken(corrected);
        QVERIFY(inspector.speculationText().contains(QStringLiteral("correction")));
        inspector.resize(360, 760);
        inspector.show();
        QVERIFY(QTest::qWaitForWindowExposed(&inspector));
        test::save_png(inspector, QStringLiteral("token_inspector_speculation"));
        inspector.clear();
        QVERIFY(inspector.speculationText().isEmpty());
    }

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

    // The thinking switch: hidden until a model that has one is loaded, a user toggle emits
    // the setting, a restored setting shows without echoing, and hiding keeps the value.
    void thinkingSwitchOnlyForModelsThatHaveOne() {
        SamplingPanel panel;
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        QSignalSpy spy(&panel, &SamplingPanel::settingsChanged);
        QVERIFY(!panel.thinkBox()->isVisible());
        QVERIFY(panel.settings().think);  // default on, as the templates default
        panel.setThinkingAvailable(true);
        QVERIFY(panel.thinkBox()->isVisible());
        QTest::mouseClick(panel.thinkBox(), Qt::LeftButton, {}, QPoint(8, panel.thinkBox()->height() / 2));
        QCOMPARE(spy.count(), 1);
        QVERIFY(!spy.last().at(0).value<SamplingSettings>().think);
        SamplingSettings restored;
        restored.think = true;
        panel.setSettings(restored);
        QCOMPARE(spy.count(), 1);
        QVERIFY(panel.thinkBox()->isChecked());
        panel.thinkBox()->setChecked(false);
        panel.setThinkingAvailable(false);
        QVERIFY(!panel.thinkBox()->isVisible());
        QVERIFY(!panel.settings().think);
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

    // Issue 11, item 10: the sampling panel, its chart and the token inspector call the two
    // distributions by the same two names and each explains them in one wrapped line.
    void namesAreTheSameEverywhere() {
        const QString before = QStringLiteral("before sampling settings");
        const QString after = QStringLiteral("after sampling settings");
        QCOMPARE(beforeSettingsName(), before);
        QCOMPARE(afterSettingsName(), after);
        const QString explanation = settingsDistributionsExplanation();
        QVERIFY(explanation.contains(before, Qt::CaseInsensitive));
        QVERIFY(explanation.contains(after, Qt::CaseInsensitive));
        QVERIFY(explanation.contains(QStringLiteral("raw logits")));
        for (const char* stage : {"repetition penalty", "top-k", "top-p", "min-p", "temperature"})
            QVERIFY2(explanation.contains(QLatin1String(stage)), stage);

        SamplingPanel panel;
        panel.setLastStep(knownCandidates());
        QVERIFY(panel.explanationLabel());
        QCOMPARE(panel.explanationLabel()->text(), explanation);
        QVERIFY(panel.explanationLabel()->wordWrap());
        QCOMPARE(panel.chart()->legendLabels(), QStringList({before, after}));
        expectNoOldNames(visibleTexts(&panel));

        // The chart's row tooltip names both distributions the same way.
        panel.resize(420, 720);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        test::settle();
        DistributionChart* chart = panel.chart();
        const QPoint row0(chart->width() / 2, chart->height() / 2);
        QPoint at;
        // Find a point on a candidate row (the legend may take one or two lines).
        for (int y = 0; y < chart->height() && at.isNull(); y += 2) {
            QHelpEvent probe(QEvent::ToolTip, QPoint(row0.x(), y),
                             chart->mapToGlobal(QPoint(row0.x(), y)));
            QCoreApplication::sendEvent(chart, &probe);
            if (QToolTip::isVisible()) at = QPoint(row0.x(), y);
        }
        QVERIFY2(!at.isNull(), "no row tooltip");
        const QString tip = QToolTip::text();
        QVERIFY2(tip.contains(before) && tip.contains(after), qPrintable(tip));
        expectNoOldNames({tip});
        QToolTip::hideText();

        TokenInspector inspector;
        inspector.setToken(parisToken());
        QCOMPARE(inspector.beforeHeading()->text(), QStringLiteral("Before sampling settings"));
        QCOMPARE(inspector.afterHeading()->text(), QStringLiteral("After sampling settings"));
        QCOMPARE(inspector.explanationLabel()->text(), explanation);
        QVERIFY(inspector.explanationLabel()->wordWrap());
        expectNoOldNames(visibleTexts(&inspector));
        inspector.resize(360, 700);
        inspector.show();
        QVERIFY(QTest::qWaitForWindowExposed(&inspector));
        test::save_png(inspector, QStringLiteral("token_inspector_names"));
    }

    // The chart shows the step of the token the user selected, says which, and goes back to
    // its empty state on clearStep.
    void showStepAndClearStep() {
        SamplingPanel panel;
        panel.resize(420, 720);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        QCOMPARE(panel.stepTitle(), QStringLiteral("No step yet"));
        QVERIFY(panel.chart()->candidates().isEmpty());

        const TokenData token = parisToken();
        panel.showStep(token);
        QCOMPARE(panel.stepTitle(),
                 QStringLiteral("Step of token “%1” (id 1234)").arg(visiblePiece(token.text)));
        QCOMPARE(panel.stepTitle(), QStringLiteral("Step of token “·Paris” (id 1234)"));
        QCOMPARE(panel.chart()->candidates().size(), token.before.size());
        QCOMPARE(panel.chart()->candidates().front().id, 1234);
        // The bars are drawn: the highlight colour of the "after" bars is on the chart.
        const QColor bar = panel.chart()->palette().color(QPalette::Highlight);
        test::settle();
        QVERIFY(pixelsNear(panel.chart()->grab().toImage(), bar) > 50);
        test::save_png(panel, QStringLiteral("sampling_panel_selected_step"));

        panel.clearStep();
        QCOMPARE(panel.stepTitle(), QStringLiteral("No step yet"));
        QVERIFY(panel.chart()->candidates().isEmpty());
        QVERIFY(panel.chart()->placeholderText().startsWith(QStringLiteral("No step yet")));
        test::settle();
        QCOMPARE(pixelsNear(panel.chart()->grab().toImage(), bar), 0);

        // setLastStep still works, and says it is the last step, not a selected token's.
        panel.setLastStep(knownCandidates());
        QCOMPARE(panel.stepTitle(), QStringLiteral("Last step"));
        QCOMPARE(panel.chart()->candidates().size(), 6);
        panel.setLastStep({});
        QCOMPARE(panel.stepTitle(), QStringLiteral("No step yet"));

        // A token without recorded candidates: named, and the chart says why it is empty.
        TokenData bare = token;
        bare.before.clear();
        panel.showStep(bare);
        QCOMPARE(panel.stepTitle(), QStringLiteral("Step of token “·Paris” (id 1234)"));
        QVERIFY(panel.chart()->candidates().isEmpty());
        QVERIFY(panel.chart()->placeholderText().contains(QStringLiteral("No candidates")));
        panel.clearStep();
        QVERIFY(panel.chart()->placeholderText().startsWith(QStringLiteral("No step yet")));
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
        TokenData token;
        token.id = 100;
        token.text = QStringLiteral(" the");
        token.before = step;
        panel.showStep(token);
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
