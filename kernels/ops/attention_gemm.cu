#include "ops/attention_gemm.cuh"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "ops/attention_core.cuh"
#include "ops/check.h"
#include "ops/reduce.cuh"

namespace tokenscope::cuda::ops {

namespace {

constexpr int kThreads = 256;

std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }

struct Layout {
    std::size_t k, v, q, scores, probs, o, total;  // byte offsets into the scratch
};

Layout layout(int context, int heads, int kv_heads, int head_dim, int block) {
    Layout l{};
    const std::size_t kv = static_cast<std::size_t>(context) * kv_heads * head_dim * sizeof(__nv_bfloat16);
    const std::size_t rows = static_cast<std::size_t>(heads) * block;
    l.k = 0;
    l.v = l.k + align256(kv);
    l.q = l.v + align256(kv);
    l.scores = l.q + align256(rows * head_dim * sizeof(__nv_bfloat16));
    l.probs = l.scores + align256(rows * context * sizeof(float));
    l.o = l.probs + align256(rows * context * sizeof(__nv_bfloat16));
    l.total = l.o + align256(rows * head_dim * sizeof(float));
    return l;
}

unsigned grid_for(std::int64_t work) {
    return static_cast<unsigned>(std::clamp<std::int64_t>((work + kThreads - 1) / kThreads, 1, 65536));
}

// out[j][kvh][d] = value of position j (slot slot_table[j]) for j < context.
__global__ void gather_kv(const void* cache, const float* scales, int type, const std::int64_t* slot_table,
                          int context, int kv_heads, int head_dim, __nv_bfloat16* out) {
    const std::int64_t total = static_cast<std::int64_t>(context) * kv_heads * head_dim;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t j = i / (static_cast<std::int64_t>(kv_heads) * head_dim);
        const std::int64_t rest = i % (static_cast<std::int64_t>(kv_heads) * head_dim);
        const std::int64_t row = slot_table[j] * kv_heads + rest / head_dim;  // [slot][kv_head]
        float v = detail::load_kv(cache, type, row * head_dim + rest % head_dim);
        if (type == kvt::kQ8) v *= scales[row];
        out[i] = __float2bfloat16(v);
    }
}

// qh[h][t][d] = q[first + t][h][d] for t < count.
__global__ void queries_head_major(const float* q, int first, int count, int heads, int head_dim, __nv_bfloat16* qh) {
    const std::int64_t total = static_cast<std::int64_t>(count) * heads * head_dim;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t h = i / (static_cast<std::int64_t>(count) * head_dim);
        const std::int64_t t = (i / head_dim) % count;
        const std::int64_t d = i % head_dim;
        qh[i] = __float2bfloat16(q[((first + t) * heads + h) * head_dim + d]);
    }
}

// One block per row (h, t) of the scores: softmax over the visible keys, zeros elsewhere.
__global__ void masked_softmax(const float* scores, const std::int32_t* token_pos, int first, int count, int context,
                               int window, __nv_bfloat16* probs) {
    const std::int64_t row = blockIdx.x;  // h * count + t
    const int t = static_cast<int>(row % count);
    const int p = token_pos[first + t];
    const int lo = window > 0 ? max(0, p - window + 1) : 0;
    const float* s = scores + row * context;
    __nv_bfloat16* out = probs + row * context;
    float m = -INFINITY;
    for (int j = lo + static_cast<int>(threadIdx.x); j <= p; j += blockDim.x) m = fmaxf(m, s[j]);
    m = detail::block_max(m);
    float sum = 0.0f;
    for (int j = lo + static_cast<int>(threadIdx.x); j <= p; j += blockDim.x) sum += expf(s[j] - m);
    sum = detail::block_sum(sum);
    const float inv = 1.0f / sum;
    for (int j = static_cast<int>(threadIdx.x); j < context; j += blockDim.x) {
        out[j] = __float2bfloat16(j >= lo && j <= p ? expf(s[j] - m) * inv : 0.0f);
    }
}

// out[first + t][h][d] = oh[h][t][d].
__global__ void scatter_heads(const float* oh, int first, int count, int heads, int head_dim, float* out) {
    const std::int64_t total = static_cast<std::int64_t>(count) * heads * head_dim;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t h = i / (static_cast<std::int64_t>(count) * head_dim);
        const std::int64_t t = (i / head_dim) % count;
        const std::int64_t d = i % head_dim;
        out[((first + t) * heads + h) * head_dim + d] = oh[i];
    }
}

void check_cublas(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS) {
        throw Error(std::string("cuda attention (GEMM): ") + what + " failed: " + cublasGetStatusName(status));
    }
}

}  // namespace

std::size_t attention_gemm_scratch_bytes(int tokens, int context, int heads, int kv_heads, int head_dim,
                                         int query_block) {
    return layout(context, heads, kv_heads, head_dim, std::min(tokens, query_block)).total;
}

