#include "wal_syncer.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#ifdef _WIN32
#include <windows.h>
#else
#include <fcntl.h>
#include <unistd.h>
#endif

namespace tokenscope::app {

bool sync_file_data(const std::filesystem::path& path, bool& existed, std::string& error) {
    existed = false;
#ifdef _WIN32
    // FlushFileBuffers needs write access; sharing everything so SQLite's own handles go on.
    HANDLE file = CreateFileW(path.c_str(), GENERIC_WRITE,
                              FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                              OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
    if (file == INVALID_HANDLE_VALUE) {
        const DWORD code = GetLastError();
        if (code == ERROR_FILE_NOT_FOUND || code == ERROR_PATH_NOT_FOUND) return true;
        error =
            path.string() + ": cannot open to sync (Windows error " + std::to_string(code) + ")";
        return false;
    }
    existed = true;
    const bool ok = FlushFileBuffers(file) != 0;
    if (!ok) {
        error = path.string() + ": FlushFileBuffers failed (Windows error " +
                std::to_string(GetLastError()) + ")";
    }
    CloseHandle(file);
    return ok;
#else
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return true;
        error = path.string() + ": cannot open to sync: " + std::strerror(errno);
        return false;
    }
    existed = true;
#if defined(__APPLE__)
    const int rc = ::fsync(fd);
#else
    const int rc = ::fdatasync(fd);
#endif
    if (rc != 0) error = path.string() + ": fsync failed: " + std::strerror(errno);
    ::close(fd);
    return rc == 0;
#endif
}

WalSyncer::WalSyncer(std::filesystem::path wal)
    : wal_(std::move(wal)), worker_([this] { run(); }) {}

WalSyncer::~WalSyncer() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    worker_.join();  // run() finishes what was requested before it stops
}

void WalSyncer::request() {
    {
        std::lock_guard lock(mutex_);
        ++requested_;
    }
    wake_.notify_one();
}

void WalSyncer::flush() {
    std::unique_lock lock(mutex_);
    const std::uint64_t target = requested_;
    done_.wait(lock, [&] { return completed_ >= target; });
}

std::uint64_t WalSyncer::syncs() const {
    std::lock_guard lock(mutex_);
    return syncs_;
}

std::string WalSyncer::last_error() const {
    std::lock_guard lock(mutex_);
    return last_error_;
}

void WalSyncer::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stopping_ || requested_ > completed_; });
        if (requested_ == completed_) return;  // stopping, nothing left
        // One fsync covers every commit requested so far: they are all in the file already.
        const std::uint64_t target = requested_;
        lock.unlock();
        bool existed = false;
        std::string error;
        const bool ok = sync_file_data(wal_, existed, error);
        if (!ok) spdlog::warn("conversation database: {}", error);
        lock.lock();
        if (existed && ok) ++syncs_;
        if (!ok) last_error_ = error;
        completed_ = target;
        done_.notify_all();
    }
}

}  // namespace tokenscope::app
