// The GQA split-K decode attention's index math (kernels/ops/attention_gqa_plan.h) and a CPU
// emulation of its two kernels, for machines without a GPU. The CUDA self-test
// (tokenscope-cli selftest --device cuda) checks the kernels themselves on a GPU; this test
// checks, before any GPU run, that
//  - the shares of every (context, window, split count) cut the keys [first, p] into
//    consecutive, non-overlapping ranges that cover every key exactly once, every share but the
//    last non-empty one a whole number of 32-key tiles, share 0 never empty;
//  - the split count fills an H200 (132 SMs) for the 1B model's 8 KV heads and stays in range;
//  - the algorithm the kernels run (per share: tiles of 32 keys, per head an online softmax with
//    a rescale factor per tile, accumulators rescaled per tile; then the combine with one weight
//    per share, empty shares skipped), emulated in float with the kernels' operation order,
//    matches a float64 softmax attention within the self-test's f32 tolerance (1e-5 relative)
//    for GQA ratios 1, 4, 8, contexts 1, 31, 33, 77, 300 and 4096, windows 0 and 20, and split
//    counts 1, 3, the H200 choice and the maximum.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ops/attention_gqa_plan.h"

namespace gqa = tokenscope::cuda::ops::gqa;

namespace {

constexpr int kH200Sms = 132;

struct Problem {
    int group = 1, head_dim = 64, context = 1, window = 0;
    std::vector<float> q;     // [group][head_dim]
    std::vector<float> k, v;  // [context][head_dim]
};

Problem make_problem(int group, int head_dim, int context, int window, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    Problem pr{group, head_dim, context, window, {}, {}, {}};
    pr.q.resize(static_cast<std::size_t>(group) * head_dim);
    pr.k.resize(static_cast<std::size_t>(context) * head_dim);
    pr.v.resize(pr.k.size());
    for (float& x : pr.q) x = u(rng);
    for (float& x : pr.k) x = 2.0f * u(rng);
    for (float& x : pr.v) x = 2.0f * u(rng);
    return pr;
}

std::vector<double> reference(const Problem& pr, float scale) {
    const int p = pr.context - 1, D = pr.head_dim;
    const int first = gqa::first_key(p, pr.window);
    std::vector<double> out(static_cast<std::size_t>(pr.group) * D, 0.0);
    for (int g = 0; g < pr.group; ++g) {
        std::vector<double> s;
        for (int j = first; j <= p; ++j) {
            double dot = 0;
            for (int d = 0; d < D; ++d) dot += static_cast<double>(pr.q[g * D + d]) * pr.k[j * D + d];
            s.push_back(dot * scale);
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int j = first; j <= p; ++j)
            for (int d = 0; d < D; ++d) out[g * D + d] += s[j - first] / sum * pr.v[j * D + d];
    }
    return out;
}

struct Partial {
    std::vector<float> acc;  // [group][D]
    std::vector<float> m, l;
};

// One share block of attention_gqa_kernel, step by step: tiles, the per-warp score and
// softmax update (a warp's 32 lanes = the tile's keys), the accumulate with corr.
Partial emulate_share(const Problem& pr, float scale, int splits, int s) {
    const int D = pr.head_dim, G = pr.group;
    Partial part{std::vector<float>(static_cast<std::size_t>(G) * D, 0.0f), std::vector<float>(G, -INFINITY),
                 std::vector<float>(G, 0.0f)};
    const gqa::KeyRange r = gqa::share_range(pr.context - 1, pr.window, splits, s);
    if (r.begin > r.end) return part;
    std::vector<float> p_s(static_cast<std::size_t>(G) * gqa::kTile), corr(G);
    for (int tb = r.begin; tb <= r.end; tb += gqa::kTile) {
        for (int g = 0; g < G; ++g) {
            float score[gqa::kTile];
            float tile_max = -INFINITY;
            for (int lane = 0; lane < gqa::kTile; ++lane) {
                const bool valid = tb + lane <= r.end;
                float dot = 0.0f;
                for (int d = 0; d < D; ++d) dot += pr.q[g * D + d] * (valid ? pr.k[(tb + lane) * D + d] : 0.0f);
                score[lane] = valid ? dot * scale : -INFINITY;
                tile_max = std::max(tile_max, score[lane]);
            }
            const float m_new = std::max(part.m[g], tile_max);
            if (!std::isfinite(m_new)) qFatal("a tile whose first key is not valid");
            corr[g] = part.m[g] == -INFINITY ? 0.0f : std::exp(part.m[g] - m_new);
            float sum = 0.0f;
            for (int lane = 0; lane < gqa::kTile; ++lane) {
                const bool valid = tb + lane <= r.end;
                p_s[g * gqa::kTile + lane] = valid ? std::exp(score[lane] - m_new) : 0.0f;
                sum += p_s[g * gqa::kTile + lane];
            }
            part.l[g] = part.l[g] * corr[g] + sum;
            part.m[g] = m_new;
        }
        const int n = std::min(gqa::kTile, r.end - tb + 1);
        for (int i = 0; i < G * D; ++i) {
            const int g = i / D, d = i % D;
            float sum = 0.0f;
            for (int j = 0; j < n; ++j) sum += p_s[g * gqa::kTile + j] * pr.v[(tb + j) * D + d];
            part.acc[i] = part.acc[i] * corr[g] + sum;
        }
    }
    return part;
}

std::vector<float> emulate(const Problem& pr, float scale, int splits) {
    const int D = pr.head_dim, G = pr.group;
    std::vector<Partial> parts;
    for (int s = 0; s < splits; ++s) parts.push_back(emulate_share(pr, scale, splits, s));
    std::vector<float> out(static_cast<std::size_t>(G) * D);
    for (int g = 0; g < G; ++g) {  // attention_combine_kernel for head g
        float m_all = -INFINITY;
        for (const Partial& p : parts) m_all = std::max(m_all, p.m[g]);
        std::vector<float> w(splits);
        float l_all = 0.0f;
        for (int s = 0; s < splits; ++s) {
            w[s] = parts[s].m[g] == -INFINITY ? 0.0f : std::exp(parts[s].m[g] - m_all);
            if (parts[s].m[g] != -INFINITY) l_all += w[s] * parts[s].l[g];
        }
        for (int d = 0; d < D; ++d) {
            float sum = 0.0f;
            for (int s = 0; s < splits; ++s)
                if (w[s] != 0.0f) sum += w[s] * parts[s].acc[g * D + d];
            out[g * D + d] = sum / l_all;
        }
    }
    return out;
}

double rel_error(const std::vector<float>& got, const std::vector<double>& want) {
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        diff += (got[i] - want[i]) * (got[i] - want[i]);
        norm += want[i] * want[i];
    }
    return std::isnan(diff) ? INFINITY : std::sqrt(diff / norm);
}

}  // namespace

