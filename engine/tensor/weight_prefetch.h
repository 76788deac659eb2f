#pragma once
// Where the decode kernels prefetch the weight rows they will read next (a few KiB ahead):
// decode streams every weight once, and which cache level the software prefetch should fill
// differs between microarchitectures (weight_prefetch.cpp has the measurements). The default
// follows the CPU; TOKENSCOPE_PREFETCH=l1|l2|none overrides it for the process (benchmarks on
// a CPU nobody has measured yet). Results never depend on it, only speed.
//
// No standard headers and only out-of-line functions: the kernel files compiled for AVX2 and
// AVX-512 include this (through matmul_internal.h), see there.

namespace tokenscope::tensor {

enum class WeightPrefetch { None = 0, L1 = 1, L2 = 2 };

WeightPrefetch default_weight_prefetch();  // this CPU's choice, or the environment's
WeightPrefetch weight_prefetch();          // the one in use: the default unless overridden
// The same for F16/BF16 weight rows: on Zen 3 (AMD family 0x19 without AVX-512) no software
// prefetch decoded F16 faster than L2 in 13 of 16 alternated whole-model rounds, while the
// quantized types showed no order (weight_prefetch.cpp). Elsewhere it equals the level above.
// The environment and set_weight_prefetch() override it as they override the rest.
WeightPrefetch default_half_row_prefetch();
WeightPrefetch half_row_prefetch();
// For tests and benchmarks. Not meant to be called while matmuls run on other threads.
void set_weight_prefetch(WeightPrefetch level);
void reset_weight_prefetch();                            // back to the default
const char* weight_prefetch_name(WeightPrefetch level);  // "none", "l1", "l2"

}  // namespace tokenscope::tensor
