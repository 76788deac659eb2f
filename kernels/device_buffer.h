#pragma once
// Device memory owned by RAII: cudaMalloc in the constructor (or grow()), cudaFree in the
// destructor; every CUDA failure throws tokenscope::Error naming the call, the size and the
// CUDA error name (ops/check.h). Host-side header: no CUDA types in the interface.
#include <cstddef>
#include <cstdint>
#include <string>

struct CUstream_st;

namespace tokenscope::cuda {

using Stream = CUstream_st*;

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t bytes, const char* purpose = "buffer");
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    ~DeviceBuffer();

    // Makes the buffer at least `bytes` large (contents are lost when it grows).
    void grow(std::size_t bytes, const char* purpose = "buffer");
    void upload(const void* host, std::size_t bytes, Stream stream, std::size_t offset = 0);
    void download(void* host, std::size_t bytes, Stream stream, std::size_t offset = 0) const;
    void zero(Stream stream);

    void* data() const { return data_; }
    template <typename T>
    T* as() const {
        return static_cast<T*>(data_);
    }
    std::size_t bytes() const { return bytes_; }

private:
    void release() noexcept;
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
};

}  // namespace tokenscope::cuda
