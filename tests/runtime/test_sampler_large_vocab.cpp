// The sampler's fast paths at Gemma's vocabulary size (262144 tokens), against references
// written here that take no shortcut: float64 softmax over the whole row, a full std::sort for
// every ranking, the chain's stages applied one by one in double.
//
// Rows have the cases the fast paths must get right: ties (logits on a 1/8 grid, and a tie for
// the maximum between a low and a high id), masked tokens (-infinity), a length that is not a
// multiple of the SIMD width or of the block size, and rows whose maximum rises block after
// block (the online-softmax rescaling).
//
// Tolerances: ids, ranks, supports and shaped logits must match exactly (they involve no
// rounding the reference does differently). The normaliser is compared with relative 2e-7 on
// random rows and 4e-7 on rows of one repeated value (a few float ulps; the AVX2 kernel's
// polynomial exp and per-block float sums measure 4e-8 and 2e-7 there), probabilities with
// relative 1e-5 and log-probabilities with absolute 1e-5 (float results against double ones).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/logit_kernels.h"
#include "runtime/sampler.h"
#include "runtime/sampling_stages.h"
#include "tensor/matmul.h"

Q_DECLARE_METATYPE(tokenscope::runtime::SamplingParams)
Q_DECLARE_METATYPE(std::vector<float>)

using namespace tokenscope;
using runtime::Sampler;
using runtime::SamplingParams;
namespace sampling = runtime::sampling;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr std::size_t kGemmaVocab = 262144;

// Normal logits rounded to a 1/8 grid (many exact ties), about 1 % masked, and the maximum
// repeated at a high id so that the argmax tie has two candidates far apart.
std::vector<float> tied_row(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::uniform_int_distribution<int> percent(0, 99);
    std::vector<float> row(n);
    for (auto& l : row) l = percent(gen) == 0 ? -kInf : std::round(normal(gen) * 8.0f) / 8.0f;
    const auto top = std::max_element(row.begin(), row.end());
    row[n - 3] = *top;
    return row;
}

// Every id with a finite logit, best first (higher logit; on a tie, lower id).
std::vector<std::int32_t> full_ranking(const std::vector<float>& row) {
    std::vector<std::int32_t> order;
    for (std::size_t i = 0; i < row.size(); ++i)
        if (row[i] > -kInf) order.push_back(static_cast<std::int32_t>(i));
    std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    return order;
}

struct Reference64 {
    double max = 0.0;
    double sum = 0.0;  // sum_i exp(logit_i - max)
    double probability(float logit) const { return std::exp(logit - max) / sum; }
    double logprob(float logit) const { return (logit - max) - std::log(sum); }
};

Reference64 softmax64(const std::vector<float>& row) {
    Reference64 r;
    r.max = *std::max_element(row.begin(), row.end());
    for (const float l : row) r.sum += std::exp(static_cast<double>(l) - r.max);
    return r;
}

bool close(double actual, double expected, double relative) {
    return std::abs(actual - expected) <= relative * std::abs(expected);
}

// The sampler's chain written out naively: penalties on a copy, a full ranking of the shaped
// row, top-k as a prefix of it, top-p and min-p on double probabilities, temperature, then the
// draw with the sampler's own uniform number (the top 53 bits of one mt19937_64 output).
struct ChainResult {
    std::int32_t token = -1;
    std::vector<std::int32_t> support;  // ranking order
    std::vector<float> shaped;          // the logits the final softmax saw, by rank
    std::vector<double> probabilities;  // by rank
};

