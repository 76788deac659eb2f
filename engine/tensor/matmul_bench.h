#pragma once
// Throughput measurements of the matmul kernels, for `tokenscope-cli bench` and the
// bench_matmul tool: GB/s of weights streamed (the decode view: one token reads every weight
// once) and GFLOP/s (the prefill view: many tokens per weight), with the machine's own read
// bandwidth as the ceiling to compare against.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/matmul.h"
#include "tensor/type.h"

namespace tokenscope::tensor {

struct MatmulBenchConfig {
    Type type = Type::Q8_0;
    std::int64_t rows = 4096;  // weight rows (outputs)
    std::int64_t n = 4096;     // row length
    std::int64_t tokens = 1;   // activation rows
    int threads = 1;           // rows split evenly, one std::thread each (the caller's share too)
    double min_seconds = 0.5;  // keep calling until this much time has passed (at least 3 calls)
    // Cycle through copies of the weight matrix so that together they exceed this many bytes:
    // each call then reads from memory, not from a (possibly huge) last-level cache. 0: one copy.
    std::size_t min_working_set_bytes = 0;
};

struct MatmulBenchResult {
    SimdLevel level;
    std::int64_t calls;
    double seconds_per_call;  // median
    // Median CPU time of the process per call (all threads): on a busy machine,
    // seconds_per_call * threads / cpu_seconds_per_call shows how much of the CPUs it got.
    double cpu_seconds_per_call;
    double weight_bytes;     // per call
    double weight_gb_per_s;  // weight_bytes / seconds_per_call / 1e9
    double gflop_per_s;      // 2 * rows * n * tokens / seconds_per_call / 1e9
};

// Random weights with valid scales and random activations; runs at active_simd_level().
MatmulBenchResult benchmark_matmul(const MatmulBenchConfig& config);

// Read bandwidth (GB/s) of `threads` threads summing a buffer of `bytes` (should be far larger
// than the last-level cache), best of repeated passes for min_seconds. Each thread reads
// kReadStreamsPerThread streams laid out by read_stream_layout.
double measure_read_bandwidth(std::size_t bytes, int threads, double min_seconds);

// The same probe with its buffer and threads kept between measurements, for measuring next to
// each of several runs (filling 1 GiB takes longer than a measurement).
class ReadBandwidthProbe {
  public:
    ReadBandwidthProbe(std::size_t bytes, int threads);
    ~ReadBandwidthProbe();
    ReadBandwidthProbe(const ReadBandwidthProbe&) = delete;
    ReadBandwidthProbe& operator=(const ReadBandwidthProbe&) = delete;
    double measure(double min_seconds);  // GB/s, the best pass

  private:
    struct State;
    std::unique_ptr<State> state_;
};

inline constexpr int kReadStreamsPerThread = 4;

// Where `streams` read streams of `length` bytes each start in a buffer: `length` a multiple
// of 64 KiB, stream i at i x length + 64 i bytes, so that no two start a multiple of 64 KiB
// apart (up to 1024 streams), and the buffer needs starts.back() + length bytes (at most
// `bytes`). Why: streams a power of two apart read the same DRAM banks in step. 1 GiB in 2 x 4
// streams put them 128 MiB apart, and the probe read 26-30 GB/s where 1027 MiB (starts 128.4
// MiB apart) read 32-37, in the same minutes (Zen 4 VM, docs/benchmarks.md, thirty-seventh
// pass); decode, whose rows are not so placed, then read up to 115 % of that "ceiling".
struct ReadStreamLayout {
    std::size_t length = 0;
    std::vector<std::size_t> starts;
};
ReadStreamLayout read_stream_layout(std::size_t bytes, int streams);

}  // namespace tokenscope::tensor
