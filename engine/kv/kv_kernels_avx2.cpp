// AVX2 + FMA + F16C row kernels for KvStorage. This file alone is compiled with
// -mavx2 -mfma -mf16c (engine/kv/CMakeLists.txt); kv_kernels.cpp hands it out only after
// cpu::x86_features() said yes. No standard library includes here (see kv_kernels.h).
#include <immintrin.h>

#include "kv/kv_kernels.h"
#include "kv/score_keys.h"
#include "kv/tile_row_groups.h"

namespace tokenscope::kv::detail {

namespace {

__m256 load_f16(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

__m256 load_q8(const std::int8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

float half_to_float(std::uint16_t h) {
    return _cvtsh_ss(h);
}

void f32_to_f16(const float* in, std::uint16_t* out, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        // Round to nearest even, like tensor::f32_to_f16, so both paths store the same bits.
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    }
    for (; i < n; ++i) {
        out[i] = static_cast<std::uint16_t>(_cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT));
    }
}

void f16_to_f32(const std::uint16_t* in, float* out, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, load_f16(in + i));
    for (; i < n; ++i) out[i] = half_to_float(in[i]);
}

void axpy_f32(const float* v, float w, float* acc, int n) {
    const __m256 wv = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(acc + i,
                         _mm256_fmadd_ps(wv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(acc + i)));
    }
    for (; i < n; ++i) acc[i] += w * v[i];
}

void axpy_f16(const std::uint16_t* v, float w, float* acc, int n) {
    const __m256 wv = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, load_f16(v + i), _mm256_loadu_ps(acc + i)));
    }
    for (; i < n; ++i) acc[i] += w * half_to_float(v[i]);
}

void axpy_q8(const std::int8_t* v, float w, float* acc, int n) {
    const __m256 wv = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, load_q8(v + i), _mm256_loadu_ps(acc + i)));
    }
    for (; i < n; ++i) acc[i] += w * static_cast<float>(v[i]);
}

void q8_to_f32(const std::int8_t* in, float scale, float* out, int n) {
    const __m256 s = _mm256_set1_ps(scale);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(load_q8(in + i), s));
    for (; i < n; ++i) out[i] = static_cast<float>(in[i]) * scale;
}

// Lanes [0, m) set, m in 1..8: loads and stores of the last, partial vector of a row, so that
// rows of any length run the same vector arithmetic (the missing lanes read as zeros).
__m256i lanes(int m) {
    static const int bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + 8 - m));
}

void k_run_f16(const std::uint16_t* src, int stride, int len, int n, float* dst, int dst_stride) {
    for (int i = 0; i < n; ++i) {
        const std::uint16_t* x = src + i * stride;
        float* y = dst + i * dst_stride;
        int j = 0;
        for (; j + 8 <= len; j += 8) _mm256_storeu_ps(y + j, load_f16(x + j));
        for (; j < len; ++j) y[j] = half_to_float(x[j]);
    }
}

void k_run_q8(const std::int8_t* src, int stride, const float* scales, int len, int n, float* dst,
              int dst_stride) {
    for (int i = 0; i < n; ++i) {
        const std::int8_t* x = src + i * stride;
        float* y = dst + i * dst_stride;
        int j = 0;
        for (; j + 8 <= len; j += 8)
            _mm256_storeu_ps(y + j, _mm256_mul_ps(load_q8(x + j), _mm256_loadu_ps(scales + j)));
        for (; j < len; ++j) y[j] = static_cast<float>(x[j]) * scales[j];
    }
}

