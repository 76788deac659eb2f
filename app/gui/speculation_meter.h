#pragma once
// Speculative decoding as the GUI shows it, on the worker thread: turns the engine's
// per-token speculation info into TokenData fields (one shared SpeculationStepData per
// verification step) and keeps the numbers the metrics panel and its "Why is this free?"
// explanation need: acceptance, the mean plain decode step and the mean verification pass.
//
// A verification step returns several TokenEvents for one request, all with the same step
// time; the meter is told how many tokens the step produced so that per-token latency is the
// step's time shared among them, not the step's time counted once per token.
#include <cstdint>
#include <memory>

#include "panel_data.h"
#include "runtime/engine.h"

namespace tokenscope::app {

// The engine options for the panel's choice.
runtime::SpeculationOptions engine_speculation(const ui::SpeculationSettings& settings);

class SpeculationMeter {
  public:
    // A new reply: its acceptance and verification numbers start from zero; the plain-step
    // mean is kept (it describes the machine and the model, not the reply).
    void begin_reply();
    // Fills token.origin and token.speculation from e; `tokens_in_step` is how many tokens e's
    // step produced for this request. Call in event order, once per token event.
    void annotate(const runtime::TokenEvent& e, int tokens_in_step,
                  const tokenizer::Tokenizer& tokenizer, ui::TokenData& token);
    // The speculation fields of `metrics`.
    void fill(ui::MetricsData& metrics) const;
    // Tokens of this reply that needed no forward pass of their own (a verification of n
    // tokens is one pass).
    std::int64_t tokens_without_pass() const { return verify_tokens_ - verify_steps_; }

  private:
    // The last verification seen and its conversion, shared by the tokens of its step. The
    // engine's object is held, not just its address: a freed step's address can be reused by
    // the next step's verification.
    std::shared_ptr<const runtime::speculation::Verification> last_verification_;
    std::shared_ptr<const ui::SpeculationStepData> last_step_;
    runtime::speculation::Stats stats_;
    bool enabled_ = false;
    // Plain one-token decode steps since the model was loaded (an exponential mean: the
    // machine's load changes), and this reply's verification passes.
    double plain_step_ms_ = 0.0;
    double verify_ms_sum_ = 0.0;
    std::int64_t verify_steps_ = 0;
    std::int64_t verify_tokens_ = 0;
};

}  // namespace tokenscope::app
