#pragma once
// Parsing and validation of the bodies of POST /v1/chat/completions and /v1/completions.
//
// This layer knows JSON and OpenAI's field rules only, not the engine: it turns bytes into a
// CompletionParams or throws ApiError (400) naming the field and the value it refused. That
// keeps it a pure function of its input, which the fuzz target (fuzz/fuzz_openai_request.cpp)
// relies on. What depends on the model (prompt length against the context, the model name)
// is checked afterwards, in request_builder.h.
//
// Unknown fields are ignored, as OpenAI-compatible servers do (clients send vendor fields);
// fields we cannot honour (n > 1, best_of > 1, echo) are refused rather than silently ignored.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"

namespace tokenscope::server {

enum class Endpoint { ChatCompletions, Completions };

struct CompletionParams {
    Endpoint endpoint = Endpoint::ChatCompletions;
    std::string model;                             // empty: the client did not say
    std::vector<tokenizer::ChatMessage> messages;  // chat
    std::string prompt;                            // completions
    std::optional<std::int64_t> max_tokens;        // max_tokens or max_completion_tokens
    std::optional<double> temperature;             // [0, 2]
    std::optional<double> top_p;                   // [0, 1]
    std::optional<std::int64_t> top_k;             // llama.cpp / vLLM extension, >= 0
    std::optional<double> min_p;                   // extension, [0, 1]
    std::optional<double> frequency_penalty;       // [-2, 2]
    std::optional<double> presence_penalty;        // [-2, 2]
    std::optional<double> repetition_penalty;      // vLLM's name for repeat_penalty, > 0
    std::optional<std::uint64_t> seed;
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool logprobs = false;
    int top_logprobs = 0;     // chat: top_logprobs; completions: the integer logprobs
    bool candidates = false;  // "tokenscope": {"candidates": true}
    // "tokenscope": {"attention": true}: capture the attention weights of every layer and head
    // (the first kServedAttentionPositions positions), for GET /tokenscope/v1/attention.
    bool attention = false;
};

// Query positions a served request's attention capture keeps (each is a row per layer and
// head: 512 positions of a 30-layer, 9-head model are about 140 MB at most).
constexpr std::int64_t kServedAttentionPositions = 512;

// Limits a request may not exceed (OpenAI's own, where it has one).
constexpr int kMaxTopLogprobs = 20;
constexpr std::size_t kMaxStopStrings = 16;

// Throws ApiError(400) for malformed JSON (with its position), wrong types and values out of
// range, naming the field.
CompletionParams parse_completion_request(std::string_view body, Endpoint endpoint);

}  // namespace tokenscope::server
