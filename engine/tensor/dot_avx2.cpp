// AVX2 + FMA + F16C kernels. Compiled with those instruction sets and called only when the CPU
// has them (simd_dispatch.cpp). Same scheme as dot_avx512.cpp with 256-bit vectors and without
// VNNI: pmaddubsw (u8 x s8 -> pairs in int16) then pmaddwd (-> int32).
//
// Q8_0 is the exception to the unsigned-weight scheme here: its offset weights reach 255 and
// 255 * 127 * 2 overflows pmaddubsw's int16, so its kernel flips u back to the signed byte and
// uses the |w| * sign(q, w) form, whose pairs stay within 2 * 128 * 127, and then needs no
// offset correction.
#include <immintrin.h>

#include <cstddef>

#include "tensor/int8_lanes_avx2.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/pack_simd256.h"

namespace tokenscope::tensor::detail {

namespace {

template <bool kSigned>
struct Q32Avx2 {
    static constexpr int kRows = 2;
    static constexpr int kTokens = 3;
    static void pack(Type type, const std::uint8_t* blocks, std::int64_t nb, std::uint8_t* u,
                     float* d, float* c) {
        pack_q32_simd(type, blocks, nb, u, d, c);
    }
    template <int R, int T>
    static void tile(Q32Tile<kRows, kTokens>& t) {
        __m256 acc[R][T];
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps();
        }
        const __m256i ones = _mm256_set1_epi16(1);
        const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
        const std::int64_t nb = t.len / 32;
        for (std::int64_t b = 0; b < nb; ++b) {
            __m256i w[R];
            __m256i wabs[R];
            __m256 wd[R];
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                w[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(t.wu[i] + 32 * b));
                if constexpr (kSigned) {
                    w[i] = _mm256_xor_si256(w[i], flip);
                    wabs[i] = _mm256_abs_epi8(w[i]);  // -128 -> 0x80 = 128 as unsigned
                }
                wd[i] = _mm256_broadcast_ss(t.wd[i] + b);
            }
#pragma GCC unroll 4
            for (int j = 0; j < T; ++j) {
                const __m256i a =
                    _mm256_load_si256(reinterpret_cast<const __m256i*>(t.aq[j] + 32 * b));
                const __m256 ad = _mm256_broadcast_ss(t.ad[j] + b);
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) {
                    const __m256i pairs =
                        kSigned ? _mm256_maddubs_epi16(wabs[i], _mm256_sign_epi8(a, w[i]))
                                : _mm256_maddubs_epi16(w[i], a);
                    const __m256i dot = _mm256_madd_epi16(pairs, ones);
                    acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(wd[i], ad),
                                                acc[i][j]);
                }
            }
        }
        if constexpr (!kSigned) {
            const std::int64_t nb_pad = round_up_to(nb, 16);
            for (std::int64_t s = 0; s < nb_pad; s += 8) {
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) {
                    const __m256 c = _mm256_load_ps(t.wc[i] + s);
#pragma GCC unroll 4
                    for (int j = 0; j < T; ++j) {
                        acc[i][j] = _mm256_fmadd_ps(c, _mm256_loadu_ps(t.as[j] + s), acc[i][j]);
                    }
                }
            }
        }
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) t.res[i][j] = hsum(acc[i][j]);
        }
    }
};

struct KAvx2 {
    static constexpr int kRows = 2;
    static constexpr int kTokens = 2;
    static void pack(Type type, const std::uint8_t* blocks, std::int64_t nb, std::uint8_t* u,
                     std::int16_t* sc, float* d, float* c) {
        pack_k_simd(type, blocks, nb, u, sc, d, c);
    }
    template <int R, int T>
    static void tile(KTile<kRows, kTokens>& t) {
        __m256 acc[R][T];
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps();
        }
        const std::int64_t blocks = t.len / 256;
        for (std::int64_t b = 0; b < blocks; ++b) {
            __m256i isum[R][T];
            for (int i = 0; i < R; ++i) {
                for (int j = 0; j < T; ++j) isum[i][j] = _mm256_setzero_si256();
            }
#pragma GCC unroll 8
            for (int g = 0; g < 8; ++g) {
                const std::int64_t off = 256 * b + 32 * g;
                __m256i a[T];
                for (int j = 0; j < T; ++j) {
                    a[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(t.aq[j] + off));
                }
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) {
                    const __m256i w =
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(t.wu[i] + off));
                    const __m256i sc =
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(t.wsc[i] + off / 2));
#pragma GCC unroll 4
                    for (int j = 0; j < T; ++j) {
                        const __m256i prod = _mm256_madd_epi16(_mm256_maddubs_epi16(w, a[j]), sc);
                        isum[i][j] = _mm256_add_epi32(isum[i][j], prod);
                    }
                }
            }
