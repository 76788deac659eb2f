#include "runtime/cpu_attention.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <utility>

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

// Items of at most this many query rows (decode's row group, verification chunks) read an F16
// or Q8 cache in place (KvStorage::scores_in_place) instead of converting tiles of their own: the
// kernels convert again for every pass of 6 rows (AVX2), but a tile costs a store and a load
// per element. One thread, SmolLM2's head shape, scores plus weighted sums, ns per (kv head,
// key), in place against tiles: in cache (512 keys) 3 rows 13.8-23.2 / 25.1-52.7, 12 rows
// 38.7-55.3 / 49.0-71.0, 27 rows 83.3-83.5 / 94.5-156.1, 32 rows 102-138 / 112-114; from
// memory (30 layers x 2048 keys) 12 rows 47.6-48.7 / 57.7-59.8, 27 rows 99.1-100.3 /
// 115.9-140.2. Items that share a chunk's converted tiles (convert_shared_tiles) keep them.
constexpr int kInPlaceRows = 28;

// Most floats the shared conversion holds (64 MiB); a longer context converts per item.
constexpr std::int64_t kMaxConvertedFloats = std::int64_t{16} << 20;

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
    floats += converted_values_.capacity();
    return floats * sizeof(float) + k_tiles_.capacity() * sizeof(kv::KvStorage::KeyTile) +
           v_tiles_.capacity() * sizeof(kv::KvStorage::Tile) +
           tile_jobs_.capacity() * sizeof(TileJob) + converted_.capacity() * sizeof(Converted);
}

void CpuAttention::run(ThreadPool& pool, const kv::KvStorage& storage, const AttentionLayer& layer,
                       std::span<const AttentionChunk> chunks, const float* q, float* out) {
    [[maybe_unused]] const int group = layer.heads / layer.kv_heads;
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
                items_.push_back(
                    {static_cast<int>(ci), kvh, first, std::min(block_tokens_, c.tokens - first)});
            }
        }
    }
    const Context ctx{storage, layer, chunks, q, out};
    converted_.clear();
    if (static_cast<std::int64_t>(items_.size()) < pool.size() && pool.size() > 1) {
        run_shared(pool, ctx);
        return;
    }
    convert_shared_tiles(pool, ctx);
    pool.parallel_for_indexed(static_cast<std::int64_t>(items_.size()), 1,
                              [&](std::int64_t b, std::int64_t e, int thread) {
                                  Scratch& s = scratch_[static_cast<std::size_t>(thread)];
                                  for (std::int64_t i = b; i < e; ++i) {
                                      const Item& item = items_[static_cast<std::size_t>(i)];
                                      const Span span = span_of(item, ctx);
                                      pack_queries(item, s, ctx);
                                      score_tiles(item, span, s, 0, span.tiles, s.tile.data(), ctx);
                                      softmax_rows(item, span, s, 0, span.rows, ctx);
                                      accumulate_columns(item, span, s, 0, head_dim_, s.tile.data(),
                                                         s.out.data(), ctx);
                                  }
                              });
}

