// The pieces of speculative decoding on their own, with hand-computed examples: prompt lookup,
// the acceptance rule (and a chi-square check that it reproduces the target distribution), the
// adaptive-k controller and its cost model.
#include <QtTest>
#include <map>
#include <random>

#include "runtime/speculation/acceptance.h"
#include "runtime/speculation/adaptive_k.h"
#include "runtime/speculation/lookup_proposer.h"

using namespace tokenscope::runtime;
using namespace tokenscope::runtime::speculation;

namespace {

std::vector<std::int32_t> lookup(std::vector<std::int32_t> tokens, int k, int min_n = 1,
                                 int max_n = 4) {
    return lookup_continuation(tokens, k, LookupOptions{min_n, max_n});
}

using Dist = std::vector<sampling::TokenLogit>;
Dist dist(std::initializer_list<std::pair<std::int32_t, float>> items) {
    Dist d;
    for (auto [id, p] : items) d.push_back({id, 0.0f, p});
    return d;
}

}  // namespace

class TestSpeculation : public QObject {
    Q_OBJECT

  private slots:
    void lookupFindsLatestLongestNgram() {
        // Suffix [1 2] occurs at 0 (the 4- and 3-gram suffixes nowhere earlier): continue with
        // what followed it, 3 4 1.
        QCOMPARE(lookup({1, 2, 3, 4, 1, 2}, 3), (std::vector<std::int32_t>{3, 4, 1}));
        // 1-grams only: the most recent earlier 1 is at index 3, followed by 8 1.
        QCOMPARE(lookup({5, 1, 7, 1, 8, 1}, 2, 1, 1), (std::vector<std::int32_t>{8, 1}));
        // The 2-gram [1 2] (at 0, followed by 9 3) wins over the more recent 1-gram [2] (at 4).
        QCOMPARE(lookup({1, 2, 9, 3, 2, 8, 1, 2}, 2, 1, 2), (std::vector<std::int32_t>{9, 3}));
        // At the end of the sequence the copied period repeats: [1] last occurred at 0, so the
        // period is [2 1] (positions 1-2) and five tokens are 2 1 2 1 2 (by hand).
        QCOMPARE(lookup({1, 2, 1}, 5), (std::vector<std::int32_t>{2, 1, 2, 1, 2}));
        // A run of one token proposes more of it; a repeated line (period 3) repeats whole.
        QCOMPARE(lookup({4, 9, 9, 9}, 4), (std::vector<std::int32_t>{9, 9, 9, 9}));
        QCOMPARE(lookup({5, 6, 7, 5, 6, 7, 5}, 5), (std::vector<std::int32_t>{6, 7, 5, 6, 7}));
        // No earlier occurrence, or none of at least min_ngram tokens: nothing.
        QVERIFY(lookup({1, 2, 3}, 4).empty());
        QVERIFY(lookup({1, 2, 3, 1}, 4, 2, 4).empty());
        QVERIFY(lookup({1, 2, 1, 2}, 0).empty());
        QVERIFY(lookup({7}, 3).empty());
    }

    void acceptanceRuleByHand() {
        const Dist p = dist({{10, 0.5f}, {11, 0.3f}, {12, 0.2f}});
        const Dist q = dist({{10, 0.25f}, {11, 0.5f}, {12, 0.25f}});  // sorted by id
        // Proposed 11: p/q = 0.6, accepted iff u < 0.6.
        Verdict v = judge(p, q, 11, 0.59, 0.0);
        QVERIFY(v.accepted);
        QCOMPARE(v.token, 11);
        QCOMPARE(v.p_proposed, 0.3f);
        QCOMPARE(v.q_proposed, 0.5f);
        // Rejected: the residual max(0, p - q) = {10: 0.25, 11: 0, 12: 0}, so always 10.
        v = judge(p, q, 11, 0.61, 0.99);
        QVERIFY(!v.accepted);
        QCOMPARE(v.token, 10);
        QCOMPARE(v.p_token, 0.5f);
        // Proposed 10: p/q = 2, accepted whatever u is.
        QVERIFY(judge(p, q, 10, 0.999, 0.0).accepted);
        // One-hot q (prompt lookup): 11 accepted iff u < p(11) = 0.3; the residual is p without
        // 11, {10: 0.5, 12: 0.2}: u_resample * 0.7 below 0.5 gives 10, above gives 12.
        QVERIFY(judge(p, {}, 11, 0.29, 0.0).accepted);
        QCOMPARE(judge(p, {}, 11, 0.31, 0.70).token, 10);  // 0.49 < 0.5
        QCOMPARE(judge(p, {}, 11, 0.31, 0.72).token, 12);  // 0.504 > 0.5
        // A token outside p's support is never accepted.
        QVERIFY(!judge(p, {}, 99, 0.0, 0.0).accepted);
        // Greedy: p one-hot at the argmax. The argmax is accepted, anything else gives it.
        const Dist greedy = dist({{12, 1.0f}});
        QVERIFY(judge(greedy, {}, 12, 0.999999, 0.5).accepted);
        v = judge(greedy, {}, 10, 0.0, 0.5);
        QVERIFY(!v.accepted);
        QCOMPARE(v.token, 12);
    }