#pragma GCC unroll 4
            for (int j = 0; j < T; ++j) {
                const __m256 ad = _mm256_set1_ps(t.ad[j][b]);
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) {
                    const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(t.wd[i][b]), ad);
                    acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i][j]), scale, acc[i][j]);
                }
            }
        }
        for (std::int64_t s = 0; s < t.len / 16; s += 8) {
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                const __m256 c = _mm256_load_ps(t.wc[i] + s);
#pragma GCC unroll 4
                for (int j = 0; j < T; ++j) {
                    acc[i][j] = _mm256_fmadd_ps(c, _mm256_loadu_ps(t.as[j] + s), acc[i][j]);
                }
            }
        }
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) t.res[i][j] = hsum(acc[i][j]);
        }
    }
};

template <Type W>
inline __m256 load8(const std::uint8_t* row, std::int64_t k) {
    if constexpr (W == Type::F32) {
        return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
    } else if constexpr (W == Type::F16) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
    } else {
        const __m256i h =
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
}

template <Type W>
inline float load1(const std::uint8_t* row, std::int64_t k) {
    if constexpr (W == Type::F32) {
        float v;
        std::memcpy(&v, row + 4 * k, sizeof v);
        return v;
    } else {
        const auto h = static_cast<std::uint16_t>(row[2 * k] | (row[2 * k + 1] << 8));
        if constexpr (W == Type::F16) return _cvtsh_ss(h);
        const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
        float v;
        std::memcpy(&v, &bits, sizeof v);
        return v;
    }
}

// The four-chain dot product of F16/BF16 rows with f32 activations, for R rows x T tokens.
// Each (row, token) pair runs exactly the same operations in the same order whatever R and T
// are, so one token (decode, FAvx2) and a small batch (a speculative verification chunk,
// FAvx2Small) give bit-identical results for the same token.
//
// Four independent accumulators per pair instead of one, so the FMA latency chain does not
// limit how far ahead the core can have loads in flight (one chain per row kept a 1-thread
// F16 decode at ~6 GB/s on a Zen core).
template <Type W, int MR, int MT, int R, int T, bool kPrefetchInRow = false>
void tile_four_chains(FTile<MR, MT>& t) {
    __m256 acc[R][T][4];
    for (int i = 0; i < R; ++i) {
        for (int j = 0; j < T; ++j) {
            for (int u = 0; u < 4; ++u) acc[i][j][u] = _mm256_setzero_ps();
        }
    }
    const std::int64_t full32 = t.n / 32 * 32;
    for (std::int64_t k = 0; k < full32; k += 32) {
        if constexpr (kPrefetchInRow) {
            static_assert(R == 1);
            prefetch_ahead(t.w[0] + k * 2, 64, t.w_end, t.prefetch_level);
        }
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) {
            __m256 w[R];
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) w[i] = load8<W>(t.w[i], k + 8 * u);
#pragma GCC unroll 4
            for (int j = 0; j < T; ++j) {
                const __m256 x = _mm256_load_ps(t.a[j] + k + 8 * u);
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) acc[i][j][u] = _mm256_fmadd_ps(w[i], x, acc[i][j][u]);
            }
        }
    }
    const std::int64_t full = t.n / 8 * 8;
    for (std::int64_t k = full32; k < full; k += 8) {
        for (int i = 0; i < R; ++i) {
            const __m256 w = load8<W>(t.w[i], k);
            for (int j = 0; j < T; ++j)
                acc[i][j][0] = _mm256_fmadd_ps(w, _mm256_load_ps(t.a[j] + k), acc[i][j][0]);
        }
    }
    for (int i = 0; i < R; ++i) {
        for (int j = 0; j < T; ++j) {
            float tail = 0.0f;
            for (std::int64_t k = full; k < t.n; ++k) tail += load1<W>(t.w[i], k) * t.a[j][k];
            const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc[i][j][0], acc[i][j][1]),
                                             _mm256_add_ps(acc[i][j][2], acc[i][j][3]));
            t.res[i][j] = hsum(sum) + tail;
        }
    }
}

template <Type W>
struct FAvx2 {
    static constexpr int kRows = 2;
    static constexpr int kTokens = 4;

    template <int R, int T>
    static void tile(FTile<kRows, kTokens>& t) {
        // F32 weights (norm-sized tensors in real files, whole matrices in the tests' tiny
        // models) keep one summation order for every token count, so a decode step and a
        // prefill of the same tokens agree to the last bit (test_forward relies on it).
        if constexpr (T == 1 && W != Type::F32) {
            tile_four_chains<W, kRows, kTokens, R, 1>(t);
            return;
        }
        __m256 acc[R][T];
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps();
        }
        const std::int64_t full = t.n / 8 * 8;
        for (std::int64_t k = 0; k < full; k += 8) {
            __m256 w[R];
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) w[i] = load8<W>(t.w[i], k);
#pragma GCC unroll 4
            for (int j = 0; j < T; ++j) {
                const __m256 a = _mm256_load_ps(t.a[j] + k);
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) acc[i][j] = _mm256_fmadd_ps(w[i], a, acc[i][j]);
            }
        }
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) {
                float tail = 0.0f;
                for (std::int64_t k = full; k < t.n; ++k) tail += load1<W>(t.w[i], k) * t.a[j][k];
                t.res[i][j] = hsum(acc[i][j]) + tail;
            }
        }
    }
};

