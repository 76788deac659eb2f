#pragma once
// A 64-byte aligned scratch buffer that only grows, one per thread and kernel (the packed rows of
// the lane GEMMs, the widened rows of the AVX-512 F16 prefill). No vector code, and in an
// unnamed namespace like the kernel headers that include it, so each kernel file, whatever
// instruction set it is compiled for, gets its own copy.
#include <cstddef>
#include <cstdint>
#include <new>

namespace tokenscope::tensor::detail {
namespace {

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

}  // namespace
}  // namespace tokenscope::tensor::detail
