#include "openai_response.h"

#include <chrono>
#include <cmath>

#include "api_error.h"

namespace tokenscope::server {

using nlohmann::json;

const char* openai_finish_reason(runtime::FinishReason reason) {
    switch (reason) {
        case runtime::FinishReason::Eos:
        case runtime::FinishReason::StopToken:
        case runtime::FinishReason::StopString:
            return "stop";
        case runtime::FinishReason::MaxTokens:
        case runtime::FinishReason::ContextFull:
            return "length";
        case runtime::FinishReason::Cancelled:
            return "cancelled";
        case runtime::FinishReason::None:
            break;
    }
    return nullptr;
}

std::string sse_event(const json& value) {
    return "data: " + dump_json(value) + "\n\n";
}

namespace {
json bytes_of(const std::string& text) {
    json bytes = json::array();
    for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
    return bytes;
}

// log(p) for a probability that may be 0 (OpenAI uses -9999 for "impossible").
double log_or_floor(float p) {
    return p > 0.0f ? std::log(static_cast<double>(p)) : -9999.0;
}
}  // namespace

CompletionFormatter::CompletionFormatter(const CompletionParams& params,
                                         const tokenizer::Tokenizer& tokenizer, std::string id,
                                         std::string model, std::int64_t prompt_tokens)
    : params_(params),
      tokenizer_(tokenizer),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      prompt_tokens_(prompt_tokens) {
    if (params_.endpoint == Endpoint::ChatCompletions) {
        logprobs_ = {{"content", json::array()}};
    } else {
        logprobs_ = {{"tokens", json::array()},
                     {"token_logprobs", json::array()},
                     {"top_logprobs", json::array()},
                     {"text_offset", json::array()}};
    }
}

bool CompletionFormatter::is_content_token(const runtime::TokenEvent& e) const {
    // EOS and end-of-turn tokens end the answer; they are not part of it.
    if (e.token < 0) return false;
    return !(e.finished && (e.reason == runtime::FinishReason::Eos ||
                            e.reason == runtime::FinishReason::StopToken));
}

std::string CompletionFormatter::token_text(std::int32_t token) {
    std::string text(tokenizer_.token_bytes(token, at_start_));
    if (!text.empty()) at_start_ = false;
    return text;
}

json CompletionFormatter::chunk_base() const {
    const bool chat = params_.endpoint == Endpoint::ChatCompletions;
    return {{"id", id_},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", model_},
            {"system_fingerprint", nullptr}};
}

json CompletionFormatter::usage() const {
    return {{"prompt_tokens", prompt_tokens_},
            {"completion_tokens", completion_tokens_},
            {"total_tokens", prompt_tokens_ + completion_tokens_}};
}

json CompletionFormatter::chat_logprob(const runtime::TokenEvent& e) {
    const bool start = at_start_;
    const std::string text = token_text(e.token);
    json top = json::array();
    for (std::size_t i = 0; i < e.before.size() && static_cast<int>(i) < params_.top_logprobs;
         ++i) {
        const auto& c = e.before[i];
        const std::string t(tokenizer_.token_bytes(c.id, start));
        top.push_back(
            {{"token", t}, {"logprob", log_or_floor(c.probability)}, {"bytes", bytes_of(t)}});
    }
    return {{"token", text},
            {"logprob", e.logprob},
            {"bytes", bytes_of(text)},
            {"top_logprobs", std::move(top)}};
}

void CompletionFormatter::completion_logprob(const runtime::TokenEvent& e, std::size_t text_offset,
                                             json& into) {
    const bool start = at_start_;
    const std::string text = token_text(e.token);
    json top = json::object();
    for (std::size_t i = 0; i < e.before.size() && static_cast<int>(i) < params_.top_logprobs;
         ++i) {
        const auto& c = e.before[i];
        top[std::string(tokenizer_.token_bytes(c.id, start))] = log_or_floor(c.probability);
    }
    into["tokens"].push_back(text);
    into["token_logprobs"].push_back(e.logprob);
    into["top_logprobs"].push_back(std::move(top));
    into["text_offset"].push_back(text_offset);
}

json CompletionFormatter::candidates(const runtime::TokenEvent& e) const {
    auto list = [&](const std::vector<runtime::TokenCandidate>& cs) {
        json out = json::array();
        for (const auto& c : cs) {
            out.push_back({{"id", c.id},
                           {"piece", c.piece},
                           {"text", std::string(tokenizer_.token_bytes(c.id, false))},
                           {"probability", c.probability},
                           {"logit", c.logit}});
        }
        return out;
    };
    return {{"token", e.token},       {"piece", tokenizer_.piece(e.token)},
            {"position", e.position}, {"probability", e.probability},
            {"logprob", e.logprob},   {"before", list(e.before)},
            {"after", list(e.after)}};
}

void CompletionFormatter::note(const runtime::TokenEvent& e) {
    timings_ = e.timings;
    completion_tokens_ = e.timings.generated_tokens;
    if (e.finished) {
        finished_ = true;
        reason_ = e.reason;
    }
}

std::string CompletionFormatter::stream_start() {
    if (params_.endpoint != Endpoint::ChatCompletions) return {};
    json chunk = chunk_base();
    chunk["choices"] = json::array({{{"index", 0},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}});
    return sse_event(chunk);
}

void CompletionFormatter::stream(const std::vector<runtime::TokenEvent>& events, std::string& out) {
    const bool chat = params_.endpoint == Endpoint::ChatCompletions;
    for (const auto& e : events) {
        if (finished_) break;
        note(e);
        const bool content = is_content_token(e);
        const bool per_token = content && (params_.logprobs || params_.candidates);
        if (!e.text.empty() || per_token) {
            json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
            if (chat) {
                choice["delta"] = {{"content", e.text}};
            } else {
                choice["text"] = e.text;
            }
            if (content && params_.logprobs) {
                if (chat) {
                    choice["logprobs"] = {{"content", json::array({chat_logprob(e)})}};
                } else {
                    json lp = {{"tokens", json::array()},
                               {"token_logprobs", json::array()},
                               {"top_logprobs", json::array()},
                               {"text_offset", json::array()}};
                    completion_logprob(e, text_.size(), lp);
                    choice["logprobs"] = std::move(lp);
                }
            } else if (content) {
                token_text(e.token);  // keeps at_start_ right for later tokens
            }
            text_ += e.text;
            json chunk = chunk_base();
            chunk["choices"] = json::array({std::move(choice)});
            if (content && params_.candidates) chunk["tokenscope"] = candidates(e);
            out += sse_event(chunk);
        }
        if (!e.finished) continue;
        json choice = {
            {"index", 0}, {"logprobs", nullptr}, {"finish_reason", openai_finish_reason(e.reason)}};
        if (chat) {
            choice["delta"] = json::object();
        } else {
            choice["text"] = "";
        }
        json chunk = chunk_base();
        chunk["choices"] = json::array({std::move(choice)});
        if (params_.candidates) {
            chunk["tokenscope"] = {{"timings",
                                    {{"prompt_tokens", timings_.prompt_tokens},
                                     {"reused_tokens", timings_.reused_tokens},
                                     {"prefill_ms", timings_.prefill_ms},
                                     {"decode_ms", timings_.decode_ms},
                                     {"generated_tokens", timings_.generated_tokens}}}};
        }
        out += sse_event(chunk);
        if (params_.include_usage) {
            json usage_chunk = chunk_base();
            usage_chunk["choices"] = json::array();
            usage_chunk["usage"] = usage();
            out += sse_event(usage_chunk);
        }
        out += kSseDone;
    }
}

void CompletionFormatter::collect(const std::vector<runtime::TokenEvent>& events) {
    for (const auto& e : events) {
        if (finished_) break;
        note(e);
        if (is_content_token(e)) {
            if (params_.logprobs) {
                if (params_.endpoint == Endpoint::ChatCompletions) {
                    logprobs_["content"].push_back(chat_logprob(e));
                } else {
                    completion_logprob(e, text_.size(), logprobs_);
                }
            } else {
                token_text(e.token);
            }
            if (params_.candidates) candidates_.push_back(candidates(e));
        }
        text_ += e.text;
    }
}

json CompletionFormatter::response() const {
    const bool chat = params_.endpoint == Endpoint::ChatCompletions;
    json choice = {
        {"index", 0},
        {"logprobs", params_.logprobs ? logprobs_ : json(nullptr)},
        {"finish_reason", finished_ ? json(openai_finish_reason(reason_)) : json(nullptr)}};
    if (chat) {
        choice["message"] = {{"role", "assistant"}, {"content", text_}};
    } else {
        choice["text"] = text_;
    }
    json body = {{"id", id_},
                 {"object", chat ? "chat.completion" : "text_completion"},
                 {"created", created_},
                 {"model", model_},
                 {"system_fingerprint", nullptr},
                 {"choices", json::array({std::move(choice)})},
                 {"usage", usage()}};
    if (params_.candidates) {
        body["tokenscope"] = {{"tokens", candidates_},
                              {"timings",
                               {{"prompt_tokens", timings_.prompt_tokens},
                                {"reused_tokens", timings_.reused_tokens},
                                {"prefill_ms", timings_.prefill_ms},
                                {"decode_ms", timings_.decode_ms},
                                {"generated_tokens", timings_.generated_tokens}}}};
    }
    return body;
}

}  // namespace tokenscope::server