// Chunks of more than one block whose queries all see keys from position 0 (no window, or a
// window not yet reached) get their tiles converted here, once, split over the threads.
void CpuAttention::convert_shared_tiles(ThreadPool& pool, const Context& ctx) {
    const int kv_heads = ctx.layer.kv_heads;
    // Tiles of the chunk's keys [0, start_pos + tokens) when it shares them, else 0.
    auto shared_tiles = [&](const AttentionChunk& c) -> std::int64_t {
        const std::int64_t keys = c.start_pos + c.tokens;
        const bool shared =
            c.tokens > block_tokens_ && (ctx.layer.window <= 0 || keys <= ctx.layer.window);
        return shared ? (keys + kTile - 1) / kTile : 0;
    };
    std::int64_t total = 0;
    tile_jobs_.clear();
    for (const AttentionChunk& c : ctx.chunks) total += shared_tiles(c) * kv_heads;
    if (total == 0 || total * 2 * kTile * head_dim_ > kMaxConvertedFloats) return;
    converted_.assign(ctx.chunks.size() * static_cast<std::size_t>(kv_heads), Converted{});
    std::int64_t next = 0;
    for (std::size_t ci = 0; ci < ctx.chunks.size(); ++ci) {
        const std::int64_t tiles = shared_tiles(ctx.chunks[ci]);
        if (tiles == 0) continue;
        for (int h = 0; h < kv_heads; ++h) {
            converted_[ci * static_cast<std::size_t>(kv_heads) + static_cast<std::size_t>(h)] = {
                next, tiles};
            for (std::int64_t t = 0; t < tiles; ++t)
                tile_jobs_.push_back({static_cast<int>(ci), h, t});
            next += tiles;
        }
    }
    grow(k_tiles_, total);
    grow(v_tiles_, total);
    grow(converted_values_, total * 2 * kTile * head_dim_);
    pool.parallel_for(total, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
            const TileJob& job = tile_jobs_[static_cast<std::size_t>(i)];
            const AttentionChunk& c = ctx.chunks[static_cast<std::size_t>(job.chunk)];
            const std::int64_t k0 = job.tile * kTile;
            const std::int64_t n = std::min(kTile, c.start_pos + c.tokens - k0);
            const auto slots =
                c.slot_ids.subspan(static_cast<std::size_t>(k0), static_cast<std::size_t>(n));
            float* k_values = converted_values_.data() + i * 2 * kTile * head_dim_;
            const auto u = static_cast<std::size_t>(i);
            ctx.storage.k_tile(ctx.layer.layer, job.kv_head, slots, k_values, k_tiles_[u]);
            ctx.storage.v_tile(ctx.layer.layer, job.kv_head, slots, k_values + kTile * head_dim_,
                               v_tiles_[u]);
        }
    });
}

const CpuAttention::Converted* CpuAttention::converted(const Item& item, const Context& ctx) const {
    if (converted_.empty()) return nullptr;
    const Converted& c = converted_[static_cast<std::size_t>(item.chunk) *
                                        static_cast<std::size_t>(ctx.layer.kv_heads) +
                                    static_cast<std::size_t>(item.kv_head)];
    return c.tiles > 0 ? &c : nullptr;
}

