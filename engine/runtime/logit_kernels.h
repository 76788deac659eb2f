#pragma once
// The work over a whole row of logits that every sampling step does, whatever the settings:
// the maximum (with a check for NaN and +infinity, and the maximum of each block of kLogitBlock
// logits, which lets the top-n selection skip blocks that cannot hold a winner) and the softmax
// normaliser sum_i exp(logit_i - max). At Gemma's 262144-token vocabulary this is most of a
// step's sampling time, so there is one table per instruction set, chosen at run time: the
// portable one (std::exp, the reference) and an AVX2+FMA one (eight lanes, a polynomial exp
// within 2 ulp of std::exp, and maximum and normaliser in one pass over the row with the
// running-maximum rescaling of "online softmax"; its normaliser differs from the portable one
// by float rounding: a few float ulps, 4e-7 relative at most in the tests, 4e-8 on random rows).
#include <cstddef>

namespace tokenscope::runtime::sampling {

// Logits per block of LogitScan's block maxima. Small enough that the blocks holding the top 40
// tokens are a few percent of a 262144-token row, large enough that choosing among the block
// maxima is cheap next to the scan.
inline constexpr std::size_t kLogitBlock = 256;

inline constexpr std::size_t logit_blocks(std::size_t n) {
    return (n + kLogitBlock - 1) / kLogitBlock;
}

struct LogitScan {
    float max = 0.0f;      // the largest logit (-infinity when all are); unspecified with NaNs
    bool clean = false;    // no NaN and no +infinity among the logits
    double sum_exp = 0.0;  // scan_softmax only: sum_i exp(logit_i - max), when clean and max finite
};

struct LogitKernels {
    const char* name;
    // `block_max` receives logit_blocks(n) values: block b's maximum over
    // logits[b * kLogitBlock, min(n, (b + 1) * kLogitBlock)).
    LogitScan (*scan)(const float* logits, std::size_t n, float* block_max);
    // The same and the softmax normaliser (-infinity logits add exactly 0).
    LogitScan (*scan_softmax)(const float* logits, std::size_t n, float* block_max);
};

// Portable C++: the reference the other tables are tested against.
const LogitKernels& portable_logit_kernels();
// The fastest table this CPU runs.
const LogitKernels& best_logit_kernels();

}  // namespace tokenscope::runtime::sampling
