// Conversion of f32 activation rows into the form the weight type's kernels dot with. Runs once
// per matmul (not per weight row), and for a single token it is small next to streaming the
// weights, but it is written to vectorize (no calls, no branches in the inner loops) so that
// it stays a few percent of a decode step.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <string>

#include "tensor/matmul.h"
#include "tensor/matmul_internal.h"
#include "util/error.h"

namespace tokenscope::tensor {

namespace {

constexpr std::size_t kAlign = 64;

std::size_t round_up(std::size_t v, std::size_t m) {
    return (v + m - 1) / m * m;
}

// Nearest integer (ties to even in the default rounding mode) of |v| < 2^22 without a libm
// call: adding 1.5 * 2^23 pushes the fraction bits out of the float. Compilers keep this
// (no -ffast-math here) and it vectorizes.
inline float round_nearest(float v) {
    constexpr float kMagic = 12582912.0f;
    return (v + kMagic) - kMagic;
}

// One block of `len` activations to int8: d = max|x| / 127, q = round(x / d), |q| <= 127.
// Returns d; writes q. All-zero (or non-finite-free tiny) blocks get d = 0 and q = 0.
float quantize_block(const float* x, int len, std::int8_t* q) {
    float amax = 0.0f;
    for (int i = 0; i < len; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < len; ++i) {
        // x * id is within [-127, 127] up to rounding of id; the clamp keeps a 127.00001
        // from rounding to 128.
        const float v = std::min(127.0f, std::max(-127.0f, x[i] * id));
        q[i] = static_cast<std::int8_t>(round_nearest(v));
    }
    return d;
}

void quantize_row_q8_32(const float* x, std::int64_t n, std::uint8_t* row, std::size_t scale_off,
                        std::size_t sum_off, std::size_t int_sum_off) {
    auto* qs = reinterpret_cast<std::int8_t*>(row);
    auto* d = reinterpret_cast<float*>(row + scale_off);
    auto* s = reinterpret_cast<float*>(row + sum_off);
    auto* isum = reinterpret_cast<std::int32_t*>(row + int_sum_off);
    for (std::int64_t b = 0; b < n / 32; ++b) {
        std::int8_t* q = qs + 32 * b;
        d[b] = quantize_block(x + 32 * b, 32, q);
        int sum = 0;
        for (int i = 0; i < 32; ++i) sum += q[i];
        s[b] = d[b] * static_cast<float>(sum);
        isum[b] = sum;
    }
}

// The interleaved copy of a Q8_32 row's qs (layout in matmul.h): group g, word v, block l.
// Blocks past n / 32 stay zero (the buffer is cleared beforehand).
void interleave_row_q8_32(const std::uint8_t* qs, std::int64_t n, std::uint8_t* out) {
    const std::int64_t blocks = n / 32;
    for (std::int64_t b = 0; b < blocks; ++b) {
        const std::uint8_t* src = qs + 32 * b;
        std::uint8_t* dst = out + (b / 16) * 512 + (b % 16) * 4;
        for (int v = 0; v < 8; ++v) std::memcpy(dst + 64 * v, src + 4 * v, 4);
    }
}

void quantize_row_q8_256(const float* x, std::int64_t n, std::uint8_t* row, std::size_t scale_off,
                         std::size_t sum_off, std::size_t int_sum_off) {
    auto* qs = reinterpret_cast<std::int8_t*>(row);
    auto* d = reinterpret_cast<float*>(row + scale_off);
    auto* s16 = reinterpret_cast<float*>(row + sum_off);
    auto* offset16 = reinterpret_cast<std::int32_t*>(row + int_sum_off);
    for (std::int64_t b = 0; b < n / 256; ++b) {
        std::int8_t* q = qs + 256 * b;
        d[b] = quantize_block(x + 256 * b, 256, q);
        for (int j = 0; j < 16; ++j) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += q[16 * j + i];
            s16[16 * b + j] = d[b] * static_cast<float>(sum);
            offset16[16 * b + j] = -4 * sum;
            offset16[n / 16 + 16 * b + j] = detail::low_int16(-4 * sum);
        }
    }
}

// Group g of the transposed 16-token groups of the prefill panels (layout in matmul.h), tokens
// past the last row zero. Written 16 elements at a time, every token's 16 in turn: the 1 KiB of
// destination stays in L1 and each source read is one 64-byte line. Token by token over the
// whole row instead, every store touched another line of the n * 64-byte group: 128 tokens,
// one thread, 1024 wide 106 -> 56 us, 2816 wide 288 -> 146 us per prepare_activations (F16).
void write_panel_group(const float* x, std::int64_t rows, std::int64_t n, std::int64_t g,
                       float* panels) {
    float* group = panels + g * n * 16;
    const std::int64_t tokens = std::min<std::int64_t>(16, rows - 16 * g);
    // Only a partial last group has lanes to clear: a full one is written whole below.
    if (tokens < 16) std::memset(group, 0, static_cast<std::size_t>(n) * 16 * sizeof(float));
    const float* src = x + 16 * g * n;
    for (std::int64_t k0 = 0; k0 < n; k0 += 16) {
        const std::int64_t kn = std::min<std::int64_t>(16, n - k0);
        float* dst = group + 16 * k0;
        for (std::int64_t j = 0; j < tokens; ++j) {
            const float* s = src + j * n + k0;
            for (std::int64_t kk = 0; kk < kn; ++kk) dst[16 * kk + j] = s[kk];
        }
    }
}

}  // namespace

