// The small platform layer that lets the engine build with MSVC: CPU feature detection (the
// CPUID decoding MSVC builds use, checked against GCC's __builtin_cpu_supports on this
// machine), the overflow-checked multiply (the portable version against the builtin) and the
// physical memory query.
#include <QtTest>

#include <cstdint>
#include <limits>
#include <random>

#include "util/checked_math.h"
#include "util/cpu_features.h"
#include "util/system_memory.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>  // _xgetbv
#define TOKENSCOPE_TEST_RAW_CPUID 1
#endif

using namespace tokenscope;

namespace {

constexpr std::uint32_t kOsxsave = 1u << 27, kFma = 1u << 12, kF16c = 1u << 29;
constexpr std::uint32_t kAvx2 = 1u << 5, kAvx512f = 1u << 16, kAvx512dq = 1u << 17,
                        kAvx512bw = 1u << 30, kAvx512vl = 1u << 31, kVnni = 1u << 11;
constexpr std::uint32_t kAvxVnni = 1u << 4;  // leaf 7 subleaf 1, EAX

// A CPU with everything and an OS that saves everything.
cpu::detail::CpuidWords everything() {
    cpu::detail::CpuidWords w;
    w.max_leaf = 0x1f;
    w.leaf1_ecx = kOsxsave | kFma | kF16c;
    w.leaf7_ebx = kAvx2 | kAvx512f | kAvx512dq | kAvx512bw | kAvx512vl;
    w.leaf7_ecx = kVnni;
    w.leaf7_1_eax = kAvxVnni;
    w.xcr0 = 0xe7;  // x87, SSE, YMM, opmask, ZMM_Hi256, Hi16_ZMM
    return w;
}

bool all_avx512(const cpu::X86Features& f) {
    return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni;
}
bool any_avx512(const cpu::X86Features& f) {
    return f.avx512f || f.avx512bw || f.avx512vl || f.avx512dq || f.avx512vnni;
}

#if defined(TOKENSCOPE_TEST_RAW_CPUID)
__attribute__((target("xsave"))) std::uint64_t xcr0() {
    return _xgetbv(0);
}

// The words read the way the MSVC build reads them, with GCC's <cpuid.h>.
cpu::detail::CpuidWords this_cpu() {
    cpu::detail::CpuidWords w;
    unsigned a = 0, b = 0, c = 0, d = 0;
    w.max_leaf = __get_cpuid_max(0, nullptr);
    if (w.max_leaf >= 1) {
        __cpuid_count(1, 0, a, b, c, d);
        w.leaf1_ecx = c;
    }
    if (w.max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        w.leaf7_ebx = b;
        w.leaf7_ecx = c;
        if (a >= 1) {  // the highest subleaf of leaf 7
            __cpuid_count(7, 1, a, b, c, d);
            w.leaf7_1_eax = a;
        }
    }
    if (w.leaf1_ecx & kOsxsave) w.xcr0 = xcr0();
    return w;
}
#endif

template <class T>
void compare_mul(T a, T b) {
    T portable{}, builtin{};
    const bool portable_overflow = detail::mul_overflow_portable(a, b, &portable);
#if defined(__GNUC__) || defined(__clang__)
    const bool builtin_overflow = __builtin_mul_overflow(a, b, &builtin);
#else
    const bool builtin_overflow = mul_overflow(a, b, &builtin);
#endif
    const QByteArray what = QByteArray::number(static_cast<qlonglong>(a)) + " * " +
                            QByteArray::number(static_cast<qlonglong>(b));
    QVERIFY2(portable_overflow == builtin_overflow, what.constData());
    QVERIFY2(portable == builtin, what.constData());
}

}  // namespace

class TestPlatform : public QObject {
    Q_OBJECT

  private slots:
    void decodeEverything() {
        const cpu::X86Features f = cpu::detail::decode_cpuid(everything());
        QVERIFY(f.avx2 && f.fma && f.f16c && f.avxvnni);
        QVERIFY(all_avx512(f));
    }

    void decodeNeedsTheOsToSaveTheRegisters() {
        auto w = everything();
        w.leaf1_ecx &= ~kOsxsave;  // no XSAVE enabled: nothing wide, whatever XCR0 says
        QVERIFY(!cpu::detail::decode_cpuid(w).avx2);
        QVERIFY(!cpu::detail::decode_cpuid(w).fma);

        w = everything();
        w.xcr0 = 0x3;  // x87 + SSE only: no AVX state
        auto f = cpu::detail::decode_cpuid(w);
        QVERIFY(!f.avx2 && !f.fma && !f.f16c && !any_avx512(f));

        w = everything();
        w.xcr0 = 0x7;  // YMM saved, AVX-512 state not (e.g. a kernel that leaves it off)
        f = cpu::detail::decode_cpuid(w);
        QVERIFY(f.avx2 && f.fma && f.f16c);
        QVERIFY(!any_avx512(f));

        w = everything();
        w.xcr0 = 0x67;  // Hi16_ZMM missing
        QVERIFY(!any_avx512(cpu::detail::decode_cpuid(w)));
    }