    // The rule's output is distributed as p whatever q is. Pearson's chi-square statistic
    // X^2 = sum over the 5 tokens of (observed - N p)^2 / (N p), N = 200000 draws (x from q,
    // then the rule), has 4 degrees of freedom when the output follows p; its 0.999 quantile
    // is 18.47, so a correct rule fails with probability 0.001 (and with the fixed seed, never).
    // A rule that forgot the residual (resampling from p instead) gives X^2 in the thousands.
    void acceptanceRuleReproducesTarget() {
        const Dist p = dist({{0, 0.40f}, {1, 0.25f}, {2, 0.20f}, {3, 0.10f}, {4, 0.05f}});
        const Dist q = dist({{0, 0.10f}, {1, 0.15f}, {2, 0.25f}, {3, 0.20f}, {4, 0.30f}});
        std::mt19937_64 rng(7);
        std::uniform_real_distribution<double> u(0.0, 1.0);
        std::discrete_distribution<int> from_q({0.10, 0.15, 0.25, 0.20, 0.30});
        constexpr int kDraws = 200000;
        std::array<double, 5> observed{};
        int rejections = 0;
        for (int i = 0; i < kDraws; ++i) {
            const int x = from_q(rng);
            const double ua = u(rng), ur = u(rng);
            const Verdict v = judge(p, q, x, ua, ur);
            observed[static_cast<std::size_t>(v.token)] += 1;
            if (!v.accepted) ++rejections;
        }
        double chi2 = 0.0;
        for (std::size_t t = 0; t < 5; ++t) {
            const double expected = kDraws * static_cast<double>(p[t].probability);
            chi2 += (observed[t] - expected) * (observed[t] - expected) / expected;
        }
        qInfo("acceptance rule: chi-square %.2f (df 4, critical 18.47 at 0.001), %d rejections",
              chi2, rejections);
        QVERIFY2(chi2 < 18.47, qPrintable(QString::number(chi2)));
        // Rejection probability is the total variation distance sum max(0, q - p)
        // = 0.05 + 0.10 + 0.25 = 0.40.
        QVERIFY(std::abs(rejections / double(kDraws) - 0.40) < 0.01);
    }

    void costModel() {
        StepCost cost(0.5, 0.2);
        QCOMPARE(cost.ratio(0), 1.0);
        QCOMPARE(cost.ratio(1), 1.7);  // 1 + 0.5 + 0.2
        QCOMPARE(cost.ratio(4), 2.3);
        cost.record(1, 10.0);
        cost.record(5, 25.0);
        QCOMPARE(cost.ratio(4), 2.5);  // measured: 25 / 10
        QCOMPARE(cost.ratio(2), 1.9);  // not measured: the model
        cost.record(5, 35.0);          // EMA with weight 0.2: 25 + 0.2 * 10 = 27
        QCOMPARE(cost.ratio(4), 2.7);
    }

    void adaptiveKByHand() {
        // E(k) at a = 0.5: 1, 1.5, 1.75, 1.875.
        QCOMPARE(AdaptiveK::expected_tokens(0.5, 0), 1.0);
        QCOMPARE(AdaptiveK::expected_tokens(0.5, 3), 1.875);
        // Linear cost 1 + 0.1 k (no fixed part): speedups at a = 0.5 are 1.364 (k=1), 1.458
        // (k=2), 1.442 (k=3), 1.339 (k=4): k = 2.
        AdaptiveKOptions o;
        o.initial_rate = 0.5;
        const StepCost linear(0.0, 0.1);
        AdaptiveK k(8, o);
        QCOMPARE(k.best_k(linear), 2);
        // With the fixed part 1.0 the best is 1.875 / 2.3 = 0.815 at k=3 < 1.03: off.
        QCOMPARE(k.best_k(StepCost(1.0, 0.1)), 0);
        // Rate updates (weight 0.15): 3 accepted of 3 from 0.6: 0.66, 0.711, 0.75435.
        o.initial_rate = 0.6;
        AdaptiveK all(8, o);
        all.record(3, 3);
        QVERIFY(std::abs(all.rate() - 0.75435) < 1e-9);
        // 1 accepted then a rejection: 0.66, then 0.66 * 0.85 = 0.561.
        AdaptiveK some(8, o);
        some.record(2, 1);
        QVERIFY(std::abs(some.rate() - 0.561) < 1e-9);
        // max_k bounds the answer: at a = 0.95 and no cost everything pays, k = max_k.
        o.initial_rate = 0.95;
        QCOMPARE(AdaptiveK(3, o).best_k(StepCost(0.0, 0.0)), 3);
    }

