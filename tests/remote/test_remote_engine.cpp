// The remote engine (app/remote) against our real server (app/server) in-process on a tiny
// model over loopback: greedy text and logprobs equal the local engine's, cancel returns the
// server's KV blocks, /metrics and /tokenscope/v1/kv are read; against a small fake
// third-party server (SSE without logprobs, "\r\n" line ends, several tokens per chunk, no
// /metrics): it degrades instead of failing; the metrics parser on the three engines' formats;
// and the one-line errors (refused port, 401, unknown model, not JSON, bad URL).
#include <QtTest>

#include <atomic>
#include <cmath>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include "api_server.h"
#include "server/tiny_server.h"
#include "remote_engine.h"
#include "runtime/prompt_builder.h"
#include "server_metrics.h"
#include "sse_reader.h"
#include "util/error.h"

using namespace tokenscope;
using nlohmann::json;

namespace {

std::unique_ptr<runtime::Engine> load_engine() { return test::load_chatml_engine(); }

std::unique_ptr<server::ApiServer> make_server(
    const std::function<void(server::ServerOptions&)>& tweak = nullptr) {
    return test::start_tiny_server([&](server::ServerOptions& o) {
        o.loop.parallel = 2;
        o.loop.queue = 4;
        if (tweak) tweak(o);
    });
}

std::string url_of(int port) {
    return "http://127.0.0.1:" + std::to_string(port) + "/v1";
}

struct Direct {
    std::string text;
    std::vector<runtime::TokenEvent> events;  // content tokens
};

// The conversation run on an Engine of our own (no HTTP): greedy, the independent reference.
Direct direct_chat(const std::string& user, int max_tokens, int candidates) {
    auto engine = load_engine();
    const runtime::PromptBuilder builder(*engine, std::nullopt);
    runtime::Request r = builder.chat({{"user", user}});
    r.sampling.temperature = 0.0f;
    r.sampling.n_candidates = candidates;
    r.max_tokens = max_tokens;
    engine->submit(std::move(r));
    Direct d;
    while (engine->has_work()) {
        for (auto& e : engine->step()) {
            d.text += e.text;
            const bool end_token = e.finished && (e.reason == runtime::FinishReason::Eos ||
                                                  e.reason == runtime::FinishReason::StopToken);
            if (e.token >= 0 && !end_token) d.events.push_back(e);
        }
    }
    return d;
}

remote::ChatRequest greedy(const std::string& user, int max_tokens, int top_logprobs) {
    remote::ChatRequest r;
    r.messages = {{"user", user}};
    r.max_tokens = max_tokens;
    r.temperature = 0.0;
    r.top_logprobs = top_logprobs;
    return r;
}

bool eventually(const std::function<bool()>& done, double seconds = 10.0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
        if (done()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
}

// A loopback port nothing listens on: bound (so no one else has it this instant), then closed.
int unused_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
}

remote::RemoteOptions options(const std::string& url, std::string key = {},
                              std::string model = {}) {
    remote::RemoteOptions o;
    o.url = url;
    o.api_key = std::move(key);
    o.model = std::move(model);
    return o;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// A minimal third-party-shaped server: /v1/models in OpenAI's shape, a chat stream in the
// shape of a server without logprobs (Ollama's OpenAI endpoint), "\r\n" line ends, and no
// /metrics (404). `/html/v1/models` answers an HTML page, as a web server on the wrong port.
class FakeServer {
  public:
    FakeServer() {
        http_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(
                R"({"object":"list","data":[{"id":"llama3.2","object":"model","owned_by":"library"}]})",
                "application/json");
        });
        http_.Get("/html/v1/models", [](const httplib::Request&, httplib::Response& res) {
            res.set_content("<html><body>It works!</body></html>", "text/html");
        });
        http_.Post("/v1/chat/completions", [this](const httplib::Request& req,
                                                  httplib::Response& res) {
            last_body_ = json::parse(req.body, nullptr, false);
            std::string out;
            for (const char* piece : {"Hel", "lo", " world"}) {
                out += "data: " +
                       json{{"object", "chat.completion.chunk"},
                            {"choices", json::array({{{"index", 0},
                                                      {"delta", {{"content", piece}}},
                                                      {"finish_reason", nullptr}}})}}
                           .dump() +
                       "\r\n\r\n";
            }
            out +=
                "data: " +
                json{{"choices",
                      json::array(
                          {{{"index", 0}, {"delta", json::object()}, {"finish_reason", "stop"}}})},
                     {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 3}}}}
                    .dump() +
                "\r\n\r\ndata: [DONE]\r\n\r\n";
            res.set_content(out, "text/event-stream");
        });
        port_ = http_.bind_to_any_port("127.0.0.1");
        thread_ = std::thread([this] { http_.listen_after_bind(); });
        for (int i = 0; i < 1000 && !http_.is_running(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ~FakeServer() {
        http_.stop();
        thread_.join();
    }
    int port() const { return port_; }
    const json& last_body() const { return last_body_; }

  private:
    httplib::Server http_;
    std::thread thread_;
    int port_ = 0;
    json last_body_;
};

}  // namespace

