#pragma once
// Matrix products with weights in their GGUF format on the GPU: y[t][r] = W[r] . x[t].
//
// Host-only interface: plain C++ can include this header (no CUDA headers; the CUDA handle types
// are forward-declared exactly as cuda_runtime.h / cublas_api.h declare them).
//
//  tokens <= kGemvMaxTokens: one fused kernel that dequantizes inside the dot products (f32
//    accumulation, one warp per output row).
//  tokens > kGemvMaxTokens: W is dequantized tile by tile (at most max_tile_rows rows at a time)
//    into 16-bit floats in the workspace, x is converted to the same type, and cuBLAS multiplies
//    them with f32 accumulation and f32 output. F32 weights go straight to cublasSgemm.
#include <cstddef>
#include <cstdint>

#include "tensor/type.h"

struct CUstream_st;
using cudaStream_t = CUstream_st*;
struct cublasContext;
using cublasHandle_t = cublasContext*;

namespace tokenscope::cuda {

inline constexpr int kGemvMaxTokens = 8;

// The 16-bit type W and x are rounded to on the cuBLAS path (tokens > kGemvMaxTokens).
// F16 keeps 11 significant bits but overflows above 65504; BF16 keeps the f32 range with 8.
enum class GemmPrecision { F16, BF16 };

// Scratch and cuBLAS handle for matmul(). Use one per stream (or per thread); not thread-safe.
// The cuBLAS handle is created on first use, on the device current at that time.
struct MatmulWorkspace {
    MatmulWorkspace() = default;
    ~MatmulWorkspace();
    MatmulWorkspace(const MatmulWorkspace&) = delete;
    MatmulWorkspace& operator=(const MatmulWorkspace&) = delete;

    // Created lazily; throws tokenscope::Error when cublasCreate fails.
    cublasHandle_t cublas();

    // A device buffer of at least `bytes` bytes, 256-byte aligned. Growing frees the old buffer
    // (cudaFree waits for the device), so pointers from an earlier call become invalid.
    void* scratch(std::size_t bytes);
    std::size_t scratch_capacity() const { return scratch_bytes_; }

    GemmPrecision precision = GemmPrecision::F16;
    // Rows of W dequantized per cuBLAS call; bounds the scratch at max_tile_rows * cols * 2 bytes
    // (plus tokens * cols * 2 for x).
    std::int64_t max_tile_rows = 4096;

  private:
    cublasHandle_t handle_ = nullptr;
    void* scratch_ = nullptr;
    std::size_t scratch_bytes_ = 0;
};

// y[t * rows + r] = sum_c W[r][c] * x[t * cols + c] for t < tokens, r < rows.
// All pointers are device pointers. Row r of W starts at W + r * tensor::row_bytes(type, cols).
// For F32 weights W must be 4-byte aligned, for F16/BF16 2-byte aligned; quantized blocks may
// sit at any address. x and y must not overlap. Work is queued on `s` (asynchronous).
// Throws tokenscope::InvalidArgument for bad shapes, tokenscope::Error for CUDA/cuBLAS failures.
void matmul(tensor::Type type, const void* W, std::int64_t rows, std::int64_t cols, const float* x,
            int tokens, float* y, MatmulWorkspace& ws, cudaStream_t s);

// The GEMV kernels: Best takes the vectorised one where the type and alignments allow it
// (F16, Q8_0, Q4_K; matmul_gemv_vec.cu), else the reference; the other two force one (the
// self-test and the kernel lab compare them; Vectorized throws where it does not apply).
enum class GemvVariant { Best, Reference, Vectorized };

// The two paths on their own, for tests and benchmarks (matmul() picks by `tokens`).
// gemv: tokens in 1..kGemvMaxTokens.
void matmul_gemv(tensor::Type type, const void* W, std::int64_t rows, std::int64_t cols,
                 const float* x, int tokens, float* y, cudaStream_t s,
                 GemvVariant variant = GemvVariant::Best);
void matmul_gemm(tensor::Type type, const void* W, std::int64_t rows, std::int64_t cols,
                 const float* x, int tokens, float* y, MatmulWorkspace& ws, cudaStream_t s);

// Fused decode GEMVs (one token, one launch; F16, Q8_0, Q4_K with the vectorised GEMV's
// alignments: gemv_fused_supports). Why: at batch 1 the q/k/v and gate/up products are small
// launches each paying a fixed cost (the first H200 run measured a ~8.5 us floor per GEMV);
// fusing them removes three launches per layer and lets gate and up rows stream together.
enum class GateActivation { SiLU, GeluTanh };

// Whether the fused kernels take weights W of `type` with `cols` columns and activation x.
bool gemv_fused_supports(tensor::Type type, const void* W, std::int64_t cols, const float* x);

// y[r] = act(W_gate[r] . x) * (W_up[r] . x) for r < rows (matmul_gemv_gate_up.cu); act as
// ops::silu_mul / ops::gelu_tanh_mul compute it. One warp per r reads both rows.
void matmul_gemv_gate_up(tensor::Type type, const void* W_gate, const void* W_up, std::int64_t rows, std::int64_t cols,
                         const float* x, GateActivation act, float* y, cudaStream_t s);

// q = Wq x, k = Wk x, v = Wv x in one launch (matmul_gemv_qkv.cu): one warp per row of the
// three matrices stacked (rows_q + rows_k + rows_v warps). All three of `type`, `cols` wide.
void matmul_gemv_qkv(tensor::Type type, const void* Wq, std::int64_t rows_q, const void* Wk, std::int64_t rows_k,
                     const void* Wv, std::int64_t rows_v, std::int64_t cols, const float* x, float* q, float* k,
                     float* v, cudaStream_t s);

// Int8 GEMV for decode (opt-in, not yet measured; matmul_gemv_int8_*.cu): the activation vector
// is quantized once to int8 in 32-element blocks with one f32 scale each (quantize_x8), and the
// Q8_0 / Q4_K weights are multiplied with __dp4a (four int8 products per instruction) instead of
// being converted to float element by element. Why: the first H200 run had Q4_K GEMVs at
// 538 GB/s and Q8_0 at 1.2 TB/s against 2.2 TB/s for F16, i.e. limited by the per-element
// conversion work, not by memory. The price is 8-bit activations (as the CPU backend's
// quantized dot products): about 0.5 % relative error per product.
//
// The quantized vector lives in one buffer of quantized_x_bytes(cols): cols int8 values, then
// cols / 32 f32 scales at byte offset quantized_x_scales_offset(cols). cols % 32 == 0.
std::size_t quantized_x_bytes(std::int64_t cols);
std::size_t quantized_x_scales_offset(std::int64_t cols);
// q[i] = round(x[i] / d_b) with d_b = max |x| over block b / 127 (0 for an all-zero block; IEEE
// division and round-half-away, so the host can repeat it bit for bit: the self-test does).
void quantize_x8(const float* x, std::int64_t cols, void* xq, cudaStream_t s);
// Q8_0 (cols % 32 == 0, W 2-byte aligned) and Q4_K (cols % 256 == 0, W 16-byte aligned).
bool gemv_int8_supports(tensor::Type type, const void* W, std::int64_t cols);
// y[r] = W[r] . dequantized(xq) for one token, f32 result from exact int32 block sums.
void matmul_gemv_int8(tensor::Type type, const void* W, std::int64_t rows, std::int64_t cols, const void* xq, float* y,
                      cudaStream_t s);

}  // namespace tokenscope::cuda
