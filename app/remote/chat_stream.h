#pragma once
// Decodes the chunks of a streamed /v1/chat/completions (each SSE event's JSON) into
// RemoteTokens, in the shapes servers actually send:
//   - choices[0].delta.content with choices[0].logprobs.content = [{token, logprob, bytes,
//     top_logprobs: [{token, logprob}]}], one or several tokens per chunk (vLLM, llama.cpp, ours);
//   - delta.content without logprobs (Ollama, or a server that ignored the request);
//   - a "tokenscope" object beside choices (our server's candidates extension) with token ids
//     and the candidates before and after the sampling settings;
//   - a chunk with finish_reason, a usage chunk (choices: []), an {"error": ...} event.
// Timing comes from the caller's clock (milliseconds since the request), so tests are exact.
#include <nlohmann/json.hpp>

#include "remote_types.h"

namespace tokenscope::remote {

class ChatStreamDecoder {
  public:
    // The tokens `chunk` carries; updates the result (text, finish reason, usage, timings).
    // Throws RemoteError for an error event (the server failed mid-stream).
    std::vector<RemoteToken> decode(const nlohmann::json& chunk, double now_ms);
    // A whole (non-streamed) chat.completion: a server that ignored "stream": true.
    std::vector<RemoteToken> decode_whole(const nlohmann::json& response, double now_ms);

    const ChatResult& result() const { return result_; }
    ChatResult& result() { return result_; }

  private:
    void stamp(RemoteToken& t, double now_ms, int of, int index);
    std::vector<RemoteToken> tokens_of(const nlohmann::json& choice, const std::string& text,
                                       const nlohmann::json* extension, double now_ms);

    ChatResult result_;
    double last_ms_ = 0.0;
    bool first_ = true;
};

}  // namespace tokenscope::remote
