// See matmul_selftest.h. Weights are random non-zero floats put through tensor::quantize_row, so
// every block has real scales; the reference is y[t][r] = sum_c dequantize_row(W[r])[c] * x[t][c]
// in double. Tolerances: the GEMV and Sgemm paths accumulate in f32 over a few hundred products
// (expected error ~1e-7 relative), 1e-5; the cuBLAS path rounds W and x to 16 bits first:
// f16 (2^-11 relative per value) 2e-3, bf16 (2^-8) 1e-2.
#include "selftest/matmul_selftest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "matmul/matmul.cuh"
#include "selftest/device_buffer.h"
#include "tensor/type.h"

namespace tokenscope::cuda {

namespace {

struct Case {
    const tensor::TypeTraits* traits;
    std::int64_t rows;
    std::int64_t cols;
    int tokens;
    bool bf16;  // cuBLAS path in bf16 instead of f16
    GemvVariant variant = GemvVariant::Best;
};

MatmulCheck run_case(const Case& c, std::mt19937_64& rng, MatmulWorkspace& ws) {
    const tensor::Type type = c.traits->type;
    MatmulCheck check;
    check.name = std::string(c.traits->name) + " rows=" + std::to_string(c.rows) +
                 " cols=" + std::to_string(c.cols) + " tokens=" + std::to_string(c.tokens);
    if (c.tokens <= kGemvMaxTokens) {
        check.precision = c.variant == GemvVariant::Reference    ? "f32 gemv (reference)"
                          : c.variant == GemvVariant::Vectorized ? "f32 gemv (vectorised)"
                                                                 : "f32 gemv";
        check.tolerance = 1e-5;
    } else if (type == tensor::Type::F32) {
        check.precision = "f32 cublas";
        check.tolerance = 1e-5;
    } else if (c.bf16) {
        check.precision = "bf16 cublas";
        check.tolerance = 1e-2;
    } else {
        check.precision = "f16 cublas";
        check.tolerance = 2e-3;
    }
    if (c.traits->quantize_row == nullptr) {
        // Every format in type_table.cpp has a quantizer; a new one without must get test data here.
        check.name += " (no quantizer: not tested)";
        check.rel_error = std::nan("");
        return check;
    }

    // Weights: non-zero magnitudes in [0.05, 1) with random signs, quantized row by row.
    std::uniform_real_distribution<float> magnitude(0.05f, 1.0f);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::bernoulli_distribution negative(0.5);
    const std::size_t row_bytes = tensor::row_bytes(type, c.cols);
    std::vector<unsigned char> w_host(row_bytes * static_cast<std::size_t>(c.rows));
    std::vector<float> row_f32(static_cast<std::size_t>(c.cols));
    std::vector<double> w_ref(static_cast<std::size_t>(c.rows * c.cols));
    for (std::int64_t r = 0; r < c.rows; ++r) {
        for (float& v : row_f32) v = negative(rng) ? -magnitude(rng) : magnitude(rng);
        unsigned char* dst = w_host.data() + static_cast<std::size_t>(r) * row_bytes;
        tensor::quantize_row(type, row_f32.data(), dst, c.cols);
        tensor::dequantize_row(type, dst, row_f32.data(), c.cols);
        for (std::int64_t k = 0; k < c.cols; ++k) {
            w_ref[static_cast<std::size_t>(r * c.cols + k)] = row_f32[static_cast<std::size_t>(k)];
        }
    }
    std::vector<float> x_host(static_cast<std::size_t>(c.tokens * c.cols));
    for (float& v : x_host) v = uniform(rng);

    std::vector<double> y_ref(static_cast<std::size_t>(c.tokens * c.rows));
    for (int t = 0; t < c.tokens; ++t) {
        for (std::int64_t r = 0; r < c.rows; ++r) {
            double sum = 0;
            for (std::int64_t k = 0; k < c.cols; ++k) {
                sum += w_ref[static_cast<std::size_t>(r * c.cols + k)] *
                       static_cast<double>(x_host[static_cast<std::size_t>(t * c.cols + k)]);
            }
            y_ref[static_cast<std::size_t>(t * c.rows + r)] = sum;
        }
    }

    selftest::DeviceBuffer<unsigned char> w_dev(w_host);
    selftest::DeviceBuffer<float> x_dev(x_host);
    selftest::DeviceBuffer<float> y_dev(y_ref.size());
    ws.precision = c.bf16 ? GemmPrecision::BF16 : GemmPrecision::F16;
    if (c.tokens <= kGemvMaxTokens) {
        matmul_gemv(type, w_dev.get(), c.rows, c.cols, x_dev.get(), c.tokens, y_dev.get(), nullptr, c.variant);
    } else {
        matmul(type, w_dev.get(), c.rows, c.cols, x_dev.get(), c.tokens, y_dev.get(), ws, nullptr);
    }
    TOKENSCOPE_CUDA_CHECK(cudaGetLastError());
    const std::vector<float> y_host = y_dev.download();  // cudaMemcpy: waits for the kernels

    double diff2 = 0;
    double ref2 = 0;
    for (std::size_t i = 0; i < y_ref.size(); ++i) {
        const double d = static_cast<double>(y_host[i]) - y_ref[i];
        diff2 += d * d;
        ref2 += y_ref[i] * y_ref[i];
    }
    check.rel_error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    check.passed = std::isfinite(check.rel_error) && check.rel_error <= check.tolerance;
    return check;
}

// A random quantized matrix and its dequantized values (the reference's weights), as run_case.
struct HostMatrix {
    std::vector<unsigned char> bytes;
    std::vector<double> values;  // [rows][cols]
};

HostMatrix make_matrix(tensor::Type type, std::int64_t rows, std::int64_t cols, std::mt19937_64& rng) {
    std::uniform_real_distribution<float> magnitude(0.05f, 1.0f);
    std::bernoulli_distribution negative(0.5);
    const std::size_t row_bytes = tensor::row_bytes(type, cols);
    HostMatrix m{std::vector<unsigned char>(row_bytes * static_cast<std::size_t>(rows)),
                 std::vector<double>(static_cast<std::size_t>(rows * cols))};
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t r = 0; r < rows; ++r) {
        for (float& v : row) v = negative(rng) ? -magnitude(rng) : magnitude(rng);
        unsigned char* dst = m.bytes.data() + static_cast<std::size_t>(r) * row_bytes;
        tensor::quantize_row(type, row.data(), dst, cols);
        tensor::dequantize_row(type, dst, row.data(), cols);
        for (std::int64_t k = 0; k < cols; ++k) m.values[static_cast<std::size_t>(r * cols + k)] = row[static_cast<std::size_t>(k)];
    }
    return m;
}

std::vector<double> reference_gemv(const HostMatrix& m, std::int64_t rows, std::int64_t cols, const std::vector<float>& x) {
    std::vector<double> y(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) {
        double sum = 0;
        for (std::int64_t k = 0; k < cols; ++k) {
            sum += m.values[static_cast<std::size_t>(r * cols + k)] * static_cast<double>(x[static_cast<std::size_t>(k)]);
        }
        y[static_cast<std::size_t>(r)] = sum;
    }
    return y;
}

MatmulCheck finish(std::string name, const std::vector<float>& got, const std::vector<double>& want) {
    MatmulCheck check;
    check.name = std::move(name);
    check.precision = "f32 fused gemv";
    check.tolerance = 1e-5;
    double diff2 = 0, ref2 = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double d = static_cast<double>(got[i]) - want[i];
        diff2 += d * d;
        ref2 += want[i] * want[i];
    }
    check.rel_error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    check.passed = std::isfinite(check.rel_error) && check.rel_error <= check.tolerance;
    return check;
}

