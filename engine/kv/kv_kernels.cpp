// The portable row kernels behind KvStorage and the runtime choice of the best table this CPU
// runs. Compiled for the baseline instruction set: the CPU check happens here, before anything
// in kv_kernels_avx2.cpp runs.
#include "kv/kv_kernels.h"

#include "kv/half_rows.h"

#include <algorithm>
#include <cmath>

#include "tensor/matmul.h"

#include "tensor/f16.h"
#include "util/cpu_features.h"

namespace tokenscope::kv::detail {

namespace {

void f32_to_f16(const float* in, std::uint16_t* out, int n) {
    for (int i = 0; i < n; ++i) out[i] = tensor::f32_to_f16(in[i]);
}

void f16_to_f32(const std::uint16_t* in, float* out, int n) {
    for (int i = 0; i < n; ++i) out[i] = tensor::f16_to_f32(in[i]);
}

void axpy_f32(const float* v, float w, float* acc, int n) {
    for (int i = 0; i < n; ++i) acc[i] += w * v[i];
}

void axpy_f16(const std::uint16_t* v, float w, float* acc, int n) {
    for (int i = 0; i < n; ++i) acc[i] += w * tensor::f16_to_f32(v[i]);
}

void axpy_q8(const std::int8_t* v, float w, float* acc, int n) {
    for (int i = 0; i < n; ++i) acc[i] += w * static_cast<float>(v[i]);
}

void q8_to_f32(const std::int8_t* in, float scale, float* out, int n) {
    for (int i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]) * scale;
}

void k_run_f16(const std::uint16_t* src, int stride, int len, int n, float* dst, int dst_stride) {
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < len; ++j)
            dst[i * dst_stride + j] = tensor::f16_to_f32(src[i * stride + j]);
    }
}

void k_run_q8(const std::int8_t* src, int stride, const float* scales, int len, int n, float* dst,
              int dst_stride) {
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < len; ++j)
            dst[i * dst_stride + j] = static_cast<float>(src[i * stride + j]) * scales[j];
    }
}

// The table contract's chain of fused multiply-adds (kv_kernels.h), written out: std::fma is
// the correctly rounded a * b + c that the SIMD tables' FMA instructions compute, so this
// table's scores equal theirs bit for bit. key(i, j): element i of key j as a float, the value a
// tile holds (tile_scores) or the one its conversion would have written (scores_f16/_q8).
template <class Key>
void scores_of(const float* q, int rows, int keys, int n, float scale, float* s,
               std::int64_t s_stride, Key key) {
    for (int r = 0; r < rows; ++r) {
        const float* qr = q + static_cast<std::int64_t>(r) * n;
        for (int j = 0; j < keys; ++j) {
            float acc = 0.0f;
            for (int i = 0; i < n; ++i) acc = std::fma(qr[i], key(i, j), acc);
            s[r * s_stride + j] = acc * scale;
        }
    }
}

void tile_scores(const float* q, int rows, const float* kt, int kt_stride, int keys, int n,
                 float scale, float* s, std::int64_t s_stride) {
    scores_of(q, rows, keys, n, scale, s, s_stride,
              [&](int i, int j) { return kt[i * kt_stride + j]; });
}

void scores_f16(const float* q, int rows, const std::uint16_t* kt, int kt_stride, int keys, int n,
                float scale, float* s, std::int64_t s_stride) {
    scores_of(q, rows, keys, n, scale, s, s_stride,
              [&](int i, int j) { return tensor::f16_to_f32(kt[i * kt_stride + j]); });
}

void scores_q8(const float* q, int rows, const std::int8_t* kt, int kt_stride,
               const float* key_scales, int keys, int n, float scale, float* s,
               std::int64_t s_stride) {
    scores_of(q, rows, keys, n, scale, s, s_stride, [&](int i, int j) {
        return static_cast<float>(kt[i * kt_stride + j]) * key_scales[j];
    });
}

