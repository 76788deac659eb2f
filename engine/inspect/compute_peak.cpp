#include "inspect/compute_peak.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "util/cpu_features.h"

#if defined(TOKENSCOPE_X86_64)
#include <immintrin.h>
#endif

namespace tokenscope::inspect {

namespace {

// Each kernel runs `iterations` rounds of 8 independent FMA chains (enough to cover the FMA
// latency on current cores) and returns a value that depends on every chain, so nothing is
// optimised away. Returns the flops done. On MSVC TOKENSCOPE_TARGET is empty and this file must
// not get /arch:AVX2 or /arch:AVX512 (see util/cpu_features.h).
#if defined(TOKENSCOPE_X86_64)
TOKENSCOPE_TARGET("avx512f") double fma_avx512(long iterations, float* sink) {
    __m512 acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iterations; ++it) {
        for (int i = 0; i < 8; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    }
    __m512 s = acc[0];
    for (int i = 1; i < 8; ++i) s = _mm512_add_ps(s, acc[i]);
    // Two lanes through memory, like the AVX2 kernel: _mm512_reduce_add_ps trips GCC 12's
    // -Wuninitialized inside its header (bug 105593), and no MSVC was at hand to check it there.
    float lanes[16];
    _mm512_storeu_ps(lanes, s);
    *sink = lanes[0] + lanes[15];
    return static_cast<double>(iterations) * 8 * 16 * 2;
}

TOKENSCOPE_TARGET("avx2,fma") double fma_avx2(long iterations, float* sink) {
    __m256 acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iterations; ++it) {
        for (int i = 0; i < 8; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    }
    __m256 s = acc[0];
    for (int i = 1; i < 8; ++i) s = _mm256_add_ps(s, acc[i]);
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    *sink = lanes[0] + lanes[7];
    return static_cast<double>(iterations) * 8 * 8 * 2;
}
#endif

double fma_scalar(long iterations, float* sink) {
    float acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = static_cast<float>(i);
    for (long it = 0; it < iterations; ++it) {
        for (int i = 0; i < 8; ++i) acc[i] = acc[i] * 0.999999f + 1e-7f;
    }
    *sink = acc[0] + acc[7];
    return static_cast<double>(iterations) * 8 * 2;
}

}  // namespace

ComputePeak measure_f32_peak(int threads, double seconds) {
    using Kernel = double (*)(long, float*);
    Kernel kernel = fma_scalar;
    ComputePeak peak;
#if defined(TOKENSCOPE_X86_64)
    const cpu::X86Features& cpu_features = cpu::x86_features();
    if (cpu_features.avx512f) {
        kernel = fma_avx512;
        peak.isa = "avx512";
    } else if (cpu_features.avx2 && cpu_features.fma) {
        kernel = fma_avx2;
        peak.isa = "avx2";
    }
#endif
    if (threads < 1) threads = 1;
    std::vector<double> flops(static_cast<std::size_t>(threads), 0.0);
    std::vector<float> sinks(static_cast<std::size_t>(threads) * 16);
    std::atomic<bool> go{false};
    const auto work = [&](int t) {
        while (!go.load()) std::this_thread::yield();
        const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (std::chrono::steady_clock::now() < end) {
            flops[static_cast<std::size_t>(t)] += kernel(200000, &sinks[static_cast<std::size_t>(t) * 16]);
        }
    };
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
    const auto start = std::chrono::steady_clock::now();
    go = true;
    for (auto& th : pool) th.join();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double total = 0.0;
    for (double f : flops) total += f;
    peak.gflops = total / elapsed / 1e9;
    return peak;
}

}  // namespace tokenscope::inspect
