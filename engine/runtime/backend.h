#pragma once
// A compute backend runs the forward pass of a ragged batch against the paged KV cache. The
// engine picks one at load (CPU here, CUDA in kernels/) and calls it once per step; no
// virtual calls happen inside the loops.
#include <cstdint>
#include <string>

#include "runtime/batch.h"

namespace tokenscope::runtime {

struct BackendMemory {
    std::uint64_t weight_bytes = 0;
    std::uint64_t kv_cache_bytes = 0;
    std::uint64_t activation_bytes = 0;  // scratch buffers at their current size
    // A GPU backend: the device's memory and how much of it is in use (by every process, as
    // cudaMemGetInfo reports it). 0 for the CPU backend: the three figures above are then RAM.
    std::uint64_t device_total_bytes = 0;
    std::uint64_t device_used_bytes = 0;
};

class Backend {
public:
    virtual ~Backend() = default;
    // Computes the batch: writes each token's K/V into the cache slots `kv` assigned (the
    // caller has already called allocate_slots for every chunk) and fills `out`.
    virtual void forward(const Batch& batch, kv::KvCacheManager& kv, ForwardOutputs& out) = 0;
    virtual std::string name() const = 0;
    virtual BackendMemory memory() const = 0;
};

}  // namespace tokenscope::runtime