ChainResult reference_chain(const std::vector<float>& logits,
                            const std::vector<std::int32_t>& history, const SamplingParams& p,
                            std::mt19937_64& rng) {
    std::vector<float> row = logits;
    if (p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
        const std::size_t from =
            history.size() - std::min(history.size(), static_cast<std::size_t>(p.penalty_window));
        std::vector<int> count(row.size(), 0);
        for (std::size_t i = from; i < history.size(); ++i)
            ++count[static_cast<std::size_t>(history[i])];
        for (std::size_t id = 0; id < row.size(); ++id) {
            if (count[id] == 0) continue;
            row[id] = row[id] > 0.0f ? row[id] / p.repeat_penalty : row[id] * p.repeat_penalty;
            row[id] -= static_cast<float>(count[id]) * p.frequency_penalty + p.presence_penalty;
        }
    }
    const auto ranking = full_ranking(row);
    ChainResult out;
    if (p.temperature == 0.0f) {
        out.token = ranking.front();
        out.support = {out.token};
        out.shaped = {row[static_cast<std::size_t>(out.token)]};
        out.probabilities = {1.0};
        return out;
    }
    // This reference covers 0 < top_k < vocabulary (the cut the fast path serves).
    std::vector<std::int32_t> kept(ranking.begin(), ranking.begin() + p.top_k);
    const auto probabilities_of = [&](const std::vector<std::int32_t>& ids, double t) {
        std::vector<double> probs;
        const double max = row[static_cast<std::size_t>(ids.front())] / t;
        double sum = 0.0;
        for (const auto id : ids) sum += std::exp(row[static_cast<std::size_t>(id)] / t - max);
        for (const auto id : ids)
            probs.push_back(std::exp(row[static_cast<std::size_t>(id)] / t - max) / sum);
        return probs;
    };
    if (p.top_p < 1.0f) {
        const auto probs = probabilities_of(kept, 1.0);
        double cumulative = 0.0;
        std::size_t n = 0;
        while (n < kept.size()) {
            cumulative += probs[n++];
            if (cumulative >= p.top_p) break;
        }
        kept.resize(std::max<std::size_t>(n, 1));
    }
    if (p.min_p > 0.0f) {
        const double threshold =
            static_cast<double>(row[static_cast<std::size_t>(kept.front())]) + std::log(p.min_p);
        std::erase_if(kept, [&](std::int32_t id) {
            return static_cast<double>(row[static_cast<std::size_t>(id)]) < threshold;
        });
    }
    out.support = kept;
    for (const auto id : kept)
        out.shaped.push_back(row[static_cast<std::size_t>(id)] / p.temperature);
    out.probabilities = probabilities_of(kept, p.temperature);
    const double uniform = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    double cumulative = 0.0;
    out.token = kept.back();
    for (std::size_t i = 0; i < kept.size(); ++i) {
        cumulative += out.probabilities[i];
        if (cumulative > uniform) {
            out.token = kept[i];
            break;
        }
    }
    return out;
}

}  // namespace

class TestSamplerLargeVocab : public QObject {
    Q_OBJECT

  private slots:
    // --- the row kernels -------------------------------------------------------------------

    void kernelsMatchTheFloat64Reference_data() {
        QTest::addColumn<std::vector<float>>("row");
        QTest::newRow("262144, ties, masked") << tied_row(kGemmaVocab, 1);
        QTest::newRow("262157 (partial block and vector)") << tied_row(kGemmaVocab + 13, 2);
        // Every block raises the maximum: the running sum is rescaled 1025 times.
        std::vector<float> rising(kGemmaVocab + 5);
        for (std::size_t i = 0; i < rising.size(); ++i) rising[i] = static_cast<float>(i) * 1e-4f;
        QTest::newRow("rising") << rising;
        std::vector<float> falling(rising.rbegin(), rising.rend());
        QTest::newRow("falling") << falling;
        // Far below the maximum: exps that underflow float (exactly 0 in the AVX2 kernel).
        std::mt19937_64 gen(3);
        std::uniform_real_distribution<float> wide(-200.0f, 0.0f);
        std::vector<float> spread(100003);
        for (auto& l : spread) l = wide(gen);
        QTest::newRow("[-200, 0]") << spread;
        std::vector<float> one_finite(5000, -kInf);
        one_finite[4321] = -7.5f;
        QTest::newRow("one finite") << one_finite;
        for (const std::size_t n : {1, 7, 8, 9, 255, 256, 257}) {
            QTest::newRow(qPrintable(QString("length %1").arg(n))) << tied_row(n + 3, 10 + n);
        }
    }

