// The sampler chain: each stage on hand-computed examples, the whole chain against a float64
// reference written here, and the draw against its distribution with a chi-square test.
//
// Golden values: every expected support and penalised logit below is worked out by hand in the
// comment next to it; every expected probability is computed in this file in double precision
// from the input logits (an implementation independent of the engine's float/double mix).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/sampling_stages.h"
#include "util/error.h"

Q_DECLARE_METATYPE(tokenscope::runtime::SamplingParams)

using namespace tokenscope;
using runtime::Sampler;
using runtime::SamplingParams;
namespace sampling = runtime::sampling;

namespace {

// Reference softmax in double.
std::vector<double> softmax64(const std::vector<double>& logits) {
    const double max = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(logits.size());
    double sum = 0.0;
    for (std::size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(logits[i] - max);
    for (auto& x : p) x /= sum;
    return p;
}

std::set<std::int32_t> ids_of(const sampling::CandidateSet& set) {
    std::set<std::int32_t> ids;
    for (const auto& c : set.items) ids.insert(c.id);
    return ids;
}

QString show(const std::set<std::int32_t>& ids) {
    QStringList parts;
    for (const auto id : ids) parts << QString::number(id);
    return "{" + parts.join(',') + "}";
}

// Logits whose softmax is exactly `probs` (up to rounding): logit = ln(p).
std::vector<float> logits_from_probs(const std::vector<double>& probs) {
    std::vector<float> logits;
    for (const double p : probs) logits.push_back(static_cast<float>(std::log(p)));
    return logits;
}

// A sampler that only shapes what the test asks for: every optional stage off.
SamplingParams plain_params() {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.frequency_penalty = 0.0f;
    p.presence_penalty = 0.0f;
    p.n_candidates = 10;
    return p;
}

struct ChiSquare {
    double statistic = 0.0;
    int degrees_of_freedom = 0;
    int outside_support = 0;  // draws of a token the expected distribution gives probability 0
};

ChiSquare chi_square(const std::vector<int>& counts, const std::vector<double>& expected) {
    const int draws = std::accumulate(counts.begin(), counts.end(), 0);
    ChiSquare out;
    int support = 0;
    for (std::size_t id = 0; id < counts.size(); ++id) {
        if (expected[id] == 0.0) {
            out.outside_support += counts[id];
            continue;
        }
        ++support;
        const double e = expected[id] * draws;
        out.statistic += (counts[id] - e) * (counts[id] - e) / e;
    }
    out.degrees_of_freedom = support - 1;
    return out;
}

// Softmax64 of logit / t over `support`, 0 elsewhere.
std::vector<double> shaped(const std::vector<float>& logits, const QList<int>& support, double t) {
    std::vector<double> scaled;
    for (const int id : support) scaled.push_back(static_cast<double>(logits[id]) / t);
    const auto probs = softmax64(scaled);
    std::vector<double> out(logits.size(), 0.0);
    for (qsizetype i = 0; i < support.size(); ++i) out[support[i]] = probs[i];
    return out;
}

}  // namespace

class TestSampler : public QObject {
    Q_OBJECT

  private slots:
    // --- penalties -------------------------------------------------------------------------

    void repetitionPenaltyConvention() {
        // r = 2: a positive logit is divided (2.0 -> 1.0), a negative one multiplied
        // (-1.0 -> -2.0), zero stays 0 (0 * 2). Tokens not in the history are untouched.
        std::vector<float> logits{2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
        SamplingParams p = plain_params();
        p.repeat_penalty = 2.0f;
        const std::vector<std::int32_t> history{0, 1, 4, 0};
        sampling::apply_penalties(logits, history, p);
        QCOMPARE(logits, (std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f, 0.0f}));
    }

