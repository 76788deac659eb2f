// The int8 GEMVs' lane arithmetic (kernels/matmul/gemv_int8_lanes.h, the same functions the CUDA
// kernels call) run on the CPU over a whole emulated warp, for machines without a GPU:
//  - every element of a row is taken by exactly one (lane, block step), for Q8_0 and Q4_K;
//  - the warp's sum, with the words loaded at the offsets the kernels load them from, matches a
//    float64 product of the engine's own dequantized weights (tensor::dequantize_row) with the
//    int8 activation, within the self-test's f32 tolerance (1e-5), on rows from
//    tensor::quantize_row at widths 256, 512 and 2048;
//  - the host form of dp4a is the plain sum of four int8 products.
// The CUDA self-test checks the kernels themselves (selftest --device cuda: "int8 dp4a gemv").
#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "matmul/gemv_int8_lanes.h"
#include "tensor/block_layouts.h"
#include "tensor/f16.h"
#include "tensor/kquant_scales.h"
#include "tensor/type.h"

using namespace tokenscope;
namespace i8 = tokenscope::cuda::int8;

namespace {

struct QuantizedX {
    std::vector<std::int8_t> q;
    std::vector<float> d;
};

// quantize_x8's formula (matmul_gemv_int8.cu).
QuantizedX quantize(const std::vector<float>& x) {
    QuantizedX out{std::vector<std::int8_t>(x.size()), std::vector<float>(x.size() / 32)};
    for (std::size_t b = 0; b < out.d.size(); ++b) {
        float amax = 0.0f;
        for (std::size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
        const float scale = amax / 127.0f;
        out.d[b] = scale;
        for (std::size_t i = 0; i < 32; ++i) {
            const float r = scale == 0.0f ? 0.0f : std::round(x[b * 32 + i] / scale);
            out.q[b * 32 + i] = static_cast<std::int8_t>(std::min(std::max(r, -127.0f), 127.0f));
        }
    }
    return out;
}

int word(const void* p) {
    int v = 0;
    std::memcpy(&v, p, 4);  // little-endian, as the kernels' loads
    return v;
}

float f16_at(const std::uint8_t* p) { return tensor::f16_to_f32(static_cast<std::uint16_t>(p[0] | (p[1] << 8))); }

// The warp's xor-butterfly sum (lane 0's result).
float warp_total(std::vector<float> v) {
    for (int offset = 16; offset > 0; offset /= 2) {
        std::vector<float> next(32);
        for (int l = 0; l < 32; ++l) next[l] = v[l] + v[l ^ offset];
        v = next;
    }
    return v[0];
}

float emulate_row(tensor::Type type, const std::uint8_t* row, std::int64_t cols, const QuantizedX& x,
                  std::vector<int>& touched) {
    std::vector<float> acc(32, 0.0f);
    for (int lane = 0; lane < 32; ++lane) {
        if (type == tensor::Type::Q8_0) {
            const int part = lane % i8::kQ8_0LanesPerBlock;
            for (std::int64_t b = lane / i8::kQ8_0LanesPerBlock; b < cols / 32; b += 32 / i8::kQ8_0LanesPerBlock) {
                const std::uint8_t* block = row + b * sizeof(tensor::BlockQ8_0);
                const std::int8_t* xb = x.q.data() + b * 32 + 8 * part;
                acc[lane] += i8::q8_0_lane(f16_at(block), x.d[static_cast<std::size_t>(b)], word(block + 2 + 8 * part),
                                           word(block + 6 + 8 * part), word(xb), word(xb + 4));
                for (int i = 0; i < 8; ++i) ++touched[static_cast<std::size_t>(b * 32 + 8 * part + i)];
            }
        } else {
            const i8::Q4KLane L = i8::q4_k_lane(lane % i8::kQ4_KLanesPerBlock);
            for (std::int64_t b = lane / i8::kQ4_KLanesPerBlock; b < cols / 256; b += 32 / i8::kQ4_KLanesPerBlock) {
                const auto* block = reinterpret_cast<const tensor::BlockQ4_K*>(row + b * sizeof(tensor::BlockQ4_K));
                unsigned w[4];
                int lo_x[4], hi_x[4];
                const std::int64_t first = b * 256 + L.first();
                for (int k = 0; k < 4; ++k) {
                    w[k] = static_cast<unsigned>(word(block->qs + L.qs_byte() + 4 * k));
                    lo_x[k] = word(x.q.data() + first + 4 * k);
                    hi_x[k] = word(x.q.data() + first + 32 + 4 * k);
                }
                const tensor::ScaleMin lo = tensor::unpack_scale_min_k4(2 * L.group, block->scales);
                const tensor::ScaleMin hi = tensor::unpack_scale_min_k4(2 * L.group + 1, block->scales);
                acc[lane] += i8::q4_k_lane_sum(w, lo_x, hi_x, f16_at(block->d), f16_at(block->dmin), lo.scale, lo.min,
                                               hi.scale, hi.min, x.d[static_cast<std::size_t>(b * 8 + 2 * L.group)],
                                               x.d[static_cast<std::size_t>(b * 8 + 2 * L.group + 1)]);
                for (int i = 0; i < 16; ++i) {
                    ++touched[static_cast<std::size_t>(first + i)];
                    ++touched[static_cast<std::size_t>(first + 32 + i)];
                }
            }
        }
    }
    return warp_total(acc);
}

}  // namespace

class TestGemvInt8Lanes : public QObject {
    Q_OBJECT
  private slots:
    void dp4aIsFourInt8Products() {
        std::mt19937 rng(3);
        std::uniform_int_distribution<int> any(INT32_MIN, INT32_MAX);
        for (int i = 0; i < 1000; ++i) {
            const int a = any(rng), b = any(rng), c = any(rng) / 4;
            long long want = c;
            for (int k = 0; k < 4; ++k) {
                want += static_cast<long long>(static_cast<std::int8_t>((static_cast<unsigned>(a) >> (8 * k)) & 0xFF)) *
                        static_cast<std::int8_t>((static_cast<unsigned>(b) >> (8 * k)) & 0xFF);
            }
            QCOMPARE(static_cast<long long>(i8::dp4a(a, b, c)), want);
        }
    }

