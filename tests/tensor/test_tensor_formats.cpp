// Tests of the ggml tensor formats (engine/tensor): the type table, f16/bf16 conversions,
// dequantization of hand-built blocks of every format, dequantization of pseudo-random blocks
// against values produced by llama.cpp's own Python reader (gguf-py), and the error of
// quantize -> dequantize on seeded random rows.
//
// Expected values never come from the production code: they are worked out here from the
// format definitions (element-indexed formulas written for this test), from literals computed
// by hand, or from gguf-py.
#include <QObject>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "tensor/f16.h"
#include "tensor/type.h"
#include "util/error.h"

using tokenscope::InvalidArgument;
using namespace tokenscope::tensor;

namespace {

using Bytes = std::vector<std::uint8_t>;

// Half-precision bit patterns used as block scales. Each is an exact power of two (or a small
// multiple of one), so every expected value below is exact in float and is compared exactly.
constexpr std::uint16_t kHalfOne = 0x3C00;         // 1.0
constexpr std::uint16_t kHalfHalf = 0x3800;        // 0.5
constexpr std::uint16_t kHalfQuarter = 0x3400;     // 0.25
constexpr std::uint16_t kHalfEighth = 0x3000;      // 0.125
constexpr std::uint16_t kHalfSixteenth = 0x2C00;   // 0.0625
constexpr std::uint16_t kHalfMinusThree = 0xC200;  // -3.0

void put_u16(Bytes& bytes, std::size_t offset, std::uint16_t value) {
    bytes[offset] = static_cast<std::uint8_t>(value & 0xFF);
    bytes[offset + 1] = static_cast<std::uint8_t>(value >> 8);
}

std::vector<float> dequantize(Type type, const Bytes& bytes, std::int64_t n) {
    std::vector<float> out(static_cast<std::size_t>(n), std::numeric_limits<float>::quiet_NaN());
    dequantize_row(type, bytes.data(), out.data(), n);
    return out;
}

// "" when equal element for element (exactly: the expected values are exact in float),
// otherwise a description of the first difference.
std::string first_difference(const std::vector<float>& actual,
                             const std::vector<double>& expected) {
    if (actual.size() != expected.size()) return "size differs";
    for (std::size_t i = 0; i < actual.size(); ++i) {
        if (static_cast<double>(actual[i]) != expected[i]) {
            return "element " + std::to_string(i) + ": got " + std::to_string(actual[i]) +
                   ", expected " + std::to_string(expected[i]);
        }
    }
    return {};
}

// ---------------------------------------------------------------------------------------------
// Deterministic random numbers that are the same with every standard library (the std
// distributions are not specified bit for bit, mt19937 is).
class Random {
  public:
    explicit Random(std::uint32_t seed) : gen_(seed) {}
    // Uniform in (0, 1).
    double open_unit() { return (static_cast<double>(gen_() >> 8) + 0.5) * 0x1p-24; }
    double uniform(double lo, double hi) { return lo + (hi - lo) * open_unit(); }
    // Box-Muller.
    double normal() {
        const double r = std::sqrt(-2.0 * std::log(open_unit()));
        return r * std::cos(2.0 * std::numbers::pi * open_unit());
    }

  private:
    std::mt19937 gen_;
};

enum class Distribution { Normal, Uniform, SmallNormal, SmallNormalWithOutliers };

const char* distribution_name(Distribution d) {
    switch (d) {
        case Distribution::Normal:
            return "normal(0,1)";
        case Distribution::Uniform:
            return "uniform(-1,1)";
        case Distribution::SmallNormal:
            return "normal(0,0.02)";
        case Distribution::SmallNormalWithOutliers:
            return "normal(0,0.02)+outliers";
    }
    return "?";
}

std::vector<float> random_row(Distribution d, std::size_t n, std::uint32_t seed) {
    Random rng(seed);
    std::vector<float> row(n);
    for (std::size_t i = 0; i < n; ++i) {
        double v = 0;
        switch (d) {
            case Distribution::Normal:
                v = rng.normal();
                break;
            case Distribution::Uniform:
                v = rng.uniform(-1.0, 1.0);
                break;
            case Distribution::SmallNormal:
                v = 0.02 * rng.normal();
                break;
            case Distribution::SmallNormalWithOutliers:
                // Trained weight matrices are roughly N(0, 0.02) with a few large outliers;
                // one element in 61 here is 10x larger, at positions that drift across blocks.
                v = 0.02 * rng.normal() * (i % 61 == 0 ? 10.0 : 1.0);
                break;
        }
        row[i] = static_cast<float>(v);
    }
    return row;
}

}  // namespace

class TestTensorFormats : public QObject {
    Q_OBJECT

  private slots:
    // The table.
    void allTypesCoverTheThirteenFormats();
    void unknownTypeIdIsInvalidArgumentNamingTheId();
    void rowLengthNotAWholeNumberOfBlocksThrows();
    void typeNamesParseCaseInsensitively();

    // f16 / bf16.
    void f16KnownBitPatterns();
    void f16RoundsToNearestEven();
    void f16NanAndInfinity();
    void f16RoundTripOfAll65536Values();
    void bf16KnownBitPatternsAndRounding();
    void bf16RoundTripOfAll65536Values();

    // Hand-built blocks of every format.
    void handBuiltF32F16Bf16();
    void handBuiltQ4_0();
    void handBuiltQ4_1();
    void handBuiltQ5_0();
    void handBuiltQ5_1();
    void handBuiltQ8_0();
    void handBuiltQ2_K();
    void handBuiltQ3_K();
    void handBuiltQ4_K();
    void handBuiltQ5_K();
    void handBuiltQ6_K();
    void pseudoRandomBlocksMatchGgufPy();

    // quantize -> dequantize.
    void quantizeRoundTripError_data();
    void quantizeRoundTripError();
    void quantizeAllZeroRowGivesZeros();
};

// =============================================================================================
// The table

