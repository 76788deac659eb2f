// Prefill (32 tokens and more) for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) on AVX-512 (BW +
// VNNI): the tile of gemm_int8_avx2.cpp in 512-bit registers. 32-bit lanes are weight rows, 16 per
// register (InterleavedKRows, int8_lanes_avx2.h); a token's 4 activation bytes are broadcast to
// every lane. vpdpbusd sums 4 products per lane into a sub-block's partial sum (four of them
// cover its 16 elements), and one vpmulld by the lane's sub-block scale adds it to the
// super-block's sum: 6 instructions per 16 x 16 multiply-adds. The AVX2 form, vpmaddubsw and
// then vpdpwssd with the scale, took 8 (Q4_K 2816 x 1024 x 128 tokens, one thread, Zen 4,
// alternated: 170-172 -> 244-258 GFLOP/s; Q6_K 163 -> 250). Q2_K-Q5_K scale two sub-blocks per
// multiply (tile): 512 x 1024 x 128 tokens, one thread, in cache, Zen 4, nine alternated rounds,
// median paired speedup Q4_K 1.079, Q5_K 1.094, Q3_K 1.038, Q2_K 1.025 (docs/benchmarks.md,
// thirty-eighth pass).
//
// Why not the row tile (KAvx512 in dot_avx512.cpp, lanes along k, 4 rows x 3 tokens): each of its
// outputs needs its own float update per super-block and a horizontal sum at the end, and it
// reached 0.93-1.19x of llama.cpp's Q4_K prefill where its Q8_0 tile reached 1.7-2.3x. Here the
// float update is one vector per 16 outputs. TOKENSCOPE_INT8_GEMM=0 brings the row tile back,
// to compare.
//
// Bounds: a sub-block's partial sum is at most 16 * 63 * 128 in magnitude (unsigned elements
// up to 63, activations within [-128, 127]), times a scale within [-128, 127], 16 sub-blocks a
// super-block: 16 * 16 * 63 * 128 * 128 < 2^31. Each output is computed in its own lane in the
// same order whatever rows share its group, so a split of the rows gives the same bits.
#include "tensor/avx512_gcc_warnings.h"  // first: it silences a GCC 12 false positive

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/int8_lanes_avx2.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"

