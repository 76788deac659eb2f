// Run-time choice of the kernel instruction set and the checked entry point matmul_rows().
// The binary targets baseline x86-64; the AVX2 and AVX-512 kernels live in their own files
// compiled with those instruction sets and are only called after the CPU said it has them.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "tensor/matmul.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "util/cpu_features.h"
#include "util/error.h"

namespace tokenscope::tensor {

static_assert(kPanelMinTokens == detail::kPanelMinTokensInternal);

namespace {

SimdLevel detect() {
#if defined(TOKENSCOPE_X86_KERNELS)
    // Features count only when the OS also saves the wide registers (XCR0), so a kernel
    // without AVX-512 state support reports no AVX-512.
    const cpu::X86Features& f = cpu::x86_features();
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && f.fma && f.f16c) {
        return SimdLevel::Avx512;
    }
    if (f.avx2 && f.fma && f.f16c) {
        return SimdLevel::Avx2;
    }
#endif
    return SimdLevel::Scalar;
}

// -1: not overridden, follow detected_simd_level().
std::atomic<int> g_forced_level{-1};

}  // namespace

SimdLevel detected_simd_level() {
    static const SimdLevel level = detect();
    return level;
}

namespace {
// TOKENSCOPE_SIMD=scalar|avx2|avx512 caps the level for the whole process (benchmarks of the
// AVX2 path on an AVX-512 machine; tools/bench-vs-llamacpp). A level the CPU lacks, or an
// unknown name, is ignored with a warning rather than failing every program at start.
SimdLevel environment_level() {
    static const SimdLevel level = [] {
        const SimdLevel detected = detected_simd_level();
        const char* text = std::getenv("TOKENSCOPE_SIMD");
        if (!text || !*text) return detected;
        const std::string name(text);
        SimdLevel wanted;
        if (name == "scalar")
            wanted = SimdLevel::Scalar;
        else if (name == "avx2")
            wanted = SimdLevel::Avx2;
        else if (name == "avx512")
            wanted = SimdLevel::Avx512;
        else {
            spdlog::warn("TOKENSCOPE_SIMD='{}' is not scalar, avx2 or avx512; using {}", name,
                         simd_level_name(detected));
            return detected;
        }
        if (static_cast<int>(wanted) > static_cast<int>(detected)) {
            spdlog::warn("TOKENSCOPE_SIMD={}: this CPU's best is {}; using that", name,
                         simd_level_name(detected));
            return detected;
        }
        return wanted;
    }();
    return level;
}
}  // namespace

SimdLevel active_simd_level() {
    const int forced = g_forced_level.load(std::memory_order_relaxed);
    return forced < 0 ? environment_level() : static_cast<SimdLevel>(forced);
}

