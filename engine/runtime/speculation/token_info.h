#pragma once
// What speculation did, attached to every TokenEvent so a front end can show it: where each
// token came from, what one verification proposed and accepted, where the target disagreed,
// and running statistics. Cheap: a few numbers per token, and one shared Verification per
// verification step (every token of the step points at the same one).
#include <cstdint>
#include <memory>
#include <vector>

namespace tokenscope::runtime::speculation {

enum class TokenOrigin : std::uint8_t {
    Plain,      // no proposal covered this position (speculation off, or nothing proposed)
    Accepted,   // a proposed token the target accepted
    Corrected,  // the target rejected the proposal here and drew this token itself
    Bonus,      // every proposal was accepted; drawn from the target after the last one
};
const char* origin_name(TokenOrigin origin);

struct Verification {
    int k = 0;                           // tokens asked of the proposer
    std::vector<std::int32_t> proposed;  // what it proposed (at most k)
    int accepted = 0;                    // leading proposals the target accepted
    // Where the target disagreed (accepted < proposed.size(); else -1 and zeros): the proposed
    // token with its target probability p and draft probability q (1 for prompt lookup and a
    // greedy draft), and the token the target drew instead with its p.
    std::int32_t rejected_token = -1;
    float rejected_p = 0.0f;
    float rejected_q = 0.0f;
    std::int32_t target_token = -1;
    float target_p = 0.0f;
};

struct Stats {
    std::int64_t verifications = 0;
    std::int64_t proposed = 0;  // tokens proposed over all verifications
    std::int64_t accepted = 0;  // of those, accepted
    int current_k = 0;          // what the adaptive controller asks for next (0: off for now)
    double rate = 0.0;          // the controller's recent acceptance rate estimate

    double acceptance_rate() const {
        return proposed > 0 ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0.0;
    }
    double mean_accepted() const {
        return verifications > 0
                   ? static_cast<double>(accepted) / static_cast<double>(verifications)
                   : 0.0;
    }
};

struct TokenSpeculation {
    bool enabled = false;  // the engine speculates (else everything below is default)
    TokenOrigin origin = TokenOrigin::Plain;
    std::shared_ptr<const Verification> verification;  // null for Plain tokens
    Stats stats;                                       // the request's, after this token's step
};

}  // namespace tokenscope::runtime::speculation
