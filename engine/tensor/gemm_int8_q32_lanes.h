#pragma once
// Included only by gemm_int8_q32_avx2.cpp (AVX2: vpmaddubsw) and gemm_int8_q32_avxvnni.cpp
// (AVX-VNNI: vpdpbusd), each compiled for its instruction set: everything here sits in an
// anonymous namespace, so each file gets its own copy built with its own flags.
//
// Prefill (16 tokens and more) for the 32-blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) on AVX2: the
// integer tile of gemm_int8_avx2.cpp (32-bit lanes are weight rows, int8_lanes_avx2.h) over the
// int8 activations (PreparedActivations' Q8_32 rows), in place of the f32 panels.
//
// Why: the f32 panels are bounded by the FMA rate (8 multiply-adds per instruction, 2 per
// cycle); pmaddubsw multiplies 32 byte pairs, and its pipes are free of the float work. This
// uses the activations' int8 rounding, as the decode kernels and llama.cpp do; the panels had
// used the exact f32 activations.
//
// Per 32-block b, row r and token t, in pack_q32_row's terms (matmul_internal.h):
//   dot = d_r * d_a(t) * sum_k u_r[k] * q_a(t)[k] + coef_r * s_a(t)
// with u unsigned. Q4_0/Q4_1/Q5_0/Q5_1 multiply u (<= 31) directly. Q8_0's u = q + 128 does not
// fit pmaddubsw (2 * 255 * 127 overflows int16), so its rows are packed signed, the tile
// multiplies |q| by the activation with q's sign (psignb), and no offset term remains. Pairs
// stay within 2 * 128 * 127 < 2^15; pmaddwd by ones widens them to the int32 lanes, each lane
// summing one row's 32 products of the block (< 2^21).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/int8_lanes_avx2.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"

namespace tokenscope::tensor::detail {

namespace {

constexpr int kRowRegs = 2;  // registers of rows per tile: 16 rows
constexpr int kGroupRows = kLanes * kRowRegs;
// Tokens per tile: 6 (12 accumulators) for the unsigned types; Q8_0's psignb needs one more
// register per product, and 5 measured 5-10 % faster than 4 or 6 for it.
constexpr int kTokensUnsigned = 6;
constexpr int kTokensSigned = 5;
// With vpdpbusd the product is one uop after psignb: in a register-only loop of the tile's shape
// 6 tokens ran 69 G products/s against 60 for 5; in the kernel (kbench, Q8_0, 128 tokens, one
// thread, three alternated runs) 6 and 5 measured the same: 141.5 / 143.2 GFLOP/s at
// 2816 x 1024, 139.9 / 141.1 at 1024 x 2816.
constexpr int kTokensSignedVnni = 6;

// Up to kGroupRows weight rows interleaved for the tile. Per 32-block b and register h (rows
// 8h..8h+7):
//   u:    [b][h][group 0..7][row 0..7][4 bytes]  256 bytes (Q8_0: |q|)
//   sign: [b][h][group 0..7][row 0..7][4 bytes]  Q8_0 only: q itself, for psignb
//   d:    [b][h][row 0..7]                       block scales
//   coef: [b][h][row 0..7]                       offset / min terms (not Q8_0)
// Rows past the end are zero everywhere, so their lanes compute 0.
struct InterleavedBlocks {
    std::int64_t nb = 0;
    bool is_signed = false;
    std::uint8_t* u = nullptr;
    std::uint8_t* sign = nullptr;
    float* d = nullptr;
    float* coef = nullptr;

    static constexpr std::size_t kU = 256, kD = 32;                         // bytes per (b, h)
    static constexpr std::size_t kPerBlock = kRowRegs * (2 * kU + 2 * kD);  // u, sign, d, coef

    // Bytes of one packed group of rows of n elements.
    static std::size_t packed_bytes(std::int64_t n) {
        return static_cast<std::size_t>(n / 32) * kPerBlock;
    }

    // Rows [r0, r0 + rows) of the call's weights, 8 at a time by words_of_8_rows (from the file's
    // rows, or as stored when they are interleaved already: interleaved_rows.h).
    void pack(const MatmulArgs& a, std::int64_t r0, int rows) {
        nb = a.n / 32;
        is_signed = a.type == Type::Q8_0;
        const auto n = static_cast<std::size_t>(nb);
        u = buffer_.get(packed_bytes(a.n));
        sign = u + n * kRowRegs * kU;
        d = reinterpret_cast<float*>(sign + n * kRowRegs * kU);
        coef = d + n * kRowRegs * kLanes;
        for (int h = 0; h < kRowRegs; ++h) {
            const auto emit = [&](std::size_t b, const __m256i(&word)[8], __m256 dv, __m256 cv) {
                const std::size_t bh = b * kRowRegs + static_cast<std::size_t>(h);
                for (int g = 0; g < 8; ++g) {
                    auto* pu = reinterpret_cast<__m256i*>(u + bh * kU + 32 * g);
                    if (is_signed) {
                        // Q8_0: q (in sign) and |q| (in u).
                        _mm256_store_si256(reinterpret_cast<__m256i*>(sign + bh * kU + 32 * g),
                                           word[g]);
                        _mm256_store_si256(pu, _mm256_abs_epi8(word[g]));
                    } else {
                        _mm256_store_si256(pu, word[g]);
                    }
                }
                _mm256_store_ps(d + bh * kLanes, dv);
                _mm256_store_ps(coef + bh * kLanes, cv);
            };
            words_of_8_rows(a, r0 + kLanes * h, rows - kLanes * h, emit);
        }
    }

