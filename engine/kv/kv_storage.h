#pragma once
// KvStorage: the CPU backend's K and V data for every layer, indexed by the physical slots
// that KvCacheManager hands out (slot = block * block_size + offset). A device backend keeps
// the same bookkeeping and its own device buffers instead of this class.
//
// Layout, per layer and separately for K and V: [kv_head][block] regions of block_size tokens,
// so that one head's keys of a block are one contiguous range, and so are a head's keys over
// consecutive blocks (a sequence's blocks mostly are: the pool hands them out in order).
// Attention reads one head's keys in slot order, and the hardware prefetchers follow a
// contiguous stream: a [slot][kv_head] layout made them stride over the other heads' rows
// (decode spent a tenth of a step, at 128 cached tokens, waiting for those rows), and
// [block][kv_head] still broke the stream at every block (SmolLM2's 3 heads: 2 KiB read of
// every 6 KiB, which one Zen 3 core read at 7.7 GB/s against 18.8 for a contiguous stream;
// decode at 4096 cached tokens took 18-19 ms a step against 10 ms with this layout).
// Inside a region V is [slot][head_dim] and K is transposed, [head_dim][slot]: the score
// kernels keep keys in the vector lanes (one key vector per element serves every query of a
// block, and no horizontal sums), and with K stored so, a tile of a block's keys converts
// straight into that form (or is read in place, F16). Q8 keeps the float
// scales in their own arrays, one per (slot, head) as if the rows were dense.
// The memory is allocated zeroed and untouched but for the pages of each (layer, kv head)'s
// first block of K and V (committed at construction, see the constructor): other unused slots
// cost no resident memory.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "kv/kv_cache_manager.h"
#include "kv/kv_types.h"
#include "util/large_pages.h"

namespace tokenscope::kv {

namespace detail {
struct Kernels;
}

// Best: the fastest kernels this CPU runs (AVX2+FMA+F16C on x86-64, chosen at runtime), unless
// the matmul kernels are capped at scalar (TOKENSCOPE_SIMD=scalar or tensor::set_simd_level
// before the storage is made): then the whole forward pass runs portable code.
// Scalar: portable C++ only, to compare against and for benchmarks.
enum class KernelChoice { Best, Scalar };

class KvStorage {
  public:
    // Throws InvalidArgument for a bad shape (see validate()) and std::bad_alloc when the
    // memory is not there.
    explicit KvStorage(const CacheShape& shape, KernelChoice kernels = KernelChoice::Best);
    ~KvStorage();
    KvStorage(KvStorage&&) noexcept;
    KvStorage& operator=(KvStorage&&) noexcept;
    KvStorage(const KvStorage&) = delete;
    KvStorage& operator=(const KvStorage&) = delete;

    // Stores one token's K and V of one layer, all kv heads (k, v: kv_heads * head_dim floats,
    // head-major), converting to the element type: F16 rounds to nearest even; Q8 uses per
    // (head) row scale = max|x| / 127 and q = round(x / scale). Throws InvalidArgument for a
    // layer or slot out of range.
    void write(int layer, std::int64_t slot, const float* k, const float* v);

    // Single-row forms, for tests and tools (attention runs on tiles, below). Not range-checked
    // outside debug builds. q and acc hold head_dim floats.
    // q · K[layer, slot, head]
    float dot_k(int layer, std::int64_t slot, int head, const float* q) const;
    // acc += weight * V[layer, slot, head]
    void axpy_v(int layer, std::int64_t slot, int head, float weight, float* acc) const;
    // Batched forms over a sequence's slots: scores[i] = q · K[slot_ids[i]];
    // acc += sum_i weights[i] * V[slot_ids[i]]. Sizes must match. (Not named "slots": that
    // is a Qt macro, and Qt code includes this header.)
    void dot_k(int layer, int head, const float* q, std::span<const std::int64_t> slot_ids,
               std::span<float> scores) const;
    void axpy_v(int layer, int head, std::span<const std::int64_t> slot_ids,
                std::span<const float> weights, float* acc) const;