void set_simd_level(SimdLevel level) {
    if (static_cast<int>(level) < 0 ||
        static_cast<int>(level) > static_cast<int>(SimdLevel::Avx512)) {
        throw InvalidArgument("unknown SIMD level " + std::to_string(static_cast<int>(level)));
    }
    if (static_cast<int>(level) > static_cast<int>(detected_simd_level())) {
        throw InvalidArgument(std::string("this CPU does not support ") + simd_level_name(level) +
                              " (best: " + simd_level_name(detected_simd_level()) + ")");
    }
    g_forced_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

namespace {
// -1: not overridden, follow the CPU and TOKENSCOPE_AVXVNNI.
std::atomic<int> g_forced_vnni{-1};

bool environment_vnni() {
    static const bool on = [] {
        if (!avx_vnni_available()) return false;
        const char* text = std::getenv("TOKENSCOPE_AVXVNNI");
        if (!text || !*text) return true;
        const std::string value(text);
        if (value == "0") return false;
        if (value != "1") spdlog::warn("TOKENSCOPE_AVXVNNI='{}' is not 0 or 1; using 1", value);
        return true;
    }();
    return on;
}
}  // namespace

bool avx_vnni_available() {
#if defined(TOKENSCOPE_X86_KERNELS)
    const cpu::X86Features& f = cpu::x86_features();
    return f.avxvnni && f.avx2 && f.fma && f.f16c;
#else
    return false;
#endif
}

bool avx_vnni_in_use() {
    const int forced = g_forced_vnni.load(std::memory_order_relaxed);
    return forced < 0 ? environment_vnni() : forced == 1;
}

void set_avx_vnni(bool on) {
    if (on && !avx_vnni_available()) throw InvalidArgument("this CPU does not support AVX-VNNI");
    g_forced_vnni.store(on ? 1 : 0, std::memory_order_relaxed);
}

void reset_avx_vnni() {
    g_forced_vnni.store(-1, std::memory_order_relaxed);
}

const char* active_kernels_name() {
    const SimdLevel level = active_simd_level();
    if (level == SimdLevel::Avx2 && avx_vnni_in_use()) return "avx2+avx-vnni";
    return simd_level_name(level);
}

const char* simd_level_name(SimdLevel level) {
    switch (level) {
        case SimdLevel::Scalar:
            return "scalar";
        case SimdLevel::Avx2:
            return "avx2";
        case SimdLevel::Avx512:
            return "avx512";
    }
    return "unknown";
}

bool prefill_uses_int8_products(Type weight_type) {
    if (activation_format_for(weight_type) == ActivationFormat::F32) return false;
    // The AVX2 prefill panels decode the quantized types to f32 where the int8 GEMMs are off;
    // every other path (AVX-512, the dot-product tiles, scalar) multiplies the int8 codes.
    return active_simd_level() != SimdLevel::Avx2 || detail::uses_int8_gemm(weight_type);
}

bool detail::uses_int8_gemm(Type type) {
#if defined(TOKENSCOPE_X86_KERNELS)
    static const bool enabled = [] {
        const char* text = std::getenv("TOKENSCOPE_INT8_GEMM");
        return !(text && std::string(text) == "0");
    }();
    return enabled && activation_format_for(type) != ActivationFormat::F32;
#else
    (void)type;
    return false;
#endif
}

namespace {
// Whether prefill (kPanelMinTokensInternal tokens or more) of a type with int8_gemm
// (uses_int8_gemm) at `level` goes to one of the int8 GEMMs whose lanes are weight rows: every
// quantized type, at AVX2 always, at AVX-512 from lane_gemm_min_tokens_avx512 tokens (matmul_avx512
// checks the count per block).
bool lane_gemm_prefill(bool int8_gemm, SimdLevel level) {
    return int8_gemm && (level == SimdLevel::Avx2 || level == SimdLevel::Avx512);
}

// Fewest tokens from which a product of `type` at the active level goes to a lane GEMM, or
// INT64_MAX where none does.
std::int64_t lane_gemm_min_tokens(Type type) {
    const SimdLevel level = active_simd_level();
    if (!lane_gemm_prefill(detail::uses_int8_gemm(type), level))
        return std::numeric_limits<std::int64_t>::max();
    return level == SimdLevel::Avx2 ? detail::kPanelMinTokensInternal
                                    : detail::lane_gemm_min_tokens_avx512(type);
}
}  // namespace

std::int64_t matmul_row_multiple(Type weight_type, std::int64_t tokens, RowLayout layout) {
    // The decode and small-batch kernels read 1-8 rows at a time, the f32/F16 tiles 2 or 4, the
    // F16 panels 6 (AVX2) or 12 (AVX-512): 24 keeps all of those whole.
    constexpr std::int64_t kTiles = 24;
    const SimdLevel level = active_simd_level();
    const bool lane_gemm = tokens >= lane_gemm_min_tokens(weight_type);
    // Interleaved rows come in groups of 16, which every kernel for them takes whole; the
    // AVX-512 lane GEMMs take two groups at a time (below).
    if (layout == RowLayout::Interleaved && !(lane_gemm && level == SimdLevel::Avx512))
        return kInterleavedGroupRows;
    if (!lane_gemm) return kTiles;
    return level == SimdLevel::Avx2 ? detail::kLaneGroupRowsAvx2 : detail::kLaneGroupRowsAvx512;
}

bool detail::quantize_rows_avx2_active() {
#if defined(TOKENSCOPE_X86_KERNELS)
    return active_simd_level() >= SimdLevel::Avx2;
#else
    return false;
#endif
}

void detail::quantize_row_q8_32_simd(const float* x, std::int64_t n, std::uint8_t* row,
                                     std::size_t scale_offset, std::size_t sum_offset,
                                     std::size_t interleaved_offset, std::size_t int_sum_offset) {
#if defined(TOKENSCOPE_X86_KERNELS)
    quantize_row_q8_32_avx2(x, n, row, scale_offset, sum_offset, interleaved_offset,
                            int_sum_offset);
#else
    (void)x, (void)n, (void)row, (void)scale_offset, (void)sum_offset, (void)interleaved_offset;
    (void)int_sum_offset;
    throw InvalidArgument("no AVX2 activation quantizer in this build");
#endif
}

void detail::quantize_row_q8_256_simd(const float* x, std::int64_t n, std::uint8_t* row,
                                      std::size_t scale_offset, std::size_t sum_offset,
                                      std::size_t int_sum_offset) {
#if defined(TOKENSCOPE_X86_KERNELS)
    quantize_row_q8_256_avx2(x, n, row, scale_offset, sum_offset, int_sum_offset);
#else
    (void)x, (void)n, (void)row, (void)scale_offset, (void)sum_offset, (void)int_sum_offset;
    throw InvalidArgument("no AVX2 activation quantizer in this build");
#endif
}

namespace {
void run_kernel(const detail::MatmulArgs& args) {
    switch (active_simd_level()) {
#if defined(TOKENSCOPE_X86_KERNELS)
        case SimdLevel::Avx512:
            if (detail::matmul_avx512(args)) return;
            break;
        case SimdLevel::Avx2:
            if (detail::matmul_avx2(args)) return;
            break;
#endif
        default:
            break;
    }
    detail::matmul_scalar(args);
}
}  // namespace

bool interleaving_pays(Type type) {
#if defined(TOKENSCOPE_X86_KERNELS)
    static const bool enabled = [] {
        const char* text = std::getenv("TOKENSCOPE_INTERLEAVE");
        return !(text && std::string(text) == "0");
    }();
    if (!enabled || !has_interleaved_layout(type)) return false;
    switch (active_simd_level()) {
        case SimdLevel::Avx2:
            return true;
        case SimdLevel::Avx512:
            // All but Q8_0. The nibble types: matmul_avx512 sent their interleaved products
            // under the lane GEMM's line to the AVX2 tile (Zen 4, 2 threads, whole-model decode
            // at 128 cached tokens, six alternated rounds, file order / interleaved, median
            // tok/s: SmolLM2 (Q4_1) 161 / 219, Gemma 3 270M (Q5_0 layers) 91 / 96; Q8_0 117 /
            // 120 stays in file order, docs/benchmarks.md, twenty-eighth pass). The K-quants
            // have their own 512-bit tile (interleaved_kquant_avx512.cpp): with the AVX2 tile
            // they had not paid (Q4_K 167 / 162, Q3_K 145 / 133, Q2_K 188 / 200); with it, the
            // 246M models' decode at 128 cached tokens, two alternated rounds, tok/s: Q2_K 203,
            // 200 -> 267, 315, Q3_K 146, 172 -> 198, 188, Q4_K unchanged (thirtieth pass). Since
            // the thirty-eighth pass the nibble types have one too (interleaved_q32_avx512.cpp).
            return type != Type::Q8_0;
        default:
            return false;
    }
#else
    (void)type;
    return false;
#endif
}

namespace {
// An interleaved matrix at a level without kernels for its layout: each group of 16 rows copied
// back to the file's order, then the usual kernels.
void matmul_interleaved_by_copy(Type weight_type, const std::uint8_t* weights, std::int64_t n,
                                std::int64_t row_begin, std::int64_t row_end,
                                const PreparedActivations& acts, float* out,
                                std::int64_t out_stride) {
    const std::size_t rbytes = row_bytes(weight_type, n);
    thread_local std::vector<std::uint8_t> group;
    group.resize(rbytes * static_cast<std::size_t>(kInterleavedGroupRows));
    for (std::int64_t g = row_begin; g < row_end; g += kInterleavedGroupRows) {
        for (std::int64_t r = 0; r < kInterleavedGroupRows; ++r) {
            row_from_interleaved(weight_type, weights, n, g + r,
                                 group.data() + static_cast<std::size_t>(r) * rbytes);
        }
        matmul_rows(weight_type, group.data(), n, 0, kInterleavedGroupRows, acts, out + g,
                    out_stride);
    }
}
}  // namespace

void matmul_rows(Type weight_type, const void* weights, std::int64_t n, std::int64_t row_begin,
                 std::int64_t row_end, const PreparedActivations& acts, float* out,
                 std::int64_t out_stride, RowLayout layout, std::int64_t stream_end) {
    const std::size_t rbytes = row_bytes(weight_type, n);  // checks n
    if (acts.format() != activation_format_for(weight_type) || acts.n() != n) {
        throw InvalidArgument(std::string("activations prepared for ") +
                              type_name(acts.weight_type()) + " rows of " +
                              std::to_string(acts.n()) + " used with " + type_name(weight_type) +
                              " rows of " + std::to_string(n));
    }
    if (row_begin < 0 || row_end < row_begin) {
        throw InvalidArgument("bad weight row range [" + std::to_string(row_begin) + ", " +
                              std::to_string(row_end) + ")");
    }
    if (acts.rows() > 1 && out_stride < row_end) {
        throw InvalidArgument("output stride " + std::to_string(out_stride) +
                              " is shorter than the rows " + std::to_string(row_end));
    }
    const bool interleaved = layout == RowLayout::Interleaved;
    if (interleaved &&
        (!can_interleave(weight_type, kInterleavedGroupRows, n) ||
         row_begin % kInterleavedGroupRows != 0 || row_end % kInterleavedGroupRows != 0)) {
        throw InvalidArgument(std::string("interleaved ") + type_name(weight_type) + " rows of " +
                              std::to_string(n) + ": rows [" + std::to_string(row_begin) + ", " +
                              std::to_string(row_end) +
                              ") are not whole groups of " + std::to_string(kInterleavedGroupRows) +
                              " (or the type has no such layout)");
    }
    if (row_end == row_begin || acts.rows() == 0) return;
    if (interleaved && !interleaving_pays(weight_type)) {
        matmul_interleaved_by_copy(weight_type, static_cast<const std::uint8_t*>(weights), n,
                                   row_begin, row_end, acts, out, out_stride);
        return;
    }
    if (n == 0) {
        for (std::int64_t t = 0; t < acts.rows(); ++t) {
            for (std::int64_t r = row_begin; r < row_end; ++r) out[t * out_stride + r] = 0.0f;
        }
        return;
    }

    const detail::MatmulArgs all{weight_type,
                                 static_cast<const std::uint8_t*>(weights),
                                 rbytes,
                                 n,
                                 row_begin,
                                 row_end,
                                 acts.row(0),
                                 acts.row_stride(),
                                 acts.scale_offset(),
                                 acts.sum_offset(),
                                 acts.int_sum_offset(),
                                 acts.interleaved_offset(),
                                 acts.rows(),
                                 out,
                                 out_stride,
                                 acts.panels(),
                                 acts.panel_group_stride(),
                                 detail::uses_int8_gemm(weight_type),
                                 avx_vnni_in_use(),
                                 weight_type == Type::F16 || weight_type == Type::BF16
                                     ? half_row_prefetch()
                                     : weight_prefetch(),
                                 interleaved,
                                 std::max(row_end, stream_end)};
    const SimdLevel level = active_simd_level();
#if defined(TOKENSCOPE_X86_KERNELS)
    // Prefill with panels: one call for every token; the kernel blocks tokens and k itself.
    if (all.panels != nullptr && !interleaved &&
        (level == SimdLevel::Avx2     ? detail::gemm_panels_avx2(all)
         : level == SimdLevel::Avx512 ? detail::gemm_panels_avx512(all)
                                      : false))
        return;
#endif
    if (!acts.has_rows()) {
        throw InvalidArgument(std::string("activations prepared for ") +
                              type_name(acts.weight_type()) +
                              " weights hold only the prefill panels, which the " +
                              simd_level_name(level) + " kernels for " + type_name(weight_type) +
                              " weights do not read: prepare them for these weights");
    }
    // The kernels walk weight rows outermost and, for each group of rows, every token: each
    // group re-reads all the activations. Once those outgrow the core's L2 (512 tokens of F32
    // activations for a 1024-wide layer are 2 MiB) every group fetches them from L3 again, and
    // prefill per token fell well behind llama.cpp at 512 tokens. Blocks of tokens whose
    // activations fit in L2 keep them resident; the weights are then read once per block, which
    // the L3 absorbs. The block is a multiple of 12 so that every kernel's token tile (4, 3 or 2)
    // stays full.
    //
    // A batch of kPanelMinTokensInternal tokens or more is cut into blocks of at least that many
    // (24, a multiple of 12), a short tail joining the block before it: a block under it would
    // go to the decode kernels, which read one weight row at a time for a few tokens (F16
    // prefill of a 2816-wide layer, 12-token blocks by the L2 rule, fell from 680 to 445 tok/s).
    //
    // The int8 GEMMs whose lanes are rows (every quantized type)
    // re-pack their weight rows for every block, and a tile reads only 6-8 tokens' activations
    // at a time, from L3 as well as from L2 (16-32 rows of work per activation byte), so they
    // take 4 MiB blocks, sized by the bytes a kernel reads rather than the whole stride (the
    // Q8_32 rows also hold an interleaved copy for AVX-512). One thread, 128 tokens, Q4_K, as a
    // ratio to the F16 panels beside it: 512 x 14336 (an 8B model's down projection) 0.91-0.94
    // with 512 KiB blocks (24 tokens each) -> 1.23 (AVX-512), 1.07 -> 1.27 (AVX2); 512 x 8192
    // 1.11 -> 1.26 and 1.21 -> 1.31; 1024 x 2816 1.47 -> 1.52-1.67 against 256 KiB blocks; no
    // difference at 2816 x 1024.
    const bool lane_gemm = lane_gemm_prefill(all.int8_gemm, level);
    const std::size_t kActivationBlockBytes = std::size_t{lane_gemm ? 4096u : 256u} << 10;
    const std::size_t bytes_read =
        lane_gemm ? static_cast<std::size_t>(n) + static_cast<std::size_t>(n) / 4  // + scales, sums
                  : acts.row_stride();
    std::int64_t block = std::max<std::int64_t>(
        12,
        static_cast<std::int64_t>(kActivationBlockBytes / std::max<std::size_t>(1, bytes_read)) /
            12 * 12);
    if (all.tokens >= detail::kPanelMinTokensInternal) block = std::max<std::int64_t>(block, 24);
    if (all.tokens < detail::kPanelMinTokensInternal) detail::prefetch_call_head(all);
    for (std::int64_t t0 = 0; t0 < all.tokens;) {
        detail::MatmulArgs args = all;
        args.acts = all.acts + static_cast<std::size_t>(t0) * all.act_stride;
        args.tokens = std::min(block, all.tokens - t0);
        if (all.tokens - t0 - args.tokens < detail::kPanelMinTokensInternal)
            args.tokens = all.tokens - t0;
        args.out = all.out + t0 * all.out_stride;
        run_kernel(args);
        t0 += args.tokens;
    }
}

}  // namespace tokenscope::tensor