    void frequencyAndPresencePenalties() {
        // History counts: token 0 twice, token 1 once, token 4 once.
        // r = 2, frequency 0.5, presence 0.25; repetition first, then
        // logit -= count * 0.5 + 0.25:
        //   token 0:  2.0 / 2 = 1.0;  1.0 - 2*0.5 - 0.25 = -0.25
        //   token 1: -1.0 * 2 = -2.0; -2.0 - 1*0.5 - 0.25 = -2.75
        //   token 4:  0.0 * 2 = 0.0;   0.0 - 1*0.5 - 0.25 = -0.75
        std::vector<float> logits{2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
        SamplingParams p = plain_params();
        p.repeat_penalty = 2.0f;
        p.frequency_penalty = 0.5f;
        p.presence_penalty = 0.25f;
        const std::vector<std::int32_t> history{0, 1, 0, 4};
        sampling::apply_penalties(logits, history, p);
        QCOMPARE(logits, (std::vector<float>{-0.25f, -2.75f, 0.5f, 3.0f, -0.75f}));
    }

    void penaltyWindowSeesOnlyTheTail() {
        // Window 2 of {0, 1, 0, 4} is {0, 4}: token 1 is outside it and untouched; token 0
        // counts once. frequency 1: token 0: 2.0 - 1 = 1.0; token 4: 0.0 - 1 = -1.0.
        std::vector<float> logits{2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
        SamplingParams p = plain_params();
        p.frequency_penalty = 1.0f;
        p.penalty_window = 2;
        const std::vector<std::int32_t> history{0, 1, 0, 4};
        sampling::apply_penalties(logits, history, p);
        QCOMPARE(logits, (std::vector<float>{1.0f, -1.0f, 0.5f, 3.0f, -1.0f}));

        // Window 0 turns penalties off.
        std::vector<float> untouched{2.0f, -1.0f};
        p.penalty_window = 0;
        sampling::apply_penalties(untouched, history, p);
        QCOMPARE(untouched, (std::vector<float>{2.0f, -1.0f}));
    }

    void penaltyRejectsForeignHistoryIds() {
        std::vector<float> logits{1.0f, 2.0f};
        SamplingParams p = plain_params();
        p.presence_penalty = 1.0f;
        const std::vector<std::int32_t> history{0, 7};
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, sampling::apply_penalties(logits, history, p));
    }

    void penaltiesChangeTheGreedyChoice() {
        // Token 1 leads (3.0 vs 2.5); r = 1.5 gives it 2.0, so token 0 wins the argmax.
        const std::vector<float> logits{2.5f, 3.0f, 0.0f};
        SamplingParams p = plain_params();
        p.temperature = 0.0f;
        p.repeat_penalty = 1.5f;
        Sampler sampler(p);
        const std::vector<std::int32_t> history{1};
        const auto r = sampler.sample(logits, history);
        QCOMPARE(r.token, 0);
        QCOMPARE(r.after.front().logit, 2.5f);
        QCOMPARE(r.before.front().id, 1);  // before shaping token 1 still leads
    }

    // --- truncations -----------------------------------------------------------------------

    void topKSupport() {
        // logits {1, 5, 3, 5, 2}: the two best are ids 1 and 3 (both 5); the third is id 2.
        const std::vector<float> logits{1.0f, 5.0f, 3.0f, 5.0f, 2.0f};
        QCOMPARE(show(ids_of(sampling::make_candidates(logits, 2))), show({1, 3}));
        QCOMPARE(show(ids_of(sampling::make_candidates(logits, 3))), show({1, 2, 3}));
        QCOMPARE(show(ids_of(sampling::make_candidates(logits, 0))), show({0, 1, 2, 3, 4}));
        QCOMPARE(show(ids_of(sampling::make_candidates(logits, 99))), show({0, 1, 2, 3, 4}));

        // The same through the stage function on an unsorted set.
        auto set = sampling::make_candidates(logits, 0);
        sampling::top_k(set, 2);
        QCOMPARE(show(ids_of(set)), show({1, 3}));
        QVERIFY(set.sorted);
        QCOMPARE(set.items[0].id, 1);  // tie on 5: lower id ranks first
    }

    void topKTieAtTheCutGoesToTheLowestId() {
        // {4, 2, 2, 2, 1}, k = 2: id 0, then one of the three 2s -> the lowest id, 1.
        const std::vector<float> logits{4.0f, 2.0f, 2.0f, 2.0f, 1.0f};
        QCOMPARE(show(ids_of(sampling::make_candidates(logits, 2))), show({0, 1}));
        auto set = sampling::make_candidates(logits, 0);
        sampling::top_k(set, 3);
        QCOMPARE(show(ids_of(set)), show({0, 1, 2}));
    }

    void maskedTokensAreNeverCandidates() {
        const float inf = std::numeric_limits<float>::infinity();
        const std::vector<float> logits{-inf, 1.0f, -inf, 0.0f};
        QCOMPARE(show(ids_of(sampling::make_candidates(logits, 0))), show({1, 3}));
        QCOMPARE(show(ids_of(sampling::make_candidates(logits, 3))), show({1, 3}));
    }

    void topPSupport() {
        // Probabilities by id: 0:0.15 1:0.5 2:0.1 3:0.25 (scrambled so sorting matters).
        // Sorted: 1 (0.5), 3 (0.25), 0 (0.15), 2 (0.1); cumulative 0.5, 0.75, 0.9, 1.0.
        //   p = 0.4 -> {1}          (0.5 >= 0.4)
        //   p = 0.7 -> {1, 3}       (0.75 >= 0.7, the crossing token is kept)
        //   p = 0.8 -> {1, 3, 0}    (0.9 >= 0.8)
        //   p = 0.95 -> all four
        //   p = 0   -> {1}          (at least one survives)
        const auto logits = logits_from_probs({0.15, 0.5, 0.1, 0.25});
        const auto support = [&](float p) {
            auto set = sampling::make_candidates(logits, 0);
            sampling::top_p(set, p);
            return show(ids_of(set));
        };
        QCOMPARE(support(0.4f), show({1}));
        QCOMPARE(support(0.7f), show({1, 3}));
        QCOMPARE(support(0.8f), show({0, 1, 3}));
        QCOMPARE(support(0.95f), show({0, 1, 2, 3}));
        QCOMPARE(support(0.0f), show({1}));
    }

    void topPRenormalisesAfterTopK() {
        // Probabilities 0.4, 0.3, 0.2, 0.1 (ids 0..3), top_p 0.75.
        // Alone: cumulative 0.4, 0.7, 0.9 -> {0, 1, 2}.
        // After top-k 3 the three survivors renormalise to 4/9, 3/9, 2/9: cumulative
        // 0.444, 0.778 >= 0.75 -> {0, 1}. (This is why the order is documented.)
        const auto logits = logits_from_probs({0.4, 0.3, 0.2, 0.1});
        auto alone = sampling::make_candidates(logits, 0);
        sampling::top_p(alone, 0.75f);
        QCOMPARE(show(ids_of(alone)), show({0, 1, 2}));
        auto after_k = sampling::make_candidates(logits, 3);
        sampling::top_p(after_k, 0.75f);
        QCOMPARE(show(ids_of(after_k)), show({0, 1}));
    }

    void minPSupportIsRelativeToTheMaximum() {
        // Probabilities by id: 0:0.15 1:0.5 2:0.1 3:0.25; p_max = 0.5.
        //   min_p 0.25 -> threshold 0.125: {1, 3, 0}   (0.1 < 0.125 dropped)
        //   min_p 0.4  -> threshold 0.2:   {1, 3}
        //   min_p 1.0  -> threshold 0.5:   {1}
        //   min_p 0.19 -> threshold 0.095: all (an absolute cut at 0.19 would drop 0 and 2)
        const auto logits = logits_from_probs({0.15, 0.5, 0.1, 0.25});
        const auto support = [&](float m) {
            auto set = sampling::make_candidates(logits, 0);
            sampling::min_p(set, m);
            return show(ids_of(set));
        };
        QCOMPARE(support(0.25f), show({0, 1, 3}));
        QCOMPARE(support(0.4f), show({1, 3}));
        QCOMPARE(support(1.0f), show({1}));
        QCOMPARE(support(0.19f), show({0, 1, 2, 3}));
    }

    void largeVocabularyCutsMatchAFullSort() {
        // 262144 logits (Gemma's vocabulary size) from a seeded normal distribution; the
        // reference ranks them with a full std::sort in double.
        constexpr std::size_t kVocab = 262144;
        std::mt19937_64 gen(7);
        std::normal_distribution<float> normal(0.0f, 3.0f);
        std::vector<float> logits(kVocab);
        for (auto& l : logits) l = normal(gen);

        std::vector<std::int32_t> order(kVocab);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
            return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
        });

