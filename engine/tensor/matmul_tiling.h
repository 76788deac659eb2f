#pragma once
// The loop nest shared by the kernels of every instruction set: walk the weight rows in groups
// of K::kRows, decode (pack) each group once, then run a register tile of kRows rows x
// kTokens activation rows over it for every group of tokens. A weight block is thus decoded
// once per matmul and each decoded vector is reused from a register for kTokens tokens, which
// is what lets prefill run at compute speed; for one token the same loop streams the weights.
//
// Everything here is in an unnamed namespace on purpose: each dot_*.cpp includes it and gets
// its own copy compiled with its own instruction set, so no AVX code can be shared with (and
// picked by the linker for) a baseline caller.
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#include <xmmintrin.h>  // _mm_prefetch (SSE, part of baseline x86-64)
#endif

#include "tensor/matmul_internal.h"

namespace tokenscope::tensor::detail {
namespace {

// Elements of a weight row decoded at a time; bounds the stack buffers (kRows x kPackChunk
// bytes of weights plus as many of K-quant scales). A multiple of 256 (and so of 64).
constexpr std::int64_t kPackChunk = 4096;

constexpr std::int64_t round_up_to(std::int64_t v, std::int64_t m) {
    return (v + m - 1) / m * m;
}
constexpr std::int64_t min_of(std::int64_t a, std::int64_t b) {
    return a < b ? a : b;
}

// One register tile over packed 32-block rows. len: packed elements (multiple of 64);
// the d / coef arrays and the activation d / s arrays hold at least round_up(len/32, 16)
// entries, zero beyond the data.
template <int MR, int MT>
struct Q32Tile {
    const std::uint8_t* wu[MR];
    const float* wd[MR];
    const float* wc[MR];
    const std::uint8_t* aq[MT];
    const float* ad[MT];
    const float* as[MT];
    std::int64_t len;
    float res[MR][MT];
};

// One register tile over packed K-quant rows. len: elements, a multiple of 256.
template <int MR, int MT>
struct KTile {
    const std::uint8_t* wu[MR];
    const std::int16_t* wsc[MR];
    const float* wd[MR];  // one per 256
    const float* wc[MR];  // one per 16
    const std::uint8_t* aq[MT];
    const float* ad[MT];  // one per 256
    const float* as[MT];  // one per 16
    std::int64_t len;
    float res[MR][MT];
};

// One register tile over raw F32/F16/BF16 weight rows (unaligned) and f32 activations
// (64-byte aligned, zero-padded to a multiple of 16).
template <int MR, int MT>
struct FTile {
    const std::uint8_t* w[MR];
    const float* a[MT];
    std::int64_t n;
    float res[MR][MT];
    // For tiles that prefetch inside the row (K::kPrefetchesInRow): the end of this call's
    // rows (past it lie another thread's) and the cache level.
    const std::uint8_t* w_end = nullptr;
    WeightPrefetch prefetch_level = WeightPrefetch::None;
};

// Picks K::tile<rows, toks> for a partial tile at the edges with compile-time sizes, so the
// accumulators of every variant stay in registers.
template <class K, class Tile, int R, int T>
void call_tile_tokens(int toks, Tile& t) {
    if constexpr (T > 1) {
        if (toks < T) {
            call_tile_tokens<K, Tile, R, T - 1>(toks, t);
            return;
        }
    }
    K::template tile<R, T>(t);
}

template <class K, class Tile, int R>
void call_tile(int rows, int toks, Tile& t) {
    if constexpr (R > 1) {
        if (rows < R) {
            call_tile<K, Tile, R - 1>(rows, toks, t);
            return;
        }
    }
    call_tile_tokens<K, Tile, R, K::kTokens>(toks, t);
}

// rows <= MR and toks <= MT always; the loops say so as well, since GCC 12 lost that bound when
// the row tile was set up by a callback (run_f_rows) and warned of reads past res
// (-Warray-bounds). The extra comparison is against a constant.
template <int MR, int MT>
void store_results(const MatmulArgs& a, std::int64_t r0, int rows, std::int64_t t0, int toks,
                   bool first_chunk, const float (&res)[MR][MT]) {
    for (int j = 0; j < toks && j < MT; ++j) {
        float* o = a.out + (t0 + j) * a.out_stride + r0;
        for (int i = 0; i < rows && i < MR; ++i) o[i] = first_chunk ? res[i][j] : o[i] + res[i][j];
    }
}

// Weight bytes to prefetch ahead of the row being read. One token reads each weight once, so
// decode is bound by memory latency as much as bandwidth: with the hardware prefetcher alone
// (which restarts at every 4 KiB page) a core reached about half the read bandwidth, so the
// kernels also ask for the bytes they will read a few rows later. Into which cache depends on
// the CPU (weight_prefetch(): L1 measured ~10 % better than L2 for F16 on the first dev
// machine, L2 20-40 % better than L1 on Zen 4). Every row of the matrix is contiguous with the
// next, so "ahead in the matrix" is a plain address offset.
constexpr std::size_t kPrefetchAhead = 8192;

template <int Locality>
inline void prefetch_lines(const std::uint8_t* p, std::size_t from, std::size_t stop) {
    for (std::size_t o = from; o < stop; o += 64) {
#if defined(__GNUC__) || defined(__clang__)
        __builtin_prefetch(p + o, 0, Locality);  // 3: prefetcht0, 2: prefetcht1
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
        if constexpr (Locality == 3) {
            _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
        } else {
            _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T1);
        }
#endif
    }
}

// [p + from, p + stop) line by line into the cache level `level` names (weight_prefetch()).
inline void prefetch_weights(const std::uint8_t* p, std::size_t from, std::size_t stop,
                             WeightPrefetch level) {
    switch (level) {
        case WeightPrefetch::L1:
            prefetch_lines<3>(p, from, stop);
            break;
        case WeightPrefetch::L2:
            prefetch_lines<2>(p, from, stop);
            break;
        case WeightPrefetch::None:
            break;
    }
}

// Prefetches [p + kPrefetchAhead, p + kPrefetchAhead + bytes) line by line, but nothing from
// `end` on (the end of this call's rows: the bytes after belong to another thread's chunk).
// p < end. Offsets rather than pointers, since p + kPrefetchAhead may lie past the weights.
// Callers pass the call's level (MatmulArgs::prefetch_level, read once per call).
inline void prefetch_ahead(const std::uint8_t* p, std::size_t bytes, const std::uint8_t* end,
                           WeightPrefetch level) {
    const auto left = static_cast<std::size_t>(end - p);
    const std::size_t stop = kPrefetchAhead + bytes < left ? kPrefetchAhead + bytes : left;
    prefetch_weights(p, kPrefetchAhead, stop, level);
}

// The one-row F16/BF16 decode tiles prefetch spread through the row: after each 64-weight step
// (32 on AVX2), prefetch_ahead of the bytes just read. A whole row asked for at its start is a
// burst of 32-88 lines for F16 rows of 1024-2816 weights, more than the core keeps in flight:
// on the Intel Xeon of the fifteenth pass one thread streamed an F16 matrix at 12.1-12.5 GB/s
// that way and 15.6-16.0 GB/s with two lines per 64-weight step (plain loads: 16.6-16.8).
// Rounding the start up to a line boundary (for steps that are not whole lines) cost a fifth
// of the rate again (13.4-13.7 -> 9.6-10.5 GB/s, one thread), so it is left out.

// The direct decode kernels' prefetch: as a row's loop reaches each piece of about
// kRowPrefetchBatch bytes, the piece kPrefetchAhead past it is asked for (only a row's first
// token group asks; the later groups find the row in L1). Rows under two pieces are asked for
// whole at their start by for_rows_in_token_groups, as before (prefetches_in_pieces). One thread
// from memory, ms, against whole rows at their start (fifteenth pass): rows of 2816 weights AVX2
// Q8_0 0.266-0.274 -> 0.230-0.243, Q6_K 0.250 -> 0.199-0.201, Q4_K 0.146-0.151 -> 0.137-0.138;
// AVX-512 Q6_K 0.245-0.247 -> 0.190-0.193. Pieces of 4-5 lines (a group of 8 Q8_0 blocks) or of one
// block were slower than whole rows; pieces of 512 bytes over rows shorter than 1 KiB asked for
// lines twice (Q4_1 576-wide rows 0.143-0.151 -> 0.147-0.159).
inline constexpr std::size_t kRowPrefetchBatch = 512;

// Rows of two pieces and more are prefetched in pieces (for_rows_in_token_groups).
inline bool prefetches_in_pieces(const MatmulArgs& a) {
    return a.row_bytes >= 2 * kRowPrefetchBatch;
}

template <bool kPieces>
class RowPrefetch {
  public:
    RowPrefetch(const MatmulArgs& a, std::int64_t r, std::int64_t t0)
        : row_(a.weights + static_cast<std::size_t>(r) * a.row_bytes),
          end_(prefetch_end(a)),
          next_(t0 == 0 ? 0 : a.row_bytes),
          level_(a.prefetch_level) {}
    // The loop is about to read the row's bytes from `at` on (at < row_bytes).
    void reach(std::size_t at) {
        while (at >= next_) {
            prefetch_ahead(row_ + next_, kRowPrefetchBatch, end_, level_);
            next_ += kRowPrefetchBatch;
        }
    }

