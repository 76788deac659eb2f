#include "openai_request.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "api_error.h"

namespace tokenscope::server {

namespace {

using nlohmann::json;

const char* type_name(const json& v) {
    switch (v.type()) {
        case json::value_t::null:
            return "null";
        case json::value_t::boolean:
            return "a boolean";
        case json::value_t::string:
            return "a string";
        case json::value_t::array:
            return "an array";
        case json::value_t::object:
            return "an object";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
            return "an integer";
        case json::value_t::number_float:
            return "a number";
        default:
            return "a value of another type";
    }
}

// The value as the client wrote it, shortened, for messages ("got \"hot\"").
std::string shown(const json& v) {
    std::string text = dump_json(v);
    if (text.size() > 60) text = text.substr(0, 57) + "...";
    return text;
}

[[noreturn]] void wrong_type(const std::string& field, const char* expected, const json& v) {
    throw bad_request(
        "'" + field + "' must be " + expected + ", got " + type_name(v) + " " + shown(v), field);
}

// Fields may be absent or null (clients send "stop": null); both mean "not given".
const json* field(const json& body, const char* name) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

std::optional<double> number(const json& body, const char* name, double lo, double hi) {
    const json* v = field(body, name);
    if (!v) return std::nullopt;
    if (!v->is_number()) wrong_type(name, "a number", *v);
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) {
        throw bad_request("'" + std::string(name) + "' must be from " + shown(json(lo)) + " to " +
                              shown(json(hi)) + ", got " + shown(*v),
                          name);
    }
    return d;
}

std::optional<std::int64_t> integer(const json& body, const char* name, std::int64_t lo,
                                    std::int64_t hi) {
    const json* v = field(body, name);
    if (!v) return std::nullopt;
    // 5.0 is accepted as 5 (JavaScript clients cannot tell them apart); 5.5 is not.
    if (!v->is_number() ||
        (v->is_number_float() && v->get<double>() != std::floor(v->get<double>()))) {
        wrong_type(name, "an integer", *v);
    }
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
        throw bad_request("'" + std::string(name) + "' must be at most " + std::to_string(hi) +
                              ", got " + shown(*v),
                          name);
    }
    const double d = v->get<double>();
    if (hi == INT64_MAX && d < static_cast<double>(lo)) {
        throw bad_request("'" + std::string(name) + "' must be at least " + std::to_string(lo) +
                              ", got " + shown(*v),
                          name);
    }
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
        throw bad_request("'" + std::string(name) + "' must be from " + std::to_string(lo) +
                              " to " + std::to_string(hi) + ", got " + shown(*v),
                          name);
    }
    return v->is_number_float() ? static_cast<std::int64_t>(d) : v->get<std::int64_t>();
}

bool boolean(const json& body, const char* name, bool fallback) {
    const json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_boolean()) wrong_type(name, "a boolean", *v);
    return v->get<bool>();
}

std::string string(const json& body, const char* name, const std::string& path) {
    const json* v = field(body, name);
    if (!v) return {};
    if (!v->is_string()) wrong_type(path, "a string", *v);
    return v->get<std::string>();
}

// A message's content: a string, or an array of parts of which only {"type": "text"} parts
// are understood (images and audio are refused by name).
std::string message_content(const json& message, const std::string& path) {
    const json* content = field(message, "content");
    if (!content) return {};
    if (content->is_string()) return content->get<std::string>();
    if (!content->is_array())
        wrong_type(path + ".content", "a string or an array of content parts", *content);
    std::string text;
    for (std::size_t i = 0; i < content->size(); ++i) {
        const json& part = (*content)[i];
        const std::string part_path = path + ".content[" + std::to_string(i) + "]";
        if (!part.is_object()) wrong_type(part_path, "an object", part);
        const std::string type = string(part, "type", part_path + ".type");
        if (type != "text") {
            throw bad_request("'" + part_path + ".type' is \"" + type +
                                  "\"; this server understands text parts only",
                              part_path + ".type");
        }
        text += string(part, "text", part_path + ".text");
    }
    return text;
}

void parse_messages(const json& body, CompletionParams& p) {
    const json* messages = field(body, "messages");
    if (!messages) throw bad_request("'messages' is required", "messages");
    if (!messages->is_array()) wrong_type("messages", "an array", *messages);
    if (messages->empty())
        throw bad_request("'messages' must hold at least one message", "messages");
    for (std::size_t i = 0; i < messages->size(); ++i) {
        const json& m = (*messages)[i];
        const std::string path = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) wrong_type(path, "an object", m);
        std::string role = string(m, "role", path + ".role");
        if (role.empty()) throw bad_request("'" + path + ".role' is required", path + ".role");
        // OpenAI's newer name for the system role.
        if (role == "developer") role = "system";
        if (role != "system" && role != "user" && role != "assistant") {
            throw bad_request(
                "'" + path + ".role' must be system, user or assistant, got \"" + role + "\"",
                path + ".role");
        }
        p.messages.push_back({role, message_content(m, path)});
    }
}

void parse_prompt(const json& body, CompletionParams& p) {
    const json* prompt = field(body, "prompt");
    if (!prompt) throw bad_request("'prompt' is required", "prompt");
    if (prompt->is_string()) {
        p.prompt = prompt->get<std::string>();
    } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
        p.prompt = (*prompt)[0].get<std::string>();  // a batch of one
    } else if (prompt->is_array()) {
        throw bad_request(
            "'prompt' as an array must hold exactly one string (batches are not supported)",
            "prompt");
    } else {
        wrong_type("prompt", "a string", *prompt);
    }
}

