#pragma once
// An error answered to an HTTP client in OpenAI's shape:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "temperature", "code":
//   null}}
// The message names the problem (field, value, limit) so a client author can fix the call
// without reading our source.
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace tokenscope::server {

class ApiError : public std::runtime_error {
  public:
    ApiError(int status, std::string message, std::string param = {},
             std::string type = "invalid_request_error", std::string code = {})
        : std::runtime_error(message),
          status_(status),
          param_(std::move(param)),
          type_(std::move(type)),
          code_(std::move(code)) {}

    int status() const { return status_; }
    const std::string& param() const { return param_; }
    const std::string& type() const { return type_; }
    const std::string& code() const { return code_; }

    nlohmann::json to_json() const;

  private:
    int status_;
    std::string param_;
    std::string type_;
    std::string code_;
};

// Helpers for the common cases.
inline ApiError bad_request(std::string message, std::string param = {}) {
    return ApiError(400, std::move(message), std::move(param));
}

// Serialises JSON for the wire. Text the model produced may hold bytes that are not UTF-8 on
// their own (a token that is half of a multi-byte character); nlohmann throws on those by
// default, so every dump goes through here and replaces them with U+FFFD.
std::string dump_json(const nlohmann::json& value);

}  // namespace tokenscope::server
