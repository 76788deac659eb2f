#pragma once
// The machine's arithmetic ceilings, measured: independent chains of one instruction in the
// registers the matrix kernels use at the active SIMD level (tensor::active_simd_level, so a
// forced AVX2 dispatch gets the AVX2 ceilings), on `threads` threads at once. The bench reports
// prefill speed as a fraction of them: f32 fused multiply-adds for the products whose
// activations stay f32 (F32/F16/BF16 weights), int8 dot products for the quantized types,
// whose activations are quantized to int8 (tensor::prefill_uses_int8_products).
namespace tokenscope::inspect {

struct ComputePeak {
    double gflops = 0.0;  // all threads together, in G operations per second (a multiply-add
                          // counts as 2, for f32 and for a product of two bytes alike)
    const char* isa = "scalar";
};

// AVX-512 vfmadd on zmm, AVX2 vfmadd on ymm, or scalar float multiply-adds.
ComputePeak measure_f32_peak(int threads, double seconds = 0.3);

// AVX-512 VNNI vpdpbusd on zmm (64 byte products each), AVX-VNNI vpdpbusd on ymm where the AVX2
// kernels use it (32), AVX2 vpmaddubsw (32 byte products, added in pairs to int16), or scalar
// 32-bit integer multiply-adds. The int8 kernels also scale each block's integer sums in
// floating point; on Zen 4 those multiplies share the two pipes vpdpbusd issues to, so a
// kernel's attainable fraction of this ceiling depends on its type (docs/benchmarks.md).
ComputePeak measure_int8_peak(int threads, double seconds = 0.3);

}  // namespace tokenscope::inspect
