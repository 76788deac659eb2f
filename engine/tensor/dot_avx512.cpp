// AVX-512 kernels (F, BW, VL, DQ, VNNI). Compiled with those instruction sets and called only
// when the CPU has them (simd_dispatch.cpp).
//
// 32-block formats, 16-31 tokens (and prefill with TOKENSCOPE_INT8_GEMM=0): the interleaved row
// tile below, 16 blocks in the int32 lanes of one register (vpdpbusd sums u*q in groups of 4),
// each block's d_w * d_a applied in one fma per 16 blocks. The offset/min term of each block is
// a float dot of the per-block coef and activation sums (matmul_internal.h). From 16 tokens
// (Q8_0: 32) the lane GEMM of gemm_int8_q32_avx512.cpp takes over.
//
// K-quants: pmaddubsw gives u*q in pairs as int16 (never saturates: u <= 63), vpdpwssd
// multiplies those by the sub-block's integer scale and accumulates int32 across the whole
// 256-element super-block, so the float scale is applied once per super-block, not per
// sub-block: two integer instructions per 64 weights and token.
#include "tensor/avx512_gcc_warnings.h"  // first: it silences a GCC 12 false positive

#include <immintrin.h>

#include "tensor/block_heads_avx512.h"
#include "tensor/int8_lanes_avx2.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/pack_simd256.h"
#include "tensor/scratch_buffer.h"

namespace tokenscope::tensor::detail {

namespace {

inline float hsum(__m512 v) {
    return _mm512_reduce_add_ps(v);
}

// Sums of up to 16 vectors at once: out[k] = sum of the lanes of v[k]. Four rounds of
// pairwise "shuffle two, add" fold all of them together in 15 steps (45 instructions), where
// one horizontal sum each costs about 8, which for a 4 x 4 tile over a 1024-element row was
// a quarter of the tile's time. Vectors past `count` are taken as zero.
template <int kCount>
inline void hsum_many(const __m512 (&v)[kCount], float* out) {
    static_assert(kCount <= 16);
    __m512 x[16];
    for (int k = 0; k < 16; ++k) x[k] = k < kCount ? v[k] : _mm512_setzero_ps();
    // Round 1: [a0+a2, a1+a3, b0+b2, b1+b3] in 128-bit lanes (a = x[2k], b = x[2k+1]).
    __m512 s[8];
    for (int k = 0; k < 8; ++k) {
        s[k] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], 0x44),
                             _mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], 0xEE));
    }
    // Round 2: 128-bit lane q holds 4 partial sums of x[4m + q].
    __m512 u[4];
    for (int m = 0; m < 4; ++m) {
        u[m] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * m], s[2 * m + 1], 0x88),
                             _mm512_shuffle_f32x4(s[2 * m], s[2 * m + 1], 0xDD));
    }
    // Round 3: lane q: 2 partial sums of x[8n + q], then 2 of x[8n + 4 + q].
    __m512 w[2];
    for (int n = 0; n < 2; ++n) {
        w[n] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * n], u[2 * n + 1], 0x44),
                             _mm512_shuffle_ps(u[2 * n], u[2 * n + 1], 0xEE));
    }
    // Round 4: element 4q + e is the whole sum of x[4e + q].
    const __m512 r =
        _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xDD));
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, r);
    for (int k = 0; k < kCount; ++k) out[k] = lanes[4 * (k % 4) + k / 4];
}

// res[i][j] = the lane sum of acc[i][j]; tiles of 8 or more accumulators sum them together.
template <int R, int T, int MR, int MT>
inline void store_tile_sums(const __m512 (&acc)[R][T], float (&res)[MR][MT]) {
    if constexpr (R * T >= 8 && R * T <= 16) {
        __m512 flat[R * T];
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) flat[i * T + j] = acc[i][j];
        }
        float sums[R * T];
        hsum_many<R * T>(flat, sums);
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) res[i][j] = sums[i * T + j];
        }
    } else {
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) res[i][j] = hsum(acc[i][j]);
        }
    }
}

