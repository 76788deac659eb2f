// The element-wise and row-wise ops of the CPU forward pass (engine/runtime/cpu_ops.h) against
// naive float64 references written here, on the portable path (TOKENSCOPE_SIMD=scalar) and the
// AVX2+FMA one: the polynomial exp, softmax, silu_mul, gelu_tanh_mul, rms_norm, and RoPE with
// its per-token angle table. Tolerances are in units of u = 2^-24 (float unit roundoff) and
// follow from the operations each path rounds; the measured worst cases are printed.
// Also checked: a row's (or an element's) result does not depend on its address or on the
// row's length and the element's place in it, which test_forward's decode-vs-prefill
// bit-for-bit checks rely on; and RoPE with the table equals the former per-head sin/cos bit
// for bit.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/cpu_ops.h"
#include "runtime/cpu_ops_kernels.h"
#include "runtime/rope_table.h"
#include "tensor/matmul.h"

using namespace tokenscope;
namespace ops = tokenscope::runtime::ops;

namespace {

constexpr double kUnit = 0x1p-24;
constexpr float kInf = std::numeric_limits<float>::infinity();
// Below this, results are zero or denormal on one path and tiny normals on the other: only an
// absolute bound means anything there.
constexpr double kTiny = 1e-33;

class Random {
  public:
    explicit Random(std::uint32_t seed) : gen_(seed) {}
    float uniform(double lo, double hi) {
        return static_cast<float>(lo +
                                  (hi - lo) * (static_cast<double>(gen_() >> 8) + 0.5) * 0x1p-24);
    }

  private:
    std::mt19937 gen_;
};

// Forces a SIMD level for the test's scope, then restores the detected one.
class SimdScope {
  public:
    explicit SimdScope(tensor::SimdLevel level) { tensor::set_simd_level(level); }
    ~SimdScope() { tensor::set_simd_level(tensor::detected_simd_level()); }
};

// Adds the "portable" and, where this CPU has them, the "avx2" and "avx512" rows of a
// data-driven test (the AVX-512 table differs from the AVX2 one in its softmax only).
void add_paths() {
    QTest::addColumn<int>("level");
    QTest::newRow("portable") << static_cast<int>(tensor::SimdLevel::Scalar);
    if (ops::detail::avx2_op_kernels() &&
        tensor::detected_simd_level() >= tensor::SimdLevel::Avx2) {
        QTest::newRow("avx2") << static_cast<int>(tensor::SimdLevel::Avx2);
    }
    if (ops::detail::avx512_op_kernels() &&
        tensor::detected_simd_level() == tensor::SimdLevel::Avx512) {
        QTest::newRow("avx512") << static_cast<int>(tensor::SimdLevel::Avx512);
    }
}

// Relative error with an absolute floor for results that are (or should be) tiny.
struct ErrorTracker {
    double worst = 0.0;  // worst error / allowed
    double worst_rel = 0.0;
    QString where;
    void check(double got, double want, double allowed_rel, const QString& what) {
        const double err = std::abs(got - want);
        const double allowed = allowed_rel * std::abs(want) + kTiny;
        if (std::abs(want) > 1e-30) worst_rel = std::max(worst_rel, err / std::abs(want));
        if (!(err <= allowed * (1.0 + 1e-12))) {
            if (where.isEmpty()) {
                where = QString("%1: got %2, want %3, error %4 > %5")
                            .arg(what)
                            .arg(got, 0, 'g', 10)
                            .arg(want, 0, 'g', 17)
                            .arg(err, 0, 'g', 3)
                            .arg(allowed, 0, 'g', 3);
            }
            worst = std::max(worst, 2.0);
        }
    }
};

// The angles and rotation as ops::rope computed them before the table (sin and cos at every
// head): the table must reproduce it bit for bit.
void rope_per_head(float* head, std::int64_t rope_dims, double position, const float* inv_freq,
                   bool neox) {
    const std::int64_t half = rope_dims / 2;
    for (std::int64_t i = 0; i < half; ++i) {
        const double angle = position * static_cast<double>(inv_freq[i]);
        const float c = static_cast<float>(std::cos(angle));
        const float s = static_cast<float>(std::sin(angle));
        float& a = neox ? head[i] : head[2 * i];
        float& b = neox ? head[i + half] : head[2 * i + 1];
        const float x0 = a, x1 = b;
        a = x0 * c - x1 * s;
        b = x0 * s + x1 * c;
    }
}

std::vector<float> inverse_frequencies(std::int64_t rope_dims, double base) {
    std::vector<float> inv(static_cast<std::size_t>(rope_dims / 2));
    for (std::size_t i = 0; i < inv.size(); ++i) {
        inv[i] = static_cast<float>(
            std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rope_dims)));
    }
    return inv;
}

}  // namespace

