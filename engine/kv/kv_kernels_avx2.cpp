// AVX2 + FMA + F16C row kernels for KvStorage. This file alone is compiled with
// -mavx2 -mfma -mf16c (engine/kv/CMakeLists.txt); kv_kernels.cpp hands it out only after
// cpu::x86_features() said yes. No standard library includes here (see kv_kernels.h).
#include <immintrin.h>

#include "kv/kv_kernels.h"
#include "kv/tile_row_groups.h"

namespace tokenscope::kv::detail {

namespace {

float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 shuf = _mm_movehdup_ps(s);
    s = _mm_add_ps(s, shuf);
    shuf = _mm_movehl_ps(shuf, s);
    return _mm_cvtss_f32(_mm_add_ss(s, shuf));
}

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

float dot_f32(const float* k, const float* q, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), _mm256_loadu_ps(q + i), acc);
    float sum = hsum(acc);
    for (; i < n; ++i) sum += k[i] * q[i];
    return sum;
}

float dot_f16(const std::uint16_t* k, const float* q, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(load_f16(k + i), _mm256_loadu_ps(q + i), acc);
    float sum = hsum(acc);
    for (; i < n; ++i) sum += half_to_float(k[i]) * q[i];
    return sum;
}

float dot_q8(const std::int8_t* k, const float* q, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(load_q8(k + i), _mm256_loadu_ps(q + i), acc);
    float sum = hsum(acc);
    for (; i < n; ++i) sum += static_cast<float>(k[i]) * q[i];
    return sum;
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

// Lane i of the result is the sum of the lanes of a[i], always added as
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)): a pair's score does not depend on the
// other pairs that share the call.
__m256 sum8(const __m256* a) {
    const __m256 t0 = _mm256_hadd_ps(a[0], a[1]);
    const __m256 t1 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 t2 = _mm256_hadd_ps(a[4], a[5]);
    const __m256 t3 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 u0 = _mm256_hadd_ps(t0, t1);  // sums of 4: a0..a3 low halves | high halves
    const __m256 u1 = _mm256_hadd_ps(t2, t3);  // the same for a4..a7
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

// R query rows against K keys (R * K = 8): every pair keeps its own 8-lane accumulator over
// the row (one FMA per 8 elements, in index order), then sum8. Returns the 8 scores, pair
// (r, j) in lane r * K + j.
template <int R, int K>
__m256 score_block(const float* q, int n, const float* const* k) {
    __m256 acc[8];
    for (int a = 0; a < 8; ++a) acc[a] = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int r = 0; r < R; ++r) {
            const __m256 qv = _mm256_loadu_ps(q + r * n + i);
            for (int j = 0; j < K; ++j) {
                acc[r * K + j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[j] + i), acc[r * K + j]);
            }
        }
    }
    if (i < n) {
        const __m256i m = lanes(n - i);
        for (int r = 0; r < R; ++r) {
            const __m256 qv = _mm256_maskload_ps(q + r * n + i, m);
            for (int j = 0; j < K; ++j) {
                acc[r * K + j] =
                    _mm256_fmadd_ps(qv, _mm256_maskload_ps(k[j] + i, m), acc[r * K + j]);
            }
        }
    }
    return sum8(acc);
}

// Pairs of rows against groups of 4 keys, then a last odd row against groups of 8. A group
// short of keys repeats its last key (those scores are dropped), so every call of
// score_block computes whole groups.
void tile_scores(const float* q, int rows, const float* const* k, int keys, int n, float* s,
                 std::int64_t s_stride) {
    const float* group[8];
    alignas(32) float out[8];
    int r = 0;
    for (; r + 2 <= rows; r += 2) {
        float* s0 = s + r * s_stride;
        float* s1 = s0 + s_stride;
        for (int j = 0; j < keys; j += 4) {
            const int m = keys - j < 4 ? keys - j : 4;
            for (int g = 0; g < 4; ++g) group[g] = k[j + (g < m ? g : m - 1)];
            const __m256 v = score_block<2, 4>(q + r * n, n, group);
            if (m == 4) {
                _mm_storeu_ps(s0 + j, _mm256_castps256_ps128(v));
                _mm_storeu_ps(s1 + j, _mm256_extractf128_ps(v, 1));
            } else {
                _mm256_store_ps(out, v);
                for (int g = 0; g < m; ++g) {
                    s0[j + g] = out[g];
                    s1[j + g] = out[4 + g];
                }
            }
        }
    }
    if (r < rows) {
        float* s0 = s + r * s_stride;
        for (int j = 0; j < keys; j += 8) {
            const int m = keys - j < 8 ? keys - j : 8;
            for (int g = 0; g < 8; ++g) group[g] = k[j + (g < m ? g : m - 1)];
            const __m256 v = score_block<1, 8>(q + r * n, n, group);
            if (m == 8) {
                _mm256_storeu_ps(s0 + j, v);
            } else {
                _mm256_store_ps(out, v);
                for (int g = 0; g < m; ++g) s0[j + g] = out[g];
            }
        }
    }
}

// R output rows: 16 columns at a time in registers over all keys, then the rest 8 at a time
// (the last vector masked). Each element is acc = fma(p, v, acc) over the keys in order.
template <int R>
void accumulate_rows(const float* p, std::int64_t p_stride, const float* const* v, int keys, int n,
                     float* out) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a0[R], a1[R];
        for (int r = 0; r < R; ++r) {
            a0[r] = _mm256_loadu_ps(out + r * n + i);
            a1[r] = _mm256_loadu_ps(out + r * n + i + 8);
        }
        for (int j = 0; j < keys; ++j) {
            const __m256 x0 = _mm256_loadu_ps(v[j] + i);
            const __m256 x1 = _mm256_loadu_ps(v[j] + i + 8);
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
        const __m256i m = lanes(n - i < 8 ? n - i : 8);
        __m256 a[R];
        for (int r = 0; r < R; ++r) a[r] = _mm256_maskload_ps(out + r * n + i, m);
        for (int j = 0; j < keys; ++j) {
            const __m256 x = _mm256_maskload_ps(v[j] + i, m);
            for (int r = 0; r < R; ++r) {
                a[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(p + r * p_stride + j), x, a[r]);
            }
        }
        for (int r = 0; r < R; ++r) _mm256_maskstore_ps(out + r * n + i, m, a[r]);
    }
}

void tile_accumulate(const float* p, std::int64_t p_stride, int rows, const float* const* v,
                     int keys, int n, float* out) {
    for_row_groups(rows, [&](int r, auto count) {
        accumulate_rows<decltype(count)::value>(p + r * p_stride, p_stride, v, keys, n,
                                                out + static_cast<std::int64_t>(r) * n);
    });
}

constexpr Kernels kAvx2{"avx2+fma+f16c", f32_to_f16, f16_to_f32,  dot_f32,
                        dot_f16,         dot_q8,     axpy_f32,    axpy_f16,
                        axpy_q8,         q8_to_f32,  tile_scores, tile_accumulate};

}  // namespace

// Only hands out the table: the CPU check lives in kv_kernels.cpp, which is compiled for the
// baseline instruction set.
const Kernels& avx2_kernel_table() {
    return kAvx2;
}

}  // namespace tokenscope::kv::detail
