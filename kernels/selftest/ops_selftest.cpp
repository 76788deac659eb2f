#include "selftest/ops_selftest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include <cublas_v2.h>

#include "kv/kv_storage.h"
#include "kv/kv_types.h"
#include "ops/activation.cuh"
#include "ops/attention.cuh"
#include "ops/attention_gemm.cuh"
#include "ops/attention_gqa.cuh"
#include "ops/attention_gqa_plan.h"
#include "ops/check.h"
#include "ops/elementwise.cuh"
#include "ops/embedding.cuh"
#include "ops/kv_append.cuh"
#include "ops/kv_cache_types.cuh"
#include "ops/rms_norm.cuh"
#include "ops/rope.cuh"
#include "runtime/cpu_ops.h"
#include "selftest/device_buffer.h"
#include "tensor/f16.h"
#include "tensor/type.h"

namespace tokenscope::cuda::selftest {

// The CUDA code repeats the cache element types (ops/kv_cache_types.cuh).
static_assert(ops::kvt::kF32 == static_cast<int>(kv::ElementType::F32));
static_assert(ops::kvt::kF16 == static_cast<int>(kv::ElementType::F16));
static_assert(ops::kvt::kQ8 == static_cast<int>(kv::ElementType::Q8));

namespace {

// Tolerances on ||cuda - cpu|| / ||cpu||.
constexpr double kExact = 1e-6;  // same formula, same rounding: expected bit-exact
constexpr double kF32 = 1e-5;    // f32 arithmetic in another order / other libm

class Rng {
  public:
    explicit Rng(std::uint64_t seed) : engine_(seed) {}
    // Uniform in [-1, -0.01] u [0.01, 1]: never zero.
    float value() {
        const float v = dist_(engine_);
        return std::fabs(v) < 0.01f ? (v < 0 ? -0.5f : 0.5f) : v;
    }
    std::vector<float> values(std::size_t n, float scale = 1.0f) {
        std::vector<float> out(n);
        for (float& v : out) v = value() * scale;
        return out;
    }
    std::mt19937_64& engine() { return engine_; }

