#include "cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>

#include <spdlog/spdlog.h>

#include "device_buffer.h"
#include "device_info.h"
#include "ops/check.h"
#include "inspect/attention_capture.h"
#include "kv/kv_cache_manager.h"
#include "matmul/matmul.cuh"
#include "ops/activation.cuh"
#include "ops/attention.cuh"
#include "ops/attention_gemm.cuh"
#include "ops/attention_gqa.cuh"
#include "ops/attention_gqa_plan.h"
#include "ops/elementwise.cuh"
#include "ops/embedding.cuh"
#include "ops/kv_append.cuh"
#include "ops/rms_norm.cuh"
#include "ops/rope.cuh"
#include "util/error.h"

namespace tokenscope::cuda {

namespace {

struct DeviceMatrix {
    tensor::Type type = tensor::Type::F32;
    std::int64_t rows = 0, cols = 0;
    DeviceBuffer data;
};

struct DeviceLayer {
    DeviceBuffer attn_norm, q_norm, k_norm, post_attn_norm, ffn_norm, post_ffn_norm;
    DeviceBuffer bq, bk, bv;  // attention_bias only
    DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

std::uint64_t matrix_bytes(const model::WeightMatrix& m) { return m.data ? m.bytes : 0; }

template <typename T>
void grow_for(DeviceBuffer& b, std::int64_t count, const char* purpose) {
    b.grow(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T), purpose);
}

}  // namespace

struct CudaBackend::State {
    const model::ModelConfig& config;
    const model::ModelWeights& weights;
    kv::CacheShape shape;
    cudaStream_t stream = nullptr;
    // Destroys the stream after the members declared below it (the cuBLAS handle in the
    // workspace is bound to the stream and goes first).
    struct StreamOwner {
        cudaStream_t* stream;
        ~StreamOwner() {
            if (*stream) cudaStreamDestroy(*stream);
        }
    } stream_owner{&stream};
    MatmulWorkspace workspace;
    DeviceMatrix embedding, output;
    DeviceBuffer output_norm;
    DeviceBuffer rope_freq_factors;  // empty (null) unless the file has rope_freqs
    std::vector<DeviceLayer> layers;
    // The paged cache: per layer, K and V as [slot][kv_head][head_dim] (and Q8 scales as
    // [slot][kv_head]), all layers in one buffer each.
    DeviceBuffer k_cache, v_cache, k_scales, v_scales;
    std::size_t layer_values_bytes = 0;  // one layer's K (or V) values
    std::size_t layer_scale_floats = 0;
    std::uint64_t weight_bytes = 0;
    // Scratch, grown to the largest batch.
    DeviceBuffer tokens, positions, slots, slot_begin, slot_table;
    DeviceBuffer x, xn, q, k, v, attn, proj, gate, up, logits_in, logits, capture;
    std::string device_name;
    runtime::GpuOptions options;
    // Split-K attention: a share count fixed for the cache's capacity (so a graph can replay
    // it) and scratch for up to kSplitMaxTokens queries, allocated once.
    int attention_splits = 1;
    DeviceBuffer split_scratch;
    // GQA split-K attention (ops/attention_gqa.cuh), used instead of the above for decode when the
    // shape allows it and TOKENSCOPE_CUDA_ATTENTION is not "split": its share count depends on
    // the SM count and the number of queries (gqa::splits_for), fixed for a given T, so the
    // batch-1 graph replays one shape.
    bool gqa_attention = false;
    // Fused decode GEMVs (matmul.cuh): one launch for q/k/v and one for gate + up + activation at
    // T = 1 where the three (two) matrices share a type the fused kernels take.
    // TOKENSCOPE_CUDA_FUSED=off turns them off for comparison.
    bool fused_gemv = true;
    // Int8 dot products for Q8_0 / Q4_K GEMVs at T = 1 (matmul.cuh; opt-in until a GPU run has
    // measured and self-tested them: TOKENSCOPE_CUDA_INT8_GEMV=on). They take precedence over the
    // fused GEMVs for those types. x8: the quantized activation, sized for the widest input.
    bool int8_gemv = false;
    DeviceBuffer x8;
    bool use_int8(const DeviceMatrix& w, int n_tokens) const {
        return int8_gemv && n_tokens == 1 && gemv_int8_supports(w.type, w.data.data(), w.cols);
    }
    bool can_fuse(std::initializer_list<const DeviceMatrix*> ms, const float* in) const {
        if (!fused_gemv) return false;
        const DeviceMatrix& first = **ms.begin();
        if (use_int8(first, 1)) return false;
        for (const DeviceMatrix* m : ms) {
            if (m->type != first.type || m->cols != first.cols || !gemv_fused_supports(m->type, m->data.data(), m->cols, in)) {
                return false;
            }
        }
        return true;
    }
    int sm_count = 1;
    DeviceBuffer gqa_scratch;
    int gqa_splits(int T) const {
        return ops::gqa::splits_for(sm_count, static_cast<int>(config.kv_heads), T, kv::capacity_tokens(shape));
    }
    // The batch-1 decode step as a CUDA graph, and the buffer addresses it was recorded with: a
    // buffer that grew since (a longer prefill) invalidates it.
    cudaGraphExec_t decode_graph = nullptr;
    std::vector<const void*> decode_graph_key;
    // The addresses of the last eager decode step: a step runs eagerly once with new buffers
    // before it is recorded, so that every kernel of the step has been loaded (lazy module
    // loading) and has run outside a capture first.
    std::vector<const void*> eager_decode_key;
    // Set when recording or instantiating the graph failed: decode then runs eagerly (logged
    // once) instead of retrying the capture every step.
    bool graphs_failed = false;
    // Tensor-core prefill attention (ops/attention_gemm.cuh) for a batch that is one long chunk
    // of one sequence: its context (keys 0..context-1) and query block; 0 = not this batch.
    int gemm_attention_context = 0;
    int gemm_attention_block = 0;
    DeviceBuffer gemm_attention_scratch;

