#pragma once
// The speculative-sampling acceptance rule (Leviathan et al. 2023; Chen et al. 2023): a token x
// proposed from q is accepted with probability min(1, p(x) / q(x)); when it is rejected, the
// target's token is drawn from the residual max(0, p - q), normalised. The token that comes out
// is distributed exactly as p, whatever q is. Here p is the distribution the request's sampler
// would draw from (Sampler::shape: after penalties, cuts and temperature), so speculation
// changes the speed, never the output distribution.
//
// A deterministic proposal (prompt lookup, greedy draft) is q one-hot at x: accepted with
// probability p(x), else drawn from p without x. Greedy decoding makes p one-hot at the
// argmax, so x is accepted exactly when it is the argmax, and a rejection yields the argmax:
// token for token what plain greedy decoding gives.
#include <cstdint>
#include <span>

#include "runtime/sampling_stages.h"

namespace tokenscope::runtime::speculation {

struct Verdict {
    bool accepted = false;
    std::int32_t token = -1;  // x when accepted, else the residual's draw
    float p_proposed = 0.0f;  // p(x)
    float q_proposed = 1.0f;  // q(x) (1 for a deterministic proposal)
    float p_token = 0.0f;     // p(token)
};

// p: the target's distribution (items with probabilities, any order; tokens outside it have
// p = 0). q: the distribution x was drawn from, sorted by id, or empty for one-hot at x.
// u_accept and u_resample: independent uniforms in [0, 1). The residual is walked in p's order.
Verdict judge(std::span<const sampling::TokenLogit> p, std::span<const sampling::TokenLogit> q,
              std::int32_t proposed, double u_accept, double u_resample);

// q(id) for q sorted by id (0 when absent).
float probability_of(std::span<const sampling::TokenLogit> sorted_by_id, std::int32_t id);

}  // namespace tokenscope::runtime::speculation
