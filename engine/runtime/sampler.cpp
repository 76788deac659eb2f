#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "runtime/logit_kernels.h"
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
    const sampling::CandidateSet& set = shape(logits, history);
    const std::int32_t token = greedy_ ? set.items.front().id : set.items[sampling::draw(set, next_uniform())].id;
    return result_for(token);
}

const sampling::CandidateSet& Sampler::shape(std::span<const float> logits,
                                             std::span<const std::int32_t> history) {
    // One pass over the row for the maximum, the validity check, the block maxima and the
    // normaliser; everything after reads a few blocks or at most top_k candidates. The slow,
    // precise check runs only to name the offending index of a row that is to be rejected.
    const sampling::LogitKernels& kernels = sampling::best_logit_kernels();
    if (logits.empty()) sampling::check_logits(logits);
    block_max_.resize(sampling::logit_blocks(logits.size()));
    const sampling::LogitScan scan =
        kernels.scan_softmax(logits.data(), logits.size(), block_max_.data());
    if (!scan.clean || !(scan.max > -std::numeric_limits<float>::infinity()))
        sampling::check_logits(logits);
    logits_ = logits;
    raw_stats_ = {scan.max, std::log(scan.sum_exp)};

    // The shaped logits: the caller's row itself unless a penalty changes some of them.
    std::span<const float> shaped = logits;
    std::span<const float> shaped_block_max = block_max_;
    const bool penalised = sampling::penalties_active(history, params_);
    if (penalised) {
        scratch_.assign(logits.begin(), logits.end());
        sampling::apply_penalties(scratch_, history, params_);
        scratch_block_max_.resize(block_max_.size());
        kernels.scan(scratch_.data(), scratch_.size(), scratch_block_max_.data());
        shaped = scratch_;
        shaped_block_max = scratch_block_max_;
    }
    shaped_ = shaped;

    // How many of the best shaped tokens the chain needs: the argmax for greedy, top_k for a
    // top-k cut (0: the whole vocabulary, see below). Without penalties one selection serves
    // both that and the inspector's "before" list.
    const auto n = static_cast<std::size_t>(params_.n_candidates);
    greedy_ = params_.temperature == 0.0f;
    const bool cut =
        !greedy_ && params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < logits.size();
    const std::size_t needed = greedy_ ? 1 : cut ? static_cast<std::size_t>(params_.top_k) : 0;
    best_raw_ = sampling::best_n(logits, block_max_, penalised ? n : std::max(n, needed));
    std::vector<sampling::TokenLogit> best_penalised;
    if (penalised) best_penalised = sampling::best_n(shaped, shaped_block_max, needed);
    const auto& best_shaped = penalised ? best_penalised : best_raw_;

    set_.items.clear();
    if (greedy_) {
        // best_n skips -infinity; if penalties pushed every logit there, argmax's answer
        // (token 0) is what the chain always gave.
        const auto token = best_shaped.empty() ? sampling::argmax(shaped) : best_shaped.front().id;
        set_.items.push_back({token, shaped[static_cast<std::size_t>(token)], 1.0f});
        set_.sorted = true;
        set_stats_ = {set_.items.front().logit, 0.0};
        return set_;
    }
    if (cut) {
        const auto k = std::min(best_shaped.size(), static_cast<std::size_t>(params_.top_k));
        set_.items.assign(best_shaped.begin(), best_shaped.begin() + static_cast<std::ptrdiff_t>(k));
        set_.sorted = true;
    } else {
        // No top-k cut: every unmasked token, in id order (make_candidates' order; the draw
        // walks the candidates in their order, so it matters for a given seed).
        set_ = sampling::make_candidates(shaped, 0);
    }
    if (set_.items.empty())
        throw InvalidArgument("sampler: the penalties left no token with a finite logit");
    if (params_.top_p < 1.0f) sampling::top_p(set_, params_.top_p);
    if (params_.min_p > 0.0f) sampling::min_p(set_, params_.min_p);
    if (params_.temperature != 1.0f) sampling::temperature(set_, params_.temperature);
    set_stats_ = sampling::softmax(set_);
    return set_;
}

SampleResult Sampler::result_for(std::int32_t token) {
    const auto n = static_cast<std::size_t>(params_.n_candidates);
    SampleResult result;
    result.token = token;
    result.before = sampling::with_probabilities(best_raw_, n, raw_stats_);
    if (greedy_) {
        const bool argmax = token == set_.items.front().id;
        result.probability = argmax ? 1.0f : 0.0f;
        result.logprob = argmax ? 0.0f : -std::numeric_limits<float>::infinity();
        result.support_size = 1;
        if (n > 0) result.after.push_back({set_.items.front().id, 1.0f, set_.items.front().logit});
    } else {
        auto& items = set_.items;
        const auto chosen = std::find_if(items.begin(), items.end(),
                                         [&](const sampling::TokenLogit& c) { return c.id == token; });
        if (chosen != items.end()) {
            result.probability = chosen->probability;
            result.logprob = static_cast<float>(
                (static_cast<double>(chosen->logit) - set_stats_.max_logit) - set_stats_.log_sum);
        } else {
            result.logprob = -std::numeric_limits<float>::infinity();
        }
        result.support_size = static_cast<std::int32_t>(items.size());
        const auto shown = std::min(n, items.size());
        if (!set_.sorted) {
            // After the draw: the draw walks the candidates in their order.
            std::partial_sort(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(shown),
                              items.end(), sampling::ranks_above);
            set_.sorted = shown == items.size();
        }
        result.after.reserve(shown);
        for (std::size_t i = 0; i < shown; ++i)
            result.after.push_back({items[i].id, items[i].probability, items[i].logit});
    }

    const double model_logprob =
        (static_cast<double>(logits_[static_cast<std::size_t>(token)]) - raw_stats_.max_logit) -
        raw_stats_.log_sum;
    result.model_logprob = static_cast<float>(model_logprob);
    result.model_probability = static_cast<float>(std::exp(model_logprob));
    return result;
}

}  // namespace tokenscope::runtime
