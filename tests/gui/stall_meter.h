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
//
// Preemption also reaches the GUI thread second-hand. perf (sched_switch with call stacks,
// 2026-12-02, a busy loop beside the test) showed the thread blocked 6-32 ms at a time in two
// places that are waits for another thread to get a core: QRasterPaintEngine::fill handing
// tall fills to Qt's GUI thread pool and waiting on a semaphore for its helpers, and free()
// of a queued signal's event waiting for the malloc arena lock of the inference thread that
// allocated it, held while that thread was descheduled. So while the GUI thread sleeps, the
// time the process's other threads spent runnable but waiting for a core is put down to
// preemption too (never more than the sleep itself). Blocking with no such waiting -- a disk
// write on a quiet machine -- stays the app's own.
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <QElapsedTimer>
#include <QObject>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace tokenscope::test {

class StallMeter : public QObject {
  public:
    explicit StallMeter(bool log = qEnvironmentVariableIsSet("TOKENSCOPE_STALL_LOG"))
        : log_(log), schedstat_fd_(open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) {
        gui_tid_ = static_cast<long>(gettid());
        refresh_siblings();
        sample(last_);
        clock_.start();
        total_.start();
        connect(&tick_, &QTimer::timeout, this, [this] { onTick(); });
        tick_.start(0);
    }
    ~StallMeter() override {
        if (schedstat_fd_ >= 0) close(schedstat_fd_);
        for (auto& [tid, sibling] : siblings_) close(sibling.fd);
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
    struct Sibling {
        int fd = -1;
        double last_wait_ms = 0;
    };
    // The second field of schedstat: nanoseconds a thread spent runnable but not running.
    // The files stay open (pread re-reads them) so that a tick costs few system calls.
    static double runqueue_wait_ms(int fd) {
        if (fd < 0) return -1;
        char text[128];
        const ssize_t n = pread(fd, text, sizeof text - 1, 0);
        if (n <= 0) return -1;
        text[n] = '\0';
        unsigned long long running_ns = 0, waiting_ns = 0;
        if (std::sscanf(text, "%llu %llu", &running_ns, &waiting_ns) != 2) return -1;
        return static_cast<double>(waiting_ns) / 1e6;
    }
    // Opens the schedstat of threads started since the last look; their waiting so far is
    // their baseline, not part of any gap.
    void refresh_siblings() {
        DIR* dir = opendir("/proc/self/task");
        if (!dir) return;
        while (dirent* entry = readdir(dir)) {
            const long tid = std::strtol(entry->d_name, nullptr, 10);
            if (tid <= 0 || tid == gui_tid_ || siblings_.count(tid)) continue;
            const std::string path = "/proc/self/task/" + std::string(entry->d_name) + "/schedstat";
            Sibling sibling;
            sibling.fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
            if (sibling.fd < 0) continue;
            sibling.last_wait_ms = std::max(0.0, runqueue_wait_ms(sibling.fd));
            siblings_.emplace(tid, sibling);
        }
        closedir(dir);
        since_refresh_.start();
    }
    // How long the other threads waited for a core since the last call; threads that ended
    // are dropped.
    double siblings_waited_ms() {
        double waited = 0;
        for (auto it = siblings_.begin(); it != siblings_.end();) {
            const double now = runqueue_wait_ms(it->second.fd);
            if (now < 0) {
                close(it->second.fd);
                it = siblings_.erase(it);
                continue;
            }
            waited += std::max(0.0, now - it->second.last_wait_ms);
            it->second.last_wait_ms = now;
            ++it;
        }
        return waited;
    }
    void sample(Usage& u) const {
        u.runqueue_ms = runqueue_wait_ms(schedstat_fd_);
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
        const double siblings_waited = siblings_waited_ms();
        if (since_refresh_.elapsed() > 100) refresh_siblings();
        last_ = now;
        worst_ = std::max(worst_, gap);
        qint64 own_ms = gap;
        double asleep = 0;
        if (waited >= 0) {
            asleep = std::max(0.0, static_cast<double>(gap) - waited - cpu);
            const double second_hand = std::min(asleep, siblings_waited);
            own_ms = std::max<qint64>(0, gap - static_cast<qint64>(waited + second_hand));
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
                "wait %.1f ms, asleep %.1f ms while other threads waited %.1f ms for a core, "
                "%s%s)",
                static_cast<long long>(gap), static_cast<long long>(total_.elapsed()),
                static_cast<long long>(own_ms), cpu, waited, asleep, siblings_waited,
                blocked ? "blocked " : "", preempted ? "preempted" : "");
    }

    bool log_;
    int schedstat_fd_;  // the GUI thread's own: the meter is made and ticks on that thread
    long gui_tid_ = 0;
    std::map<long, Sibling> siblings_;  // the process's other threads, by thread id
    QElapsedTimer since_refresh_;
    QTimer tick_;
    QElapsedTimer clock_;
    QElapsedTimer total_;
    Usage last_;
    qint64 worst_ = 0;
    qint64 worst_own_ = 0;
    int preempted_ = 0;
};

}  // namespace tokenscope::test