void PreparedActivations::AlignedFree::operator()(std::uint8_t* p) const {
    ::operator delete[](p, std::align_val_t{kAlign});
}

ActivationFormat activation_format_for(Type weight_type) {
    switch (weight_type) {
        case Type::F32:
        case Type::F16:
        case Type::BF16:
            return ActivationFormat::F32;
        case Type::Q4_0:
        case Type::Q4_1:
        case Type::Q5_0:
        case Type::Q5_1:
        case Type::Q8_0:
            return ActivationFormat::Q8_32;
        case Type::Q2_K:
        case Type::Q3_K:
        case Type::Q4_K:
        case Type::Q5_K:
        case Type::Q6_K:
            return ActivationFormat::Q8_256;
    }
    throw InvalidArgument("no matmul for tensor type id " +
                          std::to_string(static_cast<std::uint32_t>(weight_type)));
}

bool PreparedActivations::serves(Type weight_type, std::int64_t n, std::int64_t rows) const {
    return format_ == activation_format_for(weight_type) && n_ == n && rows_ == rows &&
           (has_rows_ || weight_type_ == weight_type);
}

void prepare_activations(Type weight_type, const float* x, std::int64_t rows, std::int64_t n,
                         PreparedActivations& out, const ParallelRows& parallel) {
    const ActivationFormat format = activation_format_for(weight_type);
    if (rows < 0) throw InvalidArgument("negative activation row count " + std::to_string(rows));
    (void)row_bytes(weight_type, n);  // throws unless n is a whole number of blocks

    const auto un = static_cast<std::size_t>(n);
    std::size_t stride = 0;
    std::size_t scale_off = 0;
    std::size_t sum_off = 0;
    std::size_t int_sum_off = 0;
    std::size_t inter_off = 0;
    switch (format) {
        case ActivationFormat::F32:
            stride = round_up(std::max<std::size_t>(un, 1) * sizeof(float), kAlign);
            break;
        case ActivationFormat::Q8_32: {
            const std::size_t n_pad = round_up(std::max<std::size_t>(un, 1), 64);
            scale_off = n_pad;
            sum_off = scale_off + round_up(n_pad / 32 * sizeof(float), kAlign);
            inter_off = sum_off + round_up(n_pad / 32 * sizeof(float), kAlign);
            int_sum_off = inter_off + round_up(std::max<std::size_t>(un, 1), 512);
            stride = int_sum_off + round_up(n_pad / 32 * sizeof(std::int32_t), kAlign);
            break;
        }
        case ActivationFormat::Q8_256: {
            const std::size_t n_pad = round_up(std::max<std::size_t>(un, 1), 256);
            scale_off = n_pad;
            sum_off = scale_off + round_up(n_pad / 256 * sizeof(float), kAlign);
            int_sum_off = sum_off + round_up(n_pad / 16 * sizeof(float), kAlign);
            stride = int_sum_off + round_up(2 * n_pad / 16 * sizeof(std::int32_t), kAlign);
            break;
        }
    }

    // Panels only where a kernel reads them: AVX2 prefill over non-F32 weights (F32 keeps one
    // summation order for every token count; see FAvx2::tile), nor for the types whose prefill
    // takes an int8 GEMM instead; AVX-512 prefill over F16 and BF16 weights.
    const SimdLevel level = active_simd_level();
    const bool half = weight_type == Type::F16 || weight_type == Type::BF16;
    const bool panels =
        rows >= kPanelMinTokens && ((level == SimdLevel::Avx2 && weight_type != Type::F32 &&
                                     !prefill_uses_int8_products(weight_type)) ||
                                    (level == SimdLevel::Avx512 && half));
    // F32 rows beside panels would be a copy no kernel reads (matmul.h).
    const bool write_rows = !(panels && format == ActivationFormat::F32);
    const std::size_t rows_bytes = write_rows ? stride * static_cast<std::size_t>(rows) : 0;
    const std::size_t panel_bytes =
        panels ? static_cast<std::size_t>((rows + 15) / 16) * un * 16 * sizeof(float) : 0;
    const std::size_t need = rows_bytes + panel_bytes;
    if (need > out.capacity_) {
        out.data_.reset(
            static_cast<std::uint8_t*>(::operator new[](need, std::align_val_t{kAlign})));
        out.capacity_ = need;
    }
    out.format_ = format;
    out.weight_type_ = weight_type;
    out.rows_ = rows;
    out.n_ = n;
    out.row_stride_ = stride;
    out.scale_offset_ = scale_off;
    out.sum_offset_ = sum_off;
    out.int_sum_offset_ = int_sum_off;
    out.interleaved_offset_ = inter_off;
    out.has_panels_ = panels;
    out.has_rows_ = write_rows;
    out.panel_offset_ = rows_bytes;  // a multiple of 64: every row stride is
    if (need == 0) return;

    // Rows, then the panels' 16-token groups, as one range of independent items. Each clears
    // its own bytes first: the padding must be zero, since kernels read whole vectors past the
    // last element and rely on it contributing nothing.
    std::uint8_t* data = out.data_.get();
    const bool simd = detail::quantize_rows_avx2_active();
    const std::int64_t groups = panels ? (rows + 15) / 16 : 0;
    const std::int64_t row_items = write_rows ? rows : 0;
    auto prepare = [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
            if (i >= row_items) {
                write_panel_group(x, rows, n, i - row_items,
                                  reinterpret_cast<float*>(data + rows_bytes));
                continue;
            }
            const float* xt = x + i * n;
            std::uint8_t* row = data + static_cast<std::size_t>(i) * stride;
            // An F32 row is cleared only past the values copied into it (nothing, where n fills
            // the aligned stride, as 1024- and 2816-wide rows do); the quantizers leave gaps.
            const std::size_t copied = format == ActivationFormat::F32 ? un * sizeof(float) : 0;
            std::memset(row + copied, 0, stride - copied);
            switch (format) {
                case ActivationFormat::F32:
                    if (un > 0) std::memcpy(row, xt, copied);
                    break;
                case ActivationFormat::Q8_32:
                    if (simd) {
                        detail::quantize_row_q8_32_simd(xt, n, row, scale_off, sum_off, inter_off,
                                                        int_sum_off);
                    } else {
                        quantize_row_q8_32(xt, n, row, scale_off, sum_off, int_sum_off);
                        interleave_row_q8_32(row, n, row + inter_off);
                    }
                    break;
                case ActivationFormat::Q8_256:
                    if (simd) {
                        detail::quantize_row_q8_256_simd(xt, n, row, scale_off, sum_off,
                                                         int_sum_off);
                    } else {
                        quantize_row_q8_256(xt, n, row, scale_off, sum_off, int_sum_off);
                    }
                    break;
            }
        }
    };
    if (parallel && row_items + groups > 1) {
        parallel(row_items + groups, prepare);
    } else {
        prepare(0, row_items + groups);
    }
}

}  // namespace tokenscope::tensor