// 8-lane vectors for score_keys.h: 6 rows x 16 keys per pass (12 accumulators, two key vectors
// and a broadcast fill 15 of the 16 registers).
struct Lanes8 {
    using Vec = __m256;
    using Key = float;
    static constexpr bool kScaledKeys = false;
    static constexpr int kLanes = 8;
    static constexpr int kRows = 6;
    static Vec zero() { return _mm256_setzero_ps(); }
    static Vec set1(float x) { return _mm256_set1_ps(x); }
    static Vec load(const float* p) { return _mm256_loadu_ps(p); }
    static Vec broadcast(const float* p) { return _mm256_broadcast_ss(p); }
    static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
    static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
    static void store(float* p, Vec x, int cols) {
        if (cols == kLanes) {
            _mm256_storeu_ps(p, x);
        } else {
            _mm256_maskstore_ps(p, lanes(cols), x);
        }
    }
};

// Lanes8 reading the keys straight from an F16 cache (one conversion per element and 8 keys).
struct Lanes8F16 : Lanes8 {
    using Key = std::uint16_t;
    static Vec load(const std::uint16_t* p) { return load_f16(p); }
};

// Lanes8 reading a Q8 cache's codes (8 keys' int8 per load), times the keys' scales.
struct Lanes8Q8 : Lanes8 {
    using Key = std::int8_t;
    static constexpr bool kScaledKeys = true;
    static Vec load(const std::int8_t* p) { return load_q8(p); }
    static Vec load_scales(const float* p) { return _mm256_loadu_ps(p); }
};

void tile_scores(const float* q, int rows, const float* kt, int kt_stride, int keys, int n,
                 float scale, float* s, std::int64_t s_stride) {
    scores_in_lanes<Lanes8>(q, rows, kt, kt_stride, keys, n, scale, s, s_stride);
}

void scores_q8(const float* q, int rows, const std::int8_t* kt, int kt_stride,
               const float* key_scales, int keys, int n, float scale, float* s,
               std::int64_t s_stride) {
    scores_in_lanes<Lanes8Q8>(q, rows, kt, kt_stride, keys, n, scale, s, s_stride, key_scales);
}

void scores_f16(const float* q, int rows, const std::uint16_t* kt, int kt_stride, int keys, int n,
                float scale, float* s, std::int64_t s_stride) {
    scores_in_lanes<Lanes8F16>(q, rows, kt, kt_stride, keys, n, scale, s, s_stride);
}

// Where accumulate_rows finds value row j: converted float rows (a tile's pointers) or F16 rows
// read where the cache stores them, row j at base + j * stride.
struct FloatRows {
    const float* const* v;
    __m256 load(int j, int i) const { return _mm256_loadu_ps(v[j] + i); }
    // Columns [i, i + m), m < 8 (mask = lanes(m)), the other lanes zero.
    __m256 load_part(int j, int i, int, __m256i mask) const {
        return _mm256_maskload_ps(v[j] + i, mask);
    }
};

// The first m < 8 elements of a row, then zeros: a whole vector's worth the loads can read.
template <class T>
struct PaddedPart {
    PaddedPart(const T* row, int m) {
        for (int c = 0; c < m; ++c) values[c] = row[c];
    }
    alignas(16) T values[8] = {};
};

struct F16Rows {
    const std::uint16_t* base;
    std::int64_t stride;
    __m256 load(int j, int i) const { return load_f16(base + j * stride + i); }
    // F16C has no masked load: the m < 8 columns go through a zero-padded copy.
    __m256 load_part(int j, int i, int m, __m256i) const {
        return load_f16(PaddedPart<std::uint16_t>(base + j * stride + i, m).values);
    }
};

// Q8 rows: codes times the row's scale (the product q8_to_f32 writes into a tile).
struct Q8Rows {
    const std::int8_t* base;
    std::int64_t stride;
    const float* scales;
    __m256 load(int j, int i) const {
        return _mm256_mul_ps(load_q8(base + j * stride + i), _mm256_set1_ps(scales[j]));
    }
    __m256 load_part(int j, int i, int m, __m256i) const {
        return _mm256_mul_ps(load_q8(PaddedPart<std::int8_t>(base + j * stride + i, m).values),
                             _mm256_set1_ps(scales[j]));
    }
};