// The dword permutations that turn 8 packed vectors of a 16-block group (vector k: blocks 2k
// and 2k+1, 8 words each) into the interleaved order (vector v: word v of blocks 0..15), as
// three rounds of two-source permutes (a 16 x 8 transpose of 4-byte words). Worked out at
// compile time by following where each (block, word) goes, so the index vectors cannot drift
// from the layout. Round 1 pairs vectors k and k+4 and splits words 0-3 / 4-7 (h); round 2
// pairs those of k and k+2 and splits word pairs (q); round 3 pairs the last two and splits
// single words (r), leaving block l in lane l.
struct InterleavePerms {
    int r1[2][16];
    int r2[2][16];
    int r3[2][16];
};

constexpr int find_label(const int (&a)[16], const int (&b)[16], int label) {
    for (int m = 0; m < 16; ++m) {
        if (a[m] == label) return m;
        if (b[m] == label) return 16 + m;
    }
    return -1;
}

constexpr InterleavePerms make_interleave_perms() {
    InterleavePerms p{};
    int in[8][16] = {};  // label = block * 8 + word
    for (int k = 0; k < 8; ++k) {
        for (int m = 0; m < 16; ++m) in[k][m] = (2 * k + m / 8) * 8 + m % 8;
    }
    // Round 1: words 4h..4h+3 of the 4 blocks in vectors k and k+4.
    for (int h = 0; h < 2; ++h) {
        for (int m = 0; m < 16; ++m) p.r1[h][m] = (m / 4) * 8 + 4 * h + m % 4;
    }
    int t1[4][2][16] = {};
    for (int k = 0; k < 4; ++k) {
        for (int h = 0; h < 2; ++h) {
            for (int m = 0; m < 16; ++m) {
                const int src = p.r1[h][m];
                t1[k][h][m] = src < 16 ? in[k][src] : in[k + 4][src - 16];
            }
        }
    }
    // Round 2: within each round-1 vector, lane 4i + j holds word j of its block i; keep words
    // 2q and 2q+1 of all 8 blocks of vectors k and k+2.
    for (int q = 0; q < 2; ++q) {
        for (int m = 0; m < 16; ++m) p.r2[q][m] = (m / 8) * 16 + ((m % 8) / 2) * 4 + 2 * q + m % 2;
    }
    int t2[2][2][2][16] = {};
    for (int k = 0; k < 2; ++k) {
        for (int h = 0; h < 2; ++h) {
            for (int q = 0; q < 2; ++q) {
                for (int m = 0; m < 16; ++m) {
                    const int src = p.r2[q][m];
                    t2[k][h][q][m] = src < 16 ? t1[k][h][src] : t1[k + 2][h][src - 16];
                }
            }
        }
    }
    // Round 3: word 4h + 2q + r of block l into lane l; the index must not depend on h and q.
    for (int r = 0; r < 2; ++r) {
        for (int l = 0; l < 16; ++l) p.r3[r][l] = find_label(t2[0][0][0], t2[1][0][0], l * 8 + r);
    }
    for (int h = 0; h < 2; ++h) {
        for (int q = 0; q < 2; ++q) {
            for (int r = 0; r < 2; ++r) {
                for (int l = 0; l < 16; ++l) {
                    if (find_label(t2[0][h][q], t2[1][h][q], l * 8 + 4 * h + 2 * q + r) !=
                        p.r3[r][l]) {
                        p.r3[r][l] = -1;  // fails the static_assert below
                    }
                }
            }
        }
    }
    return p;
}

constexpr InterleavePerms kInterleavePerms = make_interleave_perms();

constexpr bool perms_valid(const InterleavePerms& p) {
    for (int r = 0; r < 2; ++r) {
        for (int l = 0; l < 16; ++l) {
            if (p.r3[r][l] < 0) return false;
        }
    }
    return true;
}
static_assert(perms_valid(kInterleavePerms));

inline __m512i perm_index(const int (&idx)[16]) {
    return _mm512_loadu_si512(idx);
}

