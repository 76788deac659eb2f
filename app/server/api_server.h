#pragma once
// ApiServer: the OpenAI-compatible HTTP server on our engine (`tokenscope-cli serve`; later
// the app's "Serve this model"). No Qt: the CLI builds without it.
//
//   GET  /health                       {"status": "ok"}
//   GET  /v1/models                    the one served model
//   POST /v1/chat/completions          messages -> the model's own chat template
//   POST /v1/completions               raw prompt
//   GET  /metrics                      Prometheus text (metrics.h)
//   GET  /tokenscope/v1/kv             the KV cache's block map and statistics
//   GET  /tokenscope/v1/attention      ?id=&layer=[&head=]: a finished request's attention
//                                      ("tokenscope": {"attention": true} on its completion)
//   (candidates before/after shaping: "tokenscope": {"candidates": true} on a completion)
//
// Threads: cpp-httplib's worker pool parses requests, builds prompts and waits on a Channel;
// one EngineLoop thread owns the engine (engine_loop.h). Safe by default: loopback only unless
// an API key is set, a body size limit, a bounded queue (429 with Retry-After), CORS off.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "engine_loop.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"

namespace tokenscope::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;          // 0: any free port (bind() tells which)
    std::string api_key;      // empty: no authentication (loopback only)
    std::string cors_origin;  // empty: no CORS headers
    std::string model_id;     // what /v1/models lists and requests must name
    std::size_t max_body_bytes = 1 << 20;
    std::int64_t context = 0;  // prompt + answer per request; 0: model and cache limit
    EngineLoopOptions loop;
    runtime::SamplingParams sampling;  // defaults a request's fields override
    std::optional<std::string> template_name;
};

// 127.0.0.0/8, ::1 and "localhost".
bool is_loopback(const std::string& host);
// Throws InvalidArgument for a non-loopback host without an API key. The ApiServer checks it;
// callers check it too before loading a model, so that the refusal does not take seconds.
void require_safe_bind(const ServerOptions& options);

class ApiServer {
  public:
    // Throws InvalidArgument for unsafe or inconsistent options (a non-loopback host without
    // an API key).
    ApiServer(std::unique_ptr<runtime::Engine> engine, ServerOptions options);
    ~ApiServer();
    ApiServer(const ApiServer&) = delete;
    ApiServer& operator=(const ApiServer&) = delete;

    // Binds the socket; returns the port (the chosen one for port 0). Throws IoError.
    int bind();
    // Serves until stop(); call after bind().
    void listen();
    // bind() and listen() on a thread of its own (tests, the GUI). Returns the port.
    int start();
    // Stops accepting, ends open streams, joins. Safe to call twice and from another thread.
    void stop();

    EngineLoop& loop();
    const ServerOptions& options() const;
    int port() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace tokenscope::server
