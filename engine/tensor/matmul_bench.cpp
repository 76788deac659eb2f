// Benchmarks of the matmul kernels; see matmul_bench.h.
#include "tensor/matmul_bench.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <ctime>
#include <exception>
#include <functional>
#include <mutex>
#include <random>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#include <xmmintrin.h>  // _mm_prefetch
#endif

#include "tensor/block_layouts.h"
#include "util/error.h"
#include "util/large_pages.h"

namespace tokenscope::tensor {

namespace {

void prefetch_line(const std::uint64_t* p, WeightPrefetch level) {
#if defined(__GNUC__) || defined(__clang__)
    if (level == WeightPrefetch::L1)
        __builtin_prefetch(p, 0, 3);
    else if (level == WeightPrefetch::L2)
        __builtin_prefetch(p, 0, 2);
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
    if (level == WeightPrefetch::L1)
        _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
    else if (level == WeightPrefetch::L2)
        _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
#else
    (void)p, (void)level;
#endif
}

using Clock = std::chrono::steady_clock;

void put_u16(std::uint8_t* p, std::uint16_t v) {
    p[0] = static_cast<std::uint8_t>(v & 0xFF);
    p[1] = static_cast<std::uint8_t>(v >> 8);
}

// Random codes; every f16 scale and float element is a normal number of moderate size, so
// no subnormal slows the float units down and no inf/NaN appears.
void fill_weights(Type type, std::span<std::uint8_t> bytes, std::uint32_t seed) {
    std::mt19937 rng(seed);
    for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4) {
        const std::uint32_t r = rng();
        std::memcpy(bytes.data() + i, &r, 4);
    }
    const auto fix_halves = [&](std::size_t block_bytes,
                                std::initializer_list<std::size_t> offsets) {
        for (std::size_t b = 0; b + block_bytes <= bytes.size(); b += block_bytes) {
            for (std::size_t off : offsets) put_u16(bytes.data() + b + off, 0x2400);  // 2^-6
        }
    };
    switch (type) {
        case Type::F32:
            for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4) {
                const float v =
                    static_cast<float>(static_cast<std::int32_t>(rng() % 2001) - 1000) * 1e-3f;
                std::memcpy(bytes.data() + i, &v, 4);
            }
            break;
        case Type::F16:
        case Type::BF16:
            for (std::size_t i = 0; i + 2 <= bytes.size(); i += 2) {
                std::uint16_t h;
                std::memcpy(&h, bytes.data() + i, 2);
                // sign and mantissa random, exponent fixed near 1
                h = type == Type::F16 ? static_cast<std::uint16_t>((h & 0x83FF) | 0x3800)
                                      : static_cast<std::uint16_t>((h & 0x807F) | 0x3F00);
                std::memcpy(bytes.data() + i, &h, 2);
            }
            break;
        case Type::Q4_0:
        case Type::Q5_0:
            fix_halves(traits(type).bytes_per_block, {0});
            break;
        case Type::Q8_0:
            fix_halves(sizeof(BlockQ8_0), {0});
            break;
        case Type::Q4_1:
        case Type::Q5_1:
            fix_halves(traits(type).bytes_per_block, {0, 2});
            break;
        case Type::Q2_K:
            fix_halves(sizeof(BlockQ2_K), {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)});
            break;
        case Type::Q3_K:
            fix_halves(sizeof(BlockQ3_K), {offsetof(BlockQ3_K, d)});
            break;
        case Type::Q4_K:
        case Type::Q5_K:
            fix_halves(traits(type).bytes_per_block, {0, 2});
            break;
        case Type::Q6_K:
            fix_halves(sizeof(BlockQ6_K), {offsetof(BlockQ6_K, d)});
            break;
    }
}

// The benchmarks' threads, started once and woken for every call: work(t) on thread t (the
// caller is 0) at each run(). benchmark_matmul started new threads for every call before, and
// with them every thread's thread_local packing buffers, so its two-thread times of 1-3 ms calls
// jumped with the token count (Q4_K 2816 x 1024, GFLOP/s: 64 tokens 472-481, 128 tokens
// 267-303, 256 tokens 507-515) and 128 tokens on two threads ran no faster than on one.
class ThreadTeam {
  public:
    ThreadTeam(int threads, std::function<void(int)> work)
        : sync_(threads), work_(std::move(work)) {
        try {
            for (int i = 1; i < threads; ++i) {
                workers_.emplace_back([this, i] {
                    for (;;) {
                        sync_.arrive_and_wait();
                        if (stop_.load()) return;
                        call(i);
                        sync_.arrive_and_wait();
                    }
                });
            }
        } catch (...) {
            // A thread that could not start: the barrier stops counting it, and the ones
            // that did start are released and joined before the error goes on.
            for (auto i = workers_.size() + 1; i < static_cast<std::size_t>(threads); ++i)
                (void)sync_.arrive_and_drop();
            stop_.store(true);
            sync_.arrive_and_wait();
            for (std::thread& t : workers_) t.join();
            throw;
        }
    }
    ThreadTeam(const ThreadTeam&) = delete;
    ThreadTeam& operator=(const ThreadTeam&) = delete;
    ~ThreadTeam() {
        stop_.store(true);
        sync_.arrive_and_wait();  // the workers wait at the start of a run
        for (std::thread& t : workers_) t.join();
    }

