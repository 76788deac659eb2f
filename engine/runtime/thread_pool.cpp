#include "runtime/thread_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TOKENSCOPE_PAUSE() _mm_pause()
#else
#define TOKENSCOPE_PAUSE() std::this_thread::yield()
#endif

namespace tokenscope::runtime {

namespace {
// How long an idle worker spins before it sleeps on the condition variable.
constexpr auto kSpinTime = std::chrono::microseconds(200);
}  // namespace

ThreadPool::ThreadPool(int threads) {
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(int index) {
    for (;;) {
        const std::int64_t begin = next_.fetch_add(grain_, std::memory_order_relaxed);
        if (begin >= count_) break;
        const std::int64_t end = std::min(count_, begin + grain_);
        try {
            (*body_)(begin, end, index);
        } catch (...) {
            std::lock_guard lock(error_mutex_);
            if (!error_) error_ = std::current_exception();
        }
    }
}

void ThreadPool::worker_loop(int index) {
    std::uint64_t seen = 0;
    for (;;) {
        // Spin for a short while, then sleep until the generation changes.
        const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
        while (generation_.load(std::memory_order_acquire) == seen &&
               std::chrono::steady_clock::now() < spin_until) {
            for (int i = 0; i < 64; ++i) TOKENSCOPE_PAUSE();
        }
        if (generation_.load(std::memory_order_acquire) == seen) {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        }
        seen = generation_.load(std::memory_order_acquire);
        {
            std::lock_guard lock(mutex_);
            if (stop_) return;
        }
        run_chunks(index);
        active_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

void ThreadPool::parallel_for(std::int64_t count, std::int64_t grain,
                              const std::function<void(std::int64_t, std::int64_t)>& body) {
    parallel_for_indexed(count, grain,
                         [&body](std::int64_t begin, std::int64_t end, int) { body(begin, end); });
}

void ThreadPool::parallel_for_indexed(
    std::int64_t count, std::int64_t grain,
    const std::function<void(std::int64_t, std::int64_t, int)>& body) {
    if (count <= 0) return;
    grain = std::max<std::int64_t>(1, grain);
    if (workers_.empty() || count <= grain) {
        body(0, count, 0);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        body_ = &body;
        count_ = count;
        grain_ = grain;
        next_.store(0, std::memory_order_relaxed);
        error_ = nullptr;
        active_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    run_chunks(0);
    while (active_.load(std::memory_order_acquire) != 0) TOKENSCOPE_PAUSE();
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
}

}  // namespace tokenscope::runtime
