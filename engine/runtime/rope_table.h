#pragma once
// The RoPE rotation angles of one forward pass: cos and sin of (position * inv_freq[i]) for
// each token of the batch, computed once per token instead of once per head, layer, q and k
// (sin and cos were about 1.3 % of a 512-token prefill). Same double-then-float values as
// computing them at each head, so the rotation is unchanged bit for bit.
#include <cstdint>
#include <vector>

namespace tokenscope::runtime {

class RopeTable {
  public:
    // `inv_freq`: the rope_dims / 2 inverse frequencies.
    explicit RopeTable(std::vector<float> inv_freq);

    // Angles for tokens t < positions.size() at position positions[t] / linear_scale.
    void prepare(const std::int64_t* positions, std::int64_t tokens, double linear_scale);

    const float* cos(std::int64_t token) const { return angles_.data() + token * 2 * pairs(); }
    const float* sin(std::int64_t token) const { return cos(token) + pairs(); }
    std::int64_t pairs() const { return static_cast<std::int64_t>(inv_freq_.size()); }
    const std::vector<float>& inverse_frequencies() const { return inv_freq_; }

  private:
    std::vector<float> inv_freq_;
    std::vector<float> angles_;  // per token: pairs() cosines, then pairs() sines
};

}  // namespace tokenscope::runtime