    // Blocked attention (runtime/cpu_attention) works on tiles of up to kTileKeys keys of one
    // head as floats, so that each K and V row is converted once per tile and then used by a
    // whole block of queries. 32: two AVX-512 key vectors per score pass.
    static constexpr int kTileKeys = 32;
    // K tile, transposed: element i of key j at values[i * kTileKeys + j].
    struct KeyTile {
        const float* values = nullptr;
        int keys = 0;
    };
    // V tile: row j is columns [first, first + cols) of V of key j.
    struct Tile {
        const float* rows[kTileKeys];
        int keys = 0;
        int cols = 0;
    };
    // Converts K (or V) [layer, slot_ids[i], head] into `buffer` (kTileKeys * head_dim
    // floats), with the same values read_k / read_v give; V of an F32 cache is pointed at in
    // place instead. At most kTileKeys slots. Runs of slots that follow each other inside a
    // block (the usual case: a sequence's positions fill its blocks in order) convert as one.
    // v_tile takes columns [first, first + cols) of each row (cols = 0: to the end), so that
    // threads can share one head's weighted sum by columns.
    void k_tile(int layer, int head, std::span<const std::int64_t> slot_ids, float* buffer,
                KeyTile& tile) const;
    void v_tile(int layer, int head, std::span<const std::int64_t> slot_ids, float* buffer,
                Tile& tile, int first = 0, int cols = 0) const;
    // The same results bit for bit as k_tile then tile_scores (v_tile then tile_accumulate), with
    // an F16 or Q8 cache's elements read where they are stored and converted in the kernel, run
    // by run, instead of through a float tile that is written and read back once per call.
    // Worth it where a tile serves few query rows (decode: one row group; the conversion and
    // its stores had cost more than the scores). An F32 cache keeps the tiles (V's point into
    // the cache already): these return false and do nothing. At most kTileKeys slots;
    // accumulate_in_place adds to out (rows x cols floats) columns [first, first + cols) of V
    // (cols = 0: to the end).
    bool scores_in_place(int layer, int head, std::span<const std::int64_t> slot_ids,
                         const float* q, int rows, float scale, float* scores,
                         std::int64_t stride) const;
    bool accumulate_in_place(int layer, int head, std::span<const std::int64_t> slot_ids,
                             const float* weights, std::int64_t stride, int rows, int first,
                             int cols, float* out) const;
    // Asks the CPU to start loading K (or V) [layer, slot_ids[i], head] into its caches, without
    // waiting. Decode attention reads rows that the weight stream has evicted since they were
    // written: one row at a time, each a DRAM round trip, the conversion had been a tenth of a
    // decode step; prefetched a few tiles ahead, the loads overlap.
    void prefetch_k(int layer, int head, std::span<const std::int64_t> slot_ids) const;
    void prefetch_v(int layer, int head, std::span<const std::int64_t> slot_ids) const;
    // scores[r * stride + j] = scale * (q_r . K key j of the tile), for r < rows;
    // q_r = q + r * head_dim. A (row, key) score is the same bit for bit whatever else shares
    // the call, and the same with every kernel table (kv_kernels.h).
    void tile_scores(const float* q, int rows, const KeyTile& k, float scale, float* scores,
                     std::int64_t stride) const;
    // out_r += sum over the tile's rows j, in order, of weights[r * stride + j] * V row j, for
    // r < rows; out_r = out + r * v.cols. An output element's result is the same bit for bit
    // whether it shares the call with other rows or columns or not (and whatever the tiles'
    // boundaries).
    void tile_accumulate(const float* weights, std::int64_t stride, int rows, const Tile& v,
                         float* out) const;

    // The stored row converted back to float (head_dim values), for tests and attention
    // capture. Range-checked (InvalidArgument).
    void read_k(int layer, std::int64_t slot, int head, float* out) const;
    void read_v(int layer, std::int64_t slot, int head, float* out) const;

    // Performs KvCacheManager's copy-on-write copies, in order. Throws InvalidArgument for a
    // block out of range or a token count outside [0, block_size].
    void copy_block(const BlockCopy& copy);
    void apply(std::span<const BlockCopy> copies);

    // Capacity in bytes, equal to capacity_bytes(shape) and KvStats::bytes_total.
    std::uint64_t bytes() const;
    // Bytes of it in memory now (LargePageBuffer::resident_bytes; 0 where unknown). At
    // construction: the pages of each (layer, kv head)'s first block of K and V, committed so
    // that a conversation's first prompt does not wait for them.
    std::uint64_t resident_bytes() const { return memory_.resident_bytes(); }
    const CacheShape& shape() const { return shape_; }
    // "avx2+fma+f16c" or "scalar", for logs and benchmark records.
    const char* kernel_name() const;

  private:
    enum class Part { K, V };

    void check(int layer, std::int64_t slot, int head, const char* what) const;
    std::int64_t row_index(int layer, std::int64_t slot, int head) const {
        const std::int64_t bs = shape_.block_size;
        const std::int64_t region =
            (static_cast<std::int64_t>(layer) * shape_.kv_heads + head) * shape_.num_blocks +
            slot / bs;
        return region * bs + slot % bs;
    }
    // V row `row` (row_index), contiguous.
    const std::byte* v_row(std::int64_t row) const { return v_values_ + row * row_value_bytes_; }
    // Element 0 of K row `row`: element i is i * block_size elements further on.
    std::int64_t k_element(std::int64_t row) const {
        const std::int64_t offset = row % shape_.block_size;
        return (row - offset) * shape_.head_dim + offset;
    }
    const std::byte* k_column(std::int64_t row) const {
        return k_values_ + k_element(row) * element_bytes_;
    }
    void write_k(std::int64_t row, const float* x);
    void convert_k(std::int64_t row, int first, int n, int len, float* out, int out_stride) const;
    void convert_v(std::int64_t row, int first, int n, float* out) const;
    void write_v(std::int64_t row, const float* x);
    void read(Part part, int layer, std::int64_t slot, int head, float* out) const;
    // Row `row` of `part` as floats into out (head_dim values).
    void convert(Part part, std::int64_t row, float* out) const;
    void prefetch(Part part, int layer, int head, std::span<const std::int64_t> slot_ids) const;

    CacheShape shape_;
    const detail::Kernels* kernels_;
    std::int64_t slots_ = 0;
    std::int64_t element_bytes_ = 0;
    std::int64_t row_value_bytes_ = 0;  // head_dim * element bytes
    LargePageBuffer memory_;
    std::byte* k_values_ = nullptr;
    std::byte* v_values_ = nullptr;
    float* k_scales_ = nullptr;  // Q8 only
    float* v_scales_ = nullptr;
};

}  // namespace tokenscope::kv