void TestTensorFormats::allTypesCoverTheThirteenFormats() {
    struct Expected {
        Type type;
        std::uint32_t id;
        const char* name;
        std::int64_t block_size;
        std::size_t bytes_per_block;
    };
    // Ids from ggml's enum ggml_type; sizes from the block structs of ggml-common.h.
    const Expected expected[] = {
        {Type::F32, 0, "F32", 1, 4},        {Type::F16, 1, "F16", 1, 2},
        {Type::Q4_0, 2, "Q4_0", 32, 18},    {Type::Q4_1, 3, "Q4_1", 32, 20},
        {Type::Q5_0, 6, "Q5_0", 32, 22},    {Type::Q5_1, 7, "Q5_1", 32, 24},
        {Type::Q8_0, 8, "Q8_0", 32, 34},    {Type::Q2_K, 10, "Q2_K", 256, 84},
        {Type::Q3_K, 11, "Q3_K", 256, 110}, {Type::Q4_K, 12, "Q4_K", 256, 144},
        {Type::Q5_K, 13, "Q5_K", 256, 176}, {Type::Q6_K, 14, "Q6_K", 256, 210},
        {Type::BF16, 30, "BF16", 1, 2},
    };
    const auto types = all_types();
    QCOMPARE(types.size(), std::size(expected));
    for (std::size_t i = 0; i < types.size(); ++i) {
        const Expected& e = expected[i];
        QCOMPARE(types[i].type, e.type);
        QCOMPARE(static_cast<std::uint32_t>(types[i].type), e.id);
        QCOMPARE(QString(types[i].name), QString(e.name));
        QCOMPARE(types[i].block_size, e.block_size);
        QCOMPARE(types[i].bytes_per_block, e.bytes_per_block);
        QVERIFY(types[i].dequantize_row != nullptr);
        QVERIFY(types[i].quantize_row != nullptr);
        QCOMPARE(&traits(e.type), &types[i]);
        QCOMPARE(find_traits(e.id), &types[i]);
        QCOMPARE(&traits_of_id(e.id), &types[i]);
        QCOMPARE(QString(type_name(e.type)), QString(e.name));
        QCOMPARE(row_bytes(e.type, 4 * e.block_size), 4 * e.bytes_per_block);
    }
    // A Gemma 3 row of 640 F32/Q8_0 elements and a 2048-element Q4_K row, worked by hand:
    // 640/32 = 20 blocks * 34 = 680 bytes; 2048/256 = 8 * 144 = 1152 bytes.
    QCOMPARE(row_bytes(Type::Q8_0, 640), std::size_t{680});
    QCOMPARE(row_bytes(Type::Q4_K, 2048), std::size_t{1152});
    QCOMPARE(row_bytes(Type::F16, 3), std::size_t{6});
    QCOMPARE(row_bytes(Type::Q6_K, 0), std::size_t{0});
}

void TestTensorFormats::unknownTypeIdIsInvalidArgumentNamingTheId() {
    QVERIFY(find_traits(99) == nullptr);
    QVERIFY(find_traits(4) == nullptr);  // Q4_2 was removed from ggml
    try {
        (void)traits_of_id(99);
        QFAIL("traits_of_id(99) did not throw");
    } catch (const InvalidArgument& e) {
        const QString message = e.what();
        QVERIFY2(message.contains("unknown tensor type id 99"), e.what());
        // The message lists what is supported, so the user sees what would have worked.
        QVERIFY2(message.contains("Q4_K") && message.contains("BF16"), e.what());
    }
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, (void)traits(static_cast<Type>(5)));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, (void)type_name(static_cast<Type>(1000)));
}

void TestTensorFormats::rowLengthNotAWholeNumberOfBlocksThrows() {
    try {
        (void)row_bytes(Type::Q4_K, 100);
        QFAIL("row_bytes(Q4_K, 100) did not throw");
    } catch (const InvalidArgument& e) {
        const QString message = e.what();
        QVERIFY2(message.contains("100") && message.contains("Q4_K") && message.contains("256"),
                 e.what());
    }
    try {
        (void)row_bytes(Type::Q8_0, 33);
        QFAIL("row_bytes(Q8_0, 33) did not throw");
    } catch (const InvalidArgument& e) {
        const QString message = e.what();
        QVERIFY2(message.contains("33") && message.contains("Q8_0") && message.contains("32"),
                 e.what());
    }
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, (void)row_bytes(Type::F32, -1));

    // The row entry points check the length before touching any memory.
    Bytes block(144, 0);
    std::vector<float> values(256, 0.0f);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                             dequantize_row(Type::Q4_K, block.data(), values.data(), 255));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                             quantize_row(Type::Q4_K, values.data(), block.data(), 100));
}

void TestTensorFormats::typeNamesParseCaseInsensitively() {
    QVERIFY(parse_type_name("q4_k") == Type::Q4_K);
    QVERIFY(parse_type_name("Q4_K") == Type::Q4_K);
    QVERIFY(parse_type_name("bf16") == Type::BF16);
    QVERIFY(parse_type_name("f32") == Type::F32);
    QVERIFY(!parse_type_name("q4_k_m").has_value());  // a file type, not a tensor type
    QVERIFY(!parse_type_name("").has_value());
    QVERIFY(!parse_type_name("q4_").has_value());
}

// =============================================================================================
// f16 / bf16

namespace {

// IEEE binary16 decoded by its definition, in double: (-1)^s * 2^(e-15) * (1 + m/1024) for
// normal numbers, (-1)^s * 2^-14 * (m/1024) for subnormals.
double half_by_definition(std::uint16_t h) {
    const int sign = h >> 15;
    const int exponent = (h >> 10) & 0x1F;
    const int mantissa = h & 0x3FF;
    const double magnitude = exponent == 0 ? std::ldexp(mantissa / 1024.0, -14)
                                           : std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
    return sign ? -magnitude : magnitude;
}

float float_from_bits(std::uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

std::uint32_t bits_of(float f) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits;
}

}  // namespace

void TestTensorFormats::f16KnownBitPatterns() {
    struct Case {
        float value;
        std::uint16_t bits;
    };
    // Each pair is exact both ways.
    const Case cases[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3C00},
        {-2.0f, 0xC000},
        {0.5f, 0x3800},
        {65504.0f, 0x7BFF},             // largest finite half
        {0x1p-14f, 0x0400},             // smallest normal, 6.103515625e-05
        {0x1p-24f, 0x0001},             // smallest subnormal, 5.9604644775390625e-08
        {0x1p-14f - 0x1p-24f, 0x03FF},  // largest subnormal
        {0.333251953125f, 0x3555},      // 1/3 rounded: 1 + 341/1024 = 1.3330078125, * 2^-2
        {0.0999755859375f, 0x2E66},     // 0.1 rounded: (1 + 614/1024) * 2^-4
    };
    for (const Case& c : cases) {
        QCOMPARE(f32_to_f16(c.value), c.bits);
        QCOMPARE(bits_of(f16_to_f32(c.bits)), bits_of(c.value));
    }
    QCOMPARE(f32_to_f16(1.0f / 3.0f), std::uint16_t{0x3555});
    QCOMPARE(f32_to_f16(0.1f), std::uint16_t{0x2E66});
}

