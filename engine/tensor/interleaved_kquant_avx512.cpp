// K-quant rows (Q2_K-Q6_K) stored interleaved (interleaved_rows.h) times a few tokens on AVX-512
// (BW + VNNI): decode and speculative verification. A group's 16 rows fill the 32-bit lanes of
// one register (its two stored halves of 8 rows side by side), a token's 4 activation bytes are
// broadcast to every lane, and vpdpbusd adds 4 products per lane into a sub-block's sum, which one
// vpmulld scales into the super-block's integer sum: the operations of the AVX-512 K-quant lane
// GEMM (gemm_int8_avx512.cpp), here on the stored bits instead of a packed copy. The integer sums
// are exact and the float update is the GEMM's, step for step, so a token gets the same bits at
// every token count, and the same as from the AVX2 tile and GEMMs (test_matmul).
//
// Why: the AVX-512 row kernels (direct_avx512.cpp) multiply one row at a time, so every row and
// super-block pays for its own scale unpacking, lane permutes, float update and a horizontal sum
// at the end. Q2_K and Q3_K decode were bound by that arithmetic, not by memory (about 29-36
// cycles per row and super-block on Zen 4, 7.6-10.1 GB/s per core in cache); with 16 rows in the
// lanes the scales of a super-block are unpacked once for 16 rows and nothing is reduced across
// lanes.
// docs/benchmarks.md (thirtieth pass) has the measurements.
#include "tensor/avx512_gcc_warnings.h"  // first: it silences a GCC 12 false positive

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/group_halves_avx512.h"
#include "tensor/int8_lanes_avx2.h"
#include "tensor/interleaved_rows.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"

namespace tokenscope::tensor::detail {

namespace {

constexpr int kGroupRows = 16;  // one register of rows: a whole interleaved group
// Tokens per tile: a tile keeps 4 sub-block sums, the super-block sum and the float result per
// token (6 x 4 = 24 of the 32 registers).
constexpr int kTileTokens = 4;

inline __m512i bytes(int v) {
    return _mm512_set1_epi8(static_cast<char>(v));
}

// Byte k (0-3) of each lane as an unsigned int32 (the lane's scale or min of a sub-block).
inline __m512i lane_byte(__m512i v, int k) {
    return k == 3 ? _mm512_srli_epi32(v, 24)
                  : _mm512_and_si512(_mm512_srli_epi32(v, 8 * k), _mm512_set1_epi32(0xFF));
}

// Byte k of each lane as a signed int32.
inline __m512i lane_byte_signed(__m512i v, int k) {
    return _mm512_srai_epi32(k == 3 ? v : _mm512_slli_epi32(v, 24 - 8 * k), 24);
}

// One super-block's scales of a group, per lane (row): sc the integer scale of each sub-block,
// coef its offset term (Q4_K/Q5_K: one per 32 elements, -dmin * m; Q2_K: -dmin * m, Q6_K:
// -32 d sc, one per 16; Q3_K none, its offset is in the integers), d the super-block scale. The
// values (and the float operations that make coef) are those of unpack_q4_k_group_scales /
// unpack_k16_group_scales (int8_lanes_avx2.h), which the lane GEMM's packer stores
// (interleavedEqualsTheLaneGemmOfRows compares the two bit for bit). Written again in 512-bit
// registers rather than joining those functions' two 8-row halves: joined, one token times 2816 x
// 1024 in cache took 0.043 / 0.060 / 0.079 / 0.082 ms (Q4_K, Q2_K, Q6_K, Q3_K) against 0.037 /
// 0.044 / 0.057 / 0.064 (Zen 4, four alternated runs each).
template <int kSubBlocks>
struct GroupScales {
    __m512i sc[kSubBlocks];
    __m512 coef[kSubBlocks];
    __m512 d;
};

template <Type W>  // Q4_K or Q5_K
[[gnu::always_inline]] inline void unpack_q4_k_scales(const std::uint8_t* block,
                                                      GroupScales<8>& out) {
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    const std::uint8_t* sub = block + kLayout.sub_scales;
    constexpr std::size_t kHalf = 8 * kLayout.sub_scale_bytes;
    const __m512i w0 = both_halves(sub, kHalf);
    const __m512i w1 = both_halves(sub + 32, kHalf);
    const __m512i w2 = both_halves(sub + 64, kHalf);
    // Byte i of each lane: sub-block i (low 6 bits of words 0 and 1), and 4 + i (low 4 bits from
    // word 2's nibbles, top 2 from bits 6-7 of words 0 and 1).
    const __m512i scales[2] = {
        _mm512_and_si512(w0, bytes(0x3F)),
        _mm512_or_si512(_mm512_and_si512(w2, bytes(0x0F)),
                        _mm512_and_si512(_mm512_srli_epi32(w0, 2), bytes(0x30)))};
    const __m512i mins[2] = {
        _mm512_and_si512(w1, bytes(0x3F)),
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), bytes(0x0F)),
                        _mm512_and_si512(_mm512_srli_epi32(w1, 2), bytes(0x30)))};
    const __m512 neg_dmin = _mm512_castsi512_ps(_mm512_xor_si512(
        _mm512_castps_si512(half16(block + kLayout.mins)), _mm512_set1_epi32(INT32_MIN)));
    out.d = half16(block + kLayout.scales);
    for (int s = 0; s < 8; ++s) {
        out.sc[s] = lane_byte(scales[s / 4], s % 4);
        out.coef[s] = _mm512_mul_ps(_mm512_cvtepi32_ps(lane_byte(mins[s / 4], s % 4)), neg_dmin);
    }
}