    void warpMatchesDequantizedProduct_data() {
        QTest::addColumn<int>("type");
        QTest::addColumn<int>("cols");
        for (const int cols : {256, 512, 2048}) {
            QTest::addRow("Q8_0 %d", cols) << static_cast<int>(tensor::Type::Q8_0) << cols;
            QTest::addRow("Q4_K %d", cols) << static_cast<int>(tensor::Type::Q4_K) << cols;
        }
    }
    void warpMatchesDequantizedProduct() {
        QFETCH(int, type);
        QFETCH(int, cols);
        const auto t = static_cast<tensor::Type>(type);
        std::mt19937 rng(static_cast<unsigned>(type * 10007 + cols));
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        constexpr int kRows = 24;
        const std::size_t row_bytes = tensor::row_bytes(t, cols);
        std::vector<float> x(static_cast<std::size_t>(cols));
        for (float& v : x) v = 3.0f * u(rng);
        for (int i = 0; i < 32; ++i) x[static_cast<std::size_t>(32 + i)] = 0.0f;  // an all-zero block
        const QuantizedX xq = quantize(x);
        double diff = 0, norm = 0;
        for (int r = 0; r < kRows; ++r) {
            std::vector<float> w(static_cast<std::size_t>(cols));
            for (float& v : w) v = u(rng);
            std::vector<std::uint8_t> bytes(row_bytes);
            tensor::quantize_row(t, w.data(), bytes.data(), cols);
            tensor::dequantize_row(t, bytes.data(), w.data(), cols);
            double want = 0;
            for (int c = 0; c < cols; ++c) {
                want += static_cast<double>(w[static_cast<std::size_t>(c)]) *
                        (static_cast<double>(xq.q[static_cast<std::size_t>(c)]) * xq.d[static_cast<std::size_t>(c / 32)]);
            }
            std::vector<int> touched(static_cast<std::size_t>(cols), 0);
            const float got = emulate_row(t, bytes.data(), cols, xq, touched);
            for (int c = 0; c < cols; ++c) QCOMPARE(touched[static_cast<std::size_t>(c)], 1);
            diff += (got - want) * (got - want);
            norm += want * want;
        }
        const double err = std::sqrt(diff / norm);
        qInfo("relative error %g", err);
        QVERIFY(err <= 1e-5);
    }
};

QTEST_GUILESS_MAIN(TestGemvInt8Lanes)
#include "test_gemv_int8_lanes.moc"
