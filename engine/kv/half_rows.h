#pragma once
// Rows of floats to and from IEEE half floats with the fastest kernels this CPU runs (the KV
// cache's own conversions: F16C where the CPU has it, else tensor::f32_to_f16's integer code;
// both round to nearest even, so every table gives the same bits). For engine code outside
// engine/kv that stores halves in bulk, such as the attention capture, which converts every
// captured weight of every decode step.
#include <cstdint>
#include <span>

namespace tokenscope::kv {

// out[i] = half(in[i]); out holds in.size() elements.
void floats_to_halves(std::span<const float> in, std::uint16_t* out);
// out[i] = float(in[i]), exact; out holds in.size() elements.
void halves_to_floats(std::span<const std::uint16_t> in, float* out);

}  // namespace tokenscope::kv
