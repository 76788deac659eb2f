#include "remote_engine.h"

#include <chrono>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "chat_stream.h"
#include "http_errors.h"
#include "sse_reader.h"

namespace tokenscope::remote {

using nlohmann::json;

bool https_supported() {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    return true;
#else
    return false;
#endif
}

// A fresh httplib client per request: cancel() stops exactly the request in flight, and a
// metrics scrape never shares a socket with a stream.
struct RemoteEngine::Http {
    const RemoteOptions& options;
    const ServerUrl& url;

    std::unique_ptr<httplib::Client> client() const {
        auto c = std::make_unique<httplib::Client>(url.origin());
        c->set_connection_timeout(options.connect_timeout_s, 0);
        c->set_read_timeout(options.read_timeout_s, 0);
        c->set_write_timeout(30, 0);
        if (!options.api_key.empty()) c->set_bearer_token_auth(options.api_key);
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
        c->enable_server_certificate_verification(true);
#endif
        return c;
    }

    struct Reply {
        int status = 0;
        std::string body;
        int error = 0;  // httplib::Error when status is 0
    };

    Reply get(const std::string& path, int read_timeout_s = 0) const {
        auto c = client();
        if (read_timeout_s > 0) c->set_read_timeout(read_timeout_s, 0);
        Reply reply;
        if (auto r = c->Get(url.prefix + path)) {
            reply.status = r->status;
            reply.body = r->body;
        } else {
            reply.error = static_cast<int>(r.error());
        }
        return reply;
    }
};

RemoteEngine::RemoteEngine(RemoteOptions options)
    : options_(std::move(options)), url_(parse_server_url(options_.url)) {
    if (url_.scheme == "https" && !https_supported())
        throw InvalidArgument("server URL '" + options_.url +
                              "': https needs cpp-httplib built with OpenSSL, which this build "
                              "lacks; use http:// (e.g. through an SSH tunnel)");
    http_ = std::make_unique<Http>(Http{options_, url_});
}

RemoteEngine::~RemoteEngine() = default;

std::vector<ModelEntry> RemoteEngine::models() {
    const std::string where = url_.describe("/v1/models");
    const auto reply = http_->get("/v1/models", 30);
    if (reply.status == 0) throw RemoteError(transport_error(where, reply.error));
    if (reply.status != 200)
        throw RemoteError(status_error(where, reply.status, reply.body), reply.status);
    const json j = json::parse(reply.body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("data") || !j["data"].is_array()) {
        throw RemoteError(where +
                              " answered 200 but not with an OpenAI model list (is this an "
                              "OpenAI-compatible server?): " +
                              server_message(reply.body),
                          reply.status);
    }
    std::vector<ModelEntry> out;
    for (const auto& m : j["data"]) {
        if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) continue;
        ModelEntry e;
        e.id = m["id"].get<std::string>();
        if (m.contains("owned_by") && m["owned_by"].is_string())
            e.owned_by = m["owned_by"].get<std::string>();
        // Ours: meta.context_length; vLLM: max_model_len; llama.cpp: meta.n_ctx_train.
        if (m.contains("max_model_len") && m["max_model_len"].is_number_integer())
            e.context_length = m["max_model_len"].get<std::int64_t>();
        if (m.contains("meta") && m["meta"].is_object()) {
            const json& meta = m["meta"];
            for (const char* key : {"context_length", "n_ctx_train"})
                if (meta.contains(key) && meta[key].is_number_integer())
                    e.context_length = meta[key].get<std::int64_t>();
        }
        out.push_back(std::move(e));
    }
    return out;
}

const ModelEntry& RemoteEngine::connect() {
    std::vector<ModelEntry> list;
    try {
        list = models();
    } catch (const RemoteError& e) {
        // A few servers have no model list; with a model named, chatting may still work.
        if (e.status() != 404 || options_.model.empty()) throw;
        spdlog::warn("remote: {}; using the model '{}' as given", e.what(), options_.model);
        model_ = ModelEntry{options_.model, {}, {}};
        return model_;
    }
    if (list.empty())
        throw RemoteError(url_.describe("/v1/models") +
                          " lists no models: the server has none loaded");
    if (options_.model.empty()) {
        model_ = list.front();
        return model_;
    }
    for (const auto& m : list) {
        if (m.id == options_.model) {
            model_ = m;
            return model_;
        }
    }
    std::string names;
    for (const auto& m : list) names += (names.empty() ? "" : ", ") + m.id;
    throw RemoteError("the server at " + url_.origin() + url_.prefix + " has no model '" +
                      options_.model + "'; it serves: " + names);
}