// Fewer items than threads (decode of one sequence, often with one to three kv heads): the
// threads share each item's work instead of idling. Scores are split by key tiles, the softmax
// by rows, the weighted sums by output columns: every score, weight and output element comes
// out of the same operations as in the one-thread-per-item form (scores and sums do not depend
// on the tile or column range of a call), so decode still equals prefill bit for bit. Unlike
// splitting a group's query heads over threads, no K or V row is converted twice.
void CpuAttention::run_shared(ThreadPool& pool, const Context& ctx) {
    const auto count = static_cast<int>(items_.size());
    spans_.clear();
    std::int64_t tile_units = 0;
    for (int i = 0; i < count; ++i) {
        spans_.push_back(span_of(items_[static_cast<std::size_t>(i)], ctx));
        tile_units += spans_.back().tiles;
        // Item i keeps its queries and scores in scratch i (count < threads); the threads' own
        // tile and output buffers are the other fields of theirs.
        pack_queries(items_[static_cast<std::size_t>(i)], scratch_[static_cast<std::size_t>(i)],
                     ctx);
    }
    // Units of work per phase are handed out in order over the items' ranges.
    auto locate = [&](std::int64_t unit, auto size_of) {
        int i = 0;
        while (unit >= size_of(spans_[static_cast<std::size_t>(i)])) {
            unit -= size_of(spans_[static_cast<std::size_t>(i)]);
            ++i;
        }
        return std::pair<int, std::int64_t>{i, unit};
    };
    const int threads = pool.size();
    // Scores: one contiguous range of the items' tiles per thread, so that each thread reads
    // its keys as one forward stream. Handed out a tile at a time, neighbouring tiles went to
    // different threads and neither's reads were a stream the prefetchers follow (SmolLM2's 3
    // kv heads put through this form on 2 threads, 4096 cached tokens: 16.7 ms a step that
    // way, 10.1-10.7 with contiguous ranges).
    pool.parallel_for_indexed(
        tile_units, (tile_units + threads - 1) / threads,
        [&](std::int64_t b, std::int64_t e, int thread) {
            float* buffer = scratch_[static_cast<std::size_t>(thread)].tile.data();
            for (std::int64_t u = b; u < e;) {
                const auto [i, tile] = locate(u, [](const Span& sp) { return sp.tiles; });
                const auto at = static_cast<std::size_t>(i);
                const std::int64_t n = std::min(e - u, spans_[at].tiles - tile);
                score_tiles(items_[at], spans_[at], scratch_[at], tile, tile + n, buffer, ctx);
                u += n;
            }
        });
    std::int64_t row_units = 0;
    for (const Span& sp : spans_) row_units += sp.rows;
    pool.parallel_for(row_units, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t u = b; u < e; ++u) {
            const auto [i, row] = locate(u, [](const Span& sp) { return sp.rows; });
            softmax_rows(items_[static_cast<std::size_t>(i)], spans_[static_cast<std::size_t>(i)],
                         scratch_[static_cast<std::size_t>(i)], static_cast<int>(row),
                         static_cast<int>(row) + 1, ctx);
        }
    });
    // Weighted sums: the items' output columns (count x head_dim) in one contiguous range per
    // thread, cut at whole vectors where head_dim allows. A thread takes whole items where it
    // can and reads their V rows in one pass; only an item cut between two threads has its rows
    // read in parts.
    const std::int64_t columns = static_cast<std::int64_t>(count) * head_dim_;
    const std::int64_t vector = head_dim_ % 16 == 0 ? 16 : head_dim_ % 8 == 0 ? 8 : 1;
    const std::int64_t share = ((columns + threads - 1) / threads + vector - 1) / vector * vector;
    pool.parallel_for_indexed(columns, share, [&](std::int64_t b, std::int64_t e, int thread) {
        Scratch& mine = scratch_[static_cast<std::size_t>(thread)];
        for (std::int64_t u = b; u < e;) {
            const auto i = static_cast<std::size_t>(u / head_dim_);
            const auto first = static_cast<int>(u % head_dim_);
            const auto cols = static_cast<int>(std::min<std::int64_t>(e - u, head_dim_ - first));
            accumulate_columns(items_[i], spans_[i], scratch_[i], first, cols, mine.tile.data(),
                               mine.out.data(), ctx);
            u += cols;
        }
    });
}

CpuAttention::Span CpuAttention::span_of(const Item& item, const Context& ctx) const {
    const AttentionChunk& c = ctx.chunks[static_cast<std::size_t>(item.chunk)];
    const int group = ctx.layer.heads / ctx.layer.kv_heads;
    Span sp;
    sp.pos0 = c.start_pos + item.first_token;
    // The keys any query of the block sees: from the first one's window start to the last
    // one's position.
    sp.kfirst = first_key(sp.pos0, ctx.layer.window);
    sp.keys = sp.pos0 + item.tokens - sp.kfirst;
    sp.tiles = (sp.keys + kTile - 1) / kTile;
    sp.rows = static_cast<int>(item.tokens * group);  // score rows: r = token * group + head
    sp.key_slots =
        c.slot_ids.subspan(static_cast<std::size_t>(sp.kfirst), static_cast<std::size_t>(sp.keys));
    return sp;
}

