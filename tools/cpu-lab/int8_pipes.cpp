// Which vector instructions share execution pipes with vpdpbusd (the AVX-512 VNNI int8 dot
// product the prefill's int8 GEMMs are built on), and what the per-block scaling of the Q4_1 lane
// tile (engine/tensor/gemm_int8_q32_avx512.cpp) costs beside its products. Not part of the build
// or the tests: a measurement whose results docs/benchmarks.md records ("Thirty-seventh pass").
//
//   g++ -O2 -mavx512f -mavx512bw -mavx512vnni -mavx512bf16 tools/cpu-lab/int8_pipes.cpp \
//       -o build/int8_pipes && build/int8_pipes
//
// Cycles come from a chain of dependent integer adds (one per cycle) timed beside the loops; on a
// shared VM each line is the median of 5 runs of 10 million iterations, and still moves with the
// host. An instruction mix that takes 12 cycles for 12 vpdpbusd and 6 others runs the others on
// free pipes; 18 cycles means they take vpdpbusd's.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

double measure_ghz() {
    long x = 0;
    const long n = 100000000;
    const double t0 = now();
    for (long i = 0; i < n; ++i)
        asm volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
    return 4.0 * n / (now() - t0) / 1e9;
}

#define D12                                                                                   \
    "vpdpbusd %%zmm20,%%zmm21,%%zmm0\n vpdpbusd %%zmm20,%%zmm21,%%zmm1\n"                     \
    "vpdpbusd %%zmm20,%%zmm21,%%zmm2\n vpdpbusd %%zmm20,%%zmm21,%%zmm3\n"                     \
    "vpdpbusd %%zmm20,%%zmm21,%%zmm4\n vpdpbusd %%zmm20,%%zmm21,%%zmm5\n"                     \
    "vpdpbusd %%zmm20,%%zmm21,%%zmm6\n vpdpbusd %%zmm20,%%zmm21,%%zmm7\n"                     \
    "vpdpbusd %%zmm20,%%zmm21,%%zmm8\n vpdpbusd %%zmm20,%%zmm21,%%zmm9\n"                     \
    "vpdpbusd %%zmm20,%%zmm21,%%zmm10\n vpdpbusd %%zmm20,%%zmm21,%%zmm11\n"
// Six independent instances of a three-operand instruction.
#define X6(op)                                                                                \
    op " %%zmm22,%%zmm23,%%zmm12\n " op " %%zmm22,%%zmm23,%%zmm13\n " op                      \
       " %%zmm22,%%zmm23,%%zmm14\n " op " %%zmm22,%%zmm23,%%zmm15\n " op                      \
       " %%zmm22,%%zmm23,%%zmm16\n " op " %%zmm22,%%zmm23,%%zmm17\n"
#define X6_2(op)                                                                              \
    op " %%zmm22,%%zmm12\n " op " %%zmm22,%%zmm13\n " op " %%zmm22,%%zmm14\n " op             \
       " %%zmm22,%%zmm15\n " op " %%zmm22,%%zmm16\n " op " %%zmm22,%%zmm17\n"
#define CLOBBERS                                                                              \
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",   \
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17"

template <class Body>
double cycles(double ghz, Body body) {
    std::vector<double> runs;
    const long m = 10000000;
    for (int r = 0; r < 5; ++r) {
        const double t0 = now();
        for (long i = 0; i < m; ++i) body();
        runs.push_back((now() - t0) * 1e9 * ghz / m);
    }
    std::sort(runs.begin(), runs.end());
    return runs[2];
}

// The Q4_1 lane tile's block loop on data in L1: 2 registers of 16 rows x 6 tokens, 8 word
// steps of 2 loads, 6 broadcasts and 12 vpdpbusd; then, with kScale, per accumulator the
// conversion, the scale's multiply and two FMAs (the block's scale and the min term).
alignas(64) std::uint8_t g_u[18 * 1024];
alignas(64) std::int8_t g_q[6][18 * 32];
alignas(64) float g_d[18 * 32], g_c[18 * 32], g_da[6][18], g_sa[6][18];

