// The thread pool (engine/runtime/thread_pool): parallel_for and parallel_for_shares hand out
// every item exactly once for any count, piece size and thread count; parallel_for_shares runs
// a thread's own share front to back in adjacent pieces and says how far its stream goes on,
// a share whose thread is held up is finished by the others from its back, and an exception
// thrown by a body reaches the caller with the pool still usable afterwards.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/thread_pool.h"
#include "util/error.h"

using namespace tokenscope;
using runtime::ThreadPool;

namespace {

// One piece as a body saw it.
struct Piece {
    std::int64_t begin, end, stream_end;
    int thread;
};

// Runs parallel_for_shares and records every piece (in the order each thread ran them).
std::vector<std::vector<Piece>> run_shares(ThreadPool& pool, std::int64_t count, std::int64_t piece,
                                           std::vector<int>& hits) {
    std::vector<std::vector<Piece>> by_thread(static_cast<std::size_t>(pool.size()));
    std::vector<std::atomic<int>> counts(static_cast<std::size_t>(count));
    pool.parallel_for_shares(
        count, piece, [&](std::int64_t b, std::int64_t e, std::int64_t stream_end, int t) {
            by_thread[static_cast<std::size_t>(t)].push_back({b, e, stream_end, t});
            for (std::int64_t i = b; i < e; ++i) counts[static_cast<std::size_t>(i)].fetch_add(1);
        });
    hits.assign(static_cast<std::size_t>(count), 0);
    for (std::int64_t i = 0; i < count; ++i)
        hits[static_cast<std::size_t>(i)] = counts[static_cast<std::size_t>(i)].load();
    return by_thread;
}

}  // namespace

class TestThreadPool : public QObject {
    Q_OBJECT
  private slots:
    void parallelForCoversEveryItemOnce();
    void sharesCoverEveryItemOnce();
    void ownSharesRunFrontToBack();
    void heldUpShareIsFinishedByOthers();
    void exceptionsReachTheCaller();
    void rejectsTooManyItems();
};

void TestThreadPool::parallelForCoversEveryItemOnce() {
    for (int threads : {1, 2, 3, 5}) {
        ThreadPool pool(threads);
        for (std::int64_t count : {1, 2, 7, 64, 1001}) {
            for (std::int64_t grain : {1, 3, 64, 5000}) {
                std::vector<std::atomic<int>> hits(static_cast<std::size_t>(count));
                // Without workers, one call for everything.
                const std::int64_t most = threads == 1 ? count : grain;
                std::atomic<int> oversized{0};  // checked here: QVERIFY belongs to this thread
                pool.parallel_for(count, grain, [&](std::int64_t b, std::int64_t e) {
                    if (e - b > most) oversized.fetch_add(1);
                    for (std::int64_t i = b; i < e; ++i)
                        hits[static_cast<std::size_t>(i)].fetch_add(1);
                });
                QCOMPARE(oversized.load(), 0);
                for (std::int64_t i = 0; i < count; ++i)
                    QCOMPARE(hits[static_cast<std::size_t>(i)].load(), 1);
            }
        }
    }
}

void TestThreadPool::sharesCoverEveryItemOnce() {
    for (int threads : {1, 2, 3, 5}) {
        ThreadPool pool(threads);
        for (std::int64_t count : {1, 2, 7, 64, 1001}) {
            for (std::int64_t piece : {1, 3, 64, 5000}) {
                std::vector<int> hits;
                const auto by_thread = run_shares(pool, count, piece, hits);
                const std::string what = std::to_string(threads) + " threads, " +
                                         std::to_string(count) + " items, pieces of " +
                                         std::to_string(piece);
                for (std::int64_t i = 0; i < count; ++i) {
                    QVERIFY2(hits[static_cast<std::size_t>(i)] == 1,
                             (what + ": item " + std::to_string(i) + " ran " +
                              std::to_string(hits[static_cast<std::size_t>(i)]) + " times")
                                 .c_str());
                }
                const std::int64_t most = threads == 1 ? count : piece;  // as parallel_for
                for (const auto& pieces : by_thread) {
                    for (const Piece& p : pieces) {
                        QVERIFY2(
                            p.begin < p.end && p.end - p.begin <= most,
                            (what + ": a piece of " + std::to_string(p.end - p.begin)).c_str());
                        QVERIFY2(p.stream_end >= p.end && p.stream_end <= count,
                                 (what + ": stream_end " + std::to_string(p.stream_end) +
                                  " for a piece ending at " + std::to_string(p.end))
                                     .c_str());
                    }
                }
            }
        }
    }
}

