#include "engine_loop.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace tokenscope::server {

namespace {
double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}
}  // namespace

void Channel::push(std::vector<runtime::TokenEvent> events) {
    {
        std::lock_guard lock(mutex_);
        for (auto& e : events) events_.push_back(std::move(e));
    }
    cv_.notify_all();
}

void Channel::close(std::string error) {
    {
        std::lock_guard lock(mutex_);
        closed_ = true;
        error_ = std::move(error);
    }
    cv_.notify_all();
}

std::vector<runtime::TokenEvent> Channel::wait(std::chrono::milliseconds timeout,
                                               std::string& error) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, timeout, [&] { return !events_.empty() || closed_; });
    std::vector<runtime::TokenEvent> out;
    out.swap(events_);
    if (closed_ && out.empty()) error = error_.empty() ? "the request was closed" : error_;
    return out;
}

EngineLoop::EngineLoop(std::unique_ptr<runtime::Engine> engine, EngineLoopOptions options,
                       Metrics& metrics)
    : engine_(std::move(engine)), options_(options), metrics_(metrics) {
    options_.parallel = std::max(1, options_.parallel);
    options_.queue = std::max(0, options_.queue);
    kv_.stats = engine_->kv_stats();
    publish_state();
    thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() {
    stop();
}

void EngineLoop::stop() {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ && !thread_.joinable()) return;
        stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

bool EngineLoop::enqueue(const std::shared_ptr<Job>& job) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return false;
        // Slots free in the engine count as room too: a job waits here only until the loop's
        // next turn admits it.
        const int capacity = options_.parallel + options_.queue;
        if (running_count_ + static_cast<int>(waiting_.size()) >= capacity) return false;
        waiting_.push_back(job);
    }
    cv_.notify_all();
    return true;
}

void EngineLoop::cancel(const std::shared_ptr<Job>& job) {
    {
        std::lock_guard lock(mutex_);
        cancel_requests_.push_back(job);
    }
    cv_.notify_all();
}

void EngineLoop::set_paused(bool paused) {
    {
        std::lock_guard lock(mutex_);
        paused_ = paused;
    }
    cv_.notify_all();
}

Gauges EngineLoop::gauges() const {
    std::lock_guard lock(mutex_);
    Gauges g;
    g.kv_blocks_used = kv_.stats.blocks_used;
    g.kv_blocks_total = kv_.stats.blocks_total;
    g.kv_usage_ratio = kv_.stats.blocks_total > 0
                           ? static_cast<double>(kv_.stats.blocks_used) / kv_.stats.blocks_total
                           : 0.0;
    g.requests_running = running_count_;
    g.requests_waiting = static_cast<int>(waiting_.size());
    return g;
}

KvSnapshot EngineLoop::kv_snapshot() const {
    std::lock_guard lock(mutex_);
    return kv_;
}

int EngineLoop::running() const {
    std::lock_guard lock(mutex_);
    return running_count_;
}

int EngineLoop::waiting() const {
    std::lock_guard lock(mutex_);
    return static_cast<int>(waiting_.size());
}

void EngineLoop::admit_and_cancel() {
    std::unique_lock lock(mutex_);
    std::vector<std::shared_ptr<Job>> cancels;
    cancels.swap(cancel_requests_);
    for (const auto& job : cancels) {
        const auto queued = std::find(waiting_.begin(), waiting_.end(), job);
        if (queued != waiting_.end()) {
            waiting_.erase(queued);
            metrics_.finished("cancelled");
        } else if (job->id != 0 && running_.count(job->id)) {
            engine_->cancel(job->id);  // finishes (and frees its blocks) at the next step
        }
    }
    if (paused_) return;
    while (running_count_ < options_.parallel && !waiting_.empty()) {
        std::shared_ptr<Job> job = waiting_.front();
        waiting_.pop_front();
        lock.unlock();
        const auto prompt_tokens = static_cast<std::int64_t>(job->request.prompt.size());
        try {
            job->id = engine_->submit(job->request);
            running_[job->id] = job;
            metrics_.add_prompt_tokens(prompt_tokens);
            lock.lock();
            ++running_count_;
            continue;
        } catch (const std::exception& e) {
            // The builder validated the request; this is a limit only the engine knows.
            spdlog::warn("serve: the engine refused a request: {}", e.what());
            job->channel->close(std::string("the engine refused the request: ") + e.what());
            metrics_.finished("error");
        }
        lock.lock();
    }
}