        // top-k 40: exactly the first 40 of the full sort, in that order.
        const auto set = sampling::make_candidates(logits, 40);
        QCOMPARE(set.items.size(), std::size_t{40});
        for (std::size_t i = 0; i < 40; ++i) QCOMPARE(set.items[i].id, order[i]);

        // top-p 0.9 on the whole vocabulary: the reference walks the full sort in double.
        std::vector<double> as_double(logits.begin(), logits.end());
        const auto probs = softmax64(as_double);
        double cumulative = 0.0;
        std::size_t expected = 0;
        while (expected < kVocab) {
            cumulative += probs[static_cast<std::size_t>(order[expected++])];
            if (cumulative >= 0.9) break;
        }
        auto nucleus = sampling::make_candidates(logits, 0);
        sampling::top_p(nucleus, 0.9f);
        qInfo("top-p 0.9 over %zu tokens keeps %zu", kVocab, expected);
        QCOMPARE(nucleus.items.size(), expected);
        for (std::size_t i = 0; i < expected; ++i) QCOMPARE(nucleus.items[i].id, order[i]);
    }

    // --- temperature and greedy ------------------------------------------------------------

    void temperatureZeroIsArgmaxLowestIdOnTies() {
        SamplingParams p;  // defaults for everything else: the cuts must not matter
        p.temperature = 0.0f;
        Sampler sampler(p);
        const std::vector<float> tie{1.0f, 3.0f, 3.0f, 2.0f};
        for (int i = 0; i < 20; ++i) {
            const auto r = sampler.sample(tie, {});
            QCOMPARE(r.token, 1);
            QCOMPARE(r.probability, 1.0f);
            QCOMPARE(r.logprob, 0.0f);
            QCOMPARE(r.support_size, 1);
        }
        std::mt19937_64 gen(3);
        std::normal_distribution<float> normal(0.0f, 2.0f);
        for (int trial = 0; trial < 50; ++trial) {
            std::vector<float> logits(1000);
            for (auto& l : logits) l = normal(gen);
            const auto expected = std::max_element(logits.begin(), logits.end()) - logits.begin();
            QCOMPARE(sampler.sample(logits, {}).token, static_cast<std::int32_t>(expected));
        }
    }