    // work(t) on every thread once; rethrows the first exception any of them threw.
    void run() {
        sync_.arrive_and_wait();
        call(0);
        sync_.arrive_and_wait();
        if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    }

  private:
    void call(int t) {
        try {
            work_(t);
        } catch (...) {
            std::lock_guard lock(error_mutex_);
            if (!error_) error_ = std::current_exception();
        }
    }

    std::barrier<> sync_;
    std::function<void(int)> work_;
    std::atomic<bool> stop_{false};
    std::mutex error_mutex_;
    std::exception_ptr error_;
    std::vector<std::thread> workers_;  // last: they use everything above
};

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

MatmulBenchResult benchmark_matmul(const MatmulBenchConfig& c) {
    if (c.rows <= 0 || c.tokens <= 0 || c.threads <= 0) {
        throw InvalidArgument("benchmark_matmul: rows, tokens and threads must be positive");
    }
    const std::size_t rb = row_bytes(c.type, c.n);
    const std::size_t matrix_bytes = rb * static_cast<std::size_t>(c.rows);
    const std::size_t copies = std::max<std::size_t>(
        1, (c.min_working_set_bytes + matrix_bytes - 1) / std::max<std::size_t>(matrix_bytes, 1));
    // In large pages, as the engine holds a model's weights (gguf::FileBytes::LargePages).
    std::vector<LargePageBuffer> weights;
    for (std::size_t i = 0; i < copies; ++i) {
        weights.emplace_back(matrix_bytes);
        fill_weights(c.type, {reinterpret_cast<std::uint8_t*>(weights.back().data()), matrix_bytes},
                     static_cast<std::uint32_t>(i + 1));
    }
    std::vector<float> x(static_cast<std::size_t>(c.tokens * c.n));
    std::mt19937 rng(7);
    for (auto& v : x)
        v = static_cast<float>(static_cast<std::int32_t>(rng() % 2001) - 1000) * 1e-3f;
    PreparedActivations acts;
    std::vector<float> out(static_cast<std::size_t>(c.tokens * c.rows));

    std::size_t copy = 0;  // the weights of the current call
    ThreadTeam team(c.threads, [&](int t) {
        const std::int64_t begin = c.rows * t / c.threads;
        const std::int64_t end = c.rows * (t + 1) / c.threads;
        matmul_rows(c.type, reinterpret_cast<const std::uint8_t*>(weights[copy].data()), c.n, begin,
                    end, acts, out.data(), c.rows);
    });
    const auto one_call = [&](std::size_t which) {
        prepare_activations(c.type, x.data(), c.tokens, c.n, acts);
        copy = which;
        team.run();
    };
    one_call(0);  // warm-up: page faults, buffers
    std::vector<double> times;
    std::vector<double> cpu_times;
    const auto start = Clock::now();
    for (std::size_t i = 0; times.size() < 3 || seconds_since(start) < c.min_seconds; ++i) {
        const auto t0 = Clock::now();
        const std::clock_t c0 = std::clock();
        one_call(i % copies);
        cpu_times.push_back(static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
        times.push_back(seconds_since(t0));
    }
    std::sort(times.begin(), times.end());
    std::sort(cpu_times.begin(), cpu_times.end());
    const double median = times[times.size() / 2];
    MatmulBenchResult r{};
    r.level = active_simd_level();
    r.calls = static_cast<std::int64_t>(times.size());
    r.seconds_per_call = median;
    r.cpu_seconds_per_call = cpu_times[cpu_times.size() / 2];
    r.weight_bytes = static_cast<double>(matrix_bytes);
    r.weight_gb_per_s = r.weight_bytes / median / 1e9;
    r.gflop_per_s = 2.0 * static_cast<double>(c.rows) * static_cast<double>(c.n) *
                    static_cast<double>(c.tokens) / median / 1e9;
    return r;
}

ReadStreamLayout read_stream_layout(std::size_t bytes, int streams) {
    if (streams <= 0 || streams > 1024)
        throw InvalidArgument("read_stream_layout: streams must be 1 to 1024, got " +
                              std::to_string(streams));
    constexpr std::size_t kGranule = std::size_t{64} << 10;  // 64 KiB
    constexpr std::size_t kLine = 64;
    const auto count = static_cast<std::size_t>(streams);
    const std::size_t skew_bytes = kLine * (count - 1);
    if (bytes < count * kGranule + skew_bytes)
        throw InvalidArgument("read_stream_layout: " + std::to_string(bytes) +
                              " bytes are too few for " + std::to_string(streams) +
                              " streams of 64 KiB");
    ReadStreamLayout layout;
    layout.length = (bytes - skew_bytes) / count / kGranule * kGranule;
    for (std::size_t i = 0; i < count; ++i) layout.starts.push_back(i * (layout.length + kLine));
    return layout;
}

struct ReadBandwidthProbe::State {
    static constexpr int kStreams = kReadStreamsPerThread;
    ReadStreamLayout layout;
    std::size_t words = 0;  // per stream
    LargePageBuffer memory;
    std::vector<std::uint64_t> sinks;
    // Passes alternate between plain loads and loads with the software prefetch the decode
    // kernels use (weight_prefetch(), 8 KiB ahead): on some CPUs (Zen 4) that prefetch reads
    // faster than the hardware prefetchers alone, and a ceiling the kernels can beat is none.
    WeightPrefetch level = weight_prefetch();
    bool prefetch = false;
    ThreadTeam team;

    State(std::size_t bytes, int threads)
        : layout(read_stream_layout(bytes, threads * kStreams)),
          words(layout.length / 8),
          // In large pages, as the engine keeps its weights (gguf::FileBytes::LargePages): the
          // ceiling is the best this machine reads, and 4 KiB pages read 15-20 % slower here.
          memory(layout.starts.back() + layout.length),
          sinks(static_cast<std::size_t>(threads)),
          team(threads, [this](int t) { read(t); }) {
        for (const std::size_t start : layout.starts) {
            std::uint64_t* stream = base() + start / 8;
            for (std::size_t i = 0; i < words; ++i) stream[i] = i;
        }
    }

    std::uint64_t* base() const { return reinterpret_cast<std::uint64_t*>(memory.data()); }

    // Four streams at once, like a kernel walking four weight rows: one sequential stream
    // leaves the prefetchers (and so the bandwidth) underused on server parts. Independent sums
    // keep the loop limited by loads; it vectorizes with SSE2.
    void read(int t) {
        static_assert(kStreams == 4, "the loop below reads four streams");
        const std::size_t first = static_cast<std::size_t>(t) * kStreams;
        const std::uint64_t* p0 = base() + layout.starts[first] / 8;
        const std::uint64_t* p1 = base() + layout.starts[first + 1] / 8;
        const std::uint64_t* p2 = base() + layout.starts[first + 2] / 8;
        const std::uint64_t* p3 = base() + layout.starts[first + 3] / 8;
        std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        constexpr std::size_t kLine = 8, kAhead = 1024;  // words: 64 B, 8 KiB
        std::size_t i = 0;
        if (prefetch) {
            for (; i + kLine + kAhead <= words; i += kLine) {
                prefetch_line(p0 + i + kAhead, level);
                prefetch_line(p1 + i + kAhead, level);
                prefetch_line(p2 + i + kAhead, level);
                prefetch_line(p3 + i + kAhead, level);
                for (std::size_t j = i; j < i + kLine; ++j) {
                    s0 += p0[j];
                    s1 += p1[j];
                    s2 += p2[j];
                    s3 += p3[j];
                }
            }
        }
        for (; i < words; ++i) {
            s0 += p0[i];
            s1 += p1[i];
            s2 += p2[i];
            s3 += p3[i];
        }
        sinks[static_cast<std::size_t>(t)] += s0 + s1 + s2 + s3;
    }
};

ReadBandwidthProbe::ReadBandwidthProbe(std::size_t bytes, int threads) {
    if (threads <= 0) throw InvalidArgument("read-bandwidth probe: threads must be positive");
    state_ = std::make_unique<State>(bytes, threads);
}

ReadBandwidthProbe::~ReadBandwidthProbe() {
    volatile std::uint64_t keep = 0;
    for (std::uint64_t s : state_->sinks) keep = keep + s;
}

double ReadBandwidthProbe::measure(double min_seconds) {
    State& st = *state_;
    const double read_bytes =
        static_cast<double>(st.layout.length) * static_cast<double>(st.layout.starts.size());
    double best = 0;
    const auto start = Clock::now();
    do {
        const auto t0 = Clock::now();
        st.team.run();
        best = std::max(best, read_bytes / seconds_since(t0) / 1e9);
        st.prefetch = !st.prefetch && st.level != WeightPrefetch::None;
    } while (seconds_since(start) < min_seconds || st.prefetch);
    return best;
}

double measure_read_bandwidth(std::size_t bytes, int threads, double min_seconds) {
    return ReadBandwidthProbe(bytes, threads).measure(min_seconds);
}

}  // namespace tokenscope::tensor
