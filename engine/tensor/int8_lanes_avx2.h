#pragma once
// Pieces shared by the AVX2 int8 prefill tiles whose 32-bit lanes are weight rows
// (gemm_int8_avx2.cpp for the K-quants, gemm_int8_q32_avx2.cpp for the 32-blocks): weight rows
// are interleaved 8 at a time, 4 bytes of each row side by side, and a token's 4 activation
// bytes are broadcast to all 8 lanes. In an unnamed namespace like pack_simd256.h, so each
// AVX2 file gets its own copy compiled for AVX2.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

namespace tokenscope::tensor::detail {
namespace {

constexpr int kLanes = 8;  // weight rows per register

// GCC hoists every token's broadcast and product of a step ahead of the additions, and with 12
// accumulators live that leaves no registers: it kept 11 of them on the stack (measured in the
// generated code). An empty volatile asm on a value pins its place in the order, since volatile
// asms are never moved across each other, so each token's work stays together.
inline void keep_in_order(__m256i& v) {
#if defined(__GNUC__)
    asm volatile("" : "+x"(v));
#else
    (void)v;
#endif
}

// A token's 4 activation bytes at p in every 32-bit lane.
inline __m256i broadcast4(const std::uint8_t* p) {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// 32 bytes of each of 8 rows (src + r * stride, 32-byte aligned) -> 8 vectors at dst (32-byte
// aligned), vector g holding bytes 4g..4g+3 of rows 0..7 in lanes 0..7: an 8 x 8 transpose of
// 32-bit words.
inline void interleave_rows32(const std::uint8_t* src, std::size_t stride, std::uint8_t* dst) {
    __m256i r[8];
    for (int i = 0; i < 8; ++i)
        r[i] = _mm256_load_si256(
            reinterpret_cast<const __m256i*>(src + static_cast<std::size_t>(i) * stride));
    __m256i t[8], q[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        q[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        q[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        q[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        q[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    auto* out = reinterpret_cast<__m256i*>(dst);
    for (int i = 0; i < 4; ++i) {
        _mm256_store_si256(out + i, _mm256_permute2x128_si256(q[i], q[i + 4], 0x20));
        _mm256_store_si256(out + i + 4, _mm256_permute2x128_si256(q[i], q[i + 4], 0x31));
    }
}

// A 64-byte aligned scratch buffer that only grows (one per thread and kernel).
class ScratchBuffer {
  public:
    ScratchBuffer() = default;
    ScratchBuffer(const ScratchBuffer&) = delete;
    ScratchBuffer& operator=(const ScratchBuffer&) = delete;
    ~ScratchBuffer() { release(); }

    std::uint8_t* get(std::size_t bytes) {
        if (bytes > capacity_) {
            release();
            data_ = static_cast<std::uint8_t*>(::operator new[](bytes, std::align_val_t{64}));
            capacity_ = bytes;
        }
        return data_;
    }

  private:
    void release() {
        if (data_) ::operator delete[](data_, std::align_val_t{64});
        data_ = nullptr;
        capacity_ = 0;
    }
    std::uint8_t* data_ = nullptr;
    std::size_t capacity_ = 0;
};

// Stores 8 lanes of results to out, only the first `valid` when the group is partial.
inline void store_lanes(float* out, __m256 v, int valid) {
    if (valid >= kLanes) {
        _mm256_storeu_ps(out, v);
        return;
    }
    alignas(32) float lanes[kLanes];
    _mm256_store_ps(lanes, v);
    std::memcpy(out, lanes, static_cast<std::size_t>(valid) * sizeof(float));
}

}  // namespace
}  // namespace tokenscope::tensor::detail
