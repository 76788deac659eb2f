#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "runtime/sampling_stages.h"
#include "util/error.h"

namespace tokenscope::runtime {

namespace {

[[noreturn]] void bad_field(const char* field, const std::string& value, const char* rule) {
    throw InvalidArgument(
        fmt::format("SamplingParams.{} = {} is invalid: it must be {}", field, value, rule));
}

void check_float(const char* field, float value, bool ok, const char* rule) {
    if (!std::isfinite(value) || !ok) bad_field(field, fmt::format("{}", value), rule);
}

}  // namespace

void SamplingParams::validate() const {
    check_float("temperature", temperature, temperature >= 0.0f, "finite and >= 0 (0 = greedy)");
    if (top_k < 0) bad_field("top_k", std::to_string(top_k), ">= 0 (0 = off)");
    check_float("top_p", top_p, top_p >= 0.0f && top_p <= 1.0f, "in [0, 1] (1 = off)");
    check_float("min_p", min_p, min_p >= 0.0f && min_p <= 1.0f, "in [0, 1] (0 = off)");
    check_float("repeat_penalty", repeat_penalty, repeat_penalty > 0.0f,
                "finite and > 0 (1 = off)");
    check_float("frequency_penalty", frequency_penalty,
                frequency_penalty >= -2.0f && frequency_penalty <= 2.0f, "in [-2, 2] (0 = off)");
    check_float("presence_penalty", presence_penalty,
                presence_penalty >= -2.0f && presence_penalty <= 2.0f, "in [-2, 2] (0 = off)");
    if (penalty_window < 0)
        bad_field("penalty_window", std::to_string(penalty_window), ">= 0 (0 = no penalties)");
    if (n_candidates < 0) bad_field("n_candidates", std::to_string(n_candidates), ">= 0");
}

Sampler::Sampler(SamplingParams params) : params_(params), rng_(params.seed) {
    params_.validate();
}

void Sampler::reset() {
    rng_.seed(params_.seed);
}

double Sampler::next_uniform() {
    // The top 53 bits of one 64-bit output, scaled into [0, 1): exact in a double and the same
    // on every standard library.
    return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

SampleResult Sampler::sample(std::span<const float> logits, std::span<const std::int32_t> history) {
    sampling::check_logits(logits);
    const auto n = static_cast<std::size_t>(params_.n_candidates);

    SampleResult result;
    sampling::SoftmaxStats raw;
    result.before = sampling::softmax_top_n(logits, params_.n_candidates, &raw);

    scratch_.assign(logits.begin(), logits.end());
    sampling::apply_penalties(scratch_, history, params_);

    if (params_.temperature == 0.0f) {
        const auto token = sampling::argmax(scratch_);
        result.token = token;
        result.probability = 1.0f;
        result.logprob = 0.0f;
        result.support_size = 1;
        if (n > 0) result.after.push_back({token, 1.0f, scratch_[static_cast<std::size_t>(token)]});
    } else {
        auto set = sampling::make_candidates(scratch_, params_.top_k);
        if (set.items.empty())
            throw InvalidArgument("sampler: the penalties left no token with a finite logit");
        if (params_.top_p < 1.0f) sampling::top_p(set, params_.top_p);
        if (params_.min_p > 0.0f) sampling::min_p(set, params_.min_p);
        if (params_.temperature != 1.0f) sampling::temperature(set, params_.temperature);
        const auto stats = sampling::softmax(set);

        const auto chosen = set.items[sampling::draw(set, next_uniform())];
        result.token = chosen.id;
        result.probability = chosen.probability;
        result.logprob = static_cast<float>((static_cast<double>(chosen.logit) - stats.max_logit) -
                                            stats.log_sum);
        result.support_size = static_cast<std::int32_t>(set.items.size());

        auto& items = set.items;
        const auto shown = std::min(n, items.size());
        if (!set.sorted)
            std::partial_sort(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(shown),
                              items.end(), sampling::ranks_above);
        result.after.reserve(shown);
        for (std::size_t i = 0; i < shown; ++i)
            result.after.push_back({items[i].id, items[i].probability, items[i].logit});
    }

    const double model_logprob =
        (static_cast<double>(logits[static_cast<std::size_t>(result.token)]) - raw.max_logit) -
        raw.log_sum;
    result.model_logprob = static_cast<float>(model_logprob);
    result.model_probability = static_cast<float>(std::exp(model_logprob));
    return result;
}

}  // namespace tokenscope::runtime