// F16/BF16 for 1 to 15 tokens (decode, a speculative verification chunk, a short prompt): four
// chains per (row, token), one row x three tokens per tile (12 accumulators). One row at a time
// because decode streams the weights from memory and one stream per thread is what the hardware
// prefetcher follows best: on a Zen 5 class EPYC forced to AVX2, whole-model F16 decode went
// from 66 to 80 tok/s (mean of four alternated runs) against FAvx2's two rows.
template <Type W>
struct FAvx2Small {
    static constexpr int kRows = 1;
    static constexpr int kTokens = 3;
    static constexpr bool kPrefetchesInRow = true;  // one line per 32-weight step
    template <int R, int T>
    static void tile(FTile<kRows, kTokens>& t) {
        tile_four_chains<W, kRows, kTokens, R, T, true>(t);
    }
};

// The heads (first 4 bytes: d, then m where the format has one) of up to 8 consecutive blocks of
// kBlockBytes bytes as floats, lane i = block i; lanes past `count` repeat the last block's head
// (see the constructor). AVX2 has no word permute across 128-bit windows (block_heads_avx512.h
// uses one), and a vpgatherdd was a third of a Q4_1 row's time on Zen 4 there, so the heads are
// collected in two ways:
// - d only (kWithMin false: Q8_0, Q4_0, Q5_0): the eight half-floats are put together in two
//   64-bit general-purpose registers (16-bit loads, shifts and ors on the integer ALUs), moved
//   to an xmm by two vmovq and converted by one vcvtph2ps, instead of 8 dependent two-uop
//   inserts per group on the vector pipes that the dot products need. Zen 3 (AMD family 0x19,
//   AVX2), one thread, 4096 x 640 from L3, with the prefetch level read once per call as well,
//   alternated three times, us: one token Q8_0 159-167 -> 141-150, Q5_0 194-204 -> 176-185;
//   three tokens 0-6 % (docs/benchmarks.md, twenty-first pass).
// - d and m (kWithMin true: Q4_1, Q5_1): four heads go into an xmm by a scalar load and three
//   vpinsrd, one byte shuffle per xmm separates the d and m halves, and one vcvtph2ps per vector
//   converts eight. Both halves by 16-bit loads as above, or the four 32-bit heads by two 64-bit
//   registers and a vpunpcklqdq, were 2-4 % slower for Q4_1 (576-wide rows, one token).
template <std::size_t kBlockBytes, bool kWithMin>
struct Heads8 {
    __m256 d;
    __m256 m;  // the second half-float of each head: Q4_1 / Q5_1's min (kWithMin only)

    // Block `first + i` of the group, or the group's last block `last` past it.
    template <bool kFull>
    static const std::uint8_t* head(const std::uint8_t* group, int first, int i, int last) {
        const int b = kFull || first + i < last ? first + i : last;
        return group + static_cast<std::size_t>(b) * kBlockBytes;
    }
    // d of blocks first .. first + 3, block first + i's in bits 16 i and up.
    template <bool kFull>
    static std::uint64_t four_d(const std::uint8_t* group, int first, int last) {
        std::uint64_t bits = 0;
        for (int i = 0; i < 4; ++i) {
            std::uint16_t h;
            std::memcpy(&h, head<kFull>(group, first, i, last), sizeof h);
            bits |= static_cast<std::uint64_t>(h) << (16 * i);
        }
        return bits;
    }
    // Whole heads (d, m) of blocks first .. first + 3 in the four dwords of an xmm.
    template <bool kFull>
    static __m128i four_heads(const std::uint8_t* group, int first, int last) {
        auto word = [&](int i) {
            return static_cast<int>(load_le32(head<kFull>(group, first, i, last)));
        };
        __m128i v = _mm_cvtsi32_si128(word(0));
        v = _mm_insert_epi32(v, word(1), 1);
        v = _mm_insert_epi32(v, word(2), 2);
        return _mm_insert_epi32(v, word(3), 3);
    }
    template <bool kFull>
    void collect(const std::uint8_t* group, int last) {
        if constexpr (kWithMin) {
            // Words 0, 2, 4, 6 (the d halves) to the low 8 bytes, 1, 3, 5, 7 (m) to the high.
            const __m128i split =
                _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
            const __m128i lo = _mm_shuffle_epi8(four_heads<kFull>(group, 0, last), split);
            const __m128i hi = _mm_shuffle_epi8(four_heads<kFull>(group, 4, last), split);
            d = _mm256_cvtph_ps(_mm_unpacklo_epi64(lo, hi));
            m = _mm256_cvtph_ps(_mm_unpackhi_epi64(lo, hi));
        } else {
            const __m128i lo =
                _mm_cvtsi64_si128(static_cast<long long>(four_d<kFull>(group, 0, last)));
            const __m128i hi =
                _mm_cvtsi64_si128(static_cast<long long>(four_d<kFull>(group, 4, last)));
            d = _mm256_cvtph_ps(_mm_unpacklo_epi64(lo, hi));
            m = d;  // unused
        }
    }
    __attribute__((always_inline)) Heads8(const std::uint8_t* group, int count) {
        // The row's last group may hold fewer than 8 blocks: its lanes past count repeat the
        // last head, so nothing past the row is read. They need no clearing: the activations'
        // scales and sums are zero there. (An aligned array filled by scalar stores instead
        // stalled on store forwarding: a sixth of a 576-wide row's time.)
        if (count == 8) {
            collect<true>(group, 7);
        } else {
            collect<false>(group, count - 1);
        }
    }
};

