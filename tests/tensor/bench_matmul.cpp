// Throughput of the matmul kernels at every SIMD level, single- and multi-threaded:
//   bench_matmul [threads...]   (default: 1 and 2)
// Decode view: 1 token over a 4096 x 11008 matrix, weights cycled through a working set larger
// than the last-level cache, in GB/s of weights against the measured read bandwidth.
// Prefill view: 128 tokens over a 1024 x 2816 matrix, in GFLOP/s.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tensor/matmul_bench.h"

using namespace tokenscope::tensor;

int main(int argc, char** argv) {
    std::vector<int> threads;
    for (int i = 1; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
    if (threads.empty()) threads = {1, 2};
    constexpr std::size_t kWorkingSet = std::size_t{1} << 30;  // > the 260 MiB L3 seen here

    for (int t : threads) {
        std::printf("read bandwidth, %d thread(s): %.1f GB/s\n", t,
                    measure_read_bandwidth(kWorkingSet, t, 1.0));
    }
    const Type types[] = {Type::F32,  Type::F16,  Type::BF16, Type::Q8_0, Type::Q4_0, Type::Q5_0,
                          Type::Q4_1, Type::Q4_K, Type::Q6_K, Type::Q5_K, Type::Q3_K, Type::Q2_K};
    const SimdLevel best = detected_simd_level();
    for (int l = static_cast<int>(best); l >= 0; --l) {
        const auto level = static_cast<SimdLevel>(l);
        set_simd_level(level);
        for (Type type : types) {
            for (int t : threads) {
                MatmulBenchConfig decode;
                decode.type = type;
                decode.rows = 4096;
                decode.n = 11008;
                decode.tokens = 1;
                decode.threads = t;
                decode.min_seconds = level == SimdLevel::Scalar ? 0.2 : 0.5;
                decode.min_working_set_bytes = kWorkingSet;
                const MatmulBenchResult d = benchmark_matmul(decode);
                MatmulBenchConfig prefill;
                prefill.type = type;
                prefill.rows = 1024;
                prefill.n = 2816;
                prefill.tokens = level == SimdLevel::Scalar ? 8 : 128;
                prefill.threads = t;
                prefill.min_seconds = level == SimdLevel::Scalar ? 0.2 : 0.5;
                const MatmulBenchResult p = benchmark_matmul(prefill);
                // "cpu": the share of the threads' wall time they actually ran; below 100%
                // other processes took the cores and the rates understate the kernels.
                std::printf(
                    "%-7s %-5s threads=%d  decode 4096x11008: %7.3f ms %6.1f GB/s (cpu %3.0f%%) | "
                    "prefill 1024x2816x%lld: %7.2f ms %7.1f GFLOP/s (cpu %3.0f%%)\n",
                    simd_level_name(level), type_name(type), t, d.seconds_per_call * 1e3,
                    d.weight_gb_per_s, 100.0 * d.cpu_seconds_per_call / (d.seconds_per_call * t),
                    static_cast<long long>(prefill.tokens), p.seconds_per_call * 1e3, p.gflop_per_s,
                    100.0 * p.cpu_seconds_per_call / (p.seconds_per_call * t));
                std::fflush(stdout);
            }
        }
    }
    return 0;
}