// Packs rows with pack_q32_simd, then interleaves them (matmul.h) so that the integer sums of
// 16 whole blocks build up in the 16 lanes of one register: per 512 weights and token, 8
// vpdpbusd and one float scale-and-add, where the natural order needs a conversion, a multiply
// and an fma for every 64 weights.
struct Q32InterleavedAvx512 {
    static constexpr bool kInterleaved = true;
    // 4 x 4 tile: 16 int32 group sums + 16 float accumulators + 4 weight vectors, one more
    // than the 32 registers, but the float accumulators are touched once per 512 weights, so
    // the odd spill costs less than the 4 x 3 tile's extra weight loads (measured).
    static constexpr int kRows = 4;
    static constexpr int kTokens = 4;
    static void pack(Type type, const std::uint8_t* blocks, std::int64_t nb, std::uint8_t* u,
                     float* d, float* c) {
        pack_q32_simd(type, blocks, nb, u, d, c);
    }
    // len: a multiple of 512; u is 64-byte aligned.
    static void interleave(std::uint8_t* u, std::int64_t len) {
        const __m512i r1a = perm_index(kInterleavePerms.r1[0]);
        const __m512i r1b = perm_index(kInterleavePerms.r1[1]);
        const __m512i r2a = perm_index(kInterleavePerms.r2[0]);
        const __m512i r2b = perm_index(kInterleavePerms.r2[1]);
        const __m512i r3a = perm_index(kInterleavePerms.r3[0]);
        const __m512i r3b = perm_index(kInterleavePerms.r3[1]);
        for (std::uint8_t* g = u; g < u + len; g += 512) {
            __m512i in[8];
            for (int k = 0; k < 8; ++k) in[k] = _mm512_load_si512(g + 64 * k);
            __m512i t1[4][2];
            for (int k = 0; k < 4; ++k) {
                t1[k][0] = _mm512_permutex2var_epi32(in[k], r1a, in[k + 4]);
                t1[k][1] = _mm512_permutex2var_epi32(in[k], r1b, in[k + 4]);
            }
            for (int h = 0; h < 2; ++h) {
                for (int q = 0; q < 2; ++q) {
                    const __m512i idx2 = q == 0 ? r2a : r2b;
                    const __m512i a = _mm512_permutex2var_epi32(t1[0][h], idx2, t1[2][h]);
                    const __m512i b = _mm512_permutex2var_epi32(t1[1][h], idx2, t1[3][h]);
                    const int v = 4 * h + 2 * q;
                    _mm512_store_si512(g + 64 * v, _mm512_permutex2var_epi32(a, r3a, b));
                    _mm512_store_si512(g + 64 * (v + 1), _mm512_permutex2var_epi32(a, r3b, b));
                }
            }
        }
    }
    template <int R, int T>
    static void tile(Q32Tile<kRows, kTokens>& t) {
        __m512 acc[R][T];
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) acc[i][j] = _mm512_setzero_ps();
        }
        const std::int64_t groups = t.len / 512;
        for (std::int64_t g = 0; g < groups; ++g) {
            __m512i isum[R][T];
            for (int i = 0; i < R; ++i) {
                for (int j = 0; j < T; ++j) isum[i][j] = _mm512_setzero_si512();
            }
#pragma GCC unroll 8
            for (int v = 0; v < 8; ++v) {
                const std::int64_t off = 512 * g + 64 * v;
                __m512i w[R];
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) w[i] = _mm512_load_si512(t.wu[i] + off);
#pragma GCC unroll 4
                for (int j = 0; j < T; ++j) {
                    const __m512i a = _mm512_load_si512(t.aq[j] + off);
#pragma GCC unroll 4
                    for (int i = 0; i < R; ++i)
                        isum[i][j] = _mm512_dpbusd_epi32(isum[i][j], w[i], a);
                }
            }
            // Lane l is block 16g + l: its scales and offset terms are plain vector loads.
#pragma GCC unroll 4
            for (int j = 0; j < T; ++j) {
                const __m512 ad = _mm512_loadu_ps(t.ad[j] + 16 * g);
                const __m512 as = _mm512_loadu_ps(t.as[j] + 16 * g);
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) {
                    const __m512 wd = _mm512_load_ps(t.wd[i] + 16 * g);
                    const __m512 wc = _mm512_load_ps(t.wc[i] + 16 * g);
                    acc[i][j] = _mm512_fmadd_ps(wc, as, acc[i][j]);
                    acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i][j]),
                                                _mm512_mul_ps(wd, ad), acc[i][j]);
                }
            }
        }
        store_tile_sums(acc, t.res);
    }
};

