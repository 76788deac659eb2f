#include "util/cpu_features.h"

// Where the features come from: MSVC and clang-cl read CPUID themselves (GCC's
// __builtin_cpu_supports needs libgcc's runtime, which they do not link). Defining
// TOKENSCOPE_CPU_FEATURES_FROM_CPUID elsewhere selects the same code, which
// tools/check-windows-sources uses to compile it with MinGW.
#if !defined(TOKENSCOPE_CPU_FEATURES_FROM_CPUID) && defined(_MSC_VER) && defined(TOKENSCOPE_X86_64)
#define TOKENSCOPE_CPU_FEATURES_FROM_CPUID 1
#endif

#if defined(TOKENSCOPE_CPU_FEATURES_FROM_CPUID)
#include <immintrin.h>  // _xgetbv
#include <intrin.h>     // __cpuidex
#elif defined(TOKENSCOPE_X86_64) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>  // __get_cpuid
#endif

namespace tokenscope::cpu {

namespace detail {

X86Model decode_model(std::uint32_t vendor_ebx, std::uint32_t vendor_edx, std::uint32_t vendor_ecx,
                      std::uint32_t leaf1_eax) {
    X86Model m;
    // The vendor string's bytes in register order, little-endian: "Auth" = 0x68747541, etc.
    m.amd = vendor_ebx == 0x68747541u && vendor_edx == 0x69746e65u && vendor_ecx == 0x444d4163u;
    m.intel = vendor_ebx == 0x756e6547u && vendor_edx == 0x49656e69u && vendor_ecx == 0x6c65746eu;
    const std::uint32_t base_family = (leaf1_eax >> 8) & 0xFu;
    const std::uint32_t base_model = (leaf1_eax >> 4) & 0xFu;
    m.family = base_family == 0xFu ? base_family + ((leaf1_eax >> 20) & 0xFFu) : base_family;
    m.model = base_family == 0x6u || base_family == 0xFu
                  ? base_model | (((leaf1_eax >> 16) & 0xFu) << 4)
                  : base_model;
    return m;
}

X86Features decode_cpuid(const CpuidWords& w) {
    constexpr std::uint32_t kFma = 1u << 12, kOsxsave = 1u << 27, kF16c = 1u << 29;  // leaf 1 ECX
    constexpr std::uint32_t kAvx2 = 1u << 5, kAvx512f = 1u << 16, kAvx512dq = 1u << 17,
                            kAvx512bw = 1u << 30, kAvx512vl = 1u << 31;  // leaf 7 EBX
    constexpr std::uint32_t kAvx512vnni = 1u << 11;                        // leaf 7 ECX
    constexpr std::uint32_t kAvxVnni = 1u << 4;                            // leaf 7.1 EAX
    constexpr std::uint64_t kSseYmmState = 0x6;      // XCR0 bits 1, 2
    constexpr std::uint64_t kAvx512State = 0xe0;     // XCR0 bits 5, 6, 7

    X86Features f;
    if (w.max_leaf < 1 || !(w.leaf1_ecx & kOsxsave)) return f;
    const bool avx_state = (w.xcr0 & kSseYmmState) == kSseYmmState;
    const bool avx512_state = avx_state && (w.xcr0 & kAvx512State) == kAvx512State;
    f.fma = avx_state && (w.leaf1_ecx & kFma);
    f.f16c = avx_state && (w.leaf1_ecx & kF16c);
    if (w.max_leaf >= 7) {
        f.avx2 = avx_state && (w.leaf7_ebx & kAvx2);
        f.avx512f = avx512_state && (w.leaf7_ebx & kAvx512f);
        f.avx512dq = avx512_state && (w.leaf7_ebx & kAvx512dq);
        f.avx512bw = avx512_state && (w.leaf7_ebx & kAvx512bw);
        f.avx512vl = avx512_state && (w.leaf7_ebx & kAvx512vl);
        f.avx512vnni = avx512_state && (w.leaf7_ecx & kAvx512vnni);
        f.avxvnni = avx_state && (w.leaf7_1_eax & kAvxVnni);
    }
    return f;
}

}  // namespace detail

namespace {

#if defined(TOKENSCOPE_CPU_FEATURES_FROM_CPUID)

// XGETBV is only executed when CPUID says the OS enabled it (OSXSAVE); elsewhere it faults.
// The target attribute is for clang-cl and MinGW, whose _xgetbv asks for it; MSVC needs none.
TOKENSCOPE_TARGET("xsave") std::uint64_t read_xcr0() {
    return static_cast<std::uint64_t>(_xgetbv(0));
}

X86Features detect() {
    int r[4] = {};  // EAX, EBX, ECX, EDX
    detail::CpuidWords w;
    __cpuidex(r, 0, 0);
    w.max_leaf = static_cast<std::uint32_t>(r[0]);
    if (w.max_leaf >= 1) {
        __cpuidex(r, 1, 0);
        w.leaf1_ecx = static_cast<std::uint32_t>(r[2]);
    }
    if (w.max_leaf >= 7) {
        __cpuidex(r, 7, 0);
        w.leaf7_ebx = static_cast<std::uint32_t>(r[1]);
        w.leaf7_ecx = static_cast<std::uint32_t>(r[2]);
        if (r[0] >= 1) {  // leaf 7 subleaf 0's EAX: the highest subleaf
            __cpuidex(r, 7, 1);
            w.leaf7_1_eax = static_cast<std::uint32_t>(r[0]);
        }
    }
    if (w.leaf1_ecx & (1u << 27)) w.xcr0 = read_xcr0();
    return detail::decode_cpuid(w);
}

#elif defined(TOKENSCOPE_X86_64) && (defined(__GNUC__) || defined(__clang__))

X86Features detect() {
    // __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0), so a
    // kernel without AVX-512 state support reports no AVX-512.
    __builtin_cpu_init();
    X86Features f;
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.f16c = __builtin_cpu_supports("f16c");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx512dq = __builtin_cpu_supports("avx512dq");
    f.avx512vnni = __builtin_cpu_supports("avx512vnni");
    f.avxvnni = __builtin_cpu_supports("avxvnni");
    return f;
}

#else

X86Features detect() {
    return {};
}

#endif

}  // namespace

const X86Features& x86_features() {
    static const X86Features features = detect();
    return features;
}

const X86Model& x86_model() {
    static const X86Model model = [] {
        std::uint32_t r[4] = {};  // EAX, EBX, ECX, EDX
#if defined(TOKENSCOPE_CPU_FEATURES_FROM_CPUID)
        int v[4] = {};
        __cpuidex(v, 0, 0);
        for (int i = 0; i < 4; ++i) r[i] = static_cast<std::uint32_t>(v[i]);
        const std::uint32_t max_leaf = r[0], ebx = r[1], ecx = r[2], edx = r[3];
        std::uint32_t eax1 = 0;
        if (max_leaf >= 1) {
            __cpuidex(v, 1, 0);
            eax1 = static_cast<std::uint32_t>(v[0]);
        }
        return detail::decode_model(ebx, edx, ecx, eax1);
#elif defined(TOKENSCOPE_X86_64) && (defined(__GNUC__) || defined(__clang__))
        if (!__get_cpuid(0, &r[0], &r[1], &r[2], &r[3])) return X86Model{};
        const std::uint32_t max_leaf = r[0], ebx = r[1], ecx = r[2], edx = r[3];
        std::uint32_t eax1 = 0;
        if (max_leaf >= 1 && __get_cpuid(1, &r[0], &r[1], &r[2], &r[3])) eax1 = r[0];
        return detail::decode_model(ebx, edx, ecx, eax1);
#else
        (void)r;
        return X86Model{};
#endif
    }();
    return model;
}

}  // namespace tokenscope::cpu
