#pragma once
// A fixed set of worker threads for data-parallel loops. The caller's thread works too, so
// a pool of N threads starts N - 1 workers. Work is handed out in chunks through an atomic
// counter (dynamic balancing); workers spin briefly before sleeping because decode issues
// hundreds of short loops per token and a condition-variable wake-up costs more than the
// spin.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tokenscope::runtime {

class ThreadPool {
public:
    // threads <= 0: one per hardware thread.
    explicit ThreadPool(int threads = 0);
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;
    ~ThreadPool();

    int size() const { return static_cast<int>(workers_.size()) + 1; }

    // Calls body(begin, end) over [0, count) in chunks of at most `grain` items; returns when
    // all are done. Not re-entrant: body must not call parallel_for on the same pool.
    // An exception thrown by body is rethrown here (the first one; the rest are dropped).
    void parallel_for(std::int64_t count, std::int64_t grain,
                      const std::function<void(std::int64_t, std::int64_t)>& body);
    // The same, also passing the index of the thread running the chunk (0 = the caller,
    // 1..size()-1 the workers), for per-thread scratch buffers.
    void parallel_for_indexed(std::int64_t count, std::int64_t grain,
                              const std::function<void(std::int64_t, std::int64_t, int)>& body);

private:
    void worker_loop(int index);
    void run_chunks(int index);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::atomic<std::uint64_t> generation_{0};
    std::atomic<int> active_{0};
    bool stop_ = false;

    // The current job.
    const std::function<void(std::int64_t, std::int64_t, int)>* body_ = nullptr;
    std::int64_t count_ = 0;
    std::int64_t grain_ = 1;
    std::atomic<std::int64_t> next_{0};
    std::mutex error_mutex_;
    std::exception_ptr error_;
};

}  // namespace tokenscope::runtime
