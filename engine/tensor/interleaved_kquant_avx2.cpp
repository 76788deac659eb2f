// K-quant rows (Q2_K-Q6_K) stored interleaved (interleaved_rows.h) times a few tokens on AVX2:
// decode and speculative verification (under 16 tokens); prefill takes the K-quant lane GEMM
// (gemm_int8_avx2.cpp), whose packer reads the same groups (pack_q4_k_interleaved,
// pack_k16_interleaved).
//
// The arithmetic is that GEMM's operation for operation, so every token count gives a token the
// same bits, and those of the GEMM over the file's rows (test_matmul). Per super-block b, row r
// (a lane) and token t:
//   acc     = sum over sub-blocks j of pmaddwd(sum of pmaddubsw(u, x) over j's words, (sc, sc))
//   f[r][t] = fma(coef_r[j], s_t[j], f[r][t])                 for every offset term j in order
//   f[r][t] = fma(float(acc), d_r * d_t, f[r][t])
// Q4_K and Q5_K: u the nibbles (with Q5_K's fifth bit), four words per pmaddwd (pairs add up to
// at most 4 * 2 * 31 * 127 in int16), coef = -dmin * m per 32-element sub-block against the
// sums of 32 activations.
// Q6_K: u the 6-bit codes, two words per pmaddwd (2 * 2 * 63 * 127), sc the int8 scale of each
// 16 elements, coef = -32 * d * sc against the sums of 16. Q3_K: u = q + 4 (at most 7), four
// words per pmaddwd, sc its 6-bit scale minus 32, coef = -4 * d * sc; Q2_K: u the 2-bit codes,
// sc the low nibble of each scale byte, coef = -dmin * its high nibble. The integer sums are
// exact, and so is every coef (an f16 times a small integer). Unlike the GEMM, which expands each
// call's rows to one byte per code first (about as long as a 16-token tile), the tile makes the
// codes from the stored bits itself and unpacks the scales per super-block, so one token costs one
// pass over the stored bytes.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "tensor/int8_lanes_avx2.h"
#include "tensor/interleaved_rows.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"

namespace tokenscope::tensor::detail {

namespace {

constexpr int H = 2;  // registers of 8 rows: a group of 16
constexpr int kGroupRows = kLanes * H;
// 2 x 6 = 12 accumulators, as the lane GEMM.
constexpr int kTileTokens = 6;
// Q2_K, Q3_K and Q6_K tiles of up to this many tokens go one half (8 rows) at a time with every
// kind unrolled (k16_products_by_halves); more tokens take k16_products. Q4_K and Q5_K tiles of
// up to kQ4HalvesApartMaxT tokens go one half at a time in q4_k_chunks.
constexpr int kHalvesApartMaxT = 4;
constexpr int kQ4HalvesApartMaxT = 2;

// One half's products of a sub-block run for one token: the int16 sums of the word pairs
// (pmaddubsw of w[v] and x(v), added) scaled by sc (pmaddwd) into acc. x(v) gives word v's
// broadcast activation bytes: already loaded (multiply_words) or loaded as needed
// (multiply_words_of_half; loaded all first there, Q3_K at 4 tokens ran 2-4 % slower).
// Q3_K adds its offset to the pairs first (offset: q3_k_offset_pairs); the others pass
// NoOffset.
template <int kWords, class X, class Offset>
[[gnu::always_inline]] inline void add_word_products(const __m256i (&w)[kWords], const X& x,
                                                     const __m256i& sc, __m256i& acc,
                                                     const Offset offset) {
    __m256i pairs = _mm256_maddubs_epi16(w[0], x(0));
    for (int v = 1; v < kWords; ++v)
        pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(w[v], x(v)));
    if constexpr (!std::is_same_v<Offset, NoOffset>) pairs = _mm256_add_epi16(pairs, offset);
    __m256i sum = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, sc));
    keep_in_order(sum);
    acc = sum;
}