namespace tokenscope::tensor::detail {

namespace {

constexpr int kLanes512 = 16;  // rows per register
constexpr int kRowRegs = 2;    // registers of rows per tile: 32 rows
constexpr int kGroupRows = kLanes512 * kRowRegs;
// 2 x 6 = 12 accumulators and 12 sub-block sums of the 32 registers.
constexpr int kTileTokens = 6;
constexpr int kSubBlocks = 16;

using InterleavedRows = InterleavedKRows<kGroupRows>;

// kRowRegs x 16 rows (interleaved in p), T tokens from t0; rows: how many of the group are real.
// kPairedOffsets (Q4_K, Q5_K): the offset terms come in equal pairs (one min per 32-element
// sub-block), applied to the activation sums of 32 elements: 8 multiply-adds per super-block
// and output instead of 16 (gemm_int8_avx2.cpp). kOffsetFactor (Q3_K 1, Q6_K 8): no offset
// terms, each sub-block's sum starts at kOffsetFactor times its offset16 entry (-4 isum)
// instead (kAvx512OffsetFactor, int8_lanes_avx2.h).
// The scales, in pairs of 16-element sub-blocks where that saves vpmulld, which issues on the
// pipes vpdpbusd takes (tools/cpu-lab/int8_pipes.cpp):
// - kPairedOffsets (Q4_K, Q5_K) have one scale per 32 elements: both sub-blocks' vpdpbusd
//   go into one sum and one vpmulld scales it (9 instructions on those pipes per 32 elements
//   where 10 were).
// - kPackedPairs (Q2_K, Q3_K): sub-block j's sum goes to the high int16 of each lane and j + 1's
//   to the low one, and one vpdpwssd with the scales as the same int16 pair adds both products.
//   Their sums fit in int16 (Q2_K: 16 * 3 * 127 = 6096; Q3_K's start at -4 isum, so they are
//   sums of (u - 4) x: 16 * 4 * 127 = 8128), so the pair is exact.
// Q6_K's sums (16 * 32 * 127 from their start) need their 32 bits: one vpmulld per sub-block.
// Every form adds the same integers, so the results are the same bits.
template <int T, bool kPairedOffsets, int kOffsetFactor, bool kPackedPairs>
void tile(const MatmulArgs& a, const InterleavedRows& p, std::int64_t r0, int rows,
          std::int64_t t0) {
    constexpr int H = kRowRegs;
    const TokenRows<T> acts(a, t0);
    __m512 f[H][T];
    for (int h = 0; h < H; ++h) {
        for (int t = 0; t < T; ++t) f[h][t] = _mm512_setzero_ps();
    }
    for (std::int64_t b = 0; b < p.nb; ++b) {
        __m512i acc[H][T];
        for (int h = 0; h < H; ++h) {
            for (int t = 0; t < T; ++t) acc[h][t] = _mm512_setzero_si512();
        }
        const auto bi = static_cast<std::size_t>(b);
        const std::uint8_t* ub = p.u + bi * InterleavedRows::kU;
        const std::int16_t* sb = p.sc + bi * (InterleavedRows::kSc / 2);
        // Sub-block j's 16 products per lane added to part by four vpdpbusd.
        auto dot_sub_block = [&](int j, __m512i(&part)[H][T]) [[gnu::always_inline]] {
#pragma GCC unroll 4
            for (int gg = 0; gg < 4; ++gg) {
                const int g = 4 * j + gg;
                __m512i w[H];
                for (int h = 0; h < H; ++h)
                    w[h] = _mm512_load_si512(ub + (kGroupRows * g + kLanes512 * h) * 4);
#pragma GCC unroll 12
                for (int t = 0; t < T; ++t) {
                    __m512i x = broadcast4<__m512i>(acts.q[t] + 256 * b + 4 * g);
                    keep_in_order(x);
#pragma GCC unroll 2
                    for (int h = 0; h < H; ++h) {
                        __m512i sum = _mm512_dpbusd_epi32(part[h][t], w[h], x);
                        keep_in_order(sum);
                        part[h][t] = sum;
                    }
                }
            }
        };
        constexpr bool kIntegerOffsets = kOffsetFactor != 0;
        auto start = [&](int j, int t) {
            return kIntegerOffsets ? _mm512_set1_epi32(kOffsetFactor * acts.offset16[t][16 * b + j])
                                   : _mm512_setzero_si512();
        };
        constexpr int kStep = kPairedOffsets || kPackedPairs ? 2 : 1;
#pragma GCC unroll 1
        for (int j = 0; j < kSubBlocks; j += kStep) {
            __m512i part[H][T];
            for (int h = 0; h < H; ++h) {
                for (int t = 0; t < T; ++t) part[h][t] = start(j, t);
            }
            dot_sub_block(j, part);
            if constexpr (kPairedOffsets) {
                dot_sub_block(j + 1, part);
            } else if constexpr (kPackedPairs) {
                // j's sum times 2^16 plus j + 1's start, biased by 2^15 so that the low half
                // never borrows from the high one (j + 1's sum lies within +-2^15); the bias
                // leaves again by flipping bit 15 below.
                for (int h = 0; h < H; ++h) {
                    for (int t = 0; t < T; ++t) {
                        part[h][t] = _mm512_add_epi32(
                            _mm512_slli_epi32(part[h][t], 16),
                            _mm512_add_epi32(start(j + 1, t), _mm512_set1_epi32(0x8000)));
                    }
                }
                dot_sub_block(j + 1, part);
                for (int h = 0; h < H; ++h) {
                    // The lanes' scales (the low int16 of each stored pair, see below): j + 1's
                    // in the low half, j's in the high one.
                    const __m512i lo =
                        _mm512_load_si512(sb + (kGroupRows * (j + 1) + kLanes512 * h) * 2);
                    const __m512i hi = _mm512_load_si512(sb + (kGroupRows * j + kLanes512 * h) * 2);
                    const __m512i sc =
                        _mm512_mask_blend_epi16(0xAAAAAAAAu, lo, _mm512_slli_epi32(hi, 16));
                    for (int t = 0; t < T; ++t) {
                        const __m512i sums =
                            _mm512_xor_si512(part[h][t], _mm512_set1_epi32(0x8000));
                        acc[h][t] = _mm512_dpwssd_epi32(acc[h][t], sums, sc);
                    }
                }
                continue;
            }
            for (int h = 0; h < H; ++h) {
                // The packer stores each lane's scale as an int16 pair: the low one,
                // sign-extended, is the lane's int32 scale.
                const __m512i pair = _mm512_load_si512(sb + (kGroupRows * j + kLanes512 * h) * 2);
                const __m512i sc = _mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16);
                for (int t = 0; t < T; ++t)
                    acc[h][t] = _mm512_add_epi32(acc[h][t], _mm512_mullo_epi32(part[h][t], sc));
            }
        }
        constexpr int kSums = kIntegerOffsets ? 0 : kPairedOffsets ? kSubBlocks / 2 : kSubBlocks;
        alignas(32) float pair_sums[kPairedOffsets ? T : 1][8];
        if constexpr (kPairedOffsets) {
            for (int t = 0; t < T; ++t) sums_of_pairs16(acts.s[t] + 16 * b, pair_sums[t]);
        }
        // The offset terms first, then the integer sums: the order of kquant_offset_update and
        // kquant_scale_update (int8_lanes_avx2.h), which the interleaved tiles share.
        for (int h = 0; h < H; ++h) {
            const __m512 dw = _mm512_load_ps(p.d + bi * kGroupRows + kLanes512 * h);
            const float* c = p.coef + bi * (InterleavedRows::kCoef / 4) + kLanes512 * h;
            // Tokens innermost: T independent chains (see gemm_int8_avx2.cpp).
            for (int j = 0; j < kSums; ++j) {
                const int sub = kPairedOffsets ? 2 * j : j;
                const __m512 cj = _mm512_load_ps(c + kGroupRows * sub);
                for (int t = 0; t < T; ++t) {
                    const float sum = kPairedOffsets ? pair_sums[t][j] : acts.s[t][16 * b + j];
                    f[h][t] = _mm512_fmadd_ps(cj, _mm512_set1_ps(sum), f[h][t]);
                }
            }
            for (int t = 0; t < T; ++t) {
                const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(acts.d[t][b]));
                f[h][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[h][t]), scale, f[h][t]);
            }
        }
    }
    store_tile_rows(a, f, r0, rows, t0);
}

}  // namespace

