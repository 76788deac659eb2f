#include "lab/kernel_lab.h"

#include <cmath>
#include <random>

#include "device_buffer.h"
#include "kv/kv_types.h"
#include "lab/event_timer.h"
#include "matmul/matmul.cuh"
#include "ops/activation.cuh"
#include "ops/attention.cuh"
#include "ops/attention_gemm.cuh"
#include "ops/attention_gqa.cuh"
#include "ops/attention_gqa_plan.h"
#include "ops/check.h"
#include "ops/kv_append.cuh"
#include "tensor/type.h"
#include "util/error.h"

namespace tokenscope::cuda::lab {

namespace {

constexpr int kWarmup = 5;
constexpr int kRepeats = 50;

double rel_error(const std::vector<float>& got, const std::vector<float>& ref) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        num += (static_cast<double>(got[i]) - ref[i]) * (static_cast<double>(got[i]) - ref[i]);
        den += static_cast<double>(ref[i]) * ref[i];
    }
    return std::sqrt(num / (den > 0 ? den : 1.0));
}

std::vector<float> download(const DeviceBuffer& b, std::size_t count, cudaStream_t s) {
    std::vector<float> out(count);
    b.download(out.data(), count * sizeof(float), s);
    TOKENSCOPE_CUDA_CHECK(cudaStreamSynchronize(s));
    return out;
}

// A weight matrix of the 1B model's shapes: 256 distinct quantized rows repeated (every row is
// still read from its own address, so the traffic is that of a real matrix).
DeviceBuffer make_weights(tensor::Type type, std::int64_t rows, std::int64_t cols, std::mt19937& rng, cudaStream_t s) {
    const std::size_t row_bytes = tensor::row_bytes(type, cols);
    constexpr int kDistinct = 256;
    std::vector<unsigned char> distinct(row_bytes * kDistinct);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (int r = 0; r < kDistinct; ++r) {
        for (float& v : row) v = normal(rng);
        tensor::quantize_row(type, row.data(), distinct.data() + row_bytes * static_cast<std::size_t>(r), cols);
    }
    std::vector<unsigned char> all(row_bytes * static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) {
        std::copy_n(distinct.data() + row_bytes * static_cast<std::size_t>(r % kDistinct), row_bytes,
                    all.data() + row_bytes * static_cast<std::size_t>(r));
    }
    DeviceBuffer w(all.size(), "kernel lab weights");
    w.upload(all.data(), all.size(), s);
    return w;
}

void gemv_lab(std::vector<runtime::KernelTiming>& out, cudaStream_t s, EventTimer& timer) {
    std::mt19937 rng(11);
    struct Shape {
        const char* what;
        std::int64_t rows, cols;
    };
    // dim 2048, 32 heads of 64 (q/o 2048), 8 KV heads (k/v 512), FFN 8192, vocab 32000.
    const Shape shapes[] = {{"attn_q", 2048, 2048}, {"attn_k", 512, 2048}, {"ffn_up", 8192, 2048},
                            {"ffn_down", 2048, 8192}, {"output", 32000, 2048}};
    for (const tensor::Type type : {tensor::Type::F16, tensor::Type::Q8_0, tensor::Type::Q4_K}) {
        for (const Shape& shape : shapes) {
            DeviceBuffer w = make_weights(type, shape.rows, shape.cols, rng, s);
            std::normal_distribution<float> normal(0.0f, 1.0f);
            std::vector<float> x_host(static_cast<std::size_t>(shape.cols));
            for (float& v : x_host) v = normal(rng);
            DeviceBuffer x(x_host.size() * sizeof(float), "kernel lab x"), y(static_cast<std::size_t>(shape.rows) * sizeof(float), "kernel lab y");
            x.upload(x_host.data(), x_host.size() * sizeof(float), s);
            const double bytes = static_cast<double>(tensor::row_bytes(type, shape.cols)) * static_cast<double>(shape.rows);
            const std::string op = std::string("gemv ") + tensor::type_name(type) + " " + shape.what + " " +
                                   std::to_string(shape.rows) + "x" + std::to_string(shape.cols);
            std::vector<float> reference;
            for (const auto& [variant, name] : {std::pair{GemvVariant::Reference, "reference: lane per block"},
                                                std::pair{GemvVariant::Vectorized, "vectorised: lanes share blocks"}}) {
                const double seconds = timer.median_seconds(s, kWarmup, kRepeats, [&] {
                    matmul_gemv(type, w.data(), shape.rows, shape.cols, x.as<float>(), 1, y.as<float>(), s, variant);
                });
                const std::vector<float> result = download(y, static_cast<std::size_t>(shape.rows), s);
                if (reference.empty()) reference = result;
                out.push_back({op, name, seconds * 1e6, bytes / seconds * 1e-9, rel_error(result, reference)});
            }
            // Int8 dot products (opt-in in the backend: TOKENSCOPE_CUDA_INT8_GEMV=on), timed with the
            // activation's quantization; its error column shows what 8-bit activations cost.
            if (gemv_int8_supports(type, w.data(), shape.cols)) {
                DeviceBuffer xq(quantized_x_bytes(shape.cols), "kernel lab int8 x");
                const double seconds = timer.median_seconds(s, kWarmup, kRepeats, [&] {
                    quantize_x8(x.as<float>(), shape.cols, xq.data(), s);
                    matmul_gemv_int8(type, w.data(), shape.rows, shape.cols, xq.data(), y.as<float>(), s);
                });
                out.push_back({op, "int8 dp4a, x quantized (incl.)", seconds * 1e6, bytes / seconds * 1e-9,
                               rel_error(download(y, static_cast<std::size_t>(shape.rows), s), reference)});
            }
        }
    }
}

