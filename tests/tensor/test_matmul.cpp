// Tests of the CPU matmul kernels (engine/tensor/matmul.h) for every weight format at every
// SIMD level this CPU has.
//
// Expected values are computed here, in float64, from the dequantized weights (dequantize_row,
// itself tested against gguf-py in test_tensor_formats) and the activations:
//   * exact activations: the kernels quantize activations to int8 blocks, so the result may
//     differ by the rounding of each activation, |x - x'| <= d_a / 2 with d_a = max|block| / 127.
//     The bound checked per output is sum_k |w_k| * d_a(k) / 2 (plus float rounding), which
//     holds for any data. The whole-vector error ||got - ref|| / ||ref|| is also checked
//     against its statistical prediction: the roundings are independent and uniform, so the
//     error of output o has variance sum_k w_k^2 d_a(k)^2 / 12, and the realized norm over
//     the >= 9 outputs of a case stays well within 2x of the predicted one. (A fixed bound
//     such as 1e-2 is not meaningful: it depends on the data. With these activations, normal
//     with an 8x outlier every 97 elements, the prediction is 0.5-3%; for the weights made by
//     quantize_row it is about 1%.)
//   * quantized activations: the test quantizes the activations itself (same rule: d = amax/127,
//     q = round-to-nearest-even(x / d), implemented here, not taken from the engine) and the
//     only remaining error is float rounding: |err| <= 2e-5 * sum |w_k x'_k| per output.
//     (The kernels sum integer products exactly and accumulate at most a few hundred floats in
//     each lane, so their rounding error is a few hundred ulps of sum |w x| at worst: 2e-5
//     has a wide margin, yet a wrong sub-block scale or a misplaced bit fails it by orders.)
//   * every SIMD level against the scalar kernels, same bound: they compute the same integer
//     sums and differ only in the order of float additions.
//   * the AVX2 prefill panels (16 tokens or more, weights other than F32) multiply f32 weights
//     decoded from the blocks by the exact f32 activations, so they are checked against the
//     exact-activation reference with the rounding bound of a recursive f32 sum (see
//     check_case) instead of the two bounds above.
// Weights are random bytes with sane random scales (covering every code, including -128 in
// Q8_0 and the extreme 6-bit values of the K-quants) and, separately, quantize_row() output.
#include <QObject>
#include <QtTest>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tensor/block_layouts.h"
#include "tensor/f16.h"
#include "tensor/matmul.h"
#include "tensor/matmul_bench.h"
#include "tensor/type.h"
#include "util/cpu_features.h"
#include "util/error.h"

using tokenscope::InvalidArgument;
using namespace tokenscope::tensor;

namespace {

class Random {
  public:
    explicit Random(std::uint32_t seed) : gen_(seed) {}
    std::uint32_t bits() { return gen_(); }
    double open_unit() { return (static_cast<double>(gen_() >> 8) + 0.5) * 0x1p-24; }
    double uniform(double lo, double hi) { return lo + (hi - lo) * open_unit(); }
    double normal() {
        const double r = std::sqrt(-2.0 * std::log(open_unit()));
        return r * std::cos(2.0 * std::numbers::pi * open_unit());
    }

  private:
    std::mt19937 gen_;
};

using Bytes = std::vector<std::uint8_t>;

void put_half(Bytes& bytes, std::size_t offset, float value) {
    const std::uint16_t h = f32_to_f16(value);
    bytes[offset] = static_cast<std::uint8_t>(h & 0xFF);
    bytes[offset + 1] = static_cast<std::uint8_t>(h >> 8);
}

struct ScaleField {
    std::size_t offset;
    bool may_be_negative;
};

// Where each quantized format keeps its f16 scales (and mins) inside a block.
std::vector<ScaleField> scale_fields(Type type) {
    switch (type) {
        case Type::Q4_0:
        case Type::Q5_0:
        case Type::Q8_0:
            return {{0, true}};
        case Type::Q4_1:
        case Type::Q5_1:
            return {{0, false}, {2, true}};
        case Type::Q2_K:
            return {{offsetof(BlockQ2_K, d), false}, {offsetof(BlockQ2_K, dmin), false}};
        case Type::Q3_K:
            return {{offsetof(BlockQ3_K, d), true}};
        case Type::Q4_K:
            return {{0, false}, {2, false}};
        case Type::Q5_K:
            return {{0, false}, {2, false}};
        case Type::Q6_K:
            return {{offsetof(BlockQ6_K, d), true}};
        default:
            return {};
    }
}

// `rows` rows of n elements: random codes with random scales of magnitude ~ 2^-6.
Bytes random_weights(Type type, std::int64_t rows, std::int64_t n, std::uint32_t seed) {
    Random rng(seed);
    const TypeTraits& t = traits(type);
    const std::size_t rb = row_bytes(type, n);
    Bytes bytes(rb * static_cast<std::size_t>(rows));
    if (type == Type::F32 || type == Type::F16 || type == Type::BF16) {
        for (std::int64_t i = 0; i < rows * n; ++i) {
            const float v = static_cast<float>(rng.normal());
            if (type == Type::F32) {
                std::memcpy(bytes.data() + 4 * i, &v, 4);
            } else {
                const std::uint16_t h = type == Type::F16 ? f32_to_f16(v) : f32_to_bf16(v);
                bytes[2 * i] = static_cast<std::uint8_t>(h & 0xFF);
                bytes[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
            }
        }
        return bytes;
    }
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng.bits() >> 24);
    const std::size_t nblocks = bytes.size() / t.bytes_per_block;
    for (std::size_t b = 0; b < nblocks; ++b) {
        for (const ScaleField& f : scale_fields(type)) {
            float v = static_cast<float>(rng.uniform(0.5, 1.0) * 0x1p-6);
            if (f.may_be_negative && (rng.bits() & 1)) v = -v;
            put_half(bytes, b * t.bytes_per_block + f.offset, v);
        }
    }
    return bytes;
}

// `rows` rows of n floats (w) quantized to `type` by the library's own quantizer.
Bytes quantize_rows(Type type, const std::vector<float>& w, std::int64_t rows, std::int64_t n) {
    const std::size_t rb = row_bytes(type, n);
    Bytes bytes(rb * static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r)
        quantize_row(type, w.data() + r * n, bytes.data() + r * rb, n);
    return bytes;
}

Bytes quantized_weights(Type type, std::int64_t rows, std::int64_t n, std::uint32_t seed) {
    Random rng(seed);
    std::vector<float> w(static_cast<std::size_t>(rows * n));
    for (auto& v : w) v = static_cast<float>(0.02 * rng.normal());
    return quantize_rows(type, w, rows, n);
}

// "output o: a against b" for the first output whose bits differ between two runs, or "".
std::string first_bit_difference(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return "different sizes";
    for (std::size_t o = 0; o < a.size(); ++o) {
        if (std::memcmp(&a[o], &b[o], sizeof(float)) != 0) {
            return "output " + std::to_string(o) + ": " + std::to_string(a[o]) + " against " +
                   std::to_string(b[o]);
        }
    }
    return {};
}

// "Q4_1 41 x 640 x 37": a product's weight type, rows, length and tokens, for failure messages.
std::string product_name(Type type, std::int64_t rows, std::int64_t n, std::int64_t tokens) {
    return std::string(type_name(type)) + " " + std::to_string(rows) + " x " + std::to_string(n) +
           " x " + std::to_string(tokens);
}

// "" when `want` (filled with NaN before the product) was written everywhere and `got` equals it
// bit for bit; otherwise what went wrong.
std::string unwritten_or_different(const std::vector<float>& got, const std::vector<float>& want) {
    for (float v : want) {
        if (!std::isfinite(v)) return "unwritten";
    }
    return first_bit_difference(got, want);
}

// Weights whose quantized codes sit at the top of their range: in every 16 elements one anchor
// of -32/31 and fifteen ones (odd rows negated). The symmetric formats map the value of largest
// magnitude, the anchor, to the bottom of their range (Q6_K: -32, Q4_0: -8), which puts the ones
// at the top (Q6_K: 31, so the stored code is 63); the formats with a min (Q4_1, Q4_K) code the
// ones at their maximum as well. With activations all equal (int8 127 everywhere) the kernels'
// integer sums reach their largest values: a kernel that adds vpmaddubsw results of several
// words in int16 past what the codes allow overflows here, not on random inputs (Q6_K's packed
// codes reach 63 with this pattern, where a plain 0/1 pattern only reached 32).
Bytes saturated_weights(Type type, std::int64_t rows, std::int64_t n) {
    std::vector<float> w(static_cast<std::size_t>(rows * n));
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t k = 0; k < n; ++k)
            w[static_cast<std::size_t>(r * n + k)] =
                (k % 16 == 0 ? -32.0f / 31.0f : 1.0f) * (r % 2 ? -1.0f : 1.0f);
    }
    return quantize_rows(type, w, rows, n);
}

std::vector<float> random_activations(std::int64_t tokens, std::int64_t n, std::uint32_t seed) {
    Random rng(seed);
    std::vector<float> x(static_cast<std::size_t>(tokens * n));
    for (auto& v : x) v = static_cast<float>(rng.normal());
    // A few outliers, as real hidden states have: they set the block scale of their block.
    for (std::size_t i = 0; i < x.size(); i += 97) x[i] *= 8.0f;
    return x;
}

std::int64_t activation_block(Type type) {
    switch (activation_format_for(type)) {
        case ActivationFormat::F32:
            return 0;
        case ActivationFormat::Q8_32:
            return 32;
        case ActivationFormat::Q8_256:
            return 256;
    }
    return 0;
}

// The test's own activation quantization (see the header comment): x' = q * d and d per
// element. Without int8 activations x' = x and d = 0.
void quantize_activations(Type type, const std::vector<float>& x, std::vector<double>& xq,
                          std::vector<double>& dq) {
    const std::int64_t block = activation_block(type);
    xq.assign(x.begin(), x.end());
    dq.assign(x.size(), 0.0);
    if (block == 0) return;
    for (std::size_t b0 = 0; b0 < x.size(); b0 += static_cast<std::size_t>(block)) {
        float amax = 0.0f;
        for (std::int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[b0 + i]));
        const float d = amax / 127.0f;
        const float id = d > 0.0f ? 1.0f / d : 0.0f;
        for (std::int64_t i = 0; i < block; ++i) {
            const float v = std::clamp(x[b0 + i] * id, -127.0f, 127.0f);
            xq[b0 + i] = static_cast<double>(std::nearbyint(v)) * d;
            dq[b0 + i] = d;
        }
    }
}

std::vector<SimdLevel> supported_levels() {
    std::vector<SimdLevel> levels;
    for (int l = 0; l <= static_cast<int>(detected_simd_level()); ++l) {
        levels.push_back(static_cast<SimdLevel>(l));
    }
    return levels;
}