void TestTensorFormats::f16RoundsToNearestEven() {
    // Near 1.0 the half spacing is 2^-10. 1 + 2^-11 is exactly between 0x3C00 and 0x3C01: the
    // tie goes to the even mantissa 0x3C00. 1 + 3*2^-11 is between 0x3C01 and 0x3C02: to 0x3C02.
    QCOMPARE(f32_to_f16(1.0f + 0x1p-11f), std::uint16_t{0x3C00});
    QCOMPARE(f32_to_f16(1.0f + 3 * 0x1p-11f), std::uint16_t{0x3C02});
    QCOMPARE(f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), std::uint16_t{0x3C01});  // above the tie
    QCOMPARE(f32_to_f16(1.0f + 0x1p-11f - 0x1p-20f), std::uint16_t{0x3C00});  // below the tie
    QCOMPARE(f32_to_f16(-(1.0f + 3 * 0x1p-11f)), std::uint16_t{0xBC02});
    // Overflow: 65504 + 16 = 65520 is the tie between 0x7BFF (odd) and infinity: infinity.
    QCOMPARE(f32_to_f16(65519.0f), std::uint16_t{0x7BFF});
    QCOMPARE(f32_to_f16(65520.0f), std::uint16_t{0x7C00});
    QCOMPARE(f32_to_f16(-1.0e6f), std::uint16_t{0xFC00});
    // Subnormals are multiples of 2^-24. 2^-25 is the tie between 0 and 0x0001: to 0.
    // 3*2^-25 is the tie between 0x0001 and 0x0002: to 0x0002.
    QCOMPARE(f32_to_f16(0x1p-25f), std::uint16_t{0x0000});
    QCOMPARE(f32_to_f16(0x1p-25f + 0x1p-40f), std::uint16_t{0x0001});
    QCOMPARE(f32_to_f16(3 * 0x1p-25f), std::uint16_t{0x0002});
    QCOMPARE(f32_to_f16(0x1p-26f), std::uint16_t{0x0000});
    QCOMPARE(f32_to_f16(-0x1p-26f), std::uint16_t{0x8000});
    // 2^-14 - 2^-25 is the tie between the largest subnormal 0x03FF (odd) and the smallest
    // normal 0x0400: rounds up into the normal range.
    QCOMPARE(f32_to_f16(0x1p-14f - 0x1p-25f), std::uint16_t{0x0400});
    // Float subnormals are far below half's range.
    QCOMPARE(f32_to_f16(1e-40f), std::uint16_t{0x0000});
    QCOMPARE(f32_to_f16(-1e-40f), std::uint16_t{0x8000});
}

void TestTensorFormats::f16NanAndInfinity() {
    const float inf = std::numeric_limits<float>::infinity();
    QCOMPARE(f32_to_f16(inf), std::uint16_t{0x7C00});
    QCOMPARE(f32_to_f16(-inf), std::uint16_t{0xFC00});
    QCOMPARE(f16_to_f32(0x7C00), inf);
    QCOMPARE(f16_to_f32(0xFC00), -inf);

    const std::uint16_t quiet = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
    QCOMPARE(quiet & 0x7C00, 0x7C00);
    QVERIFY((quiet & 0x03FF) != 0);
    // A NaN whose payload is only in the low float bits must not collapse into infinity.
    const std::uint16_t low_payload = f32_to_f16(float_from_bits(0x7F800001u));
    QCOMPARE(low_payload & 0x7C00, 0x7C00);
    QVERIFY((low_payload & 0x03FF) != 0);
    // Sign kept.
    QCOMPARE(f32_to_f16(float_from_bits(0xFFC00000u)) & 0x8000, 0x8000);
    QVERIFY(std::isnan(f16_to_f32(0x7E00)));
    QVERIFY(std::isnan(f16_to_f32(0x7C01)));
    QVERIFY(std::signbit(f16_to_f32(0xFE00)));
}

void TestTensorFormats::f16RoundTripOfAll65536Values() {
    for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
        const auto half = static_cast<std::uint16_t>(h);
        const float f = f16_to_f32(half);
        const bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
        const bool is_inf = (h & 0x7FFF) == 0x7C00;
        if (is_nan) {
            QVERIFY2(std::isnan(f), qPrintable(QString::number(h, 16)));
        } else if (is_inf) {
            QVERIFY(std::isinf(f));
        } else if (static_cast<double>(f) != half_by_definition(half) ||
                   std::signbit(f) != ((h & 0x8000) != 0)) {
            QFAIL(qPrintable(QString("f16 0x%1 decodes to %2, by definition %3")
                                 .arg(h, 4, 16, QChar('0'))
                                 .arg(static_cast<double>(f), 0, 'g', 17)
                                 .arg(half_by_definition(half), 0, 'g', 17)));
        }
        // Every half, NaN payloads included, survives half -> float -> half unchanged.
        if (f32_to_f16(f) != half) {
            QFAIL(qPrintable(QString("f16 0x%1 round-trips to 0x%2")
                                 .arg(h, 4, 16, QChar('0'))
                                 .arg(f32_to_f16(f), 4, 16, QChar('0'))));
        }
    }
}

void TestTensorFormats::bf16KnownBitPatternsAndRounding() {
    QCOMPARE(f32_to_bf16(1.0f), std::uint16_t{0x3F80});
    QCOMPARE(f32_to_bf16(-2.0f), std::uint16_t{0xC000});
    QCOMPARE(f32_to_bf16(3.140625f), std::uint16_t{0x4049});  // exact: 0x40490000
    QCOMPARE(bf16_to_f32(0x4049), 3.140625f);
    QCOMPARE(bf16_to_f32(0xC049), -3.140625f);
    // pi = 0x40490FDB: the dropped half 0x0FDB is below 0x8000, so rounds down to 0x4049.
    QCOMPARE(f32_to_bf16(3.14159265f), std::uint16_t{0x4049});
    // Ties: 0x3F808000 is exactly between 0x3F80 (even) and 0x3F81 -> 0x3F80;
    // 0x3F818000 is between 0x3F81 and 0x3F82 (even) -> 0x3F82; just above a tie rounds up.
    QCOMPARE(f32_to_bf16(float_from_bits(0x3F808000u)), std::uint16_t{0x3F80});
    QCOMPARE(f32_to_bf16(float_from_bits(0x3F818000u)), std::uint16_t{0x3F82});
    QCOMPARE(f32_to_bf16(float_from_bits(0x3F808001u)), std::uint16_t{0x3F81});
    QCOMPARE(f32_to_bf16(float_from_bits(0xBF818000u)), std::uint16_t{0xBF82});
    // The largest float rounds up to infinity; infinity stays infinity.
    QCOMPARE(f32_to_bf16(std::numeric_limits<float>::max()), std::uint16_t{0x7F80});
    QCOMPARE(f32_to_bf16(std::numeric_limits<float>::infinity()), std::uint16_t{0x7F80});
    QCOMPARE(f32_to_bf16(-std::numeric_limits<float>::infinity()), std::uint16_t{0xFF80});
    // NaN stays NaN: rounding 0x7FFFFFFF up would overflow into the sign bit, and a payload
    // only in the low bits must not become infinity.
    QCOMPARE(f32_to_bf16(float_from_bits(0x7FC00000u)), std::uint16_t{0x7FC0});
    QCOMPARE(f32_to_bf16(float_from_bits(0xFFC00000u)), std::uint16_t{0xFFC0});
    const std::uint16_t max_payload = f32_to_bf16(float_from_bits(0x7FFFFFFFu));
    QVERIFY(std::isnan(bf16_to_f32(max_payload)) && !std::signbit(bf16_to_f32(max_payload)));
    QVERIFY(std::isnan(bf16_to_f32(f32_to_bf16(float_from_bits(0x7F800001u)))));
}

void TestTensorFormats::bf16RoundTripOfAll65536Values() {
    for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
        const auto bf = static_cast<std::uint16_t>(b);
        const float f = bf16_to_f32(bf);
        QCOMPARE(bits_of(f), b << 16);  // bf16 is the upper half of a float, by definition
        const bool is_nan = (b & 0x7F80) == 0x7F80 && (b & 0x007F) != 0;
        // Non-NaN values come back unchanged; NaNs come back as the same NaN made quiet.
        const std::uint16_t expected = is_nan ? static_cast<std::uint16_t>(b | 0x0040) : bf;
        if (f32_to_bf16(f) != expected) {
            QFAIL(qPrintable(QString("bf16 0x%1 round-trips to 0x%2")
                                 .arg(b, 4, 16, QChar('0'))
                                 .arg(f32_to_bf16(f), 4, 16, QChar('0'))));
        }
    }
}

