// Blocked CPU attention (engine/runtime/cpu_attention) against a naive float64 attention
// written here: GQA groups of 1, 2 and 4, sliding window or none, several sequences with
// different start positions in one batch, decode (one token) and prefill (37 tokens), every
// KV element type, portable and AVX2 kernels. Also: the attention capture receives each
// query's probability row, and a query gives the same output bit for bit alone (decode) as
// inside a block (prefill), which test_forward's decode-vs-prefill checks rely on.
//
// The reference reads K and V back from the cache (read_k / read_v), so the comparison
// measures the arithmetic only, not the F16 / Q8 rounding of the stored values (tests/kv
// covers that).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "inspect/attention_capture.h"
#include "kv/kv_storage.h"
#include "runtime/cpu_attention.h"
#include "runtime/thread_pool.h"
#include "tensor/matmul.h"

Q_DECLARE_METATYPE(tokenscope::kv::ElementType)
Q_DECLARE_METATYPE(tokenscope::kv::KernelChoice)
Q_DECLARE_METATYPE(tokenscope::tensor::SimdLevel)

using namespace tokenscope;
using kv::ElementType;
using kv::KernelChoice;

namespace {

constexpr double kUnit = 0x1p-24;  // float unit roundoff

class Random {
  public:
    explicit Random(std::uint32_t seed) : gen_(seed) {}
    float uniform(double lo, double hi) {
        return static_cast<float>(lo +
                                  (hi - lo) * (static_cast<double>(gen_() >> 8) + 0.5) * 0x1p-24);
    }
    std::uint32_t below(std::uint32_t n) { return gen_() % n; }

  private:
    std::mt19937 gen_;
};

struct Sequence {
    std::int64_t start_pos;  // tokens before this batch, already in the cache
    std::int64_t tokens;     // query tokens in this batch
};

// A batch of sequences over a cache whose blocks are handed out in shuffled order, as the
// paged cache does once sequences come and go.
struct Fixture {
    static constexpr int kLayers = 2;
    static constexpr int kLayer = 1;  // the layer under test; layer 0 holds other data
    static constexpr int kBlockSize = 4;

    runtime::AttentionLayer layer;
    kv::KvStorage storage;
    std::vector<std::vector<std::int64_t>> slot_lists;  // per sequence, positions [0, end)
    std::vector<runtime::AttentionChunk> chunks;
    std::vector<float> q;  // rows x heads x head_dim
    std::int64_t rows = 0;
    std::int64_t longest = 0;

    Fixture(const std::vector<Sequence>& seqs, int kv_heads, int group, int head_dim,
            std::int64_t window, ElementType type, KernelChoice kernels)
        : layer{kLayer,
                kv_heads * group,
                kv_heads,
                head_dim,
                static_cast<float>(1.0 / std::sqrt(head_dim)),
                window},
          storage(kv::CacheShape{.layers = kLayers,
                                 .kv_heads = kv_heads,
                                 .head_dim = head_dim,
                                 .num_blocks = 64,
                                 .block_size = kBlockSize,
                                 .type = type},
                  kernels) {
        Random rng(static_cast<std::uint32_t>(head_dim * 131 + group * 7 + window));
        std::vector<std::int64_t> blocks(64);
        for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<std::int64_t>(i);
        for (std::size_t i = blocks.size() - 1; i > 0; --i) {
            std::swap(blocks[i], blocks[rng.below(static_cast<std::uint32_t>(i + 1))]);
        }
        std::size_t next_block = 0;
        const auto width = static_cast<std::size_t>(kv_heads * head_dim);
        std::vector<float> k(width), v(width);
        for (const Sequence& s : seqs) {
            const std::int64_t end = s.start_pos + s.tokens;
            auto& sl = slot_lists.emplace_back();
            for (std::int64_t p = 0; p < end; ++p) {
                if (p % kBlockSize == 0) ++next_block;
                sl.push_back(blocks[next_block - 1] * kBlockSize + p % kBlockSize);
                for (int l = 0; l < kLayers; ++l) {
                    // Keys of different sizes so that the softmax rows are far from uniform;
                    // values with an offset so that the outputs are not near zero.
                    const double amp = 0.5 + 2.5 * (p % 5) / 4.0;
                    for (auto& x : k) x = rng.uniform(-amp, amp);
                    for (auto& x : v) x = rng.uniform(-1.0, 3.0);
                    storage.write(l, sl.back(), k.data(), v.data());
                }
            }
            longest = std::max(longest, end);
        }
        for (std::size_t i = 0; i < seqs.size(); ++i) {
            chunks.push_back({rows, seqs[i].tokens, seqs[i].start_pos, slot_lists[i], nullptr});
            rows += seqs[i].tokens;
        }
        q.resize(static_cast<std::size_t>(rows * layer.heads * head_dim));
        for (auto& x : q) x = rng.uniform(-2.0, 2.0);
    }

