#pragma once
// CPU matrix kernels that work directly on weight rows in their file format (F32/F16/BF16 and
// the ggml quantized blocks): weights are decoded a few rows at a time into a small stack
// buffer, never dequantized wholesale. Activations are converted once per matmul into the
// format the weight type dots best with (int8 blocks for quantized weights, so the inner loop
// is an integer dot product: VNNI on AVX-512, maddubs on AVX2).
//
// The instruction set is chosen at run time (the binary itself targets baseline x86-64), so
// one build runs everywhere and uses AVX-512 where the CPU has it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "tensor/interleaved_rows.h"
#include "tensor/type.h"
#include "tensor/weight_prefetch.h"

namespace tokenscope::tensor {

// Avx2 needs AVX2 + FMA + F16C; Avx512 needs AVX-512 F/BW/VL/DQ and VNNI (Ice Lake, Zen 4 and
// later: a Skylake-X without VNNI runs the AVX2 kernels).
enum class SimdLevel { Scalar = 0, Avx2 = 1, Avx512 = 2 };

SimdLevel detected_simd_level();  // the best level this CPU supports
SimdLevel active_simd_level();    // the level matmul_rows uses: detected unless overridden
// For tests and benchmarks: force a level at or below the detected one. Throws InvalidArgument
// when the CPU lacks it. Not meant to be called while matmuls run on other threads.
void set_simd_level(SimdLevel level);
const char* simd_level_name(SimdLevel level);  // "scalar", "avx2", "avx512"

// AVX-VNNI (vpdpbusd on 256-bit registers, Intel Alder Lake and later client CPUs) in the AVX2
// level's int8 prefill GEMM of the 32-block types: used where the CPU has it, unless
// TOKENSCOPE_AVXVNNI=0 (to measure the AVX2-only path of Zen 2/3 and older Intel parts on a
// newer machine) or set_avx_vnni(false). Results are the same bits either way.
bool avx_vnni_available();
bool avx_vnni_in_use();
// For tests and benchmarks; throws InvalidArgument when `on` and the CPU lacks AVX-VNNI. Not
// meant to be called while matmuls run on other threads.
void set_avx_vnni(bool on);
void reset_avx_vnni();  // back to the default
// The kernels matmul_rows runs now, for logs and benchmark records: simd_level_name of the
// active level, with "+avx-vnni" at the AVX2 level while AVX-VNNI is in use.
const char* active_kernels_name();

// How prepared activations are stored; which one follows from the weight type.
enum class ActivationFormat {
    F32,    // F32 / F16 / BF16 weights: the activations as they are
    Q8_32,  // Q4_0/Q4_1/Q5_0/Q5_1/Q8_0: blocks of 32 int8 with a float scale and block sum
    Q8_256  // K-quants: blocks of 256 int8 with a float scale and sums of every 16
};

ActivationFormat activation_format_for(Type weight_type);

// Whether a prefill's matrix products (kPanelMinTokens tokens or more) with `weight_type`
// weights multiply int8 (the activations quantized to blocks of int8 times the weights' integer
// codes) at the active level: every quantized type, except where the AVX2 prefill decodes them
// to f32 panels instead (TOKENSCOPE_INT8_GEMM=0).
// F32, F16 and BF16 weights multiply f32 activations with f32 multiply-adds. For reporting
// prefill against the matching ceiling (inspect/compute_peak.h).
bool prefill_uses_int8_products(Type weight_type);

// Runs body(begin, end) over [0, count), possibly split into disjoint ranges on several
// threads at once (the engine passes its thread pool's parallel_for); returns when all are done.
using ParallelRows = std::function<void(
    std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body)>;

// Activation rows converted for one weight type. Owns a 64-byte aligned buffer that
// prepare_activations() reuses (grows only), so a forward pass allocates once.
//
// Layout of each row (row_stride bytes apart; every part starts 64-byte aligned and is padded
// with zeros, so kernels may read whole vectors past the last element):
//   F32:    n floats, padded to a multiple of 16.
//   Q8_32:  qs: int8[n_pad] (n_pad = n rounded up to 64), then scale d: float[n_pad / 32],
//           then sum: float[n_pad / 32] = d * (sum of the block's qs) (both zero-padded to a
//           multiple of 16 blocks), then the same qs interleaved: int8[n rounded up to 512],
//           in groups of 16 blocks where 4-byte word v of block l of the group sits at byte
//           64 * v + 4 * l. One 64-byte vector then holds a word of each of 16 blocks, so a
//           kernel accumulates whole blocks in integer lanes (lane = block) and applies the
//           per-block scales once per 16 blocks instead of once per 2. Then isum:
//           int32[n_pad / 32], each block's integer sum of qs (the AVX-512 Q4_0/Q5_0 kernels
//           start their sums at -8 or -16 times it: their offset in the integers).
//   Q8_256: qs: int8[n_pad] (n multiple of 256), d: float[n / 256], then
//           sum16: float[n / 16] = d_block * (sum of each 16 qs), then the same sums as
//           integers times -4, offset16: int32[n / 16], and right after it the same values in
//           the low int16 of a uint32 with a zero high one, offset16_low: uint32[n / 16] (Q3_K's
//           offset, which its AVX-512 and AVX2 kernels add to their integer products with one
//           broadcast load each; int8_lanes_avx2.h, kQ3KIntegerOffsets; the AVX-512 kernels
//           take Q6_K's offset from offset16 as well, times 8: kAvx512OffsetFactor).
// Element k of a row is approximately qs[k] * d[block of k]; qs is in [-127, 127].
//
// Prefill panels (optional, after all rows): when at least kPanelMinTokens rows are prepared
// for F16 or BF16 weights (or, at AVX2, any quantized type while TOKENSCOPE_INT8_GEMM=0 turns
// the int8 GEMMs off) and the active kernels are AVX2 or AVX-512, the f32 activations are also
// stored transposed in groups of 16 tokens: group g is float[n][16] with element
// [k][j] = x[16 g + j][k] (tokens past the last row are zero). The prefill kernel then loads
// 16 tokens' values of one k as two vectors and multiplies them by one broadcast weight, a
// register tile that needs no horizontal sums and keeps the activations streaming from L2 at a
// fraction of its bandwidth (gemm_panels_avx2.cpp). The quantized rows are prepared as well,
// so any kernel level can still run these activations; the F32 rows are not (has_rows() is
// false): with panels the F16/BF16 kernels read only those, and copying every row beside them
// cost 1.1-1.3 % of an AVX2 F16 prefill (memmove in `perf`). matmul_rows refuses such
// activations for any kernel that would read the rows (F32 weights, a level without panels).
class PreparedActivations {
  public:
    PreparedActivations() = default;
    PreparedActivations(const PreparedActivations&) = delete;
    PreparedActivations& operator=(const PreparedActivations&) = delete;
    PreparedActivations(PreparedActivations&&) noexcept = default;
    PreparedActivations& operator=(PreparedActivations&&) noexcept = default;

