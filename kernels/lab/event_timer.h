#pragma once
// Times work queued on a stream with CUDA events: the median of `repeats` runs after `warmup`
// unmeasured ones (the median because one run delayed by a clock change or another process
// should not move the answer). Needs cuda_runtime.h: .cu files and kernels/*.cpp only.
#include <algorithm>
#include <vector>

#include <cuda_runtime.h>

#include "ops/check.h"

namespace tokenscope::cuda::lab {

// A non-blocking stream for one measurement, destroyed with the scope.
class ScopedStream {
public:
    ScopedStream() { TOKENSCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
    ~ScopedStream() { cudaStreamDestroy(stream_); }
    ScopedStream(const ScopedStream&) = delete;
    ScopedStream& operator=(const ScopedStream&) = delete;
    cudaStream_t get() const { return stream_; }

private:
    cudaStream_t stream_ = nullptr;
};

class EventTimer {
public:
    EventTimer() {
        TOKENSCOPE_CUDA_CHECK(cudaEventCreate(&start_));
        TOKENSCOPE_CUDA_CHECK(cudaEventCreate(&stop_));
    }
    ~EventTimer() {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }
    EventTimer(const EventTimer&) = delete;
    EventTimer& operator=(const EventTimer&) = delete;

    // Median seconds of one call of `work` (which queues onto `stream`).
    template <typename Work>
    double median_seconds(cudaStream_t stream, int warmup, int repeats, Work&& work) {
        for (int i = 0; i < warmup; ++i) work();
        std::vector<double> times;
        for (int i = 0; i < repeats; ++i) {
            TOKENSCOPE_CUDA_CHECK(cudaEventRecord(start_, stream));
            work();
            TOKENSCOPE_CUDA_CHECK(cudaEventRecord(stop_, stream));
            TOKENSCOPE_CUDA_CHECK(cudaEventSynchronize(stop_));
            float ms = 0;
            TOKENSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
            times.push_back(ms * 1e-3);
        }
        std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
        return times[times.size() / 2];
    }

private:
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace tokenscope::cuda::lab