// The products of one sub-block run of words for every token: w[h][v] holds word v's codes of
// half h (8 rows), each token's activation words (4 bytes each, from `at`) broadcast once for
// both halves.
template <int T, int kWords, class Offset>
inline void multiply_words(const __m256i (&w)[H][kWords], const TokenRows<T>& acts, std::size_t at,
                           const __m256i (&sc)[H], __m256i (&acc)[H][T], const Offset& offset) {
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
        __m256i x[kWords];
        for (int v = 0; v < kWords; ++v) {
            x[v] = broadcast4<__m256i>(acts.q[t] + at + 4 * static_cast<std::size_t>(v));
            keep_in_order(x[v]);
        }
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h)
            add_word_products(
                w[h], [&](int v) { return x[v]; }, sc[h], acc[h][t], offset(t));
    }
}

template <Type W, int T>
constexpr bool kHalvesApart =
    (W == Type::Q2_K || W == Type::Q3_K || W == Type::Q6_K) && T <= kHalvesApartMaxT;

// multiply_words for one half alone: its kWords code words, its scales, its accumulators.
template <int T, int kWords, class Offset>
inline void multiply_words_of_half(const __m256i (&w)[kWords], const TokenRows<T>& acts,
                                   std::size_t at, const __m256i& sc, __m256i (&acc)[T],
                                   const Offset& offset) {
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
        add_word_products(
            w,
            [&](int v) {
                return broadcast4<__m256i>(acts.q[t] + at + 4 * static_cast<std::size_t>(v));
            },
            sc, acc[t], offset(t));
    }
}

// What the products of sub-block j add to their pairs for token t: Q3_K's offset
// (q3_k_offset_pairs, int8_lanes_avx2.h), nothing for the others.
template <Type W, int T>
inline auto offset_pairs(const TokenRows<T>& acts, std::size_t b, int j) {
    return [&acts, b, j](int t) {
        if constexpr (kQ3KIntegerOffsets<W>)
            return q3_k_offset_pairs(acts.offset16_low[t] + 16 * b + static_cast<std::size_t>(j));
        else
            return NoOffset{};
    };
}

// Both product loops ask for the memory ahead (prefetch_ahead) one piece per pass over the
// super-block's group, 9 or 7 lines at a time: a group's 36 (Q4_K) or 53 (Q6_K) lines asked for
// at its start are more than a core keeps in flight, and one token from memory then read 13-23 %
// (Q4_K) and 20-25 % (Q6_K) slower than the row kernels on two threads (Zen 3); spread, about as
// fast as them on two threads and up to 25 % faster on one. (A first spread version went through
// a helper taking MatmulArgs; GCC did not inline it, the object held no prefetch instruction of
// its own, and it read at half the rate. Why that copy was so slow was not found.)

