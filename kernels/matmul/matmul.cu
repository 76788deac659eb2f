// matmul(): shape checks, the choice between the fused GEMV (few tokens) and dequantize + cuBLAS
// (many tokens), the cuBLAS calls, and MatmulWorkspace.
//
// cuBLAS layout. cuBLAS is column-major; a row-major [a][b] array is the column-major b x a
// matrix (its transpose) with leading dimension b. So in memory:
//   W  row-major [rows][cols]   = column-major  W^T  (cols x rows),   ld = cols
//   x  row-major [tokens][cols] = column-major  x^T  (cols x tokens), ld = cols
//   y  row-major [tokens][rows] = column-major  y^T  (rows x tokens), ld = rows
// and y[t][r] = sum_c W[r][c] x[t][c] is y^T = W * x^T. With C = op(A) op(B), m = rows,
// n = tokens, k = cols: A = the W buffer read transposed (CUBLAS_OP_T turns the stored W^T back
// into W, lda = cols), B = the x buffer as is (CUBLAS_OP_N, x^T is cols x tokens, ldb = cols),
// C = the y buffer (ldc = rows). A tile of rows [r0, r0 + m) is the same call with A at the
// tile's first row and C at y + r0: column t of C then starts at y + r0 + t * rows.
#include <algorithm>
#include <climits>
#include <string>

#include "matmul/matmul.cuh"
#include "matmul/matmul_internal.h"

namespace tokenscope::cuda {

MatmulWorkspace::~MatmulWorkspace() {
    // Destructors must not throw: statuses are ignored here.
    if (handle_ != nullptr) static_cast<void>(cublasDestroy(handle_));
    if (scratch_ != nullptr) static_cast<void>(cudaFree(scratch_));
}

cublasHandle_t MatmulWorkspace::cublas() {
    if (handle_ == nullptr) {
        cublasHandle_t h = nullptr;
        detail::check_cublas(cublasCreate(&h), "matmul: cublasCreate");
        handle_ = h;
    }
    return handle_;
}

void* MatmulWorkspace::scratch(std::size_t bytes) {
    if (bytes <= scratch_bytes_) return scratch_;
    if (scratch_ != nullptr) {
        // Work queued earlier (on any stream) may still read the old buffer.
        detail::check_cuda(cudaDeviceSynchronize(), "matmul: cudaDeviceSynchronize before growing the scratch");
        detail::check_cuda(cudaFree(scratch_), "matmul: cudaFree of the scratch");
        scratch_ = nullptr;
        scratch_bytes_ = 0;
    }
    void* p = nullptr;
    detail::check_cuda(cudaMalloc(&p, bytes), "matmul: cudaMalloc(" + std::to_string(bytes) + " bytes) for the scratch");
    scratch_ = p;
    scratch_bytes_ = bytes;
    return scratch_;
}

namespace {

struct Shape {
    const tensor::TypeTraits* traits;
    std::size_t row_bytes;
};

Shape check_shape(tensor::Type type, const void* W, std::int64_t rows, std::int64_t cols,
                  int tokens) {
    const tensor::TypeTraits& t = tensor::traits(type);  // throws for unknown ids
    if (rows < 0 || cols < 0 || tokens < 0) {
        throw InvalidArgument("matmul: negative shape rows=" + std::to_string(rows) +
                              " cols=" + std::to_string(cols) + " tokens=" + std::to_string(tokens));
    }
    if (rows > INT_MAX || cols > INT_MAX) {
        throw InvalidArgument("matmul: rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                              " exceed what cuBLAS takes (int)");
    }
    const std::size_t row_bytes = tensor::row_bytes(type, cols);  // throws when not whole blocks
    const auto address = reinterpret_cast<std::uintptr_t>(W);
    const std::uintptr_t align = type == tensor::Type::F32 ? 4 : (t.block_size == 1 ? 2 : 1);
    if (address % align != 0) {
        throw InvalidArgument(std::string("matmul: ") + t.name + " weights must be " +
                              std::to_string(align) + "-byte aligned");
    }
    return {&t, row_bytes};
}

std::size_t round_up_256(std::size_t n) {
    return (n + 255) / 256 * 256;
}

void gemm_checked(tensor::Type type, const void* W, std::size_t row_bytes, std::int64_t rows,
                  std::int64_t cols, const float* x, int tokens, float* y, MatmulWorkspace& ws,
                  cudaStream_t s) {
    cublasHandle_t h = ws.cublas();
    detail::check_cublas(cublasSetStream(h, s), "matmul: cublasSetStream");
    const float alpha = 1.0f;
    const float beta = 0.0f;
    const int m = static_cast<int>(rows);
    const int n = tokens;
    const int k = static_cast<int>(cols);

    if (type == tensor::Type::F32) {
        // W is already a dense f32 row-major matrix: no scratch, full f32 precision.
        detail::check_cublas(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha,
                                 static_cast<const float*>(W), k, x, k, &beta, y, m),
                     "matmul: cublasSgemm");
        return;
    }

    const bool bf16 = ws.precision == GemmPrecision::BF16;
    const cudaDataType dt = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const std::size_t elem = 2;
    const std::int64_t tile_rows = std::clamp<std::int64_t>(ws.max_tile_rows, 1, rows);
    const std::size_t x_bytes = round_up_256(static_cast<std::size_t>(tokens) * static_cast<std::size_t>(cols) * elem);
    const std::size_t w_bytes = static_cast<std::size_t>(tile_rows) * static_cast<std::size_t>(cols) * elem;
    auto* base = static_cast<std::uint8_t*>(ws.scratch(x_bytes + w_bytes));
    void* x16 = base;
    void* w16 = base + x_bytes;

    detail::launch_convert_f32(x, static_cast<std::int64_t>(tokens) * cols, dt, x16, s);
    const auto* w_bytes_ptr = static_cast<const std::uint8_t*>(W);
    for (std::int64_t r0 = 0; r0 < rows; r0 += tile_rows) {
        const std::int64_t tile = std::min(tile_rows, rows - r0);
        // Same stream as the GEMM of the previous tile, so this overwrites w16 only after it.
        detail::launch_dequantize_rows(type, w_bytes_ptr + static_cast<std::size_t>(r0) * row_bytes,
                                       row_bytes, tile, cols, dt, w16, s);
        detail::check_cublas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(tile), n, k, &alpha,
                                  w16, dt, k, x16, dt, k, &beta, y + r0, CUDA_R_32F, m,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     std::string("matmul: cublasGemmEx (") + (bf16 ? "bf16" : "f16") + ")");
    }
}

// cols == 0 (or nothing to do): y is all zeros / untouched.
bool trivial(std::int64_t rows, std::int64_t cols, int tokens, float* y, cudaStream_t s) {
    if (rows == 0 || tokens == 0) return true;
    if (cols == 0) {
        detail::check_cuda(cudaMemsetAsync(y, 0, static_cast<std::size_t>(rows) * static_cast<std::size_t>(tokens) * sizeof(float), s),
                   "matmul: cudaMemsetAsync");
        return true;
    }
    return false;
}

}  // namespace