    std::vector<float> run(runtime::ThreadPool& pool, std::span<const runtime::AttentionChunk> cs,
                           const float* queries, std::int64_t out_rows) const {
        runtime::CpuAttention attention;
        attention.reserve(pool.size(), longest, layer.heads / layer.kv_heads, layer.head_dim);
        std::vector<float> out(static_cast<std::size_t>(out_rows * layer.heads * layer.head_dim),
                               -1.0f);
        attention.run(pool, storage, layer, cs, queries, out.data());
        return out;
    }
};

}  // namespace

class TestCpuAttention : public QObject {
    Q_OBJECT

  private slots:
    void matchesFloat64Reference_data();
    void matchesFloat64Reference();
};

void TestCpuAttention::matchesFloat64Reference_data() {
    QTest::addColumn<ElementType>("type");
    QTest::addColumn<KernelChoice>("kernels");
    // The matmul level when the storage is made: Best follows it (AVX-512 tiles or AVX2).
    QTest::addColumn<tensor::SimdLevel>("level");
    QTest::addColumn<int>("kv_heads");
    QTest::addColumn<int>("group");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("window");
    std::vector<std::pair<KernelChoice, tensor::SimdLevel>> kernel_sets = {
        {KernelChoice::Scalar, tensor::detected_simd_level()}};
    if (tensor::detected_simd_level() >= tensor::SimdLevel::Avx2)
        kernel_sets.push_back({KernelChoice::Best, tensor::SimdLevel::Avx2});
    if (tensor::detected_simd_level() == tensor::SimdLevel::Avx512)
        kernel_sets.push_back({KernelChoice::Best, tensor::SimdLevel::Avx512});
    for (const auto& [kc, level] : kernel_sets) {
        for (ElementType t : {ElementType::F32, ElementType::F16, ElementType::Q8}) {
            // 3 x 3: SmolLM2's shape (3 kv heads: one thread per item on 2 or 3 threads).
            for (int group : {1, 2, 3, 4}) {
                // 64: whole vectors; 20: one 16-column step and a masked tail of 4.
                for (int d : {64, 20}) {
                    // 7: a window shorter than the prefill, so that it cuts into blocks.
                    for (int window : {0, 7}) {
                        const int kv_heads = group == 4 ? 1 : group == 3 ? 3 : 2;
                        QTest::addRow(
                            "%s-%s-g%d-d%d-w%d", kv::element_type_name(t),
                            kc == KernelChoice::Best ? tensor::simd_level_name(level) : "scalar",
                            group, d, window)
                            << t << kc << level << kv_heads << group << d << window;
                    }
                }
            }
        }
    }
}