// Q4_K and Q5_K: chunk c (64 elements) of the super-block; its 8 words' low nibbles are
// sub-block 2c, the high ones 2c + 1 (q4_k_code_word), four words per pmaddwd as the lane GEMM
// (Q5_K's codes up to 31: four words' pairs add up to at most 4 * 2 * 31 * 127 in int16).
// Chunks c0 <= c < c1, Q5_K's fifth bits made as kFifth says (q4_k_code_word).
template <Type W, int T, FifthBit kFifth, int c0, int c1>
inline void q4_k_chunks(const std::uint8_t* block, const TokenRows<T>& acts, std::size_t b,
                        const Q4KGroupScales& s, __m256i (&acc)[H][T], const std::uint8_t* end,
                        WeightPrefetch level) {
    constexpr std::size_t kPiece = kInterleavedBlock<W>.bytes / 4;
#pragma GCC unroll 1
    for (int c = c0; c < c1; ++c) {
        prefetch_ahead(block + static_cast<std::size_t>(c) * kPiece, kPiece, end, level);
#pragma GCC unroll 2
        for (int high = 0; high < 2; ++high) {
            const int sb = 2 * c + high;
#pragma GCC unroll 2
            for (int gg = 0; gg < 8; gg += 4) {
                const std::size_t at = 256 * b + static_cast<std::size_t>(32 * sb + 4 * gg);
                if constexpr (T <= kQ4HalvesApartMaxT) {
                    // One half at a time, as k16_kind_by_halves and for the same reason. One
                    // thread, 2816 x 1024 in cache, GB/s: Q5_K 1 token 23.2-23.3 -> 26.1-26.7,
                    // 2 tokens 17.8 -> 18.3-18.6; Q4_K 2 tokens 20.6-20.9 -> 21.6-22.2, 1 token
                    // the same. At 3-4 tokens it was up to 10 % slower.
#pragma GCC unroll 2
                    for (int h = 0; h < H; ++h) {
                        __m256i w[4];
                        for (int v = 0; v < 4; ++v)
                            w[v] = q4_k_code_word<W, kFifth>(block, h, 8 * c + gg + v, high);
                        multiply_words_of_half<T, 4>(w, acts, at, s.sc[sb][h], acc[h], NoOffsets{});
                    }
                } else {
                    __m256i w[H][4];
                    for (int v = 0; v < 4; ++v) {
                        for (int h = 0; h < H; ++h)
                            w[h][v] = q4_k_code_word<W, kFifth>(block, h, 8 * c + gg + v, high);
                    }
                    multiply_words<T, 4>(w, acts, at, s.sc[sb], acc, NoOffsets{});
                }
            }
        }
    }
}

// Q5_K's one- and two-token tiles take the cheaper fifth bits (FifthBit), in two loops over the
// chunks, c < 2 and c >= 2; the rest one loop with the compare.
template <Type W, int T>
inline void q4_k_products(const std::uint8_t* block, const TokenRows<T>& acts, std::size_t b,
                          const Q4KGroupScales& s, __m256i (&acc)[H][T], const std::uint8_t* end,
                          WeightPrefetch level) {
    if constexpr (W == Type::Q5_K && T <= 2) {
        q4_k_chunks<W, T, FifthBit::kLookup, 0, 2>(block, acts, b, s, acc, end, level);
        q4_k_chunks<W, T, FifthBit::kMinimum, 2, 4>(block, acts, b, s, acc, end, level);
    } else {
        q4_k_chunks<W, T, FifthBit::kCompare, 0, 4>(block, acts, b, s, acc, end, level);
    }
}

// Q2_K, Q3_K and Q6_K: for each half n (128 elements) and kind k (32 elements), 8 words of
// codes (k16_code_word), the 16-element sub-block of words v..v + 3 being 8 n + 2 k + v / 4.
// Q6_K's 6-bit codes take two words per pmaddwd (a pair is up to 2 * 63 * 127); Q2_K's and
// Q3_K's (at most 7) the whole sub-block's four, as the lane GEMM. The kinds stay a loop: with
// them unrolled too (16 bodies) Q6_K's 3 tokens ran 3.6-3.8 cycles per (token, row, 32
// elements) against 2.7 and 5-6 tokens 2.7 against 2.2-2.3 (one thread, 1024 x 1024, in cache).
template <Type W, int T>
inline void k16_products(const std::uint8_t* block, const TokenRows<T>& acts, std::size_t b,
                         const K16GroupScales& s, __m256i (&acc)[H][T], const std::uint8_t* end,
                         WeightPrefetch level) {
    constexpr int kWords = W == Type::Q6_K ? 2 : 4;
    constexpr std::size_t kPiece = kInterleavedBlock<W>.bytes / 8;
#pragma GCC unroll 1
    for (int n = 0; n < 2; ++n) {
#pragma GCC unroll 1
        for (int k = 0; k < 4; ++k) {
            prefetch_ahead(block + static_cast<std::size_t>(4 * n + k) * kPiece, kPiece, end,
                           level);
#pragma GCC unroll 4
            for (int v = 0; v < 8; v += kWords) {
                __m256i w[H][kWords];
                for (int i = 0; i < kWords; ++i) {
                    for (int h = 0; h < H; ++h) w[h][i] = k16_code_word<W>(block, h, n, k, v + i);
                }
                const int j = 8 * n + 2 * k + v / 4;
                multiply_words<T, kWords>(
                    w, acts, 256 * b + static_cast<std::size_t>(128 * n + 32 * k + 4 * v), s.sc[j],
                    acc, offset_pairs<W, T>(acts, b, j));
            }
        }
    }
}

