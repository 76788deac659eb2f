#include "shutdown_signal.h"

#ifdef _WIN32
#include <windows.h>

#include <condition_variable>
#include <mutex>
#else
#include <pthread.h>
#include <signal.h>
#endif

namespace tokenscope::cli {

#ifdef _WIN32

namespace {
std::mutex g_mutex;
std::condition_variable g_stop;
DWORD g_event = 0;
bool g_stopped = false;

BOOL WINAPI on_console_event(DWORD event) {
    {
        const std::lock_guard<std::mutex> lock(g_mutex);
        g_event = event;
        g_stopped = true;
    }
    g_stop.notify_all();
    return TRUE;  // handled: the process is not terminated before the server stops
}
}  // namespace

void block_shutdown_signals() {
    SetConsoleCtrlHandler(on_console_event, TRUE);
}

const char* wait_for_shutdown_signal() {
    std::unique_lock<std::mutex> lock(g_mutex);
    g_stop.wait(lock, [] { return g_stopped; });
    return g_event == CTRL_C_EVENT || g_event == CTRL_BREAK_EVENT ? "interrupted" : "terminated";
}

#else

namespace {
sigset_t shutdown_set() {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    return signals;
}
}  // namespace

void block_shutdown_signals() {
    const sigset_t signals = shutdown_set();
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

const char* wait_for_shutdown_signal() {
    const sigset_t signals = shutdown_set();
    int signal = 0;
    sigwait(&signals, &signal);
    return signal == SIGINT ? "interrupted" : "terminated";
}

#endif

}  // namespace tokenscope::cli