// Restores the detected level when a test ends (also on a failed QVERIFY's early return).
struct LevelGuard {
    ~LevelGuard() { set_simd_level(detected_simd_level()); }
};

struct Case {
    Type type;
    std::int64_t rows;
    std::int64_t n;
    std::int64_t tokens;
    bool quantized_from_floats;
    // Inputs at the ends of every integer range instead of random ones (saturated_weights).
    bool saturated = false;
    // The weights multiplied in the interleaved layout (interleaved_rows.h); the references
    // stay those of the rows in file order.
    bool interleaved = false;
    // Given weights and activations instead of the generated ones (when not null).
    const Bytes* weights = nullptr;
    const std::vector<float>* activations = nullptr;
};

std::string describe(const Case& c, SimdLevel level) {
    return std::string(type_name(c.type)) + " n=" + std::to_string(c.n) +
           " tokens=" + std::to_string(c.tokens) + " rows=" + std::to_string(c.rows) + " " +
           simd_level_name(level) + (c.interleaved ? " interleaved" : "");
}

// Runs one case at every level; returns "" or the first failure.
std::string check_case(const Case& c, double* worst_vector_rel_error) {
    const std::uint32_t seed =
        static_cast<std::uint32_t>(c.n * 131 + c.tokens * 7 + static_cast<int>(c.type));
    const Bytes w = c.weights                 ? *c.weights
                    : c.saturated             ? saturated_weights(c.type, c.rows, c.n)
                    : c.quantized_from_floats ? quantized_weights(c.type, c.rows, c.n, seed)
                                              : random_weights(c.type, c.rows, c.n, seed);
    const std::vector<float> x =
        c.activations ? *c.activations
        : c.saturated ? std::vector<float>(static_cast<std::size_t>(c.tokens * c.n), 1.0f)
                      : random_activations(c.tokens, c.n, seed + 1);
    const std::size_t rb = row_bytes(c.type, c.n);
    Bytes interleaved;
    if (c.interleaved) {
        interleaved.resize(w.size());
        interleave_rows(c.type, w.data(), c.rows, c.n, interleaved.data());
    }

    std::vector<double> wd(static_cast<std::size_t>(c.rows * c.n));
    {
        std::vector<float> row(static_cast<std::size_t>(c.n));
        for (std::int64_t r = 0; r < c.rows; ++r) {
            dequantize_row(c.type, w.data() + r * rb, row.data(), c.n);
            std::copy(row.begin(), row.end(), wd.begin() + r * c.n);
        }
    }
    std::vector<double> xq, dq;
    quantize_activations(c.type, x, xq, dq);

    // References and bounds, [t][r].
    const auto outputs = static_cast<std::size_t>(c.tokens * c.rows);
    std::vector<double> ref_exact(outputs), ref_quant(outputs), abs_sum(outputs),
        act_bound(outputs), abs_exact(outputs);
    double predicted_err2 = 0;
    for (std::int64_t t = 0; t < c.tokens; ++t) {
        for (std::int64_t r = 0; r < c.rows; ++r) {
            double e = 0, q = 0, a = 0, bound = 0, variance = 0, ae = 0;
            for (std::int64_t k = 0; k < c.n; ++k) {
                const double wk = wd[r * c.n + k];
                const auto xi = static_cast<std::size_t>(t * c.n + k);
                e += wk * x[xi];
                ae += std::fabs(wk * x[xi]);
                q += wk * xq[xi];
                a += std::fabs(wk * xq[xi]);
                bound += std::fabs(wk) * dq[xi] * 0.5;
                variance += wk * wk * dq[xi] * dq[xi] / 12.0;
            }
            predicted_err2 += variance;
            const auto o = static_cast<std::size_t>(t * c.rows + r);
            ref_exact[o] = e;
            ref_quant[o] = q;
            abs_sum[o] = a;
            act_bound[o] = bound;
            abs_exact[o] = ae;
        }
    }

    std::vector<float> scalar_out;
    LevelGuard guard;
    for (SimdLevel level : supported_levels()) {
        set_simd_level(level);
        // Prepared at each level, as the engine does: the AVX2 level adds the f32 prefill
        // panels for 16 tokens or more of F16/BF16 weights, and those kernels multiply the
        // exact activations; the quantized types' AVX2 prefill is an int8 GEMM
        // (gemm_int8_avx2.cpp, gemm_int8_q32_avx2.cpp), checked below like every kernel on int8
        // activations.
        PreparedActivations acts;
        prepare_activations(c.type, x.data(), c.tokens, c.n, acts);
        const bool quantized = activation_format_for(c.type) != ActivationFormat::F32;
        const bool panels_expected = !quantized && c.type != Type::F32;
        if (level == SimdLevel::Avx512 && c.tokens >= kPanelMinTokens &&
            (acts.panels() != nullptr) != (c.type == Type::F16 || c.type == Type::BF16)) {
            return describe(c, level) + ": the AVX-512 f32 panels are for F16/BF16 weights only";
        }
        if (level == SimdLevel::Avx2 && c.tokens >= kPanelMinTokens &&
            !std::getenv("TOKENSCOPE_INT8_GEMM") && (acts.panels() != nullptr) != panels_expected) {
            return describe(c, level) + (quantized ? ": f32 panels built for a quantized type "
                                                     "(its prefill is an int8 GEMM)"
                                                   : ": the f32 panels were not built");
        }
        std::vector<float> out(outputs, std::numeric_limits<float>::quiet_NaN());
        if (c.interleaved) {
            matmul_rows(c.type, interleaved.data(), c.n, 0, c.rows, acts, out.data(), c.rows,
                        RowLayout::Interleaved);
        } else {
            matmul_rows(c.type, w.data(), c.n, 0, c.rows, acts, out.data(), c.rows);
        }
        double err2 = 0, ref2 = 0;
        if (acts.panels() != nullptr && !c.interleaved) {
            // f32 products of the decoded weights and the exact activations, summed in order
            // over blocks of at most 512 and then block by block: the classic bound for a
            // recursive sum, (terms - 1) * u * sum|w x| with u = 2^-24, with 512 + n / 512
            // terms in the longest chain, plus 2u per product for decoding a weight
            // (d * (q - offset) or d * sc * q + min, one or two roundings).
            const double chain = 512.0 + static_cast<double>(c.n) / 512.0 + 4.0;
            for (std::size_t o = 0; o < outputs; ++o) {
                const double got = out[o];
                const double bound = chain * 0x1p-24 * abs_exact[o] + 1e-30;
                if (!(std::fabs(got - ref_exact[o]) <= bound)) {
                    return describe(c, level) + " (prefill panels): output " + std::to_string(o) +
                           " = " + std::to_string(got) + ", expected " +
                           std::to_string(ref_exact[o]) + " within " + std::to_string(bound);
                }
                err2 += (got - ref_exact[o]) * (got - ref_exact[o]);
                ref2 += ref_exact[o] * ref_exact[o];
            }
            const double rel = std::sqrt(err2 / ref2);
            if (!(rel <= 1e-5)) {
                return describe(c, level) + " (prefill panels): relative error " +
                       std::to_string(rel) + " > 1e-5";
            }
            *worst_vector_rel_error = std::max(*worst_vector_rel_error, rel);
            continue;
        }
        for (std::size_t o = 0; o < outputs; ++o) {
            const double got = out[o];
            const double tight = 2e-5 * abs_sum[o] + 1e-30;
            if (!(std::fabs(got - ref_quant[o]) <= tight)) {
                return describe(c, level) + ": output " + std::to_string(o) + " = " +
                       std::to_string(got) + ", expected " + std::to_string(ref_quant[o]) +
                       " (with the activations quantized) within " + std::to_string(tight);
            }
            if (!(std::fabs(got - ref_exact[o]) <= act_bound[o] * 1.0001 + tight)) {
                return describe(c, level) + ": output " + std::to_string(o) + " = " +
                       std::to_string(got) + " is further than the activation rounding bound " +
                       std::to_string(act_bound[o]) + " from " + std::to_string(ref_exact[o]);
            }
            if (!scalar_out.empty() && !(std::fabs(got - scalar_out[o]) <= tight)) {
                return describe(c, level) + ": output " + std::to_string(o) + " = " +
                       std::to_string(got) + " differs from the scalar kernel's " +
                       std::to_string(scalar_out[o]);
            }
            err2 += (got - ref_exact[o]) * (got - ref_exact[o]);
            ref2 += ref_exact[o] * ref_exact[o];
        }
        const double rel = std::sqrt(err2 / ref2);
        // Float formats (f32 activations): float rounding only, a few ulps times sqrt(n).
        const double predicted = std::sqrt(predicted_err2 / ref2);
        const double limit = activation_block(c.type) == 0 ? 1e-5 : 2.0 * predicted;
        if (!(rel <= limit)) {
            return describe(c, level) + ": relative error " + std::to_string(rel) + " > " +
                   std::to_string(limit) + " (predicted " + std::to_string(predicted) + ")";
        }
        *worst_vector_rel_error = std::max(*worst_vector_rel_error, rel);
        if (level == SimdLevel::Scalar) scalar_out = out;
    }
    return {};
}

// "" when each token's row of `batch` (the product of all `tokens` rows of x at once) equals,
// bit for bit, the product of that token's row alone; otherwise the first token that differs.
std::string first_token_unlike_alone(Type type, const std::uint8_t* w, std::int64_t rows,
                                     std::int64_t n, const std::vector<float>& x,
                                     std::int64_t tokens, const std::vector<float>& batch,
                                     RowLayout layout) {
    for (std::int64_t t = 0; t < tokens; ++t) {
        PreparedActivations one;
        prepare_activations(type, x.data() + t * n, 1, n, one);
        std::vector<float> alone(static_cast<std::size_t>(rows));
        matmul_rows(type, w, n, 0, rows, one, alone.data(), rows, layout);
        if (std::memcmp(alone.data(), batch.data() + t * rows, alone.size() * sizeof(float)) != 0)
            return "token " + std::to_string(t) + " of " + std::to_string(tokens) +
                   ": the batch differs from the token alone";
    }
    return {};
}

const Type kAllTypes[] = {Type::F32,  Type::F16,  Type::BF16, Type::Q4_0, Type::Q4_1,
                          Type::Q5_0, Type::Q5_1, Type::Q8_0, Type::Q2_K, Type::Q3_K,
                          Type::Q4_K, Type::Q5_K, Type::Q6_K};

}  // namespace

class TestMatmul : public QObject {
    Q_OBJECT