void parse_stop(const json& body, CompletionParams& p) {
    const json* stop = field(body, "stop");
    if (!stop) return;
    if (stop->is_string()) {
        p.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
        if (stop->size() > kMaxStopStrings) {
            throw bad_request("'stop' may hold at most " + std::to_string(kMaxStopStrings) +
                                  " strings, got " + std::to_string(stop->size()),
                              "stop");
        }
        for (std::size_t i = 0; i < stop->size(); ++i) {
            const json& s = (*stop)[i];
            if (!s.is_string()) wrong_type("stop[" + std::to_string(i) + "]", "a string", s);
            p.stop.push_back(s.get<std::string>());
        }
    } else {
        wrong_type("stop", "a string or an array of strings", *stop);
    }
    for (const auto& s : p.stop) {
        if (s.empty()) throw bad_request("'stop' strings must not be empty", "stop");
    }
}

void parse_logprobs(const json& body, CompletionParams& p) {
    if (p.endpoint == Endpoint::ChatCompletions) {
        p.logprobs = boolean(body, "logprobs", false);
        if (auto n = integer(body, "top_logprobs", 0, kMaxTopLogprobs)) {
            if (!p.logprobs && *n > 0) {
                throw bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
            }
            p.top_logprobs = static_cast<int>(*n);
        }
    } else {
        // Legacy completions: "logprobs": N asks for the N most likely tokens at each position.
        if (auto n = integer(body, "logprobs", 0, kMaxTopLogprobs)) {
            p.logprobs = true;
            p.top_logprobs = static_cast<int>(*n);
        }
    }
}

}  // namespace

CompletionParams parse_completion_request(std::string_view body_text, Endpoint endpoint) {
    json body;
    try {
        body = json::parse(body_text);
    } catch (const json::parse_error& e) {
        // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 9: ..."
        std::string what = e.what();
        if (const auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
        throw bad_request("the request body is not valid JSON: " + what + " (byte " +
                          std::to_string(e.byte) + ")");
    }
    if (!body.is_object())
        throw bad_request(std::string("the request body must be a JSON object, got ") +
                          type_name(body));

    CompletionParams p;
    p.endpoint = endpoint;
    p.model = string(body, "model", "model");
    if (endpoint == Endpoint::ChatCompletions) {
        parse_messages(body, p);
    } else {
        parse_prompt(body, p);
    }

    if (auto n = integer(body, "n", 1, INT64_MAX); n && *n != 1) {
        throw bad_request(
            "'n' must be 1 (this server returns one choice per request), got " + std::to_string(*n),
            "n");
    }
    if (auto n = integer(body, "best_of", 1, INT64_MAX); n && *n != 1) {
        throw bad_request("'best_of' must be 1, got " + std::to_string(*n), "best_of");
    }
    if (boolean(body, "echo", false)) throw bad_request("'echo' is not supported", "echo");

    // max_completion_tokens is the newer name; when both are given they must agree.
    const auto max_tokens = integer(body, "max_tokens", 0, INT64_MAX);
    const auto max_completion = integer(body, "max_completion_tokens", 0, INT64_MAX);
    if (max_tokens && max_completion && *max_tokens != *max_completion) {
        throw bad_request("'max_tokens' (" + std::to_string(*max_tokens) +
                              ") and 'max_completion_tokens' (" + std::to_string(*max_completion) +
                              ") disagree",
                          "max_completion_tokens");
    }
    p.max_tokens = max_completion ? max_completion : max_tokens;

    p.temperature = number(body, "temperature", 0.0, 2.0);
    p.top_p = number(body, "top_p", 0.0, 1.0);
    p.top_k = integer(body, "top_k", 0, 1 << 30);
    p.min_p = number(body, "min_p", 0.0, 1.0);
    p.frequency_penalty = number(body, "frequency_penalty", -2.0, 2.0);
    p.presence_penalty = number(body, "presence_penalty", -2.0, 2.0);
    p.repetition_penalty = number(body, "repetition_penalty", 1e-3, 100.0);
    if (const json* seed = field(body, "seed")) {
        if (!seed->is_number_integer()) wrong_type("seed", "an integer", *seed);
        // Negative seeds are accepted (two's complement), as OpenAI's int64 seed allows.
        p.seed = seed->is_number_unsigned() ? seed->get<std::uint64_t>()
                                            : static_cast<std::uint64_t>(seed->get<std::int64_t>());
    }
    parse_stop(body, p);
    p.stream = boolean(body, "stream", false);
    if (const json* options = field(body, "stream_options")) {
        if (!options->is_object()) wrong_type("stream_options", "an object", *options);
        if (!p.stream)
            throw bad_request("'stream_options' is only allowed with 'stream': true",
                              "stream_options");
        if (const json* v = field(*options, "include_usage")) {
            if (!v->is_boolean()) wrong_type("stream_options.include_usage", "a boolean", *v);
            p.include_usage = v->get<bool>();
        }
    }
    parse_logprobs(body, p);
    if (const json* ext = field(body, "tokenscope")) {
        if (!ext->is_object()) wrong_type("tokenscope", "an object", *ext);
        if (const json* v = field(*ext, "candidates")) {
            if (!v->is_boolean()) wrong_type("tokenscope.candidates", "a boolean", *v);
            p.candidates = v->get<bool>();
        }
        if (const json* v = field(*ext, "attention")) {
            if (!v->is_boolean()) wrong_type("tokenscope.attention", "a boolean", *v);
            p.attention = v->get<bool>();
        }
    }
    return p;
}

}  // namespace tokenscope::server
