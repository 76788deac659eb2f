#pragma once
// The kernel lab: every variant of one op timed in one run on the same inputs, with its
// achieved bandwidth and its difference from the op's first (reference) variant. Host-only.
#include <string>
#include <vector>

#include "runtime/gpu_plugin.h"

namespace tokenscope::cuda::lab {

// op: "gemv" (reference vs vectorised GEMV for F16/Q8_0/Q4_K at the 1B model's matrix shapes,
// and the fused gate+up+SiLU and Q/K/V GEMVs against the separate launches),
// "attention" (one block per head vs split-K vs GQA split-K, F16 and Q8 caches, contexts 512 and
// 4096), or "" for both. Throws InvalidArgument for another name, tokenscope::Error when CUDA fails.
std::vector<runtime::KernelTiming> run_kernel_lab(const std::string& op);

}  // namespace tokenscope::cuda::lab