template <bool kScale>
__attribute__((noinline)) void q41_tile(float* out) {
    __m512 f[2][6];
    for (auto& row : f)
        for (auto& v : row) v = _mm512_setzero_ps();
    __m512i keep = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int b = 0; b < 18; ++b) {
        __m512i acc[2][6];
        for (auto& row : acc)
            for (auto& v : row) v = _mm512_setzero_si512();
        const std::uint8_t* ub = g_u + b * 1024;
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
            const __m512i w0 = _mm512_load_si512(ub + 128 * g);
            const __m512i w1 = _mm512_load_si512(ub + 128 * g + 64);
#pragma GCC unroll 6
            for (int t = 0; t < 6; ++t) {
                std::int32_t v;
                __builtin_memcpy(&v, g_q[t] + 32 * b + 4 * g, 4);
                const __m512i x = _mm512_set1_epi32(v);
                acc[0][t] = _mm512_dpbusd_epi32(acc[0][t], w0, x);
                acc[1][t] = _mm512_dpbusd_epi32(acc[1][t], w1, x);
            }
        }
        if constexpr (kScale) {
            for (int h = 0; h < 2; ++h) {
                const __m512 dw = _mm512_load_ps(g_d + b * 32 + 16 * h);
                const __m512 c = _mm512_load_ps(g_c + b * 32 + 16 * h);
                for (int t = 0; t < 6; ++t) {
                    const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(g_da[t][b]));
                    f[h][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[h][t]), scale, f[h][t]);
                    f[h][t] = _mm512_fmadd_ps(c, _mm512_set1_ps(g_sa[t][b]), f[h][t]);
                }
            }
        } else {
            for (auto& row : acc)
                for (auto& v : row) keep = _mm512_add_epi32(keep, v);
        }
    }
    for (int h = 0; h < 2; ++h)
        for (int t = 0; t < 6; ++t) _mm512_storeu_ps(out + 16 * (6 * h + t), f[h][t]);
    _mm512_storeu_si512(out + 192, keep);
}

}  // namespace

int main() {
    const double ghz = measure_ghz();
    std::printf("clock from the add chain: %.2f GHz\n", ghz);
    struct Mix {
        const char* name;
        double c;
    };
    const Mix mixes[] = {
        {"12 vpdpbusd", cycles(ghz, [] { asm volatile(D12 ::: CLOBBERS); })},
        {"+ 6 vmulps", cycles(ghz, [] { asm volatile(D12 X6("vmulps") ::: CLOBBERS); })},
        {"+ 6 vfmadd231ps", cycles(ghz, [] { asm volatile(D12 X6("vfmadd231ps") ::: CLOBBERS); })},
        {"+ 6 vpmulld", cycles(ghz, [] { asm volatile(D12 X6("vpmulld") ::: CLOBBERS); })},
        {"+ 6 vpmaddwd", cycles(ghz, [] { asm volatile(D12 X6("vpmaddwd") ::: CLOBBERS); })},
        {"+ 6 vpmullw", cycles(ghz, [] { asm volatile(D12 X6("vpmullw") ::: CLOBBERS); })},
        {"+ 6 vdpbf16ps", cycles(ghz, [] { asm volatile(D12 X6("vdpbf16ps") ::: CLOBBERS); })},
        {"+ 6 vcvtdq2ps", cycles(ghz, [] { asm volatile(D12 X6_2("vcvtdq2ps") ::: CLOBBERS); })},
        {"+ 6 vaddps", cycles(ghz, [] { asm volatile(D12 X6("vaddps") ::: CLOBBERS); })},
        {"+ 6 vpaddd", cycles(ghz, [] { asm volatile(D12 X6("vpaddd") ::: CLOBBERS); })},
        {"+ 6 vscalefps", cycles(ghz, [] { asm volatile(D12 X6("vscalefps") ::: CLOBBERS); })},
        {"+ 6 vpermps", cycles(ghz, [] { asm volatile(D12 X6("vpermps") ::: CLOBBERS); })},
    };
    for (const Mix& m : mixes) std::printf("%-18s %6.2f cycles\n", m.name, m.c);
    alignas(64) float out[256];
    const double products = cycles(ghz, [&] { q41_tile<false>(out); }) / 18;
    const double scaled = cycles(ghz, [&] { q41_tile<true>(out); }) / 18;
    std::printf("Q4_1 lane tile, cycles per block of 96 vpdpbusd: products only %.1f, with the "
                "scaling %.1f\n",
                products, scaled);
    return out[0] == 12345.0f;
}
