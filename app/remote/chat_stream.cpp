#include "chat_stream.h"

#include <cmath>

namespace tokenscope::remote {

using nlohmann::json;

double ChatResult::tokens_per_s() const {
    const auto n = token_count();
    const double decode_ms = total_ms - ttft_ms;
    return n > 1 && decode_ms > 0 ? 1000.0 * static_cast<double>(n - 1) / decode_ms : 0.0;
}

std::int64_t ChatResult::token_count() const {
    return completion_tokens ? *completion_tokens : tokens;
}

namespace {

std::string string_or(const json& j, const char* key, std::string fallback = {}) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

std::optional<double> number_of(const json& j, const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
}

// log(p) clamped for "impossible" (OpenAI sends -9999.0, others -inf as a string or null).
double probability_of(double logprob) {
    return logprob < -700 ? 0.0 : std::exp(logprob);
}

std::vector<Candidate> top_of(const json& entry) {
    std::vector<Candidate> out;
    const auto it = entry.find("top_logprobs");
    if (it == entry.end() || !it->is_array()) return out;
    for (const auto& c : *it) {
        if (!c.is_object()) continue;
        Candidate k;
        k.text = string_or(c, "token");
        k.logprob = number_of(c, "logprob").value_or(-9999.0);
        k.probability = probability_of(k.logprob);
        if (auto id = number_of(c, "id")) k.id = static_cast<std::int32_t>(*id);  // llama.cpp
        out.push_back(std::move(k));
    }
    return out;
}

std::vector<Candidate> candidates_of(const json& list) {
    std::vector<Candidate> out;
    if (!list.is_array()) return out;
    for (const auto& c : list) {
        Candidate k;
        k.id = static_cast<std::int32_t>(number_of(c, "id").value_or(-1));
        k.text = string_or(c, "text", string_or(c, "piece"));
        k.probability = number_of(c, "probability").value_or(0.0);
        k.logprob = k.probability > 0 ? std::log(k.probability) : -9999.0;
        k.logit = number_of(c, "logit");
        out.push_back(std::move(k));
    }
    return out;
}

std::string error_text(const json& error) {
    if (error.is_string()) return error.get<std::string>();
    if (error.is_object()) return string_or(error, "message", error.dump());
    return error.dump();
}

}  // namespace

void ChatStreamDecoder::stamp(RemoteToken& t, double now_ms, int of, int index) {
    // Tokens that arrive in one chunk share its arrival: the gap is split between them.
    const double gap = (now_ms - last_ms_) / of;
    t.token_ms = gap;
    t.since_request_ms = last_ms_ + gap * (index + 1);
    if (first_) {
        result_.ttft_ms = now_ms;
        first_ = false;
    }
}

std::vector<RemoteToken> ChatStreamDecoder::tokens_of(const json& choice, const std::string& text,
                                                      const json* extension, double now_ms) {
    std::vector<RemoteToken> out;
    const json* entries = nullptr;
    if (const auto lp = choice.find("logprobs"); lp != choice.end() && lp->is_object()) {
        if (const auto c = lp->find("content"); c != lp->end() && c->is_array() && !c->empty())
            entries = &*c;
    }
    if (entries) {
        result_.logprobs = true;
        std::string joined;
        for (const auto& e : *entries) joined += string_or(e, "token");
        for (const auto& e : *entries) {
            RemoteToken t;
            t.has_logprobs = true;
            t.token = string_or(e, "token");
            t.logprob = number_of(e, "logprob");
            t.top = top_of(e);
            if (auto id = number_of(e, "id")) t.id = static_cast<std::int32_t>(*id);
            out.push_back(std::move(t));
        }
        // The reply's text is the deltas: each token carries its own text when they spell the
        // delta exactly, else the whole delta rides on the last (its bytes were held back).
        if (joined == text) {
            for (auto& t : out) t.text = t.token;
        } else {
            out.back().text = text;
        }
    } else if (!text.empty()) {
        RemoteToken t;
        t.text = text;
        t.token = text;
        out.push_back(std::move(t));
    }
    if (extension && out.size() == 1 && extension->contains("before")) {
        RemoteToken& t = out.front();
        t.id = static_cast<std::int32_t>(number_of(*extension, "token").value_or(t.id));
        t.probability = number_of(*extension, "probability");
        t.top = candidates_of((*extension)["before"]);
        if (extension->contains("after")) t.after = candidates_of((*extension)["after"]);
    }
    for (std::size_t i = 0; i < out.size(); ++i)
        stamp(out[i], now_ms, static_cast<int>(out.size()), static_cast<int>(i));
    if (!out.empty()) last_ms_ = now_ms;
    result_.tokens += static_cast<int>(out.size());
    result_.text += text;
    return out;
}

std::vector<RemoteToken> ChatStreamDecoder::decode(const json& chunk, double now_ms) {
    if (!chunk.is_object()) return {};
    if (const auto error = chunk.find("error"); error != chunk.end() && !error->is_null())
        throw RemoteError("the server failed mid-reply: " + error_text(*error));
    if (const auto id = chunk.find("id");
        id != chunk.end() && id->is_string() && result_.id.empty())
        result_.id = id->get<std::string>();
    if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
        if (auto n = number_of(*usage, "prompt_tokens"))
            result_.prompt_tokens = static_cast<std::int64_t>(*n);
        if (auto n = number_of(*usage, "completion_tokens"))
            result_.completion_tokens = static_cast<std::int64_t>(*n);
    }
    const json* extension = nullptr;
    if (const auto ext = chunk.find("tokenscope"); ext != chunk.end() && ext->is_object()) {
        extension = &*ext;
        if (const auto t = ext->find("timings"); t != ext->end() && t->is_object()) {
            ServerTimings s;
            s.prompt_tokens = static_cast<std::int64_t>(number_of(*t, "prompt_tokens").value_or(0));
            s.reused_tokens = static_cast<std::int64_t>(number_of(*t, "reused_tokens").value_or(0));
            s.prefill_ms = number_of(*t, "prefill_ms").value_or(0);
            s.decode_ms = number_of(*t, "decode_ms").value_or(0);
            s.generated_tokens =
                static_cast<std::int64_t>(number_of(*t, "generated_tokens").value_or(0));
            result_.server_timings = s;
        }
    }
    const auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array() || choices->empty()) return {};
    const json& choice = (*choices)[0];
    std::string text;
    if (const auto delta = choice.find("delta"); delta != choice.end() && delta->is_object())
        text = string_or(*delta, "content");
    else
        text = string_or(choice, "text");  // a /v1/completions-shaped chunk
    auto out = tokens_of(choice, text, extension, now_ms);
    if (const auto reason = choice.find("finish_reason");
        reason != choice.end() && reason->is_string())
        result_.finish_reason = reason->get<std::string>();
    return out;
}

std::vector<RemoteToken> ChatStreamDecoder::decode_whole(const json& response, double now_ms) {
    json chunk = response;
    if (chunk.contains("choices") && chunk["choices"].is_array() && !chunk["choices"].empty()) {
        json& choice = chunk["choices"][0];
        if (choice.contains("message")) choice["delta"] = choice["message"];
    }
    return decode(chunk, now_ms);
}

}  // namespace tokenscope::remote
