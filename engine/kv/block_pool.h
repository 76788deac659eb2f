#pragma once
// BlockPool: which physical KV blocks are free and how many block tables reference each one.
// Bookkeeping only, no storage: the CPU backend keeps the data in KvStorage, a device backend
// in device memory, both indexed by the block numbers handed out here.
#include <cstdint>
#include <optional>
#include <vector>

namespace tokenscope::kv {

class BlockPool {
  public:
    // Blocks 0 .. num_blocks-1, all free. Throws InvalidArgument unless num_blocks > 0.
    explicit BlockPool(int num_blocks);

    // A free block with reference count 1, or nullopt when none is free. Freed blocks are
    // reused most-recently-freed first, so a hot block stays in the CPU cache.
    std::optional<int> allocate();
    // One more reference to a block in use (a forked sequence sharing it).
    void retain(int block);
    // One reference less; the block becomes free when the count reaches 0.
    void release(int block);

    // 0 for a free block. retain/release/ref_count throw InvalidArgument for a block number
    // out of range, retain/release also for a free block.
    int ref_count(int block) const;
    int num_free() const { return static_cast<int>(free_.size()); }
    int num_used() const { return num_total() - num_free(); }
    int num_total() const { return static_cast<int>(ref_counts_.size()); }

  private:
    void check_in_use(int block, const char* what) const;

    std::vector<int> ref_counts_;  // per block
    std::vector<int> free_;        // a stack: back() is handed out next
};

}  // namespace tokenscope::kv