template <Type W>  // Q2_K, Q3_K or Q6_K
[[gnu::always_inline]] inline void unpack_k16_scales(const std::uint8_t* block,
                                                     GroupScales<16>& out) {
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    const std::uint8_t* sub = block + kLayout.sub_scales;
    constexpr std::size_t kHalf = 8 * kLayout.sub_scale_bytes;
    const __m512 d = half16(block + kLayout.scales);
    out.d = d;
    __m512 factor;
    if constexpr (W == Type::Q2_K) {
        factor = _mm512_castsi512_ps(_mm512_xor_si512(
            _mm512_castps_si512(half16(block + kLayout.mins)), _mm512_set1_epi32(INT32_MIN)));
    } else {
        factor = _mm512_mul_ps(_mm512_set1_ps(W == Type::Q6_K ? -32.0f : -4.0f), d);
    }
    (void)factor;  // Q3_K and Q6_K have no offset terms here (kAvx512OffsetFactor)
    for (int i = 0; i < 4; ++i) {
        // Word i: the scales of sub-blocks 4i..4i+3 in bytes 0-3 of a lane.
        if constexpr (W == Type::Q2_K) {
            const __m512i v = both_halves(sub + 32 * i, kHalf);
            const __m512i sc = _mm512_and_si512(v, bytes(0x0F));
            const __m512i m = _mm512_and_si512(_mm512_srli_epi32(v, 4), bytes(0x0F));
            for (int k = 0; k < 4; ++k) {
                out.sc[4 * i + k] = lane_byte(sc, k);
                out.coef[4 * i + k] = _mm512_mul_ps(_mm512_cvtepi32_ps(lane_byte(m, k)), factor);
            }
            continue;
        }
        __m512i v;
        if constexpr (W == Type::Q6_K) {
            v = both_halves(sub + 32 * i, kHalf);
        } else if constexpr (W == Type::Q3_K) {
            const __m512i nibbles = both_halves(sub + 32 * (i % 2), kHalf);
            const __m512i low =
                _mm512_and_si512(i < 2 ? nibbles : _mm512_srli_epi16(nibbles, 4), bytes(0x0F));
            // Bits 2i, 2i + 1 of word 2 to bits 4, 5.
            const __m512i tops = both_halves(sub + 64, kHalf);
            const __m512i top = i == 0   ? _mm512_slli_epi16(tops, 4)
                                : i == 1 ? _mm512_slli_epi16(tops, 2)
                                : i == 2 ? tops
                                         : _mm512_srli_epi16(tops, 2);
            v = _mm512_sub_epi8(_mm512_or_si512(low, _mm512_and_si512(top, bytes(0x30))),
                                bytes(32));
        }
        for (int k = 0; k < 4; ++k) {
            out.sc[4 * i + k] = lane_byte_signed(v, k);
            // Q3_K's and Q6_K's offsets are in the integer sums (k16_super_block).
            if constexpr (kAvx512OffsetFactor<W> == 0)
                out.coef[4 * i + k] = _mm512_mul_ps(_mm512_cvtepi32_ps(out.sc[4 * i + k]), factor);
        }
    }
}

