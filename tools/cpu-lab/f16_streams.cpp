// Whether a decode-like F16 GEMV draws more memory bandwidth when each thread reads its rows
// two or four at a time from far-apart positions (S concurrent streams per thread) instead of
// one row after another: 2 threads, a 448 MiB F16 matrix of 1024-wide rows, each thread's half
// split into S equal parts whose rows are multiplied side by side, software prefetch 4 KiB
// ahead into L2. Passes of S = 1, 2, 4 alternate; the ratios are taken per triple, since the
// host's bandwidth moves within seconds. Not part of the build or the tests: docs/benchmarks.md
// (thirty-eighth pass) has the result (no gain that survived the noise).
//
//   g++ -O2 -mavx512f -mavx512vl -mf16c -mfma tools/cpu-lab/f16_streams.cpp -o build/f16_streams
//   -lpthread && build/f16_streams 40
#include <immintrin.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <sys/mman.h>
constexpr int N = 1024;
static const uint16_t* W; static float* X; static float* Y; static long ROWS;
template <int S>
static void rows(long r0, long r1) {
    long span = (r1 - r0) / S;
    for (long i = 0; i < span; ++i) {
        __m512 acc[S][2];
        const uint16_t* p[S];
        for (int s = 0; s < S; ++s) { p[s] = W + (size_t)(r0 + s * span + i) * N; acc[s][0] = acc[s][1] = _mm512_setzero_ps(); }
        for (int k = 0; k < N; k += 32) {
            for (int s = 0; s < S; ++s) {
                if ((k & 31) == 0) _mm_prefetch((const char*)(p[s] + k) + 4096, _MM_HINT_T1);
                acc[s][0] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(p[s] + k))), _mm512_load_ps(X + k), acc[s][0]);
                acc[s][1] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(p[s] + k + 16))), _mm512_load_ps(X + k + 16), acc[s][1]);
            }
        }
        for (int s = 0; s < S; ++s) Y[r0 + s * span + i] = _mm512_reduce_add_ps(_mm512_add_ps(acc[s][0], acc[s][1]));
    }
}
int mode = 1;
static void work(int t) {
    long half = ROWS / 2, r0 = t * half, r1 = r0 + half;
    if (mode == 1) rows<1>(r0, r1); else if (mode == 2) rows<2>(r0, r1); else rows<4>(r0, r1);
}
int main(int argc, char** argv) {
    ROWS = (448L << 20) / (N * 2); ROWS = ROWS / 8 * 8 + 4;  // skew off powers of two a bit
    size_t bytes = (size_t)ROWS * N * 2;
    W = (uint16_t*)aligned_alloc(1 << 21, bytes + (1 << 21)); madvise((void*)W, bytes, MADV_HUGEPAGE);
    for (size_t i = 0; i < bytes / 2; ++i) ((uint16_t*)W)[i] = 0x3c00 + (i & 255);
    X = (float*)aligned_alloc(64, N * 4); for (int i = 0; i < N; ++i) X[i] = 0.001f * i;
    Y = (float*)aligned_alloc(64, ROWS * 4);
    int pairs = atoi(argv[1]);
    std::vector<double> r[3]; std::vector<std::pair<double,double>> v2, v4;
    for (int i = 0; i < pairs; ++i) {
        double g[3];
        for (int m = 0; m < 3; ++m) {
            mode = m == 0 ? 1 : m == 1 ? 2 : 4;
            auto t0 = std::chrono::steady_clock::now();
            std::thread a(work, 0), b(work, 1); a.join(); b.join();
            g[m] = bytes / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
            r[m].push_back(g[m]);
        }
        v2.push_back({g[0], g[1]}); v4.push_back({g[0], g[2]});
    }
    auto med = [](std::vector<double> x) { std::sort(x.begin(), x.end()); return x[x.size() / 2]; };
    std::vector<double> q2, q4; for (auto [a, b] : v2) q2.push_back(b / a); for (auto [a, b] : v4) q4.push_back(b / a);
    std::printf("S1 median %.1f max %.1f | S2 %.1f max %.1f | S4 %.1f max %.1f | paired S2/S1 %.3f S4/S1 %.3f\n", med(r[0]), *std::max_element(r[0].begin(), r[0].end()), med(r[1]), *std::max_element(r[1].begin(), r[1].end()), med(r[2]), *std::max_element(r[2].begin(), r[2].end()), med(q2), med(q4));
}
