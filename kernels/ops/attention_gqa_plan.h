#pragma once
// Index math of the GQA split-K decode attention (attention_gqa.cu, attention_combine.cu), in a
// header that plain C++ can include too: the kernels call these functions on the device, and
// tests/kernels/test_attention_gqa_plan.cpp runs them (and a CPU emulation of the kernels' tile
// loop and combine) on machines without a GPU. One place decides which keys a block reads.
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TOKENSCOPE_HD __host__ __device__
#else
#define TOKENSCOPE_HD
#endif

namespace tokenscope::cuda::ops::gqa {

// Keys per tile: one warp lane per key when the scores are computed, and the unit the shares
// are rounded to (a share never ends inside a tile except at the context's end).
inline constexpr int kTile = 32;
// Shares per (token, KV head) at most: the combine kernel gives one thread to each share.
inline constexpr int kMaxSplits = 128;
// Blocks per SM the split count aims for: 128-thread blocks with ~11 KB of shared memory
// (the 1B model) fit several per SM, and a few resident blocks per SM are what keeps enough
// loads in flight to cover memory latency.
inline constexpr int kBlocksPerSm = 4;
inline constexpr int kThreads = 128;

// The first key a query at position p sees: 0, or the sliding window's first.
TOKENSCOPE_HD inline int first_key(int p, int window) {
    if (window <= 0) return 0;
    const int f = p - window + 1;
    return f > 0 ? f : 0;
}

// Keys per share for n_keys keys cut into `splits` shares: ceil(n_keys / splits) rounded up to a
// whole number of tiles, so every share but the last holds full tiles; shares past the end are
// empty. The split count is fixed per launch shape (a CUDA graph replays it) while the context
// grows, so at short contexts most shares are empty and cost one early-exiting block each.
TOKENSCOPE_HD inline int share_keys(int n_keys, int splits) {
    const int per = (n_keys + splits - 1) / splits;
    return (per + kTile - 1) / kTile * kTile;
}

// Keys [begin, end] (inclusive; empty when begin > end) of share s of a query at p.
struct KeyRange {
    int begin;
    int end;
};
TOKENSCOPE_HD inline KeyRange share_range(int p, int window, int splits, int s) {
    const int first = first_key(p, window);
    const int n = p - first + 1;
    const int per = share_keys(n, splits);
    const int begin = first + s * per;
    const int last = begin + per - 1;
    return {begin, last < p ? last : p};
}

// The split count for `tokens` queries over a cache of `capacity_tokens` on `sm_count` SMs:
// enough (token, KV head, share) blocks for kBlocksPerSm per SM, no more shares than tiles of
// the capacity (a share below one tile would only add combine work), 1..kMaxSplits.
inline int splits_for(int sm_count, int kv_heads, int tokens, std::int64_t capacity_tokens) {
    const std::int64_t rows = static_cast<std::int64_t>(kv_heads > 0 ? kv_heads : 1) * (tokens > 0 ? tokens : 1);
    const std::int64_t target = static_cast<std::int64_t>(sm_count > 0 ? sm_count : 1) * kBlocksPerSm;
    std::int64_t splits = (target + rows - 1) / rows;
    const std::int64_t tiles = (capacity_tokens + kTile - 1) / kTile;
    if (splits > tiles) splits = tiles;
    if (splits > kMaxSplits) splits = kMaxSplits;
    if (splits < 1) splits = 1;
    return static_cast<int>(splits);
}

// Shared memory of one block, in floats, for `group` query heads per KV head:
// q[group][head_dim], acc[group][head_dim], one K-or-V tile [kTile][head_dim + 1] (the +1 pad
// puts the rows of a tile in different banks: lane j reads row j), p[group][kTile], and the
// per-head running max, sum and rescale factor m[group], l[group], corr[group].
inline std::size_t shared_floats(int group, int head_dim) {
    const auto g = static_cast<std::size_t>(group), d = static_cast<std::size_t>(head_dim);
    return 2 * g * d + static_cast<std::size_t>(kTile) * (d + 1) + g * kTile + 3 * g;
}

// Scratch floats for `tokens` queries: one partial (acc[head_dim], m, l) per (token, head, share),
// the same layout as attention_split's.
inline std::size_t scratch_floats(int tokens, int heads, int head_dim, int splits) {
    return static_cast<std::size_t>(tokens) * static_cast<std::size_t>(heads) * static_cast<std::size_t>(splits) *
           static_cast<std::size_t>(head_dim + 2);
}

}  // namespace tokenscope::cuda::ops::gqa
