#include "speculation_meter.h"

#include "model_summary.h"

namespace tokenscope::app {

namespace {
namespace spec = runtime::speculation;

ui::TokenOrigin to_origin(spec::TokenOrigin origin) {
    switch (origin) {
        case spec::TokenOrigin::Accepted:
            return ui::TokenOrigin::Accepted;
        case spec::TokenOrigin::Corrected:
            return ui::TokenOrigin::Corrected;
        case spec::TokenOrigin::Bonus:
            return ui::TokenOrigin::Bonus;
        case spec::TokenOrigin::Plain:
            break;
    }
    return ui::TokenOrigin::Plain;
}

// Weight of the newest plain step in the mean: about the last 20 steps count.
constexpr double kPlainWeight = 0.05;
}  // namespace

runtime::SpeculationOptions engine_speculation(const ui::SpeculationSettings& settings) {
    runtime::SpeculationOptions o;
    switch (settings.mode) {
        case ui::SpeculationSettings::Mode::Lookup:
            o.mode = runtime::SpeculationMode::Lookup;
            break;
        case ui::SpeculationSettings::Mode::Draft:
            o.mode = runtime::SpeculationMode::Draft;
            o.draft_model = settings.draft_path.toStdString();
            break;
        case ui::SpeculationSettings::Mode::Off:
            o.mode = runtime::SpeculationMode::Off;
            break;
    }
    o.max_k = settings.max_k;
    return o;
}

void SpeculationMeter::begin_reply() {
    last_verification_.reset();
    last_step_.reset();
    stats_ = {};
    enabled_ = false;
    verify_ms_sum_ = 0.0;
    verify_steps_ = 0;
    verify_tokens_ = 0;
}

void SpeculationMeter::annotate(const runtime::TokenEvent& e, int tokens_in_step,
                                const tokenizer::Tokenizer& tokenizer, ui::TokenData& token) {
    const spec::TokenSpeculation& s = e.speculation;
    enabled_ = enabled_ || s.enabled;
    if (s.enabled) stats_ = s.stats;
    token.origin = to_origin(s.origin);
    if (!s.verification) {
        // A plain decode step (not the first token, whose time is the prefill).
        if (e.timings.generated_tokens > 1 && e.timings.token_ms > 0) {
            plain_step_ms_ = plain_step_ms_ > 0 ? (1 - kPlainWeight) * plain_step_ms_ +
                                                      kPlainWeight * e.timings.token_ms
                                                : e.timings.token_ms;
        }
        return;
    }
    if (s.verification != last_verification_) {
        // The step's first token: convert the verification and count the pass once.
        const spec::Verification& v = *s.verification;
        auto step = std::make_shared<ui::SpeculationStepData>();
        step->k = v.k;
        for (std::int32_t id : v.proposed)
            step->proposed.push_back({id, display_token(tokenizer, id), 0.0f, 0.0f});
        step->accepted = v.accepted;
        step->tokens = tokens_in_step;
        step->step_ms = e.timings.token_ms;
        if (v.rejected_token >= 0) {
            step->rejected = {v.rejected_token, display_token(tokenizer, v.rejected_token),
                              v.rejected_p, 0.0f};
            step->rejected_q = v.rejected_q;
            step->target = {v.target_token, display_token(tokenizer, v.target_token), v.target_p,
                            0.0f};
        }
        last_verification_ = s.verification;
        last_step_ = std::move(step);
        verify_ms_sum_ += e.timings.token_ms;
        ++verify_steps_;
        verify_tokens_ += tokens_in_step;
    }
    token.speculation = last_step_;
}

void SpeculationMeter::fill(ui::MetricsData& m) const {
    m.speculating = enabled_;
    m.plain_step_ms = plain_step_ms_;
    if (!enabled_) return;
    m.verifications = stats_.verifications;
    m.proposed = stats_.proposed;
    m.accepted = stats_.accepted;
    m.current_k = stats_.current_k;
    m.verify_step_ms = verify_steps_ > 0 ? verify_ms_sum_ / double(verify_steps_) : 0.0;
    m.tokens_per_verification =
        verify_steps_ > 0 ? double(verify_tokens_) / double(verify_steps_) : 0.0;
}

}  // namespace tokenscope::app