// The float update of a super-block, the lane GEMM's (gemm_int8_avx512.cpp) for one register of
// rows, in two halves: first f = fma(coef_j, s_j, f) for each offset term j in order (Q4_K/Q5_K:
// 8 terms against the activation sums of 32 elements, sums_of_pairs16), then
// f = fma(float(acc), d_r * d_t, f). The first half needs only the scales, so the Q2_K, Q3_K and
// Q6_K tiles issue it before the super-block's products: at one token its 16 dependent FMAs had
// waited for the products and then stalled the next super-block (perf put 28 % of a Q2_K decode
// tile's samples on them); beside the products they cost nothing: one thread, 2816 x 1024 in
// cache, Q2_K 21.4 -> 25.5 GB/s, Q3_K 19.2 -> 21.5, Q6_K 41.1 -> 44.5. Q4_K/Q5_K's eight terms
// gained nothing there and cost 3 % at 8-15 tokens, so they follow the products.
template <int kSubBlocks, int T>
[[gnu::always_inline]] inline void offset_update(const TokenRows<T>& acts, std::size_t b,
                                                 const GroupScales<kSubBlocks>& s, __m512 (&f)[T]) {
    constexpr bool kPaired = kSubBlocks == 8;
    alignas(32) float pair_sums[kPaired ? T : 1][8];
    if constexpr (kPaired) {
        for (int t = 0; t < T; ++t) sums_of_pairs16(acts.s[t] + 16 * b, pair_sums[t]);
    }
    for (int j = 0; j < kSubBlocks; ++j) {
        for (int t = 0; t < T; ++t) {
            const float sum = kPaired ? pair_sums[t][j] : acts.s[t][16 * b + j];
            f[t] = _mm512_fmadd_ps(s.coef[j], _mm512_set1_ps(sum), f[t]);
        }
    }
}

template <int kSubBlocks, int T>
[[gnu::always_inline]] inline void scale_update(const TokenRows<T>& acts, std::size_t b,
                                                const GroupScales<kSubBlocks>& s,
                                                const __m512i (&acc)[T], __m512 (&f)[T]) {
    for (int t = 0; t < T; ++t) {
        const __m512 scale = _mm512_mul_ps(s.d, _mm512_set1_ps(acts.d[t][b]));
        f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[t]), scale, f[t]);
    }
}

// Q4_K and Q5_K: chunk c (64 elements) of a super-block is stored words 8c..8c+7, whose low
// nibbles are sub-block 2c (elements 64c + 4 gg..) and high nibbles sub-block 2c + 1 (+32);
// Q5_K's fifth bit s of each element is bit s of qh word gg (interleaved_rows.h).
template <Type W, int T>
[[gnu::always_inline]] inline void q4_k_super_block(const std::uint8_t* block,
                                                    const TokenRows<T>& acts, std::size_t b,
                                                    const GroupScales<8>& s, __m512i (&acc)[T],
                                                    const std::uint8_t* end, WeightPrefetch level) {
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    constexpr std::size_t kPiece = kLayout.bytes / 4;
#pragma GCC unroll 1
    for (int c = 0; c < 4; ++c) {
        prefetch_ahead(block + static_cast<std::size_t>(c) * kPiece, kPiece, end, level);
        // One token: each of lo and hi in two chains (even and odd gg), added before the scale.
        // A single chain of eight dependent vpdpbusd set the pace there (one thread, 512 x
        // 1024 in cache, Zen 4, 15 alternated rounds, median paired speedup Q4_K 1.27, Q5_K
        // 1.23; whole-model 246M Q4_K decode on one thread 0.846x the step time, on two
        // threads, bound by memory, unchanged). Two tokens already have four chains: a second
        // pair there measured 0.99x. Integer adds: the same sums, the same bits.
        constexpr int C = T == 1 ? 2 : 1;
        __m512i lo[C][T], hi[C][T];
        for (int k = 0; k < C; ++k)
            for (int t = 0; t < T; ++t) lo[k][t] = hi[k][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int gg = 0; gg < 8; ++gg) {
            const int k = gg % C;
            const __m512i raw =
                both_halves(block + 32 * static_cast<std::size_t>(8 * c + gg), kLayout.codes);
            __m512i code_lo = _mm512_and_si512(raw, bytes(0x0F));
            __m512i code_hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), bytes(0x0F));
            if constexpr (W == Type::Q5_K) {
                const __m512i qh =
                    both_halves(block + kLayout.high_bits + 32 * gg, 8 * kLayout.high_bytes);
                code_lo =
                    _mm512_mask_mov_epi8(code_lo, _mm512_test_epi8_mask(qh, bytes(1 << (2 * c))),
                                         _mm512_or_si512(code_lo, bytes(16)));
                code_hi =
                    _mm512_mask_mov_epi8(code_hi, _mm512_test_epi8_mask(qh, bytes(2 << (2 * c))),
                                         _mm512_or_si512(code_hi, bytes(16)));
            }
            const std::size_t at = 256 * b + 64 * static_cast<std::size_t>(c) + 4 * gg;
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                lo[k][t] =
                    _mm512_dpbusd_epi32(lo[k][t], code_lo, broadcast4<__m512i>(acts.q[t] + at));
                hi[k][t] = _mm512_dpbusd_epi32(hi[k][t], code_hi,
                                               broadcast4<__m512i>(acts.q[t] + at + 32));
            }
        }
        if constexpr (C == 2) {
            for (int t = 0; t < T; ++t) {
                lo[0][t] = _mm512_add_epi32(lo[0][t], lo[1][t]);
                hi[0][t] = _mm512_add_epi32(hi[0][t], hi[1][t]);
            }
        }
        for (int t = 0; t < T; ++t) {
            acc[t] = _mm512_add_epi32(acc[t], _mm512_mullo_epi32(lo[0][t], s.sc[2 * c]));
            acc[t] = _mm512_add_epi32(acc[t], _mm512_mullo_epi32(hi[0][t], s.sc[2 * c + 1]));
        }
    }
}