json RemoteEngine::chat_body(const ChatRequest& request, bool with_logprobs) const {
    json messages = json::array();
    for (const auto& m : request.messages)
        messages.push_back({{"role", m.role}, {"content", m.content}});
    json body = {{"model", model_.id},
                 {"messages", std::move(messages)},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}}};
    if (request.max_tokens > 0) body["max_tokens"] = request.max_tokens;
    if (request.temperature) body["temperature"] = *request.temperature;
    if (request.top_p) body["top_p"] = *request.top_p;
    if (request.top_k) body["top_k"] = *request.top_k;
    if (request.min_p) body["min_p"] = *request.min_p;
    if (request.repetition_penalty) body["repetition_penalty"] = *request.repetition_penalty;
    if (request.seed) body["seed"] = *request.seed;
    if (!request.stop.empty()) body["stop"] = request.stop;
    if (with_logprobs && request.top_logprobs > 0) {
        body["logprobs"] = true;
        body["top_logprobs"] = request.top_logprobs;
    }
    // Our own server adds token ids and the candidates before and after shaping.
    if (is_tokenscope()) body["tokenscope"] = {{"candidates", true}, {"attention", true}};
    return body;
}

namespace {
// The server refused the answer's length: its context leaves less after this prompt (vLLM and
// our server answer 400 naming max_tokens; llama-server and Ollama shorten it themselves).
bool refused_max_tokens(const RemoteError& e) {
    return (e.status() == 400 || e.status() == 422) &&
           std::string_view(e.what()).find("max_tokens") != std::string_view::npos;
}
}  // namespace

ChatResult RemoteEngine::chat(const ChatRequest& request,
                              const std::function<void(const RemoteToken&)>& on_token) {
    try {
        return chat_with_fallbacks(request, on_token);
    } catch (const RemoteError& e) {
        // A long conversation on a short context: the user wants the reply that fits, so ask
        // again without max_tokens (the server then allows what its context leaves).
        if (request.max_tokens <= 0 || !refused_max_tokens(e)) throw;
        spdlog::warn("remote: {}; retrying without max_tokens", e.what());
        ChatRequest fit = request;
        fit.max_tokens = 0;
        ChatResult result = chat_with_fallbacks(fit, on_token);
        result.notices.push_back("the server refused max_tokens " +
                                 std::to_string(request.max_tokens) + " (" + e.what() +
                                 "): the reply may use what is left of its context");
        return result;
    }
}

ChatResult RemoteEngine::chat_with_fallbacks(
    const ChatRequest& request, const std::function<void(const RemoteToken&)>& on_token) {
    if (model_.id.empty()) connect();
    cancel_.store(false);
    const bool want_logprobs = request.top_logprobs > 0;
    try {
        return stream_once(request, want_logprobs, on_token);
    } catch (const RemoteError& e) {
        // vLLM refuses top_logprobs above --max-logprobs, some servers refuse logprobs at all:
        // the reply is worth more than the alternatives, so ask once more without them.
        if (!want_logprobs || (e.status() != 400 && e.status() != 422) || refused_max_tokens(e))
            throw;
        spdlog::warn("remote: {}; retrying without logprobs", e.what());
        ChatResult result = stream_once(request, false, on_token);
        result.notices.push_back("the server refused logprobs (" + std::string(e.what()) +
                                 "): no token probabilities for this reply");
        return result;
    }
}

