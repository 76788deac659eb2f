#pragma once
// RemoteEngine: chat with a model served elsewhere over the OpenAI API (vLLM, SGLang,
// llama.cpp's llama-server, Ollama, `tokenscope-cli serve`), giving the same kind of
// per-token events the local engine gives. No Qt: the CLI and the GUI's worker both use it.
//
//   RemoteEngine remote({.url = "http://gpu-box:8000/v1", .api_key = key});
//   remote.connect();                       // GET /v1/models: checks or picks the model
//   auto result = remote.chat(request, [](const RemoteToken& t) { ... });  // streams (SSE)
//   remote.cancel();                        // from any thread: closes the stream
//   auto metrics = remote.metrics();        // GET /metrics, whichever engine's names
//
// What a server does not give degrades to a notice, not a failure: no logprobs (Ollama before
// its logprobs support, a vLLM refusing top_logprobs above --max-logprobs: the request is
// retried without), no /metrics, no /tokenscope/v1/kv. Errors that end a request (refused
// connection, 401, unknown model, a body that is not JSON) throw RemoteError with one line
// naming the URL and the status.
//
// Threads: one request at a time per RemoteEngine (the worker and the CLI are sequential);
// cancel() may come from any thread.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "remote_types.h"
#include "server_metrics.h"
#include "server_url.h"

namespace tokenscope::remote {

struct RemoteOptions {
    std::string url;      // http(s)://host:port[/prefix][/v1]
    std::string api_key;  // sent as "Authorization: Bearer KEY" when set
    std::string model;    // empty: the first /v1/models lists
    int connect_timeout_s = 10;
    // Between bytes of an answer: a long prompt on a busy server may take this long to its
    // first token.
    int read_timeout_s = 600;
};

// True when this binary's cpp-httplib was built with OpenSSL (https:// URLs work).
bool https_supported();

class RemoteEngine {
  public:
    // Throws InvalidArgument for a malformed URL, or an https URL without TLS support.
    explicit RemoteEngine(RemoteOptions options);
    ~RemoteEngine();
    RemoteEngine(const RemoteEngine&) = delete;
    RemoteEngine& operator=(const RemoteEngine&) = delete;

    // GET /v1/models. Throws RemoteError.
    std::vector<ModelEntry> models();
    // Lists the models and picks options.model (RemoteError if the server does not list it)
    // or the first. Servers without /v1/models are accepted when a model was named.
    const ModelEntry& connect();
    const ModelEntry& model() const { return model_; }
    // The server is `tokenscope-cli serve`: ask for its candidates extension, read its KV map.
    bool is_tokenscope() const { return model_.owned_by == "tokenscope"; }
    const ServerUrl& url() const { return url_; }

    // Streams one reply; on_token sees each token as it arrives (on this thread). Returns when
    // the reply ends, is cancelled (result.cancelled) or fails (RemoteError). connect() first.
    ChatResult chat(const ChatRequest& request,
                    const std::function<void(const RemoteToken&)>& on_token);
    // Ends the reply in progress from any thread; its chat() returns with cancelled = true.
    void cancel();

    // GET /metrics. nullopt (and why, for the user) when the server has none or it says
    // nothing we recognise. Never throws.
    std::optional<ServerMetrics> metrics(std::string* why_not = nullptr);
    // GET /tokenscope/v1/kv (our server's block map). nullopt for other servers.
    std::optional<nlohmann::json> kv_map();
    // GET /tokenscope/v1/schedule?since=N (our server): the engine's steps from N on.
    // nullopt for other servers or a failed request.
    std::optional<nlohmann::json> schedule(std::uint64_t since);
    // GET /tokenscope/v1/attention (our server): a finished reply's attention, one layer, one
    // head or (head -1) their mean. nullopt for other servers or when it has none.
    std::optional<nlohmann::json> attention(const std::string& completion_id, int layer, int head);

  private:
    struct Http;
    // chat() without the max_tokens retry: the logprobs fallback only.
    ChatResult chat_with_fallbacks(const ChatRequest& request,
                                   const std::function<void(const RemoteToken&)>& on_token);
    ChatResult stream_once(const ChatRequest& request, bool with_logprobs,
                           const std::function<void(const RemoteToken&)>& on_token);
    nlohmann::json chat_body(const ChatRequest& request, bool with_logprobs) const;

    RemoteOptions options_;
    ServerUrl url_;
    ModelEntry model_;
    std::unique_ptr<Http> http_;
    std::atomic<bool> cancel_{false};
    std::mutex active_mutex_;
    std::function<void()> stop_active_;  // closes the socket of the request in flight
};

}  // namespace tokenscope::remote