void EngineLoop::route(std::vector<runtime::TokenEvent> events) {
    const auto now = std::chrono::steady_clock::now();
    std::map<runtime::RequestId, std::vector<runtime::TokenEvent>> by_request;
    for (auto& e : events) by_request[e.request].push_back(std::move(e));
    for (auto& [id, list] : by_request) {
        const auto it = running_.find(id);
        if (it == running_.end()) continue;
        Job& job = *it->second;
        bool finished = false;
        for (const auto& e : list) {
            if (e.token >= 0) {
                if (job.request.capture.enabled) job.generated.push_back(e.token);
                if (job.tokens == 0) {
                    metrics_.observe_ttft(seconds_between(job.arrived, now));
                } else {
                    metrics_.observe_token_gap(seconds_between(job.last_token, now) /
                                               static_cast<double>(list.size()));
                }
                job.last_token = now;
                ++job.tokens;
                metrics_.add_generated_tokens(1);
            }
            if (e.finished) {
                finished = true;
                metrics_.finished(e.reason == runtime::FinishReason::Cancelled
                                      ? "cancelled"
                                      : runtime::finish_reason_name(e.reason));
            }
        }
        // Published before the last events reach the client, so that a GET right after the
        // response finds it.
        if (finished && job.request.capture.enabled) keep_attention(job);
        job.channel->push(std::move(list));
        if (finished) {
            running_.erase(it);
            std::lock_guard lock(mutex_);
            --running_count_;
        }
    }
}

void EngineLoop::keep_attention(const Job& job) {
    // Shared, not copied: a copy of every layer's rows would hold up the engine thread.
    std::shared_ptr<const inspect::AttentionCapture> capture = engine_->shared_capture(job.id);
    if (!capture) return;
    auto kept = std::make_shared<ServedAttention>(
        ServedAttention{job.public_id, job.request.prompt, std::move(capture)});
    kept->tokens.insert(kept->tokens.end(), job.generated.begin(), job.generated.end());
    std::lock_guard lock(mutex_);
    attention_.push_back(std::move(kept));
    while (attention_.size() > kKeptAttention) attention_.pop_front();
}

std::shared_ptr<const ServedAttention> EngineLoop::attention(const std::string& public_id) const {
    std::lock_guard lock(mutex_);
    for (const auto& a : attention_)
        if (a->public_id == public_id) return a;
    return nullptr;
}

void EngineLoop::record_schedule() {
    const runtime::StepSchedule& schedule = engine_->last_schedule();
    ServedStep step;
    step.budget = schedule.budget;
    step.entries.reserve(schedule.entries.size());
    for (const auto& e : schedule.entries) {
        const auto job = running_.find(e.request);  // before route() drops finished jobs
        step.entries.push_back(
            {job != running_.end() ? job->second->public_id : "#" + std::to_string(e.request),
             e.kind, e.tokens});
    }
    std::lock_guard lock(mutex_);
    for (const auto& job : waiting_)
        step.entries.push_back({job->public_id, runtime::ScheduleEntry::Kind::Waiting, 0});
    step.step = ++steps_taken_;
    schedule_.push_back(std::move(step));
    while (schedule_.size() > kKeptSteps) schedule_.pop_front();
}

std::vector<ServedStep> EngineLoop::schedule_since(std::uint64_t since) const {
    std::lock_guard lock(mutex_);
    std::vector<ServedStep> out;
    for (const auto& s : schedule_)
        if (s.step >= since) out.push_back(s);
    return out;
}

void EngineLoop::publish_state() {
    kv::KvStats stats = engine_->kv_stats();
    std::lock_guard lock(mutex_);
    kv_.stats = std::move(stats);
    ++kv_.steps;
}

void EngineLoop::run() {
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            cv_.wait(lock, [&] {
                return stopping_ || !cancel_requests_.empty() ||
                       (!paused_ && (!waiting_.empty() || !running_.empty()));
            });
            if (stopping_) break;
        }
        admit_and_cancel();
        bool paused = false;
        {
            std::lock_guard lock(mutex_);
            paused = paused_;
        }
        if (paused || !engine_->has_work()) {
            publish_state();
            continue;
        }
        std::vector<runtime::TokenEvent> events;
        try {
            events = engine_->step();
        } catch (const std::exception& e) {
            // A step that throws leaves no request in a known state: fail them all, keep serving.
            spdlog::error("serve: engine step failed: {}", e.what());
            for (auto& [id, job] : running_) {
                engine_->cancel(id);
                job->channel->close(std::string("the engine failed: ") + e.what());
            }
            running_.clear();
            {
                std::lock_guard lock(mutex_);
                running_count_ = 0;
            }
            while (engine_->has_work()) {
                try {
                    engine_->step();
                } catch (const std::exception&) {
                    break;
                }
            }
            continue;
        }
        record_schedule();
        route(std::move(events));
        publish_state();
        if (options_.step_pause.count() > 0) std::this_thread::sleep_for(options_.step_pause);
    }
    // Shutting down: nobody will step again; tell every waiting worker.
    std::lock_guard lock(mutex_);
    for (auto& job : waiting_) job->channel->close("the server is shutting down");
    waiting_.clear();
    for (auto& [id, job] : running_) job->channel->close("the server is shutting down");
    running_.clear();
    running_count_ = 0;
}

}  // namespace tokenscope::server