    void kernelsMatchTheFloat64Reference() {
        QFETCH(std::vector<float>, row);
        const auto reference = softmax64(row);
        std::vector<float> expected_blocks(sampling::logit_blocks(row.size()), -kInf);
        for (std::size_t i = 0; i < row.size(); ++i) {
            float& block = expected_blocks[i / sampling::kLogitBlock];
            block = std::max(block, row[i]);
        }
        for (const auto* kernels :
             {&sampling::portable_logit_kernels(), &sampling::best_logit_kernels()}) {
            const QString name = QString::fromLatin1(kernels->name);
            std::vector<float> blocks(expected_blocks.size(), 123.0f);
            const auto scan = kernels->scan(row.data(), row.size(), blocks.data());
            QVERIFY2(scan.clean, qPrintable(name));
            QCOMPARE(static_cast<double>(scan.max), reference.max);
            QCOMPARE(blocks, expected_blocks);

            std::fill(blocks.begin(), blocks.end(), 123.0f);
            const auto soft = kernels->scan_softmax(row.data(), row.size(), blocks.data());
            QVERIFY2(soft.clean, qPrintable(name));
            QCOMPARE(static_cast<double>(soft.max), reference.max);
            QCOMPARE(blocks, expected_blocks);
            qInfo("%s: relative error of the normaliser %.2e", qPrintable(name),
                  std::abs(soft.sum_exp - reference.sum) / reference.sum);
            QVERIFY2(close(soft.sum_exp, reference.sum, 2e-7),
                     qPrintable(QString("%1: %2 vs %3")
                                    .arg(name)
                                    .arg(soft.sum_exp, 0, 'g', 17)
                                    .arg(reference.sum, 0, 'g', 17)));
        }
    }

    void kernelsExpIsAccurateOverItsRange() {
        // One 0 (the maximum) and 4095 copies of x: the normaliser is 1 + 4095 exp(x), so the
        // exp's error is not averaged away as in a random row. x sweeps [-87, 0] (below
        // ln(FLT_MIN) the vectorised exp gives 0, which next to the 1 is no error at all).
        double worst = 0.0;
        for (int step = 0; step <= 870; ++step) {
            const float x = -0.1f * static_cast<float>(step) - 0.0123f;
            std::vector<float> row(4096, x);
            row[1000] = 0.0f;
            const double expected = 1.0 + 4095.0 * std::exp(static_cast<double>(x));
            for (const auto* kernels :
                 {&sampling::portable_logit_kernels(), &sampling::best_logit_kernels()}) {
                std::vector<float> blocks(sampling::logit_blocks(row.size()));
                const double sum =
                    kernels->scan_softmax(row.data(), row.size(), blocks.data()).sum_exp;
                worst = std::max(worst, std::abs(sum - expected) / expected);
                QVERIFY2(close(sum, expected, 4e-7), qPrintable(QString("%1 at x = %2: %3 vs %4")
                                                                    .arg(kernels->name)
                                                                    .arg(x)
                                                                    .arg(sum, 0, 'g', 17)
                                                                    .arg(expected, 0, 'g', 17)));
            }
        }
        qInfo("worst relative error: %.2e", worst);
    }

    void kernelsFlagNaNAndPlusInfinity() {
        for (const auto* kernels :
             {&sampling::portable_logit_kernels(), &sampling::best_logit_kernels()}) {
            // At the front, in the middle of a block, and in the padded tail of the last one.
            for (const std::size_t at : {std::size_t{0}, std::size_t{1000}, std::size_t{2050}}) {
                for (const float bad : {std::nanf(""), kInf}) {
                    std::vector<float> row(2053, 0.5f);
                    row[at] = bad;
                    std::vector<float> blocks(sampling::logit_blocks(row.size()));
                    QVERIFY(!kernels->scan(row.data(), row.size(), blocks.data()).clean);
                    QVERIFY(!kernels->scan_softmax(row.data(), row.size(), blocks.data()).clean);
                }
            }
            // All masked is clean; the maximum says it.
            std::vector<float> masked(300, -kInf);
            std::vector<float> blocks(sampling::logit_blocks(masked.size()));
            const auto scan = kernels->scan(masked.data(), masked.size(), blocks.data());
            QVERIFY(scan.clean);
            QCOMPARE(scan.max, -kInf);
        }
    }