// =============================================================================================
// Hand-built blocks. Byte offsets are those of the ggml block structs (ggml-common.h); the
// expected values are computed per element from the formula in the comment of each test.

void TestTensorFormats::handBuiltF32F16Bf16() {
    // F32: little-endian IEEE single. 1.5 = 0x3FC00000, -2 = 0xC0000000.
    const Bytes f32 = {0x00, 0x00, 0xC0, 0x3F, 0x00, 0x00, 0x00, 0xC0};
    QCOMPARE(dequantize(Type::F32, f32, 2), (std::vector<float>{1.5f, -2.0f}));
    // F16: 0x3C00 = 1, 0xC000 = -2, 0x7BFF = 65504, 0x0001 = 2^-24.
    const Bytes f16 = {0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B, 0x01, 0x00};
    QCOMPARE(dequantize(Type::F16, f16, 4), (std::vector<float>{1.0f, -2.0f, 65504.0f, 0x1p-24f}));
    // BF16: 0x3F80 = 1, 0xC049 = -3.140625.
    const Bytes bf16 = {0x80, 0x3F, 0x49, 0xC0};
    QCOMPARE(dequantize(Type::BF16, bf16, 2), (std::vector<float>{1.0f, -3.140625f}));

    // And the reverse direction writes the same bytes.
    Bytes out(8);
    const float f16_values[] = {1.0f, -2.0f, 65504.0f, 0x1p-24f};
    quantize_row(Type::F16, f16_values, out.data(), 4);
    QCOMPARE(out, f16);
    out.assign(4, 0);
    const float bf16_values[] = {1.0f, -3.140625f};
    quantize_row(Type::BF16, bf16_values, out.data(), 2);
    QCOMPARE(out, bf16);
}

// Q4_0 (18 bytes: f16 d, qs[16]). Element j < 16 is the low nibble of qs[j], element j + 16 the
// high nibble of qs[j]; value = d * (nibble - 8).
void TestTensorFormats::handBuiltQ4_0() {
    Bytes block(18);
    put_u16(block, 0, kHalfQuarter);  // d = 0.25
    int q[32];
    for (int j = 0; j < 16; ++j) {
        q[j] = j;            // low nibbles 0..15
        q[j + 16] = 15 - j;  // high nibbles 15..0
        block[2 + j] = static_cast<std::uint8_t>(q[j] | (q[j + 16] << 4));
    }
    std::vector<double> expected(32);
    for (int e = 0; e < 32; ++e) expected[e] = 0.25 * (q[e] - 8);
    const std::vector<float> got = dequantize(Type::Q4_0, block, 32);
    QVERIFY2(first_difference(got, expected).empty(), first_difference(got, expected).c_str());
    // By hand: qs[0] = 0xF0 -> element 0 = 0.25*(0-8) = -2, element 16 = 0.25*(15-8) = 1.75;
    // qs[15] = 0x0F -> element 15 = 0.25*(15-8) = 1.75, element 31 = 0.25*(0-8) = -2.
    QCOMPARE(block[2], std::uint8_t{0xF0});
    QCOMPARE(got[0], -2.0f);
    QCOMPARE(got[16], 1.75f);
    QCOMPARE(got[15], 1.75f);
    QCOMPARE(got[31], -2.0f);
}

// Q4_1 (20 bytes: f16 d, f16 m, qs[16]). Nibbles as in Q4_0; value = d * nibble + m.
void TestTensorFormats::handBuiltQ4_1() {
    Bytes block(20);
    put_u16(block, 0, kHalfHalf);        // d = 0.5
    put_u16(block, 2, kHalfMinusThree);  // m = -3
    int q[32];
    for (int j = 0; j < 16; ++j) {
        q[j] = (j * 7) % 16;
        q[j + 16] = (j * 5 + 3) % 16;
        block[4 + j] = static_cast<std::uint8_t>(q[j] | (q[j + 16] << 4));
    }
    std::vector<double> expected(32);
    for (int e = 0; e < 32; ++e) expected[e] = 0.5 * q[e] - 3.0;
    const std::vector<float> got = dequantize(Type::Q4_1, block, 32);
    QVERIFY2(first_difference(got, expected).empty(), first_difference(got, expected).c_str());
    // By hand: q[1] = 7 -> 0.5*7 - 3 = 0.5; q[16] = 3 -> -1.5; q[18] = 13 -> 3.5.
    QCOMPARE(got[1], 0.5f);
    QCOMPARE(got[16], -1.5f);
    QCOMPARE(got[18], 3.5f);
}

