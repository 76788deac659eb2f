#pragma once
// A typed view of kernels/device_buffer.h for the self-tests: a count of T, built from a host
// vector, read back whole. Work goes to the legacy default stream (the self-tests launch their
// kernels there), and download() waits for it.
#include <cstddef>
#include <vector>

#include "../device_buffer.h"  // kernels/device_buffer.h, not this file
#include "ops/check.h"
#include "util/error.h"

namespace tokenscope::cuda::selftest {

template <typename T>
class DeviceBuffer {
  public:
    explicit DeviceBuffer(std::size_t count) : count_(count) {
        if (count_ > 0) raw_.grow(count_ * sizeof(T), "self-test buffer");
    }
    explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }

    T* get() const { return raw_.as<T>(); }
    std::size_t size() const { return count_; }

    // Host -> device; host.size() must equal size().
    void upload(const std::vector<T>& host) {
        if (host.size() != count_) throw Error("DeviceBuffer::upload: size mismatch");
        raw_.upload(host.data(), count_ * sizeof(T), nullptr);
    }
    void zero() { raw_.zero(nullptr); }
    // Device -> host, after everything queued on the default stream.
    std::vector<T> download() const {
        std::vector<T> host(count_);
        raw_.download(host.data(), count_ * sizeof(T), nullptr);
        TOKENSCOPE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
        return host;
    }

  private:
    cuda::DeviceBuffer raw_;
    std::size_t count_ = 0;
};

}  // namespace tokenscope::cuda::selftest
