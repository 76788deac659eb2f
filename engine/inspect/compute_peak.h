#pragma once
// The machine's floating-point ceiling, measured: independent FMA chains in the widest
// vector registers the CPU has (AVX-512, AVX2 or scalar), on `threads` threads at once. The
// bench reports prefill speed as a fraction of this.
namespace tokenscope::inspect {

struct ComputePeak {
    double gflops = 0.0;       // f32, all threads together (an FMA counts as 2 flops)
    const char* isa = "scalar";
};

ComputePeak measure_f32_peak(int threads, double seconds = 0.3);

}  // namespace tokenscope::inspect
