#include "kv/block_pool.h"

#include <fmt/format.h>

#include "util/error.h"

namespace tokenscope::kv {

BlockPool::BlockPool(int num_blocks) {
    if (num_blocks <= 0) {
        throw InvalidArgument(
            fmt::format("kv: a block pool needs at least one block, got {}", num_blocks));
    }
    ref_counts_.assign(static_cast<std::size_t>(num_blocks), 0);
    // Reversed so that a fresh pool hands out 0, 1, 2, ...: block maps and tests read naturally.
    free_.reserve(static_cast<std::size_t>(num_blocks));
    for (int block = num_blocks - 1; block >= 0; --block) free_.push_back(block);
}

std::optional<int> BlockPool::allocate() {
    if (free_.empty()) return std::nullopt;
    const int block = free_.back();
    free_.pop_back();
    ref_counts_[static_cast<std::size_t>(block)] = 1;
    return block;
}

void BlockPool::retain(int block) {
    check_in_use(block, "retain");
    ++ref_counts_[static_cast<std::size_t>(block)];
}

void BlockPool::release(int block) {
    check_in_use(block, "release");
    if (--ref_counts_[static_cast<std::size_t>(block)] == 0) free_.push_back(block);
}

int BlockPool::ref_count(int block) const {
    if (block < 0 || block >= num_total()) {
        throw InvalidArgument(
            fmt::format("kv: block {} out of range (pool has {} blocks)", block, num_total()));
    }
    return ref_counts_[static_cast<std::size_t>(block)];
}

void BlockPool::check_in_use(int block, const char* what) const {
    if (ref_count(block) == 0) {
        throw InvalidArgument(fmt::format("kv: {} of block {}, which is free", what, block));
    }
}

}  // namespace tokenscope::kv
