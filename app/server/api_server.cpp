#include "api_server.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "api_error.h"
#include "openai_request.h"
#include "openai_response.h"
#include "peer_socket.h"
#include "request_builder.h"
#include "util/error.h"

namespace tokenscope::server {

using nlohmann::json;

bool is_loopback(const std::string& host) {
    return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

namespace {

std::int64_t served_context(const runtime::Engine& engine, std::int64_t asked) {
    const std::int64_t limit =
        std::min<std::int64_t>(engine.config().context_length, engine.options().kv_capacity_tokens);
    return asked > 0 ? std::min(asked, limit) : limit;
}

void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status();
    res.set_content(dump_json(e.to_json()), "application/json");
}

// Streams poll their channel this often, so a stalled client is noticed and a shutdown ends
// them promptly.
constexpr std::chrono::milliseconds kStreamPoll{200};

}  // namespace

struct ApiServer::Impl {
    ServerOptions options;
    Metrics metrics;
    EngineLoop loop;
    RequestBuilder builder;
    httplib::Server http;
    std::thread thread;
    int port = 0;
    // The listening socket, as httplib's socket-options hook saw it (see bind()).
    socket_t listen_socket = INVALID_SOCKET;
    std::atomic<std::uint64_t> next_id{1};
    std::string id_prefix;
    std::int64_t created = 0;

    Impl(std::unique_ptr<runtime::Engine> engine, ServerOptions o)
        : options(std::move(o)),
          loop(std::move(engine), options.loop, metrics),
          builder(loop.engine(), options.model_id, options.sampling,
                  served_context(loop.engine(), options.context), options.template_name) {
        std::random_device random;
        id_prefix = fmt::format("{:08x}", random());
        created = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
        configure();
        routes();
    }

    std::string next_request_id(const char* kind) {
        return fmt::format("{}-{}{:06}", kind, id_prefix, next_id.fetch_add(1));
    }

