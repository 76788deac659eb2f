// Prefill (16 tokens and more, Q8_0 32: lane_gemm_min_tokens_avx512) for the 32-blocks (Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0) on AVX-512 (BW + VNNI): the lane GEMM of gemm_int8_q32_avx2.cpp in
// 512-bit registers. 32-bit lanes are weight rows, 16 per register; a token's 4 activation bytes
// are broadcast to every lane, and vpdpbusd adds 4 products per lane, so one block's 32 products
// per lane take 8 of them. Rows are packed by words_of_8_rows (int8_lanes_avx2.h): from the
// file's rows, or from the groups where the matrix is stored interleaved (Q4_0-Q5_1 at this
// level, interleaved_rows.h).
//
// Why: the row tile it replaces (Q32InterleavedAvx512, dot_avx512.cpp) keeps 16 blocks in the
// lanes of a register, so it works on whole groups of 512 weights and pads every row to a
// multiple of 512. SmolLM2's rows are 576 wide (seven ninths of its matrix work): they did 1024
// weights of work for 576, and the gate and up projections (1536 x 576) ran at 145-149 GFLOP/s
// against the down projection's 236 (one thread, 128 tokens). Here a row's work is its own
// blocks, whatever the width.
//
// Per 32-block b, row r and token t, in pack_q32_row's terms (matmul_internal.h):
//   dot = d_r * d_a(t) * sum_k u_r[k] * q_a(t)[k] + coef_r * s_a(t)
// with u unsigned (vpdpbusd multiplies unsigned by signed bytes, so no type needs AVX2's sign
// trick). Q4_0 and Q5_0 (u = q + 8, q + 16) start each sum at -8 or -16 times the activation
// block's integer sum instead of adding coef * s_a (kQ32IntegerOffset, int8_lanes_avx2.h): one
// multiply-add fewer per row register, token and block (2048 x 1024, 128 tokens, one thread,
// four process pairs against the build before: Q4_0 270-277 -> 290-304 GFLOP/s, Q5_0
// 258-263 -> 276-288), and no cancelling float terms. Q8_0 instead keeps its signed codes q and
// makes the activations unsigned (x + 128, one xor per broadcast), each lane's sum starting at -128
// sum_k q_r[k] (from the packer):
//   dot = d_r * d_a(t) * sum_k q_r[k] * q_a(t)[k]
// exactly, with no offset term: its multiply-add issued on the pipes vpdpbusd takes, one per
// row register and token per block (Q8_0, 128 tokens, one thread, Zen 4, 11 alternated rounds,
// median paired speedup 1.078 at 2816 x 1024, 1.098 at 1024 x 2816), and Q8_0's old form
// (q + 128, then -128 d * s_a) cancelled two large terms in float. Q8_0's prefill kernels at this
// level already summed in another order than its decode (smallBatchesMatchDecodeBitForBit), so
// no other kernel's bits follow from these. Bounds: a lane's block sum is at most 32 * 255 *
// 128 < 2^21 (the start, 128 * 32 * 128, adds 2^19).
// Each output is computed in its own lane in the same order whatever rows share its group, so a
// split of the rows between threads gives the same bits.
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
// 2 x 6 = 12 int32 block sums and 12 float accumulators of the 32 registers.
constexpr int kTileTokens = 6;

// Up to kGroupRows weight rows interleaved for the tile. Per 32-block b:
//   u:    [b][word 0..7][row 0..31][4 bytes]  1024 bytes, bytes 4w..4w+3 of each row's block
//   d:    [b][row 0..31]                      block scales
//   coef: [b][row 0..31]                      offset / min terms
// A register of 16 rows is a contiguous 64-byte slice of each word. Rows past the end are zero
// everywhere, so their lanes compute 0.
struct InterleavedQ32Rows {
    static constexpr std::size_t kU = 8 * kGroupRows * 4;
    static constexpr std::size_t kPerBlock = kU + 2 * kGroupRows * sizeof(float);

    // Bytes of one packed group of rows of n elements.
    static std::size_t packed_bytes(std::int64_t n) {
        return static_cast<std::size_t>(n / 32) * kPerBlock;
    }

    std::int64_t nb = 0;
    std::uint8_t* u = nullptr;
    float* d = nullptr;
    float* coef = nullptr;

    // Rows [r0, r0 + rows) of the call's weights, 8 at a time by words_of_8_rows (file rows or
    // interleaved groups).
    void pack(const MatmulArgs& a, std::int64_t r0, int rows) {
        nb = a.n / 32;
        const auto n = static_cast<std::size_t>(nb);
        u = buffer_.get(packed_bytes(a.n));
        d = reinterpret_cast<float*>(u + n * kU);
        coef = d + n * kGroupRows;
        const bool q8 = a.type == Type::Q8_0;
        for (int s = 0; s < kGroupRows / kLanes; ++s) {
            const auto lane0 = static_cast<std::size_t>(kLanes * s);
            auto emit = [&](std::size_t b, const __m256i(&word)[8], __m256 dv, __m256 cv) {
                std::uint8_t* ub = u + b * kU + 4 * lane0;
                __m256i sum = _mm256_setzero_si256();  // Q8_0: each row's sum of q
                for (int w = 0; w < 8; ++w) {
                    _mm256_store_si256(reinterpret_cast<__m256i*>(ub + w * kGroupRows * 4),
                                       word[w]);
                    if (q8) {
                        const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), word[w]);
                        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
                    }
                }
                _mm256_store_ps(d + b * kGroupRows + lane0, dv);
                if (q8) {
                    // -128 sum(q), the start of the block's sums (tile): an int32 in coef's
                    // place, which Q8_0 has no use for.
                    _mm256_store_si256(
                        reinterpret_cast<__m256i*>(coef + b * kGroupRows + lane0),
                        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sum, 7)));
                } else {
                    _mm256_store_ps(coef + b * kGroupRows + lane0, cv);
                }
            };
            words_of_8_rows(a, r0 + kLanes * s, rows - kLanes * s, emit);
        }
    }

  private:
    ScratchBuffer buffer_;
};