class TestAttentionGqaPlan : public QObject {
    Q_OBJECT
  private slots:
    void sharesCoverEveryKeyOnce() {
        for (int p = 0; p < 700; p += (p < 80 ? 1 : 37)) {
            for (const int window : {0, 1, 20, 64, 4096}) {
                for (const int splits : {1, 2, 3, 7, 16, 33, 66, 127, 128}) {
                    const int first = gqa::first_key(p, window);
                    int next = first;  // the next key a share must start at
                    bool ended = false;
                    for (int s = 0; s < splits; ++s) {
                        const gqa::KeyRange r = gqa::share_range(p, window, splits, s);
                        if (r.begin > r.end) {
                            QVERIFY2(s > 0, "share 0 holds the first key");
                            ended = true;
                            continue;
                        }
                        QVERIFY2(!ended, "non-empty shares form a prefix");
                        QCOMPARE(r.begin, next);
                        QVERIFY((r.begin - first) % gqa::kTile == 0);
                        if (r.end != p) QVERIFY((r.end - r.begin + 1) % gqa::kTile == 0);
                        next = r.end + 1;
                    }
                    QCOMPARE(next, p + 1);
                }
            }
        }
    }

    void splitCountFillsTheGpu() {
        // H200, 1B model (8 KV heads), batch 1, 4096-token cache: 132 x 4 / 8 = 66 shares, 528 blocks.
        QCOMPARE(gqa::splits_for(kH200Sms, 8, 1, 4096), 66);
        QVERIFY(gqa::splits_for(kH200Sms, 8, 1, 4096) * 8 >= kH200Sms * gqa::kBlocksPerSm);
        // A 512-token cache has 16 tiles: no share below one tile.
        QCOMPARE(gqa::splits_for(kH200Sms, 8, 1, 512), 16);
        // Gemma 3 270M (1 KV head): capped at kMaxSplits.
        QCOMPARE(gqa::splits_for(kH200Sms, 1, 1, 32768), gqa::kMaxSplits);
        // 64 sequences x 8 KV heads already fill the GPU: 2 shares.
        QCOMPARE(gqa::splits_for(kH200Sms, 8, 64, 4096), 2);
        QCOMPARE(gqa::splits_for(kH200Sms, 8, 1, 1), 1);
        QCOMPARE(gqa::splits_for(0, 0, 0, 0), 1);
        // Shared memory: the 1B shape and Gemma's head_dim 256 stay under 48 KiB.
        QCOMPARE(gqa::shared_floats(4, 64), std::size_t{2732});  // 10.7 KiB: the 1B model
        QVERIFY(gqa::shared_floats(4, 64) * 4 < 48 * 1024);
        QVERIFY(gqa::shared_floats(8, 64) * 4 < 48 * 1024);
        QVERIFY(gqa::shared_floats(4, 256) * 4 < 48 * 1024);
    }

    void emulationMatchesFloat64() {
        std::mt19937 rng(7);
        const float scale = 1.0f / 8.0f;
        double worst = 0;
        for (const int group : {1, 4, 8}) {
            for (const int context : {1, 31, 33, 77, 300, 4096}) {
                for (const int window : {0, 20}) {
                    const Problem pr = make_problem(group, 64, context, window, rng);
                    const std::vector<double> want = reference(pr, scale);
                    for (const int splits : {1, 3, gqa::splits_for(kH200Sms, 8, 1, 4096), gqa::kMaxSplits}) {
                        const double err = rel_error(emulate(pr, scale, splits), want);
                        worst = std::max(worst, err);
                        if (err > 1e-5) {
                            qWarning("group %d context %d window %d splits %d: %g", group, context, window, splits, err);
                        }
                        QVERIFY(err <= 1e-5);
                    }
                }
            }
        }
        qInfo("worst relative error %g (tolerance 1e-5)", worst);
    }
};

QTEST_GUILESS_MAIN(TestAttentionGqaPlan)
#include "test_attention_gqa_plan.moc"
