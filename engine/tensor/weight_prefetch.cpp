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
// - Zen 3 (family 0x19, model 0x01, AVX2 only; 2026-12-05, docs/benchmarks.md, twentieth pass),
//   whole-model F16 decode, 246M model, 2 threads, none / L2 back to back, tok/s: 63.1/51.1,
//   63.2/50.7, 65.8/56.1, 63.3/57.2, 60.2/55.4, 49.3/49.6, 58.3/55.3, 53.6/55.4, 60.9/57.9,
//   57.1/51.4, 55.4/55.3, 49.2/54.7, 60.8/53.7, 62.2/54.3, 58.1/56.0, 65.2/58.8: none ahead in
//   13 of 16, median +8 %. Q8_0, Q4_K, Gemma and SmolLM2 showed no order between the levels
//   there. So F16/BF16 rows take no software prefetch on Zen 3; Zen 4 (which has AVX-512, and
//   read F16 at 20-22 GB/s without prefetch against 20-25 with L2) keeps L2.
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

// -1: not overridden, follow the defaults (default_for).
std::atomic<int> g_forced{-1};

WeightPrefetch cpu_default() {
    const cpu::X86Model& m = cpu::x86_model();
    return m.amd && m.family == kAmdZen3Zen4Family ? WeightPrefetch::L2 : WeightPrefetch::L1;
}

// Zen 4 is family 0x19 too; AVX-512 tells them apart.
bool zen3() {
    const cpu::X86Model& m = cpu::x86_model();
    return m.amd && m.family == kAmdZen3Zen4Family && !cpu::x86_features().avx512f;
}

// TOKENSCOPE_PREFETCH's level, or -1 where it is unset or not a level (warned once).
int environment_level() {
    static const int level = [] {
        const char* text = std::getenv("TOKENSCOPE_PREFETCH");
        if (!text || !*text) return -1;
        const std::string name(text);
        if (name == "l1") return static_cast<int>(WeightPrefetch::L1);
        if (name == "l2") return static_cast<int>(WeightPrefetch::L2);
        if (name == "none") return static_cast<int>(WeightPrefetch::None);
        spdlog::warn("TOKENSCOPE_PREFETCH='{}' is not l1, l2 or none; using this CPU's levels",
                     name);
        return -1;
    }();
    return level;
}

// One rule for both kinds of rows: set_weight_prefetch(), else the environment, else the CPU's
// choice for the kind (worked out once; matmul_rows asks once per call).
WeightPrefetch default_for(bool half_rows) {
    static const WeightPrefetch quantized = cpu_default();
    static const WeightPrefetch half = zen3() ? WeightPrefetch::None : quantized;
    const int env = environment_level();
    return env >= 0 ? static_cast<WeightPrefetch>(env) : half_rows ? half : quantized;
}

WeightPrefetch in_use(bool half_rows) {
    const int forced = g_forced.load(std::memory_order_relaxed);
    return forced >= 0 ? static_cast<WeightPrefetch>(forced) : default_for(half_rows);
}

}  // namespace

WeightPrefetch default_weight_prefetch() {
    return default_for(false);
}

WeightPrefetch weight_prefetch() {
    return in_use(false);
}

WeightPrefetch default_half_row_prefetch() {
    return default_for(true);
}

WeightPrefetch half_row_prefetch() {
    return in_use(true);
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