  private slots:
    void simdLevelsCanBeForcedDownButNotUp();
    void matchesFloat64Reference_data();
    void matchesFloat64Reference();
    void quantizedFromFloatsMatchesReference();
    void saturatedCodesMatchReference();
    void q3kOffsetsAtTheirIntegerBounds();
    void manyRowGroupsMatchReference();
    void passesOfRowGroupsInTokenBlocksMatchReference();
    void subRangeWritesOnlyItsRowsAtTheStride();
    void smallBatchesMatchDecodeBitForBit();
    void halfPrefillEqualsF32OfTheSameValues();
    void panelsAgreeAcrossInstructionSets();
    void avxVnniAgreesWithMaddubs();
    void rowMultipleSplitsGiveTheSameBits();
    void q4kLanePackerEqualsTheGeneralOne();
    void readStreamsAreNotPowerOfTwoApart();
    void q51WithoutFifthBitsEqualsQ41();
    void activationsServeEveryTypeOfTheirFormat();
    void prefetchLevelsChangeNoResult();
    void preparedActivationsAreReused();
    void parallelPreparationMatchesSerial();
    void simdPreparationMatchesScalar();
    void emptyInputs();
    void rejectsMismatchedArguments();
    void interleavedRowsMatchReference();
    void interleavedTokenCountsGiveTheSameBits();
    void interleavedEqualsTheLaneGemmOfRows();
    void interleavedRowsRoundTripAndRanges();
};

namespace {
// The types with an interleaved layout (interleaved_rows.h).
constexpr Type kInterleavedTypes[] = {Type::Q8_0, Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1,
                                      Type::Q2_K, Type::Q3_K, Type::Q4_K, Type::Q5_K, Type::Q6_K};
// The K-quants: 256-element super-blocks (the type table's block size).
bool is_k_quant(Type type) {
    return traits(type).block_size == 256;
}
// A row length of a few blocks for `type` (the K-quants' blocks are 256 long).
std::int64_t interleaved_n(Type type) {
    return is_k_quant(type) ? 768 : 640;
}
}  // namespace

// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants Q2_K-Q6_K stored interleaved
// (interleaved_rows.h) against the float64
// references
// of the rows in file order, at every level (the scalar level copies each group back, and so
// does AVX-512 for Q8_0; AVX2 runs interleaved_avx2.cpp under the lane GEMM's line, 40 tokens
// for Q8_0 and 16 for the others, and the lane GEMM from there; AVX-512 interleaved_q32_avx512.cpp
// for Q4_0-Q5_1 and interleaved_kquant_avx512.cpp for the K-quants under its lane GEMMs' lines, 16
// and 32 tokens). Rows: one group of 16, two, three, and 304
// (passes of lane groups); tokens: each tile width, the uneven
// splits of 7, 9 and 13, and both sides of both lines; saturated codes (Q8_0's -128, 15 and 0
// nibbles).
void TestMatmul::interleavedRowsMatchReference() {
    for (Type type : kInterleavedTypes) {
        double worst = 0;
        for (std::int64_t rows : {16, 32, 48}) {
            for (std::int64_t n : is_k_quant(type)
                                      ? std::initializer_list<std::int64_t>{256, 768, 4352}
                                      : std::initializer_list<std::int64_t>{32, 640, 4128}) {
                for (std::int64_t tokens : {1, 2, 3, 4, 5, 6, 7, 9, 13, 15, 16, 39, 40, 64}) {
                    if (n > 640 && tokens > 16) continue;  // keeps the float64 reference quick
                    const std::string failure =
                        check_case({type, rows, n, tokens, false, false, true}, &worst);
                    QVERIFY2(failure.empty(), failure.c_str());
                }
            }
        }
        for (std::int64_t tokens : {1, 9, 45}) {
            std::string failure =
                check_case({type, 32, interleaved_n(type), tokens, false, true, true}, &worst);
            QVERIFY2(failure.empty(), failure.c_str());
            failure = check_case({type, 304, 256, tokens, true, false, true}, &worst);
            QVERIFY2(failure.empty(), failure.c_str());
        }
        qInfo("interleaved %s: relative error vs exact activations at most %.4f", type_name(type),
              worst);
    }
}

// Every token of a call gets the bits it gets alone, for 1 to 20 tokens and across the lane
// GEMM's line (40, 64), and for rows split at any multiple of 8: speculative verification (a
// chunk of k + 1 tokens), decode and prefill then agree exactly.
void TestMatmul::interleavedTokenCountsGiveTheSameBits() {
    LevelGuard guard;
    for (Type type : kInterleavedTypes) {
        const std::int64_t rows = 48, n = interleaved_n(type);
        const Bytes w = random_weights(type, rows, n, 31);
        Bytes wi(w.size());
        interleave_rows(type, w.data(), rows, n, wi.data());
        for (SimdLevel level : supported_levels()) {
            set_simd_level(level);
            std::vector<std::int64_t> counts;
            for (std::int64_t t = 2; t <= 20; ++t) counts.push_back(t);
            counts.insert(counts.end(), {40, 64});
            for (std::int64_t tokens : counts) {
                // Where the level does not multiply the type interleaved (scalar; Q8_0 at
                // AVX-512) it copies the groups back to rows, whose prefill kernels
                // (16 tokens and more) sum in another order than decode
                // (smallBatchesMatchDecodeBitForBit).
                if (!interleaving_pays(type) && tokens >= kPanelMinTokens) continue;
                const std::vector<float> x =
                    random_activations(tokens, n, static_cast<std::uint32_t>(100 + tokens));
                PreparedActivations acts;
                prepare_activations(type, x.data(), tokens, n, acts);
                std::vector<float> batch(static_cast<std::size_t>(tokens * rows));
                // Two row ranges, as two threads would take them: [0, 32) and [32, 48), the
                // first as a piece of decode's stream (prefetching on to row 48).
                matmul_rows(type, wi.data(), n, 0, 32, acts, batch.data(), rows,
                            RowLayout::Interleaved, rows);
                matmul_rows(type, wi.data(), n, 32, rows, acts, batch.data(), rows,
                            RowLayout::Interleaved);
                const std::string failure = first_token_unlike_alone(
                    type, wi.data(), rows, n, x, tokens, batch, RowLayout::Interleaved);
                QVERIFY2(failure.empty(), (std::string(type_name(type)) + " " +
                                           simd_level_name(level) + " " + failure)
                                              .c_str());
            }
        }
    }
}

// At the AVX2 level the layout's own tile (under 40 tokens) and the lane GEMM over packed
// interleaved rows (40 and more) must give the bits of the lane GEMM that packs the rows from
// file order (16 tokens and more, gemm_int8_q32_avx2.cpp): a second implementation of the same
// per-row order, with its own packer. The K-quant tile (interleaved_kquant_avx2.cpp)
// follows the K-quant lane GEMM's order at every token count, so there one token already equals
// it.
//
// At the AVX-512 level Q4_0-Q5_1 are stored interleaved too: their AVX-512 lane GEMM (16 tokens
// and more) packs the groups with interleaved_words_of_8_rows and must give the bits of the same
// lane GEMM packing file rows; under 16 tokens their AVX-512 tile (interleaved_q32_avx512.cpp)
// runs, and it must give them too (its lanes sum the blocks in the AVX-512 lane GEMM's order,
// as the AVX2 tile's did before it), so that decode, verification and
// prefill agree there as well. The K-quants too: their AVX-512 lane GEMM (32 tokens and more)
// packs two groups at a time, and under 32 tokens their AVX-512 tile
// (interleaved_kquant_avx512.cpp) must give that GEMM's bits. Q8_0 keeps the file's order there.
void TestMatmul::interleavedEqualsTheLaneGemmOfRows() {
    if (detected_simd_level() < SimdLevel::Avx2 || std::getenv("TOKENSCOPE_INT8_GEMM") ||
        std::getenv("TOKENSCOPE_INTERLEAVE")) {
        QSKIP("needs the AVX2 level with its default int8 GEMMs and layout");
    }
    LevelGuard guard;
    std::vector<SimdLevel> levels = {SimdLevel::Avx2};
    if (detected_simd_level() == SimdLevel::Avx512) levels.push_back(SimdLevel::Avx512);
    for (SimdLevel level : levels) {
        set_simd_level(level);
        for (Type type : kInterleavedTypes) {
            QCOMPARE(interleaving_pays(type), level == SimdLevel::Avx2 || type != Type::Q8_0);
            if (!interleaving_pays(type)) continue;
            // The rows' lane GEMM runs from 16 tokens, from 32 for the K-quants at AVX-512.
            const std::int64_t lane_gemm_from =
                level == SimdLevel::Avx512 && is_k_quant(type) ? 32 : kPanelMinTokens;
            for (const auto& [rows, n] :
                 {std::pair<std::int64_t, std::int64_t>{32, interleaved_n(type)},
                  {304, 1024},
                  {48, is_k_quant(type) ? 1280 : 576}}) {
                const Bytes w = random_weights(type, rows, n, 41);
                Bytes wi(w.size());
                interleave_rows(type, w.data(), rows, n, wi.data());
                std::vector<std::int64_t> counts = {16, 17, 23, 39, 40, 64};
                if (is_k_quant(type) || level == SimdLevel::Avx512)
                    counts.insert(counts.begin(), {1, 2, 3, 5, 6, 7, 9, 13, 15});
                for (std::int64_t tokens : counts) {
                    const std::vector<float> x =
                        random_activations(tokens, n, static_cast<std::uint32_t>(tokens));
                    // The tokens under test come first in a batch the rows' lane GEMM takes
                    // (each token's result does not depend on the others).
                    const std::int64_t batch = std::max<std::int64_t>(tokens, lane_gemm_from);
                    std::vector<float> xb = random_activations(batch, n, 77);
                    std::copy(x.begin(), x.end(), xb.begin());
                    PreparedActivations acts, acts_batch;
                    prepare_activations(type, x.data(), tokens, n, acts);
                    prepare_activations(type, xb.data(), batch, n, acts_batch);
                    std::vector<float> by_rows(static_cast<std::size_t>(batch * rows));
                    std::vector<float> by_groups(static_cast<std::size_t>(tokens * rows));
                    matmul_rows(type, w.data(), n, 0, rows, acts_batch, by_rows.data(), rows);
                    by_rows.resize(by_groups.size());
                    matmul_rows(type, wi.data(), n, 0, rows, acts, by_groups.data(), rows,
                                RowLayout::Interleaved);
                    const std::string what =
                        product_name(type, rows, n, tokens) + " " + simd_level_name(level);
                    const std::string difference = first_bit_difference(by_groups, by_rows);
                    QVERIFY2(difference.empty(), (what + ": " + difference).c_str());
                }
            }
        }
    }
}