// block(i, acc) for blocks 0 .. count - 1 of a group of up to 8, alternating two accumulator
// sets so that consecutive blocks do not wait on one FMA chain; a full group unrolled.
template <class Block>
__attribute__((always_inline)) inline void alternate_blocks(int count, __m256* acc0, __m256* acc1,
                                                            Block& block) {
    if (count == 8) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; i += 2) {
            block(i, acc0);
            block(i + 1, acc1);
        }
    } else {
        for (int i = 0; i < count; ++i) block(i, (i & 1) ? acc1 : acc0);
    }
}

// coef_b of the 8 blocks of `heads`: the min m (Q4_1, Q5_1) or -offset * d (Q4_0, Q5_0), the
// factor of the activation block's sum (NibbleLayout).
template <Type W>
__m256 nibble_coef(const Heads8<NibbleLayout<W>::kBlockBytes, NibbleLayout<W>::kHasMin>& heads) {
    using F = NibbleLayout<W>;
    return F::kHasMin ? heads.m : _mm256_mul_ps(heads.d, _mm256_set1_ps(-F::kOffset));
}

// Blocks g .. g + count - 1 (count <= 8) of a Q4_0 / Q4_1 / Q5_0 / Q5_1 row for T tokens, one
// block per 256-bit vector in element order (split_nibbles16), so the activations load as they
// are. The heads of the 8 blocks are converted
// at once (Heads8), their d * d_a scales reach each block by a broadcast load, and the min or
// offset term is one FMA per 8 blocks. Before this form, decoding each block's d and m
// separately (scalar vcvtph2ps, a scalar FMA for the min) took half of the kernel's instructions:
// 1536 x 576 Q4_1, one token, one thread, in cache, 0.066 ms against 0.051 ms after (Intel Xeon,
// family 6 model 0xCF). The form of direct_avx512.cpp's q32_row without VNNI.
template <Type W, int T>
__attribute__((always_inline)) inline void nibble_blocks(const std::uint8_t* row, std::int64_t g,
                                                         int count, const TokenRows<T>& acts,
                                                         __m256* acc0, __m256* acc1, __m256* corr) {
    using F = NibbleLayout<W>;
    const std::uint8_t* gb = row + static_cast<std::size_t>(g) * F::kBlockBytes;
    const Heads8<F::kBlockBytes, F::kHasMin> heads(gb, count);
    const __m256 coef = nibble_coef<W>(heads);
    // Each block's d * d_a reaches its FMA as a broadcast load from this copy: a load port
    // instead of a vpermps and the index vector it needs on the shuffle port.
    alignas(32) float scale[T][8];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
        corr[t] = _mm256_fmadd_ps(coef, _mm256_loadu_ps(acts.s[t] + g), corr[t]);
        _mm256_store_ps(scale[t], _mm256_mul_ps(heads.d, _mm256_loadu_ps(acts.d[t] + g)));
    }
    const __m256i ones = _mm256_set1_epi16(1);
    auto block = [&](int i, __m256* acc) __attribute__((always_inline)) {
        const std::uint8_t* blk = gb + F::kBlockBytes * static_cast<std::size_t>(i);
        __m256i w = split_nibbles16(blk + F::kNibbles);
        if constexpr (F::kFifth) w = _mm256_or_si256(w, fifth_bits(load_le32(blk + F::kFifthBits)));
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
            const __m256i x =
                _mm256_load_si256(reinterpret_cast<const __m256i*>(acts.q[t] + 32 * (g + i)));
            const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones);
            acc[t] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_broadcast_ss(&scale[t][i]), acc[t]);
        }
    };
    alternate_blocks(count, acc0, acc1, block);
}

