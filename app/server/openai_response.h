#pragma once
// TokenEvents to OpenAI response bodies: streamed chunks (chat.completion.chunk,
// text_completion) as Server-Sent Events, or one JSON response, with logprobs in the shape
// of each endpoint and usage. One formatter per request, fed the request's events in order.
//
// Shapes (OpenAI's API reference):
//   chat stream    data:
//   {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"},
//                         "logprobs":{"content":[{"token","logprob","bytes","top_logprobs"}]},"finish_reason":null}]}
//   completions    data: {"object":"text_completion","choices":[{"index":0,"text":"Hi","logprobs":
//                         {"tokens","token_logprobs","top_logprobs","text_offset"},"finish_reason":null}]}
//   end            a chunk with finish_reason, a usage chunk (choices: []) when asked, data: [DONE]
// Extension: with "tokenscope": {"candidates": true} each token's chunk carries a "tokenscope"
// object with the sampler's top candidates before and after shaping.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "openai_request.h"
#include "runtime/engine.h"

namespace tokenscope::server {

// "stop", "length" (or null while running): OpenAI's finish_reason for ours.
const char* openai_finish_reason(runtime::FinishReason reason);

// One Server-Sent Event carrying `json`.
std::string sse_event(const nlohmann::json& json);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

class CompletionFormatter {
  public:
    CompletionFormatter(const CompletionParams& params, const tokenizer::Tokenizer& tokenizer,
                        std::string id, std::string model, std::int64_t prompt_tokens);

    // Streaming. The first event (chat: the assistant role with empty content).
    std::string stream_start();
    // Appends the SSE events for `events`; after the finishing one: finish chunk, usage, [DONE].
    void stream(const std::vector<runtime::TokenEvent>& events, std::string& out);

    // Non-streaming: collect, then response().
    void collect(const std::vector<runtime::TokenEvent>& events);
    nlohmann::json response() const;

    bool finished() const { return finished_; }
    std::int64_t completion_tokens() const { return completion_tokens_; }

  private:
    nlohmann::json chunk_base() const;
    nlohmann::json usage() const;
    bool is_content_token(const runtime::TokenEvent& e) const;
    // Per-token logprobs: the chat entry, or appends to the completions' parallel arrays.
    nlohmann::json chat_logprob(const runtime::TokenEvent& e);
    void completion_logprob(const runtime::TokenEvent& e, std::size_t text_offset,
                            nlohmann::json& into);
    nlohmann::json candidates(const runtime::TokenEvent& e) const;
    std::string token_text(std::int32_t token);
    void note(const runtime::TokenEvent& e);

    CompletionParams params_;
    const tokenizer::Tokenizer& tokenizer_;
    std::string id_;
    std::string model_;
    std::int64_t created_;
    std::int64_t prompt_tokens_;
    std::int64_t completion_tokens_ = 0;
    bool finished_ = false;
    runtime::FinishReason reason_ = runtime::FinishReason::None;
    runtime::Timings timings_;
    bool at_start_ = true;  // no visible token text yet (sentencepiece drops the leading space)
    // Non-streaming accumulation.
    std::string text_;
    nlohmann::json logprobs_;
    nlohmann::json candidates_ = nlohmann::json::array();
};

}  // namespace tokenscope::server