void TestMatmul::interleavedRowsRoundTripAndRanges() {
    for (Type type : kInterleavedTypes) {
        const std::int64_t rows = 48, n = is_k_quant(type) ? 512 : 96;
        const Bytes w = random_weights(type, rows, n, 51);
        Bytes wi(w.size());
        interleave_rows(type, w.data(), rows, n, wi.data());
        QVERIFY(wi != w);
        const std::size_t rb = row_bytes(type, n);
        // Each group holds exactly its own 16 rows' bytes (the layout keeps groups in place).
        for (std::int64_t g = 0; g < rows / 16; ++g) {
            Bytes a(w.begin() + g * 16 * rb, w.begin() + (g + 1) * 16 * rb);
            Bytes b(wi.begin() + g * 16 * rb, wi.begin() + (g + 1) * 16 * rb);
            std::sort(a.begin(), a.end());
            std::sort(b.begin(), b.end());
            QVERIFY(a == b);
        }
        Bytes row(rb);
        for (std::int64_t r = 0; r < rows; ++r) {
            row_from_interleaved(type, wi.data(), n, r, row.data());
            QVERIFY2(std::memcmp(row.data(), w.data() + r * rb, rb) == 0,
                     (std::string(type_name(type)) + " row " + std::to_string(r) +
                      " does not come back")
                         .c_str());
        }
        const std::int64_t block = is_k_quant(type) ? 256 : 32;
        QVERIFY(can_interleave(type, 16, block));
        QVERIFY(!can_interleave(type, 8, block));
        QVERIFY(!can_interleave(type, 16, block + block / 2));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 interleave_rows(type, w.data(), 24, n, wi.data()));
        const std::vector<float> x = random_activations(3, n, 52);
        PreparedActivations acts;
        prepare_activations(type, x.data(), 3, n, acts);
        std::vector<float> out(static_cast<std::size_t>(3 * rows));
        // Ranges must be whole groups of 16.
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 matmul_rows(type, wi.data(), n, 8, 32, acts, out.data(), rows,
                                             RowLayout::Interleaved));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 matmul_rows(type, wi.data(), n, 0, 24, acts, out.data(), rows,
                                             RowLayout::Interleaved));
        // And only the range's rows are written: [16, 32) leaves the rest alone.
        std::fill(out.begin(), out.end(), -7.0f);
        matmul_rows(type, wi.data(), n, 16, 32, acts, out.data(), rows, RowLayout::Interleaved);
        for (std::int64_t t = 0; t < 3; ++t) {
            for (std::int64_t r = 0; r < rows; ++r) {
                const float v = out[static_cast<std::size_t>(t * rows + r)];
                QVERIFY2((r >= 16 && r < 32) == (v != -7.0f),
                         ("token " + std::to_string(t) + " row " + std::to_string(r)).c_str());
            }
        }
    }
    for (Type type : {Type::F32, Type::F16, Type::BF16}) {
        QVERIFY(!can_interleave(type, 16, 256));
        Bytes any(row_bytes(type, 256) * 16);
        Bytes out(any.size());
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 interleave_rows(type, any.data(), 16, 256, out.data()));
    }
}

void TestMatmul::simdLevelsCanBeForcedDownButNotUp() {
    LevelGuard guard;
    const SimdLevel detected = detected_simd_level();
    qInfo("detected SIMD level: %s", simd_level_name(detected));
    // The default is the CPU's best unless TOKENSCOPE_SIMD caps it (how the AVX2 path is
    // tested on an AVX-512 machine); a cap the CPU cannot honour falls back to the best.
    const QByteArray cap = qgetenv("TOKENSCOPE_SIMD");
    const bool honoured = (cap == "scalar" || cap == "avx2" || cap == "avx512") &&
                          !(cap == "avx512" && detected != SimdLevel::Avx512) &&
                          !(cap == "avx2" && detected == SimdLevel::Scalar);
    if (honoured)
        QCOMPARE(QByteArray(simd_level_name(active_simd_level())), cap);
    else
        QCOMPARE(active_simd_level(), detected);
    set_simd_level(SimdLevel::Scalar);
    QCOMPARE(active_simd_level(), SimdLevel::Scalar);
    if (detected != SimdLevel::Avx512) {
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, set_simd_level(SimdLevel::Avx512));
    }
    QCOMPARE(std::string(simd_level_name(SimdLevel::Avx2)), std::string("avx2"));
}

void TestMatmul::matchesFloat64Reference_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<qint64>("n");
    QTest::addColumn<qint64>("tokens");
    for (Type type : kAllTypes) {
        const std::int64_t block = traits(type).block_size;
        // 256 and 2048: one and several K-quant super-blocks. 640 (Gemma 3 270M's width) is no
        // multiple of 256, so only for the 32-block and float formats; 4128 and 4864 span two
        // packing chunks (4096) with a partial last one; 37 exercises float row tails.
        std::vector<std::int64_t> lengths = {256, 2048};
        if (block <= 32) lengths.insert(lengths.end(), {640, 4128});
        if (block == 256) lengths.push_back(4864);
        if (block == 1) lengths.push_back(37);
        for (std::int64_t n : lengths) {
            // 37 and 128 tokens: the AVX2 prefill panels (16-token groups, a partial last one);
            // 300: more than one block of 8 groups. 33 and 41 (K-quants only): the AVX-512 lane
            // GEMM's 6-token tiles end in 3 and 5 tokens (37, 128 and 64 below end in 1, 2, 4).
            // 23 (32-blocks only): the AVX-512 lane GEMM of Q4_0-Q5_1 under 32 tokens.
            for (std::int64_t tokens : {1, 7, 23, 33, 37, 41, 128, 300}) {
                if (n > 2048 && tokens >= 128) continue;  // keeps the float64 reference quick
                if (tokens == 300 && n != 256) continue;
                if ((tokens == 33 || tokens == 41) && (block != 256 || n != 256)) continue;
                if (tokens == 23 && (block != 32 || n != 256)) continue;
                const std::string name = std::string(type_name(type)) + " n=" + std::to_string(n) +
                                         " tokens=" + std::to_string(tokens);
                QTest::newRow(name.c_str())
                    << static_cast<int>(type) << qint64(n) << qint64(tokens);
            }
        }
    }
}

void TestMatmul::matchesFloat64Reference() {
    QFETCH(int, type);
    QFETCH(qint64, n);
    QFETCH(qint64, tokens);
    // 13 rows: three full 4-row groups and a remainder for every kernel's tile height.
    const Case c{static_cast<Type>(type), 13, n, tokens, false};
    double worst = 0;
    const std::string failure = check_case(c, &worst);
    QVERIFY2(failure.empty(), failure.c_str());
}

void TestMatmul::quantizedFromFloatsMatchesReference() {
    for (Type type : kAllTypes) {
        if (traits(type).quantize_row == nullptr) continue;
        const std::int64_t n = traits(type).block_size == 256 ? 2048 : 640;
        double worst = 0;
        for (std::int64_t tokens : {5, 40}) {  // 40: the AVX2 prefill panels
            const std::string failure = check_case({type, 9, n, tokens, true}, &worst);
            QVERIFY2(failure.empty(), failure.c_str());
        }
        qInfo("%s: relative error vs exact activations %.4f", type_name(type), worst);
    }
}

// Every kernel at the ends of its integer ranges (saturated_weights): one token and 7 (the
// decode kernels), 37 (the prefill GEMMs).
void TestMatmul::saturatedCodesMatchReference() {
    for (Type type : kAllTypes) {
        if (activation_format_for(type) == ActivationFormat::F32) continue;
        const std::int64_t n = traits(type).block_size == 256 ? 2048 : 640;
        for (std::int64_t tokens : {1, 7, 37}) {
            double worst = 0;
            const std::string failure = check_case({type, 13, n, tokens, false, true}, &worst);
            QVERIFY2(failure.empty(), failure.c_str());
        }
    }
}

// Q3_K's kernels add the offset -4 * (sum of a sub-block's 16 int8 activations) to the
// products in the integers (int8_lanes_avx2.h, kQ3KIntegerOffsets); on AVX2 one int16 of each
// row lane takes it beside the products of 8 of the 16 elements, and the claim is that this
// stays within int16: at most 8 * 4 * 127 + 4 * 8 * 127 = 8128. Hand-made blocks reach that
// bound from both sides: codes q = -4 everywhere (hmask and qs zero) times activations all -1
// (int8 -127) give +8 * 4 * 127 in the products and +4 * 8 * 127 from the offset, all +1 the
// same negated (there the offset is negative, and only its low int16 may be added); q = +3
// (every bit set) with +1 on the elements the int16 covers and -1 on the others give 3048 +
// 4064. Sub-block scales at both ends (all six bits set: +31; none: -32), d = 1. The references
// are the float64 ones of every case; tokens 1, 2 and 5 take the decode tiles, 33 the lane
// GEMMs, interleaved and in file order.
void TestMatmul::q3kOffsetsAtTheirIntegerBounds() {
    const std::int64_t rows = 16, n = 512;
    Bytes w(static_cast<std::size_t>(rows) * row_bytes(Type::Q3_K, n));
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t b = 0; b < n / 256; ++b) {
            BlockQ3_K block{};
            const std::uint8_t codes = r % 2 ? 0xFF : 0x00;  // q = +3 or -4
            std::memset(block.hmask, codes, sizeof block.hmask);
            std::memset(block.qs, codes, sizeof block.qs);
            std::memset(block.scales, r % 4 < 2 ? 0xFF : 0x00, sizeof block.scales);
            const std::uint16_t one = f32_to_f16(1.0f);
            std::memcpy(block.d, &one, sizeof block.d);
            std::memcpy(w.data() + (static_cast<std::size_t>(r) * n / 256 + b) * sizeof block,
                        &block, sizeof block);
        }
    }
    // Token t takes pattern (t + first) % 3: all -1, mixed, all +1; every first for every count,
    // so one token alone meets each pattern but the mixed one, whose balanced activations make
    // every output zero (which the relative-error check cannot take): it is met beside the
    // others from two tokens on.
    const auto activation = [](std::int64_t pattern, std::int64_t e) {
        return pattern == 0 ? -1.0f : pattern == 2 ? 1.0f : e % 4 < 2 ? 1.0f : -1.0f;
    };
    for (std::int64_t first = 0; first < 3; ++first) {
        for (std::int64_t tokens : {1, 2, 5, 33}) {
            if (tokens == 1 && first == 1) continue;
            std::vector<float> x(static_cast<std::size_t>(tokens * n));
            for (std::int64_t t = 0; t < tokens; ++t) {
                for (std::int64_t e = 0; e < n; ++e)
                    x[static_cast<std::size_t>(t * n + e)] = activation((t + first) % 3, e);
            }
            for (bool interleaved : {false, true}) {
                Case c{Type::Q3_K, rows, n, tokens, false};
                c.interleaved = interleaved;
                c.weights = &w;
                c.activations = &x;
                double worst = 0;
                const std::string failure = check_case(c, &worst);
                QVERIFY2(failure.empty(), failure.c_str());
            }
        }
    }
}