// The fused decode GEMVs (matmul.cuh): gate + up + activation against act(g) * u in float64
// (the activation applied in double to the float64 products: the check covers the products and
// the activation together), and Q/K/V in one launch against three float64 products. Odd row
// counts (a partial last block of 4 warps; QKV: the matrix boundaries fall inside blocks).
void check_fused(std::mt19937_64& rng, std::vector<MatmulCheck>& checks) {
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (const tensor::Type type : {tensor::Type::F16, tensor::Type::Q8_0, tensor::Type::Q4_K}) {
        const std::string tname = tensor::type_name(type);
        for (const std::int64_t cols : {std::int64_t{512}, std::int64_t{2048}}) {
            std::vector<float> x(static_cast<std::size_t>(cols));
            for (float& v : x) v = uniform(rng);
            selftest::DeviceBuffer<float> x_dev(x);
            // Gate + up, both activations.
            for (const GateActivation act : {GateActivation::SiLU, GateActivation::GeluTanh}) {
                const std::int64_t rows = 301;
                const HostMatrix gate = make_matrix(type, rows, cols, rng), up = make_matrix(type, rows, cols, rng);
                const std::vector<double> g = reference_gemv(gate, rows, cols, x), u = reference_gemv(up, rows, cols, x);
                std::vector<double> want(static_cast<std::size_t>(rows));
                for (std::size_t r = 0; r < want.size(); ++r) {
                    const double a = act == GateActivation::SiLU
                                         ? g[r] / (1.0 + std::exp(-g[r]))
                                         : 0.5 * g[r] * (1.0 + std::tanh(0.7978845608028654 * (g[r] + 0.044715 * g[r] * g[r] * g[r])));
                    want[r] = a * u[r];
                }
                selftest::DeviceBuffer<unsigned char> gate_dev(gate.bytes), up_dev(up.bytes);
                selftest::DeviceBuffer<float> y_dev(want.size());
                matmul_gemv_gate_up(type, gate_dev.get(), up_dev.get(), rows, cols, x_dev.get(), act, y_dev.get(), nullptr);
                TOKENSCOPE_CUDA_CHECK(cudaGetLastError());
                checks.push_back(finish(tname + " fused gate+up+" + (act == GateActivation::SiLU ? "SiLU" : "GELU-tanh") +
                                            " rows=301 cols=" + std::to_string(cols),
                                        y_dev.download(), want));
            }
            // Q/K/V: 1B-like proportions (q 4x k, k = v), odd sizes.
            const std::int64_t rq = 257, rk = 67, rv = 65;
            const HostMatrix wq = make_matrix(type, rq, cols, rng), wk = make_matrix(type, rk, cols, rng),
                             wv = make_matrix(type, rv, cols, rng);
            std::vector<double> want = reference_gemv(wq, rq, cols, x);
            for (const auto& part : {reference_gemv(wk, rk, cols, x), reference_gemv(wv, rv, cols, x)}) {
                want.insert(want.end(), part.begin(), part.end());
            }
            selftest::DeviceBuffer<unsigned char> wq_dev(wq.bytes), wk_dev(wk.bytes), wv_dev(wv.bytes);
            selftest::DeviceBuffer<float> q_dev(static_cast<std::size_t>(rq)), k_dev(static_cast<std::size_t>(rk)),
                v_dev(static_cast<std::size_t>(rv));
            matmul_gemv_qkv(type, wq_dev.get(), rq, wk_dev.get(), rk, wv_dev.get(), rv, cols, x_dev.get(), q_dev.get(),
                            k_dev.get(), v_dev.get(), nullptr);
            TOKENSCOPE_CUDA_CHECK(cudaGetLastError());
            std::vector<float> got = q_dev.download();
            for (const auto& part : {k_dev.download(), v_dev.download()}) got.insert(got.end(), part.begin(), part.end());
            checks.push_back(finish(tname + " fused QKV rows=257+67+65 cols=" + std::to_string(cols), got, want));
        }
    }
}