    void temperatureScalesLogits() {
        auto set = sampling::make_candidates(std::vector<float>{1.0f, -2.0f}, 0);
        sampling::temperature(set, 0.5f);
        QCOMPARE(set.items[0].logit, 2.0f);
        QCOMPARE(set.items[1].logit, -4.0f);
    }

    // --- reported candidates ---------------------------------------------------------------

    void beforeIsSoftmaxOfRawLogits() {
        constexpr std::size_t kVocab = 5000;
        std::mt19937_64 gen(11);
        std::normal_distribution<float> normal(0.0f, 4.0f);
        std::vector<float> logits(kVocab);
        for (auto& l : logits) l = normal(gen);
        std::vector<double> as_double(logits.begin(), logits.end());
        const auto probs = softmax64(as_double);
        std::vector<std::int32_t> order(kVocab);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
            return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
        });

        SamplingParams p;  // default shaping: the `before` list must not see any of it
        p.repeat_penalty = 1.3f;
        p.n_candidates = 12;
        Sampler sampler(p);
        const std::vector<std::int32_t> history{order[0], order[1], order[0]};
        const auto r = sampler.sample(logits, history);
        QCOMPARE(r.before.size(), std::size_t{12});
        for (std::size_t i = 0; i < 12; ++i) {
            QCOMPARE(r.before[i].id, order[i]);
            QCOMPARE(r.before[i].logit, logits[static_cast<std::size_t>(order[i])]);
            const double expected = probs[static_cast<std::size_t>(order[i])];
            QVERIFY2(std::abs(r.before[i].probability - expected) <= 1e-6 * expected,
                     qPrintable(QString("rank %1: %2 vs %3")
                                    .arg(i)
                                    .arg(r.before[i].probability)
                                    .arg(expected)));
        }
        const double model_p = probs[static_cast<std::size_t>(r.token)];
        QVERIFY(std::abs(r.model_probability - model_p) <= 1e-6 * model_p);
        QVERIFY(std::abs(r.model_logprob - std::log(model_p)) <= 1e-5);
    }

    void afterIsTheDistributionSampledFrom() {
        // logits by id {1.0, 2.5, 0.3, 2.0, -1.0, 1.5, 0.0, 3.0}, repetition 2 on token 7
        // (3.0 -> 1.5), top-k 4 -> ids 1 (2.5), 3 (2.0), 5 (1.5), 7 (1.5); T = 0.5.
        // Reference: softmax64 of {2.5, 2.0, 1.5, 1.5} / 0.5, in ranking order 1, 3, 5, 7.
        const std::vector<float> logits{1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.5f, 0.0f, 3.0f};
        SamplingParams p = plain_params();
        p.top_k = 4;
        p.temperature = 0.5f;
        p.repeat_penalty = 2.0f;
        p.n_candidates = 3;
        Sampler sampler(p);
        const std::vector<std::int32_t> history{7};
        const auto r = sampler.sample(logits, history);
        const auto ref = softmax64({5.0, 4.0, 3.0, 3.0});
        const std::vector<std::int32_t> ids{1, 3, 5, 7};
        QCOMPARE(r.support_size, 4);
        QCOMPARE(r.after.size(), std::size_t{3});
        for (std::size_t i = 0; i < 3; ++i) {
            QCOMPARE(r.after[i].id, ids[i]);
            QVERIFY(std::abs(r.after[i].probability - ref[i]) < 1e-6);
        }
        QCOMPARE(r.after[0].logit, 5.0f);
        const auto at = std::find(ids.begin(), ids.end(), r.token) - ids.begin();
        QVERIFY(at < 4);
        QVERIFY(std::abs(r.probability - ref[static_cast<std::size_t>(at)]) < 1e-6);
        QVERIFY(std::abs(r.logprob - std::log(ref[static_cast<std::size_t>(at)])) < 1e-5);
        QCOMPARE(r.before.front().id, 7);  // before: the raw 3.0 still leads
    }

    // --- the draw --------------------------------------------------------------------------

    void drawFollowsTheShapedDistribution_data() {
        QTest::addColumn<float>("temperature");
        QTest::addColumn<int>("topK");
        QTest::addColumn<float>("topP");
        QTest::addColumn<float>("minP");
        QTest::addColumn<QList<int>>("support");
        // logits by id {1.0, 2.5, 0.3, 2.0, -1.0, 1.5, 0.0, 3.0}; ranking 7, 1, 3, 5, 0, 2, 6, 4.
        // Probabilities at T = 1 (exp(l) / 49.575, rounded): 7 .405, 1 .246, 3 .149, 5 .090,
        // 0 .055, 2 .027, 6 .020, 4 .007.
        QTest::newRow("plain T=1")
            << 1.0f << 0 << 1.0f << 0.0f << QList<int>{0, 1, 2, 3, 4, 5, 6, 7};
        // top-k 5 -> {7, 1, 3, 5, 0}.
        QTest::newRow("top-k 5, T=0.8") << 0.8f << 5 << 1.0f << 0.0f << QList<int>{0, 1, 3, 5, 7};
        // top-p 0.7 at T=1: cumulative .405, .651, .800 -> {7, 1, 3}.
        QTest::newRow("top-p 0.7, T=1.5") << 1.5f << 0 << 0.7f << 0.0f << QList<int>{1, 3, 7};
        // min-p 0.2: threshold .2 * .405 = .081 -> {7, 1, 3, 5} (5 has .090, 0 has .055).
        QTest::newRow("min-p 0.2, T=0.7") << 0.7f << 0 << 1.0f << 0.2f << QList<int>{1, 3, 5, 7};
    }

    void drawFollowsTheShapedDistribution() {
        QFETCH(float, temperature);
        QFETCH(int, topK);
        QFETCH(float, topP);
        QFETCH(float, minP);
        QFETCH(QList<int>, support);
        const std::vector<float> logits{1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.5f, 0.0f, 3.0f};

        // Expected: softmax64 of logit / T over the hand-computed support, 0 elsewhere.
        const auto expected = shaped(logits, support, temperature);

        SamplingParams p = plain_params();
        p.temperature = temperature;
        p.top_k = topK;
        p.top_p = topP;
        p.min_p = minP;
        p.seed = 20240601;
        Sampler sampler(p);
        QCOMPARE(sampler.sample(logits, {}).support_size,
                 static_cast<std::int32_t>(support.size()));

        constexpr int kDraws = 200000;
        std::vector<int> counts(logits.size(), 0);
        for (int i = 0; i < kDraws; ++i)
            ++counts[static_cast<std::size_t>(sampler.sample(logits, {}).token)];

        // Critical values of the chi-square distribution at p = 0.001 (upper tail), from
        // standard tables, by degrees of freedom.
        const std::map<int, double> critical{{2, 13.816}, {3, 16.266}, {4, 18.467}, {7, 24.322}};
        const auto chi = chi_square(counts, expected);
        const double limit = critical.at(chi.degrees_of_freedom);
        qInfo("chi-square %.3f with %d dof over %d draws (critical value at p = 0.001: %.3f)",
              chi.statistic, chi.degrees_of_freedom, kDraws, limit);
        QCOMPARE(chi.outside_support, 0);
        QVERIFY(chi.statistic < limit);

        // The test has power: the same counts reject a distribution whose temperature is off by
        // 5 %.
        const auto wrong = chi_square(counts, shaped(logits, support, temperature * 1.05));
        qInfo("  against T * 1.05: chi-square %.1f", wrong.statistic);
        QVERIFY(wrong.statistic > limit);
    }

    void drawNeverPicksZeroProbability() {
        sampling::CandidateSet set;
        set.items = {{0, 0.0f, 0.0f}, {1, 0.0f, 1.0f}, {2, 0.0f, 0.0f}};
        QCOMPARE(sampling::draw(set, 0.0), std::size_t{1});
        QCOMPARE(sampling::draw(set, 0.999999), std::size_t{1});
        set.items = {{0, 0.0f, 0.25f}, {1, 0.0f, 0.75f}, {2, 0.0f, 0.0f}};
        QCOMPARE(sampling::draw(set, 0.2), std::size_t{0});
        QCOMPARE(sampling::draw(set, 0.3), std::size_t{1});
        QCOMPARE(sampling::draw(set, std::nextafter(1.0, 0.0)), std::size_t{1});
    }

    void sameSeedSameTokens() {
        std::mt19937_64 gen(5);
        std::normal_distribution<float> normal(0.0f, 2.0f);
        std::vector<std::vector<float>> rows(300, std::vector<float>(2000));
        for (auto& row : rows)
            for (auto& l : row) l = normal(gen);

        SamplingParams p;  // the default chain
        p.seed = 1234;
        p.temperature = 1.2f;
        p.repeat_penalty = 1.1f;
        const auto run = [&](SamplingParams params) {
            Sampler sampler(params);
            std::vector<std::int32_t> tokens;
            for (const auto& row : rows) tokens.push_back(sampler.sample(row, tokens).token);
            return tokens;
        };
        const auto a = run(p);
        QCOMPARE(run(p), a);
        p.seed = 1235;
        QVERIFY(run(p) != a);

        // reset() restarts the sequence.
        p.seed = 1234;
        Sampler sampler(p);
        std::vector<std::int32_t> first, second;
        for (const auto& row : rows) first.push_back(sampler.sample(row, first).token);
        sampler.reset();
        for (const auto& row : rows) second.push_back(sampler.sample(row, second).token);
        QCOMPARE(second, first);
    }

    // --- validation ------------------------------------------------------------------------

    void invalidParamsNameTheField_data() {
        QTest::addColumn<QString>("field");
        QTest::addColumn<SamplingParams>("params");
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const auto row = [](const char* name, const char* field, auto mutate) {
            SamplingParams p;
            mutate(p);
            QTest::newRow(name) << QString(field) << p;
        };
        row("temperature < 0", "temperature", [](SamplingParams& p) { p.temperature = -0.1f; });
        row("temperature NaN", "temperature", [nan](SamplingParams& p) { p.temperature = nan; });
        row("top_k < 0", "top_k", [](SamplingParams& p) { p.top_k = -1; });
        row("top_p > 1", "top_p", [](SamplingParams& p) { p.top_p = 1.5f; });
        row("top_p < 0", "top_p", [](SamplingParams& p) { p.top_p = -0.5f; });
        row("min_p > 1", "min_p", [](SamplingParams& p) { p.min_p = 2.0f; });
        row("repeat_penalty 0", "repeat_penalty",
            [](SamplingParams& p) { p.repeat_penalty = 0.0f; });
        row("frequency_penalty 3", "frequency_penalty",
            [](SamplingParams& p) { p.frequency_penalty = 3.0f; });
        row("presence_penalty NaN", "presence_penalty",
            [nan](SamplingParams& p) { p.presence_penalty = nan; });
        row("penalty_window < 0", "penalty_window",
            [](SamplingParams& p) { p.penalty_window = -1; });
        row("n_candidates < 0", "n_candidates", [](SamplingParams& p) { p.n_candidates = -3; });
    }

    void invalidParamsNameTheField() {
        QFETCH(QString, field);
        QFETCH(SamplingParams, params);
        try {
            Sampler sampler(params);
            QFAIL("no exception");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString(e.what()).contains("SamplingParams." + field + " ="), e.what());
        }
    }

    void invalidLogitsAreRejected() {
        Sampler sampler(SamplingParams{});
        const float inf = std::numeric_limits<float>::infinity();
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, sampler.sample(std::vector<float>{}, {}));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 sampler.sample(std::vector<float>{1.0f, std::nanf("")}, {}));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 sampler.sample(std::vector<float>{1.0f, inf}, {}));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 sampler.sample(std::vector<float>{-inf, -inf}, {}));
        // A masked token is fine and never drawn.
        for (int i = 0; i < 100; ++i)
            QCOMPARE(sampler.sample(std::vector<float>{-inf, 0.0f, -inf}, {}).token, 1);
    }
};

QTEST_APPLESS_MAIN(TestSampler)
#include "test_sampler.moc"
