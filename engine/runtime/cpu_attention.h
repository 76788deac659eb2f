#pragma once
// The CPU backend's attention: softmax(scale * q . K) V for every query token and head of a
// ragged batch, over the paged cache in kv::KvStorage.
//
// Blocked so that K and V are read and converted once per block of queries rather than once
// per (token, head): a work item is one chunk's block of consecutive query tokens times the
// query heads that share one kv head (GQA). For each tile of keys, the item converts the K
// rows to f32 once and scores every query of the block against them (a small matrix
// product); after the softmax of each query row it does the same with V. Two passes over the
// keys, not an online softmax, because attention capture needs each query's exact
// probability row.
//
// In a prefill, a chunk's blocks all read the keys [0, position] of their kv head, so the
// later blocks would convert the same K and V rows again and again (a 2048-token SmolLM2
// prefill spent 6.3 % of its time in those conversions, each row converted ~100 times). There
// every tile of a (chunk, kv head) is converted once, in a first parallel phase, and the items
// read the converted tiles. The values and tile boundaries are the ones an item would have
// made itself, so results are the same bit for bit. Prefill, 2 threads, AVX-512, tok/s, three
// alternated runs: SmolLM2 2048 tokens 1232-1260 -> 1283-1297, 512 tokens 1982-2021 ->
// 2006-2051; Gemma 3 270M 512 tokens 2047-2049 -> 2102-2124 (two runs). Less than the
// conversions' share, since the items now read their tiles from L2 instead of a buffer in L1.
//
// Decode (one token) runs the same code as a block of one token, and a query's score against
// a key and its weighted sum come out the same bit for bit whichever block it is in: prefill
// and token-by-token decode of the same tokens agree exactly (tests/engine/test_forward).
#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_storage.h"
#include "runtime/thread_pool.h"

namespace tokenscope::inspect {
class AttentionCapture;
}

namespace tokenscope::runtime {

// One layer's attention settings.
struct AttentionLayer {
    int layer = 0;
    int heads = 0;
    int kv_heads = 0;  // divides heads; query head h reads kv head h / (heads / kv_heads)
    int head_dim = 0;  // of keys and values alike (KvStorage's head_dim)
    float scale = 1.0f;
    std::int64_t window = 0;  // > 0: the query at pos sees keys [pos - window + 1, pos] only
};

// One sequence's query tokens in the batch.
struct AttentionChunk {
    std::int64_t first_row = 0;  // row of its first token in q and out
    std::int64_t tokens = 0;
    std::int64_t start_pos = 0;  // position of its first token
    // Physical cache slots of positions [0, start_pos + tokens).
    // (Not named "slots": that is a Qt macro, and Qt code includes this header.)
    std::span<const std::int64_t> slot_ids;
    inspect::AttentionCapture* capture = nullptr;  // rows stored when it wants them
};

class CpuAttention {
  public:
    // Sizes the per-thread scratch for `threads` threads, chunks ending at position `longest`
    // at most, `group` query heads per kv head and rows of head_dim. Keeps what it has when
    // that is enough.
    void reserve(int threads, std::int64_t longest, int group, int head_dim);
    // Bytes of scratch held, the shared conversion's (up to 64 MiB, grown by a prefill) included.
    std::uint64_t bytes() const;

    // out[row][h * head_dim + i] for every token row of `chunks` and head h, from
    // q[row][h * head_dim + i] (rows of heads * head_dim floats). The chunks' keys must
    // already be in `storage`. Needs reserve() with at least these sizes first.
    void run(ThreadPool& pool, const kv::KvStorage& storage, const AttentionLayer& layer,
             std::span<const AttentionChunk> chunks, const float* q, float* out);

  private:
    // A block of one chunk's tokens times the query heads that share one kv head.
    struct Item {
        int chunk;
        int kv_head;
        std::int64_t first_token;  // within the chunk
        std::int64_t tokens;
    };
    // An item's keys and score rows.
    struct Span {
        std::int64_t pos0 = 0;                    // position of its first token
        std::int64_t kfirst = 0;                  // first key any of its queries sees
        std::int64_t keys = 0;                    // keys [kfirst, kfirst + keys)
        std::int64_t tiles = 0;                   // of kv::KvStorage::kTileKeys keys
        int rows = 0;                             // tokens x group
        std::span<const std::int64_t> key_slots;  // of those keys
    };
    struct Scratch {
        std::vector<float> scores;  // rows * stride: a block's scores, then its weights
        std::vector<float> q;       // rows * head_dim: the block's queries, packed
        std::vector<float> out;     // rows * head_dim: their outputs
        std::vector<float> tile;    // kTileKeys * head_dim: converted K or V rows
    };
    // One run()'s arguments.
    struct Context {
        const kv::KvStorage& storage;
        const AttentionLayer& layer;
        std::span<const AttentionChunk> chunks;
        const float* q;
        float* out;
    };
    // One (chunk, kv head)'s keys converted once for all its items: tiles
    // [first_tile, first_tile + tiles) of k_tiles_ and v_tiles_ hold keys [0, tiles * kTile).
    struct Converted {
        std::int64_t first_tile = 0;
        std::int64_t tiles = 0;  // 0: its items convert their own tiles
    };
    // A tile for the conversion phase.
    struct TileJob {
        int chunk;
        int kv_head;
        std::int64_t tile;  // within the chunk's keys
    };
    void convert_shared_tiles(ThreadPool& pool, const Context& ctx);
    // The converted tiles of an item, or null when it converts its own.
    const Converted* converted(const Item& item, const Context& ctx) const;
    void run_shared(ThreadPool& pool, const Context& ctx);
    Span span_of(const Item& item, const Context& ctx) const;
    void pack_queries(const Item& item, Scratch& s, const Context& ctx) const;
    void score_tiles(const Item& item, const Span& sp, Scratch& s, std::int64_t tile_begin,
                     std::int64_t tile_end, float* buffer, const Context& ctx) const;
    void softmax_rows(const Item& item, const Span& sp, Scratch& s, int row_begin, int row_end,
                      const Context& ctx) const;
    void accumulate_columns(const Item& item, const Span& sp, const Scratch& s, int first, int cols,
                            float* buffer, float* acc, const Context& ctx) const;
    void prefetch(const Item& item, const Span& sp, std::int64_t from, std::int64_t count,
                  const Context& ctx) const;

    std::int64_t block_tokens_ = 1;  // query tokens per item
    std::int64_t rows_ = 0;          // block_tokens_ * group: score rows per item
    std::int64_t stride_ = 0;        // floats per score row: longest, rounded up to a tile
    int head_dim_ = 0;
    std::vector<Scratch> scratch_;  // per thread
    std::vector<Item> items_;
    std::vector<Span> spans_;  // run_shared's
    std::vector<Converted> converted_;  // [chunk * kv_heads + kv_head]; empty: none
    std::vector<TileJob> tile_jobs_;
    std::vector<kv::KvStorage::KeyTile> k_tiles_;
    std::vector<kv::KvStorage::Tile> v_tiles_;
    std::vector<float> converted_values_;  // per tile: K then V, kTile * head_dim floats each
};

}  // namespace tokenscope::runtime
