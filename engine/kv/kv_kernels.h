#pragma once
// Row kernels behind KvStorage, internal to engine/kv. One table per instruction set, chosen
// once at runtime; rows are one head's head_dim values.
//
// Deliberately includes no standard library header: kv_kernels_avx2.cpp is compiled with
// -mavx2 -mfma -mf16c, and any inline library function instantiated there could be the copy
// the linker keeps for the whole program, putting AVX2 instructions on paths that run on
// CPUs without it.
#include <cstdint>

namespace tokenscope::kv::detail {

struct Kernels {
    const char* name;
    void (*f32_to_f16)(const float* in, std::uint16_t* out, int n);
    void (*f16_to_f32)(const std::uint16_t* in, float* out, int n);
    void (*axpy_f32)(const float* v, float w, float* acc, int n);
    void (*axpy_f16)(const std::uint16_t* v, float w, float* acc, int n);
    void (*axpy_q8)(const std::int8_t* v, float w, float* acc, int n);  // w includes the scale
    void (*q8_to_f32)(const std::int8_t* in, float scale, float* out, int n);  // out = in * scale

    // K is stored transposed inside a block (KvStorage): element i of the block's slot o sits
    // at i * stride + o, stride = block size. These convert `len` consecutive slots of one
    // block, all n elements, into a transposed float tile: dst[i * dst_stride + j] for i < n,
    // j < len, with the values read_k gives (the F16 conversion is exact; Q8 is the float
    // product code * scales[j]).
    void (*k_run_f16)(const std::uint16_t* src, int stride, int len, int n, float* dst,
                      int dst_stride);
    void (*k_run_q8)(const std::int8_t* src, int stride, const float* scales, int len, int n,
                     float* dst, int dst_stride);

    // Blocked attention over a tile of keys (KvStorage::tile_scores / tile_accumulate). The
    // result for one (row, key) pair, or one output element, must not depend on how many rows
    // or keys the call has: decode (one query) and prefill (a block of queries) then agree bit
    // for bit.
    // s[r * s_stride + j] = scale * (q_r . k_j) for r < rows, j < keys, q_r = q + r * n, where
    // k_j is column j of the transposed tile kt (element i at kt[i * kt_stride + j]). Every
    // table computes the dot product as one chain of fused multiply-adds over i in ascending
    // order, starting from +0, and then one multiplication by the scale: the scores of all
    // tables agree bit for bit, and the SIMD ones keep keys in the lanes (no horizontal sums).
    void (*tile_scores)(const float* q, int rows, const float* kt, int kt_stride, int keys, int n,
                        float scale, float* s, std::int64_t s_stride);
    // tile_scores with the keys read where an F16 cache stores them (kt: the run's element 0,
    // element i of key j at kt[i * kt_stride + j]), converted on the fly: the same scores bit for
    // bit, without writing and reading back a float tile (decode, where a tile serves one query
    // row group, spent more time converting than scoring). SIMD tables load whole vectors of
    // keys: kt[i * kt_stride + j] must be readable for j up to `keys` rounded up to the
    // vector's lanes (KvStorage keeps V after K for that); the extra lanes are never stored.
    void (*scores_f16)(const float* q, int rows, const std::uint16_t* kt, int kt_stride, int keys,
                       int n, float scale, float* s, std::int64_t s_stride);
    // The same from a Q8 cache: element i of key j is float(kt[i * kt_stride + j]) *
    // key_scales[j], rounded, as k_run_q8 writes it into a tile (key_scales read as far as kt).
    void (*scores_q8)(const float* q, int rows, const std::int8_t* kt, int kt_stride,
                      const float* key_scales, int keys, int n, float scale, float* s,
                      std::int64_t s_stride);
    // out_r += sum over j < keys, in ascending j, of p[r * p_stride + j] * v[j];
    // out_r = out + r * n.
    void (*tile_accumulate)(const float* p, std::int64_t p_stride, int rows, const float* const* v,
                            int keys, int n, float* out);
    // tile_accumulate with value row j read from an F16 cache at v + j * v_stride (n elements),
    // converted on the fly: the same sums bit for bit as this table's tile_accumulate.
    void (*accumulate_f16)(const float* p, std::int64_t p_stride, int rows, const std::uint16_t* v,
                           std::int64_t v_stride, int keys, int n, float* out);
    // The same from a Q8 cache: value row j is float(code) * v_scales[j], as q8_to_f32 gives it.
    void (*accumulate_q8)(const float* p, std::int64_t p_stride, int rows, const std::int8_t* v,
                          std::int64_t v_stride, const float* v_scales, int keys, int n,
                          float* out);
};

// Portable C++ (kv_kernels.cpp).
const Kernels& scalar_kernels();
// The best table this CPU runs at the matmul kernels' active level (tensor::active_simd_level):
// AVX-512 tiles only there, so TOKENSCOPE_SIMD=avx2 runs the whole AVX2 path (kv_kernels.cpp).
const Kernels& best_kernels();

#if defined(TOKENSCOPE_KV_AVX2)
// AVX2 + FMA + F16C (kv_kernels_avx2.cpp, built on x86-64 with GCC or Clang only). Callers
// must check the CPU first.
const Kernels& avx2_kernel_table();
// The blocked-attention kernels and F16 conversions for AVX-512 F/BW/VL (kv_kernels_avx512.cpp);
// the AVX-512 table is the AVX2 one with these. Callers must check the CPU first.
void tile_scores_avx512(const float* q, int rows, const float* kt, int kt_stride, int keys, int n,
                        float scale, float* s, std::int64_t s_stride);
void tile_accumulate_avx512(const float* p, std::int64_t p_stride, int rows, const float* const* v,
                            int keys, int n, float* out);
// Sixteen-lane forms of the AVX2 table's F16 conversions (exact, so the same values).
void f16_to_f32_avx512(const std::uint16_t* in, float* out, int n);
void k_run_f16_avx512(const std::uint16_t* src, int stride, int len, int n, float* dst,
                      int dst_stride);
#endif

}  // namespace tokenscope::kv::detail