void attention_gemm(const float* q, int tokens, int context, int heads, int kv_heads, int head_dim,
                    const std::int32_t* token_pos, const std::int64_t* slot_table, const void* k_cache,
                    const void* v_cache, const float* k_scales, const float* v_scales, kv::ElementType type,
                    float score_scale, int window, int query_block, void* scratch, float* out,
                    cublasHandle_t cublas, cudaStream_t s) {
    const int t = static_cast<int>(type);
    if (t != kvt::kF32 && t != kvt::kF16 && t != kvt::kQ8) {
        throw InvalidArgument("cuda attention (GEMM): unknown cache element type " + std::to_string(t));
    }
    if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0 || head_dim <= 0 || tokens <= 0 || query_block <= 0 ||
        context < tokens) {
        throw InvalidArgument("cuda attention (GEMM): heads " + std::to_string(heads) + ", kv_heads " + std::to_string(kv_heads) +
                              ", head_dim " + std::to_string(head_dim) + ", tokens " + std::to_string(tokens) +
                              ", context " + std::to_string(context) + ", query block " + std::to_string(query_block));
    }
    if (t == kvt::kQ8 && (k_scales == nullptr || v_scales == nullptr)) {
        throw InvalidArgument("cuda attention (GEMM): a q8 cache needs k_scales and v_scales");
    }
    const int block = std::min(tokens, query_block);
    const Layout l = layout(context, heads, kv_heads, head_dim, block);
    auto* base = static_cast<unsigned char*>(scratch);
    auto* kc = reinterpret_cast<__nv_bfloat16*>(base + l.k);
    auto* vc = reinterpret_cast<__nv_bfloat16*>(base + l.v);
    auto* qh = reinterpret_cast<__nv_bfloat16*>(base + l.q);
    auto* scores = reinterpret_cast<float*>(base + l.scores);
    auto* probs = reinterpret_cast<__nv_bfloat16*>(base + l.probs);
    auto* oh = reinterpret_cast<float*>(base + l.o);

    const std::int64_t kv_elems = static_cast<std::int64_t>(context) * kv_heads * head_dim;
    gather_kv<<<grid_for(kv_elems), kThreads, 0, s>>>(k_cache, k_scales, t, slot_table, context, kv_heads, head_dim, kc);
    gather_kv<<<grid_for(kv_elems), kThreads, 0, s>>>(v_cache, v_scales, t, slot_table, context, kv_heads, head_dim, vc);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("gather_kv");
    check_cublas(cublasSetStream(cublas, s), "cublasSetStream");

    const int group = heads / kv_heads;
    const float zero = 0.0f, one = 1.0f;
    for (int first = 0; first < tokens; first += block) {
        const int count = std::min(block, tokens - first);
        const std::int64_t q_elems = static_cast<std::int64_t>(count) * heads * head_dim;
        queries_head_major<<<grid_for(q_elems), kThreads, 0, s>>>(q, first, count, heads, head_dim, qh);
        TOKENSCOPE_CUDA_CHECK_LAUNCH("queries_head_major");
        // Per KV head: S (context x group*count, column-major) = K^T-view x Q-view.
        // A = K at kc + kvh*head_dim, stored head_dim x context (lda = kv_heads*head_dim), transposed.
        // B = the group's queries, head_dim x group*count (ldb = head_dim).
        const int cols = group * count;
        check_cublas(cublasGemmStridedBatchedEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, context, cols, head_dim, &score_scale,
                                                kc, CUDA_R_16BF, kv_heads * head_dim, head_dim,
                                                qh, CUDA_R_16BF, head_dim, static_cast<long long>(cols) * head_dim,
                                                &zero, scores, CUDA_R_32F, context, static_cast<long long>(cols) * context,
                                                kv_heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmStridedBatchedEx (scores)");
        masked_softmax<<<static_cast<unsigned>(heads * count), kThreads, 0, s>>>(scores, token_pos, first, count, context,
                                                                                 window, probs);
        TOKENSCOPE_CUDA_CHECK_LAUNCH("masked_softmax");
        // O (head_dim x group*count, column-major) = V-view (head_dim x context) x P^T-view.
        check_cublas(cublasGemmStridedBatchedEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, head_dim, cols, context, &one,
                                                vc, CUDA_R_16BF, kv_heads * head_dim, head_dim,
                                                probs, CUDA_R_16BF, context, static_cast<long long>(cols) * context,
                                                &zero, oh, CUDA_R_32F, head_dim, static_cast<long long>(cols) * head_dim,
                                                kv_heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmStridedBatchedEx (values)");
        scatter_heads<<<grid_for(q_elems), kThreads, 0, s>>>(oh, first, count, heads, head_dim, out);
        TOKENSCOPE_CUDA_CHECK_LAUNCH("scatter_heads");
    }
}

}  // namespace tokenscope::cuda::ops
