#pragma once
// RAII device memory for the self-tests: cudaMalloc in the constructor, cudaFree in the
// destructor, copies that throw tokenscope::Error (with the CUDA error name) on failure.
#include <cstddef>
#include <utility>
#include <vector>

#include "ops/check.h"

namespace tokenscope::cuda::selftest {

template <typename T>
class DeviceBuffer {
  public:
    explicit DeviceBuffer(std::size_t count) : count_(count) {
        if (count_ > 0) {
            void* p = nullptr;
            TOKENSCOPE_CUDA_CHECK(cudaMalloc(&p, count_ * sizeof(T)));
            ptr_ = static_cast<T*>(p);
        }
    }
    explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
    ~DeviceBuffer() {
        if (ptr_ != nullptr) cudaFree(ptr_);  // no throwing from a destructor
    }
    DeviceBuffer(DeviceBuffer&& other) noexcept
        : ptr_(std::exchange(other.ptr_, nullptr)), count_(std::exchange(other.count_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
        if (this != &other) {
            if (ptr_ != nullptr) cudaFree(ptr_);
            ptr_ = std::exchange(other.ptr_, nullptr);
            count_ = std::exchange(other.count_, 0);
        }
        return *this;
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    T* get() const { return ptr_; }
    std::size_t size() const { return count_; }

    // Host -> device; host.size() must equal size().
    void upload(const std::vector<T>& host) {
        if (host.size() != count_) throw Error("DeviceBuffer::upload: size mismatch");
        if (count_ == 0) return;
        TOKENSCOPE_CUDA_CHECK(
            cudaMemcpy(ptr_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
    }
    void zero() {
        if (count_ > 0) TOKENSCOPE_CUDA_CHECK(cudaMemset(ptr_, 0, count_ * sizeof(T)));
    }
    // Device -> host (synchronises with the default stream).
    std::vector<T> download() const {
        std::vector<T> host(count_);
        if (count_ > 0) {
            TOKENSCOPE_CUDA_CHECK(
                cudaMemcpy(host.data(), ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
        }
        return host;
    }

  private:
    T* ptr_ = nullptr;
    std::size_t count_ = 0;
};

}  // namespace tokenscope::cuda::selftest