void matmul_gemv(tensor::Type type, const void* W, std::int64_t rows, std::int64_t cols,
                 const float* x, int tokens, float* y, cudaStream_t s, GemvVariant variant) {
    const Shape shape = check_shape(type, W, rows, cols, tokens);
    if (tokens > kGemvMaxTokens) {
        throw InvalidArgument("matmul: the GEMV path takes at most " + std::to_string(kGemvMaxTokens) +
                              " tokens, got " + std::to_string(tokens));
    }
    if (trivial(rows, cols, tokens, y, s)) return;
    const auto* bytes = static_cast<const std::uint8_t*>(W);
    if (variant != GemvVariant::Reference && detail::gemv_vectorized_supports(type, W, cols, x)) {
        detail::launch_gemv_vectorized(type, bytes, shape.row_bytes, rows, cols, x, tokens, y, s);
    } else if (variant == GemvVariant::Vectorized) {
        throw InvalidArgument(std::string("matmul: no vectorised GEMV for ") + tensor::type_name(type) +
                              " with cols=" + std::to_string(cols));
    } else {
        detail::launch_gemv(type, bytes, shape.row_bytes, rows, cols, x, tokens, y, s);
    }
}

void matmul_gemm(tensor::Type type, const void* W, std::int64_t rows, std::int64_t cols,
                 const float* x, int tokens, float* y, MatmulWorkspace& ws, cudaStream_t s) {
    const Shape shape = check_shape(type, W, rows, cols, tokens);
    if (trivial(rows, cols, tokens, y, s)) return;
    gemm_checked(type, W, shape.row_bytes, rows, cols, x, tokens, y, ws, s);
}

void matmul(tensor::Type type, const void* W, std::int64_t rows, std::int64_t cols, const float* x,
            int tokens, float* y, MatmulWorkspace& ws, cudaStream_t s) {
    if (tokens <= kGemvMaxTokens) {
        matmul_gemv(type, W, rows, cols, x, tokens, y, s);
    } else {
        matmul_gemm(type, W, rows, cols, x, tokens, y, ws, s);
    }
}

}  // namespace tokenscope::cuda
