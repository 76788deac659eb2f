#pragma once
// From validated OpenAI parameters to an engine Request: the prompt (the model's own chat
// template for chat, the raw text for completions), the sampling parameters over the server's
// defaults, stop strings, and the checks that need the model (its name, its context).
//
// Runs on the HTTP worker threads: it only reads the engine's immutable parts (tokenizer,
// template, config), which are safe to share while the engine thread steps.
#include <optional>
#include <string>

#include "openai_request.h"
#include "runtime/engine.h"
#include "runtime/prompt_builder.h"

namespace tokenscope::server {

struct BuiltRequest {
    runtime::Request request;
    std::int64_t prompt_tokens = 0;
};

class RequestBuilder {
  public:
    // `defaults`: the sampling the server was started with (--temp, --top-k, ...); a request's
    // fields override them. `context`: the most tokens a sequence may hold (prompt + answer).
    RequestBuilder(const runtime::Engine& engine, std::string model_id,
                   runtime::SamplingParams defaults, std::int64_t context,
                   const std::optional<std::string>& template_name);

    // Throws ApiError: 404 for another model's name, 400 for a prompt that leaves no room or a
    // max_tokens beyond the context.
    BuiltRequest build(const CompletionParams& params) const;

    const std::string& model_id() const { return model_id_; }
    std::int64_t context() const { return context_; }
    std::string template_description() const { return prompts_.description(); }

  private:
    const runtime::Engine& engine_;
    std::string model_id_;
    runtime::SamplingParams defaults_;
    std::int64_t context_;
    runtime::PromptBuilder prompts_;
};

}  // namespace tokenscope::server
