#pragma once
// Internals shared by the matmul kernels of every instruction set (dot_*.cpp) and the
// dispatcher (simd_dispatch.cpp). Only plain data and out-of-line functions live here: the
// files compiled with -mavx2 / -mavx512* must not share inline code with baseline files, or
// the linker could keep an AVX copy of it for callers running on CPUs without AVX.
#include <cstddef>
#include <cstdint>

#include "tensor/type.h"
#include "tensor/weight_prefetch.h"

namespace tokenscope::tensor::detail {

// One checked matmul_rows() call, as the kernels see it.
struct MatmulArgs {
    Type type;
    const std::uint8_t* weights;  // row r at weights + r * row_bytes
    std::size_t row_bytes;
    std::int64_t n;
    std::int64_t row_begin;
    std::int64_t row_end;
    const std::uint8_t* acts;  // PreparedActivations::row(0)
    std::size_t act_stride;
    std::size_t act_scale_offset;
    std::size_t act_sum_offset;
    std::size_t act_int_sum_offset;      // Q8_256: offset16; Q8_32: each block's integer sum
    std::size_t act_interleaved_offset;  // Q8_32 only
    std::int64_t tokens;
    float* out;
    std::int64_t out_stride;
    const float* panels = nullptr;  // PreparedActivations::panels(): null when not built
    std::int64_t panel_group_stride = 0;
    bool int8_gemm = false;  // uses_int8_gemm(type): prefill takes an AVX2 int8 GEMM
    bool avx_vnni = false;   // avx_vnni_in_use(): the AVX2 level's 32-block GEMM takes vpdpbusd
    // The software prefetch level for these rows (weight_prefetch(), or half_row_prefetch() for
    // F16/BF16), read once per call: the direct kernels prefetch per row, and asking the
    // function there (three guarded statics) was 4 % of a one-token Q8_0 product of 640-wide
    // rows (perf, Zen 3).
    WeightPrefetch prefetch_level = WeightPrefetch::L1;
    // The rows are stored in groups of 16 (interleaved_rows.h: Q8_0, Q4_0-Q5_1, Q2_K-Q6_K);
    // row_begin and row_end are multiples of 16 and the group of row r starts at
    // weights + r * row_bytes.
    bool interleaved = false;
    // The caller goes on with rows up to here (matmul_rows' stream_end): prefetching may run on
    // to it. At least row_end.
    std::int64_t prefetch_row_end = 0;
};

// Where asking for weights ahead stops: the end of the rows the caller streams through.
inline const std::uint8_t* prefetch_end(const MatmulArgs& a) {
    const std::int64_t end = a.prefetch_row_end > a.row_end ? a.prefetch_row_end : a.row_end;
    return a.weights + static_cast<std::size_t>(end) * a.row_bytes;
}

// Fewest tokens that take the AVX2 prefill panels (the public kPanelMinTokens in matmul.h;
// simd_dispatch.cpp checks they agree). Kept here as well because the AVX2 files must not
// include matmul.h's standard headers (see above).
constexpr std::int64_t kPanelMinTokensInternal = 16;

// Each returns false when it has no kernel for the type at its level (the dispatcher then runs
// the scalar one, which handles every type).
void matmul_scalar(const MatmulArgs& args);
bool matmul_avx2(const MatmulArgs& args);
bool matmul_avx512(const MatmulArgs& args);
// Decode and small batches (under kPanelMinTokensInternal tokens) of the 32-block formats with
// an offset or min (Q4_0, Q4_1, Q5_0, Q5_1) and the K-quants, reading the blocks in place
// (direct_avx512.cpp); false for any other type.
bool direct_avx512(const MatmulArgs& args);
// Prefill over the activation panels (all tokens of args; args.panels must be set): weight rows
// decoded to f32 a block at a time and multiplied by a 6-row x 16-token register tile
// (gemm_panels_avx2.cpp). Returns false for F32 weights, which keep the row-tile kernels.
bool gemm_panels_avx2(const MatmulArgs& args);
// The same in 512-bit registers, 12 rows x 32 tokens, for F16 and BF16 only (the quantized
// types have int8 GEMMs at that level); false for any other type (gemm_panels_avx512.cpp).
bool gemm_panels_avx512(const MatmulArgs& args);
// Prefill over the int8 activations with an integer register tile of 16 rows (in the 32-bit
// lanes) x 6 tokens: gemm_int8_avx2.cpp for the K-quants, gemm_int8_q32_avx2.cpp for Q4_0,
// Q4_1, Q5_0, Q5_1 and Q8_0; each returns false for any other type.
bool gemm_int8_avx2(const MatmulArgs& args);
bool gemm_int8_q32_avx2(const MatmulArgs& args);
// The 32-block tile with AVX-VNNI's vpdpbusd (gemm_int8_q32_avxvnni.cpp): the same bits.
bool gemm_int8_q32_avxvnni(const MatmulArgs& args);
// Interleaved rows (args.interleaved: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) times any number of tokens,
// 16 rows x up to 6 tokens per tile (interleaved_avx2.cpp); false for other types. Prefill goes
// to the lane GEMM, whose packer reads the same layout; both compute the same bits.
bool matmul_interleaved_avx2(const MatmulArgs& args);
// Interleaved K-quant rows (Q2_K-Q6_K) times any number of tokens: 16 rows x up to 6 tokens per
// tile under 16 tokens (interleaved_kquant_avx2.cpp), the K-quant lane GEMM (gemm_int8_avx2,
// packing from the groups) from there; false for other types. The same bits at every token count,
// and those of the lane GEMM over the file's rows.
bool matmul_interleaved_kquant_avx2(const MatmulArgs& args);
// The same tile in 512-bit registers, 16 rows (a whole group) x up to 4 tokens, with vpdpbusd
// (interleaved_kquant_avx512.cpp): for any token count, the bits of the AVX-512 K-quant lane
// GEMM (gemm_int8_avx512), which matmul_avx512 takes from lane_gemm_min_tokens_avx512 tokens.
bool matmul_interleaved_kquant_avx512(const MatmulArgs& args);
// Interleaved Q4_0-Q5_1 rows on AVX-512: 16 rows (a whole group) x up to 4 tokens with vpdpbusd
// (interleaved_q32_avx512.cpp), the bits of the AVX-512 32-block lane GEMM (gemm_int8_q32_avx512)
// at every token count; false for other types.
bool matmul_interleaved_q32_avx512(const MatmulArgs& args);
// The K-quant tile in 512-bit registers, 32 rows x 6 tokens (gemm_int8_avx512.cpp), and the
// 32-block one (gemm_int8_q32_avx512.cpp); each returns false for any other type.
bool gemm_int8_avx512(const MatmulArgs& args);
bool gemm_int8_q32_avx512(const MatmulArgs& args);
// Rows per group of the lane GEMMs (their 32-bit lanes are weight rows): 16 for the AVX2 ones,
// 32 for the AVX-512 one. A call whose row range ends in a partial group still computes the
// whole group (missing rows are zeros), so callers cut rows at multiples of these
// (matmul_row_multiple in matmul.h).
constexpr std::int64_t kLaneGroupRowsAvx2 = 16;
constexpr std::int64_t kLaneGroupRowsAvx512 = 32;
// AVX-512 K-quant products take the lane GEMM (gemm_int8_avx512.cpp) from this many tokens, and
// Q8_0 its own (gemm_int8_q32_avx512.cpp; lane_gemm_min_tokens_avx512): below
// it, packing 32 rows for a few token tiles costs more than the row tile's own packing. With the
// vpmaddubsw lane GEMM the line was at 48 (batched decode, tok/s, lane GEMM against the row
// tile: 16 sequences 528-556 / 567-676, 32 sequences 647-702 / 757-769, 64 sequences 763-860 /
// 715-828, Zen 5). The vpdpbusd form moved it to 32 (Zen 4, 246M Q4_K, 2 threads, line at 48 /
// 32 / 16, two rounds, tok/s): prefill of 32 tokens 482-628 / 703-789 / 596-791, 32 sequences
// decoding 469-484 / 578-613 / 555-572, 16 sequences 398-471 / 427-507 / 399-426; Gemma 3 270M
// 16 sequences 290-314 / 287-310 / 270, 32 sequences 326-341 / 351-362 / 275-337.
constexpr std::int64_t kLaneGemmMinTokensAvx512 = 32;
// Q4_0, Q4_1, Q5_0 and Q5_1 take the AVX-512 lane GEMM from 16 tokens: with its rows packed in
// registers (q32_words_of_8_rows) it beat the row tile at 16 and 24 tokens (one thread, GFLOP/s,
// row tile -> lane GEMM: Q4_1 1536 x 576 16 tokens 108-113 -> 224, Q4_1 576 x 1536 24 tokens
// 198 -> 237-238, Q4_0 1024 x 1024 16 tokens 180-196 -> 214-217, Q5_0 1024 x 640 16 / 24
// tokens 119 / 139 -> 195 / 236-238, Q5_1 1024 x 1024 24 tokens 202-203 -> 239-240; level at
// Q5_0 1024 x 1024 16 tokens and 2816 x 1024 16 tokens 190-198 -> 186-188; SmolLM2 prefill of
// 20 and 28 tokens +35-41 %). Q8_0 stays at 32: on widths that are multiples of 512, where the
// row tile pads nothing, it was mixed (2816 x 1024 16 tokens 135-192 -> 171-172, 1024 x 2816
// 24 tokens 194 -> 203; the 246M Q8_0 model's prefill of 20 tokens -4.5 %). The K-quants keep
// kLaneGemmMinTokensAvx512.
constexpr std::int64_t lane_gemm_min_tokens_avx512(Type type) {
    switch (type) {
        case Type::Q4_0:
        case Type::Q4_1:
        case Type::Q5_0:
        case Type::Q5_1:
            return kPanelMinTokensInternal;
        default:
            return kLaneGemmMinTokensAvx512;
    }
}
// Whether AVX2 prefill (kPanelMinTokensInternal tokens or more) of `type` takes one of
// the int8 GEMMs instead of the f32 panels (which prepare_activations then does not build), and
// AVX-512 prefill gemm_int8_avx512 / gemm_int8_q32_avx512 instead of the row tiles KAvx512 /
// Q32InterleavedAvx512.
// TOKENSCOPE_INT8_GEMM=0 in the environment turns it off, to compare the two. Baseline code
// (simd_dispatch.cpp).
bool uses_int8_gemm(Type type);

// Weight rows are decoded into one of two "packed" forms that the integer kernels consume.
// Both are plain arrays, identical for every instruction set, so that all levels compute the
// same integer sums and the scalar packers below serve any format without a SIMD packer.
//
// 32-blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): for block b,
//   dot(w_b, x_b) = d[b] * d_a[b] * sum_k u[k] q_a[k] + coef[b] * s_a[b]
// where u is unsigned (the quant plus an offset: Q4_0 nibble = q + 8, Q8_0 byte = q + 128),
// d_a / q_a / s_a = d_a * sum(q_a) are the activation block's scale, int8 values and sum.
// The offset (or Q4_1's min) is thus folded into one float term per block: coef = -offset * d
// for Q4_0/Q5_0/Q8_0 and coef = m for Q4_1/Q5_1.
void pack_q32_row(Type type, const std::uint8_t* blocks, std::int64_t nblocks, std::uint8_t* u,
                  float* d, float* coef);

// 256-blocks (K-quants): for super-block b and 16-element sub-block j,
//   dot(w_b, x_b) = d[b] * d_a[b] * sum_j sc[j] * sum_k u[k] q_a[k] + sum_j coef16[j] * s16_a[j]
// with u unsigned (Q3_K: q + 4, Q6_K: q without the -32), sc[j] a small signed integer, stored
// as sc16[k / 2] = sc[k / 16] (one int16 per pair of elements, the shape pmaddubsw produces),
// and coef16[j] the offset or min term (Q4_K: -dmin * m; Q6_K: -32 * d * sc[j]).
// u * q_a pairs stay within int16 (u <= 63, |q_a| <= 127), so pmaddubsw never saturates.
void pack_k_row(Type type, const std::uint8_t* blocks, std::int64_t nblocks, std::uint8_t* u,
                std::int16_t* sc16, float* d, float* coef16);

// offset16_low's entry of an offset16 value v (|v| < 2^15): v in the low int16, zero above, as
// the int32 a Q8_256 row stores. static: each file its own copy, compiled for its own
// instruction set (the AVX2 quantizer calls it too, and shared inline code must not be).
static constexpr std::int32_t low_int16(int v) {
    return static_cast<std::int32_t>(static_cast<std::uint16_t>(static_cast<std::int16_t>(v)));
}

// Activation rows to int8, the AVX2 forms of activation_quant.cpp's quantizers with the same
// bytes (activation_quant_avx2.cpp): Q8_32's qs, d, sum and interleaved copy; Q8_256's qs, d,
// sum16 and offset16. Offsets are PreparedActivations' (matmul.h). The row's padding must be
// zero already.
void quantize_row_q8_32_avx2(const float* x, std::int64_t n, std::uint8_t* row,
                             std::size_t scale_offset, std::size_t sum_offset,
                             std::size_t interleaved_offset, std::size_t int_sum_offset);
void quantize_row_q8_256_avx2(const float* x, std::int64_t n, std::uint8_t* row,
                              std::size_t scale_offset, std::size_t sum_offset,
                              std::size_t int_sum_offset);
// Whether the active level (AVX2 or AVX-512) may run them (simd_dispatch.cpp; false in builds
// without the x86 kernels, where they are not compiled).
bool quantize_rows_avx2_active();
// Calls them; only when quantize_rows_avx2_active().
void quantize_row_q8_32_simd(const float* x, std::int64_t n, std::uint8_t* row,
                             std::size_t scale_offset, std::size_t sum_offset,
                             std::size_t interleaved_offset, std::size_t int_sum_offset);
void quantize_row_q8_256_simd(const float* x, std::int64_t n, std::uint8_t* row,
                              std::size_t scale_offset, std::size_t sum_offset,
                              std::size_t int_sum_offset);

}  // namespace tokenscope::tensor::detail
