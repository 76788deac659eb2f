#include "runtime/cpu_attention.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "inspect/attention_capture.h"
#include "runtime/cpu_ops.h"

namespace tokenscope::runtime {

namespace {

constexpr std::int64_t kTile = kv::KvStorage::kTileKeys;
// Query rows (tokens x heads) per work item: each converted K or V tile serves this many
// queries. 32 rows of 64..256 floats keep the block's queries and outputs in L2 and the
// score kernel's register tiles full.
constexpr std::int64_t kTargetRows = 32;
// A thread's score buffer is rows x longest context; past 1 Mi floats (4 MiB) blocks get
// fewer tokens instead (down to one), so that very long contexts do not need huge scratch.
constexpr std::int64_t kMaxScoreFloats = std::int64_t{1} << 20;

// How far ahead of the tile in use K and V rows are prefetched (see KvStorage::prefetch_k).
// 16 to 256 gave the same profile at 1024 cached tokens (conversion plus prefetch 6-7 % of a
// decode step); two 16-key tiles kept the fewest lines in flight, one tile of 32 now.
constexpr std::int64_t kPrefetchKeys = 32;

std::int64_t first_key(std::int64_t pos, std::int64_t window) {
    return window > 0 ? std::max<std::int64_t>(0, pos - window + 1) : 0;
}

template <typename T>
void grow(std::vector<T>& v, std::int64_t n) {
    if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
}

}  // namespace

void CpuAttention::reserve(int threads, std::int64_t longest, int group, int head_dim) {
    assert(threads > 0 && group > 0 && head_dim > 0);
    stride_ = (std::max<std::int64_t>(longest, 1) + kTile - 1) / kTile * kTile;
    block_tokens_ = std::max<std::int64_t>(1, kTargetRows / group);
    while (block_tokens_ > 1 && block_tokens_ * group * stride_ > kMaxScoreFloats) {
        block_tokens_ /= 2;
    }
    rows_ = block_tokens_ * group;
    head_dim_ = head_dim;
    if (static_cast<int>(scratch_.size()) < threads)
        scratch_.resize(static_cast<std::size_t>(threads));
    for (Scratch& s : scratch_) {
        grow(s.scores, rows_ * stride_);
        grow(s.q, rows_ * head_dim);
        grow(s.out, rows_ * head_dim);
        grow(s.tile, kTile * head_dim);
    }
}

std::uint64_t CpuAttention::bytes() const {
    std::uint64_t floats = 0;
    for (const Scratch& s : scratch_) {
        floats += s.scores.capacity() + s.q.capacity() + s.out.capacity() + s.tile.capacity();
    }
    return floats * sizeof(float);
}

void CpuAttention::run(ThreadPool& pool, const kv::KvStorage& storage, const AttentionLayer& layer,
                       std::span<const AttentionChunk> chunks, const float* q, float* out) {
    const int group = layer.heads / layer.kv_heads;
    assert(layer.head_dim == head_dim_ && storage.shape().head_dim == head_dim_);
    assert(static_cast<int>(scratch_.size()) >= pool.size() && rows_ >= block_tokens_ * group);

    // Later blocks of a chunk see more keys: queue them first, so that the dynamic hand-out
    // ends with the small ones and the threads finish together.
    items_.clear();
    for (std::size_t ci = 0; ci < chunks.size(); ++ci) {
        const AttentionChunk& c = chunks[ci];
        assert(c.start_pos + c.tokens <= static_cast<std::int64_t>(c.slot_ids.size()));
        const std::int64_t blocks = (c.tokens + block_tokens_ - 1) / block_tokens_;
        for (std::int64_t b = blocks - 1; b >= 0; --b) {
            const std::int64_t first = b * block_tokens_;
            for (int kvh = 0; kvh < layer.kv_heads; ++kvh) {
                items_.push_back({static_cast<int>(ci), kvh, 0, group, first,
                                  std::min(block_tokens_, c.tokens - first)});
            }
        }
    }
    // Too few items to keep every thread busy (decode of one sequence, often with one kv
    // head): split each item's query heads into slices. Costs a second read of K and V, but
    // the threads would idle otherwise. Does not change any result.
    const auto count = static_cast<std::int64_t>(items_.size());
    int slices = 1;
    while (slices < group && count * slices < pool.size()) {
        do {
            ++slices;
        } while (group % slices != 0);
    }
    if (slices > 1) {
        const int per = group / slices;
        std::vector<Item> split;
        split.reserve(items_.size() * static_cast<std::size_t>(slices));
        for (const Item& it : items_) {
            for (int s = 0; s < slices; ++s)
                split.push_back({it.chunk, it.kv_head, s * per, per, it.first_token, it.tokens});
        }
        items_.swap(split);
    }

    pool.parallel_for_indexed(static_cast<std::int64_t>(items_.size()), 1,
                              [&](std::int64_t b, std::int64_t e, int thread) {
                                  Scratch& s = scratch_[static_cast<std::size_t>(thread)];
                                  for (std::int64_t i = b; i < e; ++i) {
                                      run_item(items_[static_cast<std::size_t>(i)], s, storage,
                                               layer, chunks, q, out);
                                  }
                              });
}

void CpuAttention::run_item(const Item& item, Scratch& s, const kv::KvStorage& storage,
                            const AttentionLayer& layer, std::span<const AttentionChunk> chunks,
                            const float* q, float* out) const {
    const AttentionChunk& c = chunks[static_cast<std::size_t>(item.chunk)];
    const std::int64_t hd = layer.head_dim;
    const std::int64_t row_floats = static_cast<std::int64_t>(layer.heads) * hd;
    const int group = layer.heads / layer.kv_heads;
    const int first_head = item.kv_head * group + item.first_head;  // global head index
    const int G = item.heads;
    const auto R = static_cast<int>(item.tokens * G);  // score rows: r = token * G + head
    const std::int64_t pos0 = c.start_pos + item.first_token;
    // The keys any query of the block sees: from the first one's window start to the last
    // one's position.
    const std::int64_t kfirst = first_key(pos0, layer.window);
    const std::int64_t nk = pos0 + item.tokens - kfirst;
    const std::span<const std::int64_t> slots =
        c.slot_ids.subspan(static_cast<std::size_t>(kfirst), static_cast<std::size_t>(nk));
    float* scores = s.scores.data();
    float* qb = s.q.data();
    float* ob = s.out.data();
    kv::KvStorage::KeyTile ktile;
    kv::KvStorage::Tile vtile;

    for (std::int64_t t = 0; t < item.tokens; ++t) {
        const float* src = q + (c.first_row + item.first_token + t) * row_floats + first_head * hd;
        std::memcpy(qb + t * G * hd, src, static_cast<std::size_t>(G * hd) * sizeof(float));
    }

    // Pass 1: every row's scores (times the scale) against every key of the range. Entries a row
    // must not see (past its position, before its window) are computed too and overwritten
    // below: cheaper than ragged tiles.
    // K, then V, rows are prefetched kPrefetchKeys ahead of the tile in use, as one stream.
    auto prefetch_keys = [&](std::int64_t from, std::int64_t count) {
        // Positions [nk, 2 nk) of the stream are V's.
        const std::int64_t end = std::min(from + count, 2 * nk);
        for (std::int64_t i = from; i < end;) {
            const bool v = i >= nk;
            const std::int64_t base = v ? nk : 0;
            const std::int64_t stop = std::min(end, base + nk);
            const auto part = slots.subspan(static_cast<std::size_t>(i - base),
                                            static_cast<std::size_t>(stop - i));
            if (v) {
                storage.prefetch_v(layer.layer, item.kv_head, part);
            } else {
                storage.prefetch_k(layer.layer, item.kv_head, part);
            }
            i = stop;
        }
    };
    prefetch_keys(0, kPrefetchKeys);
    for (std::int64_t k0 = 0; k0 < nk; k0 += kTile) {
        const auto n = static_cast<std::size_t>(std::min(kTile, nk - k0));
        prefetch_keys(k0 + kPrefetchKeys, kTile);
        storage.k_tile(layer.layer, item.kv_head, slots.subspan(static_cast<std::size_t>(k0), n),
                       s.tile.data(), ktile);
        storage.tile_scores(qb, R, ktile, layer.scale, scores + k0, stride_);
    }

    // Softmax over each row's own keys, then weight 0 for the others.
    for (std::int64_t t = 0; t < item.tokens; ++t) {
        const std::int64_t pos = pos0 + t;
        const std::int64_t first = first_key(pos, layer.window);
        const std::int64_t a = first - kfirst;
        const std::int64_t n = pos - first + 1;
        for (int g = 0; g < G; ++g) {
            float* row = scores + (t * G + g) * stride_;
            const std::span<float> weights(row + a, static_cast<std::size_t>(n));
            ops::softmax(weights);
            const int h = first_head + g;
            if (c.capture && c.capture->wants(layer.layer, h) && c.capture->wants_position(pos)) {
                c.capture->set_row(layer.layer, h, pos, first, weights);
            }
            std::fill(row, row + a, 0.0f);
            std::fill(row + a + n, row + nk, 0.0f);
        }
    }

    // Pass 2: the weighted sums of V, tile by tile. A zero weight adds exactly nothing, so a
    // row gets the same sum as it would alone over its own keys.
    std::fill(ob, ob + R * hd, 0.0f);
    for (std::int64_t k0 = 0; k0 < nk; k0 += kTile) {
        const auto n = static_cast<std::size_t>(std::min(kTile, nk - k0));
        prefetch_keys(nk + k0 + kPrefetchKeys, kTile);
        storage.v_tile(layer.layer, item.kv_head, slots.subspan(static_cast<std::size_t>(k0), n),
                       s.tile.data(), vtile);
        storage.tile_accumulate(scores + k0, stride_, R, vtile, ob);
    }

    for (std::int64_t t = 0; t < item.tokens; ++t) {
        float* dst = out + (c.first_row + item.first_token + t) * row_floats + first_head * hd;
        std::memcpy(dst, ob + t * G * hd, static_cast<std::size_t>(G * hd) * sizeof(float));
    }
}

}  // namespace tokenscope::runtime
