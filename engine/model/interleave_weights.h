#pragma once
// Stores the weight matrices that the active CPU kernels multiply faster interleaved
// (tensor::interleaving_pays: Q8_0, Q4_0-Q5_1, Q2_K-Q6_K at the AVX2 level, Q4_0-Q5_1 at AVX-512)
// in that layout, in place in the engine's own copy of the file (in large pages or, where the
// system offers none, in ordinary pages), so that no byte of memory is added.
#include <cstdint>

#include "model/model_weights.h"

namespace tokenscope::gguf {
class File;
}

namespace tokenscope::model {

struct InterleaveResult {
    int matrices = 0;         // matrices now stored interleaved (a tied embedding is the output)
    std::uint64_t bytes = 0;  // their bytes
    double ms = 0.0;          // time taken
};

// True when some matrix of `weights` pays and can be interleaved (at the active SIMD level).
bool interleaving_applies(const ModelWeights& weights);

// Interleaves every matrix of `weights` (bound to `file`) that pays and can be interleaved, and
// sets its layout. Nothing changes when the file's bytes are a mapping (file.is_private_copy()
// is false: the mapping is shared with the page cache) or no matrix qualifies. The matrices'
// data pointers stay where they were.
InterleaveResult interleave_weights(gguf::File& file, ModelWeights& weights);

}  // namespace tokenscope::model