struct KAvx512 {
    // 4 x 3 tile: 12 int32 super-block sums + 12 float accumulators.
    static constexpr int kRows = 4;
    static constexpr int kTokens = 3;
    static void pack(Type type, const std::uint8_t* blocks, std::int64_t nb, std::uint8_t* u,
                     std::int16_t* sc, float* d, float* c) {
        pack_k_simd(type, blocks, nb, u, sc, d, c);
    }
    template <int R, int T>
    static void tile(KTile<kRows, kTokens>& t) {
        __m512 acc[R][T];
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) acc[i][j] = _mm512_setzero_ps();
        }
        const std::int64_t blocks = t.len / 256;
        for (std::int64_t b = 0; b < blocks; ++b) {
            __m512i isum[R][T];
            for (int i = 0; i < R; ++i) {
                for (int j = 0; j < T; ++j) isum[i][j] = _mm512_setzero_si512();
            }
#pragma GCC unroll 4
            for (int g = 0; g < 4; ++g) {
                const std::int64_t off = 256 * b + 64 * g;
                __m512i a[T];
#pragma GCC unroll 4
                for (int j = 0; j < T; ++j) a[j] = _mm512_load_si512(t.aq[j] + off);
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) {
                    const __m512i w = _mm512_load_si512(t.wu[i] + off);
                    const __m512i sc = _mm512_load_si512(t.wsc[i] + off / 2);
#pragma GCC unroll 4
                    for (int j = 0; j < T; ++j) {
                        isum[i][j] =
                            _mm512_dpwssd_epi32(isum[i][j], _mm512_maddubs_epi16(w, a[j]), sc);
                    }
                }
            }
#pragma GCC unroll 4
            for (int j = 0; j < T; ++j) {
                const __m512 ad = _mm512_set1_ps(t.ad[j][b]);
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) {
                    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(t.wd[i][b]), ad);
                    acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i][j]), scale, acc[i][j]);
                }
            }
        }
        for (std::int64_t s = 0; s < t.len / 16; s += 16) {
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                const __m512 c = _mm512_load_ps(t.wc[i] + s);
#pragma GCC unroll 4
                for (int j = 0; j < T; ++j) {
                    acc[i][j] = _mm512_fmadd_ps(c, _mm512_loadu_ps(t.as[j] + s), acc[i][j]);
                }
            }
        }
        store_tile_sums(acc, t.res);
    }
};

template <Type W>
inline __m512 load16(const std::uint8_t* row, std::int64_t k) {
    if constexpr (W == Type::F32) {
        return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
    } else if constexpr (W == Type::F16) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
    } else {
        const __m512i h = _mm512_cvtepu16_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));  // bf16 is a float's top half
    }
}

// The last n % 16 elements; lanes past the row end read nothing and are zero.
template <Type W>
inline __m512 load16_masked(const std::uint8_t* row, std::int64_t k, __mmask16 m) {
    if constexpr (W == Type::F32) {
        return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
    } else if constexpr (W == Type::F16) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * k));
    } else {
        const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + 2 * k));
        return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    }
}

template <Type W>
struct FAvx512 {
    // 4 x 5: 20 accumulators + 4 weight vectors; the F16/BF16 conversion (2 uops) of each
    // weight vector is shared by 5 tokens.
    static constexpr int kRows = 4;
    static constexpr int kTokens = 5;
    template <int R, int T>
    static void tile(FTile<kRows, kTokens>& t) {
        __m512 acc[R][T];
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) acc[i][j] = _mm512_setzero_ps();
        }
        const std::int64_t full = t.n / 16 * 16;
        for (std::int64_t k = 0; k < full; k += 16) {
            __m512 w[R];
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) w[i] = load16<W>(t.w[i], k);
#pragma GCC unroll 5
            for (int j = 0; j < T; ++j) {
                const __m512 a = _mm512_load_ps(t.a[j] + k);
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) acc[i][j] = _mm512_fmadd_ps(w[i], a, acc[i][j]);
            }
        }
        if (full < t.n) {
            const auto m = static_cast<__mmask16>((1u << (t.n - full)) - 1u);
            for (int i = 0; i < R; ++i) {
                const __m512 w = load16_masked<W>(t.w[i], full, m);
                // Activation rows are zero-padded to 16 floats, so a full load is safe.
                for (int j = 0; j < T; ++j) {
                    acc[i][j] = _mm512_fmadd_ps(w, _mm512_load_ps(t.a[j] + full), acc[i][j]);
                }
            }
        }
        store_tile_sums(acc, t.res);
    }
};