// The int8 GEMV path (matmul.cuh): quantize_x8 against the same quantization repeated here
// (bit-exact expected: IEEE division and round-half-away on both sides), the dp4a GEMVs against
// float64 products with the quantized activation (exact int32 block sums, so f32 accuracy:
// 1e-5), and once against the unquantized activation to document what 8-bit activations cost
// (about 0.5 % expected; 2e-2 allowed).
void check_int8(std::mt19937_64& rng, std::vector<MatmulCheck>& checks) {
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (const tensor::Type type : {tensor::Type::Q8_0, tensor::Type::Q4_K}) {
        const std::string tname = tensor::type_name(type);
        for (const std::int64_t cols : {std::int64_t{512}, std::int64_t{2048}}) {
            std::vector<float> x(static_cast<std::size_t>(cols));
            for (float& v : x) v = uniform(rng) * 3.0f;
            for (int i = 0; i < 32; ++i) x[static_cast<std::size_t>(32 + i)] = 0.0f;  // an all-zero block: scale 0
            // The quantization, as quantize_x8_kernel does it.
            std::vector<std::int8_t> q(x.size());
            std::vector<float> d(static_cast<std::size_t>(cols / 32));
            std::vector<float> xq(x.size());  // dequantized
            for (std::size_t b = 0; b < d.size(); ++b) {
                float amax = 0.0f;
                for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + static_cast<std::size_t>(i)]));
                const float scale = amax / 127.0f;
                d[b] = scale;
                for (int i = 0; i < 32; ++i) {
                    const std::size_t e = b * 32 + static_cast<std::size_t>(i);
                    const float r = scale == 0.0f ? 0.0f : std::round(x[e] / scale);
                    q[e] = static_cast<std::int8_t>(std::min(std::max(r, -127.0f), 127.0f));
                    xq[e] = static_cast<float>(q[e]) * scale;
                }
            }
            selftest::DeviceBuffer<float> x_dev(x);
            selftest::DeviceBuffer<unsigned char> xq_dev(quantized_x_bytes(cols));
            xq_dev.zero();  // the download below reads the whole buffer, padding included (initcheck)
            quantize_x8(x_dev.get(), cols, xq_dev.get(), nullptr);
            const std::vector<unsigned char> got = xq_dev.download();
            std::vector<float> got_deq(x.size());
            for (std::size_t e = 0; e < x.size(); ++e) {
                float scale = 0;
                std::memcpy(&scale, got.data() + quantized_x_scales_offset(cols) + (e / 32) * sizeof(float), sizeof scale);
                got_deq[e] = static_cast<float>(static_cast<std::int8_t>(got[e])) * scale;
            }
            MatmulCheck qcheck = finish("quantize_x8 cols=" + std::to_string(cols), got_deq,
                                        std::vector<double>(xq.begin(), xq.end()));
            qcheck.precision = "int8 blocks of 32 (bit-exact expected)";
            qcheck.tolerance = 1e-7;
            qcheck.passed = std::isfinite(qcheck.rel_error) && qcheck.rel_error <= qcheck.tolerance;
            if (cols == 512) checks.push_back(qcheck);

            const std::int64_t rows = 301;
            const HostMatrix w = make_matrix(type, rows, cols, rng);
            selftest::DeviceBuffer<unsigned char> w_dev(w.bytes);
            selftest::DeviceBuffer<float> y_dev(static_cast<std::size_t>(rows));
            matmul_gemv_int8(type, w_dev.get(), rows, cols, xq_dev.get(), y_dev.get(), nullptr);
            TOKENSCOPE_CUDA_CHECK(cudaGetLastError());
            const std::vector<float> y = y_dev.download();
            MatmulCheck exact = finish(tname + " int8 dp4a gemv rows=301 cols=" + std::to_string(cols), y,
                                       reference_gemv(w, rows, cols, xq));
            exact.precision = "f32 vs float64 on the int8 activation";
            checks.push_back(exact);
            MatmulCheck vs_float = finish(tname + " int8 dp4a gemv rows=301 cols=" + std::to_string(cols) + " vs f32 x", y,
                                          reference_gemv(w, rows, cols, x));
            vs_float.precision = "8-bit activations";
            vs_float.tolerance = 2e-2;
            vs_float.passed = std::isfinite(vs_float.rel_error) && vs_float.rel_error <= vs_float.tolerance;
            checks.push_back(vs_float);
        }
    }
}

}  // namespace