  private:
    std::mt19937_64 engine_;
    std::uniform_real_distribution<float> dist_{-1.0f, 1.0f};
};

double rel_error(const std::vector<float>& got, const std::vector<double>& want) {
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double d = static_cast<double>(got[i]) - want[i];
        diff += d * d;
        norm += want[i] * want[i];
    }
    if (std::isnan(diff)) return INFINITY;
    return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
    return rel_error(got, std::vector<double>(want.begin(), want.end()));
}

OpCheck make_check(std::string name, std::string precision, double err, double tol) {
    return OpCheck{std::move(name), std::move(precision), err, tol, err <= tol};
}

void sync() {
    TOKENSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
}

void check_embedding(Rng& rng, std::vector<OpCheck>& out) {
    constexpr std::int64_t kWidth = 512;  // a whole number of 256-element super-blocks
    constexpr int kVocab = 6;
    const std::vector<std::int32_t> tokens = {3, 0, 5, 3, 1};
    const int n = static_cast<int>(tokens.size());
    const float scale = 1.7f;
    DeviceBuffer<std::int32_t> d_tokens(tokens);
    for (const tensor::TypeTraits& t : tensor::all_types()) {
        const std::size_t rb = tensor::row_bytes(t.type, kWidth);
        std::vector<std::uint8_t> table(rb * kVocab);
        const std::vector<float> src = rng.values(static_cast<std::size_t>(kWidth) * kVocab, 2.0f);
        for (int r = 0; r < kVocab; ++r)
            tensor::quantize_row(t.type, src.data() + r * kWidth, table.data() + r * rb, kWidth);
        std::vector<float> want(static_cast<std::size_t>(n) * kWidth);
        for (int i = 0; i < n; ++i) {
            float* row = want.data() + i * kWidth;
            tensor::dequantize_row(t.type, table.data() + tokens[i] * rb, row, kWidth);
            runtime::ops::scale(row, scale, kWidth);
        }
        DeviceBuffer<std::uint8_t> d_table(table);
        DeviceBuffer<float> d_out(want.size());
        ops::embedding(d_table.get(), t.type, kWidth, d_tokens.get(), n, scale, d_out.get(),
                       nullptr);
        sync();
        out.push_back(make_check(std::string("embedding ") + t.name, "f32 (bit-exact expected)",
                                 rel_error(d_out.download(), want), kExact));
    }
}

void check_rms_norm(Rng& rng, std::vector<OpCheck>& out) {
    constexpr int kRows = 7, kN = 320;
    const float eps = 1e-6f;
    const std::vector<float> x = rng.values(kRows * kN, 3.0f);
    const std::vector<float> w = rng.values(kN);
    std::vector<float> want(x.size()), want_plain(x.size());
    for (int r = 0; r < kRows; ++r) {
        runtime::ops::rms_norm(x.data() + r * kN, w.data(), want.data() + r * kN, kN, eps);
        runtime::ops::rms_norm(x.data() + r * kN, nullptr, want_plain.data() + r * kN, kN, eps);
    }
    DeviceBuffer<float> d_x(x), d_w(w), d_out(x.size());
    ops::rms_norm(d_x.get(), d_w.get(), d_out.get(), kRows, kN, eps, nullptr);
    sync();
    out.push_back(make_check("rms_norm", "f32", rel_error(d_out.download(), want), kF32));
    ops::rms_norm(d_x.get(), nullptr, d_x.get(), kRows, kN, eps, nullptr);  // in place
    sync();
    out.push_back(make_check("rms_norm (in place, no weight)", "f32",
                             rel_error(d_x.download(), want_plain), kF32));
}

void check_rope(Rng& rng, std::vector<OpCheck>& out) {
    constexpr int kTokens = 5, kHeads = 3, kHeadDim = 64, kRopeDims = 48;
    const std::vector<std::int32_t> pos = {0, 7, 100, 4095, 32000};
    const float base = 10000.0f, linear = 2.0f;
    // Llama 3.x-like per-pair factors (1 for the fast pairs, up to 8 for the slow ones).
    std::vector<float> factors(kRopeDims / 2);
    for (std::size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 7.0f * static_cast<float>(i) / (kRopeDims / 2 - 1);
    DeviceBuffer<std::int32_t> d_pos(pos);
    DeviceBuffer<float> d_factors(factors);
    for (const bool with_factors : {false, true}) {
        std::vector<float> inv(kRopeDims / 2);
        for (std::size_t i = 0; i < inv.size(); ++i) {
            const double f = std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / kRopeDims);
            inv[i] = static_cast<float>(with_factors ? f / factors[i] : f);
        }
        for (const bool neox : {false, true}) {
            const std::vector<float> x = rng.values(kTokens * kHeads * kHeadDim);
            std::vector<float> want = x;
            std::vector<float> cos(kRopeDims / 2), sin(kRopeDims / 2);
            for (int t = 0; t < kTokens; ++t) {
                const double p = static_cast<double>(pos[t]) / linear;
                runtime::ops::rope_angles(p, inv.data(), kRopeDims / 2, cos.data(), sin.data());
                for (int h = 0; h < kHeads; ++h)
                    runtime::ops::rope(want.data() + (t * kHeads + h) * kHeadDim, kRopeDims, cos.data(), sin.data(), neox);
            }
            DeviceBuffer<float> d_x(x);
            ops::rope(d_x.get(), kTokens, kHeads, kHeadDim, kRopeDims, d_pos.get(), base, linear, neox,
                      with_factors ? d_factors.get() : nullptr, nullptr);
            sync();
            const std::string name = std::string(neox ? "rope (neox" : "rope (normal") + (with_factors ? ", rope_freqs)" : ")");
            out.push_back(make_check(name, "f32", rel_error(d_x.download(), want), kF32));
        }
    }
}

void check_elementwise(Rng& rng, std::vector<OpCheck>& out) {
    constexpr std::int64_t kN = 4099;
    const std::vector<float> a = rng.values(kN, 4.0f);
    const std::vector<float> b = rng.values(kN, 2.0f);
    struct Case {
        const char* name;
        void (*cpu)(float*, const float*, std::int64_t);
        void (*gpu)(float*, const float*, std::int64_t, cudaStream_t);
        double tol;
    };
    const Case cases[] = {{"silu_mul", runtime::ops::silu_mul, ops::silu_mul, kF32},
                          {"gelu_tanh_mul", runtime::ops::gelu_tanh_mul, ops::gelu_tanh_mul, kF32},
                          {"add", runtime::ops::add, ops::add, kExact}};
    for (const Case& c : cases) {
        std::vector<float> want = a;
        c.cpu(want.data(), b.data(), kN);
        DeviceBuffer<float> d_a(a), d_b(b);
        c.gpu(d_a.get(), d_b.get(), kN, nullptr);
        sync();
        out.push_back(make_check(c.name, "f32", rel_error(d_a.download(), want), c.tol));
    }
    std::vector<float> want = a;
    runtime::ops::scale(want.data(), -0.37f, kN);
    DeviceBuffer<float> d_a(a);
    ops::scale(d_a.get(), -0.37f, kN, nullptr);
    sync();
    out.push_back(make_check("scale", "f32", rel_error(d_a.download(), want), kExact));
    // Bias rows (Qwen 2's q/k/v biases): the CPU adds the bias to each token's row.
    constexpr std::int64_t kRows = 7, kWidth = 587;
    const std::vector<float> rows = rng.values(kRows * kWidth, 4.0f);
    const std::vector<float> bias = rng.values(kWidth, 1.0f);
    std::vector<float> want_rows = rows;
    for (std::int64_t r = 0; r < kRows; ++r) runtime::ops::add(want_rows.data() + r * kWidth, bias.data(), kWidth);
    DeviceBuffer<float> d_rows(rows), d_bias(bias);
    ops::add_rows(d_rows.get(), d_bias.get(), kRows, kWidth, nullptr);
    sync();
    out.push_back(make_check("add_rows (bias)", "f32", rel_error(d_rows.download(), want_rows), kExact));
}

// Device cache of one layer in kv_append's layout ([slot][kv_head][head_dim]); compared with
// KvStorage through read_k / read_v, whose rows are ordered differently.
struct DeviceCache {
    DeviceCache(const kv::CacheShape& shape)
        : slots(kv::capacity_tokens(shape)),
          value_bytes(static_cast<std::size_t>(slots) * shape.kv_heads * shape.head_dim *
                      kv::element_bytes(shape.type)),
          k(value_bytes),
          v(value_bytes),
          k_scales(static_cast<std::size_t>(slots) * shape.kv_heads),
          v_scales(static_cast<std::size_t>(slots) * shape.kv_heads) {
        k.zero();
        v.zero();
        k_scales.zero();
        v_scales.zero();
    }
    // Row (slot, head) converted to float, as KvStorage::read_k/read_v does.
    static void read(const kv::CacheShape& shape, const std::vector<std::uint8_t>& values,
                     const std::vector<float>& scales, std::int64_t slot, int head, float* out) {
        const std::int64_t row = slot * shape.kv_heads + head;
        const int d = shape.head_dim;
        const std::uint8_t* p = values.data() + row * d * kv::element_bytes(shape.type);
        for (int i = 0; i < d; ++i) {
            switch (shape.type) {
                case kv::ElementType::F32: std::memcpy(&out[i], p + 4 * i, 4); break;
                case kv::ElementType::F16: {
                    std::uint16_t h = 0;
                    std::memcpy(&h, p + 2 * i, 2);
                    out[i] = tensor::f16_to_f32(h);
                    break;
                }
                case kv::ElementType::Q8:
                    out[i] = static_cast<float>(static_cast<std::int8_t>(p[i])) * scales[row];
                    break;
            }
        }
    }
    std::int64_t slots;
    std::size_t value_bytes;
    DeviceBuffer<std::uint8_t> k, v;
    DeviceBuffer<float> k_scales, v_scales;
};

void check_kv_and_attention(Rng& rng, std::vector<OpCheck>& out) {
    constexpr int kHeads = 4, kKvHeads = 2, kHeadDim = 64;
    constexpr int kRow = kKvHeads * kHeadDim;
    // Two sequences: A with 40 positions, B with 25, their slots scattered over 8 blocks of 16.
    constexpr int kLenA = 40, kLenB = 25;
    for (const kv::ElementType type :
         {kv::ElementType::F32, kv::ElementType::F16, kv::ElementType::Q8}) {
        const kv::CacheShape shape{1, kKvHeads, kHeadDim, 8, 16, type};
        const std::string tname = kv::element_type_name(type);
        std::vector<std::int64_t> perm(static_cast<std::size_t>(kv::capacity_tokens(shape)));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng.engine());
        // slot_table: A's positions at [0, 40), B's at [40, 65).
        const std::vector<std::int64_t> slot_table(perm.begin(), perm.begin() + kLenA + kLenB);
        const int total = kLenA + kLenB;
        const std::vector<float> k = rng.values(static_cast<std::size_t>(total) * kRow, 2.0f);
        const std::vector<float> v = rng.values(static_cast<std::size_t>(total) * kRow, 2.0f);

        // kv_append of every position, against KvStorage::write.
        kv::KvStorage cpu(shape, kv::KernelChoice::Scalar);
        for (int i = 0; i < total; ++i)
            cpu.write(0, slot_table[i], k.data() + i * kRow, v.data() + i * kRow);
        DeviceCache dev(shape);
        DeviceBuffer<float> d_k(k), d_v(v);
        DeviceBuffer<std::int64_t> d_slots(slot_table);
        ops::kv_append(d_k.get(), d_v.get(), total, d_slots.get(), dev.k.get(), dev.v.get(),
                       dev.k_scales.get(), dev.v_scales.get(), kKvHeads, kHeadDim, type, nullptr);
        sync();
        const auto k_bytes = dev.k.download(), v_bytes = dev.v.download();
        const auto k_sc = dev.k_scales.download(), v_sc = dev.v_scales.download();
        std::vector<float> got, want;
        std::vector<float> row(kHeadDim);
        for (int i = 0; i < total; ++i) {
            for (int h = 0; h < kKvHeads; ++h) {
                DeviceCache::read(shape, k_bytes, k_sc, slot_table[i], h, row.data());
                got.insert(got.end(), row.begin(), row.end());
                DeviceCache::read(shape, v_bytes, v_sc, slot_table[i], h, row.data());
                got.insert(got.end(), row.begin(), row.end());
                cpu.read_k(0, slot_table[i], h, row.data());
                want.insert(want.end(), row.begin(), row.end());
                cpu.read_v(0, slot_table[i], h, row.data());
                want.insert(want.end(), row.begin(), row.end());
            }
        }
        out.push_back(make_check("kv_append " + tname, tname + " cache vs KvStorage (bit-exact expected)",
                                 rel_error(got, want), kExact));

        // Attention: 10 tokens of A (positions 30..39, a prefill chunk) and B's token at 24.
        std::vector<std::int32_t> pos, begin;
        for (int p = 30; p < kLenA; ++p) {
            pos.push_back(p);
            begin.push_back(0);
        }
        pos.push_back(kLenB - 1);
        begin.push_back(kLenA);
        const int tokens = static_cast<int>(pos.size());
        const std::vector<float> q = rng.values(static_cast<std::size_t>(tokens) * kHeads * kHeadDim);
        const float score_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
        constexpr std::int64_t kStride = 48;
        DeviceBuffer<float> d_q(q);
        DeviceBuffer<std::int32_t> d_pos(pos), d_begin(begin);
        for (const int window : {0, 8}) {
            // float64 reference over the values KvStorage stored.
            std::vector<double> ref(q.size()), ref_cap(static_cast<std::size_t>(tokens) * kHeads * kStride, 0.0);
            std::vector<float> kr(kHeadDim), vr(kHeadDim);
            for (int t = 0; t < tokens; ++t) {
                const int p = pos[t];
                const int first = window > 0 ? std::max(0, p - window + 1) : 0;
                for (int h = 0; h < kHeads; ++h) {
                    const int kvh = h / (kHeads / kKvHeads);
                    const float* qr = q.data() + (t * kHeads + h) * kHeadDim;
                    std::vector<double> sc;
                    for (int j = first; j <= p; ++j) {
                        cpu.read_k(0, slot_table[begin[t] + j], kvh, kr.data());
                        double dot = 0;
                        for (int d = 0; d < kHeadDim; ++d) dot += static_cast<double>(qr[d]) * kr[d];
                        sc.push_back(dot * score_scale);
                    }
                    const double mx = *std::max_element(sc.begin(), sc.end());
                    double sum = 0;
                    for (double& s : sc) sum += (s = std::exp(s - mx));
                    double* o = ref.data() + (t * kHeads + h) * kHeadDim;
                    for (int j = first; j <= p; ++j) {
                        const double w = sc[j - first] / sum;
                        ref_cap[(t * kHeads + h) * kStride + j] = w;
                        cpu.read_v(0, slot_table[begin[t] + j], kvh, vr.data());
                        for (int d = 0; d < kHeadDim; ++d) o[d] += w * vr[d];
                    }
                }
            }
            DeviceBuffer<float> d_out(q.size()), d_cap(ref_cap.size());
            d_cap.zero();
            ops::attention(d_q.get(), tokens, kHeads, kKvHeads, kHeadDim, d_pos.get(), d_begin.get(),
                           d_slots.get(), dev.k.get(), dev.v.get(), dev.k_scales.get(),
                           dev.v_scales.get(), type, score_scale, window, d_out.get(), d_cap.get(),
                           kStride, nullptr);
            sync();
            const std::string suffix = " " + tname + (window > 0 ? " window 8" : " full");
            out.push_back(make_check("attention" + suffix, "f32 vs float64 on the stored " + tname + " values",
                                     rel_error(d_out.download(), ref), kF32));
            out.push_back(make_check("attention capture" + suffix, "f32 softmax weights",
                                     rel_error(d_cap.download(), ref_cap), kF32));
            // Without capture the output must be the same.
            DeviceBuffer<float> d_out2(q.size());
            ops::attention(d_q.get(), tokens, kHeads, kKvHeads, kHeadDim, d_pos.get(), d_begin.get(),
                           d_slots.get(), dev.k.get(), dev.v.get(), dev.k_scales.get(),
                           dev.v_scales.get(), type, score_scale, window, d_out2.get(), nullptr, 0,
                           nullptr);
            sync();
            out.push_back(make_check("attention (no capture)" + suffix, "f32 vs float64",
                                     rel_error(d_out2.download(), ref), kF32));
            // Split-K: 1 share, uneven shares, and more shares than keys (empty shares; B's
            // token sees 25 keys, a window 8).
            for (const int splits : {1, 3, 7, ops::kMaxAttentionSplits}) {
                DeviceBuffer<float> d_split(q.size());
                DeviceBuffer<float> d_scratch(ops::attention_split_scratch_floats(tokens, kHeads, kHeadDim, splits));
                ops::attention_split(d_q.get(), tokens, kHeads, kKvHeads, kHeadDim, d_pos.get(), d_begin.get(),
                                     d_slots.get(), dev.k.get(), dev.v.get(), dev.k_scales.get(),
                                     dev.v_scales.get(), type, score_scale, window, splits, d_scratch.get(),
                                     d_split.get(), nullptr);
                sync();
                out.push_back(make_check("attention split-K " + std::to_string(splits) + suffix, "f32 vs float64",
                                         rel_error(d_split.download(), ref), kF32));
            }
            // Tensor-core prefill path: sequence A's 10 queries (positions 30..39, consecutive)
            // over its 40 keys, in query blocks of 4 (two full blocks and a partial one).
            {
                constexpr int kTokensA = 10, kBlock = 4;
                const std::size_t bytes = ops::attention_gemm_scratch_bytes(kTokensA, kLenA, kHeads, kKvHeads, kHeadDim, kBlock);
                DeviceBuffer<unsigned char> d_scratch(bytes);
                DeviceBuffer<float> d_gemm(static_cast<std::size_t>(kTokensA) * kHeads * kHeadDim);
                cublasHandle_t handle = nullptr;
                if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) throw Error("selftest: cublasCreate failed");
                try {
                    ops::attention_gemm(d_q.get(), kTokensA, kLenA, kHeads, kKvHeads, kHeadDim, d_pos.get(), d_slots.get(),
                                        dev.k.get(), dev.v.get(), dev.k_scales.get(), dev.v_scales.get(), type,
                                        score_scale, window, kBlock, d_scratch.get(), d_gemm.get(), handle, nullptr);
                    sync();
                } catch (...) {
                    cublasDestroy(handle);
                    throw;
                }
                cublasDestroy(handle);
                const std::vector<double> ref_a(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(kTokensA) * kHeads * kHeadDim);
                // bf16 Q, K, V and softmax weights (8-bit mantissas) with f32 accumulation.
                out.push_back(make_check("attention GEMM (bf16 tensor cores)" + suffix, "bf16 vs float64",
                                         rel_error(d_gemm.download(), ref_a), 3e-2));
            }
        }
        // The cache precision itself, against the unquantized inputs (documents f16/q8 error).
        std::vector<float> orig;
        for (int i = 0; i < total; ++i)
            for (int h = 0; h < kKvHeads; ++h) {
                orig.insert(orig.end(), k.begin() + i * kRow + h * kHeadDim, k.begin() + i * kRow + (h + 1) * kHeadDim);
                orig.insert(orig.end(), v.begin() + i * kRow + h * kHeadDim, v.begin() + i * kRow + (h + 1) * kHeadDim);
            }
        const double cache_tol = type == kv::ElementType::F32 ? kExact : type == kv::ElementType::F16 ? 1e-3 : 1e-2;
        out.push_back(make_check("kv_append " + tname + " vs inputs", tname + " storage precision",
                                 rel_error(got, orig), cache_tol));
    }
}