// Q2_K, Q3_K and Q6_K: code word (n, k, v) holds elements 128 n + 32 k + 4 v.. of sub-block
// 8 n + 2 k + v / 4 (k16_code_word in int8_lanes_avx2.h); the stored words a (n, v) pair needs
// are loaded once for its four kinds k.
template <Type W, int T>
[[gnu::always_inline]] inline void k16_super_block(const std::uint8_t* block,
                                                   const TokenRows<T>& acts, std::size_t b,
                                                   const GroupScales<16>& s, __m512i (&acc)[T],
                                                   const std::uint8_t* end, WeightPrefetch level) {
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    constexpr std::size_t kPiece = kLayout.bytes / 4;
#pragma GCC unroll 1
    for (int n = 0; n < 2; ++n) {
#pragma GCC unroll 1
        for (int vh = 0; vh < 2; ++vh) {
            prefetch_ahead(block + static_cast<std::size_t>(2 * n + vh) * kPiece, kPiece, end,
                           level);
            // Q3_K's sums start at -4 isum and Q6_K's at -32 isum, their offsets in the integers
            // (kAvx512OffsetFactor).
            constexpr int kFactor = kAvx512OffsetFactor<W>;
            __m512i part[4][T];
            for (int k = 0; k < 4; ++k) {
                for (int t = 0; t < T; ++t) {
                    part[k][t] = kFactor != 0
                                     ? _mm512_set1_epi32(
                                           kFactor * acts.offset16[t][16 * b + 8 * n + 2 * k + vh])
                                     : _mm512_setzero_si512();
                }
            }
#pragma GCC unroll 4
            for (int v4 = 0; v4 < 4; ++v4) {
                const int v = 4 * vh + v4;
                __m512i code[4];
                if constexpr (W == Type::Q6_K) {
                    const __m512i ql0 = both_halves(block + 32 * (16 * n + v), kLayout.codes);
                    const __m512i ql1 = both_halves(block + 32 * (16 * n + 8 + v), kLayout.codes);
                    const __m512i qh = both_halves(block + kLayout.high_bits + 32 * (8 * n + v),
                                                   8 * kLayout.high_bytes);
                    const __m512i nib[4] = {
                        _mm512_and_si512(ql0, bytes(0x0F)), _mm512_and_si512(ql1, bytes(0x0F)),
                        _mm512_and_si512(_mm512_srli_epi16(ql0, 4), bytes(0x0F)),
                        _mm512_and_si512(_mm512_srli_epi16(ql1, 4), bytes(0x0F))};
                    // Bits 2k, 2k + 1 of qh to bits 4, 5.
                    const __m512i top[4] = {_mm512_slli_epi16(qh, 4), _mm512_slli_epi16(qh, 2), qh,
                                            _mm512_srli_epi16(qh, 2)};
                    for (int k = 0; k < 4; ++k) {
                        // nib | (top & 0x30)
                        code[k] = _mm512_ternarylogic_epi32(nib[k], top[k], bytes(0x30), 0xF8);
                    }
                } else {
                    const __m512i qs = both_halves(block + 32 * (8 * n + v), kLayout.codes);
                    for (int k = 0; k < 4; ++k) {
                        code[k] =
                            _mm512_and_si512(k == 0 ? qs : _mm512_srli_epi16(qs, 2 * k), bytes(3));
                    }
                    if constexpr (W == Type::Q3_K) {
                        const __m512i hm =
                            both_halves(block + kLayout.high_bits + 32 * v, 8 * kLayout.high_bytes);
                        // The high bit as 4, added where set (bit 2 of the code is clear, so
                        // the same as an or): one byte-masked add where an or and a byte-masked
                        // move took two. One thread, 2816 x 1024 in cache, one token: 20.9-21.1
                        // -> 23.0-23.4 GB/s; 2-8 tokens within 2 %.
                        for (int k = 0; k < 4; ++k) {
                            code[k] = _mm512_mask_add_epi8(
                                code[k], _mm512_test_epi8_mask(hm, bytes(1 << (4 * n + k))),
                                code[k], bytes(4));
                        }
                    }
                }
                const std::size_t at = 256 * b + 128 * static_cast<std::size_t>(n) + 4 * v;
#pragma GCC unroll 4
                for (int k = 0; k < 4; ++k) {
#pragma GCC unroll 4
                    for (int t = 0; t < T; ++t) {
                        part[k][t] = _mm512_dpbusd_epi32(
                            part[k][t], code[k], broadcast4<__m512i>(acts.q[t] + at + 32 * k));
                    }
                }
            }
            for (int k = 0; k < 4; ++k) {
                const __m512i sc = s.sc[8 * n + 2 * k + vh];
                for (int t = 0; t < T; ++t)
                    acc[t] = _mm512_add_epi32(acc[t], _mm512_mullo_epi32(part[k][t], sc));
            }
        }
    }
}