    // a = 0 (nothing pays), probes of k = 2 after 4 plain steps.
    static AdaptiveKOptions switched_off() {
        AdaptiveKOptions o;
        o.initial_rate = 0.0;
        o.probe_interval = 4;
        o.probe_k = 2;
        return o;
    }

    void adaptiveKSwitchesOffAndProbes() {
        AdaptiveK k(8, switched_off());
        const StepCost cost(0.5, 0.2);
        // a = 0: nothing pays; every 4th step probes with k = 2.
        std::vector<int> ks;
        for (int i = 0; i < 8; ++i) ks.push_back(k.next_k(cost));
        QCOMPARE(ks, (std::vector<int>{0, 0, 0, 2, 0, 0, 0, 2}));
        // Probes that are accepted raise a until speculation pays again: after 6 acceptances
        // a = 1 - 0.85^6 = 0.623; E(k)/(1.5 + 0.2k) peaks at k = 3 (E(3) = 2.252, / 2.1 = 1.073),
        // above 1.03.
        k.record(6, 6);
        QVERIFY(std::abs(k.rate() - (1 - std::pow(0.85, 6))) < 1e-9);
        QCOMPARE(k.next_k(cost), 3);
    }

    void adaptiveKBacksOffWhileProbesFail() {
        // a = 0 and every probe rejected: the waits between probes double, 4, 8, 16, then stay
        // at max_probe_interval 16; a probe that accepts a token brings the wait back to 4.
        AdaptiveKOptions o = switched_off();
        o.max_probe_interval = 16;
        AdaptiveK k(8, o);
        const StepCost cost(0.5, 0.2);
        auto steps_to_next_probe = [&] {
            for (int i = 1; i <= 100; ++i) {
                if (k.next_k(cost) > 0) return i;
            }
            return -1;
        };
        std::vector<int> waits;
        for (int p = 0; p < 5; ++p) {
            waits.push_back(steps_to_next_probe());
            k.record(1, 0);  // the first proposal rejected
        }
        QCOMPARE(waits, (std::vector<int>{4, 8, 16, 16, 16}));
        QCOMPARE(steps_to_next_probe(), 16);
        k.record(2, 1);  // one accepted, one rejected: a = 0.15 * 0.85 = 0.1275, still off
        QVERIFY(std::abs(k.rate() - 0.1275) < 1e-9);
        QCOMPARE(k.best_k(cost), 0);  // E(1) / ratio(1) = 1.1275 / 1.7
        QCOMPARE(steps_to_next_probe(), 4);
        k.record(1, 0);  // that probe rejected: the wait doubles again
        QCOMPARE(steps_to_next_probe(), 8);
        // A probe for which the proposer had nothing (no record) leaves the wait alone, and a
        // verification recorded after a plain step (not a probe's) does not double it.
        QCOMPARE(steps_to_next_probe(), 8);
        QCOMPARE(k.next_k(cost), 0);
        k.record(1, 0);
        QCOMPARE(steps_to_next_probe(), 7);  // 8 plain steps, one of them already taken
    }

    void adaptiveKRampsUp() {
        // At a = 0.95 with free verification every k pays and best_k is max_k = 8, but a new
        // sequence earns it: k <= 2 before any verification, then 4, 6, 8 (ramp 2).
        AdaptiveKOptions o;
        o.initial_rate = 0.95;
        AdaptiveK k(8, o);
        const StepCost free(0.0, 0.0);
        QCOMPARE(k.best_k(free), 8);
        std::vector<int> ks;
        for (int i = 0; i < 5; ++i) {
            ks.push_back(k.next_k(free));
            k.record(ks.back(), ks.back());
        }
        QCOMPARE(ks, (std::vector<int>{2, 4, 6, 8, 8}));
    }
};

QTEST_GUILESS_MAIN(TestSpeculation)
#include "test_speculation.moc"
