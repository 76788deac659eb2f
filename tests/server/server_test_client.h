#pragma once
// A small HTTP client for the server suites: cpp-httplib's Client (an independent HTTP
// implementation of the wire format, not our server code) plus a Server-Sent Events reader.
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace tokenscope::test {

struct HttpReply {
    int status = 0;  // 0: no response (connection failed)
    std::string body;
    httplib::Headers headers;
    nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

struct SseReply {
    int status = 0;
    std::string raw;                     // everything received
    std::vector<nlohmann::json> chunks;  // each data: {...} event, parsed
    bool done = false;                   // saw data: [DONE]
    std::string content_type;
};

inline HttpReply http_get(int port, const std::string& path, const httplib::Headers& headers = {}) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(30, 0);
    HttpReply reply;
    if (auto r = client.Get(path, headers)) {
        reply.status = r->status;
        reply.body = r->body;
        reply.headers = r->headers;
    }
    return reply;
}

inline HttpReply http_post(int port, const std::string& path, const std::string& body,
                           const httplib::Headers& headers = {}) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(30, 0);
    HttpReply reply;
    if (auto r = client.Post(path, headers, body, "application/json")) {
        reply.status = r->status;
        reply.body = r->body;
        reply.headers = r->headers;
    }
    return reply;
}

// POSTs `body` and reads the response as SSE. `on_chunk` sees each parsed chunk as it arrives
// and may return false to hang up (the client closes the connection mid-stream).
inline SseReply sse_post(int port, const std::string& path, const nlohmann::json& body,
                         const std::function<bool(const nlohmann::json&)>& on_chunk = nullptr) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(30, 0);
    SseReply reply;
    std::string pending;
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.response_handler = [&](const httplib::Response& r) {
        reply.status = r.status;
        reply.content_type = r.get_header_value("Content-Type");
        return true;
    };
    req.content_receiver = [&](const char* data, std::size_t size, std::uint64_t, std::uint64_t) {
        reply.raw.append(data, size);
        pending.append(data, size);
        for (std::size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
            std::string event = pending.substr(0, end);
            pending.erase(0, end + 2);
            if (event.rfind("data: ", 0) != 0) continue;
            event.erase(0, 6);
            if (event == "[DONE]") {
                reply.done = true;
                continue;
            }
            reply.chunks.push_back(nlohmann::json::parse(event, nullptr, false));
            if (on_chunk && !on_chunk(reply.chunks.back())) return false;
        }
        return true;
    };
    client.send(req);
    return reply;
}

// The text a stream carried: chat deltas' content or completions' text, concatenated.
inline std::string stream_text(const SseReply& reply) {
    std::string text;
    for (const auto& c : reply.chunks) {
        if (!c.contains("choices") || c["choices"].empty()) continue;
        const auto& choice = c["choices"][0];
        if (choice.contains("delta") && choice["delta"].contains("content")) {
            text += choice["delta"]["content"].get<std::string>();
        } else if (choice.contains("text")) {
            text += choice["text"].get<std::string>();
        }
    }
    return text;
}

}  // namespace tokenscope::test