class TestCpuOps : public QObject {
    Q_OBJECT

  private slots:
    void dispatchFollowsSimdLevel();
    void expMatchesFloat64_data() { add_paths(); }
    void expMatchesFloat64();
    void softmaxMatchesFloat64_data() { add_paths(); }
    void softmaxMatchesFloat64();
    void softmaxAgreesAcrossInstructionSets();
    void siluMulMatchesFloat64_data() { add_paths(); }
    void siluMulMatchesFloat64();
    void geluTanhMulMatchesFloat64_data() { add_paths(); }
    void geluTanhMulMatchesFloat64();
    void rmsNormMatchesFloat64_data() { add_paths(); }
    void rmsNormMatchesFloat64();
    void resultsIndependentOfPlace_data() { add_paths(); }
    void resultsIndependentOfPlace();
    void ropeTableMatchesPerHeadAngles();
    void ropeMatchesFloat64();
};

void TestCpuOps::dispatchFollowsSimdLevel() {
    {
        SimdScope scope(tensor::SimdLevel::Scalar);
        QCOMPARE(QByteArray(ops::detail::active_op_kernels().name), QByteArray("portable"));
    }
    if (ops::detail::avx2_op_kernels() &&
        tensor::detected_simd_level() >= tensor::SimdLevel::Avx2) {
        SimdScope scope(tensor::SimdLevel::Avx2);
        QCOMPARE(QByteArray(ops::detail::active_op_kernels().name), QByteArray("avx2"));
    }
    if (ops::detail::avx512_op_kernels() &&
        tensor::detected_simd_level() == tensor::SimdLevel::Avx512) {
        SimdScope scope(tensor::SimdLevel::Avx512);
        QCOMPARE(QByteArray(ops::detail::active_op_kernels().name), QByteArray("avx512"));
    }
}

// exp over [-87.3, 0]: the AVX2 polynomial is stated at 8.4e-8 relative (cpu_ops_avx2.cpp,
// measured over every float of the range; 10^7 of them here); std::exp must be within 1 ulp
// (1.2e-7; glibc's is correctly rounded). Below ln(FLT_MIN) the polynomial returns exactly 0.
void TestCpuOps::expMatchesFloat64() {
    QFETCH(int, level);
    SimdScope scope(static_cast<tensor::SimdLevel>(level));
    const auto& k = ops::detail::active_op_kernels();
    const bool avx2 = level != static_cast<int>(tensor::SimdLevel::Scalar);
    const double bound = avx2 ? 8.5e-8 : 1.2e-7;

    constexpr std::int64_t kCount = 10'000'000;
    std::vector<float> x(kCount), out(kCount);
    for (std::int64_t i = 0; i < kCount; ++i) {
        x[static_cast<std::size_t>(i)] =
            static_cast<float>(-87.3 * static_cast<double>(i) / (kCount - 1));
    }
    k.exp_nonpositive(x.data(), out.data(), kCount);
    double worst = 0.0;
    float worst_x = 0.0f;
    for (std::int64_t i = 0; i < kCount; ++i) {
        const double want = std::exp(static_cast<double>(x[static_cast<std::size_t>(i)]));
        const double rel = std::abs(out[static_cast<std::size_t>(i)] - want) / want;
        if (rel > worst) worst = rel, worst_x = x[static_cast<std::size_t>(i)];
    }
    qInfo("%s exp: max relative error %.3g at x = %.9g over %lld arguments in [-87.3, 0]", k.name,
          worst, static_cast<double>(worst_x), static_cast<long long>(kCount));
    QVERIFY2(worst <= bound,
             qPrintable(QString("max relative error %1 > %2").arg(worst).arg(bound)));
    if (level == static_cast<int>(tensor::SimdLevel::Avx512)) {
        // The sixteen-lane exp is the AVX2 polynomial step for step: the same bits everywhere.
        std::vector<float> narrow(kCount);
        ops::detail::avx2_op_kernels()->exp_nonpositive(x.data(), narrow.data(), kCount);
        QVERIFY(std::memcmp(narrow.data(), out.data(), out.size() * sizeof(float)) == 0);
    }

    const std::vector<float> special = {0.0f,   -0.0f,   -1e-30f, -87.33f,
                                        -87.4f, -100.0f, -1e30f,  -kInf};
    std::vector<float> got(special.size());
    k.exp_nonpositive(special.data(), got.data(), static_cast<std::int64_t>(special.size()));
    QCOMPARE(got[0], 1.0f);
    QCOMPARE(got[1], 1.0f);
    QCOMPARE(got[2], 1.0f);
    const double e3 = std::exp(static_cast<double>(special[3]));
    QVERIFY(std::abs(got[3] - e3) <= bound * e3);
    for (std::size_t i = 4; i < special.size(); ++i) {
        QVERIFY2(got[i] >= 0.0f && got[i] <= std::numeric_limits<float>::min(),
                 qPrintable(QString("exp(%1) = %2").arg(special[i]).arg(got[i])));
    }
    QCOMPARE(got.back(), 0.0f);
}

