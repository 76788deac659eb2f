#pragma once
// The x86 instruction sets this CPU *and* its operating system can run (the OS must save the
// wide registers), for the run-time choice of SIMD kernels; and TOKENSCOPE_TARGET for a function
// that uses instructions beyond the baseline the file is compiled for.
//
// GCC and Clang answer with __builtin_cpu_supports; MSVC (and clang-cl) read CPUID and XCR0
// (__cpuidex, _xgetbv) and decode them with detail::decode_cpuid below, which follows the same
// rules as GCC's runtime, so both report the same CPU the same way.
#include <cstdint>

// x86-64 on any compiler: GCC and Clang define __x86_64__, MSVC _M_X64 (which ARM64EC defines
// too, where there is no AVX).
#if defined(__x86_64__) || (defined(_M_X64) && !defined(_M_ARM64EC))
#define TOKENSCOPE_X86_64 1
#endif

// TOKENSCOPE_TARGET("avx2,fma") before a function lets GCC and Clang use those instructions and
// their intrinsics in that function only, so the rest of its file stays baseline x86-64.
// MSVC accepts every intrinsic in every function and never emits AVX on its own without /arch,
// so the macro is empty there. A file with such functions must therefore never be compiled
// with /arch:AVX2 or /arch:AVX512 on MSVC: that would let the compiler use those instructions
// in its other functions too, which run on every CPU. (CMake gives /arch to no file.)
#if defined(__GNUC__) || defined(__clang__)
#define TOKENSCOPE_TARGET(features) __attribute__((target(features)))
#else
#define TOKENSCOPE_TARGET(features)
#endif

namespace tokenscope::cpu {

struct X86Features {
    bool avx2 = false;
    bool fma = false;
    bool f16c = false;
    bool avx512f = false;
    bool avx512bw = false;
    bool avx512vl = false;
    bool avx512dq = false;
    bool avx512vnni = false;
    bool avxvnni = false;  // AVX-VNNI: vpdpbusd on ymm without AVX-512 (Alder Lake and later)
};

// This machine's, detected once (thread-safe). All false on a CPU that is not x86-64.
const X86Features& x86_features();

// Vendor and family/model as CPUID leaf 1 reports them (with the extended fields folded in),
// for tuning choices that differ between microarchitectures of the same instruction set
// (the weight prefetch level, tensor::weight_prefetch_level). AMD family 0x19 is Zen 3/Zen 4,
// 0x1A Zen 5. All zero/false on a CPU that is not x86-64.
struct X86Model {
    bool amd = false;
    bool intel = false;
    std::uint32_t family = 0;
    std::uint32_t model = 0;
};
const X86Model& x86_model();

namespace detail {

// The CPUID and XCR0 words the features come from.
struct CpuidWords {
    std::uint32_t max_leaf = 0;   // CPUID leaf 0, EAX
    std::uint32_t leaf1_ecx = 0;  // CPUID leaf 1, ECX (FMA, OSXSAVE, F16C)
    std::uint32_t leaf7_ebx = 0;  // CPUID leaf 7 subleaf 0, EBX (AVX2, AVX-512 F/DQ/BW/VL)
    std::uint32_t leaf7_ecx = 0;  // CPUID leaf 7 subleaf 0, ECX (AVX-512 VNNI)
    std::uint32_t leaf7_1_eax = 0;  // CPUID leaf 7 subleaf 1, EAX (AVX-VNNI)
    std::uint64_t xcr0 = 0;       // XGETBV(0); only read when OSXSAVE is set, else 0
};

// A feature counts only when the OS saves its registers: the AVX ones need XCR0's SSE and YMM
// state, the AVX-512 ones also the opmask, ZMM0-15 upper halves and ZMM16-31 state.
X86Features decode_cpuid(const CpuidWords& words);

// Leaf 0's vendor words (EBX, EDX, ECX: "AuthenticAMD" is "Auth" "enti" "cAMD") and leaf 1's
// EAX: family = base family, plus the extended family when the base is 0xF; model = base model,
// with the extended model as its high nibble when the family is 6 or 0xF and above.
X86Model decode_model(std::uint32_t vendor_ebx, std::uint32_t vendor_edx, std::uint32_t vendor_ecx,
                      std::uint32_t leaf1_eax);

}  // namespace detail

}  // namespace tokenscope::cpu
