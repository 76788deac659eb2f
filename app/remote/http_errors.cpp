#include "http_errors.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace tokenscope::remote {

namespace {
const char* reason_phrase(int status) {
    switch (status) {
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 413:
            return "Payload Too Large";
        case 422:
            return "Unprocessable Entity";
        case 429:
            return "Too Many Requests";
        case 500:
            return "Internal Server Error";
        case 502:
            return "Bad Gateway";
        case 503:
            return "Service Unavailable";
        case 504:
            return "Gateway Timeout";
        default:
            return "";
    }
}

std::string one_line(std::string text, std::size_t limit) {
    for (char& c : text)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    if (text.size() > limit) text = text.substr(0, limit) + "…";
    return text;
}
}  // namespace

std::string server_message(const std::string& body) {
    const auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_object()) {
        if (const auto e = j.find("error"); e != j.end()) {
            if (e->is_string()) return e->get<std::string>();
            if (e->is_object() && e->contains("message") && (*e)["message"].is_string())
                return (*e)["message"].get<std::string>();
        }
        for (const char* key : {"message", "detail"}) {
            if (const auto m = j.find(key); m != j.end())
                return m->is_string() ? m->get<std::string>() : m->dump();
        }
    }
    return one_line(body, 160);
}

std::string status_error(const std::string& where, int status, const std::string& body) {
    std::string out = where + " answered " + std::to_string(status);
    if (const char* phrase = reason_phrase(status); *phrase) out += std::string(" ") + phrase;
    const std::string message = one_line(server_message(body), 300);
    if (!message.empty()) out += ": " + message;
    if (status == 401 || status == 403)
        out +=
            " (the server needs an API key: set it with --api-key, or in File › Connect to server)";
    else if (status == 404 && where.find("/chat/completions") == std::string::npos &&
             where.find("/models") != std::string::npos)
        out +=
            " (is this an OpenAI-compatible server? the URL should be its base, e.g. "
            "http://host:8000/v1)";
    return out;
}

std::string transport_error(const std::string& where, int error) {
    switch (static_cast<httplib::Error>(error)) {
        case httplib::Error::Connection:
            return "cannot connect to " + where +
                   ": connection refused or host unreachable (is the server running, and is the "
                   "port right?)";
        case httplib::Error::ConnectionTimeout:
            return "cannot connect to " + where + ": timed out (a firewall, or the wrong host?)";
        case httplib::Error::Read:
            return "the connection to " + where + " broke or timed out while reading the answer";
        case httplib::Error::Write:
            return "the connection to " + where + " broke while sending the request";
        case httplib::Error::SSLConnection:
            return "TLS handshake with " + where + " failed (is it really https?)";
        case httplib::Error::SSLServerVerification:
            return "the certificate of " + where + " is not trusted by this machine";
        case httplib::Error::SSLLoadingCerts:
            return "cannot load this machine's CA certificates to check " + where;
        default:
            return "request to " + where +
                   " failed: " + httplib::to_string(static_cast<httplib::Error>(error));
    }
}

}  // namespace tokenscope::remote