// Thread t's pieces inside its own share [count t / n, count (t + 1) / n) come in increasing,
// adjacent order (one forward stream), and each one's stream_end reaches at least to the next
// piece it runs there, so the kernels may prefetch it.
void TestThreadPool::ownSharesRunFrontToBack() {
    const int threads = 3;
    ThreadPool pool(threads);
    const std::int64_t count = 3000, piece = 7;
    for (int round = 0; round < 20; ++round) {
        std::vector<int> hits;
        const auto by_thread = run_shares(pool, count, piece, hits);
        for (int t = 0; t < threads; ++t) {
            const std::int64_t lo = count * t / threads, hi = count * (t + 1) / threads;
            std::int64_t expected_begin = lo;
            const Piece* previous = nullptr;
            for (const Piece& p : by_thread[static_cast<std::size_t>(t)]) {
                if (p.begin < lo || p.begin >= hi) continue;  // taken from another share
                QCOMPARE(p.begin, expected_begin);
                if (previous != nullptr) QVERIFY(previous->stream_end >= p.end);
                expected_begin = p.end;
                previous = &p;
            }
        }
    }
}

// Thread 1 is held up in its first piece; thread 0, done with its own share, must take the
// rest of share 1 from its back, and the call returns only when everything ran.
void TestThreadPool::heldUpShareIsFinishedByOthers() {
    ThreadPool pool(2);
    const std::int64_t count = 200, piece = 10;
    std::atomic<bool> held{false};
    std::vector<std::atomic<int>> ran_by(static_cast<std::size_t>(count));
    for (auto& r : ran_by) r = -1;
    pool.parallel_for_shares(count, piece,
                             [&](std::int64_t b, std::int64_t e, std::int64_t, int t) {
                                 if (t == 1 && !held.exchange(true))
                                     std::this_thread::sleep_for(std::chrono::milliseconds(200));
                                 for (std::int64_t i = b; i < e; ++i)
                                     ran_by[static_cast<std::size_t>(i)] = t;
                             });
    int stolen = 0;
    for (std::int64_t i = 0; i < count; ++i) {
        QVERIFY2(ran_by[static_cast<std::size_t>(i)] >= 0,
                 ("item " + std::to_string(i) + " never ran").c_str());
        if (i >= count / 2 && ran_by[static_cast<std::size_t>(i)] == 0) ++stolen;
    }
    // Share 1 is [100, 200); thread 1 holds at most one piece of it while it sleeps (none if
    // it woke after thread 0 had taken everything).
    QVERIFY2(stolen >= count / 2 - piece,
             ("thread 0 ran only " + std::to_string(stolen) + " of share 1's 100 items").c_str());
    QVERIFY(ran_by[static_cast<std::size_t>(count - 1)] == 0);  // taken from the back
}

void TestThreadPool::exceptionsReachTheCaller() {
    ThreadPool pool(2);
    for (int round = 0; round < 10; ++round) {
        std::atomic<std::int64_t> done{0};
        bool caught = false;
        try {
            pool.parallel_for_shares(100, 5,
                                     [&](std::int64_t b, std::int64_t e, std::int64_t, int) {
                                         if (b <= 73 && 73 < e)
                                             throw std::runtime_error("piece 73");
                                         done += e - b;
                                     });
        } catch (const std::runtime_error& e) {
            caught = std::string(e.what()) == "piece 73";
        }
        QVERIFY(caught);
        QCOMPARE(done.load(), std::int64_t{95});  // every other piece still ran
        caught = false;
        try {
            pool.parallel_for(100, 5, [&](std::int64_t b, std::int64_t e) {
                if (b <= 42 && 42 < e) throw std::runtime_error("chunk 42");
            });
        } catch (const std::runtime_error& e) {
            caught = std::string(e.what()) == "chunk 42";
        }
        QVERIFY(caught);
    }
    // Still usable.
    std::vector<int> hits;
    run_shares(pool, 50, 4, hits);
    for (int h : hits) QCOMPARE(h, 1);
}

void TestThreadPool::rejectsTooManyItems() {
    ThreadPool pool(2);
    QVERIFY_THROWS_EXCEPTION(
        InvalidArgument,
        pool.parallel_for_shares(std::int64_t{1} << 33, 1 << 20,
                                 [](std::int64_t, std::int64_t, std::int64_t, int) {}));
}

QTEST_GUILESS_MAIN(TestThreadPool)
#include "test_thread_pool.moc"