// Q8_0 for decode (one token) and small batches (2-15 tokens: a speculative verification chunk,
// a short prompt) without the packed copy: each block is loaded once and multiplied at once for
// T tokens, so the weights are read once and nothing is written and read back (for one token the
// packing pass cost about as much as the dot products). Same sums as the packed path:
// d * d_a * sum(q * q_a) per block. Every token runs the same operations in the same order for
// any T, so a token's result in a batch is bit-identical to its decode step (speculative
// decoding's greedy output then equals plain decoding token for token).
// 8 blocks at a time as nibble_blocks does: their d converted at once (Heads8), each block's
// d * d_a reaching its FMA as a broadcast load, instead of a scalar conversion, a scalar multiply
// and a register broadcast per block. One thread, ms, alternated: 2816 x 1024 one token in cache
// 0.141-0.149 -> 0.135, from memory 0.256-0.260 -> 0.245-0.253 (the memory side barely moves: one
// thread's stream rate); 1536 x 576 three tokens 0.107-0.108 -> 0.097-0.098.
template <int T, bool kPieces>
void q8_0_direct_row(const MatmulArgs& a, std::int64_t r, std::int64_t t0) {
    const TokenRows<T> acts(a, t0);
    const std::int64_t nb = a.n / 32;
    const std::uint8_t* row = a.weights + static_cast<std::size_t>(r) * a.row_bytes;
    constexpr std::size_t bb = sizeof(BlockQ8_0);
    const __m256i ones = _mm256_set1_epi16(1);
    // Two accumulators per token so consecutive blocks do not wait on one FMA chain.
    __m256 acc0[T], acc1[T];
    for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
    RowPrefetch<kPieces> prefetch(a, r, t0);
    for (std::int64_t g = 0; g < nb; g += 8) {
        const int count = static_cast<int>(nb - g < 8 ? nb - g : 8);
        const std::uint8_t* gb = row + static_cast<std::size_t>(g) * bb;
        prefetch.reach(static_cast<std::size_t>(g) * bb);
        const Heads8<bb, false> heads(gb, count);
        alignas(32) float scale[T][8];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t)
            _mm256_store_ps(scale[t], _mm256_mul_ps(heads.d, _mm256_loadu_ps(acts.d[t] + g)));
        // The int32 block sums of |w| times the token's activations carrying w's sign.
        auto block = [&](int i, __m256* acc) __attribute__((always_inline)) {
            const std::uint8_t* blk = gb + bb * static_cast<std::size_t>(i);
            const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
            const __m256i u = _mm256_abs_epi8(w);
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                const __m256i x =
                    _mm256_load_si256(reinterpret_cast<const __m256i*>(acts.q[t] + 32 * (g + i)));
                const __m256i dot =
                    _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(x, w)), ones);
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_broadcast_ss(&scale[t][i]),
                                         acc[t]);
            }
        };
        alternate_blocks(count, acc0, acc1, block);
    }
    for (int t = 0; t < T; ++t)
        a.out[(t0 + t) * a.out_stride + r] = hsum(_mm256_add_ps(acc0[t], acc1[t]));
}

// Q5_0 and Q5_1 for decode and small batches (as q8_0_direct_row: the blocks read in place,
// the same per-token arithmetic for any T), 8 blocks at a time by nibble_blocks.
template <Type W, int T, bool kPieces>
void q5_direct_row(const MatmulArgs& a, std::int64_t r, std::int64_t t0) {
    const TokenRows<T> acts(a, t0);
    const std::int64_t nb = a.n / 32;
    const std::uint8_t* row = a.weights + static_cast<std::size_t>(r) * a.row_bytes;
    __m256 acc0[T], acc1[T], corr[T];
    for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = corr[t] = _mm256_setzero_ps();
    RowPrefetch<kPieces> prefetch(a, r, t0);
    for (std::int64_t g = 0; g < nb; g += 8) {
        prefetch.reach(static_cast<std::size_t>(g) * NibbleLayout<W>::kBlockBytes);
        nibble_blocks<W, T>(row, g, static_cast<int>(nb - g < 8 ? nb - g : 8), acts, acc0, acc1,
                            corr);
    }
    for (int t = 0; t < T; ++t) {
        a.out[(t0 + t) * a.out_stride + r] =
            hsum(_mm256_add_ps(_mm256_add_ps(acc0[t], acc1[t]), corr[t]));
    }
}