// 13 rows fit in one group of most kernels; the int8 prefill GEMMs interleave 16 (AVX2) or 32
// (AVX-512, K-quants, 32 tokens and more) rows per group, so 37 rows span two or three groups,
// the last partial, each row in its own lane.
void TestMatmul::manyRowGroupsMatchReference() {
    for (Type type : kAllTypes) {
        if (activation_format_for(type) == ActivationFormat::F32) continue;
        double worst = 0;
        const std::string failure = check_case({type, 37, 512, 64, false}, &worst);
        QVERIFY2(failure.empty(), failure.c_str());
    }
}

// The lane GEMMs pack up to 128 rows (8 groups of 16 on AVX2, 4 of 32 on AVX-512) per pass and
// run every group of a pass over 48 tokens (45 for the 5-token Q8_0 tile) before the next block
// (int8_lanes_avx2.h, for_lane_groups). 293 rows: two full passes and a partial one that ends in a
// partial group; 101 tokens: two full blocks and a short one. n = 4864 makes a group's packed
// rows large enough that a pass holds fewer groups (K-quants: 4 on AVX2, 2 on AVX-512).
void TestMatmul::passesOfRowGroupsInTokenBlocksMatchReference() {
    for (Type type : kAllTypes) {
        if (activation_format_for(type) == ActivationFormat::F32) continue;
        double worst = 0;
        std::string failure = check_case({type, 293, 256, 101, false}, &worst);
        QVERIFY2(failure.empty(), failure.c_str());
        if (traits(type).block_size == 256) {
            failure = check_case({type, 293, 4864, 53, false}, &worst);
            QVERIFY2(failure.empty(), failure.c_str());
        }
    }
}

void TestMatmul::subRangeWritesOnlyItsRowsAtTheStride() {
    LevelGuard guard;
    // 6 tokens: the row tiles; 20: the AVX2 prefill panels.
    for (const auto& [type, tokens] :
         {std::pair{Type::F16, 6}, std::pair{Type::Q8_0, 6}, std::pair{Type::Q4_K, 6},
          std::pair{Type::F16, 20}, std::pair{Type::Q8_0, 20}, std::pair{Type::Q4_K, 20}}) {
        const std::int64_t rows = 11, n = 512, stride = 17;
        const Bytes w = random_weights(type, rows, n, 5);
        const std::vector<float> x = random_activations(tokens, n, 6);
        for (SimdLevel level : supported_levels()) {
            set_simd_level(level);
            PreparedActivations acts;
            prepare_activations(type, x.data(), tokens, n, acts);
            std::vector<float> full(static_cast<std::size_t>(tokens * stride), -1.0f);
            matmul_rows(type, w.data(), n, 0, rows, acts, full.data(), stride);
            // Two ranges, as two threads would split the rows: [3, 8) and [8, 11).
            std::vector<float> split(full.size(), -7.0f);
            matmul_rows(type, w.data(), n, 3, 8, acts, split.data(), stride);
            matmul_rows(type, w.data(), n, 8, rows, acts, split.data(), stride);
            for (std::int64_t t = 0; t < tokens; ++t) {
                for (std::int64_t r = 0; r < stride; ++r) {
                    const float got = split[static_cast<std::size_t>(t * stride + r)];
                    if (r < 3 || r >= rows) {
                        QCOMPARE(got, -7.0f);  // untouched
                    } else {
                        // Same rows, same tiles: bit-identical to the full call.
                        QCOMPARE(got, full[static_cast<std::size_t>(t * stride + r)]);
                    }
                }
            }
        }
    }
}

// A speculative verification chunk (or a short prompt) of 2 to 15 tokens must give each token
// exactly the bits a decode step of that token alone gives, at every level: greedy speculative
// decoding is then token for token identical to plain decoding. (From kPanelMinTokens on, the
// AVX2 prefill panels multiply exact f32 activations instead and are checked above.)
void TestMatmul::smallBatchesMatchDecodeBitForBit() {
    LevelGuard guard;
    for (Type type : kAllTypes) {
        const std::int64_t n = traits(type).block_size == 256 ? 2048 : 640;
        const std::int64_t rows = 13;
        const Bytes w = random_weights(type, rows, n, 21);
        for (SimdLevel level : supported_levels()) {
            set_simd_level(level);
            for (std::int64_t tokens : {2, 3, 4, 5, 15}) {
                QVERIFY(tokens < kPanelMinTokens);
                const std::vector<float> x =
                    random_activations(tokens, n, static_cast<std::uint32_t>(tokens));
                PreparedActivations acts;
                prepare_activations(type, x.data(), tokens, n, acts);
                std::vector<float> batch(static_cast<std::size_t>(tokens * rows));
                matmul_rows(type, w.data(), n, 0, rows, acts, batch.data(), rows);
                const std::string failure = first_token_unlike_alone(
                    type, w.data(), rows, n, x, tokens, batch, RowLayout::Rows);
                QVERIFY2(failure.empty(), (std::string(type_name(type)) + " " +
                                           simd_level_name(level) + " " + failure)
                                              .c_str());
            }
        }
    }
}

// AVX-512 prefill of F16/BF16 weights over activations without panels (prepared for F32
// weights, as when one set serves several products) widens each tile of rows to f32 once and
// runs the F32 tile over it (dot_avx512.cpp, run_f_widened). Widening a half is exact, so the
// result must equal, bit for bit, the F32 kernel's on an F32 matrix holding the same values: a
// lost or shifted element, a wrong row stride in the buffer or a tail that is not zeroed shows
// as a difference. Shapes: rows that leave a partial 4-row tile, n with a tail under 16, and token
// counts that leave partial 5-token tiles and cross the 24-token blocks of matmul_rows.
void TestMatmul::halfPrefillEqualsF32OfTheSameValues() {
    if (detected_simd_level() < SimdLevel::Avx512) QSKIP("this CPU has no AVX-512 kernels");
    LevelGuard guard;
    set_simd_level(SimdLevel::Avx512);
    for (Type type : {Type::F16, Type::BF16}) {
        for (const auto& [rows, n, tokens] :
             {std::tuple<std::int64_t, std::int64_t, std::int64_t>{7, 1000, 16},
              {13, 2821, 37},
              {4, 64, 131}}) {
            const Bytes half = random_weights(type, rows, n, 77);
            std::vector<float> wide(static_cast<std::size_t>(rows * n));
            for (std::size_t i = 0; i < wide.size(); ++i) {
                std::uint16_t h;
                std::memcpy(&h, half.data() + 2 * i, 2);
                wide[i] = type == Type::F16 ? f16_to_f32(h) : bf16_to_f32(h);
            }
            const std::vector<float> x = random_activations(tokens, n, 5);
            PreparedActivations acts;
            prepare_activations(Type::F32, x.data(), tokens, n, acts);
            QVERIFY(acts.panels() == nullptr);
            std::vector<float> got(static_cast<std::size_t>(tokens * rows));
            std::vector<float> want(got.size());
            matmul_rows(type, half.data(), n, 0, rows, acts, got.data(), rows);
            matmul_rows(Type::F32, wide.data(), n, 0, rows, acts, want.data(), rows);
            const std::string what =
                product_name(type, rows, n, tokens) + " against the F32 kernel: ";
            const std::string diff = first_bit_difference(got, want);
            QVERIFY2(diff.empty(), (what + diff).c_str());
        }
    }
}

// The AVX-512 prefill panels (gemm_panels_avx512.cpp, 12 rows x 32 tokens) sum every output
// element in the order of the AVX2 panels (gemm_panels_avx2.cpp, 6 rows x 16 tokens): one FMA
// chain per 512-wide k-block, the blocks added in order (gemm_panels.h). Two register tiles of
// different shapes must therefore give the same bits, which catches a tile that drops or
// repeats a row, a token group or a k step. Shapes: rows that leave partial 12- and 6-row
// panels, widths with a partial last k-block (1000, 2821) and one of a single short block (40),
// token counts with an odd number of 16-token groups (a one-group AVX-512 tile) and partial
// groups, and 300 tokens (three 128-token blocks).
void TestMatmul::panelsAgreeAcrossInstructionSets() {
    if (detected_simd_level() < SimdLevel::Avx512) QSKIP("this CPU has no AVX-512 kernels");
    LevelGuard guard;
    for (Type type : {Type::F16, Type::BF16}) {
        for (const auto& [rows, n, tokens] :
             {std::tuple<std::int64_t, std::int64_t, std::int64_t>{7, 1000, 16},
              {25, 2821, 37},
              {13, 40, 300},
              {48, 1024, 64}}) {
            const Bytes w = random_weights(type, rows, n, 91);
            const std::vector<float> x = random_activations(tokens, n, 17);
            std::vector<float> by_level[2];
            for (int l = 0; l < 2; ++l) {
                set_simd_level(l == 0 ? SimdLevel::Avx2 : SimdLevel::Avx512);
                PreparedActivations acts;
                prepare_activations(type, x.data(), tokens, n, acts);
                QVERIFY2(acts.panels() != nullptr, simd_level_name(active_simd_level()));
                by_level[l].assign(static_cast<std::size_t>(tokens * rows),
                                   std::numeric_limits<float>::quiet_NaN());
                matmul_rows(type, w.data(), n, 0, rows, acts, by_level[l].data(), rows);
            }
            const std::string what =
                product_name(type, rows, n, tokens) + ", AVX-512 panels against AVX2 panels: ";
            const std::string diff = unwritten_or_different(by_level[1], by_level[0]);
            QVERIFY2(diff.empty(), (what + diff).c_str());
        }
    }
}

