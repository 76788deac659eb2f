#include "server_url.h"

#include <algorithm>
#include <cctype>

#include "util/error.h"

namespace tokenscope::remote {

std::string ServerUrl::origin() const {
    const bool ipv6 = host.find(':') != std::string::npos;
    return scheme + "://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string ServerUrl::describe(const std::string& path) const {
    return origin() + prefix + path;
}

ServerUrl parse_server_url(const std::string& input) {
    auto bad = [&](const std::string& why) {
        return InvalidArgument("server URL '" + input + "': " + why +
                               " (expected http://host:port, e.g. http://127.0.0.1:8000/v1)");
    };
    std::string url = input;
    url.erase(0, url.find_first_not_of(" \t"));
    url.erase(url.find_last_not_of(" \t") + 1);
    if (url.empty()) throw bad("empty");
    ServerUrl out;
    const auto sep = url.find("://");
    if (sep == std::string::npos) {
        out.scheme = "http";
    } else {
        out.scheme = url.substr(0, sep);
        std::transform(out.scheme.begin(), out.scheme.end(), out.scheme.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        url.erase(0, sep + 3);
    }
    if (out.scheme != "http" && out.scheme != "https")
        throw bad("the scheme must be http or https, not '" + out.scheme + "'");
    const auto slash = url.find('/');
    std::string authority = url.substr(0, slash);
    std::string path = slash == std::string::npos ? "" : url.substr(slash);
    if (authority.find('@') != std::string::npos)
        throw bad("credentials in the URL are not supported; use the API key field");
    if (path.find_first_of("?#") != std::string::npos) throw bad("no query or fragment, please");
    std::string port_text;
    if (!authority.empty() && authority.front() == '[') {  // [::1]:8080
        const auto close = authority.find(']');
        if (close == std::string::npos) throw bad("unclosed '[' in the host");
        out.host = authority.substr(1, close - 1);
        if (close + 1 < authority.size()) {
            if (authority[close + 1] != ':') throw bad("junk after the IPv6 address");
            port_text = authority.substr(close + 2);
        }
    } else {
        const auto colon = authority.find(':');
        out.host = authority.substr(0, colon);
        if (colon != std::string::npos) {
            port_text = authority.substr(colon + 1);
            if (port_text.empty()) throw bad("empty port after ':'");
        }
    }
    if (out.host.empty()) throw bad("no host");
    if (port_text.empty()) {
        out.port = out.scheme == "https" ? 443 : 80;
    } else {
        if (port_text.size() > 5 ||
            !std::all_of(port_text.begin(), port_text.end(),
                         [](unsigned char c) { return std::isdigit(c) != 0; }))
            throw bad("the port '" + port_text + "' is not a number");
        out.port = std::stoi(port_text);
        if (out.port < 1 || out.port > 65535) throw bad("the port must be 1 to 65535");
    }
    while (!path.empty() && path.back() == '/') path.pop_back();
    if (path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0)
        path.resize(path.size() - 3);
    out.prefix = path;
    return out;
}

}  // namespace tokenscope::remote
