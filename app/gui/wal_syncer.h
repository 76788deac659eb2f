#pragma once
// WalSyncer: makes SQLite's write-ahead log durable on a thread of its own, so that a commit on
// the GUI thread never waits for the disk.
//
// Why: with synchronous=FULL every commit fsyncs the WAL before it returns. That takes a few
// milliseconds on an idle SSD, but 100-150 ms while another program writes to the same disk
// (measured under `dd ... conv=fsync` in test_window_usability: the user's message and the
// conversation's creation stalled the event loop for 107-152 ms). With synchronous=NORMAL a
// WAL commit is already safe against a crash or SIGKILL of the app (the bytes are in the
// operating system's hands when COMMIT returns); only a power cut or kernel crash before the
// OS writes them back can lose it. The syncer closes that window to the few milliseconds an
// fsync takes, without anyone waiting for it: request() after each commit, and a worker
// fsyncs the WAL file (any descriptor's fsync flushes the file's dirty pages).
//
// flush() waits for every sync requested so far (the store's destructor calls it, so closing
// the window leaves the last commit on disk).
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

namespace tokenscope::app {

class WalSyncer {
  public:
    // wal: the database's "-wal" file. It need not exist yet (SQLite creates it on the first
    // write and may delete it when the last connection closes): a sync finds no file and has
    // nothing to do.
    explicit WalSyncer(std::filesystem::path wal);
    ~WalSyncer();
    WalSyncer(const WalSyncer&) = delete;
    WalSyncer& operator=(const WalSyncer&) = delete;

    // Asks for an fsync of the WAL as it is now; returns at once.
    void request();
    // Returns when every sync requested before the call has completed.
    void flush();

    // Completed fsyncs that found the file (several requests may share one). For tests.
    std::uint64_t syncs() const;
    // The last failure ("" when none): the path and the system's message, also logged.
    std::string last_error() const;

  private:
    void run();

    std::filesystem::path wal_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable done_;
    std::uint64_t requested_ = 0;
    std::uint64_t completed_ = 0;
    std::uint64_t syncs_ = 0;
    std::string last_error_;
    bool stopping_ = false;
    std::thread worker_;  // last: starts after the members above exist
};

// fsyncs one file's data; false (with `error` set) when it exists but cannot be synced. A file
// that does not exist is not an error (returns true, `existed` false).
bool sync_file_data(const std::filesystem::path& path, bool& existed, std::string& error);

}  // namespace tokenscope::app