// Q5_0 (22 bytes: f16 d, qh[4], qs[16]). Low 4 bits as in Q4_0; bit 4 of element e is bit e of
// the little-endian 32-bit word qh; value = d * (q - 16).
void TestTensorFormats::handBuiltQ5_0() {
    Bytes block(22);
    put_u16(block, 0, kHalfEighth);  // d = 0.125
    const std::uint32_t qh = 0xA5A5F00Fu;
    for (int i = 0; i < 4; ++i) block[2 + i] = static_cast<std::uint8_t>(qh >> (8 * i));
    int q[32];
    for (int j = 0; j < 16; ++j) {
        block[6 + j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
        q[j] = j | static_cast<int>(((qh >> j) & 1) << 4);
        q[j + 16] = (15 - j) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
    }
    std::vector<double> expected(32);
    for (int e = 0; e < 32; ++e) expected[e] = 0.125 * (q[e] - 16);
    const std::vector<float> got = dequantize(Type::Q5_0, block, 32);
    QVERIFY2(first_difference(got, expected).empty(), first_difference(got, expected).c_str());
    // By hand: element 0: nibble 0, qh bit 0 = 1 -> q = 16 -> 0.
    // Element 4: nibble 4, qh bit 4 = 0 (0x0F) -> q = 4 -> 0.125*(4-16) = -1.5.
    // Element 16: nibble 15, qh bit 16 = bit 0 of byte 0xA5 = 1 -> q = 31 -> 1.875.
    // Element 17: nibble 14, qh bit 17 = bit 1 of 0xA5 = 0 -> q = 14 -> -0.25.
    QCOMPARE(got[0], 0.0f);
    QCOMPARE(got[4], -1.5f);
    QCOMPARE(got[16], 1.875f);
    QCOMPARE(got[17], -0.25f);
}

// Q5_1 (24 bytes: f16 d, f16 m, qh[4], qs[16]). Bits as in Q5_0; value = d * q + m.
void TestTensorFormats::handBuiltQ5_1() {
    Bytes block(24);
    put_u16(block, 0, kHalfQuarter);  // d = 0.25
    put_u16(block, 2, kHalfOne);      // m = 1
    const std::uint32_t qh = 0xA5A5F00Fu;
    for (int i = 0; i < 4; ++i) block[4 + i] = static_cast<std::uint8_t>(qh >> (8 * i));
    int q[32];
    for (int j = 0; j < 16; ++j) {
        block[8 + j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
        q[j] = j | static_cast<int>(((qh >> j) & 1) << 4);
        q[j + 16] = (15 - j) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
    }
    std::vector<double> expected(32);
    for (int e = 0; e < 32; ++e) expected[e] = 0.25 * q[e] + 1.0;
    const std::vector<float> got = dequantize(Type::Q5_1, block, 32);
    QVERIFY2(first_difference(got, expected).empty(), first_difference(got, expected).c_str());
    // By hand (q as in the Q5_0 test): element 0: q = 16 -> 5; element 4: q = 4 -> 2;
    // element 16: q = 31 -> 8.75.
    QCOMPARE(got[0], 5.0f);
    QCOMPARE(got[4], 2.0f);
    QCOMPARE(got[16], 8.75f);
}

// Q8_0 (34 bytes: f16 d, int8 qs[32]); value = d * q.
void TestTensorFormats::handBuiltQ8_0() {
    Bytes block(34);
    put_u16(block, 0, kHalfHalf);  // d = 0.5
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = j * 8 - 124;  // -124 .. 124
    q[5] = -128;                                      // the full int8 range must decode
    q[6] = 127;
    for (int j = 0; j < 32; ++j) block[2 + j] = static_cast<std::uint8_t>(q[j] & 0xFF);
    std::vector<double> expected(32);
    for (int e = 0; e < 32; ++e) expected[e] = 0.5 * q[e];
    const std::vector<float> got = dequantize(Type::Q8_0, block, 32);
    QVERIFY2(first_difference(got, expected).empty(), first_difference(got, expected).c_str());
    // By hand: byte 0x84 = -124 -> -62; 0x80 = -128 -> -64; 0x7F = 127 -> 63.5; 124 -> 62.
    QCOMPARE(got[0], -62.0f);
    QCOMPARE(got[5], -64.0f);
    QCOMPARE(got[6], 63.5f);
    QCOMPARE(got[31], 62.0f);
}

// Q2_K (84 bytes: scales[16] @0, qs[64] @16, f16 d @80, f16 dmin @82). 16 sub-blocks of 16:
// element e of sub-block s = e/16 is d * sc_s * q_e - dmin * m_s, with scales[s] = sc_s | m_s<<4
// and the 2-bit q_e at bit 2*((e%128)/32) of qs[32*(e/128) + e%32].
void TestTensorFormats::handBuiltQ2_K() {
    Bytes block(84);
    put_u16(block, 80, kHalfHalf);     // d = 0.5
    put_u16(block, 82, kHalfQuarter);  // dmin = 0.25
    int sc[16], m[16], q[256];
    for (int s = 0; s < 16; ++s) {
        sc[s] = 15 - s;
        m[s] = s;
        block[s] = static_cast<std::uint8_t>(sc[s] | (m[s] << 4));
    }
    for (int e = 0; e < 256; ++e) {
        q[e] = (3 * e + e / 32) % 4;
        block[16 + 32 * (e / 128) + e % 32] |=
            static_cast<std::uint8_t>(q[e] << (2 * ((e % 128) / 32)));
    }
    std::vector<double> expected(256);
    for (int e = 0; e < 256; ++e) expected[e] = 0.5 * sc[e / 16] * q[e] - 0.25 * m[e / 16];
    const std::vector<float> got = dequantize(Type::Q2_K, block, 256);
    QVERIFY2(first_difference(got, expected).empty(), first_difference(got, expected).c_str());
    // By hand: e = 1: q = 3, s = 0 (sc 15, m 0) -> 0.5*15*3 = 22.5.
    // e = 200: q = (600+6)%4 = 2, s = 12 (sc 3, m 12) -> 0.5*3*2 - 0.25*12 = 0.
    // e = 255: q = (765+7)%4 = 0, s = 15 (sc 0, m 15) -> -3.75.
    // e = 100: q = (300+3)%4 = 3, s = 6 (sc 9, m 6) -> 13.5 - 1.5 = 12.
    QCOMPARE(got[1], 22.5f);
    QCOMPARE(got[200], 0.0f);
    QCOMPARE(got[255], -3.75f);
    QCOMPARE(got[100], 12.0f);
}

// Q3_K (110 bytes: hmask[32] @0, qs[64] @32, scales[12] @96, f16 d @108). 16 sub-blocks of 16:
// element e of sub-block s = e/16 is d * (u_s - 32) * q_e with q_e in [-4, 3] stored as
// q_e + 4: its low 2 bits as in Q2_K, its bit 2 as bit e/32 of hmask[e%32]. The 6-bit u_s: low
// 4 bits in scales[s%8] (low nibble for s < 8, high nibble for s >= 8), top 2 bits in
// scales[8 + s%4] at bit 2*(s/4).
void TestTensorFormats::handBuiltQ3_K() {
    Bytes block(110);
    put_u16(block, 108, kHalfQuarter);  // d = 0.25
    const int u[16] = {0, 63, 5, 17, 32, 40, 48, 9, 21, 33, 45, 57, 2, 14, 26, 38};
    for (int s = 0; s < 16; ++s) {
        block[96 + s % 8] |= static_cast<std::uint8_t>((u[s] & 0xF) << (s < 8 ? 0 : 4));
        block[96 + 8 + s % 4] |= static_cast<std::uint8_t>((u[s] >> 4) << (2 * (s / 4)));
    }
    int q[256];
    for (int e = 0; e < 256; ++e) {
        q[e] = (5 * e + e / 32) % 8 - 4;
        const int stored = q[e] + 4;
        block[32 + 32 * (e / 128) + e % 32] |=
            static_cast<std::uint8_t>((stored & 3) << (2 * ((e % 128) / 32)));
        if (stored & 4) block[e % 32] |= static_cast<std::uint8_t>(1 << (e / 32));
    }
    std::vector<double> expected(256);
    for (int e = 0; e < 256; ++e) expected[e] = 0.25 * (u[e / 16] - 32) * q[e];
    const std::vector<float> got = dequantize(Type::Q3_K, block, 256);
    QVERIFY2(first_difference(got, expected).empty(), first_difference(got, expected).c_str());
    // By hand: e = 0: q = 0%8 - 4 = -4, s = 0 (u 0 -> scale -32) -> 0.25*-32*-4 = 32.
    // e = 17: q = 85%8 - 4 = 1, s = 1 (u 63 -> 31) -> 7.75.
    // e = 130: q = (650+4)%8 - 4 = 2, s = 8 (u 21 -> -11) -> -5.5.
    // e = 255: q = (1275+7)%8 - 4 = -2, s = 15 (u 38 -> 6) -> -3.
    QCOMPARE(got[0], 32.0f);
    QCOMPARE(got[17], 7.75f);
    QCOMPARE(got[130], -5.5f);
    QCOMPARE(got[255], -3.0f);
    // The scale bytes for that choice of u, worked by hand: scales[0] = (u0 & 15) | (u8 & 15)<<4
    // = 0 | 5<<4 = 0x50; scales[8] holds the top bits of u0, u4, u8, u12 = 0, 2, 1, 0 -> 0x18.
    QCOMPARE(block[96], std::uint8_t{0x50});
    QCOMPARE(block[104], std::uint8_t{0x18});
}

namespace {

// Q4_K / Q5_K 6-bit scales and mins in 12 bytes (ggml's get_scale_min_k4, read backwards):
// for j < 4, sc_j is the low 6 bits of byte j and m_j the low 6 bits of byte j+4; for j >= 4,
// sc_j = (low nibble of byte j+4) | (top 2 bits of byte j-4) << 4 and
// m_j = (high nibble of byte j+4) | (top 2 bits of byte j) << 4.
void put_k4_scales(Bytes& block, std::size_t offset, const int (&sc)[8], const int (&m)[8]) {
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            block[offset + j] |= static_cast<std::uint8_t>(sc[j]);
            block[offset + j + 4] |= static_cast<std::uint8_t>(m[j]);
        } else {
            block[offset + j + 4] |= static_cast<std::uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
            block[offset + j - 4] |= static_cast<std::uint8_t>((sc[j] >> 4) << 6);
            block[offset + j] |= static_cast<std::uint8_t>((m[j] >> 4) << 6);
        }
    }
}

}  // namespace