// The fused decode GEMVs against the separate launches they replace, at the 1B model's shapes:
// gate + up (8192 x 2048 each) + SiLU, and Q/K/V (2048 + 512 + 512 rows x 2048). Bytes: the
// weights read once. The error column is the fused result against the separate one.
void fused_gemv_lab(std::vector<runtime::KernelTiming>& out, cudaStream_t s, EventTimer& timer) {
    std::mt19937 rng(14);
    constexpr std::int64_t kWidth = 2048, kFfn = 8192, kQ = 2048, kKv = 512;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x_host(static_cast<std::size_t>(kWidth));
    for (float& v : x_host) v = normal(rng);
    DeviceBuffer x(x_host.size() * sizeof(float), "kernel lab x");
    x.upload(x_host.data(), x_host.size() * sizeof(float), s);
    for (const tensor::Type type : {tensor::Type::F16, tensor::Type::Q8_0, tensor::Type::Q4_K}) {
        const std::string tname = tensor::type_name(type);
        const double row = static_cast<double>(tensor::row_bytes(type, kWidth));
        {
            DeviceBuffer wg = make_weights(type, kFfn, kWidth, rng, s), wu = make_weights(type, kFfn, kWidth, rng, s);
            DeviceBuffer g(kFfn * sizeof(float), "lab gate"), u(kFfn * sizeof(float), "lab up");
            const double bytes = 2.0 * row * kFfn;
            const std::string op = "gemv " + tname + " gate+up+SiLU 2x8192x2048";
            const double separate = timer.median_seconds(s, kWarmup, kRepeats, [&] {
                matmul_gemv(type, wg.data(), kFfn, kWidth, x.as<float>(), 1, g.as<float>(), s);
                matmul_gemv(type, wu.data(), kFfn, kWidth, x.as<float>(), 1, u.as<float>(), s);
                ops::silu_mul(g.as<float>(), u.as<float>(), kFfn, s);
            });
            const std::vector<float> reference = download(g, kFfn, s);
            out.push_back({op, "separate: 2 GEMVs + silu_mul", separate * 1e6, bytes / separate * 1e-9, 0.0});
            const double fused = timer.median_seconds(s, kWarmup, kRepeats, [&] {
                matmul_gemv_gate_up(type, wg.data(), wu.data(), kFfn, kWidth, x.as<float>(), GateActivation::SiLU,
                                    g.as<float>(), s);
            });
            out.push_back({op, "fused gate+up+SiLU, one launch", fused * 1e6, bytes / fused * 1e-9,
                           rel_error(download(g, kFfn, s), reference)});
        }
        {
            DeviceBuffer wq = make_weights(type, kQ, kWidth, rng, s), wk = make_weights(type, kKv, kWidth, rng, s),
                         wv = make_weights(type, kKv, kWidth, rng, s);
            DeviceBuffer y(static_cast<std::size_t>(kQ + 2 * kKv) * sizeof(float), "lab qkv");
            float* q = y.as<float>();
            float* k = q + kQ;
            float* v = k + kKv;
            const double bytes = row * static_cast<double>(kQ + 2 * kKv);
            const std::string op = "gemv " + tname + " q/k/v (2048+512+512)x2048";
            const double separate = timer.median_seconds(s, kWarmup, kRepeats, [&] {
                matmul_gemv(type, wq.data(), kQ, kWidth, x.as<float>(), 1, q, s);
                matmul_gemv(type, wk.data(), kKv, kWidth, x.as<float>(), 1, k, s);
                matmul_gemv(type, wv.data(), kKv, kWidth, x.as<float>(), 1, v, s);
            });
            const std::vector<float> reference = download(y, static_cast<std::size_t>(kQ + 2 * kKv), s);
            out.push_back({op, "separate: 3 GEMVs", separate * 1e6, bytes / separate * 1e-9, 0.0});
            const double fused = timer.median_seconds(s, kWarmup, kRepeats, [&] {
                matmul_gemv_qkv(type, wq.data(), kQ, wk.data(), kKv, wv.data(), kKv, kWidth, x.as<float>(), q, k, v, s);
            });
            out.push_back({op, "fused q/k/v, one launch", fused * 1e6, bytes / fused * 1e-9,
                           rel_error(download(y, static_cast<std::size_t>(kQ + 2 * kKv), s), reference)});
        }
    }
}