class TestRemoteEngine : public QObject {
    Q_OBJECT

    std::unique_ptr<server::ApiServer> server_;
    int port_ = 0;

  private slots:
    void initTestCase() {
        server_ = make_server();
        port_ = server_->port();
        QVERIFY(port_ > 0);
    }
    void cleanupTestCase() { server_.reset(); }

    void urls() {
        const auto a = remote::parse_server_url("http://gpu-box:8000/v1/");
        QCOMPARE(a.origin(), std::string("http://gpu-box:8000"));
        QCOMPARE(a.prefix, std::string());
        const auto b = remote::parse_server_url("localhost:11434");
        QCOMPARE(b.origin(), std::string("http://localhost:11434"));
        const auto c = remote::parse_server_url("https://proxy.example/llm/v1");
        QCOMPARE(c.port, 443);
        QCOMPARE(c.prefix, std::string("/llm"));
        const auto d = remote::parse_server_url("http://[::1]:8080");
        QCOMPARE(d.origin(), std::string("http://[::1]:8080"));
        for (const char* bad :
             {"", "ftp://host", "http://:80", "http://host:99999", "http://host:port", "htp:/x"}) {
            try {
                remote::parse_server_url(bad);
                QFAIL(bad);
            } catch (const InvalidArgument& e) {
                QVERIFY2(contains(e.what(), "server URL"), e.what());
            }
        }
    }

    // Events cut at every byte boundary come out whole; comments and other fields are skipped.
    void sseReader() {
        const std::string stream =
            ": ping\r\nevent: message\r\ndata: {\"a\":1}\r\n\r\ndata: line1\ndata: line2\n\ndata: "
            "[DONE]\n\n";
        remote::SseReader reader;
        std::vector<std::string> events;
        for (char c : stream)
            for (auto& e : reader.feed(std::string_view(&c, 1))) events.push_back(e);
        QCOMPARE(events.size(), std::size_t{3});
        QCOMPARE(events[0], std::string("{\"a\":1}"));
        QCOMPARE(events[1], std::string("line1\nline2"));
        QCOMPARE(events[2], std::string("[DONE]"));
        remote::SseReader tail;
        QVERIFY(tail.feed("data: x").empty());
        QCOMPARE(tail.finish(), std::vector<std::string>{"x"});
    }