// p_i = exp(x_i - max) / sum against float64 from the same floats. The float x_i - max is
// rounded (u |x_i - max| relative in p_i), exp (<= 1.5u), the sum (double, negligible; the
// AVX2 and AVX-512 forms first add four vectors of terms in [0, 1] in float: <= 3u) and its
// inverse rounded to float (u), the product (u): 10u + u |x_i - max| allows some slack.
void TestCpuOps::softmaxMatchesFloat64() {
    QFETCH(int, level);
    SimdScope scope(static_cast<tensor::SimdLevel>(level));
    Random rng(7);
    ErrorTracker err;
    for (const std::int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 100, 1000, 4099}) {
        for (const double spread : {0.0, 1.0, 10.0, 40.0, 200.0}) {
            std::vector<float> x(static_cast<std::size_t>(n));
            for (float& v : x) v = rng.uniform(-spread, spread) + 3.0f;
            if (n > 4 && spread == 10.0) x[3] = -kInf;  // a masked entry: weight exactly 0
            const float max = *std::max_element(x.begin(), x.end());
            double sum = 0.0;
            for (float v : x) sum += std::exp(static_cast<double>(v) - max);
            std::vector<float> p = x;
            QCOMPARE(ops::softmax(p), max);
            for (std::size_t i = 0; i < x.size(); ++i) {
                if (x[i] == -kInf) continue;  // checked below
                const double want = std::exp(static_cast<double>(x[i]) - max) / sum;
                const double rel = (10.0 + std::abs(static_cast<double>(x[i]) - max)) * kUnit;
                err.check(p[i], want, rel,
                          QString("n %1 spread %2 element %3").arg(n).arg(spread).arg(i));
            }
            if (n > 4 && spread == 10.0) QCOMPARE(p[3], 0.0f);
        }
    }
    qInfo("softmax: max relative error %.3g", err.worst_rel);
    QVERIFY2(err.where.isEmpty(), qPrintable(err.where));
}