// The group of rows r0..r0+15 (stored from row r0's address) times tokens t0..t0+T-1.
template <Type W, int T>
void tile(const MatmulArgs& a, std::int64_t r0, std::int64_t t0) {
    const std::uint8_t* group = a.weights + static_cast<std::size_t>(r0) * a.row_bytes;
    constexpr bool kQ4 = W == Type::Q4_K || W == Type::Q5_K;  // else Q2_K, Q3_K or Q6_K
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    const auto nb = static_cast<std::size_t>(a.n / 256);
    const TokenRows<T> acts(a, t0);
    const std::uint8_t* end = prefetch_end(a);
    GroupScales<kQ4 ? 8 : 16> s;
    __m512 f[1][T];
    for (int t = 0; t < T; ++t) f[0][t] = _mm512_setzero_ps();
#pragma GCC unroll 1
    for (std::size_t b = 0; b < nb; ++b) {
        const std::uint8_t* block = group + b * kLayout.bytes;
        __m512i acc[T];
        for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_si512();
        if constexpr (kQ4) {
            // Q4_K/Q5_K's eight offset terms are cheaper after the products: before them they
            // cost 3 % at 8-15 tokens and gained nothing at one.
            unpack_q4_k_scales<W>(block, s);
            q4_k_super_block<W, T>(block, acts, b, s, acc, end, a.prefetch_level);
            offset_update(acts, b, s, f[0]);
        } else {
            unpack_k16_scales<W>(block, s);
            if constexpr (kAvx512OffsetFactor<W> == 0) offset_update(acts, b, s, f[0]);
            k16_super_block<W, T>(block, acts, b, s, acc, end, a.prefetch_level);
        }
        scale_update(acts, b, s, acc, f[0]);
    }
    store_tile_rows(a, f, r0, kGroupRows, t0);
}

template <Type W>
void run_groups(const MatmulArgs& a) {
    for_groups_in_even_token_tiles<kTileTokens>(a, kGroupRows,
                                                [&](std::int64_t r, std::int64_t t0, auto tokens) {
                                                    tile<W, decltype(tokens)::value>(a, r, t0);
                                                });
}

}  // namespace

bool matmul_interleaved_kquant_avx512(const MatmulArgs& a) {
    switch (a.type) {
        case Type::Q2_K:
            run_groups<Type::Q2_K>(a);
            return true;
        case Type::Q3_K:
            run_groups<Type::Q3_K>(a);
            return true;
        case Type::Q4_K:
            run_groups<Type::Q4_K>(a);
            return true;
        case Type::Q5_K:
            run_groups<Type::Q5_K>(a);
            return true;
        case Type::Q6_K:
            run_groups<Type::Q6_K>(a);
            return true;
        default:
            return false;
    }
}

}  // namespace tokenscope::tensor::detail