    State(const model::ModelConfig& c, const model::ModelWeights& w, const kv::CacheShape& s, const runtime::GpuOptions& o)
        : config(c), weights(w), shape(s), options(o) {}

    ~State() {
        if (decode_graph) cudaGraphExecDestroy(decode_graph);
    }

    std::vector<const void*> buffer_addresses() const {
        std::vector<const void*> key;
        for (const DeviceBuffer* b : {&tokens, &positions, &slots, &slot_begin, &slot_table, &x, &xn, &q, &k, &v, &attn,
                                      &proj, &gate, &up, &logits_in, &logits, &split_scratch, &gqa_scratch, &x8}) {
            key.push_back(b->data());
        }
        return key;
    }

    // The kernels of one forward pass over T tokens already uploaded (tokens, positions,
    // slots, slot table); logits for `logit_rows`. `capture_step` (nullable) is called after
    // each layer's attention when capture is on: it needs a host sync, so a captured pass is
    // never recorded into a graph.
    void enqueue(int T, const std::vector<std::int64_t>& logit_rows, const std::function<bool(int)>& capture_layer,
                 const std::function<void(int)>& capture_step, std::int64_t capture_stride);

    void upload_vector(DeviceBuffer& b, const std::vector<float>& v, const char* what) {
        if (v.empty()) return;
        b.grow(v.size() * sizeof(float), what);
        b.upload(v.data(), v.size() * sizeof(float), stream);
    }

    void upload_matrix(DeviceMatrix& d, const model::WeightMatrix& m, const char* what) {
        d.type = m.type;
        d.rows = m.rows;
        d.cols = m.cols;
        d.data.grow(m.bytes, what);
        d.data.upload(m.data, m.bytes, stream);
        weight_bytes += m.bytes;
    }

    void* k_layer(int l) const { return static_cast<char*>(k_cache.data()) + layer_values_bytes * static_cast<std::size_t>(l); }
    void* v_layer(int l) const { return static_cast<char*>(v_cache.data()) + layer_values_bytes * static_cast<std::size_t>(l); }
    float* k_scale_layer(int l) const {
        return shape.type == kv::ElementType::Q8 ? k_scales.as<float>() + layer_scale_floats * static_cast<std::size_t>(l) : nullptr;
    }
    float* v_scale_layer(int l) const {
        return shape.type == kv::ElementType::Q8 ? v_scales.as<float>() + layer_scale_floats * static_cast<std::size_t>(l) : nullptr;
    }