// Q4_K (144 bytes: f16 d @0, f16 dmin @2, scales[12] @4, qs[128] @16). 8 sub-blocks of 32:
// element e of sub-block s = e/32 is d * sc_s * q_e - dmin * m_s; q_e is the low nibble of
// qs[32*(e/64) + e%32] when s is even, the high nibble when s is odd.
void TestTensorFormats::handBuiltQ4_K() {
    Bytes block(144);
    put_u16(block, 0, kHalfEighth);  // d = 0.125
    put_u16(block, 2, kHalfHalf);    // dmin = 0.5
    const int sc[8] = {63, 1, 32, 17, 48, 5, 60, 33};
    const int m[8] = {0, 63, 12, 40, 7, 55, 20, 31};
    put_k4_scales(block, 4, sc, m);
    int q[256];
    for (int e = 0; e < 256; ++e) {
        q[e] = (11 * e + e / 32) % 16;
        block[16 + 32 * (e / 64) + e % 32] |=
            static_cast<std::uint8_t>(q[e] << (4 * ((e / 32) % 2)));
    }
    std::vector<double> expected(256);
    for (int e = 0; e < 256; ++e) expected[e] = 0.125 * sc[e / 32] * q[e] - 0.5 * m[e / 32];
    const std::vector<float> got = dequantize(Type::Q4_K, block, 256);
    QVERIFY2(first_difference(got, expected).empty(), first_difference(got, expected).c_str());
    // By hand: e = 1: q = 11, s = 0 (sc 63, m 0) -> 0.125*63*11 = 86.625.
    // e = 40: q = (440+1)%16 = 9, s = 1 (sc 1, m 63) -> 1.125 - 31.5 = -30.375.
    // e = 200: q = (2200+6)%16 = 14, s = 6 (sc 60, m 20) -> 105 - 10 = 95.
    // e = 255: q = (2805+7)%16 = 12, s = 7 (sc 33, m 31) -> 49.5 - 15.5 = 34.
    QCOMPARE(got[1], 86.625f);
    QCOMPARE(got[40], -30.375f);
    QCOMPARE(got[200], 95.0f);
    QCOMPARE(got[255], 34.0f);
    // Scale bytes by hand: byte 0 = sc0 | (sc4 >> 4) << 6 = 63 | 3<<6 = 0xFF;
    // byte 8 = (sc4 & 15) | (m4 & 15) << 4 = 0 | 7<<4 = 0x70.
    QCOMPARE(block[4], std::uint8_t{0xFF});
    QCOMPARE(block[12], std::uint8_t{0x70});
}

// Q5_K (176 bytes: f16 d @0, f16 dmin @2, scales[12] @4, qh[32] @16, qs[128] @48). As Q4_K, with
// bit 4 of q_e stored as bit s of qh[e%32].
void TestTensorFormats::handBuiltQ5_K() {
    Bytes block(176);
    put_u16(block, 0, kHalfSixteenth);  // d = 0.0625
    put_u16(block, 2, kHalfQuarter);    // dmin = 0.25
    const int sc[8] = {5, 63, 16, 47, 31, 8, 52, 19};
    const int m[8] = {63, 0, 33, 4, 26, 61, 15, 48};
    put_k4_scales(block, 4, sc, m);
    int q[256];
    for (int e = 0; e < 256; ++e) {
        q[e] = (13 * e + e / 32) % 32;
        const int s = e / 32;
        block[48 + 32 * (e / 64) + e % 32] |=
            static_cast<std::uint8_t>((q[e] & 0xF) << (4 * (s % 2)));
        if (q[e] & 16) block[16 + e % 32] |= static_cast<std::uint8_t>(1 << s);
    }
    std::vector<double> expected(256);
    for (int e = 0; e < 256; ++e) expected[e] = 0.0625 * sc[e / 32] * q[e] - 0.25 * m[e / 32];
    const std::vector<float> got = dequantize(Type::Q5_K, block, 256);
    QVERIFY2(first_difference(got, expected).empty(), first_difference(got, expected).c_str());
    // By hand: e = 2: q = 26, s = 0 (sc 5, m 63) -> 0.0625*5*26 - 0.25*63 = 8.125 - 15.75 = -7.625.
    // e = 33: q = (429+1)%32 = 14, s = 1 (sc 63, m 0) -> 55.125.
    // e = 250: q = (3250+7)%32 = 25, s = 7 (sc 19, m 48) -> 29.6875 - 12 = 17.6875.
    QCOMPARE(got[2], -7.625f);
    QCOMPARE(got[33], 55.125f);
    QCOMPARE(got[250], 17.6875f);
}

// Q6_K (210 bytes: ql[128] @0, qh[64] @128, int8 scales[16] @192, f16 d @208). 16 sub-blocks
// of 16: element e of sub-block s = e/16 is d * scales[s] * (u_e - 32) with u_e 6 bits. Writing
// e = 128n + 32k + l: the low 4 bits of u_e are in ql[64n + 32*(k%2) + l] (low nibble for k < 2,
// high nibble for k >= 2) and the top 2 bits in qh[32n + l] at bit 2k.
void TestTensorFormats::handBuiltQ6_K() {
    Bytes block(210);
    put_u16(block, 208, kHalfSixteenth);  // d = 0.0625
    const int sc[16] = {-128, 127, -1, 5, 64, -64, 17, -33, 100, -100, 1, 0, 33, -17, 90, -90};
    for (int s = 0; s < 16; ++s) block[192 + s] = static_cast<std::uint8_t>(sc[s] & 0xFF);
    int u[256];
    for (int e = 0; e < 256; ++e) {
        u[e] = (7 * e + e / 16) % 64;
        const int n = e / 128, k = (e % 128) / 32, l = e % 32;
        block[64 * n + 32 * (k % 2) + l] |=
            static_cast<std::uint8_t>((u[e] & 0xF) << (k < 2 ? 0 : 4));
        block[128 + 32 * n + l] |= static_cast<std::uint8_t>((u[e] >> 4) << (2 * k));
    }
    std::vector<double> expected(256);
    for (int e = 0; e < 256; ++e) expected[e] = 0.0625 * sc[e / 16] * (u[e] - 32);
    const std::vector<float> got = dequantize(Type::Q6_K, block, 256);
    QVERIFY2(first_difference(got, expected).empty(), first_difference(got, expected).c_str());
    // By hand: e = 0: u = 0, s = 0 (-128) -> 0.0625*-128*-32 = 256.
    // e = 20: u = (140+1)%64 = 13, s = 1 (127) -> 0.0625*127*-19 = -150.8125.
    // e = 100: u = (700+6)%64 = 2, s = 6 (17) -> 0.0625*17*-30 = -31.875.
    // e = 255: u = (1785+15)%64 = 8, s = 15 (-90) -> 0.0625*-90*-24 = 135.
    QCOMPARE(got[0], 256.0f);
    QCOMPARE(got[20], -150.8125f);
    QCOMPARE(got[100], -31.875f);
    QCOMPARE(got[255], 135.0f);
}