// The AVX2 level's 32-block prefill GEMM with AVX-VNNI (vpdpbusd) against the same tile with
// vpmaddubsw: every block sum is an exact integer on both paths, so the outputs must agree bit
// for bit, for every 32-block type, at row counts that leave partial 16-row groups and token
// counts that leave partial tiles (5 or 6 tokens).
void TestMatmul::avxVnniAgreesWithMaddubs() {
    if (!avx_vnni_available()) QSKIP("this CPU has no AVX-VNNI");
    LevelGuard guard;
    struct VnniGuard {
        ~VnniGuard() { reset_avx_vnni(); }
    } vnni_guard;
    set_simd_level(SimdLevel::Avx2);
    int compared = 0;
    for (Type type : {Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::Q8_0}) {
        for (const auto& [rows, n, tokens] :
             {std::tuple<std::int64_t, std::int64_t, std::int64_t>{7, 64, 16},
              {41, 640, 37},
              {16, 1024, 131},
              {150, 576, 64}}) {
            const Bytes w = random_weights(type, rows, n, 93);
            const std::vector<float> x = random_activations(tokens, n, 19);
            PreparedActivations acts;
            prepare_activations(type, x.data(), tokens, n, acts);
            std::vector<float> out[2];
            for (int v = 0; v < 2; ++v) {
                set_avx_vnni(v == 1);
                QCOMPARE(avx_vnni_in_use(), v == 1);
                out[v].assign(static_cast<std::size_t>(tokens * rows),
                              std::numeric_limits<float>::quiet_NaN());
                matmul_rows(type, w.data(), n, 0, rows, acts, out[v].data(), rows);
            }
            const std::string what =
                product_name(type, rows, n, tokens) + ", AVX-VNNI against vpmaddubsw: ";
            const std::string diff = unwritten_or_different(out[1], out[0]);
            QVERIFY2(diff.empty(), (what + diff).c_str());
            ++compared;
        }
    }
    QCOMPARE(compared, 20);
}

// matmul_row_multiple: the engine cuts a matmul's rows between threads at multiples of it. At
// every level it must keep the kernels' row groups whole (the 4-row tiles, the panels' 6 (AVX2)
// or 12 (AVX-512) rows, the lane GEMMs' 16 or 32 rows: a lane GEMM at a chunk end computes a
// partial group in full), and a split there must give the bits of one call over all rows.
void TestMatmul::rowMultipleSplitsGiveTheSameBits() {
    LevelGuard guard;
    for (SimdLevel level : supported_levels()) {
        set_simd_level(level);
        for (Type type : {Type::F16, Type::Q8_0, Type::Q4_1, Type::Q4_K, Type::Q6_K}) {
            const std::int64_t n = 512;
            for (std::int64_t tokens : {1, 5, 20, 40}) {
                const std::int64_t m = matmul_row_multiple(type, tokens);
                const std::string what = std::string(type_name(type)) + " " +
                                         simd_level_name(level) + " " + std::to_string(tokens) +
                                         " tokens: multiple " + std::to_string(m);
                QVERIFY2(m > 0 && m % 8 == 0 && (m % 6 == 0 || m % 16 == 0), what.c_str());
                const bool lane_gemm = tokens >= kPanelMinTokens && level != SimdLevel::Scalar &&
                                       activation_format_for(type) != ActivationFormat::F32 &&
                                       !std::getenv("TOKENSCOPE_INT8_GEMM");
                if (lane_gemm && level == SimdLevel::Avx2) QVERIFY2(m % 16 == 0, what.c_str());
                if (lane_gemm && level == SimdLevel::Avx512 && tokens >= 32 &&
                    activation_format_for(type) == ActivationFormat::Q8_256) {
                    QVERIFY2(m % 32 == 0, what.c_str());
                }
                const std::int64_t rows = 3 * m + 5;
                const Bytes w = random_weights(type, rows, n, 91);
                const std::vector<float> x = random_activations(tokens, n, 17);
                PreparedActivations acts;
                prepare_activations(type, x.data(), tokens, n, acts);
                std::vector<float> whole(static_cast<std::size_t>(tokens * rows));
                std::vector<float> split(whole.size(), -1.0f);
                matmul_rows(type, w.data(), n, 0, rows, acts, whole.data(), rows);
                for (std::int64_t r = 0; r < rows; r += m)
                    matmul_rows(type, w.data(), n, r, std::min(rows, r + m), acts, split.data(),
                                rows);
                QVERIFY2(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)) == 0,
                         (what + ": chunks at the multiple differ from one call").c_str());
            }
        }
    }
    // Interleaved matrices: whole groups of 16 always, and at AVX-512 two groups (32 rows) where
    // the lane GEMMs run, since they multiply 32 rows at once and a chunk of 48 rows cost as much
    // as one of 64 (SmolLM2's 576-row matrices came in chunks of 48, its 192-row K and V in
    // chunks of 16, each computing 32).
    for (SimdLevel level : supported_levels()) {
        set_simd_level(level);
        for (Type type : kInterleavedTypes) {
            if (!interleaving_pays(type)) continue;
            const bool nibbles = type == Type::Q4_0 || type == Type::Q4_1 || type == Type::Q5_0 ||
                                 type == Type::Q5_1;
            const std::int64_t lane_gemm_from =
                level == SimdLevel::Avx512 && !nibbles ? 32 : kPanelMinTokens;
            const std::int64_t n = interleaved_n(type);
            for (std::int64_t tokens : {1, 5, 20, 40}) {
                const std::int64_t m = matmul_row_multiple(type, tokens, RowLayout::Interleaved);
                const std::string what = std::string(type_name(type)) + " interleaved " +
                                         simd_level_name(level) + " " + std::to_string(tokens) +
                                         " tokens: multiple " + std::to_string(m);
                QVERIFY2(m > 0 && m % 16 == 0, what.c_str());
                if (level == SimdLevel::Avx512 && tokens >= lane_gemm_from &&
                    !std::getenv("TOKENSCOPE_INT8_GEMM")) {
                    QVERIFY2(m % 32 == 0, what.c_str());
                }
                const std::int64_t rows = 3 * m + 16;
                const Bytes w = random_weights(type, rows, n, 93);
                Bytes wi(w.size());
                interleave_rows(type, w.data(), rows, n, wi.data());
                const std::vector<float> x = random_activations(tokens, n, 19);
                PreparedActivations acts;
                prepare_activations(type, x.data(), tokens, n, acts);
                std::vector<float> whole(static_cast<std::size_t>(tokens * rows));
                std::vector<float> split(whole.size(), -1.0f);
                matmul_rows(type, wi.data(), n, 0, rows, acts, whole.data(), rows,
                            RowLayout::Interleaved);
                for (std::int64_t r = 0; r < rows; r += m)
                    matmul_rows(type, wi.data(), n, r, std::min(rows, r + m), acts, split.data(),
                                rows, RowLayout::Interleaved);
                QVERIFY2(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)) == 0,
                         (what + ": chunks at the multiple differ from one call").c_str());
            }
        }
    }
}

// "" when two encodings of the same weights (rows x n, ta in wa and tb in wb) give the same
// products bit for bit for every token count at the active level, else the first difference.
std::string first_product_difference(Type ta, const Bytes& wa, Type tb, const Bytes& wb,
                                     std::int64_t rows, std::int64_t n,
                                     std::initializer_list<std::int64_t> token_counts,
                                     std::uint32_t seed) {
    for (std::int64_t tokens : token_counts) {
        const std::vector<float> x = random_activations(tokens, n, seed);
        PreparedActivations acts_a, acts_b;
        prepare_activations(ta, x.data(), tokens, n, acts_a);
        prepare_activations(tb, x.data(), tokens, n, acts_b);
        std::vector<float> got_a(static_cast<std::size_t>(tokens * rows));
        std::vector<float> got_b(got_a.size());
        matmul_rows(ta, wa.data(), n, 0, rows, acts_a, got_a.data(), rows);
        matmul_rows(tb, wb.data(), n, 0, rows, acts_b, got_b.data(), rows);
        const std::string diff = first_bit_difference(got_a, got_b);
        if (!diff.empty()) {
            return std::string(simd_level_name(active_simd_level())) + " " + std::to_string(rows) +
                   " rows x " + std::to_string(tokens) + " tokens, " + type_name(ta) +
                   " against " + type_name(tb) + ": " + diff;
        }
    }
    return "";
}

// The int8 lane GEMMs pack Q4_K rows with their own packer (InterleavedKRows::pack_q4_k in
// int8_lanes_avx2.h) and Q5_K rows with the general one. A Q5_K block whose fifth bits are all
// zero holds the same values as the Q4_K block with its scales and nibbles, and both packers
// must then give the same packed bytes, so the products must agree bit for bit: a nibble in the
// wrong group or a scale word or offset for the wrong sub-block shows as a difference (offsets
// of the wrong sub-blocks fail it). Rows 45 (a 32-row group and a partial one, 8-row slices
// missing) and 16 (AVX2: one full group), token counts through the lane GEMMs and their tails.
void TestMatmul::q4kLanePackerEqualsTheGeneralOne() {
    LevelGuard guard;
    const std::int64_t n = 768;
    for (SimdLevel level : supported_levels()) {
        set_simd_level(level);
        for (std::int64_t rows : {45, 16}) {
            const Bytes q4 = random_weights(Type::Q4_K, rows, n, 123);
            const std::int64_t blocks = rows * n / 256;
            Bytes q5(static_cast<std::size_t>(blocks) * sizeof(BlockQ5_K));
            for (std::int64_t b = 0; b < blocks; ++b) {
                const auto* from = reinterpret_cast<const BlockQ4_K*>(q4.data()) + b;
                auto* to = reinterpret_cast<BlockQ5_K*>(q5.data()) + b;
                std::memcpy(to->d, from->d, sizeof(to->d));
                std::memcpy(to->dmin, from->dmin, sizeof(to->dmin));
                std::memcpy(to->scales, from->scales, sizeof(to->scales));
                std::memset(to->qh, 0, sizeof(to->qh));
                std::memcpy(to->qs, from->qs, sizeof(to->qs));
            }
            const std::string diff = first_product_difference(
                Type::Q4_K, q4, Type::Q5_K, q5, rows, n, {16, 23, 32, 37, 64}, 29);
            QVERIFY2(diff.empty(), diff.c_str());
        }
    }
}

// The lane GEMMs pack 32-block rows in registers (q32_words_of_8_rows, int8_lanes_avx2.h), Q5
// with its fifth bits spread from a gather. Q5_1 blocks whose fifth bits are all zero hold the
// values of the Q4_1 blocks they copy, so both must give the same bits (the fifth bits
// themselves are checked against the float64 reference); 45 rows end in a partial group whose
// second register is partly empty, 16 in one whose second register is empty; 13 blocks end in
// an odd one (blocks are packed in pairs).
void TestMatmul::q51WithoutFifthBitsEqualsQ41() {
    LevelGuard guard;
    const std::int64_t n = 416;
    for (SimdLevel level : supported_levels()) {
        set_simd_level(level);
        for (std::int64_t rows : {45, 16}) {
            const Bytes q4 = random_weights(Type::Q4_1, rows, n, 321);
            const std::int64_t blocks = rows * n / 32;
            Bytes q5(static_cast<std::size_t>(blocks) * sizeof(BlockQ5_1));
            for (std::int64_t b = 0; b < blocks; ++b) {
                const auto* from = reinterpret_cast<const BlockQ4_1*>(q4.data()) + b;
                auto* to = reinterpret_cast<BlockQ5_1*>(q5.data()) + b;
                std::memcpy(to->d, from->d, sizeof(to->d));
                std::memcpy(to->m, from->m, sizeof(to->m));
                std::memset(to->qh, 0, sizeof(to->qh));
                std::memcpy(to->qs, from->qs, sizeof(to->qs));
            }
            const std::string diff = first_product_difference(
                Type::Q4_1, q4, Type::Q5_1, q5, rows, n, {16, 32, 37, 64}, 31);
            QVERIFY2(diff.empty(), diff.c_str());
        }
    }
}