// Prefill of F16/BF16 weights: each tile of rows is widened to f32 once, into a buffer that
// stays in L1/L2, and the F32 tile then runs every token of the call over it. FAvx512<F16>
// converted each weight vector again for every 5-token tile; on Intel cores vcvtph2ps is two
// uops on the FMA ports (p0 and p5), so each step's 20 FMAs shared those ports with 8
// conversion uops. Widening is exact and the F32 tile issues the same FMAs in the same order
// (a masked tail load gives the same zeros), so every result is bit-identical to converting in
// registers (test_matmul halfPrefillEqualsF32OfTheSameValues). One thread, 128 tokens, Intel
// Xeon (family 6, model 0xCF), three alternated runs, GFLOP/s: 2816 x 1024 97-98 -> 125-126;
// 1024 x 2816 82-95 -> 93 (five tokens of a 2816-wide row outgrow L1, so that shape waits on
// L2 either way). Whole 246M F16 model, 2 threads, prefill 128: 393-474 -> 424-548 tok/s.
template <Type W>
void run_f_widened(const MatmulArgs& a) {
    using K = FAvx512<Type::F32>;
    // One row tile, rows 64-byte aligned (n rounded up to 16 floats).
    thread_local ScratchBuffer buffer;
    const std::int64_t stride = (a.n + 15) / 16 * 16;
    auto* wide = reinterpret_cast<float*>(
        buffer.get(static_cast<std::size_t>(K::kRows * stride) * sizeof(float)));
    const std::int64_t full = a.n / 16 * 16;
    const std::uint8_t* w_end = prefetch_end(a);
    // By value: the widening loop then keeps wide, stride and full in registers (captured by
    // reference it ran 2-3 % slower: 2816 x 1024 x 128 tokens, 120.6-122.8 against 123.2-126.0
    // GFLOP/s, alternated).
    run_f_rows<K>(a, [=, &a](std::int64_t r0, int rows, FTile<K::kRows, K::kTokens>& t) {
        for (int i = 0; i < rows; ++i) {
            const std::uint8_t* src = a.weights + static_cast<std::size_t>(r0 + i) * a.row_bytes;
            prefetch_ahead(src, a.row_bytes, w_end, a.prefetch_level);
            float* dst = wide + i * stride;
            for (std::int64_t k = 0; k < full; k += 16) _mm512_store_ps(dst + k, load16<W>(src, k));
            if (full < a.n) {
                const auto m = static_cast<__mmask16>((1u << (a.n - full)) - 1u);
                _mm512_store_ps(dst + full, load16_masked<W>(src, full, m));
            }
            t.w[i] = reinterpret_cast<const std::uint8_t*>(dst);
        }
    });
}