// kRowRegs x 16 rows (interleaved in p), T tokens from t0; rows: how many of the group are real.
template <int T, bool kSignedQ8, int kIntOffset>
void tile(const MatmulArgs& a, const InterleavedQ32Rows& p, std::int64_t r0, int rows,
          std::int64_t t0) {
    constexpr int H = kRowRegs;
    const TokenRows<T> acts(a, t0);
    __m512 f[H][T];
    for (int h = 0; h < H; ++h) {
        for (int t = 0; t < T; ++t) f[h][t] = _mm512_setzero_ps();
    }
#pragma GCC unroll 1
    for (std::int64_t b = 0; b < p.nb; ++b) {
        const auto bi = static_cast<std::size_t>(b);
        // Each sum's start: Q8_0 -128 sum(q) per row (from the packer), Q4_0/Q5_0 -offset times
        // the token's block sum (the same for both row registers), else 0.
        __m512i acc[H][T];
        if constexpr (kIntOffset != 0) {
            for (int t = 0; t < T; ++t) {
                acc[0][t] = _mm512_set1_epi32(-kIntOffset * acts.isum(t, b));
                for (int h = 1; h < H; ++h) acc[h][t] = acc[0][t];
            }
        } else {
            for (int h = 0; h < H; ++h) {
                const __m512i start =
                    kSignedQ8 ? _mm512_load_si512(p.coef + bi * kGroupRows + kLanes512 * h)
                              : _mm512_setzero_si512();
                for (int t = 0; t < T; ++t) acc[h][t] = start;
            }
        }
        const std::uint8_t* ub = p.u + bi * InterleavedQ32Rows::kU;
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
            __m512i w[H];
            for (int h = 0; h < H; ++h)
                w[h] = _mm512_load_si512(ub + (kGroupRows * g + kLanes512 * h) * 4);
#pragma GCC unroll 6
            for (int t = 0; t < T; ++t) {
                __m512i x = broadcast4<__m512i>(acts.q[t] + 32 * b + 4 * g);
                if constexpr (kSignedQ8)
                    x = _mm512_xor_si512(x, _mm512_set1_epi8(static_cast<char>(0x80)));  // x + 128
                keep_in_order(x);
#pragma GCC unroll 2
                for (int h = 0; h < H; ++h) {
                    __m512i sum = kSignedQ8 ? _mm512_dpbusd_epi32(acc[h][t], x, w[h])
                                            : _mm512_dpbusd_epi32(acc[h][t], w[h], x);
                    keep_in_order(sum);
                    acc[h][t] = sum;
                }
            }
        }
        for (int h = 0; h < H; ++h) {
            const __m512 dw = _mm512_load_ps(p.d + bi * kGroupRows + kLanes512 * h);
            const __m512 c = _mm512_load_ps(p.coef + bi * kGroupRows + kLanes512 * h);
            for (int t = 0; t < T; ++t) {
                const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(acts.d[t][b]));
                f[h][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[h][t]), scale, f[h][t]);
                if constexpr (!kSignedQ8 && kIntOffset == 0)
                    f[h][t] = _mm512_fmadd_ps(c, _mm512_set1_ps(acts.s[t][b]), f[h][t]);
            }
        }
    }
    store_tile_rows(a, f, r0, rows, t0);
}

}  // namespace

bool gemm_int8_q32_avx512(const MatmulArgs& a) {
    switch (a.type) {
        case Type::Q4_0:
        case Type::Q4_1:
        case Type::Q5_0:
        case Type::Q5_1:
        case Type::Q8_0:
            break;
        default:
            return false;
    }
    thread_local InterleavedQ32Rows packed[kMaxPassGroups];
    for_lane_groups<kTileTokens>(
        a, kGroupRows, packed,
        [&](auto tokens, const InterleavedQ32Rows& p, std::int64_t r, int rows, std::int64_t t0) {
            constexpr int T = decltype(tokens)::value;
            if (a.type == Type::Q8_0) {
                tile<T, true, 0>(a, p, r, rows, t0);
            } else if (a.type == Type::Q4_0) {
                tile<T, false, kQ32IntegerOffset<Type::Q4_0>>(a, p, r, rows, t0);
            } else if (a.type == Type::Q5_0) {
                tile<T, false, kQ32IntegerOffset<Type::Q5_0>>(a, p, r, rows, t0);
            } else {
                tile<T, false, 0>(a, p, r, rows, t0);
            }
        });
    return true;
}

}  // namespace tokenscope::tensor::detail