    // --- selection -------------------------------------------------------------------------

    void bestNMatchesAFullSort() {
        const auto row = tied_row(kGemmaVocab + 13, 4);
        const auto ranking = full_ranking(row);
        std::vector<float> blocks(sampling::logit_blocks(row.size()));
        sampling::best_logit_kernels().scan(row.data(), row.size(), blocks.data());
        // Fewer and more tokens than there are blocks (1025), and the argmax tie.
        for (const std::size_t n : {1, 2, 20, 40, 1024, 1025, 1026, 5000}) {
            const auto best = sampling::best_n(row, blocks, n);
            QCOMPARE(best.size(), n);
            for (std::size_t i = 0; i < n; ++i) {
                QCOMPARE(best[i].id, ranking[i]);
                QCOMPARE(best[i].logit, row[static_cast<std::size_t>(ranking[i])]);
            }
        }
        QVERIFY(ranking[0] < ranking[1] && row[ranking[0]] == row[ranking[1]]);
        QVERIFY(sampling::best_n(row, blocks, 0).empty());
    }

    void bestNOnFlatAndMostlyMaskedRows() {
        // Every logit equal: every block maximum ties with the bound; the lowest ids win.
        std::vector<float> flat(10000, 0.25f);
        std::vector<float> blocks(sampling::logit_blocks(flat.size()));
        sampling::best_logit_kernels().scan(flat.data(), flat.size(), blocks.data());
        const auto best = sampling::best_n(flat, blocks, 40);
        for (std::size_t i = 0; i < 40; ++i) QCOMPARE(best[i].id, static_cast<std::int32_t>(i));

        // Fewer finite logits than asked for: all of them, masked ones never.
        std::vector<float> masked(10000, -kInf);
        for (const int id : {9000, 17, 5000}) masked[static_cast<std::size_t>(id)] = 1.0f;
        sampling::best_logit_kernels().scan(masked.data(), masked.size(), blocks.data());
        const auto few = sampling::best_n(masked, blocks, 40);
        QCOMPARE(few.size(), std::size_t{3});
        QCOMPARE(few[0].id, 17);
        QCOMPARE(few[1].id, 5000);
        QCOMPARE(few[2].id, 9000);
    }

    // --- the whole sampler -----------------------------------------------------------------

    void samplerMatchesTheNaiveChain_data() {
        QTest::addColumn<SamplingParams>("params");
        SamplingParams app;  // the desktop app's defaults, with its 20 inspector candidates
        app.n_candidates = 20;
        QTest::newRow("app defaults") << app;
        SamplingParams greedy = app;
        greedy.temperature = 0.0f;
        QTest::newRow("greedy") << greedy;
        SamplingParams penalised = app;
        penalised.repeat_penalty = 1.3f;
        penalised.frequency_penalty = 0.5f;
        penalised.presence_penalty = -0.75f;  // negative: can lift a token into the top-k
        QTest::newRow("penalties") << penalised;
        SamplingParams greedy_penalised = penalised;
        greedy_penalised.temperature = 0.0f;
        QTest::newRow("greedy, penalties") << greedy_penalised;
        SamplingParams wide = app;
        wide.top_k = 3000;  // more than the 1025 blocks
        wide.top_p = 0.999f;
        wide.min_p = 0.0f;
        wide.temperature = 1.3f;
        wide.n_candidates = 0;
        QTest::newRow("top-k 3000, no candidates") << wide;
    }

