// The cache level the decode kernels' software prefetch fills (tensor/matmul.h).
//
// Measured with one binary, 2 threads, a 90 MB F16 / Q8_0 / Q4_K matrix of 11008 x 4096 times
// one token, streamed from memory (docs/benchmarks.md, "Weight prefetch level"):
// - AMD EPYC Zen 4 (family 0x19, model 0x11), AVX-512 kernels, GB/s of weights read:
//   prefetcht0 17-19 (F16), 19-26 (Q8_0), 17-18 (Q4_K); prefetcht1 20-25, 27-29, 23-25; no
//   software prefetch 20-22 (F16): filling L1 there was worse than not prefetching at all. The
//   AVX2 kernels on the same CPU: T0 10-17, T1 17-23.
// - The dev machine when the prefetch was added (2026-11-30; benchmarks.md names an Intel
//   Sapphire Rapids class Xeon): prefetcht0 about 10 % ahead of prefetcht1 for F16 decode.
// - Zen 5 (family 0x1A) ran with prefetcht0 in every pass of issue 14; L2 was not measured there.
// - An Intel Xeon, family 6 model 0xCF (2026-12-04), whole-model decode, 2 threads, L1 / L2
//   tok/s over two rounds: F16 50.7/53.1, 52.4/54.0; Q4_K 209.7/206.6, 194.2/167.9; Gemma 3
//   270M 89.2/80.3, 84.7/74.4; SmolLM2 178.4/164.7, 184.0/194.0: alike within the noise.
// So: L2 on AMD family 0x19 (Zen 3 and Zen 4 share it), L1 on every other CPU, as before.
#include <atomic>
#include <cstdlib>
#include <string>

#include <spdlog/spdlog.h>

#include "tensor/matmul.h"
#include "util/cpu_features.h"
#include "util/error.h"

namespace tokenscope::tensor {

namespace {

constexpr std::uint32_t kAmdZen3Zen4Family = 0x19;

// -1: not overridden, follow default_weight_prefetch().
std::atomic<int> g_forced{-1};

WeightPrefetch cpu_default() {
    const cpu::X86Model& m = cpu::x86_model();
    return m.amd && m.family == kAmdZen3Zen4Family ? WeightPrefetch::L2 : WeightPrefetch::L1;
}

}  // namespace

WeightPrefetch default_weight_prefetch() {
    static const WeightPrefetch level = [] {
        const WeightPrefetch cpu = cpu_default();
        const char* text = std::getenv("TOKENSCOPE_PREFETCH");
        if (!text || !*text) return cpu;
        const std::string name(text);
        if (name == "l1") return WeightPrefetch::L1;
        if (name == "l2") return WeightPrefetch::L2;
        if (name == "none") return WeightPrefetch::None;
        spdlog::warn("TOKENSCOPE_PREFETCH='{}' is not l1, l2 or none; using {}", name,
                     weight_prefetch_name(cpu));
        return cpu;
    }();
    return level;
}

WeightPrefetch weight_prefetch() {
    const int forced = g_forced.load(std::memory_order_relaxed);
    return forced < 0 ? default_weight_prefetch() : static_cast<WeightPrefetch>(forced);
}

void set_weight_prefetch(WeightPrefetch level) {
    const int v = static_cast<int>(level);
    if (v < 0 || v > static_cast<int>(WeightPrefetch::L2))
        throw InvalidArgument("unknown weight prefetch level " + std::to_string(v));
    g_forced.store(v, std::memory_order_relaxed);
}

void reset_weight_prefetch() {
    g_forced.store(-1, std::memory_order_relaxed);
}

const char* weight_prefetch_name(WeightPrefetch level) {
    switch (level) {
        case WeightPrefetch::None:
            return "none";
        case WeightPrefetch::L1:
            return "l1";
        case WeightPrefetch::L2:
            return "l2";
    }
    return "unknown";
}

}  // namespace tokenscope::tensor