// Two blocks of each format filled with pseudo-random bytes (the f16 scale fields set to fixed
// finite values), dequantized by gguf-py 0.19.0 (llama.cpp's Python package, gguf/quants.py):
// the FNV-1a 64-bit hash of the little-endian float32 output bits and four of the values,
// recorded once with
//   raw = lcg_bytes(0x9E3779B9 ^ type_id, 2 * bytes_per_block); set the scale fields;
//   out = gguf.quants.dequantize(np.frombuffer(raw, np.uint8), type).astype(np.float32)
// A bit-exact match means our layouts and arithmetic order are those of llama.cpp.
void TestTensorFormats::pseudoRandomBlocksMatchGgufPy() {
    struct Golden {
        Type type;
        std::uint64_t fnv1a;
        float samples[4];  // elements 0, 1, n/2 + 3, n - 1
    };
    const Golden golden[] = {
        {Type::Q4_0,
         0x63CF9C8E26D70A2Bull,
         {1.19970703f, -0.999755859f, -0.799804688f, -0.999755859f}},
        {Type::Q4_1, 0x9D92601E5F9DB441ull, {0.075012207f, 1.07476807f, 1.27471924f, 1.27471924f}},
        {Type::Q5_0, 0x8AD53C185E64F111ull, {2.39941406f, 1.19970703f, -1.3996582f, 1.79956055f}},
        {Type::Q5_1, 0x6F59FA90AF855A30ull, {2.2744751f, 4.27398682f, 6.27349854f, 0.274963379f}},
        {Type::Q8_0, 0xF215898D475CDCDEull, {-11.7971191f, 3.99902344f, 5.79858398f, 18.1955566f}},
        {Type::Q2_K,
         0x5BF600A526E07B48ull,
         {0.899658203f, 0.499755859f, -0.825134277f, -0.450073242f}},
        {Type::Q3_K, 0x873396F8BBEAE4D4ull, {-21.5947266f, -5.39868164f, 8.39794922f, 10.3974609f}},
        {Type::Q4_K, 0x9984CD07BE785994ull, {84.2537231f, 118.645325f, 14.4960938f, 93.9502563f}},
        {Type::Q5_K, 0xEA75E0E2B46E4FBDull, {-1.57525635f, -1.57525635f, 210.973083f, 16.6448975f}},
        {Type::Q6_K, 0x962D98F82D1ECEB5ull, {34.3916016f, 171.958008f, 176.356934f, 331.119141f}},
    };
    // Offsets of the f16 fields in each block: the first is set to 0x3266 (~0.2), the second
    // (dmin or m) to 0x2CCD (~0.075), so that no random byte pair makes an infinite scale.
    auto half_offsets = [](Type t) -> std::vector<std::size_t> {
        switch (t) {
            case Type::Q4_1:
            case Type::Q5_1:
            case Type::Q4_K:
            case Type::Q5_K:
                return {0, 2};
            case Type::Q2_K:
                return {80, 82};
            case Type::Q3_K:
                return {108};
            case Type::Q6_K:
                return {208};
            default:
                return {0};
        }
    };
    const std::uint16_t half_values[] = {0x3266, 0x2CCD};

    for (const Golden& g : golden) {
        const TypeTraits& t = traits(g.type);
        const std::int64_t n = 2 * t.block_size;
        Bytes raw(2 * t.bytes_per_block);
        std::uint32_t state = 0x9E3779B9u ^ static_cast<std::uint32_t>(g.type);
        for (auto& byte : raw) {
            state = state * 1664525u + 1013904223u;  // Numerical Recipes LCG, top byte
            byte = static_cast<std::uint8_t>(state >> 24);
        }
        for (std::size_t b = 0; b < 2; ++b) {
            const auto offsets = half_offsets(g.type);
            for (std::size_t i = 0; i < offsets.size(); ++i) {
                put_u16(raw, b * t.bytes_per_block + offsets[i], half_values[i]);
            }
        }
        const std::vector<float> got = dequantize(g.type, raw, n);
        std::uint64_t hash = 0xcbf29ce484222325ull;
        for (float v : got) {
            const std::uint32_t bits = bits_of(v);
            for (int k = 0; k < 4; ++k) {
                hash ^= (bits >> (8 * k)) & 0xFF;
                hash *= 0x100000001b3ull;
            }
        }
        const std::size_t idx[4] = {0, 1, static_cast<std::size_t>(n / 2 + 3),
                                    static_cast<std::size_t>(n - 1)};
        for (int k = 0; k < 4; ++k) {
            QVERIFY2(got[idx[k]] == g.samples[k],
                     qPrintable(QString("%1 element %2: got %3, gguf-py %4")
                                    .arg(t.name)
                                    .arg(idx[k])
                                    .arg(static_cast<double>(got[idx[k]]), 0, 'g', 9)
                                    .arg(static_cast<double>(g.samples[k]), 0, 'g', 9)));
        }
        QVERIFY2(hash == g.fnv1a,
                 qPrintable(QString("%1: output differs from gguf-py").arg(t.name)));
    }
}

// =============================================================================================
// quantize -> dequantize

namespace {

struct RowError {
    double max_abs = 0;
    double relative_rms = 0;  // rms(error) / rms(x)
};

RowError measure(const std::vector<float>& x, const std::vector<float>& y) {
    RowError r;
    double error_sq = 0, x_sq = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double e = static_cast<double>(y[i]) - x[i];
        r.max_abs = std::max(r.max_abs, std::fabs(e));
        error_sq += e * e;
        x_sq += static_cast<double>(x[i]) * x[i];
    }
    r.relative_rms = std::sqrt(error_sq / x_sq);
    return r;
}