    void samplerMatchesTheNaiveChain() {
        QFETCH(SamplingParams, params);
        params.seed = 77;
        Sampler sampler(params);
        std::mt19937_64 reference_rng(params.seed);
        std::vector<std::int32_t> history;
        for (std::uint64_t step = 0; step < 6; ++step) {
            const auto row = tied_row(kGemmaVocab + 13, 100 + step);
            // The history holds the row's best tokens, so that the penalties move the ranking.
            const auto ranking = full_ranking(row);
            history.assign(ranking.begin(), ranking.begin() + 30);
            history.push_back(ranking[0]);

            const auto r = sampler.sample(row, history);
            const auto expected = reference_chain(row, history, params, reference_rng);
            const auto model = softmax64(row);

            QCOMPARE(r.token, expected.token);
            QCOMPARE(r.support_size, static_cast<std::int32_t>(expected.support.size()));
            const auto chosen = static_cast<std::size_t>(r.token);
            QVERIFY(std::abs(r.model_logprob - model.logprob(row[chosen])) <= 1e-5);
            QVERIFY(close(r.model_probability, model.probability(row[chosen]), 1e-5));

            const auto shown = static_cast<std::size_t>(params.n_candidates);
            QCOMPARE(r.before.size(), std::min(shown, ranking.size()));
            for (std::size_t i = 0; i < r.before.size(); ++i) {
                const auto id = static_cast<std::size_t>(ranking[i]);
                QCOMPARE(r.before[i].id, ranking[i]);
                QCOMPARE(r.before[i].logit, row[id]);
                QVERIFY2(close(r.before[i].probability, model.probability(row[id]), 1e-5),
                         qPrintable(QString("before rank %1").arg(i)));
            }
            QCOMPARE(r.after.size(), std::min(shown, expected.support.size()));
            for (std::size_t i = 0; i < r.after.size(); ++i) {
                QCOMPARE(r.after[i].id, expected.support[i]);
                QCOMPARE(r.after[i].logit, expected.shaped[i]);
                QVERIFY2(close(r.after[i].probability, expected.probabilities[i], 1e-5),
                         qPrintable(QString("after rank %1").arg(i)));
            }
        }
    }

    void portableAndVectorisedKernelsGiveTheSameSamples() {
        // The same seed with the kernels forced to the portable table (TOKENSCOPE_SIMD=scalar
        // does the same) and with the best one: the normaliser differs by float rounding only,
        // and the draw, over the top-k candidates, never sees it. On a CPU without AVX2 both
        // runs use the portable table.
        SamplingParams p;
        p.n_candidates = 20;
        p.seed = 5;
        const auto run = [&] {
            Sampler sampler(p);
            std::vector<runtime::SampleResult> results;
            for (std::uint64_t i = 0; i < 40; ++i)
                results.push_back(sampler.sample(tied_row(kGemmaVocab, 200 + i % 4), {}));
            return results;
        };
        const auto detected = tensor::active_simd_level();
        tensor::set_simd_level(tensor::SimdLevel::Scalar);
        QCOMPARE(QString(sampling::best_logit_kernels().name), QString("portable"));
        const auto portable = run();
        tensor::set_simd_level(detected);
        qInfo("best logit kernels here: %s", sampling::best_logit_kernels().name);
        const auto best = run();
        for (std::size_t i = 0; i < best.size(); ++i) {
            QCOMPARE(best[i].token, portable[i].token);
            QCOMPARE(best[i].probability, portable[i].probability);
            QVERIFY(std::abs(best[i].model_logprob - portable[i].model_logprob) <= 1e-5);
            QCOMPARE(best[i].before.size(), portable[i].before.size());
            for (std::size_t k = 0; k < best[i].before.size(); ++k) {
                QCOMPARE(best[i].before[k].id, portable[i].before[k].id);
                QVERIFY(
                    close(best[i].before[k].probability, portable[i].before[k].probability, 2e-6));
            }
        }
    }
};

QTEST_APPLESS_MAIN(TestSamplerLargeVocab)
#include "test_sampler_large_vocab.moc"
