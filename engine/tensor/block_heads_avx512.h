#pragma once
// The heads (first 4 bytes) of 16 consecutive quantized blocks in one 512-bit vector, for the
// AVX-512 kernels (direct_avx512.cpp, dot_avx512.cpp). Only files compiled with the AVX-512
// options may include it (see matmul_internal.h).
#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace tokenscope::tensor::detail {

// The first 4 bytes (the head: d, and m where there is one) of each of 16 consecutive blocks of
// kBlockBytes bytes, as dword i of the result, by word permutes over 128-byte windows: a window
// holds the heads of kPerWindow blocks, so three windows cover 16 blocks of 18-24 bytes and four
// those of Q8_0 (34 bytes). A
// vpgatherdd did this before and was a third of a 576-wide Q4_1 row's time on Zen 4 (1536 x 576,
// one thread, in cache, best of 10: 56 us with the gather, 38 us with a plain load in its place).
// Heads past `count` are zero; the masked loads read nothing past the group's last head. The
// word indices are a compile-time table: filled by scalar stores at run time, as before, each
// vector load of them waited on store forwarding.
template <std::size_t kBlockBytes>
struct BlockHeads {
    static constexpr int kPerWindow = static_cast<int>((128 - 4) / kBlockBytes) + 1;
    static constexpr int kWindows = (16 + kPerWindow - 1) / kPerWindow;
    static_assert(kBlockBytes % 2 == 0 && kWindows <= 4);
    alignas(64) static constexpr std::array<std::array<std::int16_t, 32>, kWindows> kWordIndex =
        [] {
            std::array<std::array<std::int16_t, 32>, kWindows> index{};
            for (int w = 0; w < kWindows; ++w) {
                for (int lane = 0; lane < 32; ++lane) {
                    const int block = lane / 2 - w * kPerWindow;  // within the window
                    const int word = block * static_cast<int>(kBlockBytes / 2) + lane % 2;
                    index[static_cast<std::size_t>(w)][static_cast<std::size_t>(lane)] =
                        static_cast<std::int16_t>(word >= 0 && word < 64 ? word : 0);
                }
            }
            return index;
        }();
    __m512i word_index[kWindows];
    BlockHeads() {
        for (int w = 0; w < kWindows; ++w)
            word_index[w] = _mm512_loadu_si512(kWordIndex[static_cast<std::size_t>(w)].data());
    }
    static __mmask64 bytes_mask(std::size_t bytes) {
        return bytes >= 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1;
    }
    __m512i load(const std::uint8_t* group, int count) const {
        __m512i heads = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int w = 0; w < kWindows; ++w) {
            const int first = w * kPerWindow;
            if (first >= count) break;
            const int blocks = count - first < kPerWindow ? count - first : kPerWindow;
            const std::size_t bytes = static_cast<std::size_t>(blocks - 1) * kBlockBytes + 4;
            const std::uint8_t* p = group + static_cast<std::size_t>(first) * kBlockBytes;
            const __m512i lo = _mm512_maskz_loadu_epi8(bytes_mask(bytes), p);
            const __m512i hi =
                _mm512_maskz_loadu_epi8(bytes > 64 ? bytes_mask(bytes - 64) : 0, p + 64);
            // Word lanes 2 * first .. 2 * (first + blocks) - 1.
            const __mmask32 lanes =
                static_cast<__mmask32>(((std::uint64_t{1} << (2 * blocks)) - 1) << (2 * first));
            heads = _mm512_mask_mov_epi16(heads, lanes,
                                          _mm512_permutex2var_epi16(lo, word_index[w], hi));
        }
        return heads;
    }
};

}  // namespace tokenscope::tensor::detail
