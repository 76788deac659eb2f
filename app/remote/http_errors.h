#pragma once
// One-line messages for a server that did not answer as asked: what the user sees in the CLI
// and the app. They name the URL, the HTTP status and the server's own message, and say what
// to do about the common causes (a wrong port, a missing API key, a wrong model name).
#include <string>

namespace tokenscope::remote {

// The server's own explanation in an error body, whatever its shape: OpenAI's
// {"error": {"message"}}, vLLM's {"message"}, Ollama's {"error": "..."}, FastAPI's {"detail"};
// else the start of the body.
std::string server_message(const std::string& body);

// "http://h:p/v1/models answered 401 Unauthorized: <message>; <hint>".
std::string status_error(const std::string& where, int status, const std::string& body);

// A request that got no HTTP answer: refused, unreachable, timed out, TLS. `error` is
// cpp-httplib's Error as an int (kept out of this header).
std::string transport_error(const std::string& where, int error);

}  // namespace tokenscope::remote
