#pragma once
// The address of an OpenAI-compatible server as users write it: "http://host:8000",
// "http://host:8000/v1" (what vLLM's and OpenAI's docs print), "https://gpu-box/llm/v1"
// behind a reverse proxy, or "localhost:11434". Parsed once into what cpp-httplib needs
// (scheme://host:port) and the path prefix the API routes hang under.
#include <string>

namespace tokenscope::remote {

struct ServerUrl {
    std::string scheme;  // "http" or "https"
    std::string host;
    int port = 0;
    std::string prefix;  // "" or "/llm": routes are prefix + "/v1/...", prefix + "/metrics"

    // "http://host:port" for httplib::Client.
    std::string origin() const;
    // origin() + prefix + path, for messages.
    std::string describe(const std::string& path) const;
};

// Throws InvalidArgument naming the URL for anything that is not http(s)://host[:port][/path].
// A missing scheme means http; a trailing "/v1" (or "/v1/") is dropped because the routes add it.
ServerUrl parse_server_url(const std::string& url);

}  // namespace tokenscope::remote