// Q4_0 and Q4_1 for decode and small batches, with blocks in the integer lanes: 8 blocks at a
// time, lane l holding block l, so that the products of all 32 elements of a block sum in int16
// and int32 lanes and each block's d * d_a applies once per 8 blocks in one FMA (the form of the
// int8 prefill GEMMs, over the activations' interleaved copy, whose 32-byte half of a 16-block
// group holds word v of 8 blocks). The weights arrive in block order, 16 nibble bytes per
// block; four loads of two blocks each and a 4 x 4 transpose of 32-bit words within the 128-bit
// halves put word j of blocks 0-3 and 4-7 in one vector, whose low nibbles are elements
// 4j..4j+3 (activation word j) and high nibbles 16+4j.. (word 4 + j). Eight vpmaddubsw results
// add in int16 (each at most 2 * 15 * 127, eight of them 30480), one vpmaddwd widens them.
// nibble_blocks spends a vpmaddwd, a conversion and an FMA per block on the ports that also
// multiply; this moves that work to shuffles and adds. The row's last, partial group goes
// through nibble_blocks (a lane group costs the same for 2 blocks as for 8). Q5_0/Q5_1 stay
// with nibble_blocks: their fifth bits would need spreading word by word. 576 x 1536 Q4_1, one
// thread, in cache, ms: one token 0.040 -> 0.033, three tokens 0.086 -> 0.069 (Intel Xeon
// 0xCF).
template <Type W, int T, bool kPieces>
void q4_direct_row(const MatmulArgs& a, std::int64_t r, std::int64_t t0) {
    static_assert(W == Type::Q4_0 || W == Type::Q4_1);
    using F = NibbleLayout<W>;
    const TokenRows<T> acts(a, t0);
    const std::int64_t nb = a.n / 32;
    const std::uint8_t* row = a.weights + static_cast<std::size_t>(r) * a.row_bytes;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[T], acc1[T], corr[T];
    for (int t = 0; t < T; ++t) acc[t] = acc1[t] = corr[t] = _mm256_setzero_ps();
    RowPrefetch<kPieces> prefetch(a, r, t0);
    std::int64_t g = 0;
    for (; g + 8 <= nb; g += 8) {
        const std::uint8_t* gb = row + static_cast<std::size_t>(g) * F::kBlockBytes;
        prefetch.reach(static_cast<std::size_t>(g) * F::kBlockBytes);
        const Heads8<F::kBlockBytes, F::kHasMin> heads(gb, 8);
        __m256i quads[4];
        for (int i = 0; i < 4; ++i)
            quads[i] =
                blocks_in_lanes<__m256i>(gb + i * F::kBlockBytes + F::kNibbles, F::kBlockBytes);
        __m256i u[8];
        nibble_words(quads, u);
        const __m256 coef = nibble_coef<W>(heads);
        // Word v of the group's 8 blocks: bytes 64 v + 32 (g % 16 / 8) of its 16-block group.
        const std::size_t x_offset =
            a.act_interleaved_offset + static_cast<std::size_t>(g / 16) * 512 + (g % 16 ? 32 : 0);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
            const std::uint8_t* x = acts.q[t] + x_offset;
            __m256i sum16 =
                _mm256_maddubs_epi16(u[0], _mm256_load_si256(reinterpret_cast<const __m256i*>(x)));
#pragma GCC unroll 8
            for (int v = 1; v < 8; ++v) {
                sum16 = _mm256_add_epi16(
                    sum16,
                    _mm256_maddubs_epi16(
                        u[v], _mm256_load_si256(reinterpret_cast<const __m256i*>(x + 64 * v))));
            }
            const __m256 scale = _mm256_mul_ps(heads.d, _mm256_loadu_ps(acts.d[t] + g));
            acc[t] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(sum16, ones)), scale, acc[t]);
            corr[t] = _mm256_fmadd_ps(coef, _mm256_loadu_ps(acts.s[t] + g), corr[t]);
        }
    }
    if (g < nb) {
        prefetch.reach(static_cast<std::size_t>(g) * F::kBlockBytes);
        nibble_blocks<W, T>(row, g, static_cast<int>(nb - g), acts, acc, acc1, corr);
    }
    for (int t = 0; t < T; ++t) {
        a.out[(t0 + t) * a.out_stride + r] =
            hsum(_mm256_add_ps(_mm256_add_ps(acc[t], acc1[t]), corr[t]));
    }
}

