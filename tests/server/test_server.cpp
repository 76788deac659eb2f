// The OpenAI-compatible server (app/server) in-process on a tiny model, driven over real HTTP
// by cpp-httplib's client: routes, greedy output and logprobs against the Engine run directly
// (an independent path), stop strings, usage, errors in OpenAI's shape, the API key, limits,
// the bounded queue, a client that hangs up mid-stream, /metrics, continuous batching of
// concurrent streams, and the tokenscope extensions (candidates, attention).
#include <QProcess>
#include <QScopeGuard>
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <regex>
#include <thread>

#include "api_server.h"
#include "openai_request.h"
#include "runtime/prompt_builder.h"
#include "server/tiny_server.h"
#include "server_test_client.h"
#include "util/error.h"

using namespace tokenscope;
using nlohmann::json;

namespace {

std::unique_ptr<runtime::Engine> load_engine() {
    return test::load_chatml_engine();
}
std::string model_path() {
    return test::chatml_model_path();
}

std::unique_ptr<server::ApiServer> make_server(
    const std::function<void(server::ServerOptions&)>& tweak = nullptr) {
    return test::start_tiny_server([&](server::ServerOptions& o) {
        o.loop.parallel = 4;
        o.loop.queue = 8;
        if (tweak) tweak(o);
    });
}

struct Direct {
    std::string text;
    std::vector<runtime::TokenEvent> events;  // content tokens only
    runtime::FinishReason reason = runtime::FinishReason::None;
    std::int64_t prompt_tokens = 0;
};

// The same request run on an Engine of our own, without the server: greedy.
Direct run_direct(runtime::Request r, int max_tokens, int candidates = 0) {
    auto engine = load_engine();
    r.sampling.temperature = 0.0f;
    r.sampling.n_candidates = candidates;
    r.max_tokens = max_tokens;
    Direct d;
    d.prompt_tokens = static_cast<std::int64_t>(r.prompt.size());
    engine->submit(std::move(r));
    while (engine->has_work()) {
        for (auto& e : engine->step()) {
            d.text += e.text;
            const bool end_token = e.finished && (e.reason == runtime::FinishReason::Eos ||
                                                  e.reason == runtime::FinishReason::StopToken);
            if (e.token >= 0 && !end_token) d.events.push_back(e);
            if (e.finished) d.reason = e.reason;
        }
    }
    return d;
}

Direct direct_chat(const std::string& user, int max_tokens, int candidates = 0) {
    auto engine = load_engine();
    const runtime::PromptBuilder builder(*engine, std::nullopt);
    return run_direct(builder.chat({{"user", user}}), max_tokens, candidates);
}

Direct direct_completion(const std::string& prompt, int max_tokens) {
    auto engine = load_engine();
    const runtime::PromptBuilder builder(*engine, std::nullopt);
    return run_direct(builder.raw(prompt), max_tokens);
}

json chat_body(const std::string& user, int max_tokens) {
    return {{"model", "tiny"},
            {"messages", json::array({{{"role", "user"}, {"content", user}}})},
            {"max_tokens", max_tokens},
            {"temperature", 0}};
}

// Parses Prometheus text: "name{labels} value" per sample line; fails the test on a line that
// is neither a sample nor a # comment.
std::map<std::string, double> parse_prometheus(const std::string& text) {
    static const std::regex sample(
        "^([a-zA-Z_:][a-zA-Z0-9_:]*(\\{[^}]*\\})?) (-?[0-9.eE+-]+|\\+Inf|NaN)$");
    std::map<std::string, double> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::smatch m;
        if (!std::regex_match(line, m, sample)) {
            QTest::qFail(("not a Prometheus sample line: " + line).c_str(), __FILE__, __LINE__);
            return out;
        }
        out[m[1]] = std::stod(m[3]);
    }
    return out;
}

std::string header(const httplib::Headers& headers, const char* name) {
    const auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
}

json kv_json(int port) {
    return test::http_get(port, "/tokenscope/v1/kv").json();
}

// Waits up to `seconds` for `done()`.
bool eventually(const std::function<bool()>& done, double seconds = 10.0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
        if (done()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
}

}  // namespace

class TestServer : public QObject {
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

    void healthAndModels() {
        const auto health = test::http_get(port_, "/health");
        QCOMPARE(health.status, 200);
        QCOMPARE(health.json()["status"], json("ok"));
        const auto models = test::http_get(port_, "/v1/models");
        QCOMPARE(models.status, 200);
        const json m = models.json();
        QCOMPARE(m["object"], json("list"));
        QCOMPARE(m["data"].size(), std::size_t{1});
        QCOMPARE(m["data"][0]["id"], json("tiny"));
        QCOMPARE(m["data"][0]["object"], json("model"));
        QCOMPARE(m["data"][0]["meta"]["context_length"],
                 json(512));  // the tiny model's, below the cache
        QCOMPARE(test::http_get(port_, "/v1/models/tiny").status, 200);
        QCOMPARE(test::http_get(port_, "/v1/models/other").status, 404);
        const auto missing = test::http_get(port_, "/v1/nothing");
        QCOMPARE(missing.status, 404);
        QVERIFY(missing.json()["error"]["message"].get<std::string>().find("/v1/nothing") !=
                std::string::npos);
    }

