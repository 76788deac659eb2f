// Fused Q/K/V GEMV for decode (see matmul.cuh): one launch over the three projection matrices
// stacked, one warp per output row. Warp R < rows_q computes q[R], the next rows_k warps k, the
// last rows_v warps v; the matrix is picked per warp (uniform, no divergence). The rows are the
// vectorised GEMV's (gemv_row_dot.cuh, N = 1). Why: at batch 1 the K and V products of the 1B
// model are 512 rows each, too few warps to fill 132 SMs on their own, and each launch has a
// fixed cost; stacked they are one 3072-row launch.
#include <string>

#include "matmul/gemv_row_dot.cuh"
#include "matmul/matmul.cuh"
#include "matmul/matmul_internal.h"

namespace tokenscope::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

// Named fields, not arrays: a runtime index into a kernel parameter array puts a copy of it on
// the stack (ptxas: a 72-byte frame); picking with branches keeps everything in registers.
struct QkvArgs {
    const std::uint8_t *wq, *wk, *wv;
    float *q, *k, *v;
    std::int64_t rows_q, rows_k, rows_v;
};

template <tensor::Type T>
__global__ void __launch_bounds__(kThreads)
    gemv_qkv_kernel(QkvArgs args, std::size_t row_bytes, std::int64_t cols, const float* __restrict__ x) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    const std::uint8_t* w = args.wq;
    float* y = args.q;
    if (r >= args.rows_q) {
        r -= args.rows_q;
        w = args.wk;
        y = args.k;
        if (r >= args.rows_k) {
            r -= args.rows_k;
            w = args.wv;
            y = args.v;
            if (r >= args.rows_v) return;  // past the last matrix (the grid's last block); warp-uniform
        }
    }
    const std::uint8_t* const row[1] = {w + static_cast<std::size_t>(r) * row_bytes};
    float acc[1] = {0.0f};
    detail::rowdot::rows_dot<T, 1>(row, cols, x, lane, acc);
    const float total = detail::rowdot::warp_total(acc[0]);
    if (lane == 0) y[r] = total;
}

}  // namespace

void matmul_gemv_qkv(tensor::Type type, const void* Wq, std::int64_t rows_q, const void* Wk, std::int64_t rows_k,
                     const void* Wv, std::int64_t rows_v, std::int64_t cols, const float* x, float* q, float* k,
                     float* v, cudaStream_t s) {
    for (const void* W : {Wq, Wk, Wv}) {
        if (!gemv_fused_supports(type, W, cols, x)) {
            throw InvalidArgument(std::string("matmul: no fused QKV GEMV for ") + tensor::type_name(type) +
                                  " with cols=" + std::to_string(cols) + " at these alignments");
        }
    }
    if (rows_q < 0 || rows_k < 0 || rows_v < 0) throw InvalidArgument("matmul: fused QKV GEMV with negative rows");
    const std::int64_t total = rows_q + rows_k + rows_v;
    if (total == 0) return;
    const QkvArgs args{static_cast<const std::uint8_t*>(Wq), static_cast<const std::uint8_t*>(Wk),
                       static_cast<const std::uint8_t*>(Wv), q, k, v, rows_q, rows_k, rows_v};
    const std::size_t row_bytes = tensor::row_bytes(type, cols);
    const auto blocks = static_cast<unsigned>((total + kWarps - 1) / kWarps);
    switch (type) {
        case tensor::Type::F16: gemv_qkv_kernel<tensor::Type::F16><<<blocks, kThreads, 0, s>>>(args, row_bytes, cols, x); break;
        case tensor::Type::Q8_0: gemv_qkv_kernel<tensor::Type::Q8_0><<<blocks, kThreads, 0, s>>>(args, row_bytes, cols, x); break;
        default: gemv_qkv_kernel<tensor::Type::Q4_K><<<blocks, kThreads, 0, s>>>(args, row_bytes, cols, x); break;
    }
    detail::check_cuda(cudaGetLastError(), std::string("matmul: fused QKV GEMV launch for ") + tensor::type_name(type));
}

}  // namespace tokenscope::cuda
