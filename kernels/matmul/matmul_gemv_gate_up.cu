// Fused gate + up + activation GEMV for decode (see matmul.cuh): y[r] = act(W_gate[r] . x) *
// (W_up[r] . x). One warp per output row r walks row r of both matrices in the same loop
// (gemv_row_dot.cuh, N = 2), so both rows' loads are in flight together and x is loaded once;
// lane 0 applies the activation. Replaces two GEMV launches and the silu_mul launch, and the
// write + re-read of the up vector.
#include <string>

#include "matmul/gemv_row_dot.cuh"
#include "matmul/matmul.cuh"
#include "matmul/matmul_internal.h"

namespace tokenscope::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

// The same expressions as ops/activation.cu (silu_mul_kernel, gelu_tanh_mul_kernel).
template <GateActivation Act>
__device__ __forceinline__ float activate_mul(float g, float u) {
    if constexpr (Act == GateActivation::SiLU) {
        return g / (1.0f + expf(-g)) * u;
    } else {
        constexpr float kSqrt2OverPi = 0.7978845608028654f;
        const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
        return 0.5f * g * (1.0f + tanhf(inner)) * u;
    }
}

template <tensor::Type T, GateActivation Act>
__global__ void __launch_bounds__(kThreads)
    gemv_gate_up_kernel(const std::uint8_t* __restrict__ W_gate, const std::uint8_t* __restrict__ W_up,
                        std::size_t row_bytes, std::int64_t rows, std::int64_t cols, const float* __restrict__ x,
                        float* __restrict__ y) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (r >= rows) return;  // uniform across the warp
    const std::uint8_t* const pair[2] = {W_gate + static_cast<std::size_t>(r) * row_bytes,
                                         W_up + static_cast<std::size_t>(r) * row_bytes};
    float acc[2] = {0.0f, 0.0f};
    detail::rowdot::rows_dot<T, 2>(pair, cols, x, lane, acc);
    const float g = detail::rowdot::warp_total(acc[0]);
    const float u = detail::rowdot::warp_total(acc[1]);
    if (lane == 0) y[r] = activate_mul<Act>(g, u);
}

template <tensor::Type T>
void launch(GateActivation act, const std::uint8_t* Wg, const std::uint8_t* Wu, std::size_t row_bytes,
            std::int64_t rows, std::int64_t cols, const float* x, float* y, cudaStream_t s) {
    const auto blocks = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
    if (act == GateActivation::SiLU) {
        gemv_gate_up_kernel<T, GateActivation::SiLU><<<blocks, kThreads, 0, s>>>(Wg, Wu, row_bytes, rows, cols, x, y);
    } else {
        gemv_gate_up_kernel<T, GateActivation::GeluTanh><<<blocks, kThreads, 0, s>>>(Wg, Wu, row_bytes, rows, cols, x, y);
    }
}

}  // namespace

bool gemv_fused_supports(tensor::Type type, const void* W, std::int64_t cols, const float* x) {
    return detail::gemv_vectorized_supports(type, W, cols, x);
}

void matmul_gemv_gate_up(tensor::Type type, const void* W_gate, const void* W_up, std::int64_t rows, std::int64_t cols,
                         const float* x, GateActivation act, float* y, cudaStream_t s) {
    if (!gemv_fused_supports(type, W_gate, cols, x) || !gemv_fused_supports(type, W_up, cols, x)) {
        throw InvalidArgument(std::string("matmul: no fused gate/up GEMV for ") + tensor::type_name(type) +
                              " with cols=" + std::to_string(cols) + " at these alignments");
    }
    if (rows <= 0) return;
    const auto* Wg = static_cast<const std::uint8_t*>(W_gate);
    const auto* Wu = static_cast<const std::uint8_t*>(W_up);
    const std::size_t row_bytes = tensor::row_bytes(type, cols);
    switch (type) {
        case tensor::Type::F16: launch<tensor::Type::F16>(act, Wg, Wu, row_bytes, rows, cols, x, y, s); break;
        case tensor::Type::Q8_0: launch<tensor::Type::Q8_0>(act, Wg, Wu, row_bytes, rows, cols, x, y, s); break;
        default: launch<tensor::Type::Q4_K>(act, Wg, Wu, row_bytes, rows, cols, x, y, s); break;
    }
    detail::check_cuda(cudaGetLastError(), std::string("matmul: fused gate/up GEMV launch for ") + tensor::type_name(type));
}

}  // namespace tokenscope::cuda