ChatResult RemoteEngine::stream_once(const ChatRequest& request, bool with_logprobs,
                                     const std::function<void(const RemoteToken&)>& on_token) {
    const std::string where = url_.describe("/v1/chat/completions");
    auto client = http_->client();
    {
        std::lock_guard lock(active_mutex_);
        stop_active_ = [c = client.get()] { c->stop(); };
    }
    struct Unregister {
        RemoteEngine& self;
        ~Unregister() {
            std::lock_guard lock(self.active_mutex_);
            self.stop_active_ = nullptr;
        }
    } unregister{*this};

    const auto start = std::chrono::steady_clock::now();
    auto now_ms = [&] {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    };
    ChatStreamDecoder decoder;
    SseReader sse;
    int status = 0;
    bool event_stream = false;
    std::string raw;  // the body of an error, or of a server that did not stream
    std::string failure;
    auto handle = [&](const std::string& data) {
        if (data == "[DONE]") return;
        const json chunk = json::parse(data, nullptr, false);
        if (chunk.is_discarded()) {
            failure = where + " sent a stream event that is not JSON: " + data.substr(0, 120);
            return;
        }
        for (const auto& t : decoder.decode(chunk, now_ms())) on_token(t);
    };

    httplib::Request req;
    req.method = "POST";
    req.path = url_.prefix + "/v1/chat/completions";
    req.body = chat_body(request, with_logprobs).dump();
    req.set_header("Content-Type", "application/json");
    req.set_header("Accept", "text/event-stream");
    req.response_handler = [&](const httplib::Response& r) {
        status = r.status;
        event_stream =
            r.get_header_value("Content-Type").find("text/event-stream") != std::string::npos;
        return !cancel_.load();
    };
    std::exception_ptr thrown;
    req.content_receiver = [&](const char* data, std::size_t size, std::uint64_t, std::uint64_t) {
        if (cancel_.load()) return false;
        if (status != 200 || !event_stream) {
            raw.append(data, size);
            return raw.size() < (64u << 20);
        }
        try {
            for (const auto& event : sse.feed(std::string_view(data, size))) handle(event);
        } catch (...) {
            thrown = std::current_exception();  // the server's error event: rethrown below
            return false;
        }
        return failure.empty() && !cancel_.load();
    };
    spdlog::debug("remote: POST {} ({} logprobs)", where, with_logprobs ? "with" : "without");
    const auto result = client->send(req);
    if (thrown) std::rethrow_exception(thrown);
    ChatResult& out = decoder.result();
    out.total_ms = now_ms();
    if (cancel_.load()) {
        out.cancelled = true;
        out.finish_reason = "cancelled";
        return out;
    }
    if (!result && status == 0)
        throw RemoteError(transport_error(where, static_cast<int>(result.error())));
    if (status != 200) throw RemoteError(status_error(where, status, raw), status);
    if (!failure.empty()) throw RemoteError(failure, status);
    if (event_stream) {
        for (const auto& event : sse.finish()) handle(event);
        if (!failure.empty()) throw RemoteError(failure, status);
        if (!result) throw RemoteError(transport_error(where, static_cast<int>(result.error())));
    } else {
        // A server that ignored "stream": one JSON answer.
        const json whole = json::parse(raw, nullptr, false);
        if (whole.is_discarded() || !whole.is_object())
            throw RemoteError(where + " answered 200 but neither an event stream nor JSON: " +
                                  server_message(raw),
                              status);
        for (const auto& t : decoder.decode_whole(whole, now_ms())) on_token(t);
        out.notices.push_back("the server did not stream this reply");
    }
    out.total_ms = now_ms();
    if (with_logprobs && !out.logprobs && out.tokens > 0)
        out.notices.push_back(
            "the server gave no logprobs: no token probabilities or alternatives");
    return out;
}

void RemoteEngine::cancel() {
    cancel_.store(true);
    std::lock_guard lock(active_mutex_);
    if (stop_active_) stop_active_();
}

std::optional<ServerMetrics> RemoteEngine::metrics(std::string* why_not) {
    const auto reply = http_->get("/metrics", 5);
    auto fail = [&](std::string why) -> std::optional<ServerMetrics> {
        if (why_not) *why_not = std::move(why);
        return std::nullopt;
    };
    if (reply.status == 0) return fail(transport_error(url_.describe("/metrics"), reply.error));
    if (reply.status == 404)
        return fail(
            "this server has no /metrics (llama-server: start it with --metrics; SGLang: "
            "--enable-metrics; Ollama has none)");
    if (reply.status != 200)
        return fail(status_error(url_.describe("/metrics"), reply.status, reply.body));
    ServerMetrics m = read_server_metrics(reply.body);
    if (!m.recognised())
        return fail(
            "this server's /metrics has none of the KV cache or request gauges tokenscope reads");
    return m;
}

std::optional<json> RemoteEngine::kv_map() {
    if (!is_tokenscope()) return std::nullopt;
    const auto reply = http_->get("/tokenscope/v1/kv", 5);
    if (reply.status != 200) return std::nullopt;
    json j = json::parse(reply.body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    return j;
}

std::optional<json> RemoteEngine::schedule(std::uint64_t since) {
    if (!is_tokenscope()) return std::nullopt;
    const auto reply = http_->get("/tokenscope/v1/schedule?since=" + std::to_string(since), 5);
    if (reply.status != 200) return std::nullopt;
    json j = json::parse(reply.body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("steps")) return std::nullopt;
    return j;
}

std::optional<json> RemoteEngine::attention(const std::string& completion_id, int layer, int head) {
    if (!is_tokenscope() || completion_id.empty()) return std::nullopt;
    std::string path =
        "/tokenscope/v1/attention?id=" + completion_id + "&layer=" + std::to_string(layer);
    if (head >= 0) path += "&head=" + std::to_string(head);
    const auto reply = http_->get(path, 10);
    if (reply.status != 200) return std::nullopt;
    json j = json::parse(reply.body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("rows")) return std::nullopt;
    return j;
}

}  // namespace tokenscope::remote