void CpuAttention::pack_queries(const Item& item, Scratch& s, const Context& ctx) const {
    const AttentionChunk& c = ctx.chunks[static_cast<std::size_t>(item.chunk)];
    const std::int64_t hd = ctx.layer.head_dim;
    const std::int64_t row_floats = static_cast<std::int64_t>(ctx.layer.heads) * hd;
    const std::int64_t group = ctx.layer.heads / ctx.layer.kv_heads;
    for (std::int64_t t = 0; t < item.tokens; ++t) {
        const float* src =
            ctx.q + (c.first_row + item.first_token + t) * row_floats + item.kv_head * group * hd;
        std::memcpy(s.q.data() + t * group * hd, src,
                    static_cast<std::size_t>(group * hd) * sizeof(float));
    }
}

// Scores (times the scale) of every row against the keys of tiles [tile_begin, tile_end).
// Entries a row must not see (past its position, before its window) are computed too and
// overwritten by softmax_rows: cheaper than ragged tiles. K and then V rows are prefetched
// kPrefetchKeys ahead of the tile in use, as one stream over the item's keys.
void CpuAttention::score_tiles(const Item& item, const Span& sp, Scratch& s,
                               std::int64_t tile_begin, std::int64_t tile_end, float* buffer,
                               const Context& ctx) const {
    if (const Converted* conv = converted(item, ctx)) {
        // Keys start at 0 here (sp.kfirst == 0), so the item's tile t is the shared tile t, cut
        // to the item's keys as its own conversion would have been.
        for (std::int64_t t = tile_begin; t < tile_end; ++t) {
            kv::KvStorage::KeyTile ktile = k_tiles_[static_cast<std::size_t>(conv->first_tile + t)];
            ktile.keys = static_cast<int>(std::min(kTile, sp.keys - t * kTile));
            ctx.storage.tile_scores(s.q.data(), sp.rows, ktile, ctx.layer.scale,
                                    s.scores.data() + t * kTile, stride_);
        }
        return;
    }
    kv::KvStorage::KeyTile ktile;
    for (std::int64_t t = tile_begin; t < tile_end; ++t) {
        const std::int64_t k0 = t * kTile;
        const auto n = static_cast<std::size_t>(std::min(kTile, sp.keys - k0));
        if (t == 0) prefetch(item, sp, 0, kPrefetchKeys, ctx);
        prefetch(item, sp, k0 + kPrefetchKeys, kTile, ctx);
        const auto slots = sp.key_slots.subspan(static_cast<std::size_t>(k0), n);
        if (sp.rows <= kInPlaceRows &&
            ctx.storage.scores_in_place(ctx.layer.layer, item.kv_head, slots, s.q.data(), sp.rows,
                                        ctx.layer.scale, s.scores.data() + k0, stride_)) {
            continue;
        }
        ctx.storage.k_tile(ctx.layer.layer, item.kv_head, slots, buffer, ktile);
        ctx.storage.tile_scores(s.q.data(), sp.rows, ktile, ctx.layer.scale, s.scores.data() + k0,
                                stride_);
    }
}

// Softmax over each of rows [row_begin, row_end)'s own keys, then weight 0 for the others.
void CpuAttention::softmax_rows(const Item& item, const Span& sp, Scratch& s, int row_begin,
                                int row_end, const Context& ctx) const {
    const AttentionChunk& c = ctx.chunks[static_cast<std::size_t>(item.chunk)];
    const int group = ctx.layer.heads / ctx.layer.kv_heads;
    for (int r = row_begin; r < row_end; ++r) {
        const std::int64_t pos = sp.pos0 + r / group;
        const std::int64_t first = first_key(pos, ctx.layer.window);
        const std::int64_t a = first - sp.kfirst;
        const std::int64_t n = pos - first + 1;
        float* row = s.scores.data() + r * stride_;
        const std::span<float> weights(row + a, static_cast<std::size_t>(n));
        ops::softmax(weights);
        const int h = item.kv_head * group + r % group;
        if (c.capture && c.capture->wants(ctx.layer.layer, h) && c.capture->wants_position(pos)) {
            c.capture->set_row(ctx.layer.layer, h, pos, first, weights);
        }
        std::fill(row, row + a, 0.0f);
        std::fill(row + a + n, row + sp.keys, 0.0f);
    }
}

