#pragma once
// The self-test's speculative decoding checks, on any device: greedy output with prompt lookup
// and with a draft model (the model as its own draft) against plain greedy decoding of the same
// engine, and every KV block back in the pool afterwards. `selftest --device cuda` runs them on
// the GPU (the verification chunks take its prefill kernels); `--device cpu` runs only these, so
// the check itself is exercised where there is no GPU.
#include <string>
#include <vector>

#include "runtime/backend_registry.h"

namespace tokenscope::cli {

struct SelftestResult {
    std::string name, precision;
    double error = 0, tolerance = 0;
    bool passed = false;
};

std::vector<SelftestResult> check_speculation(const std::string& model, const std::string& label,
                                              runtime::Device device);

}  // namespace tokenscope::cli