void attention_lab(std::vector<runtime::KernelTiming>& out, cudaStream_t s, EventTimer& timer) {
    constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 64;
    std::mt19937 rng(12);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const kv::ElementType type : {kv::ElementType::F16, kv::ElementType::Q8}) {
        for (const int context : {512, 4096}) {
            const std::size_t row = static_cast<std::size_t>(kKvHeads) * kHeadDim;
            std::vector<float> kv_host(static_cast<std::size_t>(context) * row);
            for (float& v : kv_host) v = normal(rng);
            DeviceBuffer k_in(kv_host.size() * sizeof(float), "lab k"), v_in(kv_host.size() * sizeof(float), "lab v");
            k_in.upload(kv_host.data(), kv_host.size() * sizeof(float), s);
            for (float& v : kv_host) v = normal(rng);
            v_in.upload(kv_host.data(), kv_host.size() * sizeof(float), s);
            std::vector<std::int64_t> slots(static_cast<std::size_t>(context));
            for (int i = 0; i < context; ++i) slots[static_cast<std::size_t>(i)] = i;
            DeviceBuffer d_slots(slots.size() * sizeof(std::int64_t), "lab slots");
            d_slots.upload(slots.data(), slots.size() * sizeof(std::int64_t), s);
            const std::size_t values = static_cast<std::size_t>(context) * row * static_cast<std::size_t>(kv::element_bytes(type));
            DeviceBuffer k_cache(values, "lab K cache"), v_cache(values, "lab V cache");
            DeviceBuffer k_scales(static_cast<std::size_t>(context) * kKvHeads * sizeof(float), "lab K scales");
            DeviceBuffer v_scales(static_cast<std::size_t>(context) * kKvHeads * sizeof(float), "lab V scales");
            ops::kv_append(k_in.as<float>(), v_in.as<float>(), context, d_slots.as<std::int64_t>(), k_cache.data(), v_cache.data(),
                           k_scales.as<float>(), v_scales.as<float>(), kKvHeads, kHeadDim, type, s);
            std::vector<float> q_host(static_cast<std::size_t>(kHeads) * kHeadDim);
            for (float& v : q_host) v = normal(rng);
            DeviceBuffer q(q_host.size() * sizeof(float), "lab q"), o(q_host.size() * sizeof(float), "lab out");
            q.upload(q_host.data(), q_host.size() * sizeof(float), s);
            const std::int32_t pos = context - 1, begin = 0;
            DeviceBuffer d_pos(sizeof pos, "lab pos"), d_begin(sizeof begin, "lab begin");
            d_pos.upload(&pos, sizeof pos, s);
            d_begin.upload(&begin, sizeof begin, s);
            const int splits = ops::attention_splits_for(context);
            DeviceBuffer scratch(ops::attention_split_scratch_floats(1, kHeads, kHeadDim, splits) * sizeof(float), "lab scratch");
            const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
            double bytes = static_cast<double>(values) * 2;
            if (type == kv::ElementType::Q8) bytes += 2.0 * context * kKvHeads * sizeof(float);
            const std::string op = std::string("attention ") + kv::element_type_name(type) + " context " + std::to_string(context);
            std::vector<float> reference;
            const double one = timer.median_seconds(s, kWarmup, kRepeats, [&] {
                ops::attention(q.as<float>(), 1, kHeads, kKvHeads, kHeadDim, d_pos.as<std::int32_t>(), d_begin.as<std::int32_t>(),
                               d_slots.as<std::int64_t>(), k_cache.data(), v_cache.data(), k_scales.as<float>(),
                               v_scales.as<float>(), type, scale, 0, o.as<float>(), nullptr, 0, s);
            });
            reference = download(o, q_host.size(), s);
            out.push_back({op, "one block per head", one * 1e6, bytes / one * 1e-9, 0.0});
            const double split = timer.median_seconds(s, kWarmup, kRepeats, [&] {
                ops::attention_split(q.as<float>(), 1, kHeads, kKvHeads, kHeadDim, d_pos.as<std::int32_t>(),
                                     d_begin.as<std::int32_t>(), d_slots.as<std::int64_t>(), k_cache.data(), v_cache.data(),
                                     k_scales.as<float>(), v_scales.as<float>(), type, scale, 0, splits,
                                     scratch.as<float>(), o.as<float>(), s);
            });
            out.push_back({op, "split-K, " + std::to_string(splits) + " shares", split * 1e6, bytes / split * 1e-9,
                           rel_error(download(o, q_host.size(), s), reference)});
            // GQA: one block per (KV head, share) for the 4 query heads of each KV head, the share
            // count the backend picks for this GPU (and one share, to show what splitting buys).
            const int gqa_splits = ops::gqa::splits_for(ops::device_sm_count(), kKvHeads, 1, context);
            DeviceBuffer gqa_scratch(ops::gqa::scratch_floats(1, kHeads, kHeadDim, ops::gqa::kMaxSplits) * sizeof(float),
                                     "lab GQA scratch");
            for (const int n : {gqa_splits, 1}) {
                const double gqa = timer.median_seconds(s, kWarmup, kRepeats, [&] {
                    ops::attention_gqa(q.as<float>(), 1, kHeads, kKvHeads, kHeadDim, d_pos.as<std::int32_t>(),
                                       d_begin.as<std::int32_t>(), d_slots.as<std::int64_t>(), k_cache.data(),
                                       v_cache.data(), k_scales.as<float>(), v_scales.as<float>(), type, scale, 0, n,
                                       gqa_scratch.as<float>(), o.as<float>(), s);
                });
                out.push_back({op, "GQA split-K, " + std::to_string(n) + " shares",
                               gqa * 1e6, bytes / gqa * 1e-9, rel_error(download(o, q_host.size(), s), reference)});
            }
        }
    }
}