// Q2_K, Q3_K and Q6_K at 1-4 tokens (kHalvesApart): kind k of half n, one 8-row half of the
// group at a time, with n and k known at compile time (k16_products_by_halves unrolls all
// eight). The same integer operations in the same order as k16_products, so the same bits. Why:
// with both halves' code words, the broadcasts and the accumulators live at once, and the kinds
// a loop (shift counts and bit_to's direction in registers, the qs and hmask words kept on the
// stack across it), GCC spilled: `perf annotate` of the one-token Q3_K tile put 17 % of its
// samples on vmovdqa. One thread, 2816 x 1024 in cache, GB/s, k16_products -> this:
// - Q3_K 1 token 12.0-12.4 -> 15.0-15.3, 2 tokens 9.7-9.8 -> 10.9, 3 tokens 8.2-8.3 -> 8.7;
// - Q2_K 1 token 14.6-14.9 -> 16.2-16.6, 2 tokens 9.8 -> 11.0, 3 tokens 8.0 -> 8.5;
// - Q6_K 1 token 24.8 -> 26.2-26.6, 2 tokens 19.1-19.2 -> 20.3-20.5, 3 tokens 14.9-15.6
// -> 16.8-16.9; 4 tokens +1-2 %. At 5 and 6 tokens Q2_K/Q3_K were 15-25 % slower (each half
// broadcasts the activations again, and the bodies grow).
template <Type W, int T, int n, int k>
inline void k16_kind_by_halves(const std::uint8_t* block, const TokenRows<T>& acts, std::size_t b,
                               const K16GroupScales& s, __m256i (&acc)[H][T],
                               const std::uint8_t* end, WeightPrefetch level) {
    constexpr std::size_t kPiece = kInterleavedBlock<W>.bytes / 8;
    prefetch_ahead(block + static_cast<std::size_t>(4 * n + k) * kPiece, kPiece, end, level);
    constexpr int kWords = W == Type::Q6_K ? 2 : 4;
#pragma GCC unroll 4
    for (int v = 0; v < 8; v += kWords) {
        const int j = 8 * n + 2 * k + v / 4;
        const std::size_t at = 256 * b + static_cast<std::size_t>(128 * n + 32 * k + 4 * v);
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) {
            __m256i w[kWords];
            for (int i = 0; i < kWords; ++i) w[i] = k16_code_word<W>(block, h, n, k, v + i);
            multiply_words_of_half<T, kWords>(w, acts, at, s.sc[j][h], acc[h],
                                              offset_pairs<W, T>(acts, b, j));
        }
    }
}

template <Type W, int T, int... c>
inline void k16_products_by_halves(const std::uint8_t* block, const TokenRows<T>& acts,
                                   std::size_t b, const K16GroupScales& s, __m256i (&acc)[H][T],
                                   const std::uint8_t* end, WeightPrefetch level,
                                   std::integer_sequence<int, c...>) {
    (k16_kind_by_halves<W, T, c / 4, c % 4>(block, acts, b, s, acc, end, level), ...);
}