void TestCpuAttention::matchesFloat64Reference() {
    QFETCH(ElementType, type);
    QFETCH(KernelChoice, kernels);
    QFETCH(tensor::SimdLevel, level);
    QFETCH(int, kv_heads);
    QFETCH(int, group);
    QFETCH(int, head_dim);
    QFETCH(int, window);
    // A 37-token prefill from 0, a decode step at 20, a prefill continuing at 5, one of 16
    // tokens continuing at 50, and a decode step at 0 (a single key).
    const std::vector<Sequence> seqs = {{0, 37}, {20, 1}, {5, 9}, {50, 16}, {0, 1}};
    struct LevelGuard {
        ~LevelGuard() { tensor::set_simd_level(tensor::detected_simd_level()); }
    } guard;
    tensor::set_simd_level(level);
    const Fixture f(seqs, kv_heads, group, head_dim, window, type, kernels);
    if (kernels == KernelChoice::Best) {
        const bool wide = level == tensor::SimdLevel::Avx512;
        QCOMPARE(std::string(f.storage.kernel_name()).rfind("avx512", 0) == 0, wide);
    }
    const int heads = f.layer.heads;
    const auto hd = static_cast<std::int64_t>(head_dim);

    // Capture every head of the test layer for the 37-token prefill.
    inspect::AttentionCapture capture(
        inspect::CaptureSpec{.enabled = true, .layers = {Fixture::kLayer}, .heads = {}},
        Fixture::kLayers, heads);
    capture.prepare_rows(37);
    std::vector<runtime::AttentionChunk> chunks = f.chunks;
    chunks[0].capture = &capture;

    // Three threads: more threads than kv heads for the decode-only runs below, so that they
    // also take the form in which the threads share each item (CpuAttention::run_shared).
    runtime::ThreadPool pool(3);
    runtime::ThreadPool two(2);
    runtime::CpuAttention attention;
    attention.reserve(pool.size(), f.longest, group, head_dim);
    std::vector<float> out(static_cast<std::size_t>(f.rows * heads * hd), -1.0f);
    attention.run(pool, f.storage, f.layer, chunks, f.q.data(), out.data());
    QVERIFY(attention.bytes() > 0);

    std::vector<float> k(static_cast<std::size_t>(hd)), v(static_cast<std::size_t>(hd));
    for (std::size_t ci = 0; ci < seqs.size(); ++ci) {
        const runtime::AttentionChunk& c = f.chunks[ci];
        for (std::int64_t t = 0; t < c.tokens; ++t) {
            const std::int64_t row = c.first_row + t;
            const std::int64_t pos = c.start_pos + t;
            const std::int64_t first = window > 0 ? std::max<std::int64_t>(0, pos - window + 1) : 0;
            const std::int64_t n = pos - first + 1;

            // The same query alone, as decode runs it: identical bits.
            const runtime::AttentionChunk alone{0, 1, pos, c.slot_ids, nullptr};
            const float* qrow = f.q.data() + row * heads * hd;
            const std::vector<float> single = f.run(pool, {&alone, 1}, qrow, 1);
            QVERIFY2(std::memcmp(single.data(), out.data() + row * heads * hd,
                                 single.size() * sizeof(float)) == 0,
                     qPrintable(
                         QString("chunk %1 token %2: alone differs from blocked").arg(ci).arg(t)));
            // And on two threads: one kv head there takes the shared form (the threads split the
            // item's keys, rows and columns), two or three the one-thread-per-item form.
            const std::vector<float> pair = f.run(two, {&alone, 1}, qrow, 1);
            QVERIFY2(std::memcmp(pair.data(), single.data(), single.size() * sizeof(float)) == 0,
                     qPrintable(QString("chunk %1 token %2: two threads differ from three")
                                    .arg(ci)
                                    .arg(t)));

            for (int h = 0; h < heads; ++h) {
                const int kvh = h / group;
                const float* qh = qrow + h * hd;
                // Scores in float64, with the bound on each float score's error: a dot product
                // of head_dim terms (any summation order: head_dim + 1 roundings of at most
                // kUnit times the sum of |terms|) and the multiplication by the scale.
                std::vector<double> s(static_cast<std::size_t>(n));
                double score_err = 0;
                for (std::int64_t j = 0; j < n; ++j) {
                    f.storage.read_k(Fixture::kLayer,
                                     c.slot_ids[static_cast<std::size_t>(first + j)], kvh,
                                     k.data());
                    double dot = 0, mag = 0;
                    for (std::int64_t i = 0; i < hd; ++i) {
                        dot += double(qh[i]) * double(k[static_cast<std::size_t>(i)]);
                        mag += std::fabs(double(qh[i]) * double(k[static_cast<std::size_t>(i)]));
                    }
                    s[static_cast<std::size_t>(j)] = dot * f.layer.scale;
                    score_err = std::max(score_err, (double(hd) + 2) * kUnit * mag * f.layer.scale);
                }
                const double smax = *std::max_element(s.begin(), s.end());
                double sum = 0, spread = 0;
                std::vector<double> p(s.size());
                for (std::size_t j = 0; j < s.size(); ++j) {
                    sum += p[j] = std::exp(s[j] - smax);
                    spread = std::max(spread, smax - s[j]);
                }
                for (double& x : p) x /= sum;
                // Relative error of each weight: scores off by score_err each move a weight by
                // a factor up to exp(2 score_err); the float subtraction of the max (kUnit
                // times the spread), exp (1 ulp), the sum and the division (a few kUnit).
                const double weight_rel = 2 * score_err + spread * kUnit + 8 * kUnit;

                // The capture holds the row as f16: relative 2^-11 on top of the weight error (1%
                // slack for the product of the two), absolute 2^-25 below f16's normal range.
                if (ci == 0) {
                    const std::vector<float> captured = capture.row(Fixture::kLayer, h, pos);
                    QCOMPARE(static_cast<std::int64_t>(captured.size()), pos + 1);
                    for (std::int64_t j = 0; j <= pos; ++j) {
                        const double want =
                            j < first ? 0.0 : p[static_cast<std::size_t>(j - first)];
                        QVERIFY2(std::fabs(captured[static_cast<std::size_t>(j)] - want) <=
                                     1.01 * want * (weight_rel + 0x1p-11) + 0x1p-25,
                                 qPrintable(QString("capture h%1 pos %2 key %3: %4 vs %5")
                                                .arg(h)
                                                .arg(pos)
                                                .arg(j)
                                                .arg(captured[static_cast<std::size_t>(j)])
                                                .arg(want)));
                    }
                }

                std::vector<double> want(static_cast<std::size_t>(hd), 0.0),
                    mag(static_cast<std::size_t>(hd), 0.0);
                for (std::int64_t j = 0; j < n; ++j) {
                    f.storage.read_v(Fixture::kLayer,
                                     c.slot_ids[static_cast<std::size_t>(first + j)], kvh,
                                     v.data());
                    for (std::size_t i = 0; i < v.size(); ++i) {
                        want[i] += p[static_cast<std::size_t>(j)] * v[i];
                        mag[i] += p[static_cast<std::size_t>(j)] * std::fabs(v[i]);
                    }
                }
                for (std::int64_t i = 0; i < hd; ++i) {
                    const double got = out[static_cast<std::size_t>((row * heads + h) * hd + i)];
                    // Weights off by weight_rel each, and a float sum of n products (n + 1
                    // roundings), both relative to sum_j p_j |v_j|; doubled for the
                    // second-order terms the first-order bound leaves out.
                    const double bound =
                        2 * (weight_rel + double(n + 1) * kUnit) * mag[static_cast<std::size_t>(i)];
                    QVERIFY2(
                        std::fabs(got - want[static_cast<std::size_t>(i)]) <= bound,
                        qPrintable(QString("chunk %1 token %2 head %3 [%4]: %5 vs %6 (bound %7)")
                                       .arg(ci)
                                       .arg(t)
                                       .arg(h)
                                       .arg(i)
                                       .arg(got)
                                       .arg(want[static_cast<std::size_t>(i)])
                                       .arg(bound)));
                }
            }
        }
    }
}

QTEST_GUILESS_MAIN(TestCpuAttention)
#include "test_cpu_attention.moc"
