#pragma once
// A fixed set of worker threads for data-parallel loops. The caller's thread works too, so a
// pool of N threads starts N - 1 workers. Work is handed out in chunks through an atomic
// counter (dynamic balancing), and the caller returns as soon as every chunk is done: a
// worker that was descheduled and wakes late finds nothing left and never holds the caller
// up (decode issues hundreds of short loops per token, so this matters on a busy machine).
// Idle workers spin briefly before sleeping, because a condition-variable wake-up costs more
// than the spin when loops come back to back.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
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

    // Calls body(begin, end) over [0, count) in chunks of at most `grain` items (one call for
    // everything, on the caller's thread, when the pool has no workers); returns when all are
    // done. Not re-entrant: body must not call parallel_for on the same pool.
    // An exception thrown by body is rethrown here (the first one; the rest are dropped).
    void parallel_for(std::int64_t count, std::int64_t grain,
                      const std::function<void(std::int64_t, std::int64_t)>& body);
    // The same, also passing the index of the thread running the chunk (0 = the caller,
    // 1..size()-1 the workers), for per-thread scratch buffers.
    void parallel_for_indexed(std::int64_t count, std::int64_t grain,
                              const std::function<void(std::int64_t, std::int64_t, int)>& body);
    // Calls body(begin, end, stream_end, thread) over [0, count) in pieces of at most `piece`
    // items (one call for everything without workers, as parallel_for), for work that streams
    // memory (decode's weight rows). Thread i owns the i-th of size() contiguous shares and runs
    // it front to back, so each thread reads one forward stream; a thread done with its own
    // share takes pieces from the back of the share with the most left. stream_end is where the
    // caller's stream may continue after this piece (the owner's share end as far as it knows,
    // else the piece's end), for prefetching ahead. Unlike parallel_for's shared counter, a
    // thread's pieces are adjacent, and a late thread's share is still finished by the others.
    void parallel_for_shares(
        std::int64_t count, std::int64_t piece,
        const std::function<void(std::int64_t, std::int64_t, std::int64_t, int)>& body);

private:
    struct Job;
    struct Share;
    void worker_loop(int index);
    void start(Job& job);
    void finish(Job& job);
    static void run_chunks(Job& job, int index);
    static void run_shares(Job& job, int index);
    static void run_job(Job& job, int index);

    std::vector<std::thread> workers_;
    std::unique_ptr<Share[]> shares_;  // parallel_for_shares: one per thread
    std::mutex mutex_;
    std::condition_variable wake_;
    std::atomic<std::uint64_t> generation_{0};
    std::atomic<int> sleepers_{0};
    std::atomic<int> in_flight_{0};  // workers between picking up the job pointer and leaving it
    std::atomic<Job*> job_{nullptr};
    std::atomic<bool> stop_{false};
};

}  // namespace tokenscope::runtime