    // Greedy through the remote engine equals the local engine's greedy run: text, each
    // token's logprob, and the alternatives (ids, probabilities) from the candidates extension.
    void greedyEqualsLocalEngine() {
        const Direct d = direct_chat("Tell me about the garden", 16, 10);
        QVERIFY(!d.text.empty());
        remote::RemoteEngine engine(options(url_of(port_)));
        const auto& model = engine.connect();
        QCOMPARE(model.id, std::string("tiny"));
        QVERIFY(engine.is_tokenscope());
        QCOMPARE(model.context_length.value_or(0), std::int64_t{512});
        std::vector<remote::RemoteToken> tokens;
        const auto result = engine.chat(greedy("Tell me about the garden", 16, 5),
                                        [&](const remote::RemoteToken& t) { tokens.push_back(t); });
        QCOMPARE(result.text, d.text);
        QVERIFY(result.logprobs);
        QVERIFY(result.notices.empty());
        QCOMPARE(tokens.size(), d.events.size());
        std::string joined;
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            const auto& t = tokens[i];
            const auto& e = d.events[i];
            joined += t.text;
            QVERIFY(t.has_logprobs);
            QCOMPARE(t.id, e.token);
            QCOMPARE(*t.logprob, static_cast<double>(e.logprob));
            QCOMPARE(t.top.size(), e.before.size());
            for (std::size_t k = 0; k < t.top.size(); ++k) {
                QCOMPARE(t.top[k].id, e.before[k].id);
                QCOMPARE(static_cast<float>(t.top[k].probability), e.before[k].probability);
                QVERIFY(t.top[k].logit.has_value());
            }
            QVERIFY(!t.after.empty());
            QVERIFY(t.token_ms >= 0.0);
        }
        QCOMPARE(joined, d.text);
        QVERIFY(result.ttft_ms > 0.0 && result.ttft_ms <= result.total_ms);
        QVERIFY(result.finish_reason == "stop" || result.finish_reason == "length");
        QCOMPARE(result.completion_tokens.value_or(-1), static_cast<std::int64_t>(d.events.size()));
        QVERIFY(result.prompt_tokens.value_or(0) > 0);
        QVERIFY(result.server_timings.has_value());
    }

    // A max_tokens the server's context cannot hold (it answers 400 naming max_tokens): the
    // reply is asked for again without it and says so; the completion id and the reply's
    // attention (GET /tokenscope/v1/attention) come with it.
    void maxTokensBeyondTheContextAndAttention() {
        remote::RemoteEngine engine(options(url_of(port_)));
        engine.connect();
        auto request = greedy("Tell me about the garden", 100000, 0);
        const auto result = engine.chat(request, [](const remote::RemoteToken&) {});
        QVERIFY(!result.text.empty());
        QCOMPARE(result.notices.size(), std::size_t{1});
        QVERIFY(contains(result.notices[0], "max_tokens 100000"));
        QVERIFY(result.id.rfind("chatcmpl-", 0) == 0);
        const auto a = engine.attention(result.id, 0, -1);
        QVERIFY(a.has_value());
        QVERIFY((*a)["rows"].size() > 1);
        QCOMPARE((*a)["tokens"].size(), (*a)["rows"].size());
        QVERIFY(!engine.attention("chatcmpl-unknown", 0, -1).has_value());
    }

    // The standard top_logprobs (what vLLM and llama.cpp send) carry the same numbers:
    // probability = exp(logprob) of the server's top list.
    void standardTopLogprobs() {
        const Direct d = direct_chat("hello there", 8, 3);
        remote::RemoteEngine engine(options(url_of(port_)));
        engine.connect();
        // Parsed from a chunk shaped exactly like the server's, without the extension.
        std::vector<remote::RemoteToken> tokens;
        engine.chat(greedy("hello there", 8, 3),
                    [&](const remote::RemoteToken& t) { tokens.push_back(t); });
        QCOMPARE(tokens.size(), d.events.size());
        for (std::size_t i = 0; i < tokens.size(); ++i)
            QCOMPARE(static_cast<float>(std::exp(*tokens[i].logprob)),
                     std::exp(d.events[i].logprob));
    }

    // cancel() from another thread closes the stream; the server cancels the request and its
    // KV blocks return to the pool (seen through /tokenscope/v1/kv and /metrics).
    void cancelFreesServerBlocks() {
        auto s = make_server(
            [](server::ServerOptions& o) { o.loop.step_pause = std::chrono::milliseconds(10); });
        remote::RemoteEngine engine(options(url_of(s->port())));
        engine.connect();
        int seen = 0;
        bool blocks_in_use = false;
        std::thread canceller;
        const auto result =
            engine.chat(greedy("Tell me a long story", 400, 5), [&](const remote::RemoteToken&) {
                if (++seen == 4) {
                    blocks_in_use = engine.kv_map().value()["blocks_used"].get<int>() > 0;
                    canceller = std::thread([&] { engine.cancel(); });
                }
            });
        if (canceller.joinable()) canceller.join();
        QVERIFY(blocks_in_use);
        QVERIFY(result.cancelled);
        QCOMPARE(result.finish_reason, std::string("cancelled"));
        QVERIFY(seen < 400);
        QVERIFY(eventually([&] { return engine.kv_map().value()["blocks_used"] == 0; }));
        std::string why;
        const auto m = engine.metrics(&why);
        QVERIFY2(m.has_value(), why.c_str());
        QCOMPARE(m->engine, std::string("tokenscope"));
        QCOMPARE(m->kv_usage.value_or(-1), 0.0);
        QCOMPARE(m->requests_running.value_or(-1), 0.0);
        QVERIFY(m->kv_blocks_total.value_or(0) > 0);
        // The engine is usable again after a cancel.
        const auto again = engine.chat(greedy("hi", 3, 0), [](const remote::RemoteToken&) {});
        QVERIFY(!again.cancelled);
        QVERIFY(!again.logprobs);
    }

    // The gauges of each engine, from fixture text written with the names each project
    // documents (server_metrics.h says where): vLLM V0 and V1, llama.cpp, SGLang, ours.
    void metricsFormats() {
        const std::string vllm_v0 =
            "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.\n"
            "# TYPE vllm:gpu_cache_usage_perc gauge\n"
            "vllm:gpu_cache_usage_perc{model_name=\"meta-llama/Llama-3.1-70B-Instruct\"} 0.25\n"
            "vllm:num_requests_running{model_name=\"meta-llama/Llama-3.1-70B-Instruct\"} 3.0\n"
            "vllm:num_requests_waiting{model_name=\"meta-llama/Llama-3.1-70B-Instruct\"} 1.0\n"
            "vllm:prompt_tokens_total{model_name=\"m\"} 1234.0\n";
        auto m = remote::read_server_metrics(vllm_v0);
        QCOMPARE(m.engine, std::string("vllm"));
        QCOMPARE(*m.kv_usage, 0.25);
        QCOMPARE(*m.requests_running, 3.0);
        QCOMPARE(*m.requests_waiting, 1.0);
        // V1 with two data-parallel engines: mean usage, summed requests.
        const std::string vllm_v1 =
            "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n"
            "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.25\n"
            "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 2\n"
            "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 5\n"
            "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0\n";
        m = remote::read_server_metrics(vllm_v1);
        QCOMPARE(*m.kv_usage, 0.375);
        QCOMPARE(*m.requests_running, 7.0);
        QCOMPARE(*m.requests_waiting, 0.0);
        const std::string llamacpp =
            "# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.\n"
            "# TYPE llamacpp:kv_cache_usage_ratio gauge\n"
            "llamacpp:kv_cache_usage_ratio 0.125\n"
            "llamacpp:kv_cache_tokens 512\n"
            "llamacpp:requests_processing 1\n"
            "llamacpp:requests_deferred 2\n";
        m = remote::read_server_metrics(llamacpp);
        QCOMPARE(m.engine, std::string("llama.cpp"));
        QCOMPARE(*m.kv_usage, 0.125);
        QCOMPARE(*m.requests_running, 1.0);
        QCOMPARE(*m.requests_waiting, 2.0);
        // llama.cpp builds without the usage gauge: the requests still read.
        m = remote::read_server_metrics(
            "llamacpp:requests_processing 0\nllamacpp:requests_deferred 0\n");
        QCOMPARE(m.engine, std::string("llama.cpp"));
        QVERIFY(!m.kv_usage);
        const std::string sglang =
            "sglang:token_usage{model_name=\"m\"} 0.75\nsglang:num_running_reqs{model_name=\"m\"} "
            "4\n"
            "sglang:num_queue_reqs{model_name=\"m\"} 6\n";
        m = remote::read_server_metrics(sglang);
        QCOMPARE(m.engine, std::string("sglang"));
        QCOMPARE(*m.kv_usage, 0.75);
        QCOMPARE(*m.requests_waiting, 6.0);
        // Ours, as the real server renders it.
        httplib::Client client("127.0.0.1", port_);
        const auto ours = client.Get("/metrics");
        QVERIFY(ours && ours->status == 200);
        m = remote::read_server_metrics(ours->body);
        QCOMPARE(m.engine, std::string("tokenscope"));
        QVERIFY(m.kv_usage && m.requests_running && m.requests_waiting && m.kv_blocks_total);
        // Junk lines are skipped, not fatal; nothing recognised stays unrecognised.
        const auto samples = remote::parse_prometheus(
            "garbage line\nfoo{a=\"b\\\"c\"} 2 1700000000\nbar{broken 1\n");
        QCOMPARE(samples.size(), std::size_t{1});
        QCOMPARE(samples[0].labels.at("a"), std::string("b\"c"));
        QVERIFY(!remote::read_server_metrics(samples).recognised());
    }

    // A server without logprobs or /metrics (Ollama-shaped): the chat works, and the engine
    // says what is missing instead of failing. Optional sampling fields unset are not sent.
    void degradesWithoutLogprobsOrMetrics() {
        FakeServer fake;
        remote::RemoteEngine engine(options(url_of(fake.port())));
        QCOMPARE(engine.connect().id, std::string("llama3.2"));
        QVERIFY(!engine.is_tokenscope());
        std::vector<remote::RemoteToken> tokens;
        remote::ChatRequest r;
        r.messages = {{"user", "hi"}};
        const auto result =
            engine.chat(r, [&](const remote::RemoteToken& t) { tokens.push_back(t); });
        QCOMPARE(result.text, std::string("Hello world"));
        QCOMPARE(tokens.size(), std::size_t{3});
        QVERIFY(!tokens[0].has_logprobs);
        QVERIFY(!result.logprobs);
        QCOMPARE(result.finish_reason, std::string("stop"));
        QCOMPARE(result.completion_tokens.value_or(0), std::int64_t{3});
        QCOMPARE(result.notices.size(), std::size_t{1});
        QVERIFY(contains(result.notices[0], "no logprobs"));
        QVERIFY(!fake.last_body().contains("temperature"));
        QVERIFY(!fake.last_body().contains("tokenscope"));
        QCOMPARE(fake.last_body()["top_logprobs"], json(20));
        std::string why;
        QVERIFY(!engine.metrics(&why));
        QVERIFY2(contains(why, "no /metrics"), why.c_str());
        QVERIFY(!engine.kv_map());
    }

    // Errors that end a request: one line naming the URL, the status, and what to do.
    void errors() {
        const int closed_port = unused_port();
        try {
            remote::RemoteEngine(options(url_of(closed_port))).connect();
            QFAIL("connected to a closed port");
        } catch (const remote::RemoteError& e) {
            QVERIFY2(contains(e.what(), "127.0.0.1:" + std::to_string(closed_port)), e.what());
            QVERIFY2(contains(e.what(), "connection refused"), e.what());
            QCOMPARE(e.status(), 0);
        }

        auto guarded = make_server([](server::ServerOptions& o) { o.api_key = "sesame"; });
        try {
            remote::RemoteEngine(options(url_of(guarded->port()))).connect();
            QFAIL("no key accepted");
        } catch (const remote::RemoteError& e) {
            QCOMPARE(e.status(), 401);
            QVERIFY2(contains(e.what(), "/v1/models answered 401 Unauthorized"), e.what());
            QVERIFY2(contains(e.what(), "--api-key"), e.what());
        }
        remote::RemoteEngine keyed(options(url_of(guarded->port()), "sesame"));
        QCOMPARE(keyed.connect().id, std::string("tiny"));
        QVERIFY(keyed.metrics().has_value());  // /metrics is not behind the key

        try {
            remote::RemoteEngine(options(url_of(port_), "", "gpt-9")).connect();
            QFAIL("unknown model accepted");
        } catch (const remote::RemoteError& e) {
            QVERIFY2(contains(e.what(), "no model 'gpt-9'"), e.what());
            QVERIFY2(contains(e.what(), "it serves: tiny"), e.what());
        }

        FakeServer fake;
        try {
            remote::RemoteEngine(
                options("http://127.0.0.1:" + std::to_string(fake.port()) + "/html"))
                .connect();
            QFAIL("HTML accepted as a model list");
        } catch (const remote::RemoteError& e) {
            QVERIFY2(contains(e.what(), "/html/v1/models answered 200 but not"), e.what());
            QVERIFY2(contains(e.what(), "It works!"), e.what());
        }
        try {
            remote::RemoteEngine(options("gopher://x"));
            QFAIL("gopher accepted");
        } catch (const InvalidArgument& e) {
            QVERIFY2(contains(e.what(), "gopher"), e.what());
        }
        if (!remote::https_supported()) {
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, remote::RemoteEngine(options("https://x")));
        }
    }
};

QTEST_GUILESS_MAIN(TestRemoteEngine)
#include "test_remote_engine.moc"