// Activations prepared for one weight type serve any other of the same format (matmul_rows
// allows it, and CpuBackend::matmuls prepares once for a layer's Q, K and V, which Gemma 3's
// Q4_K_M file stores as Q5_0 and Q8_0). Whichever type prepared them, a product must come out
// the same bits: 20 tokens is over the AVX-512 lane GEMM's line for Q5_0 (16) and under Q8_0's
// (32), where the row tile reads the activations' interleaved copy.
void TestMatmul::activationsServeEveryTypeOfTheirFormat() {
    LevelGuard guard;
    const std::int64_t rows = 13, n = 640;
    const Bytes q8 = random_weights(Type::Q8_0, rows, n, 41);
    const Bytes q5 = random_weights(Type::Q5_0, rows, n, 42);
    for (SimdLevel level : supported_levels()) {
        set_simd_level(level);
        for (std::int64_t tokens : {7, 20, 40}) {
            const std::vector<float> x = random_activations(tokens, n, 43);
            PreparedActivations for_q8, for_q5;
            prepare_activations(Type::Q8_0, x.data(), tokens, n, for_q8);
            prepare_activations(Type::Q5_0, x.data(), tokens, n, for_q5);
            for (const auto& [type, w] : {std::pair{Type::Q8_0, &q8}, std::pair{Type::Q5_0, &q5}}) {
                std::vector<float> own(static_cast<std::size_t>(tokens * rows));
                std::vector<float> other(own.size());
                const bool q8_type = type == Type::Q8_0;
                matmul_rows(type, w->data(), n, 0, rows, q8_type ? for_q8 : for_q5, own.data(),
                            rows);
                matmul_rows(type, w->data(), n, 0, rows, q8_type ? for_q5 : for_q8, other.data(),
                            rows);
                const std::string what = std::string(simd_level_name(level)) + " " +
                                         type_name(type) + " x " + std::to_string(tokens) +
                                         " tokens over the other type's activations: ";
                const std::string diff = first_bit_difference(own, other);
                QVERIFY2(diff.empty(), (what + diff).c_str());
            }
        }
    }
}

// The weight prefetch level (tensor/weight_prefetch.h) is a speed choice only: every level
// gives the same bytes, for decode, a small batch and prefill, on every instruction set, over
// a sub-range of rows long enough that the prefetch runs into the range's end, where it is
// clipped. (A prefetch never faults, so no test can see a stray one; this checks results.)
// And the default follows the CPU (AMD family 0x19 prefetches into L2; F16/BF16 rows on Zen 3,
// family 0x19 without AVX-512, not at all) unless the environment overrides it. matmul_rows'
// stream_end (prefetch on past the range) is a speed choice too: pieces give one call's bits.
void TestMatmul::prefetchLevelsChangeNoResult() {
    LevelGuard guard;
    struct PrefetchGuard {
        ~PrefetchGuard() { reset_weight_prefetch(); }
    } prefetch_guard;
    if (qEnvironmentVariableIsEmpty("TOKENSCOPE_PREFETCH")) {
        const tokenscope::cpu::X86Model& m = tokenscope::cpu::x86_model();
        const bool family_19 = m.amd && m.family == 0x19;
        const WeightPrefetch want = family_19 ? WeightPrefetch::L2 : WeightPrefetch::L1;
        QCOMPARE(default_weight_prefetch(), want);
        const bool zen3 = family_19 && !tokenscope::cpu::x86_features().avx512f;
        QCOMPARE(default_half_row_prefetch(), zen3 ? WeightPrefetch::None : want);
    }
    QCOMPARE(weight_prefetch(), default_weight_prefetch());
    QCOMPARE(half_row_prefetch(), default_half_row_prefetch());
    for (Type type : {Type::F16, Type::Q8_0, Type::Q4_1, Type::Q4_K, Type::Q6_K}) {
        const std::int64_t n = 1024, rows = 96;  // 96 rows: 96 KiB of Q8_0, 192 KiB of F16
        const Bytes w = random_weights(type, rows, n, 33);
        for (SimdLevel level : supported_levels()) {
            set_simd_level(level);
            for (std::int64_t tokens : {1, 3, 20}) {
                const std::vector<float> x =
                    random_activations(tokens, n, static_cast<std::uint32_t>(tokens + 50));
                PreparedActivations acts;
                prepare_activations(type, x.data(), tokens, n, acts);
                std::vector<float> base(static_cast<std::size_t>(tokens * rows));
                set_weight_prefetch(WeightPrefetch::L1);
                // Rows 10..90 of 96.
                matmul_rows(type, w.data(), n, 10, 90, acts, base.data(), rows);
                for (WeightPrefetch p : {WeightPrefetch::None, WeightPrefetch::L2}) {
                    set_weight_prefetch(p);
                    QCOMPARE(weight_prefetch(), p);
                    QCOMPARE(half_row_prefetch(), p);  // a forced level holds for every type
                    std::vector<float> out(base.size());
                    matmul_rows(type, w.data(), n, 10, 90, acts, out.data(), rows);
                    bool same = true;
                    for (std::int64_t t = 0; t < tokens; ++t) {
                        same = same &&
                               std::memcmp(out.data() + t * rows + 10, base.data() + t * rows + 10,
                                           80 * sizeof(float)) == 0;
                    }
                    const std::string what = std::string(type_name(type)) + " " +
                                             simd_level_name(level) + " " + std::to_string(tokens) +
                                             " tokens, prefetch " + weight_prefetch_name(p);
                    QVERIFY2(same, (what + ": differs from prefetch l1").c_str());
                }
                // The same rows in three pieces whose prefetch runs on past each piece
                // (stream_end, as decode's shares), the last to the matrix's end.
                set_weight_prefetch(WeightPrefetch::L1);
                std::vector<float> pieces(base.size());
                matmul_rows(type, w.data(), n, 10, 32, acts, pieces.data(), rows, RowLayout::Rows,
                            90);
                matmul_rows(type, w.data(), n, 32, 64, acts, pieces.data(), rows, RowLayout::Rows,
                            90);
                matmul_rows(type, w.data(), n, 64, 90, acts, pieces.data(), rows, RowLayout::Rows,
                            rows);
                for (std::int64_t t = 0; t < tokens; ++t) {
                    QVERIFY2(std::memcmp(pieces.data() + t * rows + 10, base.data() + t * rows + 10,
                                         80 * sizeof(float)) == 0,
                             (std::string(type_name(type)) + " " + simd_level_name(level) + " " +
                              std::to_string(tokens) + " tokens: pieces with stream_end differ")
                                 .c_str());
                }
            }
        }
    }
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, set_weight_prefetch(static_cast<WeightPrefetch>(7)));
    QCOMPARE(std::string(weight_prefetch_name(WeightPrefetch::L2)), std::string("l2"));
}

void TestMatmul::preparedActivationsAreReused() {
    PreparedActivations acts;
    const std::vector<float> x = random_activations(4, 2048, 9);
    prepare_activations(Type::Q4_K, x.data(), 4, 2048, acts);
    const std::uint8_t* first = acts.row(0);
    QCOMPARE(acts.format(), ActivationFormat::Q8_256);
    prepare_activations(Type::Q8_0, x.data(), 2, 1024, acts);  // smaller: same buffer
    QCOMPARE(acts.row(0), first);
    QCOMPARE(acts.format(), ActivationFormat::Q8_32);
    QCOMPARE(acts.rows(), std::int64_t{2});
    QVERIFY(reinterpret_cast<std::uintptr_t>(acts.row(1)) % 64 == 0);
}

// The backend prepares a prompt's rows on its thread pool. Chunks of 5 items on their own
// threads, into a buffer first filled with garbage (a reused buffer holds the last product's
// bytes), must give exactly the serial preparation's bytes, padding and panels included.
void TestMatmul::parallelPreparationMatchesSerial() {
    LevelGuard guard;
    const ParallelRows threads = [](std::int64_t count,
                                    const std::function<void(std::int64_t, std::int64_t)>& body) {
        std::vector<std::thread> pool;
        for (std::int64_t b = 0; b < count; b += 5)
            pool.emplace_back([&body, b, count] { body(b, std::min(count, b + 5)); });
        for (std::thread& t : pool) t.join();
    };
    for (SimdLevel level : supported_levels()) {
        set_simd_level(level);  // AVX2 adds the F16 panels
        // F16 rows 1000 wide: 4000 bytes in a 4032-byte stride, whose padding must come out zero.
        for (const auto& [type, n] :
             {std::pair{Type::F16, std::int64_t{512}}, std::pair{Type::F16, std::int64_t{1000}},
              std::pair{Type::Q8_0, std::int64_t{512}}, std::pair{Type::Q4_K, std::int64_t{512}}}) {
            const std::int64_t rows = 37;
            const std::vector<float> x = random_activations(rows, n, 21);
            PreparedActivations serial, parallel;
            prepare_activations(type, x.data(), rows, n, serial);
            std::vector<float> garbage(static_cast<std::size_t>(rows * n * 8), 3.5f);
            prepare_activations(type, garbage.data(), rows * 8, n, parallel);
            prepare_activations(type, x.data(), rows, n, parallel, threads);
            QCOMPARE(parallel.row_stride(), serial.row_stride());
            // F32 rows are not written beside panels (no kernel reads both); the others are.
            const bool panels_only =
                serial.panels() != nullptr && serial.format() == ActivationFormat::F32;
            QCOMPARE(serial.has_rows(), !panels_only);
            QCOMPARE(parallel.has_rows(), serial.has_rows());
            const std::size_t bytes = serial.row_stride() * static_cast<std::size_t>(rows);
            if (serial.has_rows())
                QVERIFY2(std::memcmp(parallel.row(0), serial.row(0), bytes) == 0, type_name(type));
            if (parallel.format() == ActivationFormat::F32 && parallel.has_rows()) {
                const auto used = static_cast<std::size_t>(n) * sizeof(float);
                for (std::int64_t r = 0; r < rows; ++r) {
                    const std::uint8_t* row = parallel.row(r);
                    QVERIFY2(std::all_of(row + used, row + parallel.row_stride(),
                                         [](std::uint8_t b) { return b == 0; }),
                             qPrintable(QString("F32 row %1 padding").arg(r)));
                }
            }
            QCOMPARE(parallel.panels() != nullptr, serial.panels() != nullptr);
            if (serial.panels() != nullptr) {
                const std::size_t panel_bytes =
                    static_cast<std::size_t>((rows + 15) / 16 * n * 16) * sizeof(float);
                QVERIFY(std::memcmp(parallel.panels(), serial.panels(), panel_bytes) == 0);
                // The layout (matmul.h): group g holds element k of token 16 g + j at
                // 16 k + j, and zeros for the tokens past the last row (here 5 real of 16).
                const float* p = parallel.panels();
                for (std::int64_t g = 0; g < (rows + 15) / 16; ++g) {
                    for (std::int64_t k = 0; k < n; ++k) {
                        for (std::int64_t j = 0; j < 16; ++j) {
                            const std::int64_t t = 16 * g + j;
                            const float want =
                                t < rows ? x[static_cast<std::size_t>(t * n + k)] : 0.0f;
                            const float got = p[g * n * 16 + 16 * k + j];
                            if (got != want) {
                                QFAIL(qPrintable(QString("%1 n=%2 panel group %3 element %4 token "
                                                         "%5: %6, expected %7")
                                                     .arg(type_name(type))
                                                     .arg(n)
                                                     .arg(g)
                                                     .arg(k)
                                                     .arg(j)
                                                     .arg(got)
                                                     .arg(want)));
                            }
                        }
                    }
                }
            }
        }
    }
}

