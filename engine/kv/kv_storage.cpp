#include "kv/kv_storage.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kv/kv_kernels.h"
#include "tensor/matmul.h"
#include "util/error.h"

namespace tokenscope::kv {

namespace {

// Q8 row: scale = max|x| / 127, q = round(x / scale), so |x - q * scale| <= scale / 2.
// An all-zero row gets scale 0 and zeros. Code i goes to q[i * stride].
float quantize_q8(const float* x, std::int8_t* q, int n, std::int64_t stride) {
    float amax = 0.0f;
    for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float scale = amax / 127.0f;
    for (int i = 0; i < n; ++i) {
        // The clamp only matters when x / scale rounds a hair above 127 for the largest value.
        const float r = scale == 0.0f ? 0.0f : std::round(x[i] / scale);
        q[i * stride] = static_cast<std::int8_t>(std::clamp(r, -127.0f, 127.0f));
    }
    return scale;
}

// Calls f(j, slot, len) for each run of slot_ids: slot_ids[j + i] = slot + i for i < len, all in
// one block. A sequence's positions fill its blocks in order, so a tile is one or two runs, and
// the per-slot divisions (slot / block_size) happen once per run.
template <class F>
void for_runs(std::span<const std::int64_t> slot_ids, std::int64_t block_size, F&& f) {
    const auto n = static_cast<std::int64_t>(slot_ids.size());
    for (std::int64_t j = 0; j < n;) {
        const std::int64_t slot = slot_ids[static_cast<std::size_t>(j)];
        const std::int64_t room = block_size - slot % block_size;
        std::int64_t len = 1;
        while (j + len < n && len < room &&
               slot_ids[static_cast<std::size_t>(j + len)] == slot + len)
            ++len;
        f(j, slot, len);
        j += len;
    }
}

// Writes the zero the byte already holds: commits its page.
void touch(std::byte* p) {
    *static_cast<volatile std::byte*>(p) = std::byte{0};
}

// Rows go through a stack buffer this many elements at a time, whatever head_dim is.
constexpr int kChunk = 64;

}  // namespace

KvStorage::KvStorage(const CacheShape& shape, KernelChoice kernels)
    : shape_(shape),
      kernels_(kernels == KernelChoice::Scalar ||
                       tensor::active_simd_level() == tensor::SimdLevel::Scalar
                   ? &detail::scalar_kernels()
                   : &detail::best_kernels()) {
    validate(shape_);
    slots_ = capacity_tokens(shape_);
    element_bytes_ = element_bytes(shape_.type);
    row_value_bytes_ = static_cast<std::int64_t>(shape_.head_dim) * element_bytes_;
    const auto rows = static_cast<std::size_t>(shape_.layers) * static_cast<std::size_t>(slots_) *
                      static_cast<std::size_t>(shape_.kv_heads);
    const std::size_t value_bytes = rows * static_cast<std::size_t>(row_value_bytes_);
    const std::size_t scale_bytes = shape_.type == ElementType::Q8 ? rows * sizeof(float) : 0;
    const std::size_t total = 2 * (value_bytes + scale_bytes);
    assert(total == capacity_bytes(shape_));

    // Anonymous zero pages: untouched slots cost neither time nor resident memory (beyond the
    // 2 MiB page a first write commits), a slot read before it is written reads zeros, and
    // attention's reads over long contexts walk few TLB entries.
    memory_ = LargePageBuffer(total);
    // Scales first: the float arrays then sit at the page's alignment.
    std::byte* p = memory_.data();
    if (scale_bytes != 0) {
        k_scales_ = reinterpret_cast<float*>(p);
        v_scales_ = reinterpret_cast<float*>(p + scale_bytes);
        p += 2 * scale_bytes;
    }
    // V right after K (and V's scales after K's): scores_in_place's kernels read a few elements
    // (scales) past a K run, which for the last block of K then land in V, inside the mapping.
    k_values_ = p;
    v_values_ = p + value_bytes;
    // Commit now the pages a conversation's first tokens write: the first block of K and V of
    // every (layer, kv head). In 2 MiB pages each first write zeroes a whole page, and a first
    // prompt writes all of these regions in one forward pass: `run --n-predict 1` measured
    // prefill_ms 12-20 ms, and on a host whose THP defrag is "madvise" (such a fault may first
    // compact memory) 100-240 ms in a third of the runs; 4-12 ms with the pages committed here.
    // The owner loads the model off the interface thread, so the wait moves there.
    // Where a region is under 2 MiB several share a page: at 4096 tokens these pages are the
    // whole cache of both default models (SmolLM2 90 MiB, Gemma 3 270M 72 MiB), which their
    // first prompt would commit anyway; at 32768 tokens half and an eighth of it. llama.cpp
    // clears its whole cache at load.
    for (int layer = 0; layer < shape_.layers; ++layer) {
        for (int head = 0; head < shape_.kv_heads; ++head) {
            const std::int64_t row = row_index(layer, 0, head);
            touch(k_values_ + k_element(row) * element_bytes_);
            touch(v_values_ + row * row_value_bytes_);
            if (k_scales_ != nullptr) {
                touch(reinterpret_cast<std::byte*>(k_scales_ + row));
                touch(reinterpret_cast<std::byte*>(v_scales_ + row));
            }
        }
    }
    spdlog::debug(
        "kv: storage {} layers x {} kv heads x {} head_dim x {} slots, {}, {} bytes, {} "
        "kernels",
        shape_.layers, shape_.kv_heads, shape_.head_dim, slots_, element_type_name(shape_.type),
        total, kernels_->name);
}

KvStorage::~KvStorage() = default;
KvStorage::KvStorage(KvStorage&&) noexcept = default;
KvStorage& KvStorage::operator=(KvStorage&&) noexcept = default;

std::uint64_t KvStorage::bytes() const {
    return capacity_bytes(shape_);
}

const char* KvStorage::kernel_name() const {
    return kernels_->name;
}

void KvStorage::check(int layer, std::int64_t slot, int head, const char* what) const {
    if (layer < 0 || layer >= shape_.layers || slot < 0 || slot >= slots_ || head < 0 ||
        head >= shape_.kv_heads) {
        throw InvalidArgument(fmt::format(
            "kv: {} at layer {} slot {} head {} out of range (layers {}, slots {}, kv heads {})",
            what, layer, slot, head, shape_.layers, slots_, shape_.kv_heads));
    }
}

void KvStorage::write_v(std::int64_t row, const float* x) {
    const int d = shape_.head_dim;
    std::byte* out = v_values_ + row * row_value_bytes_;
    switch (shape_.type) {
        case ElementType::F32:
            std::memcpy(out, x, static_cast<std::size_t>(d) * sizeof(float));
            break;
        case ElementType::F16:
            kernels_->f32_to_f16(x, reinterpret_cast<std::uint16_t*>(out), d);
            break;
        case ElementType::Q8:
            v_scales_[row] = quantize_q8(x, reinterpret_cast<std::int8_t*>(out), d, 1);
            break;
    }
}

// K goes into its column of the block (k_element): element i block_size elements after i - 1.
void KvStorage::write_k(std::int64_t row, const float* x) {
    const int d = shape_.head_dim;
    const std::int64_t bs = shape_.block_size;
    std::byte* out = k_values_ + k_element(row) * element_bytes_;
    switch (shape_.type) {
        case ElementType::F32: {
            auto* y = reinterpret_cast<float*>(out);
            for (int i = 0; i < d; ++i) y[i * bs] = x[i];
            break;
        }
        case ElementType::F16: {
            auto* y = reinterpret_cast<std::uint16_t*>(out);
            std::uint16_t h[kChunk];
            for (int i0 = 0; i0 < d; i0 += kChunk) {
                const int n = std::min(kChunk, d - i0);
                kernels_->f32_to_f16(x + i0, h, n);
                for (int i = 0; i < n; ++i) y[(i0 + i) * bs] = h[i];
            }
            break;
        }
        case ElementType::Q8:
            k_scales_[row] = quantize_q8(x, reinterpret_cast<std::int8_t*>(out), d, bs);
            break;
    }
}

void KvStorage::write(int layer, std::int64_t slot, const float* k, const float* v) {
    check(layer, slot, 0, "write");
    const int d = shape_.head_dim;
    for (int h = 0; h < shape_.kv_heads; ++h) {
        const std::int64_t row = row_index(layer, slot, h);
        write_k(row, k + h * d);
        write_v(row, v + h * d);
    }
}

float KvStorage::dot_k(int layer, std::int64_t slot, int head, const float* q) const {
    assert(layer >= 0 && layer < shape_.layers && slot >= 0 && slot < slots_ && head >= 0 &&
           head < shape_.kv_heads);
    const std::int64_t row = row_index(layer, slot, head);
    const int d = shape_.head_dim;
    float k[kChunk];
    float sum = 0.0f;
    for (int i0 = 0; i0 < d; i0 += kChunk) {
        const int n = std::min(kChunk, d - i0);
        convert_k(row, i0, n, 1, k, 1);
        for (int i = 0; i < n; ++i) sum += k[i] * q[i0 + i];
    }
    return sum;
}

void KvStorage::axpy_v(int layer, std::int64_t slot, int head, float weight, float* acc) const {
    assert(layer >= 0 && layer < shape_.layers && slot >= 0 && slot < slots_ && head >= 0 &&
           head < shape_.kv_heads);
    const std::int64_t row = row_index(layer, slot, head);
    const std::byte* v = v_row(row);
    const int d = shape_.head_dim;
    switch (shape_.type) {
        case ElementType::F32:
            kernels_->axpy_f32(reinterpret_cast<const float*>(v), weight, acc, d);
            break;
        case ElementType::F16:
            kernels_->axpy_f16(reinterpret_cast<const std::uint16_t*>(v), weight, acc, d);
            break;
        case ElementType::Q8:
            kernels_->axpy_q8(reinterpret_cast<const std::int8_t*>(v), weight * v_scales_[row], acc,
                              d);
            break;
    }
}

void KvStorage::dot_k(int layer, int head, const float* q, std::span<const std::int64_t> slot_ids,
                      std::span<float> scores) const {
    assert(slot_ids.size() == scores.size());
    for (std::size_t i = 0; i < slot_ids.size(); ++i)
        scores[i] = dot_k(layer, slot_ids[i], head, q);
}

void KvStorage::axpy_v(int layer, int head, std::span<const std::int64_t> slot_ids,
                       std::span<const float> weights, float* acc) const {
    assert(slot_ids.size() == weights.size());
    for (std::size_t i = 0; i < slot_ids.size(); ++i)
        axpy_v(layer, slot_ids[i], head, weights[i], acc);
}

// Elements [first, first + n) of K rows row .. row + len - 1 (a run of one block's slots),
// into out[i * out_stride + j] for element first + i of row + j: K is stored by element, so each
// element's len values are adjacent.
void KvStorage::convert_k(std::int64_t row, int first, int n, int len, float* out,
                          int out_stride) const {
    const std::int64_t bs = shape_.block_size;
    const std::int64_t e = k_element(row) + first * bs;
    switch (shape_.type) {
        case ElementType::F32: {
            const auto* x = reinterpret_cast<const float*>(k_values_) + e;
            for (int i = 0; i < n; ++i) {
                std::memcpy(out + static_cast<std::int64_t>(i) * out_stride, x + i * bs,
                            static_cast<std::size_t>(len) * sizeof(float));
            }
            break;
        }
        case ElementType::F16:
            kernels_->k_run_f16(reinterpret_cast<const std::uint16_t*>(k_values_) + e,
                                static_cast<int>(bs), len, n, out, out_stride);
            break;
        case ElementType::Q8:
            kernels_->k_run_q8(reinterpret_cast<const std::int8_t*>(k_values_) + e,
                               static_cast<int>(bs), k_scales_ + row, len, n, out, out_stride);
            break;
    }
}

// Elements [first, first + n) of V row `row`.
void KvStorage::convert_v(std::int64_t row, int first, int n, float* out) const {
    const std::byte* x = v_row(row) + first * element_bytes_;
    switch (shape_.type) {
        case ElementType::F32:
            std::memcpy(out, x, static_cast<std::size_t>(n) * sizeof(float));
            break;
        case ElementType::F16:
            kernels_->f16_to_f32(reinterpret_cast<const std::uint16_t*>(x), out, n);
            break;
        case ElementType::Q8:
            kernels_->q8_to_f32(reinterpret_cast<const std::int8_t*>(x), v_scales_[row], out, n);
            break;
    }
}

void KvStorage::convert(Part part, std::int64_t row, float* out) const {
    if (part == Part::K) {
        convert_k(row, 0, shape_.head_dim, 1, out, 1);
    } else {
        convert_v(row, 0, shape_.head_dim, out);
    }
}

void KvStorage::read(Part part, int layer, std::int64_t slot, int head, float* out) const {
    check(layer, slot, head, part == Part::K ? "read_k" : "read_v");
    convert(part, row_index(layer, slot, head), out);
}

void KvStorage::k_tile(int layer, int head, std::span<const std::int64_t> slot_ids, float* buffer,
                       KeyTile& tile) const {
    assert(slot_ids.size() <= static_cast<std::size_t>(kTileKeys));
    const int d = shape_.head_dim;
    const std::int64_t bs = shape_.block_size;
    tile.values = buffer;
    tile.keys = static_cast<int>(slot_ids.size());
    for_runs(slot_ids, bs, [&](std::int64_t j, std::int64_t slot, std::int64_t len) {
        assert(layer >= 0 && layer < shape_.layers && slot >= 0 && slot + len <= slots_ &&
               head >= 0 && head < shape_.kv_heads);
        const std::int64_t row = row_index(layer, slot, head);
        convert_k(row, 0, d, static_cast<int>(len), buffer + j, kTileKeys);
    });
}

void KvStorage::v_tile(int layer, int head, std::span<const std::int64_t> slot_ids, float* buffer,
                       Tile& tile, int first, int cols) const {
    assert(slot_ids.size() <= static_cast<std::size_t>(kTileKeys));
    const int d = shape_.head_dim;
    if (cols == 0) cols = d - first;
    assert(first >= 0 && cols > 0 && first + cols <= d);
    tile.keys = static_cast<int>(slot_ids.size());
    tile.cols = cols;
    for_runs(slot_ids, shape_.block_size, [&](std::int64_t j, std::int64_t slot, std::int64_t len) {
        assert(layer >= 0 && layer < shape_.layers && slot >= 0 && slot + len <= slots_ &&
               head >= 0 && head < shape_.kv_heads);
        const std::int64_t row0 = row_index(layer, slot, head);  // the run's rows follow it
        if (shape_.type == ElementType::F16 && cols == d) {
            // Whole F16 rows of a run are one contiguous range: one conversion call.
            float* out = buffer + j * d;
            kernels_->f16_to_f32(reinterpret_cast<const std::uint16_t*>(v_row(row0)), out,
                                 static_cast<int>(len * d));
            for (std::int64_t i = j; i < j + len; ++i) tile.rows[i] = out + (i - j) * d;
            return;
        }
        for (std::int64_t i = j; i < j + len; ++i) {
            const std::int64_t row = row0 + i - j;
            if (shape_.type == ElementType::F32) {
                // Already floats: no copy.
                tile.rows[i] = reinterpret_cast<const float*>(v_row(row)) + first;
            } else {
                float* out = buffer + i * cols;
                convert_v(row, first, cols, out);
                tile.rows[i] = out;
            }
        }
    });
}

void KvStorage::prefetch(Part part, int layer, int head,
                         std::span<const std::int64_t> slot_ids) const {
#if defined(__GNUC__) || defined(__clang__)
    constexpr std::int64_t kLine = 64;
    const std::int64_t bs = shape_.block_size;
    for_runs(slot_ids, bs, [&](std::int64_t, std::int64_t slot, std::int64_t len) {
        const std::int64_t row = row_index(layer, slot, head);
        // V: the run's rows, one range. K: the run's columns cut across the whole region of the
        // block (head_dim rows of block_size elements), so the whole region.
        const std::byte* x =
            part == Part::V ? v_row(row) : k_values_ + (row - slot % bs) * row_value_bytes_;
        const std::int64_t bytes = (part == Part::V ? len : bs) * row_value_bytes_;
        for (std::int64_t b = 0; b < bytes; b += kLine) __builtin_prefetch(x + b);
        if (shape_.type == ElementType::Q8)
            __builtin_prefetch((part == Part::K ? k_scales_ : v_scales_) + row);
    });
#else
    (void)part, (void)layer, (void)head, (void)slot_ids;  // a hint only: nothing to do
#endif
}

void KvStorage::prefetch_k(int layer, int head, std::span<const std::int64_t> slot_ids) const {
    prefetch(Part::K, layer, head, slot_ids);
}

void KvStorage::prefetch_v(int layer, int head, std::span<const std::int64_t> slot_ids) const {
    prefetch(Part::V, layer, head, slot_ids);
}

void KvStorage::tile_scores(const float* q, int rows, const KeyTile& k, float scale, float* scores,
                            std::int64_t stride) const {
    kernels_->tile_scores(q, rows, k.values, kTileKeys, k.keys, shape_.head_dim, scale, scores,
                          stride);
}

void KvStorage::tile_accumulate(const float* weights, std::int64_t stride, int rows, const Tile& v,
                                float* out) const {
    kernels_->tile_accumulate(weights, stride, rows, v.rows, v.keys, v.cols, out);
}

bool KvStorage::scores_in_place(int layer, int head, std::span<const std::int64_t> slot_ids,
                                const float* q, int rows, float scale, float* scores,
                                std::int64_t stride) const {
    if (shape_.type == ElementType::F32) return false;
    assert(slot_ids.size() <= static_cast<std::size_t>(kTileKeys));
    const int d = shape_.head_dim;
    const std::int64_t bs = shape_.block_size;
    for_runs(slot_ids, bs, [&](std::int64_t j, std::int64_t slot, std::int64_t len) {
        assert(layer >= 0 && layer < shape_.layers && slot >= 0 && slot + len <= slots_ &&
               head >= 0 && head < shape_.kv_heads);
        const std::int64_t row = row_index(layer, slot, head);
        // The kernels read whole vectors of 8 keys, so up to 7 elements past the run in each of
        // its element rows (and Q8 up to 7 scales past its own): the block's next slots, the
        // next row, or past the last region of K the start of V (and past K's scales V's), in
        // the same mapping (see the constructor). Those lanes are never stored.
        if (shape_.type == ElementType::F16) {
            kernels_->scores_f16(
                q, rows, reinterpret_cast<const std::uint16_t*>(k_values_) + k_element(row),
                static_cast<int>(bs), static_cast<int>(len), d, scale, scores + j, stride);
        } else {
            kernels_->scores_q8(q, rows,
                                reinterpret_cast<const std::int8_t*>(k_values_) + k_element(row),
                                static_cast<int>(bs), k_scales_ + row, static_cast<int>(len), d,
                                scale, scores + j, stride);
        }
    });
    return true;
}

bool KvStorage::accumulate_in_place(int layer, int head, std::span<const std::int64_t> slot_ids,
                                    const float* weights, std::int64_t stride, int rows, int first,
                                    int cols, float* out) const {
    if (shape_.type == ElementType::F32) return false;
    assert(slot_ids.size() <= static_cast<std::size_t>(kTileKeys));
    const int d = shape_.head_dim;
    if (cols == 0) cols = d - first;
    assert(first >= 0 && cols > 0 && first + cols <= d);
    for_runs(slot_ids, shape_.block_size, [&](std::int64_t j, std::int64_t slot, std::int64_t len) {
        assert(layer >= 0 && layer < shape_.layers && slot >= 0 && slot + len <= slots_ &&
               head >= 0 && head < shape_.kv_heads);
        // A run's V rows follow each other: row j + i at its first row + i * head_dim.
        const std::int64_t row = row_index(layer, slot, head);
        if (shape_.type == ElementType::F16) {
            kernels_->accumulate_f16(weights + j, stride, rows,
                                     reinterpret_cast<const std::uint16_t*>(v_row(row)) + first, d,
                                     static_cast<int>(len), cols, out);
        } else {
            kernels_->accumulate_q8(weights + j, stride, rows,
                                    reinterpret_cast<const std::int8_t*>(v_row(row)) + first, d,
                                    v_scales_ + row, static_cast<int>(len), cols, out);
        }
    });
    return true;
}

void KvStorage::read_k(int layer, std::int64_t slot, int head, float* out) const {
    read(Part::K, layer, slot, head, out);
}

void KvStorage::read_v(int layer, std::int64_t slot, int head, float* out) const {
    read(Part::V, layer, slot, head, out);
}

void KvStorage::copy_block(const BlockCopy& copy) {
    const int bs = shape_.block_size;
    if (copy.src < 0 || copy.src >= shape_.num_blocks || copy.dst < 0 ||
        copy.dst >= shape_.num_blocks || copy.tokens < 0 || copy.tokens > bs) {
        throw InvalidArgument(fmt::format(
            "kv: copy of {} tokens from block {} to block {} out of range ({} blocks of {})",
            copy.tokens, copy.src, copy.dst, shape_.num_blocks, bs));
    }
    if (copy.src == copy.dst || copy.tokens == 0) return;
    // Per layer and head, V's part of a block is one contiguous range; K's is head_dim ranges,
    // one per element (K is stored transposed inside the block).
    const auto value_bytes = static_cast<std::size_t>(copy.tokens * row_value_bytes_);
    const auto element_run = static_cast<std::size_t>(copy.tokens * element_bytes_);
    const auto scale_bytes = static_cast<std::size_t>(copy.tokens) * sizeof(float);
    for (int layer = 0; layer < shape_.layers; ++layer) {
        for (int h = 0; h < shape_.kv_heads; ++h) {
            const std::int64_t src = row_index(layer, static_cast<std::int64_t>(copy.src) * bs, h);
            const std::int64_t dst = row_index(layer, static_cast<std::int64_t>(copy.dst) * bs, h);
            for (int i = 0; i < shape_.head_dim; ++i) {
                const std::int64_t step = static_cast<std::int64_t>(i) * bs * element_bytes_;
                std::memcpy(k_values_ + dst * row_value_bytes_ + step,
                            k_values_ + src * row_value_bytes_ + step, element_run);
            }
            std::memcpy(v_values_ + dst * row_value_bytes_, v_values_ + src * row_value_bytes_,
                        value_bytes);
            if (shape_.type == ElementType::Q8) {
                std::memcpy(k_scales_ + dst, k_scales_ + src, scale_bytes);
                std::memcpy(v_scales_ + dst, v_scales_ + src, scale_bytes);
            }
        }
    }
}

void KvStorage::apply(std::span<const BlockCopy> copies) {
    for (const BlockCopy& copy : copies) copy_block(copy);
}

}  // namespace tokenscope::kv
