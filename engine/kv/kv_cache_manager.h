#pragma once
// KvCacheManager: the paged KV cache's bookkeeping (vLLM-style). Each sequence owns a block
// table, the list of physical blocks that hold its tokens in order; token `pos` of a sequence
// lives in block block_table[pos / block_size] at offset pos % block_size. Blocks come from
// one BlockPool and are shared between forked sequences by reference count.
//
// This class is the only place that mutates the cache's bookkeeping and holds no K/V data:
// KvStorage (CPU) or a device buffer hold the data, indexed by slot(). It is not thread-safe;
// the engine calls it from its one scheduling thread.
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_types.h"

namespace tokenscope::kv {

using SeqId = std::int64_t;

// The first `tokens` slots of block `src` must be copied to block `dst` (all layers, K and V)
// before the storage is written again: copy-on-write of a shared, partially filled block.
struct BlockCopy {
    int src = 0;
    int dst = 0;
    int tokens = 0;

    bool operator==(const BlockCopy&) const = default;
};

struct SequenceStats {
    SeqId seq = 0;
    int blocks = 0;         // length of its block table
    int shared_blocks = 0;  // of those, blocks referenced by another sequence too
    int tokens = 0;
};

// The latest allocate_slots() that added tokens: what the step just wrote, for the KV view's
// highlight (teaching: "this token went into block 3, slot 9"). seq < 0: none, or the sequence
// has since been freed or truncated below it.
struct KvLastWrite {
    SeqId seq = -1;
    int first_position = 0;  // the first of the `count` positions written
    int count = 0;
    int last_block = -1;  // physical block of the last position
    int last_slot = 0;    // its offset inside that block
};

// A snapshot for the GUI (block map, size formula) and the memory budget.
struct KvStats {
    int blocks_total = 0;
    int blocks_used = 0;
    int blocks_free = 0;
    int block_size = 0;
    std::vector<SequenceStats> sequences;  // ascending seq id
    // Per physical block: the sequence that owns it, -1 when free; a shared block is shown as
    // owned by the lowest seq id referencing it (block_refs tells that it is shared).
    std::vector<SeqId> block_owner;
    std::vector<int> block_refs;  // per physical block: its reference count, 0 when free
    KvLastWrite last_write;
    // Sum of every sequence's num_tokens: a prefix shared by two sequences counts twice.
    std::int64_t tokens_logical = 0;
    // Distinct physical slots holding a token: a shared prefix counts once. This is what
    // occupies memory, so bytes_used is computed from it.
    std::int64_t tokens_stored = 0;
    // 2 (K and V) * layers * kv_heads * (head_dim * element bytes [+ 4-byte scale for Q8]).
    std::uint64_t bytes_per_token = 0;
    std::uint64_t bytes_total = 0;  // bytes_per_token * blocks_total * block_size
    std::uint64_t bytes_used = 0;   // bytes_per_token * tokens_stored
};

class KvCacheManager {
  public:
    // Throws InvalidArgument for a shape with a non-positive count (see validate()).
    explicit KvCacheManager(const CacheShape& shape);

    // Blocks allocate_slots(seq, n_new) would take from the pool: whole new blocks plus one
    // for copy-on-write when the sequence's last block is partially filled and shared.
    // `seq` need not exist yet. Lets a scheduler decide before it commits.
    int blocks_needed(SeqId seq, int n_new) const;

    // Makes room for n_new more tokens after the sequence's current num_tokens, which then
    // grows by n_new; creates the sequence if it is new. Returns false, changing nothing, when
    // the pool has too few free blocks. May queue a BlockCopy (see take_block_copies).
    // Throws InvalidArgument for n_new < 0.
    bool allocate_slots(SeqId seq, int n_new);

    // Keeps the first n_tokens (rollback of rejected draft tokens, editing an earlier turn) and
    // releases whole blocks past the end. The sequence stays, possibly with 0 tokens.
    // Throws InvalidArgument for an unknown seq or n_tokens outside [0, num_tokens].
    void truncate(SeqId seq, int n_tokens);

    // Releases all of the sequence's blocks and forgets it. Throws for an unknown seq.
    void free_sequence(SeqId seq);

    // Creates `to` holding the first n_tokens of `from`, sharing their blocks by reference
    // count; nothing is copied and nothing can run out here. A shared, partially filled block
    // is copied later, by allocate_slots of whichever sequence appends into it first (lazy
    // copy-on-write: one mechanism that also covers a sequence truncated back into a block it
    // shares). Throws for an unknown `from`, an existing `to`, or n_tokens outside
    // [0, num_tokens(from)].
    void fork(SeqId from, SeqId to, int n_tokens);

    // The copies queued by allocate_slots since the last call, in order. The backend must
    // perform them, in this order, before writing the slots allocated since.
    std::vector<BlockCopy> take_block_copies();

    bool has_sequence(SeqId seq) const { return seqs_.count(seq) != 0; }
    // These throw InvalidArgument for an unknown seq.
    int num_tokens(SeqId seq) const;
    const std::vector<int>& block_table(SeqId seq) const;
    // Physical slot of token `pos`: block_table[pos / block_size] * block_size + pos % block_size.
    // Throws for pos outside [0, num_tokens).
    std::int64_t slot(SeqId seq, int pos) const;
    // Every live sequence, ascending.
    std::vector<SeqId> sequences() const;

    KvStats stats() const;
    const CacheShape& shape() const { return shape_; }
    const BlockPool& pool() const { return pool_; }

  private:
    struct Sequence {
        std::vector<int> blocks;
        int num_tokens = 0;
    };

    const Sequence& find(SeqId seq, const char* what) const;
    int blocks_for(std::int64_t tokens) const {
        return static_cast<int>((tokens + shape_.block_size - 1) / shape_.block_size);
    }
    bool needs_copy_on_write(const Sequence& s) const;

    CacheShape shape_;
    BlockPool pool_;
    std::unordered_map<SeqId, Sequence> seqs_;
    std::vector<BlockCopy> copies_;
    KvLastWrite last_write_;
};

}  // namespace tokenscope::kv