// Columns [first, first + cols) of every row's weighted sum of V, tile by tile, summed in
// `acc` (rows x cols floats) and then stored in the output. A zero weight adds exactly
// nothing, so a row gets the same sum as it would alone over its own keys.
void CpuAttention::accumulate_columns(const Item& item, const Span& sp, const Scratch& s, int first,
                                      int cols, float* buffer, float* acc,
                                      const Context& ctx) const {
    const AttentionChunk& c = ctx.chunks[static_cast<std::size_t>(item.chunk)];
    const std::int64_t hd = ctx.layer.head_dim;
    const std::int64_t row_floats = static_cast<std::int64_t>(ctx.layer.heads) * hd;
    const int group = ctx.layer.heads / ctx.layer.kv_heads;
    kv::KvStorage::Tile vtile;
    std::fill(acc, acc + static_cast<std::int64_t>(sp.rows) * cols, 0.0f);
    // Converted once for the chunk (whole rows: this path takes every column).
    const Converted* conv = first == 0 && cols == head_dim_ ? converted(item, ctx) : nullptr;
    for (std::int64_t k0 = 0; k0 < sp.keys; k0 += kTile) {
        const auto n = static_cast<std::size_t>(std::min(kTile, sp.keys - k0));
        if (conv != nullptr) {
            vtile = v_tiles_[static_cast<std::size_t>(conv->first_tile + k0 / kTile)];
            vtile.keys = static_cast<int>(n);
            ctx.storage.tile_accumulate(s.scores.data() + k0, stride_, sp.rows, vtile, acc);
            continue;
        }
        prefetch(item, sp, sp.keys + k0 + kPrefetchKeys, kTile, ctx);
        const auto slots = sp.key_slots.subspan(static_cast<std::size_t>(k0), n);
        if (sp.rows <= kInPlaceRows &&
            ctx.storage.accumulate_in_place(ctx.layer.layer, item.kv_head, slots,
                                            s.scores.data() + k0, stride_, sp.rows, first, cols,
                                            acc)) {
            continue;
        }
        ctx.storage.v_tile(ctx.layer.layer, item.kv_head, slots, buffer, vtile, first, cols);
        ctx.storage.tile_accumulate(s.scores.data() + k0, stride_, sp.rows, vtile, acc);
    }
    for (int r = 0; r < sp.rows; ++r) {
        const std::int64_t t = r / group;
        float* dst = ctx.out + (c.first_row + item.first_token + t) * row_floats +
                     (item.kv_head * group + r % group) * hd + first;
        std::memcpy(dst, acc + static_cast<std::int64_t>(r) * cols,
                    static_cast<std::size_t>(cols) * sizeof(float));
    }
}

// Positions [from, from + count) of the item's stream: K of its keys, then (from sp.keys on)
// V of the same keys.
void CpuAttention::prefetch(const Item& item, const Span& sp, std::int64_t from, std::int64_t count,
                            const Context& ctx) const {
    const std::int64_t end = std::min(from + count, 2 * sp.keys);
    for (std::int64_t i = from; i < end;) {
        const bool v = i >= sp.keys;
        const std::int64_t base = v ? sp.keys : 0;
        const std::int64_t stop = std::min(end, base + sp.keys);
        const auto part = sp.key_slots.subspan(static_cast<std::size_t>(i - base),
                                               static_cast<std::size_t>(stop - i));
        if (v) {
            ctx.storage.prefetch_v(ctx.layer.layer, item.kv_head, part);
        } else {
            ctx.storage.prefetch_k(ctx.layer.layer, item.kv_head, part);
        }
        i = stop;
    }
}

}  // namespace tokenscope::runtime