// GQA split-K decode attention (ops/attention_gqa.cuh) against a float64 reference over the
// values KvStorage stored. One ragged batch of five sequences whose query positions give
// contexts 1 (a single key), 31 and 33 (one under and one over a 32-key tile), 77 (odd, three
// tiles with a partial last one) and 300, with slots scattered over the cache; GQA ratios 1, 4
// and 8; F32, F16 and Q8 caches; full attention and a 20-key window; split counts 1, 3 (shares
// of uneven tile counts), the count the backend would choose on this GPU, and the maximum
// (mostly empty shares).
void check_gqa_attention(Rng& rng, std::vector<OpCheck>& out) {
    constexpr int kKvHeads = 2, kHeadDim = 64;
    constexpr int kRow = kKvHeads * kHeadDim;
    const std::vector<int> lengths = {1, 31, 33, 77, 300};
    const int total = std::accumulate(lengths.begin(), lengths.end(), 0);
    for (const kv::ElementType type : {kv::ElementType::F32, kv::ElementType::F16, kv::ElementType::Q8}) {
        const kv::CacheShape shape{1, kKvHeads, kHeadDim, 32, 16, type};  // 512 slots
        const std::string tname = kv::element_type_name(type);
        std::vector<std::int64_t> perm(static_cast<std::size_t>(kv::capacity_tokens(shape)));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng.engine());
        const std::vector<std::int64_t> slot_table(perm.begin(), perm.begin() + total);
        const std::vector<float> k = rng.values(static_cast<std::size_t>(total) * kRow, 2.0f);
        const std::vector<float> v = rng.values(static_cast<std::size_t>(total) * kRow, 2.0f);
        kv::KvStorage cpu(shape, kv::KernelChoice::Scalar);
        for (int i = 0; i < total; ++i) cpu.write(0, slot_table[i], k.data() + i * kRow, v.data() + i * kRow);
        DeviceCache dev(shape);
        DeviceBuffer<float> d_k(k), d_v(v);
        DeviceBuffer<std::int64_t> d_slots(slot_table);
        ops::kv_append(d_k.get(), d_v.get(), total, d_slots.get(), dev.k.get(), dev.v.get(), dev.k_scales.get(),
                       dev.v_scales.get(), kKvHeads, kHeadDim, type, nullptr);
        // One query per sequence, at its last position.
        std::vector<std::int32_t> pos, begin;
        int offset = 0;
        for (const int len : lengths) {
            pos.push_back(len - 1);
            begin.push_back(offset);
            offset += len;
        }
        const int tokens = static_cast<int>(pos.size());
        DeviceBuffer<std::int32_t> d_pos(pos), d_begin(begin);
        const float score_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
        for (const int group : {1, 4, 8}) {
            const int heads = kKvHeads * group;
            const std::vector<float> q = rng.values(static_cast<std::size_t>(tokens) * heads * kHeadDim);
            DeviceBuffer<float> d_q(q);
            for (const int window : {0, 20}) {
                std::vector<double> ref(q.size(), 0.0);
                std::vector<float> kr(kHeadDim), vr(kHeadDim);
                for (int t = 0; t < tokens; ++t) {
                    const int p = pos[t];
                    const int first = window > 0 ? std::max(0, p - window + 1) : 0;
                    for (int h = 0; h < heads; ++h) {
                        const int kvh = h / group;
                        const float* qr = q.data() + (static_cast<std::size_t>(t) * heads + h) * kHeadDim;
                        std::vector<double> sc;
                        for (int j = first; j <= p; ++j) {
                            cpu.read_k(0, slot_table[begin[t] + j], kvh, kr.data());
                            double dot = 0;
                            for (int d = 0; d < kHeadDim; ++d) dot += static_cast<double>(qr[d]) * kr[d];
                            sc.push_back(dot * score_scale);
                        }
                        const double mx = *std::max_element(sc.begin(), sc.end());
                        double sum = 0;
                        for (double& x : sc) sum += (x = std::exp(x - mx));
                        double* o = ref.data() + (static_cast<std::size_t>(t) * heads + h) * kHeadDim;
                        for (int j = first; j <= p; ++j) {
                            cpu.read_v(0, slot_table[begin[t] + j], kvh, vr.data());
                            for (int d = 0; d < kHeadDim; ++d) o[d] += sc[j - first] / sum * vr[d];
                        }
                    }
                }
                if (!ops::attention_gqa_supports(type, heads, kKvHeads, kHeadDim, dev.k.get(), dev.v.get())) {
                    out.push_back(make_check("attention GQA " + tname + " ratio " + std::to_string(group) +
                                                 " (not supported: a shape the backend needs)",
                                             "f32 vs float64", INFINITY, kF32));
                    continue;
                }
                const int chosen = ops::gqa::splits_for(ops::device_sm_count(), kKvHeads, tokens,
                                                        kv::capacity_tokens(shape));
                for (const int splits : {1, 3, chosen, ops::gqa::kMaxSplits}) {
                    DeviceBuffer<float> d_out(q.size());
                    DeviceBuffer<float> d_scratch(ops::gqa::scratch_floats(tokens, heads, kHeadDim, splits));
                    ops::attention_gqa(d_q.get(), tokens, heads, kKvHeads, kHeadDim, d_pos.get(), d_begin.get(),
                                       d_slots.get(), dev.k.get(), dev.v.get(), dev.k_scales.get(), dev.v_scales.get(),
                                       type, score_scale, window, splits, d_scratch.get(), d_out.get(), nullptr);
                    sync();
                    out.push_back(make_check("attention GQA " + tname + " ratio " + std::to_string(group) + " split-K " +
                                                 std::to_string(splits) + (window > 0 ? " window 20" : " full") +
                                                 ", contexts 1/31/33/77/300",
                                             "f32 vs float64 on the stored " + tname + " values",
                                             rel_error(d_out.download(), ref), kF32));
                }
            }
        }
    }
}

}  // namespace

std::vector<OpCheck> check_ops(std::uint64_t seed) {
    Rng rng(seed);
    std::vector<OpCheck> out;
    check_embedding(rng, out);
    check_rms_norm(rng, out);
    check_rope(rng, out);
    check_elementwise(rng, out);
    check_kv_and_attention(rng, out);
    check_gqa_attention(rng, out);
    return out;
}

}  // namespace tokenscope::cuda::selftest
