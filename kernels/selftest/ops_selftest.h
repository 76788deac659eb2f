#pragma once
// CPU-vs-CUDA check of every op in kernels/ops, for `tokenscope-cli selftest --device cuda`.
// Host interface only (no CUDA headers).
#include <cstdint>
#include <string>
#include <vector>

namespace tokenscope::cuda::selftest {

struct OpCheck {
    std::string name;       // "embedding Q4_K", "attention q8 window 8", ...
    std::string precision;  // what is compared, e.g. "f32", "f16 cache"
    double rel_error = 0;   // ||cuda - cpu|| / ||cpu||
    double tolerance = 0;
    bool passed = false;
};

// Runs every op on fresh random inputs (seeded) on the current CUDA device and compares with
// the engine's CPU code or a float64 loop. Throws tokenscope::Error when CUDA fails (no device,
// a launch or a copy fails); a numeric mismatch is reported as passed = false, not thrown.
std::vector<OpCheck> check_ops(std::uint64_t seed);

}  // namespace tokenscope::cuda::selftest
