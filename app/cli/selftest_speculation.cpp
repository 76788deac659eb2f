#include "selftest_speculation.h"

#include <algorithm>
#include <random>

#include "runtime/engine.h"

namespace tokenscope::cli {

namespace {

// Near-tie: the plain run's two best raw logits this close may come out the other way round in
// the verification chunk, whose kernels (the prefill path) round differently from one-token
// decode on the GPU. On the CPU both paths are bit-identical, so no divergence is expected.
constexpr float kNearTieLogitGap = 0.05f;
constexpr int kTokens = 48;

struct Generated {
    std::vector<std::int32_t> tokens;
    std::vector<float> top_gap;  // per token: best raw logit minus the second best
    runtime::speculation::Stats stats;
};

Generated generate(runtime::Engine& e, const std::vector<std::int32_t>& prompt, bool speculate) {
    runtime::Request r;
    r.prompt = prompt;
    r.sampling.temperature = 0.0f;
    r.sampling.n_candidates = 2;
    r.max_tokens = kTokens;
    r.speculate = speculate;
    const auto id = e.submit(std::move(r));
    Generated g;
    for (int guard = 0; e.has_work() && guard < 100000; ++guard) {
        for (const auto& ev : e.step()) {
            if (ev.request != id) continue;
            if (ev.token >= 0) {
                g.tokens.push_back(ev.token);
                g.top_gap.push_back(ev.before.size() >= 2 ? ev.before[0].logit - ev.before[1].logit
                                                          : 1e9f);
            }
            g.stats = ev.speculation.stats;
        }
    }
    return g;
}

}  // namespace

std::vector<SelftestResult> check_speculation(const std::string& model, const std::string& label,
                                              runtime::Device device) {
    std::vector<SelftestResult> results;
    for (const auto mode : {runtime::SpeculationMode::Lookup, runtime::SpeculationMode::Draft}) {
        runtime::EngineOptions o;
        o.device = device;
        o.kv_capacity_tokens = 1024;
        o.speculation.mode = mode;
        o.speculation.max_k = 4;
        o.speculation.adaptive = false;  // always propose: every verification path is exercised
        if (mode == runtime::SpeculationMode::Draft) o.speculation.draft_model = model;
        auto e = runtime::Engine::load(model, o);
        // Random tokens said twice: prompt lookup finds the n-grams again, and a model's own
        // continuation of a repeated text tends to repeat it.
        std::mt19937 rng(11);
        const auto vocab = static_cast<std::uint32_t>(e->config().vocab_size);
        std::vector<std::int32_t> prompt(24);
        for (auto& t : prompt) t = static_cast<std::int32_t>(3 + rng() % (vocab - 3));
        prompt.insert(prompt.end(), prompt.begin(), prompt.end());

        const Generated plain = generate(*e, prompt, false);
        const Generated spec = generate(*e, prompt, true);
        const std::string what =
            label + ": speculative greedy, " + runtime::speculation_mode_name(mode);
        // error: tokens that differ from plain decoding, unless the first difference is a near-tie.
        std::size_t first = 0;
        const std::size_t n = std::min(plain.tokens.size(), spec.tokens.size());
        while (first < n && plain.tokens[first] == spec.tokens[first]) ++first;
        double error = 0;
        std::string precision = "tokens differing";
        if (first < n || plain.tokens.size() != spec.tokens.size()) {
            const bool near_tie = first < n && plain.top_gap[first] < kNearTieLogitGap;
            error = near_tie ? 0
                             : static_cast<double>(
                                   std::max(plain.tokens.size(), spec.tokens.size()) - first);
            if (near_tie)
                precision = "differs from token " + std::to_string(first) + " at a near-tie";
        }
        results.push_back({what, precision, error, 0, error == 0});
        // Speculation must actually have run, or the comparison above says nothing.
        const auto verifications = static_cast<double>(spec.stats.verifications);
        results.push_back(
            {what + " (verifications)", "count, at least 1", verifications, 1, verifications >= 1});
        const double blocks = e->kv_stats().blocks_used;
        results.push_back({what + " (KV blocks left)", "blocks", blocks, 0, blocks == 0});
    }
    return results;
}

}  // namespace tokenscope::cli