// Prefill: 2048 queries of one sequence over their own 2048 keys (causal), F16 cache.
void prefill_attention_lab(std::vector<runtime::KernelTiming>& out, cudaStream_t s, EventTimer& timer) {
    constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 64, kTokens = 2048;
    std::mt19937 rng(13);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const std::size_t row = static_cast<std::size_t>(kKvHeads) * kHeadDim;
    std::vector<float> host(static_cast<std::size_t>(kTokens) * kHeads * kHeadDim);
    for (float& v : host) v = normal(rng);
    DeviceBuffer q(host.size() * sizeof(float), "lab q"), o(host.size() * sizeof(float), "lab out");
    q.upload(host.data(), host.size() * sizeof(float), s);
    std::vector<float> kv_host(static_cast<std::size_t>(kTokens) * row);
    for (float& v : kv_host) v = normal(rng);
    DeviceBuffer k_in(kv_host.size() * sizeof(float), "lab k"), v_in(kv_host.size() * sizeof(float), "lab v");
    k_in.upload(kv_host.data(), kv_host.size() * sizeof(float), s);
    for (float& v : kv_host) v = normal(rng);
    v_in.upload(kv_host.data(), kv_host.size() * sizeof(float), s);
    std::vector<std::int64_t> slots(kTokens);
    std::vector<std::int32_t> pos(kTokens), begin(kTokens, 0);
    for (int i = 0; i < kTokens; ++i) slots[static_cast<std::size_t>(i)] = pos[static_cast<std::size_t>(i)] = i;
    DeviceBuffer d_slots(slots.size() * 8, "lab slots"), d_pos(pos.size() * 4, "lab pos"), d_begin(begin.size() * 4, "lab begin");
    d_slots.upload(slots.data(), slots.size() * 8, s);
    d_pos.upload(pos.data(), pos.size() * 4, s);
    d_begin.upload(begin.data(), begin.size() * 4, s);
    const std::size_t values = static_cast<std::size_t>(kTokens) * row * 2;
    DeviceBuffer k_cache(values, "lab K"), v_cache(values, "lab V");
    ops::kv_append(k_in.as<float>(), v_in.as<float>(), kTokens, d_slots.as<std::int64_t>(), k_cache.data(), v_cache.data(),
                   nullptr, nullptr, kKvHeads, kHeadDim, kv::ElementType::F16, s);
    const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    // Causal attention FLOPs: QK and PV, 2 * 2 * head_dim per (query, visible key, head).
    const double flops = 4.0 * kHeadDim * kHeads * (static_cast<double>(kTokens) * (kTokens + 1) / 2);
    const std::string op = "attention prefill f16 2048x2048";
    const double one = timer.median_seconds(s, 1, 5, [&] {
        ops::attention(q.as<float>(), kTokens, kHeads, kKvHeads, kHeadDim, d_pos.as<std::int32_t>(), d_begin.as<std::int32_t>(),
                       d_slots.as<std::int64_t>(), k_cache.data(), v_cache.data(), nullptr, nullptr, kv::ElementType::F16,
                       scale, 0, o.as<float>(), nullptr, 0, s);
    });
    const std::vector<float> reference = download(o, host.size(), s);
    // gbps carries TFLOP/s x 1000 for this compute-bound op (the variant name says so).
    out.push_back({op, "one block per (token, head) [GFLOP/s]", one * 1e6, flops / one * 1e-9, 0.0});
    const int block = 512;
    DeviceBuffer scratch(ops::attention_gemm_scratch_bytes(kTokens, kTokens, kHeads, kKvHeads, kHeadDim, block), "lab scratch");
    MatmulWorkspace ws;
    const double gemm = timer.median_seconds(s, 1, 5, [&] {
        ops::attention_gemm(q.as<float>(), kTokens, kTokens, kHeads, kKvHeads, kHeadDim, d_pos.as<std::int32_t>(),
                            d_slots.as<std::int64_t>(), k_cache.data(), v_cache.data(), nullptr, nullptr, kv::ElementType::F16,
                            scale, 0, block, scratch.data(), o.as<float>(), ws.cublas(), s);
    });
    out.push_back({op, "bf16 GEMMs + masked softmax [GFLOP/s]", gemm * 1e6, flops / gemm * 1e-9,
                   rel_error(download(o, host.size(), s), reference)});
}

}  // namespace

std::vector<runtime::KernelTiming> run_kernel_lab(const std::string& op) {
    if (!op.empty() && op != "gemv" && op != "attention") {
        throw InvalidArgument("kernel lab: unknown op '" + op + "' (gemv, attention, or none for both)");
    }
    const ScopedStream scoped;
    cudaStream_t stream = scoped.get();
    EventTimer timer;
    std::vector<runtime::KernelTiming> out;
    if (op.empty() || op == "gemv") {
        gemv_lab(out, stream, timer);
        fused_gemv_lab(out, stream, timer);
    }
    if (op.empty() || op == "attention") {
        attention_lab(out, stream, timer);
        prefill_attention_lab(out, stream, timer);
    }
    return out;
}

}  // namespace tokenscope::cuda::lab