// Q4_K without the packed copy, as q8_0_direct_row does for Q8_0. Per super-block: d * d_a *
// sum_s sc[s] * sum(q * q_a) - dmin * sum_s m[s] * s_a(s), where s_a(s) adds the activation sums of
// the two 16-element halves of sub-block s.
//
// Q4_K (and, with kFifth, Q5_K: the same header and scales, 32 bytes of fifth bits before the
// nibbles) for T tokens, one row; the same per-token arithmetic for any T (see q8_0_direct_row).
template <bool kFifth, int T, bool kPieces>
void q4_k_direct_row(const MatmulArgs& a, std::int64_t r, std::int64_t t0) {
    const TokenRows<T> acts(a, t0);
    const std::int64_t nb = a.n / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const std::uint8_t* row = a.weights + static_cast<std::size_t>(r) * a.row_bytes;
    __m256 acc[T], min_acc[T];
    for (int t = 0; t < T; ++t) acc[t] = min_acc[t] = _mm256_setzero_ps();
    RowPrefetch<kPieces> prefetch(a, r, t0);
    for (std::int64_t b = 0; b < nb; ++b) {
        constexpr std::size_t kBlockBytes = kFifth ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
        const std::uint8_t* blk = row + static_cast<std::size_t>(b) * kBlockBytes;
        prefetch.reach(static_cast<std::size_t>(b) * kBlockBytes);
        const Q4KScalesMins sm = q4_k_scales_mins_words(blk + 4);
        // The eight scales as int16 in both 128-bit lanes: one vpshufb spreads any of them
        // over a vector (a broadcast from a general register took two or three uops).
        const __m256i sc16 = _mm256_broadcastsi128_si256(
            _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sm.sc))));
        const __m256 mins = _mm256_cvtepi32_ps(
            _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sm.m))));
        const __m256 mins_d = _mm256_mul_ps(mins, _mm256_set1_ps(half_to_float(blk + 2)));
        const float d = half_to_float(blk);
        __m256i isum[T];
        for (int t = 0; t < T; ++t) {
            // The activation sums of the 8 sub-blocks: pairs of the 16 half sums. hadd leaves
            // them as (0 1 4 5 | 2 3 6 7); the 64-bit permute puts them in order.
            const float* s16 = acts.s[t] + 16 * b;
            const __m256 pairs = _mm256_castpd_ps(_mm256_permute4x64_pd(
                _mm256_castps_pd(_mm256_hadd_ps(_mm256_loadu_ps(s16), _mm256_loadu_ps(s16 + 8))),
                0xD8));
            min_acc[t] = _mm256_fmadd_ps(mins_d, pairs, min_acc[t]);
            isum[t] = _mm256_setzero_si256();
        }
        const std::uint8_t* qs = blk + offsetof(BlockQ4_K, qs) + (kFifth ? 32 : 0);
        [[maybe_unused]] __m256i qh;
        if constexpr (kFifth)
            qh =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + offsetof(BlockQ5_K, qh)));
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if constexpr (kFifth) {
                // Bit s of qh[l] is bit 4 of element 32s + l (sub-blocks 2c and 2c + 1).
                lo = _mm256_or_si256(lo, bit_to(qh, 2 * c, 4));
                hi = _mm256_or_si256(hi, bit_to(qh, 2 * c + 1, 4));
            }
            const __m256i sc_lo =
                _mm256_shuffle_epi8(sc16, _mm256_set1_epi16(0x0100 + 0x0202 * 2 * c));
            const __m256i sc_hi =
                _mm256_shuffle_epi8(sc16, _mm256_set1_epi16(0x0100 + 0x0202 * (2 * c + 1)));
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                const std::uint8_t* x = acts.q[t] + 256 * b;
                const __m256i xlo = _mm256_load_si256(reinterpret_cast<const __m256i*>(x + 64 * c));
                const __m256i xhi =
                    _mm256_load_si256(reinterpret_cast<const __m256i*>(x + 64 * c + 32));
                const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xlo), sc_lo);
                const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xhi), sc_hi);
                isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(plo, phi));
            }
        }
        for (int t = 0; t < T; ++t) {
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * acts.d[t][b]),
                                     acc[t]);
        }
    }
    for (int t = 0; t < T; ++t)
        a.out[(t0 + t) * a.out_stride + r] = hsum(acc[t]) - hsum(min_acc[t]);
}

// The K-quants with 16 sub-blocks of 16 (Q2_K, Q3_K, Q6_K) for T tokens, one row, without the
// packed copy: per super-block the 16 scales and offset terms are decoded in registers
// (k16_scales, pack_simd256.h), each 32-element chunk is unpacked (k16_chunk) and multiplied
// with the tokens' int8 blocks, and pmaddwd applies the chunk's two sub-block scales. As
// pack_k_row describes: dot = d * d_a * sum_j sc[j] * sum(u * q_a) + sum_j coef[j] * s16_a[j].
template <Type W, int T, bool kPieces>
void k16_direct_row(const MatmulArgs& a, std::int64_t r, std::int64_t t0) {
    const TokenRows<T> acts(a, t0);
    const std::int64_t nb = a.n / 256;
    const std::size_t block_bytes = a.row_bytes / static_cast<std::size_t>(nb);
    const std::uint8_t* row = a.weights + static_cast<std::size_t>(r) * a.row_bytes;
    __m256 acc[T], coef_acc[T];
    for (int t = 0; t < T; ++t) acc[t] = coef_acc[t] = _mm256_setzero_ps();
    RowPrefetch<kPieces> prefetch(a, r, t0);
    for (std::int64_t b = 0; b < nb; ++b) {
        const std::uint8_t* blk = row + static_cast<std::size_t>(b) * block_bytes;
        prefetch.reach(static_cast<std::size_t>(b) * block_bytes);
        const K16Scales k = k16_scales<W>(blk);
        __m256i isum[T];
        for (int t = 0; t < T; ++t) {
            const float* s16 = acts.s[t] + 16 * b;
            coef_acc[t] = _mm256_fmadd_ps(k.coef[0], _mm256_loadu_ps(s16), coef_acc[t]);
            coef_acc[t] = _mm256_fmadd_ps(k.coef[1], _mm256_loadu_ps(s16 + 8), coef_acc[t]);
            isum[t] = _mm256_setzero_si256();
        }
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) {
            const __m256i u = k16_chunk<W>(blk, c);
            const __m256i sc = chunk_scales16(k.sc16, c);
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                const __m256i x = _mm256_load_si256(
                    reinterpret_cast<const __m256i*>(acts.q[t] + 256 * b + 32 * c));
                isum[t] =
                    _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), sc));
            }
        }
        for (int t = 0; t < T; ++t) {
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]),
                                     _mm256_set1_ps(k.d * acts.d[t][b]), acc[t]);
        }
    }
    for (int t = 0; t < T; ++t)
        a.out[(t0 + t) * a.out_stride + r] = hsum(acc[t]) + hsum(coef_acc[t]);
}