// Decode and small batches (under kPanelMinTokensInternal tokens) of F16/BF16 weights: one row
// at a time with four independent accumulators per token, 64 weights per step. On a Zen 5
// class EPYC, reading a 230 MB F16 matrix from memory, one thread streamed 33 GB/s this way
// against 12 GB/s for four rows at once with one chain each (the FAvx512 prefill tile): four
// concurrent streams defeat the hardware prefetcher there, as for Q8_0 below. The summation
// order is the same for every token count, so a token of a speculative verification chunk gets
// its decode step's result bit for bit.
template <Type W>
struct FAvx512Small {
    static constexpr int kRows = 1;
    static constexpr int kTokens = 3;
    static constexpr bool kPrefetchesInRow = true;  // two lines per 64-weight step
    template <int R, int T>
    static void tile(FTile<kRows, kTokens>& t) {
        static_assert(R == 1);
        __m512 acc[T][4];
        for (int j = 0; j < T; ++j) {
            for (int u = 0; u < 4; ++u) acc[j][u] = _mm512_setzero_ps();
        }
        const std::uint8_t* row = t.w[0];
        const std::int64_t full64 = t.n / 64 * 64;
        for (std::int64_t k = 0; k < full64; k += 64) {
            prefetch_ahead(row + k * 2, 128, t.w_end, t.prefetch_level);
#pragma GCC unroll 4
            for (int u = 0; u < 4; ++u) {
                const __m512 w = load16<W>(row, k + 16 * u);
#pragma GCC unroll 3
                for (int j = 0; j < T; ++j) {
                    acc[j][u] = _mm512_fmadd_ps(w, _mm512_load_ps(t.a[j] + k + 16 * u), acc[j][u]);
                }
            }
        }
        // The rest in steps of 16, the last one masked (activation rows are zero-padded to 16
        // floats, so their full loads are safe).
        for (std::int64_t k = full64; k < t.n; k += 16) {
            const std::int64_t left = t.n - k;
            const __m512 w =
                left >= 16 ? load16<W>(row, k)
                           : load16_masked<W>(row, k, static_cast<__mmask16>((1u << left) - 1u));
            for (int j = 0; j < T; ++j)
                acc[j][0] = _mm512_fmadd_ps(w, _mm512_load_ps(t.a[j] + k), acc[j][0]);
        }
        for (int j = 0; j < T; ++j) {
            const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[j][0], acc[j][1]),
                                             _mm512_add_ps(acc[j][2], acc[j][3]));
            t.res[0][j] = _mm512_reduce_add_ps(sum);
        }
    }
};

