#include "request_builder.h"

#include <random>

#include <spdlog/spdlog.h>

#include "api_error.h"
#include "util/error.h"

namespace tokenscope::server {

RequestBuilder::RequestBuilder(const runtime::Engine& engine, std::string model_id,
                               runtime::SamplingParams defaults, std::int64_t context,
                               const std::optional<std::string>& template_name)
    : engine_(engine),
      model_id_(std::move(model_id)),
      defaults_(defaults),
      context_(context),
      prompts_(engine, template_name) {}

BuiltRequest RequestBuilder::build(const CompletionParams& p) const {
    if (!p.model.empty() && p.model != model_id_) {
        throw ApiError(
            404,
            "the model '" + p.model + "' does not exist; this server serves '" + model_id_ + "'",
            "model", "invalid_request_error", "model_not_found");
    }
    BuiltRequest built;
    runtime::Request& r = built.request;
    if (p.endpoint == Endpoint::ChatCompletions) {
        std::string warning;
        r = prompts_.chat(p.messages, &warning);
        if (!warning.empty()) spdlog::warn("serve: {}", warning);
    } else {
        r = prompts_.raw(p.prompt);
    }
    if (r.prompt.empty())
        throw bad_request("the prompt is empty (it encodes to no tokens)", "prompt");
    built.prompt_tokens = static_cast<std::int64_t>(r.prompt.size());

    // The answer has the room the context leaves after the prompt; asking for more is the
    // client's error (as OpenAI and vLLM answer), asking for nothing means "all of it".
    const std::int64_t room = context_ - built.prompt_tokens;
    if (room <= 0) {
        throw bad_request("the prompt has " + std::to_string(built.prompt_tokens) +
                              " tokens; the context holds " + std::to_string(context_) +
                              " (prompt and answer together)",
                          p.endpoint == Endpoint::ChatCompletions ? "messages" : "prompt");
    }
    if (p.max_tokens && *p.max_tokens > room) {
        throw bad_request("'max_tokens' is " + std::to_string(*p.max_tokens) +
                              " but the context of " + std::to_string(context_) +
                              " tokens leaves " + std::to_string(room) + " after the prompt's " +
                              std::to_string(built.prompt_tokens),
                          "max_tokens");
    }
    r.max_tokens = static_cast<int>(p.max_tokens.value_or(room));

    runtime::SamplingParams s = defaults_;
    if (p.temperature) s.temperature = static_cast<float>(*p.temperature);
    if (p.top_p) s.top_p = static_cast<float>(*p.top_p);
    if (p.top_k) s.top_k = static_cast<int>(*p.top_k);
    if (p.min_p) s.min_p = static_cast<float>(*p.min_p);
    if (p.frequency_penalty) s.frequency_penalty = static_cast<float>(*p.frequency_penalty);
    if (p.presence_penalty) s.presence_penalty = static_cast<float>(*p.presence_penalty);
    if (p.repetition_penalty) s.repeat_penalty = static_cast<float>(*p.repetition_penalty);
    // Without a seed every request draws its own; with one, the same request gives the same
    // answer (as long as it is batched the same way: the logits are, the draw is per sequence).
    s.seed = p.seed ? *p.seed : std::random_device{}();
    // Candidates cost a partial sort per token: ask the sampler only for what is reported.
    s.n_candidates = std::max(p.logprobs ? p.top_logprobs : 0, p.candidates ? 10 : 0);
    try {
        s.validate();
    } catch (const InvalidArgument& e) {
        throw bad_request(std::string("sampling parameters: ") + e.what());
    }
    r.sampling = s;
    r.capture.enabled = p.attention;
    r.capture.max_context = kServedAttentionPositions;
    for (const auto& stop : p.stop) r.stop_strings.push_back(stop);
    return built;
}

}  // namespace tokenscope::server
