#pragma once
// Measures how long the GUI thread's event loop is held up, with a 0 ms timer that runs once
// per loop iteration: the gap between two ticks is a stall.
//
// On a 2-core machine that also runs the engine (and, in CI, other tests' processes), the
// kernel sometimes preempts the GUI thread for tens of milliseconds; that is not work the app
// does on its event loop, and no code change can remove it. So each gap is also described by
// what the thread did during it. Where Linux reports it (/proc/thread-self/schedstat: the time
// the thread sat runnable on a run queue, waiting for a core), the app's own part of a gap is
// the gap minus that wait: its work plus its blocking (fsync, a lock, a wait on another
// thread). Elsewhere a heuristic from getrusage(RUSAGE_THREAD) stands in: a gap is the app's own
// when the thread was busy or blocked for it, preemption when it mostly waited (involuntary
// switches, little CPU, no blocking) -- which counts a gap with one short lock wait and a long
// preemption as the app's own. worstOwn() is what the stall bound is about; worst() is
// reported alongside.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <QElapsedTimer>
#include <QObject>
#include <QTimer>
#include <algorithm>
#include <cstdio>

namespace tokenscope::test {

class StallMeter : public QObject {
  public:
    explicit StallMeter(bool log = qEnvironmentVariableIsSet("TOKENSCOPE_STALL_LOG"))
        : log_(log), schedstat_fd_(open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) {
        sample(last_);
        clock_.start();
        total_.start();
        connect(&tick_, &QTimer::timeout, this, [this] { onTick(); });
        tick_.start(0);
    }
    ~StallMeter() override {
        if (schedstat_fd_ >= 0) close(schedstat_fd_);
    }
    StallMeter(const StallMeter&) = delete;
    StallMeter& operator=(const StallMeter&) = delete;
    void stop() { tick_.stop(); }
    qint64 worst() const { return worst_; }         // any gap, ms
    qint64 worstOwn() const { return worst_own_; }  // gaps the thread spent working or blocked, ms
    int preempted() const { return preempted_; }    // gaps over 30 ms put down to preemption

  private:
    struct Usage {
        double cpu_ms = 0;
        long voluntary = 0;
        long involuntary = 0;
        double runqueue_ms = -1;  // -1: schedstat is not available
    };
    // The second field of schedstat: nanoseconds this thread spent runnable but not running.
    // The file stays open (pread re-reads it) so that a tick costs one system call, not three.
    double runqueue_wait_ms() const {
        if (schedstat_fd_ < 0) return -1;
        char text[128];
        const ssize_t n = pread(schedstat_fd_, text, sizeof text - 1, 0);
        if (n <= 0) return -1;
        text[n] = '\0';
        unsigned long long running_ns = 0, waiting_ns = 0;
        if (std::sscanf(text, "%llu %llu", &running_ns, &waiting_ns) != 2) return -1;
        return static_cast<double>(waiting_ns) / 1e6;
    }
    void sample(Usage& u) const {
        u.runqueue_ms = runqueue_wait_ms();
        rusage r{};
        getrusage(RUSAGE_THREAD, &r);
        u.cpu_ms = (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 +
                   (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
        u.voluntary = r.ru_nvcsw;
        u.involuntary = r.ru_nivcsw;
    }
    void onTick() {
        const qint64 gap = clock_.restart();
        Usage now;
        sample(now);
        const double cpu = now.cpu_ms - last_.cpu_ms;
        const bool blocked = now.voluntary > last_.voluntary;
        const bool preempted = now.involuntary > last_.involuntary;
        const double waited = now.runqueue_ms >= 0 && last_.runqueue_ms >= 0
                                  ? now.runqueue_ms - last_.runqueue_ms
                                  : -1;
        last_ = now;
        worst_ = std::max(worst_, gap);
        qint64 own_ms = gap;
        if (waited >= 0) {
            own_ms = std::max<qint64>(0, gap - static_cast<qint64>(waited));
        } else if (preempted && !blocked && cpu < 0.5 * static_cast<double>(gap)) {
            // No schedstat: preemption explains a gap in which the thread did not block and
            // used under half of it.
            own_ms = 0;
        }
        worst_own_ = std::max(worst_own_, own_ms);
        if (gap > 30 && own_ms < gap / 2) ++preempted_;
        if (log_ && gap > 30)
            qInfo(
                "stall of %lld ms ending at %lld ms (own %lld ms: thread cpu %.1f ms, run-queue "
                "wait %.1f ms, %s%s)",
                static_cast<long long>(gap), static_cast<long long>(total_.elapsed()),
                static_cast<long long>(own_ms), cpu, waited, blocked ? "blocked " : "",
                preempted ? "preempted" : "");
    }

    bool log_;
    int schedstat_fd_;  // the GUI thread's own: the meter is made and ticks on that thread
    QTimer tick_;
    QElapsedTimer clock_;
    QElapsedTimer total_;
    Usage last_;
    qint64 worst_ = 0;
    qint64 worst_own_ = 0;
    int preempted_ = 0;
};

}  // namespace tokenscope::test