// T tokens (1-5) times one Q8_0 row, read straight from the blocks: decode streams every weight
// once, and staging rows through the packed buffer (store, reload, a scale array per block) cost
// about half of the instructions per byte; with two cores sharing the memory bus the
// instruction time no longer hides behind the misses. Each block is loaded and made unsigned
// once for all T tokens (a speculative verification chunk multiplies Gemma's 262144-row output
// matrix by up to 9 tokens), and every token runs the same operations in the same order for
// any T, so its result equals its decode step bit for bit.
//
// The f16 weight scales of 16 blocks are collected and converted in one instruction and
// multiplied by each token's 16 activation scales at once; each pair of blocks then takes its
// two lanes' products by one permute. (Forming the same products per pair, from a two-lane load
// of the activation scales, cost two more instructions per token and pair; with 9 tokens the
// output matrix was bound by instructions, not by memory.) The +128 that makes the weights
// unsigned for vpdpbusd is taken out with the activation block sums, one fma per 16 blocks
// (corr), instead of per block.
template <int T>
void gemv_q8_0(const MatmulArgs& a, std::int64_t r, std::int64_t t0) {
    const TokenRows<T> acts(a, t0);
    const std::int64_t nb = a.n / 32;
    const std::uint8_t* end = prefetch_end(a);
    const std::uint8_t* row = a.weights + static_cast<std::size_t>(r) * a.row_bytes;
    __m512 acc[T], corr[T], scales[T];
    for (int t = 0; t < T; ++t) acc[t] = corr[t] = _mm512_setzero_ps();
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const BlockHeads<34> heads;
    for (std::int64_t g = 0; g < nb; g += 16) {
        const int count = static_cast<int>(min_of(16, nb - g));
        const std::uint8_t* blk = row + g * 34;
        // The first token group brings the row in (later groups find it in L1).
        if (t0 == 0)
            prefetch_ahead(blk, static_cast<std::size_t>(count) * 34, end, a.prefetch_level);
        // The blocks' d: a full group collects them by scalar stores into an array loaded as
        // a vector, whose wait on store forwarding the group's own work hides; the word
        // permutes of BlockHeads cost more there (one token, one thread, in cache, Intel Xeon
        // 0xCF, with the full groups in the lane form below, ms: 2048 x 2048 0.144 with the
        // array against 0.173-0.175 with the permutes, 49152 x 576 1.32-1.37 against 1.54-1.64).
        // A row's last, partial group has too little work to hide the wait and takes the
        // permutes (49152 x 576, one token, all groups in the pair form then: 1.98-2.00 ->
        // 1.64-1.73 ms).
        __m512 wd;
        if (count == 16) {
            alignas(32) std::uint16_t h[16];
            for (int l = 0; l < 16; ++l) h[l] = load_half_bits(blk + 34 * l);
            wd = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
        } else {
            wd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(heads.load(blk, count)));
        }
        // The activation scale and sum arrays are zero-padded to whole vectors of 16.
        for (int t = 0; t < T; ++t) {
            corr[t] = _mm512_fmadd_ps(wd, _mm512_loadu_ps(acts.s[t] + g), corr[t]);
            scales[t] = _mm512_mul_ps(wd, _mm512_loadu_ps(acts.d[t] + g));
        }
        if (count == 16) {
            // A full group with blocks in the 32-bit lanes (lane l = block l), over the
            // activations' interleaved copy, as direct_avx512.cpp's Q4 rows: each block's two
            // 16-byte halves are loaded four blocks to a vector and transposed to words
            // (transpose_words4), flipped to unsigned (q + 128, corrected by corr as below),
            // and eight vpdpbusd sum all 32 products of each block in its lane, so the 16
            // blocks' scales apply in one FMA per token instead of a vpermps and an FMA per
            // pair. The transpose is paid once per row and group, the rest per token, which
            // is what a verification chunk of several tokens multiplies.
            __m512i w[8];
            for (int half = 0; half < 2; ++half) {
                __m512i quads[4];
                for (int i = 0; i < 4; ++i)
                    quads[i] = blocks_in_lanes<__m512i>(blk + 34 * i + 2 + 16 * half, 34);
                __m512i words[4];
                transpose_words4(quads, words);
                for (int j = 0; j < 4; ++j) w[4 * half + j] = _mm512_xor_si512(words[j], flip);
            }
            const std::size_t x_offset =
                a.act_interleaved_offset + static_cast<std::size_t>(g / 16) * 512;
#pragma GCC unroll 5
            for (int t = 0; t < T; ++t) {
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot_words8(w, acts.q[t] + x_offset)),
                                         scales[t], acc[t]);
            }
            continue;
        }
        for (int q = 0; 2 * q < count; ++q) {
            const std::int64_t b = g + 2 * q;
            const __m512i sel = _mm512_set_epi32(2 * q + 1, 2 * q + 1, 2 * q + 1, 2 * q + 1,
                                                 2 * q + 1, 2 * q + 1, 2 * q + 1, 2 * q + 1, 2 * q,
                                                 2 * q, 2 * q, 2 * q, 2 * q, 2 * q, 2 * q, 2 * q);
            const std::uint8_t* pb = row + b * 34;
            const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 2));
            // A lone last block: the upper half becomes 0x80 after the flip, against
            // activations that are zero there (padding), so it adds nothing.
            const __m256i hi = 2 * q + 1 < count
                                   ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 36))
                                   : _mm256_setzero_si256();
            const __m512i w =
                _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), flip);
            for (int t = 0; t < T; ++t) {
                const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w,
                                                        _mm512_load_si512(acts.q[t] + 32 * b));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                         _mm512_permutexvar_ps(sel, scales[t]), acc[t]);
            }
        }
    }
    for (int t = 0; t < T; ++t)
        a.out[(t0 + t) * a.out_stride + r] = hsum(acc[t]) - 128.0f * hsum(corr[t]);
}

