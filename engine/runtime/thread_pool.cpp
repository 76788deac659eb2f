#include "runtime/thread_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || defined(_M_IX86)
#include <immintrin.h>
#define TOKENSCOPE_PAUSE() _mm_pause()
#else
#define TOKENSCOPE_PAUSE() std::this_thread::yield()
#endif

namespace tokenscope::runtime {

namespace {
// How long an idle worker spins before it sleeps on the condition variable.
constexpr auto kSpinTime = std::chrono::microseconds(100);
}  // namespace

struct ThreadPool::Job {
    const std::function<void(std::int64_t, std::int64_t, int)>* body = nullptr;
    std::int64_t count = 0;
    std::int64_t grain = 1;
    std::atomic<std::int64_t> next{0};
    std::atomic<std::int64_t> done{0};
    std::mutex error_mutex;
    std::exception_ptr error;
};

ThreadPool::ThreadPool(int threads) {
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
        generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(Job& job, int index) {
    for (;;) {
        const std::int64_t begin = job.next.fetch_add(job.grain, std::memory_order_relaxed);
        if (begin >= job.count) break;
        const std::int64_t end = std::min(job.count, begin + job.grain);
        try {
            (*job.body)(begin, end, index);
        } catch (...) {
            std::lock_guard lock(job.error_mutex);
            if (!job.error) job.error = std::current_exception();
        }
        job.done.fetch_add(end - begin, std::memory_order_acq_rel);
    }
}

void ThreadPool::worker_loop(int index) {
    std::uint64_t seen = 0;
    for (;;) {
        const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
        while (generation_.load() == seen && std::chrono::steady_clock::now() < spin_until) {
            for (int i = 0; i < 32; ++i) TOKENSCOPE_PAUSE();
        }
        if (generation_.load() == seen) {
            std::unique_lock lock(mutex_);
            sleepers_.fetch_add(1);
            wake_.wait(lock, [&] { return generation_.load() != seen; });
            sleepers_.fetch_sub(1);
        }
        seen = generation_.load();
        if (stop_.load()) return;
        // Announce ourselves before looking at the job, so the caller cannot retire it while
        // we hold its pointer.
        in_flight_.fetch_add(1);
        if (Job* job = job_.load()) run_chunks(*job, index);
        in_flight_.fetch_sub(1);
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
    Job job;
    job.body = &body;
    job.count = count;
    job.grain = grain;
    job_.store(&job);
    generation_.fetch_add(1);
    if (sleepers_.load() > 0) {
        { std::lock_guard lock(mutex_); }
        wake_.notify_all();
    }
    run_chunks(job, 0);
    // Chunks other threads took may still be running.
    while (job.done.load(std::memory_order_acquire) < count) TOKENSCOPE_PAUSE();
    job_.store(nullptr);
    while (in_flight_.load() != 0) TOKENSCOPE_PAUSE();
    if (job.error) std::rethrow_exception(job.error);
}

}  // namespace tokenscope::runtime