// The AVX2 and AVX-512 softmax sum the same terms in the same order (16-lane blocks of four
// float adds, then double), so they give the same bits; the AVX-512 one is the second
// implementation the AVX2 one is checked against, at lengths around every block and vector
// edge, with masked (-infinity) entries and wide spreads.
void TestCpuOps::softmaxAgreesAcrossInstructionSets() {
    if (!ops::detail::avx512_op_kernels() ||
        tensor::detected_simd_level() != tensor::SimdLevel::Avx512) {
        QSKIP("this CPU has no AVX-512: the AVX2 softmax is checked against float64 only");
    }
    Random rng(23);
    int rows = 0;
    for (std::int64_t n = 1; n <= 300; ++n) {
        for (const double spread : {1.0, 30.0}) {
            std::vector<float> x(static_cast<std::size_t>(n));
            for (float& v : x) v = rng.uniform(-spread, spread);
            if (n > 20) x[static_cast<std::size_t>(n / 3)] = -kInf;
            std::vector<float> avx2 = x, avx512 = x;
            float max2 = 0, max512 = 0;
            {
                SimdScope scope(tensor::SimdLevel::Avx2);
                max2 = ops::softmax(avx2);
            }
            {
                SimdScope scope(tensor::SimdLevel::Avx512);
                max512 = ops::softmax(avx512);
            }
            QCOMPARE(max2, max512);
            for (std::size_t i = 0; i < x.size(); ++i) {
                QVERIFY2(std::memcmp(&avx2[i], &avx512[i], sizeof(float)) == 0,
                         qPrintable(QString("n %1 spread %2 element %3: avx2 %4, avx512 %5")
                                        .arg(n)
                                        .arg(spread)
                                        .arg(i)
                                        .arg(double(avx2[i]), 0, 'g', 9)
                                        .arg(double(avx512[i]), 0, 'g', 9)));
            }
            ++rows;
        }
    }
    QCOMPARE(rows, 600);
}

// g up / (1 + exp(-g)): exp (<= 3u), 1 + e, the division and two products: 8u.
void TestCpuOps::siluMulMatchesFloat64() {
    QFETCH(int, level);
    SimdScope scope(static_cast<tensor::SimdLevel>(level));
    Random rng(11);
    std::vector<float> g, up;
    for (int i = 0; i < 100'000; ++i) {
        g.push_back(rng.uniform(-20.0, 20.0));
        up.push_back(rng.uniform(-3.0, 3.0));
    }
    for (int i = 0; i < 10'000; ++i) {
        g.push_back(rng.uniform(-120.0, 120.0));
        up.push_back(rng.uniform(-3.0, 3.0));
    }
    for (float s : {0.0f, 1e-30f, 1e-3f, 87.0f, 88.0f, 89.0f, 104.0f, 1e10f, 1e30f}) {
        g.push_back(s);
        g.push_back(-s);
        up.push_back(1.5f);
        up.push_back(-0.5f);
    }
    std::vector<float> out = g;
    ops::silu_mul(out.data(), up.data(), static_cast<std::int64_t>(out.size()));
    ErrorTracker err;
    for (std::size_t i = 0; i < g.size(); ++i) {
        const double a = g[i];
        const double want = a * up[i] / (1.0 + std::exp(-a));
        err.check(out[i], want, 8.0 * kUnit, QString("g %1 up %2").arg(g[i]).arg(up[i]));
    }
    qInfo("silu_mul: max relative error %.3g", err.worst_rel);
    QVERIFY2(err.where.isEmpty(), qPrintable(err.where));
}

// 0.5 g (1 + tanh(z)) up with z = sqrt(2/pi) (g + 0.044715 g^3), in float64 through the
// identity 0.5 (1 + tanh(z)) = 1 / (1 + exp(-2z)) (1 + tanh(z) itself cancels to nothing in
// double for z < -19). The float z is off by about 6u relative (its constants and roundings),
// which exp turns into 6u |2z| relative where exp(-2z) matters: 12u + 8u |z| in all.
void TestCpuOps::geluTanhMulMatchesFloat64() {
    QFETCH(int, level);
    SimdScope scope(static_cast<tensor::SimdLevel>(level));
    Random rng(13);
    std::vector<float> g, up;
    for (int i = 0; i < 100'000; ++i) {
        g.push_back(rng.uniform(-8.0, 8.0));
        up.push_back(rng.uniform(-3.0, 3.0));
    }
    for (int i = 0; i < 10'000; ++i) {
        g.push_back(rng.uniform(-40.0, 40.0));
        up.push_back(rng.uniform(-3.0, 3.0));
    }
    for (float s : {0.0f, 1e-30f, 1e-3f, 5.0f, 10.0f, 1e4f, 1e13f, 1e30f}) {
        g.push_back(s);
        g.push_back(-s);
        up.push_back(1.5f);
        up.push_back(-0.5f);
    }
    std::vector<float> out = g;
    ops::gelu_tanh_mul(out.data(), up.data(), static_cast<std::int64_t>(out.size()));
    ErrorTracker err;
    const double k = std::sqrt(2.0 / M_PI);
    for (std::size_t i = 0; i < g.size(); ++i) {
        const double a = g[i];
        const double z = k * (a + 0.044715 * a * a * a);
        const double want = a * up[i] / (1.0 + std::exp(-2.0 * z));
        err.check(out[i], want, (12.0 + 8.0 * std::min(std::abs(z), 1e6)) * kUnit,
                  QString("g %1 up %2").arg(g[i]).arg(up[i]));
    }
    qInfo("gelu_tanh_mul: max relative error %.3g", err.worst_rel);
    QVERIFY2(err.where.isEmpty(), qPrintable(err.where));
}