    ActivationFormat format() const { return format_; }
    Type weight_type() const { return weight_type_; }
    std::int64_t rows() const { return rows_; }
    std::int64_t n() const { return n_; }
    std::size_t row_stride() const { return row_stride_; }
    // Byte offsets inside a row of the scale and sum arrays (0 for F32).
    std::size_t scale_offset() const { return scale_offset_; }
    std::size_t sum_offset() const { return sum_offset_; }
    // Byte offset inside a row of offset16 and offset16_low (Q8_256) or isum (Q8_32); 0 for F32.
    std::size_t int_sum_offset() const { return int_sum_offset_; }
    // Byte offset inside a row of the interleaved qs (Q8_32 only, else 0).
    std::size_t interleaved_offset() const { return interleaved_offset_; }
    const std::uint8_t* row(std::int64_t r) const {
        return data_.get() + static_cast<std::size_t>(r) * row_stride_;
    }
    // Whether row(r) holds the rows: false for F32-format activations prepared as panels only.
    bool has_rows() const { return has_rows_; }
    // Whether a matmul of `weight_type` rows of n elements over `rows` tokens can take these
    // activations: the same format and shape, and where only the panels were written the same
    // weight type.
    bool serves(Type weight_type, std::int64_t n, std::int64_t rows) const;
    // The prefill panels (see above), or null when they were not built.
    const float* panels() const {
        return has_panels_ ? reinterpret_cast<const float*>(data_.get() + panel_offset_) : nullptr;
    }
    // Floats from one 16-token panel group to the next (n * 16).
    std::int64_t panel_group_stride() const { return n_ * 16; }