// The direct row kernel of format W for T tokens.
template <Type W, int T, bool kPieces>
void direct_row(const MatmulArgs& a, std::int64_t r, std::int64_t t0) {
    if constexpr (W == Type::Q4_K || W == Type::Q5_K) {
        q4_k_direct_row<W == Type::Q5_K, T, kPieces>(a, r, t0);
    } else if constexpr (W == Type::Q6_K || W == Type::Q3_K || W == Type::Q2_K) {
        k16_direct_row<W, T, kPieces>(a, r, t0);
    } else if constexpr (W == Type::Q8_0) {
        q8_0_direct_row<T, kPieces>(a, r, t0);
    } else if constexpr (W == Type::Q4_0 || W == Type::Q4_1) {
        q4_direct_row<W, T, kPieces>(a, r, t0);
    } else {
        q5_direct_row<W, T, kPieces>(a, r, t0);
    }
}

template <Type W>
void run_direct(const MatmulArgs& a) {
    for_rows_in_token_groups(a, [&](std::int64_t r, std::int64_t t0, auto tokens, auto pieces) {
        direct_row<W, decltype(tokens)::value, decltype(pieces)::value>(a, r, t0);
    });
}

}  // namespace

bool matmul_avx2(const MatmulArgs& args) {
    if (args.interleaved) {
        // The K-quants (Q2_K-Q6_K): interleaved_kquant_avx2.cpp.
        if (matmul_interleaved_kquant_avx2(args)) return true;
        // The lane GEMM re-packs its rows per call (Q8_0: |q| and signs); its tile then runs
        // faster than this layout's own tile, which needs no packing, from some token count on.
        // One thread, Zen 3, cycles per (token, row, block), lane GEMM / own tile: Q8_0 4096 x 640
        // 16 tokens 2.11 / 1.78, 24 1.93 / 1.84, 40 1.79 / 1.80, 128 1.73 / 1.82; Q4_1 1536 x 576
        // (the lane GEMM packing from rows) 16 tokens 1.51 / 1.58, 24 1.34 / 1.58. Q5_0/Q5_1 as
        // Q4: 4096 x 640, 9 tokens on the tile 2.09, 16 on the lane GEMM 1.73.
        const std::int64_t kLaneGemmMinTokens =
            args.type == Type::Q8_0 ? 40 : kPanelMinTokensInternal;
        if (args.int8_gemm && args.tokens >= kLaneGemmMinTokens)
            return args.avx_vnni ? gemm_int8_q32_avxvnni(args) : gemm_int8_q32_avx2(args);
        return matmul_interleaved_avx2(args);
    }
    if (args.int8_gemm && args.tokens >= kPanelMinTokensInternal &&
        (gemm_int8_avx2(args) ||
         (args.avx_vnni ? gemm_int8_q32_avxvnni(args) : gemm_int8_q32_avx2(args))))
        return true;
    // Below the prefill panels' threshold (they take 16 tokens and more in matmul_rows): the
    // decode kernels, for one token or a few, with the same per-token arithmetic.
    if (args.tokens < kPanelMinTokensInternal) {
        switch (args.type) {
            case Type::Q8_0:
                run_direct<Type::Q8_0>(args);
                return true;
            case Type::Q4_0:
                run_direct<Type::Q4_0>(args);
                return true;
            case Type::Q4_1:
                run_direct<Type::Q4_1>(args);
                return true;
            case Type::Q5_0:
                run_direct<Type::Q5_0>(args);
                return true;
            case Type::Q5_1:
                run_direct<Type::Q5_1>(args);
                return true;
            case Type::Q4_K:
                run_direct<Type::Q4_K>(args);
                return true;
            case Type::Q5_K:
                run_direct<Type::Q5_K>(args);
                return true;
            case Type::Q6_K:
                run_direct<Type::Q6_K>(args);
                return true;
            case Type::Q3_K:
                run_direct<Type::Q3_K>(args);
                return true;
            case Type::Q2_K:
                run_direct<Type::Q2_K>(args);
                return true;
            case Type::F16:
                run_f<FAvx2Small<Type::F16>>(args);
                return true;
            case Type::BF16:
                run_f<FAvx2Small<Type::BF16>>(args);
                return true;
            default:
                break;
        }
    }
    switch (args.type) {
        case Type::F32:
            run_f<FAvx2<Type::F32>>(args);
            return true;
        case Type::F16:
            run_f<FAvx2<Type::F16>>(args);
            return true;
        case Type::BF16:
            run_f<FAvx2<Type::BF16>>(args);
            return true;
        case Type::Q8_0:
            run_q32<Q32Avx2<true>>(args);
            return true;
        case Type::Q4_0:
        case Type::Q4_1:
        case Type::Q5_0:
        case Type::Q5_1:
            run_q32<Q32Avx2<false>>(args);
            return true;
        case Type::Q2_K:
        case Type::Q3_K:
        case Type::Q4_K:
        case Type::Q5_K:
        case Type::Q6_K:
            run_k<KAvx2>(args);
            return true;
    }
    return false;
}

}  // namespace tokenscope::tensor::detail
