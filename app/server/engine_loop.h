#pragma once
// The one thread that owns the Engine.
//
// The engine is not thread-safe, and continuous batching wants every running request in the
// same step anyway, so HTTP worker threads never touch it. They hand a Job to enqueue(); the
// loop admits queued jobs while fewer than `parallel` run, steps while there is work, and
// routes each TokenEvent to its job's channel, where the worker that serves the HTTP response
// waits. Cancellation (a client that went away) is a flag the loop turns into
// Engine::cancel() before its next step, which frees the request's KV blocks.
//
//   HTTP worker --enqueue(Job)--> [waiting queue, bounded] --admit--> Engine (step, step, ...)
//   HTTP worker <--Channel (events)-------------------------------------- routes TokenEvents
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "metrics.h"
#include "runtime/engine.h"

namespace tokenscope::server {

// What the loop tells a waiting HTTP worker. Events arrive in order; the last one of a request
// has `finished` set, or the channel is closed with an error (server shutting down, the
// engine refused the request).
class Channel {
  public:
    void push(std::vector<runtime::TokenEvent> events);
    void close(std::string error);
    // Waits up to `timeout` for events; returns what arrived (possibly nothing) and, when the
    // channel was closed with an error, sets `error`.
    std::vector<runtime::TokenEvent> wait(std::chrono::milliseconds timeout, std::string& error);

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<runtime::TokenEvent> events_;
    bool closed_ = false;
    std::string error_;
};

struct Job {
    runtime::Request request;
    std::shared_ptr<Channel> channel = std::make_shared<Channel>();
    std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
    // The id the client sees ("chatcmpl-…"): GET /tokenscope/v1/attention finds a finished
    // request's capture by it.
    std::string public_id;
    // Engine-thread state.
    runtime::RequestId id = 0;
    std::vector<std::int32_t> generated;  // kept only when the request captures attention
    std::int64_t tokens = 0;
    std::chrono::steady_clock::time_point last_token;
};

struct EngineLoopOptions {
    int parallel = 4;  // requests generating at once (in one batch)
    int queue = 64;    // requests waiting for a slot; beyond that enqueue() refuses
    // Tests only: a pause after every step, so a test can act while a request is mid-stream.
    std::chrono::milliseconds step_pause{0};
};

// A finished request's attention capture (it asked with "tokenscope": {"attention": true}):
// the sequence's tokens and the weights of its first positions. Immutable once published: the
// server's requests have no conversation key, so the engine never extends a finished capture.
struct ServedAttention {
    std::string public_id;
    std::vector<std::int32_t> tokens;  // prompt, then the answer
    std::shared_ptr<const inspect::AttentionCapture> capture;
};

// One engine step as the scheduler ran it, for GET /tokenscope/v1/schedule (the app's
// server timeline): each request by the id its client sees, and what the step did for it.
// Requests still in the server's own queue (not yet given to the engine) are listed as
// waiting, so the timeline shows queueing too.
struct ServedScheduleEntry {
    std::string request;
    runtime::ScheduleEntry::Kind kind = runtime::ScheduleEntry::Kind::Waiting;
    std::int64_t tokens = 0;
};
struct ServedStep {
    std::uint64_t step = 0;   // 1 for the loop's first engine step
    std::int64_t budget = 0;  // tokens the engine may compute per step
    std::vector<ServedScheduleEntry> entries;
};

// A copy of what the KV panel shows, taken by the engine thread after each step.
struct KvSnapshot {
    kv::KvStats stats;
    std::uint64_t steps = 0;  // times the state was published (after each step, or idle)
};

class EngineLoop {
  public:
    EngineLoop(std::unique_ptr<runtime::Engine> engine, EngineLoopOptions options,
               Metrics& metrics);
    ~EngineLoop();  // stops the thread; open channels are closed with an error
    EngineLoop(const EngineLoop&) = delete;
    EngineLoop& operator=(const EngineLoop&) = delete;

    // Immutable parts only (tokenizer, config, file) may be read from other threads.
    const runtime::Engine& engine() const { return *engine_; }

    // Queues a job; false when the queue is full (the caller answers 429).
    bool enqueue(const std::shared_ptr<Job>& job);
    // The client is gone: drop the job from the queue, or cancel it in the engine.
    void cancel(const std::shared_ptr<Job>& job);
    void stop();

    KvSnapshot kv_snapshot() const;
    // The capture of a recently finished request that asked for one (the last
    // kKeptAttention), or null.
    std::shared_ptr<const ServedAttention> attention(const std::string& public_id) const;
    static constexpr std::size_t kKeptAttention = 8;
    // The recorded steps numbered `since` and later (at most the last kKeptSteps), oldest
    // first.
    std::vector<ServedStep> schedule_since(std::uint64_t since) const;
    static constexpr std::size_t kKeptSteps = 512;
    // For /metrics: KV usage as of the last step, requests running and waiting now.
    Gauges gauges() const;
    int running() const;
    int waiting() const;

    // Tests: hold admissions and steps (requests stay queued) until resumed.
    void set_paused(bool paused);

  private:
    void run();
    void admit_and_cancel();
    void route(std::vector<runtime::TokenEvent> events);
    void publish_state();
    void keep_attention(const Job& job);
    void record_schedule();

    std::unique_ptr<runtime::Engine> engine_;
    EngineLoopOptions options_;
    Metrics& metrics_;

    mutable std::mutex mutex_;  // guards everything below up to the thread
    std::condition_variable cv_;
    std::deque<std::shared_ptr<Job>> waiting_;
    std::vector<std::shared_ptr<Job>> cancel_requests_;
    int running_count_ = 0;
    bool stopping_ = false;
    bool paused_ = false;
    KvSnapshot kv_;
    std::deque<std::shared_ptr<const ServedAttention>> attention_;  // newest last
    std::deque<ServedStep> schedule_;                               // newest last
    std::uint64_t steps_taken_ = 0;

    // Engine-thread only.
    std::map<runtime::RequestId, std::shared_ptr<Job>> running_;

    std::thread thread_;
};

}  // namespace tokenscope::server