  private:
    ScratchBuffer buffer_;
};

// kRowRegs x 8 rows (interleaved in p), T tokens from t0; rows: how many of the group are real.
// kNibbles (Q4_0, Q4_1: codes 0-15): a block's eight vpmaddubsw results add in int16 (each pair
// at most 2 * 15 * 127 = 3810, eight of them 30480) and one vpmaddwd per block widens them,
// instead of a vpmaddwd and an add per word: the multiply ports then carry one uop per word
// instead of two. Five-bit codes (up to 2 * 31 * 127 per pair) and Q8_0's |w| would overflow.
// 128 tokens, one thread, Q4_1, GFLOP/s (Intel Xeon 0xCF): 1536 x 576 123 -> 161, 576 x 1536
// 120 -> 155, 2816 x 1024 119-121 -> 158.
//
// kVnni (gemm_int8_q32_avxvnni.cpp, compiled for AVX-VNNI): vpdpbusd multiplies and sums each
// lane's four byte pairs straight into its int32 accumulator, in place of vpmaddubsw, vpmaddwd by
// ones (or the int16 add of kNibbles) and vpaddd. Every sum is an exact integer below 2^21 on
// both paths, so both give the same bits (test_matmul).
template <int T, bool Signed, bool kNibbles, bool kVnni>
void tile(const MatmulArgs& a, const InterleavedBlocks& p, std::int64_t r0, int rows,
          std::int64_t t0) {
    constexpr int H = kRowRegs;
    const TokenRows<T> acts(a, t0);
    [[maybe_unused]] const __m256i ones = _mm256_set1_epi16(1);
    __m256 f[H][T];
    for (int h = 0; h < H; ++h) {
        for (int t = 0; t < T; ++t) f[h][t] = _mm256_setzero_ps();
    }
#pragma GCC unroll 1
    for (std::int64_t b = 0; b < p.nb; ++b) {
        __m256i acc[H][T];
        for (int h = 0; h < H; ++h) {
            for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_si256();
        }
        const auto bh0 = static_cast<std::size_t>(b * kRowRegs);
        const std::uint8_t* ub = p.u + bh0 * InterleavedBlocks::kU;
        const std::uint8_t* sb = p.sign + bh0 * InterleavedBlocks::kU;
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
            __m256i w[H];
            for (int h = 0; h < H; ++h)
                w[h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(
                    ub + static_cast<std::size_t>(h) * InterleavedBlocks::kU + 32 * g));
#pragma GCC unroll 6
            for (int t = 0; t < T; ++t) {
                __m256i x = broadcast4<__m256i>(acts.q[t] + 32 * b + 4 * g);
                keep_in_order(x);
#pragma GCC unroll 2
                for (int h = 0; h < H; ++h) {
                    __m256i xs = x;
                    if constexpr (Signed) {
                        xs = _mm256_sign_epi8(
                            x, _mm256_load_si256(reinterpret_cast<const __m256i*>(
                                   sb + static_cast<std::size_t>(h) * InterleavedBlocks::kU +
                                   32 * g)));
                    }
                    __m256i sum;
                    if constexpr (kVnni) {
                        sum = _mm256_dpbusd_avx_epi32(acc[h][t], w[h], xs);
                    } else {
                        sum = kNibbles ? _mm256_add_epi16(acc[h][t], _mm256_maddubs_epi16(w[h], xs))
                                       : _mm256_add_epi32(
                                             acc[h][t], _mm256_madd_epi16(
                                                            _mm256_maddubs_epi16(w[h], xs), ones));
                    }
                    keep_in_order(sum);
                    acc[h][t] = sum;
                }
            }
        }
        for (int h = 0; h < H; ++h) {
            const __m256 dw = _mm256_load_ps(p.d + (bh0 + h) * kLanes);
            for (int t = 0; t < T; ++t) {
                const __m256 scale = _mm256_mul_ps(dw, _mm256_broadcast_ss(acts.d[t] + b));
                const __m256i block =
                    kNibbles && !kVnni ? _mm256_madd_epi16(acc[h][t], ones) : acc[h][t];
                f[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block), scale, f[h][t]);
            }
            if constexpr (!Signed) {
                const __m256 c = _mm256_load_ps(p.coef + (bh0 + h) * kLanes);
                for (int t = 0; t < T; ++t)
                    f[h][t] = _mm256_fmadd_ps(c, _mm256_broadcast_ss(acts.s[t] + b), f[h][t]);
            }
        }
    }
    store_tile_rows(a, f, r0, rows, t0);
}

template <int T, bool Signed, bool kNibbles, bool kVnni>
void q32_gemm(const MatmulArgs& a) {
    thread_local InterleavedBlocks packed[kMaxPassGroups];
    for_lane_groups<T>(
        a, kGroupRows, packed,
        [&](auto tokens, const InterleavedBlocks& p, std::int64_t r, int rows, std::int64_t t0) {
            tile<decltype(tokens)::value, Signed, kNibbles, kVnni>(a, p, r, rows, t0);
        });
}

// The kernel for the call's type at this file's instruction set; false for other types.
template <bool kVnni>
bool run_q32_lanes(const MatmulArgs& args) {
    switch (args.type) {
        case Type::Q8_0:
            q32_gemm<kVnni ? kTokensSignedVnni : kTokensSigned, true, false, kVnni>(args);
            return true;
        case Type::Q4_0:
        case Type::Q4_1:
            q32_gemm<kTokensUnsigned, false, true, kVnni>(args);
            return true;
        case Type::Q5_0:
        case Type::Q5_1:
            q32_gemm<kTokensUnsigned, false, false, kVnni>(args);
            return true;
        default:
            return false;
    }
}

}  // namespace

}  // namespace tokenscope::tensor::detail