bool gemm_int8_avx512(const MatmulArgs& a) {
    switch (a.type) {
        case Type::Q2_K:
        case Type::Q3_K:
        case Type::Q4_K:
        case Type::Q5_K:
        case Type::Q6_K:
            break;
        default:
            return false;
    }
    thread_local InterleavedRows packed[kMaxPassGroups];
    auto run = [&]<bool kPaired, int kOffsetFactor, bool kPacked>() {
        for_lane_groups<kTileTokens>(
            a, kGroupRows, packed,
            [&](auto tokens, const InterleavedRows& p, std::int64_t r, int rows, std::int64_t t0) {
                tile<decltype(tokens)::value, kPaired, kOffsetFactor, kPacked>(a, p, r, rows, t0);
            });
    };
    if (a.type == Type::Q4_K || a.type == Type::Q5_K) {
        run.template operator()<true, 0, false>();
    } else if (a.type == Type::Q3_K) {
        // The packed pairs rely on the sums starting at -4 isum (see tile).
        static_assert(kAvx512OffsetFactor<Type::Q3_K> == 1);
        run.template operator()<false, kAvx512OffsetFactor<Type::Q3_K>, true>();
    } else if (a.type == Type::Q2_K) {
        run.template operator()<false, 0, true>();
    } else {
        run.template operator()<false, kAvx512OffsetFactor<Type::Q6_K>, false>();
    }
    return true;
}

}  // namespace tokenscope::tensor::detail