    void configure() {
        // Each open stream holds a worker for its whole life, so the pool is as large as the
        // requests the engine and the queue take, plus a few for /health and /metrics.
        const auto threads =
            static_cast<std::size_t>(std::min(options.loop.parallel + options.loop.queue + 4, 512));
        http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
        http.set_payload_max_length(options.max_body_bytes);
        // An idle keep-alive connection holds its worker until this timeout, and stop() waits
        // for every worker: httplib's 5 s default made each shutdown take 5 s.
        http.set_keep_alive_timeout(1);
        http.set_socket_options([this](socket_t sock) {
            httplib::default_socket_options(sock);
            listen_socket = sock;
        });
        http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
            spdlog::info("serve: {} {} -> {}", req.method, req.path, res.status);
        });
        // Errors httplib answers itself (no route, body too large) get OpenAI's shape too.
        http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
            if (!res.body.empty()) return;
            std::string message;
            switch (res.status) {
                case 404:
                    message = "no route " + req.method + " " + req.path;
                    break;
                case 413:
                    message = fmt::format("the request body is larger than the limit of {} bytes",
                                          options.max_body_bytes);
                    break;
                default:
                    message = fmt::format("HTTP {} on {} {}", res.status, req.method, req.path);
                    break;
            }
            send_error(res,
                       ApiError(res.status, message, {},
                                res.status == 404 ? "not_found_error" : "invalid_request_error"));
        });
        http.set_exception_handler(
            [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
                std::string what = "unknown exception";
                try {
                    std::rethrow_exception(ep);
                } catch (const std::exception& e) {
                    what = e.what();
                } catch (...) {
                }
                spdlog::error("serve: {} {}: {}", req.method, req.path, what);
                send_error(res, ApiError(500, "internal error: " + what, {}, "server_error"));
            });
        http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
            if (req.method == "OPTIONS") return httplib::Server::HandlerResponse::Unhandled;
            const bool guarded =
                req.path.rfind("/v1/", 0) == 0 || req.path.rfind("/tokenscope/", 0) == 0;
            if (!guarded || options.api_key.empty())
                return httplib::Server::HandlerResponse::Unhandled;
            if (req.get_header_value("Authorization") == "Bearer " + options.api_key) {
                return httplib::Server::HandlerResponse::Unhandled;
            }
            const bool missing = !req.has_header("Authorization");
            send_error(
                res,
                ApiError(401,
                         missing ? "this server needs an API key: send 'Authorization: Bearer KEY'"
                                 : "the API key in 'Authorization' is not this server's",
                         {}, "authentication_error", "invalid_api_key"));
            add_cors(res);
            return httplib::Server::HandlerResponse::Handled;
        });
        http.set_post_routing_handler(
            [this](const httplib::Request&, httplib::Response& res) { add_cors(res); });
    }

    void add_cors(httplib::Response& res) const {
        if (options.cors_origin.empty()) return;
        res.set_header("Access-Control-Allow-Origin", options.cors_origin);
        res.set_header("Vary", "Origin");
    }

    void routes() {
        http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(R"({"status":"ok"})", "application/json");
        });
        http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
            res.set_content(dump_json({{"object", "list"}, {"data", json::array({model_json()})}}),
                            "application/json");
        });
        http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
            if (req.matches[1] != options.model_id) {
                send_error(res, ApiError(404,
                                         "the model '" + req.matches[1].str() +
                                             "' does not exist; this server serves '" +
                                             options.model_id + "'",
                                         "model", "invalid_request_error", "model_not_found"));
                return;
            }
            res.set_content(dump_json(model_json()), "application/json");
        });
        http.Post("/v1/chat/completions",
                  [this](const httplib::Request& req, httplib::Response& res) {
                      completion(req, res, Endpoint::ChatCompletions);
                  });
        http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
            completion(req, res, Endpoint::Completions);
        });
        http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
            res.set_content(metrics.render(loop.gauges()),
                            "text/plain; version=0.0.4; charset=utf-8");
        });
        http.Get("/tokenscope/v1/kv", [this](const httplib::Request&, httplib::Response& res) {
            res.set_content(dump_json(kv_json()), "application/json");
        });
        http.Get("/tokenscope/v1/schedule",
                 [this](const httplib::Request& req, httplib::Response& res) {
                     try {
                         res.set_content(dump_json(schedule_json(req)), "application/json");
                     } catch (const ApiError& e) {
                         send_error(res, e);
                     }
                 });
        http.Get("/tokenscope/v1/attention",
                 [this](const httplib::Request& req, httplib::Response& res) {
                     try {
                         res.set_content(dump_json(attention_json(req)), "application/json");
                     } catch (const ApiError& e) {
                         send_error(res, e);
                     }
                 });
        if (!options.cors_origin.empty()) {
            http.Options(R"(.*)", [this](const httplib::Request&, httplib::Response& res) {
                add_cors(res);
                res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
                res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
                res.set_header("Access-Control-Max-Age", "600");
                res.status = 204;
            });
        }
    }

    json model_json() const {
        const auto& engine = loop.engine();
        return {{"id", options.model_id},
                {"object", "model"},
                {"created", created},
                {"owned_by", "tokenscope"},
                {"meta",
                 {{"architecture", engine.config().architecture},
                  {"context_length", builder.context()},
                  {"vocab_size", engine.config().vocab_size},
                  {"chat_template", builder.template_description()}}}};
    }

    json kv_json() const {
        const KvSnapshot snap = loop.kv_snapshot();
        const kv::KvStats& s = snap.stats;
        json sequences = json::array();
        for (const auto& q : s.sequences) {
            sequences.push_back({{"seq", q.seq},
                                 {"blocks", q.blocks},
                                 {"shared_blocks", q.shared_blocks},
                                 {"tokens", q.tokens}});
        }
        return {{"blocks_total", s.blocks_total},
                {"blocks_used", s.blocks_used},
                {"blocks_free", s.blocks_free},
                {"block_size", s.block_size},
                {"tokens_logical", s.tokens_logical},
                {"tokens_stored", s.tokens_stored},
                {"bytes_per_token", s.bytes_per_token},
                {"bytes_total", s.bytes_total},
                {"bytes_used", s.bytes_used},
                {"sequences", std::move(sequences)},
                {"block_owner", s.block_owner},
                {"block_refs", s.block_refs},
                {"requests_running", loop.running()},
                {"requests_waiting", loop.waiting()},
                {"steps", snap.steps}};
    }

    // GET /tokenscope/v1/schedule[?since=N]: the engine's recent steps (the last
    // EngineLoop::kKeptSteps), each request by its completion id and what the step did for it
    // (prefill / decode / verify with a token count, waiting, preempted). A poller passes the
    // `next` of its last answer as `since` and gets only the steps it has not seen.
    json schedule_json(const httplib::Request& req) const {
        std::uint64_t since = 0;
        if (req.has_param("since")) {
            const std::string text = req.get_param_value("since");
            std::size_t used = 0;
            try {
                since = std::stoull(text, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (text.empty() || used != text.size() || text[0] == '-')
                throw bad_request(
                    fmt::format("'since' must be a step number (0 or more), got '{}'", text),
                    "since");
        }
        const std::vector<ServedStep> steps = loop.schedule_since(since);
        json list = json::array();
        std::int64_t budget = 0;
        for (const auto& s : steps) {
            json entries = json::array();
            for (const auto& e : s.entries)
                entries.push_back({{"request", e.request},
                                   {"kind", runtime::schedule_kind_name(e.kind)},
                                   {"tokens", e.tokens}});
            list.push_back(
                {{"step", s.step}, {"budget", s.budget}, {"entries", std::move(entries)}});
            budget = s.budget;
        }
        return {{"object", "tokenscope.schedule"},
                {"budget", budget},
                {"next", steps.empty() ? since : steps.back().step + 1},
                {"steps", std::move(list)}};
    }

    // GET /tokenscope/v1/attention?id=ID&layer=L[&head=H]: the attention of a finished request
    // that asked for it ("tokenscope": {"attention": true}), one layer, one head or (no head)
    // their mean: row q holds query q's weights over keys 0..q.
    json attention_json(const httplib::Request& req) const {
        const auto& config = loop.engine().config();
        auto whole = [&](const char* name, std::int64_t lo, std::int64_t hi) -> std::int64_t {
            const std::string text = req.get_param_value(name);
            std::size_t used = 0;
            std::int64_t v = 0;
            try {
                v = std::stoll(text, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (text.empty() || used != text.size() || v < lo || v > hi)
                throw bad_request(fmt::format("'{}' must be an integer from {} to {}, got '{}'",
                                              name, lo, hi, text),
                                  name);
            return v;
        };
        const std::string id = req.get_param_value("id");
        if (id.empty()) throw bad_request("'id' is required: the id of a completion", "id");
        const auto layer = static_cast<int>(whole("layer", 0, config.layers - 1));
        const int head =
            req.has_param("head") ? static_cast<int>(whole("head", 0, config.heads - 1)) : -1;
        const auto kept = loop.attention(id);
        if (!kept) {
            throw ApiError(404,
                           fmt::format("no attention for '{}': only the last {} finished requests "
                                       "that sent \"tokenscope\": {{\"attention\": true}} are kept",
                                       id, EngineLoop::kKeptAttention),
                           "id", "invalid_request_error", "not_found");
        }
        const auto& tokenizer = loop.engine().tokenizer();
        const std::int64_t positions = kept->capture->rows();
        json tokens = json::array();
        for (std::int64_t p = 0; p < positions && p < std::ssize(kept->tokens); ++p) {
            const std::int32_t t = kept->tokens[static_cast<std::size_t>(p)];
            tokens.push_back(
                {{"id", t},
                 {"piece", tokenizer.piece(t)},
                 {"text", tokenizer.is_control(t) ? tokenizer.piece(t)
                                                  : std::string(tokenizer.token_bytes(t, false))}});
        }
        json rows = json::array();
        for (std::int64_t q = 0; q < positions; ++q)
            rows.push_back(head < 0 ? kept->capture->mean_row(layer, q)
                                    : kept->capture->row(layer, head, q));
        return {{"object", "tokenscope.attention"},
                {"id", id},
                {"layer", layer},
                {"head", head < 0 ? json(nullptr) : json(head)},
                {"layers", config.layers},
                {"heads", config.heads},
                {"positions", positions},
                {"max_positions", kServedAttentionPositions},
                {"tokens", std::move(tokens)},
                {"rows", std::move(rows)}};
    }

    void completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
        CompletionParams params;
        BuiltRequest built;
        try {
            params = parse_completion_request(req.body, endpoint);
            built = builder.build(params);
        } catch (const ApiError& e) {
            send_error(res, e);
            return;
        }
        auto job = std::make_shared<Job>();
        job->request = std::move(built.request);
        job->public_id =
            next_request_id(endpoint == Endpoint::ChatCompletions ? "chatcmpl" : "cmpl");
        if (!loop.enqueue(job)) {
            res.set_header("Retry-After", "1");
            send_error(
                res,
                ApiError(
                    429,
                    fmt::format(
                        "the server is busy: {} requests generating and {} waiting (--parallel {}, "
                        "--queue {}); retry later",
                        loop.running(), loop.waiting(), options.loop.parallel, options.loop.queue),
                    {}, "rate_limit_error", "queue_full"));
            return;
        }
        auto formatter =
            std::make_shared<CompletionFormatter>(params, loop.engine().tokenizer(), job->public_id,
                                                  options.model_id, built.prompt_tokens);
        if (!params.stream) {
            wait_whole(job, *formatter, PeerSocket::of(req), res);
            return;
        }
        stream(job, formatter, res);
    }

    // Non-streaming: the worker waits for the whole answer, and looks at the client's socket
    // between waits: a client that hung up (gave up on a long answer, timed out) cancels its
    // request, which frees its KV blocks and its place in the batch.
    void wait_whole(const std::shared_ptr<Job>& job, CompletionFormatter& formatter,
                    const PeerSocket& peer, httplib::Response& res) {
        std::string error;
        while (!formatter.finished()) {
            if (peer.hung_up()) {
                spdlog::info(
                    "serve: client left before its answer was done; cancelling the request");
                loop.cancel(job);
                res.status = 499;  // nobody reads it (nginx's "client closed request")
                return;
            }
            formatter.collect(job->channel->wait(kStreamPoll, error));
            if (!error.empty()) {
                send_error(res, ApiError(503, error, {}, "server_error"));
                return;
            }
        }
        res.set_content(dump_json(formatter.response()), "application/json");
    }

    void stream(const std::shared_ptr<Job>& job,
                const std::shared_ptr<CompletionFormatter>& formatter, httplib::Response& res) {
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Accel-Buffering", "no");  // proxies (nginx) must not buffer the stream
        auto started = std::make_shared<bool>(false);
        res.set_chunked_content_provider(
            "text/event-stream",
            [this, job, formatter, started](std::size_t, httplib::DataSink& sink) {
                std::string out;
                if (!*started) {
                    out = formatter->stream_start();
                    *started = true;
                }
                std::string error;
                formatter->stream(job->channel->wait(kStreamPoll, error), out);
                if (!error.empty()) {
                    // The status is sent already: the error travels as an event, as OpenAI does.
                    out += sse_event(ApiError(503, error, {}, "server_error").to_json());
                    out += kSseDone;
                }
                const bool ok =
                    out.empty() ? sink.is_writable() : sink.write(out.data(), out.size());
                if (!ok) return false;  // the client left: the releaser cancels
                if (formatter->finished() || !error.empty()) sink.done();
                return true;
            },
            [this, job, formatter](bool) {
                // Called once the response ends, however it ends. A request still generating
                // then has nobody to read it: cancel it, which returns its KV blocks.
                if (!formatter->finished()) {
                    spdlog::info("serve: client left mid-stream; cancelling the request");
                    loop.cancel(job);
                }
            });
    }
};

void require_safe_bind(const ServerOptions& options) {
    if (!is_loopback(options.host) && options.api_key.empty()) {
        throw InvalidArgument("refusing to serve on '" + options.host +
                              "' without an API key: anyone who can reach it could use the model; "
                              "set a key (--api-key KEY) or bind 127.0.0.1");
    }
}

ApiServer::ApiServer(std::unique_ptr<runtime::Engine> engine, ServerOptions options) {
    require_safe_bind(options);
    if (options.port < 0 || options.port > 65535) {
        throw InvalidArgument("the port must be from 0 to 65535, got " +
                              std::to_string(options.port));
    }
    if (options.model_id.empty()) throw InvalidArgument("the server needs a model id");
        // A peer that closes its socket must not kill the process with SIGPIPE on the next write.
#ifndef _WIN32
    std::signal(SIGPIPE, SIG_IGN);
#endif
    impl_ = std::make_unique<Impl>(std::move(engine), std::move(options));
}

ApiServer::~ApiServer() {
    stop();
}

namespace {
// Room for every request the engine and the queue take, connecting at the same moment.
int options_backlog(const ServerOptions& o) {
    return std::max(64, 2 * (o.loop.parallel + o.loop.queue));
}
}  // namespace

int ApiServer::bind() {
    const auto& o = impl_->options;
    const std::string host = o.host == "localhost" ? "127.0.0.1" : o.host;
    if (o.port == 0) {
        impl_->port = impl_->http.bind_to_any_port(host);
    } else {
        impl_->port = impl_->http.bind_to_port(host, o.port) ? o.port : -1;
    }
    if (impl_->port <= 0)
        throw IoError(fmt::format(
            "cannot listen on {}:{} (in use, or not an address of this machine)", o.host, o.port));
    // httplib (Debian's compiled 0.11) listens with a backlog of 5. 32 clients connecting at
    // once overflowed it: their SYNs were dropped and retried a second later (time to first
    // token p99 ~1 s in test_server's load test) and one connection failed outright. Calling
    // listen() again enlarges the queue on Linux (Windows keeps the first value).
    if (impl_->listen_socket != INVALID_SOCKET) {
        const int backlog = std::min(options_backlog(o), 4096);
        if (::listen(impl_->listen_socket, backlog) != 0)
            spdlog::warn("serve: could not enlarge the accept queue to {}", backlog);
    }
    return impl_->port;
}

void ApiServer::listen() {
    impl_->http.listen_after_bind();
}

int ApiServer::start() {
    const int port = bind();
    impl_->thread = std::thread([this] { listen(); });
    // bind() already queues connections; this only lets start() return with accept() running.
    for (int i = 0; i < 1000 && !impl_->http.is_running(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return port;
}

void ApiServer::stop() {
    if (!impl_) return;
    // The loop first: it closes every open channel, so streaming workers finish and the HTTP
    // pool can join them.
    impl_->loop.stop();
    impl_->http.stop();
    if (impl_->thread.joinable()) impl_->thread.join();
}

EngineLoop& ApiServer::loop() {
    return impl_->loop;
}
const ServerOptions& ApiServer::options() const {
    return impl_->options;
}
int ApiServer::port() const {
    return impl_->port;
}

}  // namespace tokenscope::server