// The group of rows r0..r0+15 (stored from row r0's address) times tokens t0..t0+T-1, asking for
// the stream ahead as the row kernels do.
template <Type W, int T>
void tile(const MatmulArgs& a, std::int64_t r0, std::int64_t t0) {
    const std::uint8_t* group = a.weights + static_cast<std::size_t>(r0) * a.row_bytes;
    constexpr bool kQ4 = W == Type::Q4_K || W == Type::Q5_K;  // else Q2_K, Q3_K or Q6_K
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    using Scales = std::conditional_t<kQ4, Q4KGroupScales, K16GroupScales>;
    const auto nb = static_cast<std::size_t>(a.n / 256);
    const TokenRows<T> acts(a, t0);
    const std::uint8_t* end = prefetch_end(a);
    Scales s;
    __m256 f[H][T] = {};
#pragma GCC unroll 1
    for (std::size_t b = 0; b < nb; ++b) {
        const std::uint8_t* block = group + b * kLayout.bytes;
        __m256i acc[H][T] = {};
        const auto bi = static_cast<std::int64_t>(b);
        // Q2_K, Q3_K and Q6_K issue their 16 offset terms before the products
        // (int8_lanes_avx2.h says why); Q4_K/Q5_K's eight after them, where they cost least (at
        // 15 tokens 4 % less than before them, the same at 1-8 tokens).
        if constexpr (kQ4) {
            unpack_q4_k_group_scales<W>(block, s);
            q4_k_products<W, T>(block, acts, b, s, acc, end, a.prefetch_level);
            kquant_offset_update<kQ4>(
                acts, bi, [&](int j, int h) { return s.coef[j][h]; }, f);
        } else {
            // Each offset term goes into f as the unpacking makes it (kquant_offset_update's
            // order, so the same bits) instead of through 32 vectors stored and loaded again.
            // Q3_K has none: its offset is in the integer sums (q3_k_offset_pairs).
            unpack_k16_group_scales<W>(
                block, s, [&](int j, int h, __m256 c) __attribute__((always_inline)) {
                    if constexpr (!kQ3KIntegerOffsets<W>) {
                        for (int t = 0; t < T; ++t) {
                            f[h][t] = _mm256_fmadd_ps(
                                c, _mm256_broadcast_ss(acts.s[t] + 16 * b + j), f[h][t]);
                        }
                    }
                });
            if constexpr (kHalvesApart<W, T>)
                k16_products_by_halves<W, T>(block, acts, b, s, acc, end, a.prefetch_level,
                                             std::make_integer_sequence<int, 8>{});
            else
                k16_products<W, T>(block, acts, b, s, acc, end, a.prefetch_level);
        }
        kquant_scale_update(
            acts, bi, acc, [&](int h) { return s.d[h]; }, f);
    }
    store_tile_rows(a, f, r0, kGroupRows, t0);
}

template <Type W>
void run_few(const MatmulArgs& a) {
    for_groups_in_even_token_tiles<kTileTokens>(a, kGroupRows,
                                                [&](std::int64_t r, std::int64_t t0, auto tokens) {
                                                    tile<W, decltype(tokens)::value>(a, r, t0);
                                                });
}

}  // namespace

bool matmul_interleaved_kquant_avx2(const MatmulArgs& a) {
    void (*run)(const MatmulArgs&) = nullptr;
    switch (a.type) {
        case Type::Q2_K:
            run = run_few<Type::Q2_K>;
            break;
        case Type::Q3_K:
            run = run_few<Type::Q3_K>;
            break;
        case Type::Q4_K:
            run = run_few<Type::Q4_K>;
            break;
        case Type::Q5_K:
            run = run_few<Type::Q5_K>;
            break;
        case Type::Q6_K:
            run = run_few<Type::Q6_K>;
            break;
        default:
            return false;
    }
    // From 16 tokens the lane GEMM, its packer expanding the stored codes to bytes: one
    // thread, Zen 3, Q4_K 2816 x 1024, cycles per (token, row, 32 elements), lane GEMM / this
    // tile: 16 tokens 1.36 / 1.33, 24 1.20 / 1.24, 40 1.14 / 1.25, 128 1.10 / 1.27.
    if (a.tokens >= kPanelMinTokensInternal) return gemm_int8_avx2(a);
    run(a);
    return true;
}

}  // namespace tokenscope::tensor::detail