// The AVX2 row quantizers (activation_quant_avx2.cpp) against the scalar ones, byte for byte:
// qs, scales, sums, interleaved copy and padding. Rows hold what the rounding and clamping
// must agree on: random values, an all-zero block, values that land exactly on .5 after
// scaling (ties to even), one huge value that sends the rest of its block to 0, signed zeros,
// a block with an infinity, and one ending in a NaN. Widths: one 32-block group, a partial
// interleave group (n = 96, 1056), whole groups of 8 blocks that the AVX2 Q8_32 quantizer
// takes together (512; 1056 is 4 of them and one block) and several K super-blocks.
void TestMatmul::simdPreparationMatchesScalar() {
    LevelGuard guard;
    if (detected_simd_level() == SimdLevel::Scalar) QSKIP("this CPU has no AVX2");
    for (Type type : {Type::Q8_0, Type::Q4_K}) {
        const std::vector<std::int64_t> widths = type == Type::Q8_0
                                                     ? std::vector<std::int64_t>{32, 96, 512, 1056}
                                                     : std::vector<std::int64_t>{256, 768};
        for (const std::int64_t n : widths) {
            const std::int64_t rows = 6;
            std::vector<float> x = random_activations(rows, n, 33);
            for (std::int64_t k = 0; k < 32; ++k) {
                x[static_cast<std::size_t>(n + k)] = 0.0f;                      // row 1: zero block
                x[static_cast<std::size_t>(2 * n + k)] = 0.25f * (2 * k - 31);  // row 2
                x[static_cast<std::size_t>(3 * n + k)] = k == 3 ? 1e30f : (k % 2 ? -0.0f : 1e-3f);
            }
            x[static_cast<std::size_t>(2 * n + 31)] = 63.5f;  // d = 0.5: x[k] / d = k - 15.5, ties
            x[static_cast<std::size_t>(4 * n + 5)] = std::numeric_limits<float>::infinity();
            // Row 5: a NaN as the block's last value, where the max reduction's operand order
            // decides whether it is kept.
            x[static_cast<std::size_t>(6 * n - 1)] = std::numeric_limits<float>::quiet_NaN();
            PreparedActivations scalar, simd;
            set_simd_level(SimdLevel::Scalar);
            prepare_activations(type, x.data(), rows, n, scalar);
            set_simd_level(SimdLevel::Avx2);
            prepare_activations(type, x.data(), rows, n, simd);
            QCOMPARE(simd.row_stride(), scalar.row_stride());
            for (std::int64_t r = 0; r < rows; ++r) {
                const std::string what = std::string(type_name(type)) + " n=" + std::to_string(n) +
                                         " row " + std::to_string(r);
                QVERIFY2(std::memcmp(simd.row(r), scalar.row(r), scalar.row_stride()) == 0,
                         what.c_str());
            }
        }
    }
}

void TestMatmul::emptyInputs() {
    PreparedActivations acts;
    prepare_activations(Type::Q8_0, nullptr, 3, 0, acts);
    std::vector<float> out(6, -1.0f);
    matmul_rows(Type::Q8_0, nullptr, 0, 0, 2, acts, out.data(), 2);
    for (float v : out) QCOMPARE(v, 0.0f);
    prepare_activations(Type::Q8_0, nullptr, 0, 64, acts);
    matmul_rows(Type::Q8_0, nullptr, 64, 0, 2, acts, out.data(), 2);  // no tokens: no writes
}

void TestMatmul::rejectsMismatchedArguments() {
    const std::vector<float> x = random_activations(2, 512, 3);
    const Bytes w = random_weights(Type::Q4_K, 2, 512, 4);
    std::vector<float> out(4);
    PreparedActivations acts;
    QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                             prepare_activations(Type::Q4_K, x.data(), 1, 100, acts));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                             prepare_activations(Type::Q8_0, x.data(), -1, 64, acts));
    prepare_activations(Type::Q8_0, x.data(), 2, 512, acts);
    // Rows of one format serve every weight type of that format, and only those.
    QVERIFY(acts.serves(Type::Q4_0, 512, 2));
    QVERIFY(!acts.serves(Type::Q4_K, 512, 2));
    QVERIFY(!acts.serves(Type::Q8_0, 256, 2));
    // Prepared for 32-blocks, used with K-quant weights.
    QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                             matmul_rows(Type::Q4_K, w.data(), 512, 0, 2, acts, out.data(), 2));
    prepare_activations(Type::Q4_K, x.data(), 2, 512, acts);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                             matmul_rows(Type::Q4_K, w.data(), 256, 0, 2, acts, out.data(), 2));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                             matmul_rows(Type::Q4_K, w.data(), 512, 2, 1, acts, out.data(), 2));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                             matmul_rows(Type::Q4_K, w.data(), 512, 0, 2, acts, out.data(), 1));
    matmul_rows(Type::Q4_K, w.data(), 512, 0, 2, acts, out.data(), 2);

    // Activations prepared for F16 weights as panels only (no rows) serve F16 weights, and F32
    // weights (the same format, read from rows) get an error instead of unwritten rows.
    LevelGuard guard;
    for (SimdLevel level : supported_levels()) {
        if (level == SimdLevel::Scalar) continue;  // no panels at the scalar level
        set_simd_level(level);
        const std::int64_t tokens = kPanelMinTokens, n = 64, rows = 16;
        const std::vector<float> xs = random_activations(tokens, n, 5);
        const Bytes w16 = random_weights(Type::F16, rows, n, 6);
        const Bytes w32 = random_weights(Type::F32, rows, n, 7);
        std::vector<float> y(static_cast<std::size_t>(tokens * rows));
        prepare_activations(Type::F16, xs.data(), tokens, n, acts);
        QVERIFY(acts.panels() != nullptr);
        QVERIFY(!acts.has_rows());
        QVERIFY(acts.serves(Type::F16, n, tokens));
        QVERIFY(!acts.serves(Type::F32, n, tokens));  // the same format, but it reads rows
        QVERIFY(!acts.serves(Type::F16, n, tokens - 1));
        matmul_rows(Type::F16, w16.data(), n, 0, rows, acts, y.data(), rows);
        // Against the float64 dot product of the dequantized weights, within the rounding bound
        // of an n-term f32 sum (n * eps * sum of |terms|, doubled).
        std::vector<float> wrow(static_cast<std::size_t>(n));
        for (std::int64_t r = 0; r < rows; ++r) {
            dequantize_row(Type::F16, w16.data() + r * row_bytes(Type::F16, n), wrow.data(), n);
            for (std::int64_t t = 0; t < tokens; ++t) {
                double want = 0.0, magnitude = 0.0;
                for (std::int64_t k = 0; k < n; ++k) {
                    const double term = static_cast<double>(wrow[static_cast<std::size_t>(k)]) *
                                        xs[static_cast<std::size_t>(t * n + k)];
                    want += term;
                    magnitude += std::abs(term);
                }
                const double bound = 2.0 * static_cast<double>(n) * FLT_EPSILON * magnitude;
                QVERIFY(std::abs(y[static_cast<std::size_t>(t * rows + r)] - want) <= bound);
            }
        }
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument, matmul_rows(Type::F32, w32.data(), n, 0, rows, acts, y.data(), rows));
        set_simd_level(SimdLevel::Scalar);  // its kernels read rows too
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument, matmul_rows(Type::F16, w16.data(), n, 0, rows, acts, y.data(), rows));
    }
}

// The read-bandwidth probe's streams (read_stream_layout): equal lengths in whole 64 KiB, inside
// the buffer, not overlapping, using all but under 64 KiB per stream plus the skew, and no two
// starting a multiple of 64 KiB apart. The layout before (each thread's half cut in quarters)
// put 1 GiB's 8 streams 128 MiB apart, which the last check rejects.
void TestMatmul::readStreamsAreNotPowerOfTwoApart() {
    constexpr std::size_t kGranule = std::size_t{64} << 10;
    for (const std::size_t bytes :
         {std::size_t{1} << 30, (std::size_t{1} << 30) + (std::size_t{3} << 20) + 7 * 4096,
          std::size_t{426} << 20, std::size_t{128} << 20, 64 * kGranule + 63 * 64}) {
        for (const int streams : {1, 2, 4, 8, 16, 64}) {
            const std::string what = std::to_string(bytes) + " bytes, " + std::to_string(streams);
            const ReadStreamLayout l = read_stream_layout(bytes, streams);
            QVERIFY2(static_cast<int>(l.starts.size()) == streams, what.c_str());
            QVERIFY2(l.length > 0 && l.length % kGranule == 0, what.c_str());
            QVERIFY2(l.starts.back() + l.length <= bytes, what.c_str());
            const std::size_t s = static_cast<std::size_t>(streams);
            QVERIFY2(l.length * s + kGranule * s + 64 * s > bytes, what.c_str());
            for (std::size_t i = 0; i < s; ++i) {
                if (i > 0) QVERIFY2(l.starts[i] >= l.starts[i - 1] + l.length, what.c_str());
                for (std::size_t j = i + 1; j < s; ++j)
                    QVERIFY2((l.starts[j] - l.starts[i]) % kGranule != 0, what.c_str());
            }
        }
    }
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, read_stream_layout(std::size_t{1} << 30, 0));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, read_stream_layout(kGranule, 2));
}

QTEST_APPLESS_MAIN(TestMatmul)
#include "test_matmul.moc"
