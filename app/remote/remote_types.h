#pragma once
// The values the remote engine hands its callers: per-token events shaped like the local
// engine's TokenEvent (text delta, token, logprob, alternatives, timing), the request, and the
// result of one reply. Plain structs without Qt or HTTP types, so the CLI and the GUI's worker
// use them directly.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/error.h"

namespace tokenscope::remote {

// A server that answered badly or not at all. what() is one line for the user naming the URL
// and, when there was an answer, its HTTP status and the server's own message.
class RemoteError : public Error {
  public:
    RemoteError(const std::string& message, int status = 0) : Error(message), status_(status) {}
    int status() const { return status_; }  // 0: no HTTP answer (refused, timeout, TLS)

  private:
    int status_;
};

struct ModelEntry {
    std::string id;
    std::string owned_by;                        // "tokenscope" for our own server
    std::optional<std::int64_t> context_length;  // when the server says (ours, vLLM max_model_len)
};

struct ChatMessage {
    std::string role;  // system, user, assistant
    std::string content;
};

struct ChatRequest {
    std::vector<ChatMessage> messages;
    int max_tokens = 512;  // 0: not sent (the server allows what its context leaves)
    // Unset fields are not sent: strict servers (OpenAI's own) refuse fields they do not know.
    std::optional<double> temperature;
    std::optional<double> top_p;
    std::optional<int> top_k;     // vLLM, llama.cpp, SGLang, ours; not OpenAI
    std::optional<double> min_p;  // likewise
    std::optional<double> repetition_penalty;
    std::optional<std::uint64_t> seed;
    std::vector<std::string> stop;
    int top_logprobs = 20;  // 0: no logprobs asked
};

struct Candidate {
    std::int32_t id = -1;  // -1: the server gives token text only (OpenAI's top_logprobs)
    std::string text;
    double logprob = 0.0;
    double probability = 0.0;     // exp(logprob), or ours' own number
    std::optional<double> logit;  // ours only
};

// One generated token (or, from a server without logprobs, one streamed text delta).
struct RemoteToken {
    std::string text;   // what it added to the reply; the deltas concatenate to the reply
    std::string token;  // the token as the server spelled it (may be a partial UTF-8 sequence)
    std::int32_t id = -1;
    std::optional<double> logprob;
    std::optional<double> probability;  // ours: under the distribution it was drawn from
    std::vector<Candidate> top;         // top_logprobs; ours: before the sampling settings
    std::vector<Candidate> after;       // ours only: after the sampling settings
    bool has_logprobs = false;          // false: a plain text delta (the server gave no logprobs)
    double since_request_ms = 0.0;      // measured here, from sending the request
    double token_ms = 0.0;              // since the previous token (first: since the request)
};

// Our server's own timing of the reply (the "tokenscope" extension's final chunk).
struct ServerTimings {
    std::int64_t prompt_tokens = 0;
    std::int64_t reused_tokens = 0;
    double prefill_ms = 0.0;
    double decode_ms = 0.0;
    std::int64_t generated_tokens = 0;
};

struct ChatResult {
    std::string id;  // the completion's id ("chatcmpl-..."), when the server sent one
    std::string text;
    std::string finish_reason;  // the server's ("stop", "length", ...); "cancelled"; "" unknown
    std::optional<std::int64_t> prompt_tokens;      // from usage
    std::optional<std::int64_t> completion_tokens;  // from usage
    int tokens = 0;                                 // events with logprobs, or deltas without
    bool logprobs = false;                          // the server gave per-token logprobs
    double ttft_ms = 0.0;                           // request sent -> first token, measured here
    double total_ms = 0.0;
    std::optional<ServerTimings> server_timings;
    std::vector<std::string> notices;  // what this server did not give, for the user
    bool cancelled = false;
    // Decode rate measured here: tokens after the first over the time after the first.
    double tokens_per_s() const;
    // Tokens for rates: usage's count when given, else what streamed.
    std::int64_t token_count() const;
};

}  // namespace tokenscope::remote