    void decodeEachBit() {
        auto w = everything();
        w.leaf7_ebx &= ~kAvx2;
        QVERIFY(!cpu::detail::decode_cpuid(w).avx2);
        QVERIFY(cpu::detail::decode_cpuid(w).avx512f);

        w = everything();
        w.leaf7_ecx = 0;
        auto f = cpu::detail::decode_cpuid(w);
        QVERIFY(!f.avx512vnni && f.avx512f && f.avx512bw && f.avxvnni);

        // AVX-VNNI needs only the YMM state (no AVX-512 state).
        w = everything();
        w.xcr0 = 0x7;
        QVERIFY(cpu::detail::decode_cpuid(w).avxvnni);
        w.leaf7_1_eax = 0;
        f = cpu::detail::decode_cpuid(w);
        QVERIFY(!f.avxvnni && f.avx2);

        w = everything();
        w.leaf7_ebx &= ~kAvx512vl;
        f = cpu::detail::decode_cpuid(w);
        QVERIFY(!f.avx512vl && f.avx512dq && f.avx512bw);

        w = everything();
        w.leaf1_ecx &= ~(kFma | kF16c);
        f = cpu::detail::decode_cpuid(w);
        QVERIFY(!f.fma && !f.f16c && f.avx2);

        w = everything();
        w.max_leaf = 6;  // leaf 7 not there: its words are not to be trusted
        f = cpu::detail::decode_cpuid(w);
        QVERIFY(!f.avx2 && !any_avx512(f) && f.fma);

        QVERIFY(!cpu::detail::decode_cpuid({}).fma);
    }

    void cpuidDecodingAgreesWithGcc() {
#if defined(TOKENSCOPE_TEST_RAW_CPUID)
        const cpu::X86Features decoded = cpu::detail::decode_cpuid(this_cpu());
        const cpu::X86Features& builtin = cpu::x86_features();  // __builtin_cpu_supports here
        qInfo("this CPU: avx2 %d fma %d f16c %d avx512 f %d bw %d vl %d dq %d vnni %d avx-vnni %d",
              builtin.avx2, builtin.fma, builtin.f16c, builtin.avx512f, builtin.avx512bw,
              builtin.avx512vl, builtin.avx512dq, builtin.avx512vnni, builtin.avxvnni);
        QCOMPARE(decoded.avx2, builtin.avx2);
        QCOMPARE(decoded.fma, builtin.fma);
        QCOMPARE(decoded.f16c, builtin.f16c);
        QCOMPARE(decoded.avx512f, builtin.avx512f);
        QCOMPARE(decoded.avx512bw, builtin.avx512bw);
        QCOMPARE(decoded.avx512vl, builtin.avx512vl);
        QCOMPARE(decoded.avx512dq, builtin.avx512dq);
        QCOMPARE(decoded.avx512vnni, builtin.avx512vnni);
        QCOMPARE(decoded.avxvnni, builtin.avxvnni);
#else
        QSKIP("needs GCC or Clang on x86-64");
#endif
    }

    // Vendor, family and model from CPUID words of real parts. The EAX values are composed by
    // hand from the documented fields (stepping 3:0, model 7:4, family 11:8, extended model
    // 19:16, extended family 27:20) for parts whose family/model /proc/cpuinfo reported on
    // our dev machines: AMD EPYC Zen 4 (family 25 = 0x19, model 17 = 0x11), Zen 3 (0x19,
    // model 1), Zen 5 (0x1A, model 2), Intel Sapphire Rapids (family 6, model 143 = 0x8F).
    void decodeVendorFamilyModel() {
        constexpr std::uint32_t kAuth = 0x68747541, kEnti = 0x69746e65, kCamd = 0x444d4163;
        constexpr std::uint32_t kGenu = 0x756e6547, kInei = 0x49656e69, kNtel = 0x6c65746e;
        // Zen 4: ext family 0xA (0xF + 0xA = 0x19), ext model 1, base model 1, stepping 1.
        cpu::X86Model m = cpu::detail::decode_model(kAuth, kEnti, kCamd, 0x00A10F11u);
        QVERIFY(m.amd && !m.intel);
        QCOMPARE(m.family, 0x19u);
        QCOMPARE(m.model, 0x11u);
        m = cpu::detail::decode_model(kAuth, kEnti, kCamd, 0x00A00F11u);  // Zen 3, model 1
        QCOMPARE(m.family, 0x19u);
        QCOMPARE(m.model, 0x01u);
        m = cpu::detail::decode_model(kAuth, kEnti, kCamd, 0x00B00F20u);  // Zen 5, model 2
        QCOMPARE(m.family, 0x1Au);
        QCOMPARE(m.model, 0x02u);
        // Intel family 6: the extended family is not added, the extended model is.
        m = cpu::detail::decode_model(kGenu, kInei, kNtel, 0x000806F8u);
        QVERIFY(m.intel && !m.amd);
        QCOMPARE(m.family, 6u);
        QCOMPARE(m.model, 0x8Fu);
        // Another vendor, and a family below 6 whose extended fields must be ignored.
        m = cpu::detail::decode_model(0x746e6543, 0x48727561, 0x736c7561, 0x00FF0543u);
        QVERIFY(!m.amd && !m.intel);
        QCOMPARE(m.family, 5u);
        QCOMPARE(m.model, 4u);
    }

