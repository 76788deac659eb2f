#include "runtime/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <string>

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || defined(_M_IX86)
#include <immintrin.h>
#define TOKENSCOPE_PAUSE() _mm_pause()
#else
#define TOKENSCOPE_PAUSE() std::this_thread::yield()
#endif

#include "util/error.h"

namespace tokenscope::runtime {

namespace {
// How long an idle worker spins before it sleeps on the condition variable.
constexpr auto kSpinTime = std::chrono::microseconds(100);
}  // namespace

// One thread's share of a parallel_for_shares loop: its next piece starts at `front` and the
// pieces not taken end at `back`, both in one word (front << 32 | back) so that the owner
// (advancing front) and a thief (lowering back) agree by one compare-and-swap. A cache line
// each: the owner updates it every piece.
struct alignas(64) ThreadPool::Share {
    std::atomic<std::uint64_t> bounds{0};
};

namespace {
constexpr std::uint64_t pack_bounds(std::int64_t front, std::int64_t back) {
    return static_cast<std::uint64_t>(front) << 32 | static_cast<std::uint64_t>(back);
}
constexpr std::int64_t front_of(std::uint64_t b) {
    return static_cast<std::int64_t>(b >> 32);
}
constexpr std::int64_t back_of(std::uint64_t b) {
    return static_cast<std::int64_t>(b & 0xFFFFFFFFu);
}
}  // namespace

struct ThreadPool::Job {
    const std::function<void(std::int64_t, std::int64_t, int)>* body = nullptr;
    // parallel_for_shares: its body and the threads' shares, one per thread of the pool (then
    // `body` is null).
    const std::function<void(std::int64_t, std::int64_t, std::int64_t, int)>* share_body = nullptr;
    Share* shares = nullptr;
    int share_count = 0;
    std::int64_t count = 0;
    std::int64_t grain = 1;
    std::atomic<std::int64_t> next{0};
    std::atomic<std::int64_t> done{0};
    std::mutex error_mutex;
    std::exception_ptr error;
};

ThreadPool::ThreadPool(int threads) {
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    shares_ = std::make_unique<Share[]>(static_cast<std::size_t>(threads));
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

namespace {
// The body of one claimed piece, its exception kept for the caller.
template <class Call>
void run_piece(std::mutex& error_mutex, std::exception_ptr& error, const Call& call) {
    try {
        call();
    } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
    }
}

// Counts a thread's finished items into the job once, as it leaves: the caller's wait reads
// `done`, so an atomic add per piece moved its cache line between the cores every piece (perf
// of a decode: 61 % of run_shares' own samples on the instruction after that add, about 1 % of
// the step).
class FinishedItems {
  public:
    explicit FinishedItems(std::atomic<std::int64_t>& done) : done_(done) {}
    FinishedItems(const FinishedItems&) = delete;
    FinishedItems& operator=(const FinishedItems&) = delete;
    ~FinishedItems() {
        if (count_ > 0) done_.fetch_add(count_, std::memory_order_acq_rel);
    }
    void add(std::int64_t n) { count_ += n; }

  private:
    std::atomic<std::int64_t>& done_;
    std::int64_t count_ = 0;
};
}  // namespace

void ThreadPool::run_chunks(Job& job, int index) {
    FinishedItems finished(job.done);
    for (;;) {
        const std::int64_t begin = job.next.fetch_add(job.grain, std::memory_order_relaxed);
        if (begin >= job.count) break;
        const std::int64_t end = std::min(job.count, begin + job.grain);
        run_piece(job.error_mutex, job.error, [&] { (*job.body)(begin, end, index); });
        finished.add(end - begin);
    }
}

void ThreadPool::run_shares(Job& job, int index) {
    const auto& body = *job.share_body;
    FinishedItems finished(job.done);
    // The thread's own share (every thread has one), front to back.
    Share& own = job.shares[index];
    for (;;) {
        std::uint64_t cur = own.bounds.load(std::memory_order_acquire);
        std::int64_t front = 0, end = 0, back = 0;
        do {
            front = front_of(cur);
            back = back_of(cur);
            if (front >= back) break;
            end = std::min(front + job.grain, back);
        } while (!own.bounds.compare_exchange_weak(cur, pack_bounds(end, back),
                                                   std::memory_order_acq_rel));
        if (front >= back) break;
        run_piece(job.error_mutex, job.error, [&] { body(front, end, back, index); });
        finished.add(end - front);
    }
    // Then pieces from the back of whichever share has the most left.
    for (;;) {
        int victim = -1;
        std::int64_t most = 0;
        for (int i = 0; i < job.share_count; ++i) {
            const std::uint64_t b = job.shares[i].bounds.load(std::memory_order_acquire);
            if (back_of(b) - front_of(b) > most) {
                most = back_of(b) - front_of(b);
                victim = i;
            }
        }
        if (victim < 0) return;
        Share& other = job.shares[victim];
        std::uint64_t cur = other.bounds.load(std::memory_order_acquire);
        const std::int64_t front = front_of(cur), back = back_of(cur);
        if (front >= back) continue;
        const std::int64_t begin = std::max(front, back - job.grain);
        if (!other.bounds.compare_exchange_strong(cur, pack_bounds(front, begin),
                                                  std::memory_order_acq_rel))
            continue;
        run_piece(job.error_mutex, job.error, [&] { body(begin, back, back, index); });
        finished.add(back - begin);
    }
}

void ThreadPool::run_job(Job& job, int index) {
    if (job.share_body != nullptr) {
        run_shares(job, index);
    } else {
        run_chunks(job, index);
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
        if (Job* job = job_.load()) run_job(*job, index);
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
    start(job);
    run_chunks(job, 0);
    finish(job);
}

void ThreadPool::parallel_for_shares(
    std::int64_t count, std::int64_t piece,
    const std::function<void(std::int64_t, std::int64_t, std::int64_t, int)>& body) {
    if (count <= 0) return;
    if (count > std::int64_t{0xFFFFFFFF})
        throw InvalidArgument("parallel_for_shares: " + std::to_string(count) +
                              " items, more than the 2^32 - 1 it can split");
    piece = std::max<std::int64_t>(1, piece);
    if (workers_.empty() || count <= piece) {
        body(0, count, count, 0);
        return;
    }
    const int n = size();
    for (int i = 0; i < n; ++i) {
        shares_[static_cast<std::size_t>(i)].bounds.store(
            pack_bounds(count * i / n, count * (i + 1) / n), std::memory_order_relaxed);
    }
    Job job;
    job.share_body = &body;
    job.shares = shares_.get();
    job.share_count = n;
    job.count = count;
    job.grain = piece;
    start(job);
    run_shares(job, 0);
    finish(job);
}

void ThreadPool::start(Job& job) {
    job_.store(&job);
    generation_.fetch_add(1);
    if (sleepers_.load() > 0) {
        { std::lock_guard lock(mutex_); }
        wake_.notify_all();
    }
}

// Waits for the pieces other threads took, retires the job and rethrows its first error.
void ThreadPool::finish(Job& job) {
    while (job.done.load(std::memory_order_acquire) < job.count) TOKENSCOPE_PAUSE();
    job_.store(nullptr);
    while (in_flight_.load() != 0) TOKENSCOPE_PAUSE();
    if (job.error) std::rethrow_exception(job.error);
}

}  // namespace tokenscope::runtime
