#include "runtime/speculation/acceptance.h"

#include <algorithm>

namespace tokenscope::runtime::speculation {

float probability_of(std::span<const sampling::TokenLogit> sorted_by_id, std::int32_t id) {
    const auto it =
        std::lower_bound(sorted_by_id.begin(), sorted_by_id.end(), id,
                         [](const sampling::TokenLogit& c, std::int32_t v) { return c.id < v; });
    return it != sorted_by_id.end() && it->id == id ? it->probability : 0.0f;
}

Verdict judge(std::span<const sampling::TokenLogit> p, std::span<const sampling::TokenLogit> q,
              std::int32_t proposed, double u_accept, double u_resample) {
    const bool one_hot = q.empty();
    auto q_of = [&](std::int32_t id) -> double {
        if (one_hot) return id == proposed ? 1.0 : 0.0;
        return probability_of(q, id);
    };
    Verdict v;
    for (const auto& c : p) {
        if (c.id == proposed) v.p_proposed = c.probability;
    }
    v.q_proposed = static_cast<float>(q_of(proposed));
    // u < p/q, written without the division (q(x) > 0: x was drawn from q).
    if (u_accept * v.q_proposed < static_cast<double>(v.p_proposed)) {
        v.accepted = true;
        v.token = proposed;
        v.p_token = v.p_proposed;
        return v;
    }
    // The residual max(0, p - q) over p's support (q outside it only lowers zeros).
    double total = 0.0;
    for (const auto& c : p) total += std::max(0.0, static_cast<double>(c.probability) - q_of(c.id));
    if (total <= 0.0) {
        // p <= q everywhere means p == q up to rounding, where a rejection has probability 0;
        // rounding got here, so draw from p itself.
        v.token = p[sampling::draw({{p.begin(), p.end()}, false}, u_resample)].id;
    } else {
        const double target = u_resample * total;
        double cumulative = 0.0;
        for (const auto& c : p) {
            const double r = std::max(0.0, static_cast<double>(c.probability) - q_of(c.id));
            if (r <= 0.0) continue;
            cumulative += r;
            v.token = c.id;  // the last possible one if rounding leaves `target` above the sum
            if (cumulative > target) break;
        }
    }
    for (const auto& c : p) {
        if (c.id == v.token) v.p_token = c.probability;
    }
    return v;
}

}  // namespace tokenscope::runtime::speculation