  private:
    friend void prepare_activations(Type, const float*, std::int64_t, std::int64_t,
                                    PreparedActivations&, const ParallelRows&);
    struct AlignedFree {
        void operator()(std::uint8_t* p) const;
    };
    std::unique_ptr<std::uint8_t[], AlignedFree> data_;
    std::size_t capacity_ = 0;
    ActivationFormat format_ = ActivationFormat::F32;
    Type weight_type_ = Type::F32;
    std::int64_t rows_ = 0;
    std::int64_t n_ = 0;
    std::size_t row_stride_ = 0;
    std::size_t scale_offset_ = 0;
    std::size_t sum_offset_ = 0;
    std::size_t int_sum_offset_ = 0;
    std::size_t interleaved_offset_ = 0;
    bool has_panels_ = false;
    bool has_rows_ = true;
    std::size_t panel_offset_ = 0;
};

// Fewest activation rows for which prepare_activations() builds the prefill panels. Below it
// a 16-token panel would be mostly padding and the row-tile kernels are as fast.
inline constexpr std::int64_t kPanelMinTokens = 16;

// Converts `rows` activation rows of `n` floats (row t at x + t * n) for a matmul with weights
// of `weight_type`. Throws InvalidArgument when n is not a whole number of the weight type's
// blocks or rows/n is negative. `parallel`, when given, runs the per-row work (quantizing,
// clearing, the panels) split over threads; without it everything runs on the caller's thread.
// A prompt's activations were quantized on one thread while the others waited: 3.7 % of a
// 512-token prefill's samples on 2 threads, and that serial share grows with the thread count.
void prepare_activations(Type weight_type, const float* x, std::int64_t rows, std::int64_t n,
                         PreparedActivations& out, const ParallelRows& parallel = {});

// Callers that split a matmul's rows between threads should cut them at multiples of this:
// the row count of the register tile (or lane group) the kernels take for `weight_type` and
// `tokens` activation rows at the active SIMD level, so that no chunk ends in a partial tile.
// The int8 prefill GEMMs compute a partial group of 16 (AVX2) or 32 (AVX-512) rows in full, so a
// 72-row chunk cost as much as a 96-row one. Speed only: results never depend on the split.
// Interleaved matrices (interleaved_rows.h) are cut at their groups of 16 rows, or at two groups
// where the AVX-512 lane GEMMs (32 rows at once) take the product.
std::int64_t matmul_row_multiple(Type weight_type, std::int64_t tokens,
                                 RowLayout layout = RowLayout::Rows);

// out[t * out_stride + r] = dot(weight row r, activation row t) for r in [row_begin, row_end)
// and t in [0, acts.rows()). Weight row r starts at weights + r * row_bytes(weight_type, n) and
// may sit at any address (mmapped file). Thread-safe and allocation-free, so callers split the
// rows across threads. Throws InvalidArgument when acts were prepared for another weight type
// or length, or the range is invalid.
//
// With layout Interleaved the weights are stored as interleave_rows() writes them (the group
// of row r still starts at weights + r * row_bytes); row_begin and row_end must then be
// multiples of kInterleavedGroupRows. Levels without kernels for that layout copy each group
// back to the file's order first (slower, same tolerance, other bits).
//
// stream_end: the caller will go on with the rows after row_end up to stream_end (of the same
// matrix) on this thread, so the kernels may ask for their memory ahead as they do within the
// range (decode cuts a thread's rows into pieces: runtime::ThreadPool::parallel_for_shares).
// Speed only; at most row_end means none.
void matmul_rows(Type weight_type, const void* weights, std::int64_t n, std::int64_t row_begin,
                 std::int64_t row_end, const PreparedActivations& acts, float* out,
                 std::int64_t out_stride, RowLayout layout = RowLayout::Rows,
                 std::int64_t stream_end = 0);

}  // namespace tokenscope::tensor