std::vector<MatmulCheck> check_matmul(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    MatmulWorkspace ws;
    // Small tiles so that the cuBLAS path runs several tiles, the last one partial.
    ws.max_tile_rows = 64;
    std::vector<MatmulCheck> checks;
    // 1 and 4: decode; 8: the largest GEMV; 9: the smallest cuBLAS case; 33: prefill.
    const int token_counts[] = {1, 4, 8, 9, 33};
    std::uniform_int_distribution<std::int64_t> half_rows(32, 149);  // rows = 2h + 1 in 65..299
    for (const tensor::TypeTraits& traits : tensor::all_types()) {
        // F32/F16/BF16: a width that is not a multiple of 32 (lanes end unevenly).
        const std::int64_t cols = traits.block_size == 1 ? 330 : 512;
        for (const int tokens : token_counts) {
            const std::int64_t rows = 2 * half_rows(rng) + 1;
            checks.push_back(run_case({&traits, rows, cols, tokens, false}, rng, ws));
            if (tokens > kGemvMaxTokens && traits.type != tensor::Type::F32 && tokens == 33) {
                checks.push_back(run_case({&traits, rows, cols, tokens, true}, rng, ws));
            }
        }
    }
    // Both GEMV kernels on their own for the formats that have a vectorised one, at widths it
    // takes (several blocks per lane group, so the strided loops run more than once).
    for (const tensor::Type type : {tensor::Type::F16, tensor::Type::Q8_0, tensor::Type::Q4_K}) {
        for (const int tokens : {1, 3, 8}) {
            for (const GemvVariant variant : {GemvVariant::Reference, GemvVariant::Vectorized}) {
                const std::int64_t rows = 2 * half_rows(rng) + 1;
                checks.push_back(run_case({&tensor::traits(type), rows, 2048, tokens, false, variant}, rng, ws));
            }
        }
    }
    // F16 at 264 columns: 33 vectors of 8, so the lanes' last pass over the row is partial.
    for (const GemvVariant variant : {GemvVariant::Reference, GemvVariant::Vectorized}) {
        checks.push_back(run_case({&tensor::traits(tensor::Type::F16), 2 * half_rows(rng) + 1, 264, 3, false, variant}, rng, ws));
    }
    check_fused(rng, checks);
    check_int8(rng, checks);
    return checks;
}

}  // namespace tokenscope::cuda
