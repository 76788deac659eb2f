// Whether more read streams per thread draw more memory bandwidth than one: 2 threads alternate
// passes over 426 MB with 1 stream each and with 4 streams each (starts skewed off power-of-two
// distances, like tensor::read_stream_layout), AVX-512 loads with the decode kernels' prefetch
// (prefetcht1 8 KiB ahead). On a shared host the bandwidth moves by 2x within seconds, so the
// ratio is taken per adjacent pair, split by fast (either pass over 45 GB/s) and slow moments.
// Not part of the build or the tests; docs/benchmarks.md (thirty-seventh pass) has the result.
//
//   g++ -O2 -mavx512f tools/cpu-lab/read_streams.cpp -o build/read_streams -lpthread
//   build/read_streams 3000
#include <immintrin.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <sys/mman.h>
static double run(const char* buf, size_t len, int S) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> th; std::vector<float> sink(32);
    for (int t = 0; t < 2; ++t) th.emplace_back([&, t] {
        __m512 acc = _mm512_setzero_ps();
        const char* p[8];
        for (int s = 0; s < S; ++s) p[s] = buf + (size_t)(t * S + s) * (len + 64);
        for (size_t o = 0; o < len; o += 256) {
            for (int s = 0; s < S; ++s) {
                const char* q = p[s] + o;
                _mm_prefetch(q + 8192, _MM_HINT_T1); _mm_prefetch(q + 8192 + 64, _MM_HINT_T1); _mm_prefetch(q + 8192 + 128, _MM_HINT_T1); _mm_prefetch(q + 8192 + 192, _MM_HINT_T1);
                acc = _mm512_add_ps(acc, _mm512_loadu_ps((const float*)q));
                acc = _mm512_add_ps(acc, _mm512_loadu_ps((const float*)(q + 64)));
                acc = _mm512_add_ps(acc, _mm512_loadu_ps((const float*)(q + 128)));
                acc = _mm512_add_ps(acc, _mm512_loadu_ps((const float*)(q + 192)));
            }
        }
        _mm512_storeu_ps(&sink[t * 16], acc);
    });
    for (auto& x : th) x.join();
    return 2.0 * S * len / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
}
int main(int argc, char** argv) {
    size_t total = 426u << 20;
    char* buf = (char*)aligned_alloc(1 << 21, total + (1 << 22));
    madvise(buf, total + (1 << 22), MADV_HUGEPAGE); memset(buf, 1, total + (1 << 22));
    const int pairs = atoi(argv[1]);
    std::vector<std::pair<double, double>> v;
    for (int i = 0; i < pairs; ++i) {
        double a = run(buf, (total / 2) / 65536 * 65536, 1);
        double b = run(buf, (total / 8) / 65536 * 65536, 4);
        v.push_back({a, b});
    }
    std::vector<double> fast, slow;
    for (auto [a, b] : v) (std::max(a, b) > 45 ? fast : slow).push_back(b / a);
    auto med = [](std::vector<double> x) { if (x.empty()) return 0.0; std::sort(x.begin(), x.end()); return x[x.size() / 2]; };
    double s1 = 0, s4 = 0; for (auto [a, b] : v) { s1 = std::max(s1, a); s4 = std::max(s4, b); }
    std::printf("pairs %d: fast %zu (median S4/S1 %.2f), slow %zu (median %.2f); best S1 %.1f, best S4 %.1f\n", pairs, fast.size(), med(fast), slow.size(), med(slow), s1, s4);
}