    // Greedy chat through the server equals the engine's own greedy run of the same
    // conversation through the same template; usage counts agree with the engine's.
    void chatEqualsEngineGreedy() {
        const Direct d = direct_chat("Tell me about the garden", 24);
        const auto reply = test::http_post(port_, "/v1/chat/completions",
                                           chat_body("Tell me about the garden", 24).dump());
        QCOMPARE(reply.status, 200);
        const json r = reply.json();
        QCOMPARE(r["object"], json("chat.completion"));
        QVERIFY(r["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
        QCOMPARE(r["choices"][0]["message"]["role"], json("assistant"));
        QCOMPARE(r["choices"][0]["message"]["content"].get<std::string>(), d.text);
        QVERIFY(!d.text.empty());
        QCOMPARE(r["choices"][0]["finish_reason"],
                 json(d.reason == runtime::FinishReason::MaxTokens ? "length" : "stop"));
        QCOMPARE(r["usage"]["prompt_tokens"].get<std::int64_t>(), d.prompt_tokens);
        QCOMPARE(r["usage"]["total_tokens"].get<std::int64_t>(),
                 r["usage"]["prompt_tokens"].get<std::int64_t>() +
                     r["usage"]["completion_tokens"].get<std::int64_t>());
        QVERIFY(r["usage"]["completion_tokens"].get<std::int64_t>() <= 24);
        if (d.reason == runtime::FinishReason::MaxTokens)
            QCOMPARE(r["usage"]["completion_tokens"], json(24));
    }

    void chatStreamEqualsNonStream() {
        json body = chat_body("Tell me about the garden", 24);
        const auto whole = test::http_post(port_, "/v1/chat/completions", body.dump()).json();
        body["stream"] = true;
        body["stream_options"] = {{"include_usage", true}};
        const auto s = test::sse_post(port_, "/v1/chat/completions", body);
        QCOMPARE(s.status, 200);
        QVERIFY(s.content_type.rfind("text/event-stream", 0) == 0);
        QVERIFY(s.done);
        QVERIFY(s.chunks.size() >= 3);
        QCOMPARE(s.chunks.front()["choices"][0]["delta"]["role"], json("assistant"));
        for (const auto& c : s.chunks) QCOMPARE(c["object"], json("chat.completion.chunk"));
        QCOMPARE(test::stream_text(s),
                 whole["choices"][0]["message"]["content"].get<std::string>());
        // The finish chunk, then the usage chunk (no choices), then [DONE].
        const json& finish = s.chunks[s.chunks.size() - 2];
        QCOMPARE(finish["choices"][0]["finish_reason"], whole["choices"][0]["finish_reason"]);
        const json& usage = s.chunks.back();
        QCOMPARE(usage["choices"].size(), std::size_t{0});
        QCOMPARE(usage["usage"], whole["usage"]);
        QVERIFY(s.raw.size() >= 14 &&
                s.raw.compare(s.raw.size() - 14, 14, "data: [DONE]\n\n") == 0);
    }

    void completionsStreamAndNot() {
        const Direct d = direct_completion("The little robot walked into", 20);
        json body = {
            {"prompt", "The little robot walked into"}, {"max_tokens", 20}, {"temperature", 0}};
        const auto whole = test::http_post(port_, "/v1/completions", body.dump());
        QCOMPARE(whole.status, 200);
        const json w = whole.json();
        QCOMPARE(w["object"], json("text_completion"));
        QCOMPARE(w["choices"][0]["text"].get<std::string>(), d.text);
        QCOMPARE(w["usage"]["prompt_tokens"].get<std::int64_t>(), d.prompt_tokens);
        body["stream"] = true;
        const auto s = test::sse_post(port_, "/v1/completions", body);
        QCOMPARE(s.status, 200);
        QVERIFY(s.done);
        QCOMPARE(test::stream_text(s), d.text);
        QCOMPARE(s.chunks.back()["choices"][0]["finish_reason"], w["choices"][0]["finish_reason"]);
        QVERIFY(!s.chunks.back().contains("usage"));  // not asked for
    }

    // Each logprob is the engine's TokenEvent logprob; top_logprobs are the engine's "before"
    // candidates, sorted, their probabilities summing to at most 1, and (greedy) led by the
    // chosen token itself.
    void logprobsMatchEngine() {
        const Direct d = direct_chat("Tell me about the garden", 12, 5);
        json body = chat_body("Tell me about the garden", 12);
        body["logprobs"] = true;
        body["top_logprobs"] = 5;
        const auto reply = test::http_post(port_, "/v1/chat/completions", body.dump());
        QCOMPARE(reply.status, 200);
        const json content = reply.json()["choices"][0]["logprobs"]["content"];
        QCOMPARE(content.size(), d.events.size());
        std::string joined;
        for (std::size_t i = 0; i < content.size(); ++i) {
            const json& entry = content[i];
            const auto& e = d.events[i];
            QCOMPARE(entry["logprob"].get<double>(), static_cast<double>(e.logprob));
            QCOMPARE(entry["top_logprobs"].size(), std::size_t{5});
            double mass = 0.0, previous = 0.0;
            for (std::size_t k = 0; k < entry["top_logprobs"].size(); ++k) {
                const double lp = entry["top_logprobs"][k]["logprob"].get<double>();
                QVERIFY(lp <= 0.0);
                if (k > 0) QVERIFY(lp <= previous);
                previous = lp;
                mass += std::exp(lp);
                QCOMPARE(lp, std::log(static_cast<double>(e.before[k].probability)));
            }
            QVERIFY(mass <= 1.0 + 1e-6);
            QCOMPARE(entry["top_logprobs"][0]["token"], entry["token"]);  // greedy: the argmax
            QVERIFY(std::abs(entry["top_logprobs"][0]["logprob"].get<double>() -
                             entry["logprob"].get<double>()) < 1e-5);
            std::string bytes;
            for (const auto& b : entry["bytes"]) bytes += static_cast<char>(b.get<int>());
            // "token" is the text when the bytes are UTF-8 on their own, U+FFFD-patched otherwise.
            if (entry["token"].get<std::string>().find("\xEF\xBF\xBD") == std::string::npos) {
                QCOMPARE(bytes, entry["token"].get<std::string>());
            }
            joined += bytes;
        }
        // The tokens' bytes spell the answer (the random model emits stray UTF-8 continuation
        // bytes now and then, which the answer's text shows as U+FFFD and the bytes keep raw).
        if (d.text.find("\xEF\xBF\xBD") == std::string::npos) QCOMPARE(joined, d.text);

        // Completions' legacy shape, streamed.
        const json completion = {{"prompt", "The little robot"},
                                 {"max_tokens", 6},
                                 {"temperature", 0},
                                 {"logprobs", 3},
                                 {"stream", true}};
        const auto s = test::sse_post(port_, "/v1/completions", completion);
        int entries = 0;
        for (const auto& c : s.chunks) {
            const json& lp = c["choices"][0]["logprobs"];
            if (lp.is_null()) continue;
            QCOMPARE(lp["tokens"].size(), std::size_t{1});
            // An object keyed by token text: two tokens with the same bytes share a key.
            QVERIFY(lp["top_logprobs"][0].size() >= 1 && lp["top_logprobs"][0].size() <= 3);
            QVERIFY(lp["token_logprobs"][0].get<double>() <= 0.0);
            ++entries;
        }
        QVERIFY(entries >= 1);
    }

    // A stop string ends the answer before it (the stop string itself is not returned).
    void stopStrings() {
        const Direct d = direct_completion("The little robot walked into", 30);
        QVERIFY(d.text.size() > 8);
        // A piece from the middle of the greedy answer: the answer must end right before it.
        const std::string stop = d.text.substr(d.text.size() / 2, 3);
        const std::string expected = d.text.substr(0, d.text.find(stop));
        for (bool stream : {false, true}) {
            json body = {{"prompt", "The little robot walked into"},
                         {"max_tokens", 30},
                         {"temperature", 0},
                         {"stop", json::array({"\x01never", stop})},
                         {"stream", stream}};
            std::string text;
            json finish;
            if (stream) {
                const auto s = test::sse_post(port_, "/v1/completions", body);
                text = test::stream_text(s);
                finish = s.chunks.back()["choices"][0]["finish_reason"];
            } else {
                const json r = test::http_post(port_, "/v1/completions", body.dump()).json();
                text = r["choices"][0]["text"];
                finish = r["choices"][0]["finish_reason"];
            }
            QCOMPARE(text, expected);
            QCOMPARE(finish, json("stop"));
        }
        // A single string works too.
        json body = {{"prompt", "The little robot walked into"},
                     {"max_tokens", 30},
                     {"temperature", 0},
                     {"stop", stop}};
        QCOMPARE(test::http_post(port_, "/v1/completions", body.dump())
                     .json()["choices"][0]["text"]
                     .get<std::string>(),
                 expected);
    }

    void maxTokensAndUsage() {
        for (int n : {1, 5}) {
            json body = {{"prompt", "The little robot walked into"},
                         {"max_completion_tokens", n},
                         {"temperature", 0}};
            const json r = test::http_post(port_, "/v1/completions", body.dump()).json();
            const auto used = r["usage"]["completion_tokens"].get<std::int64_t>();
            QVERIFY(used >= 1 && used <= n);
            if (r["choices"][0]["finish_reason"] == "length") QCOMPARE(used, std::int64_t{n});
        }
        // No max_tokens: the answer may fill the context (512) after the prompt, no more.
        json body = {{"prompt", "The little robot walked into"},
                     {"temperature", 0},
                     {"max_tokens", 512 - 7}};
        const auto r = test::http_post(port_, "/v1/completions", body.dump());
        QVERIFY2(r.status == 200 || r.status == 400, r.body.c_str());
    }

    // Every bad request is a JSON error in OpenAI's shape with a 4xx status and a message that
    // names the problem; the server stays up.
    void badRequests() {
        struct Case {
            std::string body;
            int status;
            std::string param;
            std::string mentions;
        };
        const std::string m = R"("messages":[{"role":"user","content":"hi"}])";
        const std::vector<Case> cases = {
            {"{" + m + R"(,"n":2})", 400, "n", "'n' must be 1"},
            {R"({"messages": [}, )", 400, "", "not valid JSON"},
            {R"({"messages": [{"role":"user","content":"hi"}], "max_tokens": 5,})", 400, "",
             "column"},
            {"{" + m + R"(,"temperature":"hot"})", 400, "temperature", "\"hot\""},
            {"{" + m + R"(,"temperature":7})", 400, "temperature", "7"},
            {"{" + m + R"(,"max_tokens":-1})", 400, "max_tokens", "-1"},
            {"{" + m + R"(,"max_tokens":100000})", 400, "max_tokens", "100000"},
            {"{" + m + R"(,"max_tokens":2.5})", 400, "max_tokens", "an integer"},
            {"{" + m + R"(,"top_logprobs":3})", 400, "top_logprobs", "logprobs"},
            {"{" + m + R"(,"stop":5})", 400, "stop", "stop"},
            {"{" + m + R"(,"model":"gpt-4"})", 404, "model", "gpt-4"},
            {R"({"messages":[{"role":"wizard","content":"hi"}]})", 400, "messages[0].role",
             "wizard"},
            {R"({"messages":"hi"})", 400, "messages", "an array"},
            {R"({})", 400, "messages", "required"},
            {R"([1,2])", 400, "", "object"},
            {"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", 400, "", "UTF-8"},
        };
        for (const auto& c : cases) {
            const auto r = test::http_post(port_, "/v1/chat/completions", c.body);
            const std::string what = c.body + " -> " + std::to_string(r.status) + " " + r.body;
            QVERIFY2(r.status == c.status, what.c_str());
            const json e = r.json();
            QVERIFY2(e.contains("error") && e["error"].contains("message") &&
                         e["error"].contains("type") && e["error"].contains("param") &&
                         e["error"].contains("code"),
                     what.c_str());
            QVERIFY2(e["error"]["message"].get<std::string>().find(c.mentions) != std::string::npos,
                     what.c_str());
            if (!c.param.empty()) QVERIFY2(e["error"]["param"] == c.param, what.c_str());
        }
        QCOMPARE(test::http_get(port_, "/health").status, 200);
    }

    void bodyTooLarge() {
        auto s = make_server([](server::ServerOptions& o) { o.max_body_bytes = 4096; });
        const std::string big = chat_body(std::string(8000, 'a'), 2).dump();
        const auto r = test::http_post(s->port(), "/v1/chat/completions", big);
        QCOMPARE(r.status, 413);
        QVERIFY(r.json()["error"]["message"].get<std::string>().find("4096") != std::string::npos);
        QCOMPARE(test::http_get(s->port(), "/health").status, 200);
    }

    void apiKey() {
        auto s = make_server([](server::ServerOptions& o) { o.api_key = "sesame"; });
        const std::string body = chat_body("hi", 2).dump();
        QCOMPARE(test::http_post(s->port(), "/v1/chat/completions", body).status, 401);
        const auto wrong = test::http_post(s->port(), "/v1/chat/completions", body,
                                           {{"Authorization", "Bearer nope"}});
        QCOMPARE(wrong.status, 401);
        QCOMPARE(wrong.json()["error"]["type"], json("authentication_error"));
        QCOMPARE(test::http_get(s->port(), "/v1/models").status, 401);
        QCOMPARE(test::http_get(s->port(), "/tokenscope/v1/kv").status, 401);
        QCOMPARE(test::http_post(s->port(), "/v1/chat/completions", body,
                                 {{"Authorization", "Bearer sesame"}})
                     .status,
                 200);
        QCOMPARE(
            test::http_get(s->port(), "/v1/models", {{"Authorization", "Bearer sesame"}}).status,
            200);
        QCOMPARE(test::http_get(s->port(), "/health").status, 200);  // liveness stays open
    }

    void nonLoopbackNeedsKey() {
        server::ServerOptions o;
        o.host = "0.0.0.0";
        o.port = 0;
        o.model_id = "tiny";
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, server::ApiServer(load_engine(), o));
        QVERIFY(server::is_loopback("127.0.0.1") && server::is_loopback("::1") &&
                server::is_loopback("localhost"));
        QVERIFY(!server::is_loopback("0.0.0.0") && !server::is_loopback("192.168.1.2"));
        // The command refuses before loading anything: status 1 and a message that says why.
        QProcess cli;
        cli.start(TOKENSCOPE_CLI, {"serve", "--model", QString::fromStdString(model_path()),
                                   "--host", "0.0.0.0", "--port", "0"});
        QVERIFY(cli.waitForFinished(30000));
        QCOMPARE(cli.exitCode(), 1);
        QVERIFY(cli.readAllStandardError().contains("--api-key"));
    }

    void corsOnlyWhenAsked() {
        QVERIFY(!test::http_get(port_, "/v1/models").headers.count("Access-Control-Allow-Origin"));
        auto s =
            make_server([](server::ServerOptions& o) { o.cors_origin = "http://localhost:3000"; });
        const auto r = test::http_get(s->port(), "/v1/models");
        QCOMPARE(QString::fromStdString(header(r.headers, "Access-Control-Allow-Origin")),
                 QString("http://localhost:3000"));
    }

    // --parallel 1 --queue 1: one request may wait while one runs; a third is refused with 429
    // and Retry-After. The loop is paused so both first requests are still queued.
    void queueFull() {
        auto s = make_server([](server::ServerOptions& o) {
            o.loop.parallel = 1;
            o.loop.queue = 1;
        });
        s->loop().set_paused(true);
        const std::string body = chat_body("hi", 3).dump();
        std::vector<test::HttpReply> first(2);
        std::vector<std::thread> clients;
        for (int i = 0; i < 2; ++i) {
            clients.emplace_back([&, i] {
                first[static_cast<std::size_t>(i)] =
                    test::http_post(s->port(), "/v1/chat/completions", body);
            });
        }
        // Whatever fails below, the clients are released and joined.
        const auto release = qScopeGuard([&] {
            s->loop().set_paused(false);
            for (auto& t : clients) t.join();
        });
        QVERIFY(eventually([&] { return s->loop().waiting() == 2; }));
        const auto refused = test::http_post(s->port(), "/v1/chat/completions", body);
        QCOMPARE(refused.status, 429);
        QCOMPARE(QString::fromStdString(header(refused.headers, "Retry-After")), QString("1"));
        QCOMPARE(refused.json()["error"]["code"], json("queue_full"));
        const auto m = parse_prometheus(test::http_get(s->port(), "/metrics").body);
        QCOMPARE(m.at("tokenscope_requests_waiting"), 2.0);
        s->loop().set_paused(false);
        for (auto& t : clients) t.join();
        clients.clear();
        QCOMPARE(first[0].status, 200);
        QCOMPARE(first[1].status, 200);
    }

    // A client that hangs up mid-stream cancels its request: generation stops well short of
    // max_tokens and every KV block returns to the pool.
    void disconnectCancels() {
        auto s = make_server(
            [](server::ServerOptions& o) { o.loop.step_pause = std::chrono::milliseconds(10); });
        const int port = s->port();
        QCOMPARE(kv_json(port)["blocks_used"], json(0));
        json body = chat_body("Tell me a long story", 400);
        body["stream"] = true;
        int seen = 0;
        bool blocks_in_use = false;
        const auto reply = test::sse_post(port, "/v1/chat/completions", body, [&](const json&) {
            if (++seen == 4) blocks_in_use = kv_json(port)["blocks_used"].get<int>() > 0;
            return seen < 4;  // hang up after the fourth chunk
        });
        QCOMPARE(reply.status, 200);
        QVERIFY(blocks_in_use);
        QVERIFY(!reply.done);
        QVERIFY(eventually(
            [&] { return kv_json(port)["blocks_used"] == 0 && s->loop().running() == 0; }));
        const auto m = parse_prometheus(test::http_get(port, "/metrics").body);
        QCOMPARE(m.at(R"(tokenscope_requests_finished_total{reason="cancelled"})"), 1.0);
        QVERIFY(m.at("tokenscope_generation_tokens_total") < 100);  // of 400 asked
        QCOMPARE(m.at("tokenscope_kv_cache_usage_ratio"), 0.0);
    }

    // The same for a non-streaming request: the client gives up (its read timeout) before the
    // answer is done, and the server notices the closed socket while it waits and cancels.
    void disconnectCancelsNonStreaming() {
        auto s = make_server(
            [](server::ServerOptions& o) { o.loop.step_pause = std::chrono::milliseconds(10); });
        const int port = s->port();
        {
            httplib::Client client("127.0.0.1", port);
            client.set_read_timeout(0, 300000);  // 0.3 s; 400 tokens take 4 s at 10 ms a step
            const auto r =
                client.Post("/v1/chat/completions", chat_body("Tell me a long story", 400).dump(),
                            "application/json");
            QVERIFY(!r);  // timed out: the client closed the connection without an answer
        }
        QVERIFY(eventually(
            [&] { return kv_json(port)["blocks_used"] == 0 && s->loop().running() == 0; }));
        const auto m = parse_prometheus(test::http_get(port, "/metrics").body);
        QCOMPARE(m.at(R"(tokenscope_requests_finished_total{reason="cancelled"})"), 1.0);
        QVERIFY(m.at("tokenscope_generation_tokens_total") < 200);  // of 400 asked
        QCOMPARE(m.at("tokenscope_kv_cache_usage_ratio"), 0.0);
    }

    // A streaming client that gives up while its request is still queued (the loop is paused,
    // so it never reaches the engine) is noticed while it waits, not only once it is admitted:
    // the queue drops it and a later request does not have to wait behind it.
    void disconnectWhileQueuedCancelsStream() {
        auto s = make_server([](server::ServerOptions& o) { o.loop.parallel = 1; });
        s->loop().set_paused(true);
        const auto release = qScopeGuard([&] { s->loop().set_paused(false); });
        json body = chat_body("Tell me a long story", 50);
        body["stream"] = true;
        {
            httplib::Client client("127.0.0.1", s->port());
            client.set_read_timeout(0, 300000);  // 0.3 s with no chunk: the client hangs up
            httplib::Request req;
            req.method = "POST";
            req.path = "/v1/chat/completions";
            req.body = body.dump();
            req.set_header("Content-Type", "application/json");
            req.content_receiver = [](const char*, std::size_t, std::uint64_t, std::uint64_t) {
                return true;
            };
            client.send(req);
        }
        // Still paused: only the hang-up can have taken it out of the queue.
        QVERIFY(eventually([&] { return s->loop().waiting() == 0; }));
        const auto m = parse_prometheus(test::http_get(s->port(), "/metrics").body);
        QCOMPARE(m.at(R"(tokenscope_requests_finished_total{reason="cancelled"})"), 1.0);
        QCOMPARE(m.at("tokenscope_generation_tokens_total"), 0.0);
    }

    // GET /tokenscope/v1/schedule: two requests run together; for each, the prefill entries
    // add up to its prompt_tokens and it has one decode entry per completion token after the
    // first (the prefill step samples that one), as its usage says; steps are numbered from 1,
    // stay within the budget, and `since` returns only what is new.
    void scheduleExtension() {
        auto s = make_server([](server::ServerOptions& o) { o.loop.parallel = 2; });
        const int port = s->port();
        s->loop().set_paused(true);
        const auto empty = test::http_get(port, "/tokenscope/v1/schedule").json();
        QCOMPARE(empty["steps"].size(), std::size_t{0});
        QCOMPARE(empty["next"], json(0));
        std::vector<json> replies(2);
        std::vector<std::thread> clients;
        const std::vector<std::string> prompts = {"The little robot", "Once upon a time in"};
        for (int i = 0; i < 2; ++i) {
            clients.emplace_back([&, i] {
                replies[std::size_t(i)] =
                    test::http_post(port, "/v1/chat/completions",
                                    chat_body(prompts[std::size_t(i)], 5).dump())
                        .json();
            });
        }
        const auto join = qScopeGuard([&] {
            s->loop().set_paused(false);
            for (auto& t : clients) t.join();
        });
        QVERIFY(eventually([&] { return s->loop().waiting() == 2; }));
        s->loop().set_paused(false);
        for (auto& t : clients) t.join();
        clients.clear();

        const auto all = test::http_get(port, "/tokenscope/v1/schedule?since=0").json();
        QCOMPARE(all["object"], json("tokenscope.schedule"));
        const auto& steps = all["steps"];
        QVERIFY(!steps.empty());
        const std::int64_t budget = all["budget"].get<std::int64_t>();
        QVERIFY(budget > 0);
        for (std::size_t i = 0; i < steps.size(); ++i) {
            QCOMPARE(steps[i]["step"].get<std::uint64_t>(), i + 1);
            std::int64_t tokens = 0;
            for (const auto& e : steps[i]["entries"]) tokens += e["tokens"].get<std::int64_t>();
            QVERIFY(tokens <= budget);
        }
        QCOMPARE(all["next"].get<std::uint64_t>(), steps.size() + 1);
        for (const auto& reply : replies) {
            const std::string id = reply["id"].get<std::string>();
            std::int64_t prefilled = 0, decodes = 0;
            for (const auto& step : steps)
                for (const auto& e : step["entries"]) {
                    if (e["request"] != id) continue;
                    if (e["kind"] == "prefill") prefilled += e["tokens"].get<std::int64_t>();
                    if (e["kind"] == "decode") ++decodes;
                }
            QCOMPARE(prefilled, reply["usage"]["prompt_tokens"].get<std::int64_t>());
            QCOMPARE(decodes, reply["usage"]["completion_tokens"].get<std::int64_t>() - 1);
        }
        const auto none = test::http_get(port, "/tokenscope/v1/schedule?since=" +
                                                   std::to_string(all["next"].get<std::uint64_t>()))
                              .json();
        QCOMPARE(none["steps"].size(), std::size_t{0});
        QCOMPARE(none["next"], all["next"]);
        const auto bad = test::http_get(port, "/tokenscope/v1/schedule?since=-1");
        QCOMPARE(bad.status, 400);
        QCOMPARE(bad.json()["error"]["param"], json("since"));
    }

    // /metrics is valid Prometheus text with the families the issue lists, and its counters
    // move with the traffic.
    void metrics() {
        const auto before = parse_prometheus(test::http_get(port_, "/metrics").body);
        const auto r =
            test::http_post(port_, "/v1/chat/completions", chat_body("hi there", 4).dump()).json();
        const auto text = test::http_get(port_, "/metrics");
        QCOMPARE(text.status, 200);
        QVERIFY(header(text.headers, "Content-Type").find("text/plain") == 0);
        for (const char* family :
             {"tokenscope_kv_cache_usage_ratio", "tokenscope_requests_running",
              "tokenscope_requests_waiting", "tokenscope_generation_tokens_total",
              "tokenscope_prompt_tokens_total", "tokenscope_time_to_first_token_seconds",
              "tokenscope_time_per_output_token_seconds"}) {
            QVERIFY2(text.body.find(std::string("# TYPE ") + family + " ") != std::string::npos,
                     family);
        }
        const auto after = parse_prometheus(text.body);
        QCOMPARE(after.at("tokenscope_prompt_tokens_total") -
                     before.at("tokenscope_prompt_tokens_total"),
                 r["usage"]["prompt_tokens"].get<double>());
        QCOMPARE(after.at("tokenscope_generation_tokens_total") -
                     before.at("tokenscope_generation_tokens_total"),
                 r["usage"]["completion_tokens"].get<double>());
        QCOMPARE(after.at(R"(tokenscope_time_to_first_token_seconds_bucket{le="+Inf"})") -
                     before.at(R"(tokenscope_time_to_first_token_seconds_bucket{le="+Inf"})"),
                 1.0);
        QCOMPARE(after.at("tokenscope_time_to_first_token_seconds_count"),
                 after.at(R"(tokenscope_time_to_first_token_seconds_bucket{le="+Inf"})"));
        QVERIFY(after.at("tokenscope_time_per_output_token_seconds_count") >
                before.at("tokenscope_time_per_output_token_seconds_count"));
        QVERIFY(after.at("tokenscope_kv_cache_blocks_total") > 0);
    }

    // Two streams started together share the engine's steps (continuous batching): each
    // receives tokens before the other finishes, the steps taken are far fewer than the two
    // answers' tokens, and each answer equals the engine's greedy answer run alone.
    void concurrentStreamsInterleave() {
        // A short pause after each step, so each client thread reads its chunks as they come
        // rather than in one burst at the end (the order seen client-side is what is checked).
        auto s = make_server(
            [](server::ServerOptions& o) { o.loop.step_pause = std::chrono::milliseconds(5); });
        const int port = s->port();
        const std::vector<std::string> prompts = {"The little robot walked into",
                                                  "Once upon a time in the garden"};
        std::vector<std::string> alone;
        for (const auto& p : prompts) alone.push_back(direct_completion(p, 40).text);
        s->loop().set_paused(true);  // both queue, then start in the same step
        std::atomic<int> clock{0};
        std::vector<int> first_token(2, -1), finished(2, -1);
        std::vector<test::SseReply> replies(2);
        std::vector<std::thread> clients;
        for (int i = 0; i < 2; ++i) {
            clients.emplace_back([&, i] {
                const json body = {{"prompt", prompts[static_cast<std::size_t>(i)]},
                                   {"max_tokens", 40},
                                   {"temperature", 0},
                                   {"stream", true}};
                replies[static_cast<std::size_t>(i)] =
                    test::sse_post(port, "/v1/completions", body, [&, i](const json& c) {
                        const int now = clock++;
                        const auto& choice = c["choices"][0];
                        if (first_token[static_cast<std::size_t>(i)] < 0 &&
                            !choice["text"].get<std::string>().empty()) {
                            first_token[static_cast<std::size_t>(i)] = now;
                        }
                        if (!choice["finish_reason"].is_null())
                            finished[static_cast<std::size_t>(i)] = now;
                        return true;
                    });
            });
        }
        const auto release = qScopeGuard([&] {
            s->loop().set_paused(false);
            for (auto& t : clients) t.join();
        });
        QVERIFY(eventually([&] { return s->loop().waiting() == 2; }));
        const auto steps_before = kv_json(port)["steps"].get<std::int64_t>();
        s->loop().set_paused(false);
        for (auto& t : clients) t.join();
        clients.clear();
        const auto steps = kv_json(port)["steps"].get<std::int64_t>() - steps_before;
        for (std::size_t i = 0; i < 2; ++i) {
            QCOMPARE(replies[i].status, 200);
            QVERIFY(replies[i].done);
            QCOMPARE(test::stream_text(replies[i]), alone[i]);
        }
        QVERIFY(first_token[0] >= 0 && first_token[1] >= 0);
        QVERIFY2(first_token[0] < finished[1] && first_token[1] < finished[0],
                 "one stream finished before the other began");
        const std::size_t tokens = 80;  // at most; each answer has up to 40
        QVERIFY2(static_cast<std::size_t>(steps) < tokens * 3 / 4,
                 qPrintable(QString("%1 engine steps for two 40-token answers").arg(steps)));
    }

    // The finish_reason of a stream's last choice ("" when none came).
    static std::string finish_reason(const test::SseReply& reply) {
        for (auto it = reply.chunks.rbegin(); it != reply.chunks.rend(); ++it) {
            if (it->contains("choices") && !(*it)["choices"].empty() &&
                !(*it)["choices"][0]["finish_reason"].is_null())
                return (*it)["choices"][0]["finish_reason"].get<std::string>();
        }
        return {};
    }

    // The issue's load test, bounded: 32 streaming clients at once against a server that runs
    // them all in one batch. No errors, every answer equal to the same request run alone on an
    // Engine of its own (temperature 0; the tiny model's F32 weights keep one summation order
    // at any batch size, so equal means equal), and every KV block back in the pool after.
    // Aggregate tok/s and TTFT percentiles are printed, not asserted (speed is for benchmarks).
    void thirtyTwoConcurrentStreams() {
        constexpr int kClients = 32;
        constexpr int kTokens = 12;
        auto s = make_server([](server::ServerOptions& o) {
            o.loop.parallel = kClients;
            o.loop.queue = kClients;
        });
        const int port = s->port();
        std::vector<std::string> prompts, alone;
        for (int i = 0; i < kClients; ++i) {
            prompts.push_back("Story " + std::to_string(i) + ": the little robot walked into");
            alone.push_back(direct_completion(prompts.back(), kTokens).text);
        }
        std::vector<test::SseReply> replies(kClients);
        std::vector<double> ttft_ms(kClients, -1.0);
        std::vector<int> chunks(kClients, 0);
        const auto start = std::chrono::steady_clock::now();
        std::vector<std::thread> clients;
        for (int i = 0; i < kClients; ++i) {
            clients.emplace_back([&, i] {
                const auto k = static_cast<std::size_t>(i);
                const json body = {{"prompt", prompts[k]},
                                   {"max_tokens", kTokens},
                                   {"temperature", 0},
                                   {"stream", true}};
                replies[k] = test::sse_post(port, "/v1/completions", body, [&, k](const json& c) {
                    if (ttft_ms[k] < 0 && !c["choices"][0]["text"].get<std::string>().empty()) {
                        ttft_ms[k] = std::chrono::duration<double, std::milli>(
                                         std::chrono::steady_clock::now() - start)
                                         .count();
                    }
                    ++chunks[k];
                    return true;
                });
            });
        }
        for (auto& t : clients) t.join();
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        int tokens = 0;
        for (int i = 0; i < kClients; ++i) {
            const auto k = static_cast<std::size_t>(i);
            QVERIFY2(replies[k].status == 200,
                     qPrintable(QString("client %1: status %2").arg(i).arg(replies[k].status)));
            QVERIFY2(replies[k].done, qPrintable(QString("client %1: no [DONE]").arg(i)));
            QVERIFY2(test::stream_text(replies[k]) == alone[k],
                     qPrintable(QString("client %1: streamed \"%2\", alone \"%3\" (%4)")
                                    .arg(i)
                                    .arg(QString::fromStdString(test::stream_text(replies[k])),
                                         QString::fromStdString(alone[k]),
                                         QString::fromStdString(finish_reason(replies[k])))));
            tokens += chunks[k];
        }
        QVERIFY(eventually([&] { return kv_json(port)["blocks_used"].get<int>() == 0; }));
        QCOMPARE(test::http_get(port, "/health").status, 200);
        std::vector<double> sorted = ttft_ms;
        std::sort(sorted.begin(), sorted.end());
        qInfo(
            "%d clients: %d chunks in %.2f s (%.0f chunks/s in total), time to first token "
            "p50 %.0f ms, p99 %.0f ms",
            kClients, tokens, seconds, tokens / seconds, sorted[kClients / 2],
            sorted[kClients * 99 / 100]);
    }

    // The tokenscope extension: each token's chunk carries the candidates before and after
    // shaping; greedy's chosen token leads both lists.
    void candidatesExtension() {
        json body = {{"prompt", "The little robot"},
                     {"max_tokens", 5},
                     {"temperature", 0},
                     {"stream", true},
                     {"tokenscope", {{"candidates", true}}}};
        const auto s = test::sse_post(port_, "/v1/completions", body);
        int tokens = 0;
        for (const auto& c : s.chunks) {
            if (!c.contains("tokenscope") || !c["tokenscope"].contains("before")) continue;
            const json& t = c["tokenscope"];
            QCOMPARE(t["before"].size(), std::size_t{10});
            QVERIFY(!t["after"].empty());
            QCOMPARE(t["before"][0]["id"], t["token"]);
            QCOMPARE(t["after"][0]["id"], t["token"]);
            QCOMPARE(t["after"][0]["probability"].get<double>(), 1.0);  // greedy: a point mass
            for (std::size_t k = 1; k < t["before"].size(); ++k) {
                QVERIFY(t["before"][k]["probability"].get<double>() <=
                        t["before"][k - 1]["probability"].get<double>());
            }
            ++tokens;
        }
        QVERIFY(tokens >= 1);
        QVERIFY(s.chunks[s.chunks.size() - 1]["tokenscope"].contains("timings"));
        const json k = kv_json(port_);
        QVERIFY(k["blocks_total"].get<int>() > 0);
        QCOMPARE(k["block_owner"].size(), k["blocks_total"].get<std::size_t>());
    }

    // "tokenscope": {"attention": true} on a streamed completion, then GET
    // /tokenscope/v1/attention: the same weights as the Engine's own capture of the same greedy
    // request run directly (an independent path; both store f16, so they agree exactly), for
    // the mean of the heads and for one head; and errors that name the parameter.
    void attentionExtension() {
        const json body = {{"prompt", "The little robot"},
                           {"max_tokens", 5},
                           {"temperature", 0},
                           {"stream", true},
                           {"tokenscope", {{"attention", true}}}};
        const auto s = test::sse_post(port_, "/v1/completions", body);
        QVERIFY(!s.chunks.empty());
        const std::string id = s.chunks[0]["id"].get<std::string>();

        auto engine = load_engine();
        const runtime::PromptBuilder builder(*engine, std::nullopt);
        runtime::Request r = builder.raw("The little robot");
        r.sampling.temperature = 0.0f;
        r.max_tokens = 5;
        r.capture.enabled = true;
        r.capture.max_context = server::kServedAttentionPositions;
        std::vector<std::int32_t> tokens = r.prompt;
        const runtime::RequestId direct_id = engine->submit(std::move(r));
        while (engine->has_work())
            for (const auto& e : engine->step())
                if (e.token >= 0) tokens.push_back(e.token);
        const inspect::AttentionCapture* capture = engine->capture(direct_id);
        QVERIFY(capture);
        const auto& config = engine->config();

        for (const int head : {-1, 2}) {
            const int layer = static_cast<int>(config.layers) - 1;
            std::string path =
                "/tokenscope/v1/attention?id=" + id + "&layer=" + std::to_string(layer);
            if (head >= 0) path += "&head=" + std::to_string(head);
            const auto reply = test::http_get(port_, path);
            QVERIFY2(reply.status == 200, reply.body.c_str());
            const json a = reply.json();
            QCOMPARE(a["positions"].get<std::int64_t>(), capture->rows());
            QVERIFY(capture->rows() >= 4);  // the prompt and the answer's tokens
            QCOMPARE(a["rows"].size(), static_cast<std::size_t>(capture->rows()));
            QCOMPARE(a["tokens"].size(), static_cast<std::size_t>(capture->rows()));
            for (std::int64_t q = 0; q < capture->rows(); ++q) {
                QCOMPARE(a["tokens"][q]["id"].get<std::int32_t>(), tokens[q]);
                const std::vector<float> expected =
                    head < 0 ? capture->mean_row(layer, q) : capture->row(layer, head, q);
                const auto got = a["rows"][q].get<std::vector<float>>();
                QCOMPARE(got.size(), static_cast<std::size_t>(q + 1));  // keys 0..q
                QCOMPARE(got, expected);
                double sum = 0;
                for (float w : got) sum += w;
                QVERIFY2(std::abs(sum - 1.0) < 5e-3, qPrintable(QString::number(sum)));
            }
        }
        const auto unknown = test::http_get(port_, "/tokenscope/v1/attention?id=cmpl-nope&layer=0");
        QCOMPARE(unknown.status, 404);
        QVERIFY(unknown.body.find("cmpl-nope") != std::string::npos);
        const auto bad_layer =
            test::http_get(port_, "/tokenscope/v1/attention?id=" + id + "&layer=99");
        QCOMPARE(bad_layer.status, 400);
        QCOMPARE(bad_layer.json()["error"]["param"], json("layer"));
        QCOMPARE(test::http_get(port_, "/tokenscope/v1/attention?layer=0").status, 400);
        // A request that did not ask keeps nothing.
        const auto plain = test::http_post(port_, "/v1/completions",
                                           json({{"prompt", "Hi"}, {"max_tokens", 2}}).dump());
        const std::string plain_id = plain.json()["id"].get<std::string>();
        QCOMPARE(
            test::http_get(port_, "/tokenscope/v1/attention?id=" + plain_id + "&layer=0").status,
            404);
    }
};

QTEST_GUILESS_MAIN(TestServer)
#include "test_server.moc"