// x w / sqrt(mean(x^2) + eps): the double sum is exact to ~1e-16; the float inverse (u) and
// two products (2u): 4u.
void TestCpuOps::rmsNormMatchesFloat64() {
    QFETCH(int, level);
    SimdScope scope(static_cast<tensor::SimdLevel>(level));
    Random rng(17);
    ErrorTracker err;
    for (const std::int64_t n : {1, 3, 8, 9, 64, 100, 1024, 2304}) {
        for (const double magnitude : {1e-20, 1.0, 1e20}) {
            for (const bool weighted : {false, true}) {
                std::vector<float> x(static_cast<std::size_t>(n)), w(x.size());
                for (float& v : x) v = static_cast<float>(rng.uniform(-1.0, 1.0) * magnitude);
                for (float& v : w) v = rng.uniform(-2.0, 2.0);
                const float eps = 1e-6f;
                double sum = 0.0;
                for (float v : x) sum += static_cast<double>(v) * v;
                const double inv = 1.0 / std::sqrt(sum / static_cast<double>(n) + eps);
                std::vector<float> out(x.size());
                ops::rms_norm(x.data(), weighted ? w.data() : nullptr, out.data(), n, eps);
                std::vector<float> in_place = x;  // as for the q/k norms
                ops::rms_norm(in_place.data(), weighted ? w.data() : nullptr, in_place.data(), n,
                              eps);
                QVERIFY(std::memcmp(out.data(), in_place.data(), out.size() * sizeof(float)) == 0);
                for (std::size_t i = 0; i < x.size(); ++i) {
                    const double want = x[i] * inv * (weighted ? w[i] : 1.0);
                    err.check(out[i], want, 4.0 * kUnit,
                              QString("n %1 magnitude %2 element %3").arg(n).arg(magnitude).arg(i));
                }
            }
        }
    }
    qInfo("rms_norm: max relative error %.3g", err.worst_rel);
    QVERIFY2(err.where.isEmpty(), qPrintable(err.where));
}

// A row gives the same bits wherever it lies in memory; an element of silu_mul / gelu_tanh_mul
// the same bits alone as inside a longer row (vector body or tail).
void TestCpuOps::resultsIndependentOfPlace() {
    QFETCH(int, level);
    SimdScope scope(static_cast<tensor::SimdLevel>(level));
    Random rng(19);
    constexpr std::int64_t n = 37;
    std::vector<float> x(n), w(n), up(n);
    for (float& v : x) v = rng.uniform(-6.0, 6.0);
    for (float& v : w) v = rng.uniform(-2.0, 2.0);
    for (float& v : up) v = rng.uniform(-2.0, 2.0);

    std::vector<float> first, buffer(n + 8);
    for (int offset = 0; offset < 8; ++offset) {
        std::copy(x.begin(), x.end(), buffer.begin() + offset);
        float* row = buffer.data() + offset;
        ops::softmax(std::span<float>(row, n));
        std::vector<float> result(row, row + n);
        std::copy(x.begin(), x.end(), buffer.begin() + offset);
        ops::rms_norm(row, w.data(), row, n, 1e-6f);
        result.insert(result.end(), row, row + n);
        if (offset == 0) first = result;
        QVERIFY2(std::memcmp(first.data(), result.data(), first.size() * sizeof(float)) == 0,
                 qPrintable(QString("offset %1").arg(offset)));
    }

    for (auto op : {&ops::silu_mul, &ops::gelu_tanh_mul}) {
        std::vector<float> whole = x;
        op(whole.data(), up.data(), n);
        for (std::int64_t i = 0; i < n; ++i) {
            float alone = x[static_cast<std::size_t>(i)];
            op(&alone, &up[static_cast<std::size_t>(i)], 1);
            QCOMPARE(alone, whole[static_cast<std::size_t>(i)]);
        }
    }
}