    void mm(const DeviceMatrix& w, const float* in, int n_tokens, float* out_) {
        if (use_int8(w, n_tokens)) {
            quantize_x8(in, w.cols, x8.data(), stream);
            matmul_gemv_int8(w.type, w.data.data(), w.rows, w.cols, x8.data(), out_, stream);
            return;
        }
        matmul(w.type, w.data.data(), w.rows, w.cols, in, n_tokens, out_, workspace, stream);
    }
};

std::string unavailable_reason() {
    const DeviceQuery q = query_devices();
    return q.devices.empty() ? q.problem : std::string();
}

namespace {
// Queries per split-K attention launch; more (prefill chunks) take the one-block-per-head kernel,
// which already has tokens x heads blocks to spread over the GPU.
constexpr int kSplitMaxTokens = 64;
// A single-sequence chunk of at least this many queries takes the tensor-core path.
constexpr int kGemmAttentionMinTokens = 64;
// Bound on the f32 scores + bf16 probabilities of one query block.
constexpr std::size_t kGemmAttentionScoreBytes = std::size_t{256} << 20;
}  // namespace

CudaBackend::CudaBackend(const model::ModelConfig& config, const model::ModelWeights& weights, const kv::CacheShape& shape,
                         const runtime::GpuOptions& options)
    : state_(std::make_unique<State>(config, weights, shape, options)) {
    State& s = *state_;
    kv::validate(shape);
    // Budget first: weights + cache + a margin for activations and cuBLAS, against free memory.
    std::uint64_t need = kv::capacity_bytes(shape);
    need += matrix_bytes(weights.token_embedding) + (config.tied_output ? 0 : matrix_bytes(weights.output));
    for (const auto& L : weights.layers) {
        for (const auto* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) need += matrix_bytes(*m);
    }
    constexpr std::uint64_t kMargin = 512ull << 20;
    std::size_t free_bytes = 0, total_bytes = 0;
    TOKENSCOPE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (need + kMargin > free_bytes) {
        throw Error("CUDA: the model and its KV cache need " + std::to_string((need + kMargin) >> 20) + " MiB, the GPU has " +
                    std::to_string(free_bytes >> 20) + " MiB free of " + std::to_string(total_bytes >> 20) +
                    " MiB (use a smaller --ctx, --kv-type q8, or --device cpu)");
    }
    cudaDeviceProp prop{};
    TOKENSCOPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    s.device_name = prop.name;
    TOKENSCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    // bf16 for the cuBLAS (prefill) inputs: f16 overflows above 65504, which Gemma's
    // activations can reach; bf16 has f32's range at 8 bits of mantissa.
    s.workspace.precision = GemmPrecision::BF16;

    s.upload_matrix(s.embedding, weights.token_embedding, "token embedding");
    if (!config.tied_output) s.upload_matrix(s.output, weights.output, "output matrix");
    s.upload_vector(s.output_norm, weights.output_norm, "output norm");
    s.upload_vector(s.rope_freq_factors, weights.rope_freq_factors, "rope frequency factors");
    s.layers.resize(weights.layers.size());
    for (std::size_t l = 0; l < weights.layers.size(); ++l) {
        const model::LayerWeights& L = weights.layers[l];
        DeviceLayer& D = s.layers[l];
        s.upload_vector(D.attn_norm, L.attn_norm, "attention norm");
        s.upload_vector(D.q_norm, L.q_norm, "q norm");
        s.upload_vector(D.k_norm, L.k_norm, "k norm");
        s.upload_vector(D.bq, L.bq, "q bias");
        s.upload_vector(D.bk, L.bk, "k bias");
        s.upload_vector(D.bv, L.bv, "v bias");
        s.upload_vector(D.post_attn_norm, L.post_attn_norm, "post-attention norm");
        s.upload_vector(D.ffn_norm, L.ffn_norm, "ffn norm");
        s.upload_vector(D.post_ffn_norm, L.post_ffn_norm, "post-ffn norm");
        s.upload_matrix(D.wq, L.wq, "attn_q");
        s.upload_matrix(D.wk, L.wk, "attn_k");
        s.upload_matrix(D.wv, L.wv, "attn_v");
        s.upload_matrix(D.wo, L.wo, "attn_output");
        s.upload_matrix(D.w_gate, L.w_gate, "ffn_gate");
        s.upload_matrix(D.w_up, L.w_up, "ffn_up");
        s.upload_matrix(D.w_down, L.w_down, "ffn_down");
    }
    const std::size_t slots = static_cast<std::size_t>(shape.num_blocks) * static_cast<std::size_t>(shape.block_size);
    const std::size_t row = static_cast<std::size_t>(shape.kv_heads) * static_cast<std::size_t>(shape.head_dim);
    s.layer_values_bytes = slots * row * static_cast<std::size_t>(kv::element_bytes(shape.type));
    s.k_cache.grow(s.layer_values_bytes * static_cast<std::size_t>(shape.layers), "KV cache (K)");
    s.v_cache.grow(s.layer_values_bytes * static_cast<std::size_t>(shape.layers), "KV cache (V)");
    if (shape.type == kv::ElementType::Q8) {
        s.layer_scale_floats = slots * static_cast<std::size_t>(shape.kv_heads);
        s.k_scales.grow(s.layer_scale_floats * static_cast<std::size_t>(shape.layers) * sizeof(float), "KV scales (K)");
        s.v_scales.grow(s.layer_scale_floats * static_cast<std::size_t>(shape.layers) * sizeof(float), "KV scales (V)");
    }
    s.attention_splits = options.split_k_attention ? ops::attention_splits_for(kv::capacity_tokens(shape)) : 1;
    {
        const char* fused = std::getenv("TOKENSCOPE_CUDA_FUSED");
        s.fused_gemv = !(fused != nullptr && std::strcmp(fused, "off") == 0);
        const char* int8 = std::getenv("TOKENSCOPE_CUDA_INT8_GEMV");
        s.int8_gemv = int8 != nullptr && std::strcmp(int8, "on") == 0;
        if (s.int8_gemv) {
            const std::int64_t widest = std::max({config.embedding_length, config.ffn_length, config.heads * config.value_dim});
            s.x8.grow(quantized_x_bytes((widest + 255) / 256 * 256), "int8 activation");
        }
    }
    if (options.split_k_attention) {
        s.sm_count = ops::device_sm_count();
        const char* choice = std::getenv("TOKENSCOPE_CUDA_ATTENTION");
        s.gqa_attention = !(choice != nullptr && std::strcmp(choice, "split") == 0);
        for (int l = 0; l < shape.layers && s.gqa_attention; ++l) {
            s.gqa_attention = ops::attention_gqa_supports(shape.type, static_cast<int>(config.heads),
                                                          static_cast<int>(config.kv_heads), static_cast<int>(config.head_dim),
                                                          s.k_layer(l), s.v_layer(l));
        }
        if (s.gqa_attention) {
            std::size_t floats = 0;
            for (int T = 1; T <= kSplitMaxTokens; ++T) {
                floats = std::max(floats, ops::gqa::scratch_floats(T, static_cast<int>(config.heads),
                                                                   static_cast<int>(config.head_dim), s.gqa_splits(T)));
            }
            s.gqa_scratch.grow(floats * sizeof(float), "GQA attention scratch");
        }
    }
    if (options.split_k_attention && !s.gqa_attention) {
        s.split_scratch.grow(ops::attention_split_scratch_floats(kSplitMaxTokens, static_cast<int>(config.heads),
                                                                 static_cast<int>(config.head_dim), s.attention_splits) *
                                 sizeof(float),
                             "split-K attention scratch");
    }
    // The decode step's buffers at their batch-1 sizes now, and the slot table at the cache's
    // capacity, so that the graph recorded at the first decode step stays valid as the
    // context grows.
    grow_for<std::int64_t>(s.slot_table, kv::capacity_tokens(shape), "slot table");
    TOKENSCOPE_CUDA_CHECK(cudaStreamSynchronize(s.stream));
    spdlog::info("cuda backend: {} ({} MiB of weights, {} MiB of KV cache, {}, decode graphs {})", s.device_name,
                 s.weight_bytes >> 20, kv::capacity_bytes(shape) >> 20,
                 s.gqa_attention ? "GQA attention, " + std::to_string(s.gqa_splits(1)) + " shares at batch 1"
                                 : std::to_string(s.attention_splits) + " attention shares",
                 options.decode_graphs ? "on" : "off");
}

void CudaBackend::State::enqueue(int T, const std::vector<std::int64_t>& logit_rows,
                                 const std::function<bool(int)>& capture_layer,
                                 const std::function<void(int)>& capture_step, std::int64_t capture_stride) {
    const auto& c = config;
    const std::int64_t width = c.embedding_length;
    const auto heads = static_cast<int>(c.heads), kv_heads = static_cast<int>(c.kv_heads);
    const auto head_dim = static_cast<int>(c.head_dim);
    ops::embedding(embedding.data.data(), embedding.type, width, tokens.as<std::int32_t>(), T, c.embedding_scale,
                   x.as<float>(), stream);
    for (int l = 0; l < static_cast<int>(c.layers); ++l) {
        const DeviceLayer& L = layers[static_cast<std::size_t>(l)];
        ops::rms_norm(x.as<float>(), L.attn_norm.as<float>(), xn.as<float>(), T, static_cast<int>(width), c.norm_eps, stream);
        if (T == 1 && can_fuse({&L.wq, &L.wk, &L.wv}, xn.as<float>())) {
            matmul_gemv_qkv(L.wq.type, L.wq.data.data(), L.wq.rows, L.wk.data.data(), L.wk.rows, L.wv.data.data(), L.wv.rows,
                            L.wq.cols, xn.as<float>(), q.as<float>(), k.as<float>(), v.as<float>(), stream);
        } else {
            mm(L.wq, xn.as<float>(), T, q.as<float>());
            mm(L.wk, xn.as<float>(), T, k.as<float>());
            mm(L.wv, xn.as<float>(), T, v.as<float>());
        }
        if (c.attention_bias) {
            ops::add_rows(q.as<float>(), L.bq.as<float>(), T, c.q_dim(), stream);
            ops::add_rows(k.as<float>(), L.bk.as<float>(), T, c.kv_dim(), stream);
            ops::add_rows(v.as<float>(), L.bv.as<float>(), T, c.v_dim(), stream);
        }
        if (c.qk_norm) {
            ops::rms_norm(q.as<float>(), L.q_norm.as<float>(), q.as<float>(), T * heads, head_dim, c.norm_eps, stream);
            ops::rms_norm(k.as<float>(), L.k_norm.as<float>(), k.as<float>(), T * kv_heads, head_dim, c.norm_eps, stream);
        }
        const bool neox = c.rope_style == model::RopeStyle::NeoX;
        ops::rope(q.as<float>(), T, heads, head_dim, static_cast<int>(c.rope_dims), positions.as<std::int32_t>(),
                  c.rope_base(l), c.rope_linear_scale, neox, rope_freq_factors.as<float>(), stream);
        ops::rope(k.as<float>(), T, kv_heads, head_dim, static_cast<int>(c.rope_dims), positions.as<std::int32_t>(),
                  c.rope_base(l), c.rope_linear_scale, neox, rope_freq_factors.as<float>(), stream);
        ops::kv_append(k.as<float>(), v.as<float>(), T, slots.as<std::int64_t>(), k_layer(l), v_layer(l),
                       k_scale_layer(l), v_scale_layer(l), kv_heads, head_dim, shape.type, stream);
        const int window = c.uses_window(l) ? static_cast<int>(c.sliding_window) : 0;
        const bool capturing = capture_layer && capture_layer(l);
        if (capturing) capture.zero(stream);
        if (!capturing && gemm_attention_context > 0) {
            ops::attention_gemm(q.as<float>(), T, gemm_attention_context, heads, kv_heads, head_dim,
                                positions.as<std::int32_t>(), slot_table.as<std::int64_t>(), k_layer(l), v_layer(l),
                                k_scale_layer(l), v_scale_layer(l), shape.type, c.attention_scale, window,
                                gemm_attention_block, gemm_attention_scratch.data(), attn.as<float>(),
                                workspace.cublas(), stream);
        } else if (!capturing && gqa_attention && T <= kSplitMaxTokens) {
            ops::attention_gqa(q.as<float>(), T, heads, kv_heads, head_dim, positions.as<std::int32_t>(),
                               slot_begin.as<std::int32_t>(), slot_table.as<std::int64_t>(), k_layer(l), v_layer(l),
                               k_scale_layer(l), v_scale_layer(l), shape.type, c.attention_scale, window, gqa_splits(T),
                               gqa_scratch.as<float>(), attn.as<float>(), stream);
        } else if (!capturing && options.split_k_attention && T <= kSplitMaxTokens) {
            ops::attention_split(q.as<float>(), T, heads, kv_heads, head_dim, positions.as<std::int32_t>(),
                                 slot_begin.as<std::int32_t>(), slot_table.as<std::int64_t>(), k_layer(l), v_layer(l),
                                 k_scale_layer(l), v_scale_layer(l), shape.type, c.attention_scale, window,
                                 attention_splits, split_scratch.as<float>(), attn.as<float>(), stream);
        } else {
            ops::attention(q.as<float>(), T, heads, kv_heads, head_dim, positions.as<std::int32_t>(),
                           slot_begin.as<std::int32_t>(), slot_table.as<std::int64_t>(), k_layer(l), v_layer(l),
                           k_scale_layer(l), v_scale_layer(l), shape.type, c.attention_scale, window, attn.as<float>(),
                           capturing ? capture.as<float>() : nullptr, capture_stride, stream);
        }
        if (capturing) capture_step(l);
        mm(L.wo, attn.as<float>(), T, proj.as<float>());
        if (c.post_norms) ops::rms_norm(proj.as<float>(), L.post_attn_norm.as<float>(), proj.as<float>(), T, static_cast<int>(width), c.norm_eps, stream);
        ops::add(x.as<float>(), proj.as<float>(), T * width, stream);
        ops::rms_norm(x.as<float>(), L.ffn_norm.as<float>(), xn.as<float>(), T, static_cast<int>(width), c.norm_eps, stream);
        const bool gelu = c.activation == model::FfnActivation::GeluTanh;
        if (T == 1 && L.w_gate.rows == L.w_up.rows && can_fuse({&L.w_gate, &L.w_up}, xn.as<float>())) {
            matmul_gemv_gate_up(L.w_gate.type, L.w_gate.data.data(), L.w_up.data.data(), L.w_gate.rows, L.w_gate.cols,
                                xn.as<float>(), gelu ? GateActivation::GeluTanh : GateActivation::SiLU, gate.as<float>(),
                                stream);
        } else {
            mm(L.w_gate, xn.as<float>(), T, gate.as<float>());
            mm(L.w_up, xn.as<float>(), T, up.as<float>());
            if (gelu) {
                ops::gelu_tanh_mul(gate.as<float>(), up.as<float>(), T * c.ffn_length, stream);
            } else {
                ops::silu_mul(gate.as<float>(), up.as<float>(), T * c.ffn_length, stream);
            }
        }
        mm(L.w_down, gate.as<float>(), T, proj.as<float>());
        if (c.post_norms) ops::rms_norm(proj.as<float>(), L.post_ffn_norm.as<float>(), proj.as<float>(), T, static_cast<int>(width), c.norm_eps, stream);
        ops::add(x.as<float>(), proj.as<float>(), T * width, stream);
    }
    // Logits only for the rows that need them: gather, norm, project.
    const auto R = static_cast<int>(logit_rows.size());
    if (R == 0) return;
    for (int r = 0; r < R; ++r) {
        TOKENSCOPE_CUDA_CHECK(cudaMemcpyAsync(logits_in.as<float>() + r * width, x.as<float>() + logit_rows[static_cast<std::size_t>(r)] * width,
                                              static_cast<std::size_t>(width) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    }
    ops::rms_norm(logits_in.as<float>(), output_norm.as<float>(), logits_in.as<float>(), R, static_cast<int>(width), c.norm_eps, stream);
    mm(c.tied_output ? embedding : output, logits_in.as<float>(), R, logits.as<float>());
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::name() const { return "cuda (" + state_->device_name + ")"; }

runtime::BackendMemory CudaBackend::memory() const {
    const State& s = *state_;
    runtime::BackendMemory m;
    m.weight_bytes = s.weight_bytes;
    m.kv_cache_bytes = kv::capacity_bytes(s.shape);
    for (const DeviceBuffer* b : {&s.x, &s.xn, &s.q, &s.k, &s.v, &s.attn, &s.proj, &s.gate, &s.up, &s.logits, &s.capture,
                                  &s.split_scratch, &s.gqa_scratch, &s.gemm_attention_scratch}) {
        m.activation_bytes += b->bytes();
    }
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {  // never throws from here
        m.device_total_bytes = total_bytes;
        m.device_used_bytes = total_bytes - free_bytes;
    } else {
        cudaGetLastError();
    }
    return m;
}

void CudaBackend::forward(const runtime::Batch& batch, kv::KvCacheManager& kv, runtime::ForwardOutputs& out) {
    State& s = *state_;
    const auto& c = s.config;
    const std::int64_t width = c.embedding_length;

    // Copy-on-write block copies queued by the cache manager, for every layer, K and V.
    const std::size_t slot_value_bytes = s.layer_values_bytes / (static_cast<std::size_t>(s.shape.num_blocks) * s.shape.block_size);
    for (const kv::BlockCopy& copy : kv.take_block_copies()) {
        for (int l = 0; l < s.shape.layers; ++l) {
            const std::size_t src = static_cast<std::size_t>(copy.src) * s.shape.block_size * slot_value_bytes;
            const std::size_t dst = static_cast<std::size_t>(copy.dst) * s.shape.block_size * slot_value_bytes;
            const std::size_t bytes = static_cast<std::size_t>(copy.tokens) * slot_value_bytes;
            for (void* base : {s.k_layer(l), s.v_layer(l)}) {
                TOKENSCOPE_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(base) + dst, static_cast<char*>(base) + src, bytes,
                                                      cudaMemcpyDeviceToDevice, s.stream));
            }
            if (s.shape.type == kv::ElementType::Q8) {
                const std::size_t per_slot = static_cast<std::size_t>(s.shape.kv_heads);
                for (float* base : {s.k_scale_layer(l), s.v_scale_layer(l)}) {
                    TOKENSCOPE_CUDA_CHECK(cudaMemcpyAsync(base + static_cast<std::size_t>(copy.dst) * s.shape.block_size * per_slot,
                                                          base + static_cast<std::size_t>(copy.src) * s.shape.block_size * per_slot,
                                                          static_cast<std::size_t>(copy.tokens) * per_slot * sizeof(float),
                                                          cudaMemcpyDeviceToDevice, s.stream));
                }
            }
        }
    }

    // Host-side bookkeeping of the ragged batch, then one upload.
    std::vector<std::int32_t> tokens, positions, slot_begin;
    std::vector<std::int64_t> slots, slot_table;
    std::vector<std::int64_t> logit_rows;
    out.first_row.assign(batch.chunks.size(), -1);
    std::int64_t max_end = 0;
    bool any_capture = false;
    for (std::size_t ci = 0; ci < batch.chunks.size(); ++ci) {
        const runtime::SeqChunk& chunk = batch.chunks[ci];
        const std::int64_t end = chunk.start_pos + static_cast<std::int64_t>(chunk.tokens.size());
        if (kv.num_tokens(chunk.seq) < end) {
            throw InvalidArgument("forward: sequence " + std::to_string(chunk.seq) + " has fewer cache slots than the chunk needs");
        }
        const auto begin = static_cast<std::int32_t>(slot_table.size());
        for (std::int64_t p = 0; p < end; ++p) slot_table.push_back(kv.slot(chunk.seq, static_cast<int>(p)));
        const auto n = static_cast<std::int64_t>(chunk.tokens.size());
        if (chunk.logits != runtime::LogitsWanted::None && n > 0) out.first_row[ci] = static_cast<std::int64_t>(logit_rows.size());
        for (std::int64_t i = 0; i < n; ++i) {
            const std::int32_t token = chunk.tokens[static_cast<std::size_t>(i)];
            if (token < 0 || token >= c.vocab_size) throw InvalidArgument("forward: token id " + std::to_string(token) + " out of range");
            const std::int64_t row = static_cast<std::int64_t>(tokens.size());
            tokens.push_back(token);
            positions.push_back(static_cast<std::int32_t>(chunk.start_pos + i));
            slots.push_back(slot_table[static_cast<std::size_t>(begin + chunk.start_pos + i)]);
            slot_begin.push_back(begin);
            if (chunk.logits == runtime::LogitsWanted::All || (chunk.logits == runtime::LogitsWanted::Last && i == n - 1)) {
                logit_rows.push_back(row);
            }
        }
        max_end = std::max(max_end, end);
        if (chunk.capture) {
            chunk.capture->prepare_rows(end);
            any_capture = true;
        }
    }
    const auto T = static_cast<int>(tokens.size());
    out.vocab_size = c.vocab_size;
    if (T == 0) {
        out.logits.clear();
        return;
    }
    grow_for<std::int32_t>(s.tokens, T, "token ids");
    grow_for<std::int32_t>(s.positions, T, "positions");
    grow_for<std::int64_t>(s.slots, T, "slots");
    grow_for<std::int32_t>(s.slot_begin, T, "slot offsets");
    grow_for<std::int64_t>(s.slot_table, static_cast<std::int64_t>(slot_table.size()), "slot table");
    s.tokens.upload(tokens.data(), tokens.size() * sizeof(std::int32_t), s.stream);
    s.positions.upload(positions.data(), positions.size() * sizeof(std::int32_t), s.stream);
    s.slots.upload(slots.data(), slots.size() * sizeof(std::int64_t), s.stream);
    s.slot_begin.upload(slot_begin.data(), slot_begin.size() * sizeof(std::int32_t), s.stream);
    s.slot_table.upload(slot_table.data(), slot_table.size() * sizeof(std::int64_t), s.stream);

    grow_for<float>(s.x, T * width, "activations");
    grow_for<float>(s.xn, T * width, "activations");
    grow_for<float>(s.q, T * c.q_dim(), "queries");
    grow_for<float>(s.k, T * c.kv_dim(), "keys");
    grow_for<float>(s.v, T * c.v_dim(), "values");
    grow_for<float>(s.attn, T * c.heads * c.value_dim, "attention output");
    grow_for<float>(s.proj, T * width, "projections");
    grow_for<float>(s.gate, T * c.ffn_length, "ffn gate");
    grow_for<float>(s.up, T * c.ffn_length, "ffn up");
    const std::int64_t capture_stride = max_end;
    if (any_capture) grow_for<float>(s.capture, static_cast<std::int64_t>(T) * c.heads * capture_stride, "attention capture");
    std::vector<float> capture_host;

    const auto R = static_cast<int>(logit_rows.size());
    grow_for<float>(s.logits_in, R * width, "logit rows");
    grow_for<float>(s.logits, static_cast<std::int64_t>(R) * c.vocab_size, "logits");
    out.logits.resize(static_cast<std::size_t>(R) * static_cast<std::size_t>(c.vocab_size));

    // Captured attention rows come back to the host only for the layers someone watches.
    auto capture_layer = [&](int l) {
        for (const auto& chunk : batch.chunks) {
            if (chunk.capture && chunk.capture->wants_layer(l)) return true;
        }
        return false;
    };
    auto capture_step = [&](int l) {
        capture_host.resize(static_cast<std::size_t>(T) * c.heads * static_cast<std::size_t>(capture_stride));
        s.capture.download(capture_host.data(), capture_host.size() * sizeof(float), s.stream);
        TOKENSCOPE_CUDA_CHECK(cudaStreamSynchronize(s.stream));
        int t = 0;
        for (const auto& chunk : batch.chunks) {
            for (std::size_t i = 0; i < chunk.tokens.size(); ++i, ++t) {
                if (!chunk.capture) continue;
                const std::int64_t pos = chunk.start_pos + static_cast<std::int64_t>(i);
                if (!chunk.capture->wants_position(pos)) continue;
                const std::int64_t first = c.uses_window(l) ? std::max<std::int64_t>(0, pos - c.sliding_window + 1) : 0;
                for (int h = 0; h < static_cast<int>(c.heads); ++h) {
                    if (!chunk.capture->wants(l, h)) continue;
                    const float* row = capture_host.data() + (static_cast<std::size_t>(t) * c.heads + h) * capture_stride;
                    chunk.capture->set_row(l, h, pos, first, {row + first, static_cast<std::size_t>(pos - first + 1)});
                }
            }
        }
    };

    // One long chunk of one sequence: attention on tensor cores (positions are consecutive).
    s.gemm_attention_context = 0;
    if (batch.chunks.size() == 1 && T >= kGemmAttentionMinTokens && !any_capture) {
        const auto context = static_cast<int>(max_end);
        const std::size_t per_query = static_cast<std::size_t>(c.heads) * static_cast<std::size_t>(context) * 6;
        s.gemm_attention_block = static_cast<int>(std::clamp<std::size_t>(kGemmAttentionScoreBytes / per_query, 16, 512));
        const std::size_t bytes = ops::attention_gemm_scratch_bytes(T, context, static_cast<int>(c.heads),
                                                                    static_cast<int>(c.kv_heads), static_cast<int>(c.head_dim),
                                                                    s.gemm_attention_block);
        // The scratch (K and V of the whole context in bf16, one query block's scores) is not in
        // the load-time budget: take it only when it is already there or free memory allows,
        // else this chunk uses the scratch-free kernel.
        std::size_t free_bytes = 0, total_bytes = 0;
        const bool fits = bytes <= s.gemm_attention_scratch.bytes() ||
                          (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess &&
                           bytes + (std::size_t{256} << 20) <= free_bytes + s.gemm_attention_scratch.bytes());
        if (fits) {
            s.gemm_attention_scratch.grow(bytes, "prefill attention scratch");
            s.gemm_attention_context = context;
        } else {
            spdlog::debug("cuda backend: {} MiB of prefill attention scratch do not fit; using the per-head kernel", bytes >> 20);
        }
    }

    // Batch-1 decode without capture replays a recorded graph: one launch instead of ~15 per
    // layer. Everything that changes per step (token, position, slot table) was uploaded above
    // into buffers whose addresses the graph holds.
    if (s.options.decode_graphs && !s.graphs_failed && T == 1 && R == 1 && !any_capture) {
        const std::vector<const void*> key = s.buffer_addresses();
        if ((!s.decode_graph || key != s.decode_graph_key) && key != s.eager_decode_key) {
            s.enqueue(T, logit_rows, nullptr, nullptr, capture_stride);
            s.eager_decode_key = key;
        } else if (!s.decode_graph || key != s.decode_graph_key) {
            if (s.decode_graph) {
                TOKENSCOPE_CUDA_CHECK(cudaGraphExecDestroy(s.decode_graph));
                s.decode_graph = nullptr;
            }
            // Recording failures are not fatal: the step runs eagerly now and from then on.
            std::string failure;
            cudaGraph_t graph = nullptr;
            cudaError_t status = cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal);
            if (status == cudaSuccess) {
                try {
                    s.enqueue(T, logit_rows, nullptr, nullptr, capture_stride);
                } catch (const std::exception& e) {
                    failure = e.what();
                }
                status = cudaStreamEndCapture(s.stream, &graph);  // always: leaves the stream usable
            }
            if (failure.empty() && status == cudaSuccess && graph) {
                status = cudaGraphInstantiate(&s.decode_graph, graph, 0);
            }
            if (graph) cudaGraphDestroy(graph);
            if (failure.empty() && status != cudaSuccess) failure = std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")";
            if (!failure.empty()) {
                cudaGetLastError();  // a capture error must not surface as a later kernel's failure
                if (s.decode_graph) cudaGraphExecDestroy(s.decode_graph);
                s.decode_graph = nullptr;
                s.graphs_failed = true;
                spdlog::warn("cuda backend: recording the decode step as a CUDA graph failed, decoding without graphs: {}",
                             failure);
                s.enqueue(T, logit_rows, nullptr, nullptr, capture_stride);
            } else {
                s.decode_graph_key = key;
                spdlog::debug("cuda backend: recorded the decode step as a CUDA graph");
                TOKENSCOPE_CUDA_CHECK(cudaGraphLaunch(s.decode_graph, s.stream));
            }
        } else {
            TOKENSCOPE_CUDA_CHECK(cudaGraphLaunch(s.decode_graph, s.stream));
        }
    } else {
        s.enqueue(T, logit_rows, capture_layer, capture_step, capture_stride);
    }
    if (R > 0) s.logits.download(out.logits.data(), out.logits.size() * sizeof(float), s.stream);
    TOKENSCOPE_CUDA_CHECK(cudaStreamSynchronize(s.stream));
}

runtime::GpuBackendFactory backend_factory() {
    runtime::GpuBackendFactory factory;
    factory.name = "cuda";
    factory.unavailable_reason = [] { return unavailable_reason(); };
    factory.create = [](const model::ModelConfig& config, const model::ModelWeights& weights, const kv::CacheShape& shape,
                        const runtime::GpuOptions& options) -> std::unique_ptr<runtime::Backend> {
        return std::make_unique<CudaBackend>(config, weights, shape, options);
    };
    return factory;
}

}  // namespace tokenscope::cuda
