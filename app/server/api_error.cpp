#include "api_error.h"

namespace tokenscope::server {

nlohmann::json ApiError::to_json() const {
    nlohmann::json error = {{"message", what()}, {"type", type_}};
    error["param"] = param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_);
    error["code"] = code_.empty() ? nlohmann::json(nullptr) : nlohmann::json(code_);
    return {{"error", std::move(error)}};
}

std::string dump_json(const nlohmann::json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tokenscope::server