void TestCpuOps::ropeTableMatchesPerHeadAngles() {
    Random rng(23);
    const std::vector<std::int64_t> positions = {0, 1, 2, 7, 100, 1000, 4095, 32767, 131071};
    for (const std::int64_t head_dim : {64, 128}) {
        // Full rotation and a partial one (the first half of the dims).
        for (const std::int64_t rope_dims : {head_dim, head_dim / 2}) {
            for (const double base : {10000.0, 500000.0, 1000000.0}) {
                for (const double linear_scale : {1.0, 8.0}) {
                    runtime::RopeTable table(inverse_frequencies(rope_dims, base));
                    table.prepare(positions.data(), static_cast<std::int64_t>(positions.size()),
                                  linear_scale);
                    for (std::size_t t = 0; t < positions.size(); ++t) {
                        for (const bool neox : {false, true}) {
                            std::vector<float> head(static_cast<std::size_t>(head_dim));
                            for (float& v : head) v = rng.uniform(-4.0, 4.0);
                            std::vector<float> want = head;
                            rope_per_head(want.data(), rope_dims,
                                          static_cast<double>(positions[t]) / linear_scale,
                                          table.inverse_frequencies().data(), neox);
                            const auto tok = static_cast<std::int64_t>(t);
                            ops::rope(head.data(), rope_dims, table.cos(tok), table.sin(tok), neox);
                            QVERIFY2(std::memcmp(want.data(), head.data(),
                                                 head.size() * sizeof(float)) == 0,
                                     qPrintable(QString("head_dim %1 rope_dims %2 base %3 pos %4")
                                                    .arg(head_dim)
                                                    .arg(rope_dims)
                                                    .arg(base)
                                                    .arg(positions[t])));
                        }
                    }
                }
            }
        }
    }
}

// Against a rotation in float64 by the exact angle (from the same float inverse frequencies):
// cos and sin rounded to float (u each), two products and a sum: 4u (|x0| + |x1|) absolute.
// Dims past rope_dims stay as they are.
void TestCpuOps::ropeMatchesFloat64() {
    Random rng(29);
    const std::int64_t head_dim = 64, rope_dims = 48, half = rope_dims / 2;
    const std::vector<float> inv = inverse_frequencies(rope_dims, 10000.0);
    std::vector<float> cos(static_cast<std::size_t>(half)), sin(cos.size());
    for (const std::int64_t pos : {0, 3, 999, 65535}) {
        ops::rope_angles(static_cast<double>(pos), inv.data(), half, cos.data(), sin.data());
        for (const bool neox : {false, true}) {
            std::vector<float> head(static_cast<std::size_t>(head_dim));
            for (float& v : head) v = rng.uniform(-4.0, 4.0);
            const std::vector<float> in = head;
            ops::rope(head.data(), rope_dims, cos.data(), sin.data(), neox);
            for (std::int64_t i = 0; i < half; ++i) {
                const auto a = static_cast<std::size_t>(neox ? i : 2 * i);
                const auto b = static_cast<std::size_t>(neox ? i + half : 2 * i + 1);
                const double angle = static_cast<double>(pos) * inv[static_cast<std::size_t>(i)];
                const double want_a = in[a] * std::cos(angle) - in[b] * std::sin(angle);
                const double want_b = in[a] * std::sin(angle) + in[b] * std::cos(angle);
                const double allowed = 4.0 * kUnit * (std::abs(in[a]) + std::abs(in[b]));
                QVERIFY(std::abs(head[a] - want_a) <= allowed);
                QVERIFY(std::abs(head[b] - want_b) <= allowed);
            }
            for (std::int64_t i = rope_dims; i < head_dim; ++i) {
                QCOMPARE(head[static_cast<std::size_t>(i)], in[static_cast<std::size_t>(i)]);
            }
        }
    }
}

QTEST_APPLESS_MAIN(TestCpuOps)
#include "test_cpu_ops.moc"