std::string legacy_block_violation(Type type, const float* x, const float* y) {
    double amax = 0, lo = x[0], hi = x[0];
    for (int i = 0; i < 32; ++i) {
        amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
        lo = std::min(lo, static_cast<double>(x[i]));
        hi = std::max(hi, static_cast<double>(x[i]));
    }
    for (int i = 0; i < 32; ++i) {
        const double ax = std::fabs(static_cast<double>(x[i]));
        double bound = 0;
        switch (type) {
            case Type::Q8_0:
                bound = amax / 127 / 2 + 0x1p-10 * amax;
                break;
            case Type::Q4_0:
                bound = amax / 8 / 2 + std::max(0.0, ax - 7.5 * amax / 8) + 0x1p-10 * amax;
                break;
            case Type::Q5_0:
                bound = amax / 16 / 2 + std::max(0.0, ax - 15.5 * amax / 16) + 0x1p-10 * amax;
                break;
            case Type::Q4_1:
                bound = (hi - lo) / 15 / 2 + 0x1p-10 * (std::fabs(lo) + std::fabs(hi));
                break;
            case Type::Q5_1:
                bound = (hi - lo) / 31 / 2 + 0x1p-10 * (std::fabs(lo) + std::fabs(hi));
                break;
            default:
                return "not a legacy format";
        }
        const double err = std::fabs(static_cast<double>(y[i]) - x[i]);
        if (err > bound) {
            return "element " + std::to_string(i) + ": x = " + std::to_string(x[i]) + ", got " +
                   std::to_string(y[i]) + ", error " + std::to_string(err) + " > bound " +
                   std::to_string(bound);
        }
    }
    return {};
}

// Bounds on rms(error)/rms(x) for the K-quants. A uniform quantizer with step D has an rms
// error of about D/sqrt(12); per format, for N(0,1) data:
//  Q6_K: 16-element sub-blocks, 64 levels, step ~ max|x|/32; E[max|x|] over 16 normals is
//        ~1.95, so D ~ 0.061, rms error ~ 0.0176 -> bound 0.02.
//  Q5_K: 32-element sub-blocks, 32 levels over the range (~4.1 for 32 normals): D ~ 0.132,
//        ~0.038 -> bound 0.045.
//  Q4_K: as Q5_K with 16 levels: D ~ 0.27, ~0.079 -> bound 0.09.
//  Q3_K: 16-element sub-blocks, 8 levels, step ~ max|x|/4 ~ 0.49: ~0.14 -> bound 0.17.
//  Q2_K: 16-element sub-blocks, 4 levels over the range (~3.5): D ~ 1.18, ~0.34 -> bound 0.34
//        (the least-squares fit of scale and min does better than this estimate).
// The estimates ignore the quantization of the sub-block scales (6/8 bits: < 1% of the step),
// and uniform data (smaller range relative to its rms) comes out lower. With outliers, the
// sub-block holding one is quantized with a step 10x larger, so those bounds are raised 1.5x.
double kquant_relative_rms_bound(Type type) {
    switch (type) {
        case Type::Q6_K:
            return 0.02;
        case Type::Q5_K:
            return 0.045;
        case Type::Q4_K:
            return 0.09;
        case Type::Q3_K:
            return 0.17;
        case Type::Q2_K:
            return 0.34;
        default:
            return 0;
    }
}

}  // namespace

void TestTensorFormats::quantizeRoundTripError_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("distribution");
    const Distribution distributions[] = {Distribution::Normal, Distribution::Uniform,
                                          Distribution::SmallNormal,
                                          Distribution::SmallNormalWithOutliers};
    for (const TypeTraits& t : all_types()) {
        for (Distribution d : distributions) {
            QTest::addRow("%s %s", t.name, distribution_name(d))
                << static_cast<int>(t.type) << static_cast<int>(d);
        }
    }
}

void TestTensorFormats::quantizeRoundTripError() {
    QFETCH(int, type);
    QFETCH(int, distribution);
    const Type t = static_cast<Type>(type);
    const auto dist = static_cast<Distribution>(distribution);
    constexpr std::size_t n = 4096;
    const std::vector<float> x = random_row(
        dist, n,
        1234u + static_cast<std::uint32_t>(type) * 7u + static_cast<std::uint32_t>(distribution));

    Bytes blocks(row_bytes(t, n), 0xCD);  // garbage first: the quantizer must write every byte
    quantize_row(t, x.data(), blocks.data(), n);
    std::vector<float> y(n);
    dequantize_row(t, blocks.data(), y.data(), n);
    const RowError err = measure(x, y);
    qInfo("%s on %s: max |error| %.3g, rms(error)/rms(x) %.4f", type_name(t),
          distribution_name(dist), err.max_abs, err.relative_rms);

    switch (t) {
        case Type::F32:
            QCOMPARE(y, x);
            break;
        case Type::F16:
        case Type::BF16: {
            // Round to nearest: half an ulp, 2^-11 relative for f16 (11-bit significand), 2^-8
            // for bf16 (8-bit significand); f16 subnormals (|x| < 2^-14) have a fixed half-ulp
            // of 2^-25.
            const double relative = t == Type::F16 ? 0x1p-11 : 0x1p-8;
            for (std::size_t i = 0; i < n; ++i) {
                const double bound =
                    std::max(relative * std::fabs(x[i]), t == Type::F16 ? 0x1p-25 : 0.0);
                QVERIFY2(std::fabs(static_cast<double>(y[i]) - x[i]) <= bound,
                         qPrintable(QString("element %1").arg(i)));
            }
            break;
        }
        case Type::Q8_0:
        case Type::Q4_0:
        case Type::Q4_1:
        case Type::Q5_0:
        case Type::Q5_1:
            for (std::size_t b = 0; b < n / 32; ++b) {
                const std::string violation = legacy_block_violation(t, &x[32 * b], &y[32 * b]);
                QVERIFY2(violation.empty(),
                         qPrintable(QString("block %1: %2").arg(b).arg(violation.c_str())));
            }
            break;
        default: {
            double bound = kquant_relative_rms_bound(t);
            if (dist == Distribution::SmallNormalWithOutliers) bound *= 1.5;
            QVERIFY2(
                err.relative_rms < bound,
                qPrintable(
                    QString("rms(error)/rms(x) = %1, bound %2").arg(err.relative_rms).arg(bound)));
            // Every element is reconstructed to within its sub-block's range: no stray codes.
            QVERIFY2(err.max_abs < 0.5 * (*std::max_element(x.begin(), x.end()) -
                                          *std::min_element(x.begin(), x.end())),
                     "an element came back far from its value");
            break;
        }
    }

    // Quantizing is deterministic: the same input gives the same bytes.
    Bytes again(blocks.size(), 0x00);
    quantize_row(t, x.data(), again.data(), n);
    QVERIFY(again == blocks);
}

void TestTensorFormats::quantizeAllZeroRowGivesZeros() {
    // A zero block has no scale to divide by; the quantizers must not produce NaN from 0/0.
    for (const TypeTraits& t : all_types()) {
        const std::int64_t n = 2 * 256;
        const std::vector<float> zeros(n, 0.0f);
        Bytes blocks(row_bytes(t.type, n), 0xCD);
        quantize_row(t.type, zeros.data(), blocks.data(), n);
        std::vector<float> y(n, 1.0f);
        dequantize_row(t.type, blocks.data(), y.data(), n);
        for (std::int64_t i = 0; i < n; ++i) {
            QVERIFY2(y[i] == 0.0f, qPrintable(QString("%1 element %2 = %3")
                                                  .arg(t.name)
                                                  .arg(i)
                                                  .arg(static_cast<double>(y[i]))));
        }
    }
}

QTEST_APPLESS_MAIN(TestTensorFormats)
#include "test_tensor_formats.moc"