  private:
    const std::uint8_t* row_;
    const std::uint8_t* end_;
    std::size_t next_;  // offset of the next piece to ask for (row_bytes: none left)
    WeightPrefetch level_;
};

// Short rows: for_rows_in_token_groups asks for each whole, and the kernels' calls compile away
// (a run-time test of the row length kept in the kernels cost 3-5 % on 576-byte rows).
template <>
class RowPrefetch<false> {
  public:
    RowPrefetch(const MatmulArgs&, std::int64_t, std::int64_t) {}
    void reach(std::size_t) {}
};

// The first kPrefetchAhead bytes of a call's rows, asked for at once. The kernels prefetch
// kPrefetchAhead ahead of the row they read, so without this the head of every call is read
// by demand misses and the hardware prefetcher alone. Decode made one call per row chunk when
// this was added (8 chunks per thread and matrix, then 2), and for the small matrices of a 135M
// model a chunk is a few tens of KiB, so that head was a large share of it. Decode now makes one
// call per piece of a thread's share (CpuBackend::stream_matmuls), and a piece after the first
// finds its head already asked for by the one before (MatmulArgs::prefetch_row_end), so there
// this asks again for lines in flight: not measured, left as is.
inline void prefetch_call_head(const MatmulArgs& a) {
    const std::uint8_t* begin = a.weights + static_cast<std::size_t>(a.row_begin) * a.row_bytes;
    const auto bytes = static_cast<std::size_t>(a.row_end - a.row_begin) * a.row_bytes;
    prefetch_weights(begin, 0, bytes < kPrefetchAhead ? bytes : kPrefetchAhead, a.prefetch_level);
}

const std::uint8_t* act_row(const MatmulArgs& a, std::int64_t t) {
    return a.acts + static_cast<std::size_t>(t) * a.act_stride;
}

// The last token group of for_rows_in_token_groups: `left` tokens, 1 <= left <= T.
template <int T, class Row>
inline void last_token_group(std::int64_t r, std::int64_t t0, std::int64_t left, Row& row) {
    if constexpr (T > 1) {
        if (left < T) {
            last_token_group<T - 1>(r, t0, left, row);
            return;
        }
    }
    row(r, t0, std::integral_constant<int, T>{});
}

// The row loop of for_rows_in_token_groups for one prefetch form: whole rows asked for here
// (kPieces false) or in pieces by the row kernels (RowPrefetch<true>).
template <int Max, bool kPieces, class Row>
void rows_in_token_groups(const MatmulArgs& a, Row&& row) {
    const std::uint8_t* w_end = prefetch_end(a);
    for (std::int64_t r = a.row_begin; r < a.row_end; ++r) {
        if constexpr (!kPieces) {
            prefetch_ahead(a.weights + static_cast<std::size_t>(r) * a.row_bytes, a.row_bytes,
                           w_end, a.prefetch_level);
        }
        std::int64_t t0 = 0;
        for (; t0 + Max <= a.tokens; t0 += Max) row(r, t0, std::integral_constant<int, Max>{});
        if (t0 < a.tokens) last_token_group<Max>(r, t0, a.tokens - t0, row);
    }
}

// The loop of the kernels that read weight blocks in place for a few tokens (decode, small
// batches): rows outermost, each prefetched ahead and then read from memory once (it stays in L1
// for the later token groups), tokens in groups of up to Max. row(r, t0, tokens, pieces) is
// called with std::integral_constant<int, T> for T = 1 .. Max and std::bool_constant pieces:
// true where the row kernel prefetches as it goes (RowPrefetch<true>, rows of 1 KiB and more),
// false where this loop has asked for the whole row.
template <int Max = 3, class Row>
void for_rows_in_token_groups(const MatmulArgs& a, Row&& row) {
    if (prefetches_in_pieces(a)) {
        rows_in_token_groups<Max, true>(a, [&](std::int64_t r, std::int64_t t0, auto tokens) {
            row(r, t0, tokens, std::true_type{});
        });
    } else {
        rows_in_token_groups<Max, false>(a, [&](std::int64_t r, std::int64_t t0, auto tokens) {
            row(r, t0, tokens, std::false_type{});
        });
    }
}

// The loop of the interleaved tiles (interleaved_avx2.cpp, interleaved_kquant_avx2.cpp,
// interleaved_kquant_avx512.cpp): groups of `group_rows` rows outermost, so that a group (9-11
// KiB at 640-1024 columns) stays in L1 for its later token tiles, and token tiles of at most Max
// as even as possible (9 tokens at 4: 3 + 3 + 3), so that no tile is a lone token (Q8_0 on Zen 3:
// 2.4 cycles per (row, block) for one token against about 2.0 for 4-6). tile(r0, t0, tokens) is
// called with std::integral_constant<int, T>, T = 1 .. Max.
template <int Max, class Tile>
void for_groups_in_even_token_tiles(const MatmulArgs& a, std::int64_t group_rows, Tile&& tile) {
    const std::int64_t tiles = (a.tokens + Max - 1) / Max;
    for (std::int64_t r = a.row_begin; r < a.row_end; r += group_rows) {
        std::int64_t t0 = 0;
        for (std::int64_t i = 0; i < tiles; ++i) {
            const std::int64_t tokens = (a.tokens - t0) / (tiles - i);
            last_token_group<Max>(r, t0, tokens, tile);
            t0 += tokens;
        }
    }
}

// Tokens t0 .. t0 + T - 1 of int8 activations (PreparedActivations' Q8_32 / Q8_256 rows): each
// row's int8 values, block scales and block sums, as the direct and int8 GEMM kernels read them.
template <int T>
struct TokenRows {
    const std::uint8_t* q[T];
    const float* d[T];
    const float* s[T];
    const std::int32_t* offset16[T];      // Q8_256: -4 times the integer sums of 16 (matmul.h)
    const std::int32_t* offset16_low[T];  // the same in the low int16 of each
    // Q8_32 rows keep each block's integer sum of qs where Q8_256 rows keep offset16 (matmul.h).
    std::int32_t isum(int t, std::int64_t block) const { return offset16[t][block]; }
    TokenRows(const MatmulArgs& a, std::int64_t t0) {
        for (int t = 0; t < T; ++t) {
            q[t] = act_row(a, t0 + t);
            d[t] = reinterpret_cast<const float*>(q[t] + a.act_scale_offset);
            s[t] = reinterpret_cast<const float*>(q[t] + a.act_sum_offset);
            offset16[t] = reinterpret_cast<const std::int32_t*>(q[t] + a.act_int_sum_offset);
            offset16_low[t] = offset16[t] + a.n / 16;
        }
    }
};

// K: kRows, kTokens, pack(type, blocks, nblocks, u, d, coef), tile<R, T>(Q32Tile&).
// A K with kInterleaved = true also has interleave(u, len), which turns packed rows into the
// interleaved order of PreparedActivations (groups of 16 blocks), and its tile reads the
// activations' interleaved copy; packed lengths are then whole groups (512 elements).
template <class K>
constexpr bool interleaved_kernel() {
    if constexpr (requires { K::kInterleaved; }) {
        return K::kInterleaved;
    } else {
        return false;
    }
}

template <class K>
void run_q32(const MatmulArgs& a) {
    constexpr bool kInter = interleaved_kernel<K>();
    constexpr int MR = K::kRows;
    constexpr int MT = K::kTokens;
    constexpr std::int64_t kScales = kPackChunk / 32;  // already a multiple of 16
    alignas(64) std::uint8_t u[MR * kPackChunk];
    alignas(64) float d[MR * kScales];
    alignas(64) float c[MR * kScales];
    const std::size_t block_bytes = a.row_bytes / static_cast<std::size_t>(a.n / 32);
    const std::uint8_t* w_end = prefetch_end(a);
    Q32Tile<MR, MT> t;
    for (std::int64_t r0 = a.row_begin; r0 < a.row_end; r0 += MR) {
        const int rows = static_cast<int>(min_of(MR, a.row_end - r0));
        for (std::int64_t k0 = 0; k0 < a.n; k0 += kPackChunk) {
            const std::int64_t kc = min_of(kPackChunk, a.n - k0);
            const std::int64_t len = round_up_to(kc, kInter ? 512 : 64);
            const std::int64_t nb = kc / 32;
            const std::int64_t nb_pad = round_up_to(len / 32, 16);
            for (int i = 0; i < rows; ++i) {
                std::uint8_t* ui = u + i * len;
                float* di = d + i * nb_pad;
                float* ci = c + i * nb_pad;
                const std::uint8_t* src = a.weights +
                                          static_cast<std::size_t>(r0 + i) * a.row_bytes +
                                          static_cast<std::size_t>(k0 / 32) * block_bytes;
                prefetch_ahead(src, static_cast<std::size_t>(nb) * block_bytes, w_end,
                               a.prefetch_level);
                K::pack(a.type, src, nb, ui, di, ci);
                std::memset(ui + kc, 0, static_cast<std::size_t>(len - kc));
                for (std::int64_t b = nb; b < nb_pad; ++b) di[b] = ci[b] = 0.0f;
                if constexpr (kInter) K::interleave(ui, len);
                t.wu[i] = ui;
                t.wd[i] = di;
                t.wc[i] = ci;
            }
            t.len = len;
            for (std::int64_t t0 = 0; t0 < a.tokens; t0 += MT) {
                const int toks = static_cast<int>(min_of(MT, a.tokens - t0));
                for (int j = 0; j < toks; ++j) {
                    const std::uint8_t* row = act_row(a, t0 + j);
                    t.aq[j] = row + (kInter ? a.act_interleaved_offset : 0) + k0;
                    t.ad[j] = reinterpret_cast<const float*>(row + a.act_scale_offset) + k0 / 32;
                    t.as[j] = reinterpret_cast<const float*>(row + a.act_sum_offset) + k0 / 32;
                }
                call_tile<K, Q32Tile<MR, MT>, MR>(rows, toks, t);
                store_results(a, r0, rows, t0, toks, k0 == 0, t.res);
            }
        }
    }
}

// K: kRows, kTokens, pack(type, blocks, nblocks, u, sc16, d, coef16), tile<R, T>(KTile&).
template <class K>
void run_k(const MatmulArgs& a) {
    constexpr int MR = K::kRows;
    constexpr int MT = K::kTokens;
    alignas(64) std::uint8_t u[MR * kPackChunk];
    alignas(64) std::int16_t sc[MR * kPackChunk / 2];
    alignas(64) float d[MR * kPackChunk / 256];
    alignas(64) float c[MR * kPackChunk / 16];
    const std::size_t block_bytes = a.row_bytes / static_cast<std::size_t>(a.n / 256);
    const std::uint8_t* w_end = prefetch_end(a);
    KTile<MR, MT> t;
    for (std::int64_t r0 = a.row_begin; r0 < a.row_end; r0 += MR) {
        const int rows = static_cast<int>(min_of(MR, a.row_end - r0));
        for (std::int64_t k0 = 0; k0 < a.n; k0 += kPackChunk) {
            const std::int64_t len = min_of(kPackChunk, a.n - k0);
            for (int i = 0; i < rows; ++i) {
                const std::uint8_t* src = a.weights +
                                          static_cast<std::size_t>(r0 + i) * a.row_bytes +
                                          static_cast<std::size_t>(k0 / 256) * block_bytes;
                prefetch_ahead(src, static_cast<std::size_t>(len / 256) * block_bytes, w_end,
                               a.prefetch_level);
                K::pack(a.type, src, len / 256, u + i * len, sc + i * len / 2, d + i * len / 256,
                        c + i * len / 16);
                t.wu[i] = u + i * len;
                t.wsc[i] = sc + i * len / 2;
                t.wd[i] = d + i * len / 256;
                t.wc[i] = c + i * len / 16;
            }
            t.len = len;
            for (std::int64_t t0 = 0; t0 < a.tokens; t0 += MT) {
                const int toks = static_cast<int>(min_of(MT, a.tokens - t0));
                for (int j = 0; j < toks; ++j) {
                    const std::uint8_t* row = act_row(a, t0 + j);
                    t.aq[j] = row + k0;
                    t.ad[j] = reinterpret_cast<const float*>(row + a.act_scale_offset) + k0 / 256;
                    t.as[j] = reinterpret_cast<const float*>(row + a.act_sum_offset) + k0 / 16;
                }
                call_tile<K, KTile<MR, MT>, MR>(rows, toks, t);
                store_results(a, r0, rows, t0, toks, k0 == 0, t.res);
            }
        }
    }
}

// The loop of the f32/F16/BF16 row tiles: rows outermost, K::kRows at a time; set_rows(r0, rows,
// t) points t.w at them (the weight rows themselves, or a widened copy), then every token of the
// call runs over them. K: kRows, kTokens, tile<R, T>(FTile&).
template <class K, class SetRows>
void run_f_rows(const MatmulArgs& a, SetRows&& set_rows) {
    constexpr int MR = K::kRows;
    constexpr int MT = K::kTokens;
    FTile<MR, MT> t;
    t.n = a.n;
    for (std::int64_t r0 = a.row_begin; r0 < a.row_end; r0 += MR) {
        const int rows = static_cast<int>(min_of(MR, a.row_end - r0));
        set_rows(r0, rows, t);
        for (std::int64_t t0 = 0; t0 < a.tokens; t0 += MT) {
            const int toks = static_cast<int>(min_of(MT, a.tokens - t0));
            for (int j = 0; j < toks; ++j) {
                t.a[j] = reinterpret_cast<const float*>(act_row(a, t0 + j));
            }
            call_tile<K, FTile<MR, MT>, MR>(rows, toks, t);
            store_results(a, r0, rows, t0, toks, true, t.res);
        }
    }
}

// K: kRows, kTokens, tile<R, T>(FTile&) for one weight type. Rows are not packed: a float
// row is already what the kernel multiplies, and F16/BF16 convert in a register.
template <class K>
void run_f(const MatmulArgs& a) {
    const std::uint8_t* w_end = prefetch_end(a);
    const WeightPrefetch level = a.prefetch_level;
    run_f_rows<K>(a, [&](std::int64_t r0, int rows, FTile<K::kRows, K::kTokens>& t) {
        for (int i = 0; i < rows; ++i) {
            t.w[i] = a.weights + static_cast<std::size_t>(r0 + i) * a.row_bytes;
            if constexpr (requires { K::kPrefetchesInRow; }) {
                t.w_end = w_end;
                t.prefetch_level = level;
            } else {
                prefetch_ahead(t.w[i], a.row_bytes, w_end, level);
            }
        }
    });
}

}  // namespace
}  // namespace tokenscope::tensor::detail
