#pragma once
// The row kernels behind ops:: (cpu_ops.h), internal to engine/runtime: one table per
// instruction set, chosen per call from tensor::active_simd_level(), so TOKENSCOPE_SIMD=scalar
// (or a test's set_simd_level) selects the portable table.
//
// Deliberately includes no standard library header but <cstdint>: cpu_ops_avx2.cpp holds
// AVX2+FMA functions, and an inline library function instantiated for them could become the
// copy the linker keeps for the whole program.
#include <cstdint>

namespace tokenscope::runtime::ops::detail {

struct OpKernels {
    const char* name;
    // out[i] = exp(x[i]) for x[i] <= 0 (the only range the ops need). Exposed for the tests.
    void (*exp_nonpositive)(const float* x, float* out, std::int64_t n);
    void (*rms_norm)(const float* x, const float* weight, float* out, std::int64_t n, float eps);
    void (*silu_mul)(float* gate, const float* up, std::int64_t n);
    void (*gelu_tanh_mul)(float* gate, const float* up, std::int64_t n);
    float (*softmax)(float* x, std::int64_t n);  // n >= 1; returns the maximum
};

// Portable C++ with std::exp (cpu_ops.cpp): the reference the other table is tested against.
const OpKernels& portable_op_kernels();
// AVX2+FMA (cpu_ops_avx2.cpp), or null when this build or CPU has none.
const OpKernels* avx2_op_kernels();
// The AVX2 table with an AVX-512 softmax (cpu_ops_avx512.cpp), or null without AVX-512 F.
const OpKernels* avx512_op_kernels();
// The table ops:: uses now.
const OpKernels& active_op_kernels();

}  // namespace tokenscope::runtime::ops::detail