// Rows outermost, one at a time, tokens in groups of up to five (the row stays in L1 for the
// later groups). One row at a time: on a Zen 5 class EPYC (2 threads, weights streamed from
// memory, 4096 x 11008) 4 rows at once read 21-25 GB/s and 2 rows 22-34 GB/s against 36-52 GB/s
// for one row (alternated rounds): more concurrent streams defeat the hardware prefetcher there,
// while with the weights in cache 2-4 rows were only 10-20 % faster than one.
void run_gemv_q8_0(const MatmulArgs& a) {
    for (std::int64_t r = a.row_begin; r < a.row_end; ++r) {
        std::int64_t t0 = 0;
        for (; t0 + 5 <= a.tokens; t0 += 5) gemv_q8_0<5>(a, r, t0);
        switch (a.tokens - t0) {
            case 4:
                gemv_q8_0<4>(a, r, t0);
                break;
            case 3:
                gemv_q8_0<3>(a, r, t0);
                break;
            case 2:
                gemv_q8_0<2>(a, r, t0);
                break;
            case 1:
                gemv_q8_0<1>(a, r, t0);
                break;
            default:
                break;
        }
    }
}

}  // namespace

bool matmul_avx512(const MatmulArgs& args) {
    if (args.interleaved) {
        // From the lane GEMMs' line (lane_gemm_min_tokens_avx512) their packers read the groups
        // (two at a time): the K-quants' (gemm_int8_avx512) or Q4_0-Q5_1's (gemm_int8_q32_avx512),
        // each false for the other's types. Under it the K-quants take their 512-bit tile
        // (interleaved_kquant_avx512.cpp), Q4_0-Q5_1 theirs (interleaved_q32_avx512.cpp; the AVX2
        // tile before, whose 16 rows in the lanes had beaten the AVX-512 row kernel q32_row: one
        // row, a horizontal sum per row). Each tile sums a lane in its GEMM's order, so a token
        // gets the same bits at every count (test_matmul interleavedTokenCountsGiveTheSameBits).
        if (args.int8_gemm && args.tokens >= lane_gemm_min_tokens_avx512(args.type) &&
            (gemm_int8_avx512(args) || gemm_int8_q32_avx512(args)))
            return true;
        if (matmul_interleaved_kquant_avx512(args)) return true;
        if (matmul_interleaved_q32_avx512(args)) return true;
        return matmul_avx2(args);
    }
    // One token (or a few: a speculative verification chunk) reads each weight once, so the
    // blocks are decoded in registers rather than packed (direct_avx512.cpp).
    if (args.tokens < kPanelMinTokensInternal && direct_avx512(args)) return true;
    if (args.tokens < kPanelMinTokensInternal) {
        if (args.type == Type::F16) {
            run_f<FAvx512Small<Type::F16>>(args);
            return true;
        }
        if (args.type == Type::BF16) {
            run_f<FAvx512Small<Type::BF16>>(args);
            return true;
        }
    }
    switch (args.type) {
        case Type::F32:
            run_f<FAvx512<Type::F32>>(args);
            return true;
        case Type::F16:
            run_f_widened<Type::F16>(args);
            return true;
        case Type::BF16:
            run_f_widened<Type::BF16>(args);
            return true;
        case Type::Q4_0:
        case Type::Q4_1:
        case Type::Q5_0:
        case Type::Q5_1:
        case Type::Q8_0:
            // Prefill: the lane GEMM (any width; see gemm_int8_q32_avx512.cpp) from 16 tokens,
            // Q8_0's from 32 (lane_gemm_min_tokens_avx512): under that it takes the interleaved
            // tile, which pads rows to 512 weights but packs less per token.
            // Fewer tokens reach here only for Q8_0 (the others went to direct_avx512): its
            // GEMV gives a token of a small batch (a speculative verification chunk) the result
            // of its decode step bit for bit (test_matmul smallBatchesMatchDecodeBitForBit).
            if (args.int8_gemm && args.tokens >= lane_gemm_min_tokens_avx512(args.type) &&
                gemm_int8_q32_avx512(args))
                return true;
            if (args.tokens >= kPanelMinTokensInternal) {
                run_q32<Q32InterleavedAvx512>(args);
            } else {
                run_gemv_q8_0(args);
            }
            return true;
        case Type::Q2_K:
        case Type::Q3_K:
        case Type::Q4_K:
        case Type::Q5_K:
        case Type::Q6_K:
            if (args.int8_gemm && args.tokens >= lane_gemm_min_tokens_avx512(args.type) &&
                gemm_int8_avx512(args))
                return true;
            run_k<KAvx512>(args);
            return true;
    }
    return false;
}

}  // namespace tokenscope::tensor::detail