    // This machine's model as the engine reads it equals what the kernel reports in
    // /proc/cpuinfo (an independent decoding of the same CPUID words).
    void modelAgreesWithProcCpuinfo() {
        QFile info("/proc/cpuinfo");
        if (!info.open(QIODevice::ReadOnly)) QSKIP("no /proc/cpuinfo (not Linux)");
        int family = -1, model = -1;
        QString vendor;
        for (const QByteArray& raw : info.readAll().split('\n')) {
            const QString line = QString::fromLatin1(raw);
            const QString value = line.section(':', 1).trimmed();
            if (line.startsWith("vendor_id") && vendor.isEmpty()) vendor = value;
            if (line.startsWith("cpu family") && family < 0) family = value.toInt();
            if (line.startsWith("model\t") && model < 0) model = value.toInt();
        }
        if (family < 0 || model < 0) QSKIP("/proc/cpuinfo has no x86 family/model lines");
        const cpu::X86Model& m = cpu::x86_model();
        qInfo("this CPU: %s family 0x%X model 0x%X", qPrintable(vendor), m.family, m.model);
        QCOMPARE(m.amd, vendor == "AuthenticAMD");
        QCOMPARE(m.intel, vendor == "GenuineIntel");
        QCOMPARE(static_cast<int>(m.family), family);
        QCOMPARE(static_cast<int>(m.model), model);
    }

    void mulOverflowMatchesTheBuiltin() {
        using I = std::int64_t;
        using U = std::uint64_t;
        constexpr I imax = std::numeric_limits<I>::max(), imin = std::numeric_limits<I>::min();
        constexpr U umax = std::numeric_limits<U>::max();
        const I signed_edges[] = {0, 1, -1, 2, -2, 3, -3, 4294967296, -4294967296, 3037000499,
                                  3037000500, -3037000500, imax, imax - 1, imax / 2, imax / 3,
                                  imin, imin + 1, imin / 2, imin / 3};
        for (I a : signed_edges) {
            for (I b : signed_edges) compare_mul(a, b);
        }
        const U unsigned_edges[] = {0, 1, 2, 3, 4294967295u, 4294967296u, 4294967297u,
                                    umax, umax - 1, umax / 2, umax / 3, umax / 2 + 1};
        for (U a : unsigned_edges) {
            for (U b : unsigned_edges) compare_mul(a, b);
        }
        std::mt19937_64 rng(7);
        for (int i = 0; i < 100000; ++i) {
            const int shift_a = static_cast<int>(rng() % 64), shift_b = static_cast<int>(rng() % 64);
            const U ua = rng() >> shift_a, ub = rng() >> shift_b;
            compare_mul(ua, ub);
            compare_mul(static_cast<I>(ua), static_cast<I>(ub));
            compare_mul(static_cast<I>(ua) / 2 * ((rng() & 1) ? 1 : -1), static_cast<I>(ub) / 2);
            compare_mul(static_cast<std::int32_t>(ua), static_cast<std::int32_t>(ub));
            compare_mul(static_cast<std::uint32_t>(ua), static_cast<std::uint32_t>(ub));
        }
        static_assert([] {
            std::int64_t out = 0;
            return detail::mul_overflow_portable<std::int64_t>(imin, -1, &out) && out == imin;
        }());
    }

    void physicalMemory() {
        const std::uint64_t total = system_memory::physical_bytes();
        const std::uint64_t available = system_memory::available_bytes();
        QVERIFY(total >= 64ull << 20);
        QVERIFY(available > 0);
        // MemAvailable can exceed MemTotal by nothing but rounding.
        QVERIFY(available <= total + (1ull << 20));
    }
};

QTEST_APPLESS_MAIN(TestPlatform)
#include "test_platform.moc"