// out_r += p * v over the keys in order, as axpy_f32 adds (a product, then a sum). value(j, i):
// element i of value row j as a float, the value a tile holds (tile_accumulate) or the one its
// conversion would have written (accumulate_f16/_q8), so all three give the same sums.
template <class Value>
void accumulate_of(const float* p, std::int64_t p_stride, int rows, int keys, int n, float* out,
                   Value value) {
    for (int r = 0; r < rows; ++r) {
        float* acc = out + static_cast<std::int64_t>(r) * n;
        for (int j = 0; j < keys; ++j) {
            const float w = p[r * p_stride + j];
            for (int i = 0; i < n; ++i) acc[i] += w * value(j, i);
        }
    }
}

void tile_accumulate(const float* p, std::int64_t p_stride, int rows, const float* const* v,
                     int keys, int n, float* out) {
    accumulate_of(p, p_stride, rows, keys, n, out, [&](int j, int i) { return v[j][i]; });
}

void accumulate_f16(const float* p, std::int64_t p_stride, int rows, const std::uint16_t* v,
                    std::int64_t v_stride, int keys, int n, float* out) {
    accumulate_of(p, p_stride, rows, keys, n, out,
                  [&](int j, int i) { return tensor::f16_to_f32(v[j * v_stride + i]); });
}

void accumulate_q8(const float* p, std::int64_t p_stride, int rows, const std::int8_t* v,
                   std::int64_t v_stride, const float* v_scales, int keys, int n, float* out) {
    accumulate_of(p, p_stride, rows, keys, n, out, [&](int j, int i) {
        return static_cast<float>(v[j * v_stride + i]) * v_scales[j];
    });
}

constexpr Kernels kScalar{"scalar",   f32_to_f16, f16_to_f32,      axpy_f32,       axpy_f16,
                          axpy_q8,    q8_to_f32,  k_run_f16,       k_run_q8,       tile_scores,
                          scores_f16, scores_q8,  tile_accumulate, accumulate_f16, accumulate_q8};

const Kernels& choose_best() {
#if defined(TOKENSCOPE_KV_AVX2)
    // Called here, in a file built for the baseline instruction set, never in the AVX2 file.
    const cpu::X86Features& f = cpu::x86_features();
    if (f.avx2 && f.fma && f.f16c) {
        return avx2_kernel_table();
    }
#endif
    return kScalar;
}

}  // namespace

const Kernels& scalar_kernels() {
    return kScalar;
}

const Kernels& best_kernels() {
    static const Kernels& best = choose_best();
#if defined(TOKENSCOPE_KV_AVX2)
    static const Kernels avx512 = [] {
        Kernels k = avx2_kernel_table();
        k.name = "avx512+avx2+fma+f16c";
        k.tile_scores = tile_scores_avx512;
        k.tile_accumulate = tile_accumulate_avx512;
        k.f16_to_f32 = f16_to_f32_avx512;
        k.k_run_f16 = k_run_f16_avx512;
        return k;
    }();
    const cpu::X86Features& f = cpu::x86_features();
    if (&best != &kScalar && f.avx512f && f.avx512bw && f.avx512vl &&
        tensor::active_simd_level() == tensor::SimdLevel::Avx512) {
        return avx512;
    }
#endif
    return best;
}

}  // namespace tokenscope::kv::detail

namespace tokenscope::kv {

namespace {
// The kernels take an int count: long rows go in pieces.
template <class In, class Out>
void convert_in_pieces(void (*kernel)(const In*, Out*, int), std::span<const In> in, Out* out) {
    constexpr std::size_t kPiece = std::size_t{1} << 30;
    for (std::size_t i = 0; i < in.size(); i += kPiece)
        kernel(in.data() + i, out + i, static_cast<int>(std::min(kPiece, in.size() - i)));
}
}  // namespace

void floats_to_halves(std::span<const float> in, std::uint16_t* out) {
    convert_in_pieces(detail::best_kernels().f32_to_f16, in, out);
}

void halves_to_floats(std::span<const std::uint16_t> in, float* out) {
    convert_in_pieces(detail::best_kernels().f16_to_f32, in, out);
}

}  // namespace tokenscope::kv
