#include "inspect/compute_peak.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "tensor/matmul.h"
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

// The int8 kernels: twelve independent chains of the instruction the int8 matrix kernels at each
// level are built on, each result feeding the next as an operand so that nothing is hoisted.
// Returns the integer operations done (a multiply-add of two bytes counts as 2, like an FMA).
// Twelve chains, not eight: vpdpbusd's and vpmaddubsw's latency is 4-5 cycles at up to two a
// cycle.
TOKENSCOPE_TARGET("avx512f,avx512bw,avx512vnni")
double dpbusd_avx512(long iterations, float* sink) {
    __m512i acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
    for (long it = 0; it < iterations; ++it) {
        for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    }
    __m512i s = acc[0];
    for (int i = 1; i < 12; ++i) s = _mm512_add_epi32(s, acc[i]);
    int lanes[16];
    _mm512_storeu_si512(lanes, s);
    *sink = static_cast<float>(lanes[0] + lanes[15]);
    return static_cast<double>(iterations) * 12 * 64 * 2;  // 64 byte products per instruction
}

TOKENSCOPE_TARGET("avx2,avxvnni") double dpbusd_avxvnni(long iterations, float* sink) {
    __m256i acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_epi32(i);
    const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5);
    for (long it = 0; it < iterations; ++it) {
        for (int i = 0; i < 12; ++i) acc[i] = _mm256_dpbusd_avx_epi32(acc[i], a, b);
    }
    __m256i s = acc[0];
    for (int i = 1; i < 12; ++i) s = _mm256_add_epi32(s, acc[i]);
    int lanes[8];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), s);
    *sink = static_cast<float>(lanes[0] + lanes[7]);
    return static_cast<double>(iterations) * 12 * 32 * 2;
}

// AVX2 has no byte dot product into 32 bits: vpmaddubsw multiplies 32 byte pairs and adds
// neighbours into 16 int16. Its output is the next step's unsigned operand.
TOKENSCOPE_TARGET("avx2") double maddubs_avx2(long iterations, float* sink) {
    __m256i acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_epi16(static_cast<short>(i));
    const __m256i b = _mm256_set1_epi8(-5);
    for (long it = 0; it < iterations; ++it) {
        for (int i = 0; i < 12; ++i) acc[i] = _mm256_maddubs_epi16(acc[i], b);
    }
    __m256i s = acc[0];
    for (int i = 1; i < 12; ++i) s = _mm256_add_epi16(s, acc[i]);
    short lanes[16];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), s);
    *sink = static_cast<float>(lanes[0] + lanes[15]);
    return static_cast<double>(iterations) * 12 * 32 * 2;
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

// Scalar code multiplies and adds 32-bit integers one at a time.
double mac_scalar(long iterations, float* sink) {
    std::int32_t acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = i;
    for (long it = 0; it < iterations; ++it) {
        for (int i = 0; i < 8; ++i) acc[i] = acc[i] * 3 + 1;  // wraps; unsigned would too
    }
    *sink = static_cast<float>(acc[0] ^ acc[7]);
    return static_cast<double>(iterations) * 8 * 2;
}

using Kernel = double (*)(long, float*);

// Runs `kernel` on `threads` threads at once for `seconds`; operations per second, in G.
double run_on_threads(Kernel kernel, int threads, double seconds) {
    if (threads < 1) threads = 1;
    std::vector<double> ops(static_cast<std::size_t>(threads), 0.0);
    std::vector<float> sinks(static_cast<std::size_t>(threads) * 16);
    std::atomic<bool> go{false};
    const auto work = [&](int t) {
        while (!go.load()) std::this_thread::yield();
        const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (std::chrono::steady_clock::now() < end) {
            ops[static_cast<std::size_t>(t)] +=
                kernel(200000, &sinks[static_cast<std::size_t>(t) * 16]);
        }
    };
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
    const auto start = std::chrono::steady_clock::now();
    go = true;
    for (auto& th : pool) th.join();
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double total = 0.0;
    for (double x : ops) total += x;
    return total / elapsed / 1e9;
}

}  // namespace

ComputePeak measure_f32_peak(int threads, double seconds) {
    Kernel kernel = fma_scalar;
    ComputePeak peak;
#if defined(TOKENSCOPE_X86_64)
    // The level the matrix kernels run at (forced by TOKENSCOPE_SIMD or set_simd_level), not
    // the widest the CPU has: on a CPU with two 512-bit FMA units the AVX2 kernels' ceiling is
    // half the AVX-512 one.
    switch (tensor::active_simd_level()) {
        case tensor::SimdLevel::Avx512:
            kernel = fma_avx512;
            peak.isa = "avx512";
            break;
        case tensor::SimdLevel::Avx2:
            kernel = fma_avx2;
            peak.isa = "avx2";
            break;
        case tensor::SimdLevel::Scalar:
            break;
    }
#endif
    peak.gflops = run_on_threads(kernel, threads, seconds);
    return peak;
}

ComputePeak measure_int8_peak(int threads, double seconds) {
    Kernel kernel = mac_scalar;
    ComputePeak peak;
#if defined(TOKENSCOPE_X86_64)
    switch (tensor::active_simd_level()) {
        case tensor::SimdLevel::Avx512:  // the level requires VNNI (tensor/matmul.h)
            kernel = dpbusd_avx512;
            peak.isa = "avx512-vnni vpdpbusd";
            break;
        case tensor::SimdLevel::Avx2:
            if (tensor::avx_vnni_in_use()) {
                kernel = dpbusd_avxvnni;
                peak.isa = "avx-vnni vpdpbusd";
            } else {
                kernel = maddubs_avx2;
                peak.isa = "avx2 vpmaddubsw";
            }
            break;
        case tensor::SimdLevel::Scalar:
            break;
    }
#endif
    peak.gflops = run_on_threads(kernel, threads, seconds);
    return peak;
}

}  // namespace tokenscope::inspect