// R output rows: 16 columns at a time in registers over all keys, then the rest 8 at a time
// (the last vector masked). Each element is acc = fma(p, v, acc) over the keys in order, whichever
// Rows supplies v.
template <int R, class Rows>
void accumulate_rows(const float* p, std::int64_t p_stride, const Rows& v, int keys, int n,
                     float* out) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a0[R], a1[R];
        for (int r = 0; r < R; ++r) {
            a0[r] = _mm256_loadu_ps(out + r * n + i);
            a1[r] = _mm256_loadu_ps(out + r * n + i + 8);
        }
        for (int j = 0; j < keys; ++j) {
            const __m256 x0 = v.load(j, i);
            const __m256 x1 = v.load(j, i + 8);
            for (int r = 0; r < R; ++r) {
                const __m256 w = _mm256_broadcast_ss(p + r * p_stride + j);
                a0[r] = _mm256_fmadd_ps(w, x0, a0[r]);
                a1[r] = _mm256_fmadd_ps(w, x1, a1[r]);
            }
        }
        for (int r = 0; r < R; ++r) {
            _mm256_storeu_ps(out + r * n + i, a0[r]);
            _mm256_storeu_ps(out + r * n + i + 8, a1[r]);
        }
    }
    for (; i < n; i += 8) {
        const int m = n - i < 8 ? n - i : 8;
        const __m256i mask = lanes(m);
        __m256 a[R];
        for (int r = 0; r < R; ++r) a[r] = _mm256_maskload_ps(out + r * n + i, mask);
        for (int j = 0; j < keys; ++j) {
            const __m256 x = m == 8 ? v.load(j, i) : v.load_part(j, i, m, mask);
            for (int r = 0; r < R; ++r) {
                a[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(p + r * p_stride + j), x, a[r]);
            }
        }
        for (int r = 0; r < R; ++r) _mm256_maskstore_ps(out + r * n + i, mask, a[r]);
    }
}

// Rows per accumulate pass: 12 accumulators, two value vectors and a broadcast fill 15 of the
// 16 registers (4 rows: 2-3 % slower at 512 tokens, 246M's and SmolLM2's layer shapes).
constexpr int kAccumulateRows = 6;

template <class Rows>
void accumulate_row_groups(const float* p, std::int64_t p_stride, int rows, const Rows& v, int keys,
                           int n, float* out) {
    for_row_groups<kAccumulateRows>(rows, [&](int r, auto count) {
        accumulate_rows<decltype(count)::value>(p + r * p_stride, p_stride, v, keys, n,
                                                out + static_cast<std::int64_t>(r) * n);
    });
}

void tile_accumulate(const float* p, std::int64_t p_stride, int rows, const float* const* v,
                     int keys, int n, float* out) {
    accumulate_row_groups(p, p_stride, rows, FloatRows{v}, keys, n, out);
}

void accumulate_f16(const float* p, std::int64_t p_stride, int rows, const std::uint16_t* v,
                    std::int64_t v_stride, int keys, int n, float* out) {
    accumulate_row_groups(p, p_stride, rows, F16Rows{v, v_stride}, keys, n, out);
}

void accumulate_q8(const float* p, std::int64_t p_stride, int rows, const std::int8_t* v,
                   std::int64_t v_stride, const float* v_scales, int keys, int n, float* out) {
    accumulate_row_groups(p, p_stride, rows, Q8Rows{v, v_stride, v_scales}, keys, n, out);
}

constexpr Kernels kAvx2{"avx2+fma+f16c", f32_to_f16,     f16_to_f32,   axpy_f32,
                        axpy_f16,        axpy_q8,        q8_to_f32,    k_run_f16,
                        k_run_q8,        tile_scores,    scores_f16,   scores_q8,
                        tile_accumulate, accumulate_f16, accumulate_q8};

}  // namespace

// Only hands out the table: the CPU check lives in kv_kernels.cpp, which is compiled for the
// baseline instruction set.
const Kernels& avx2_kernel_table() {
    return kAvx2;
}

}  // namespace tokenscope::kv::detail
