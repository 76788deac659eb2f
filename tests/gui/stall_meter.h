#pragma once
// Measures how long the GUI thread's event loop is held up, with a 0 ms timer that runs once
// per loop iteration: the gap between two ticks is a stall.
//
// On a 2-core machine that also runs the engine (and, in CI, other tests' processes), the
// kernel sometimes preempts the GUI thread for tens of milliseconds; that is not work the app
// does on its event loop, and no code change can remove it. So each gap is also described by
// what the thread did during it (getrusage(RUSAGE_THREAD)): CPU time used, and voluntary
// context switches (it blocked: fsync, a lock, a wait on another thread). A gap is the app's
// own when the thread was busy or blocked for it; a gap in which the thread mostly waited to
// be scheduled (involuntary switches, little CPU, no blocking) is counted apart as preemption.
// worstOwn() is what the stall bound is about; worst() is reported alongside.
#include <sys/resource.h>
#include <QElapsedTimer>
#include <QObject>
#include <QTimer>
#include <algorithm>

namespace tokenscope::test {

class StallMeter : public QObject {
  public:
    explicit StallMeter(bool log = qEnvironmentVariableIsSet("TOKENSCOPE_STALL_LOG")) : log_(log) {
        sample(last_);
        clock_.start();
        total_.start();
        connect(&tick_, &QTimer::timeout, this, [this] { onTick(); });
        tick_.start(0);
    }
    void stop() { tick_.stop(); }
    qint64 worst() const { return worst_; }         // any gap, ms
    qint64 worstOwn() const { return worst_own_; }  // gaps the thread spent working or blocked, ms
    int preempted() const { return preempted_; }    // gaps over 30 ms put down to preemption

  private:
    struct Usage {
        double cpu_ms = 0;
        long voluntary = 0;
        long involuntary = 0;
    };
    static void sample(Usage& u) {
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
        last_ = now;
        worst_ = std::max(worst_, gap);
        // Preemption explains the gap when the thread did not block and used under half of it.
        const bool own = !(preempted && !blocked && cpu < 0.5 * static_cast<double>(gap));
        if (own)
            worst_own_ = std::max(worst_own_, gap);
        else if (gap > 30)
            ++preempted_;
        if (log_ && gap > 30)
            qInfo("stall of %lld ms ending at %lld ms (thread cpu %.1f ms, %s%s)",
                  static_cast<long long>(gap), static_cast<long long>(total_.elapsed()), cpu,
                  blocked ? "blocked " : "", preempted ? "preempted" : "");
    }

    bool log_;
    QTimer tick_;
    QElapsedTimer clock_;
    QElapsedTimer total_;
    Usage last_;
    qint64 worst_ = 0;
    qint64 worst_own_ = 0;
    int preempted_ = 0;
};

}  // namespace tokenscope::test
