#include "device_buffer.h"

#include <cuda_runtime.h>

#include "ops/check.h"
#include "util/error.h"

namespace tokenscope::cuda {

DeviceBuffer::DeviceBuffer(std::size_t bytes, const char* purpose) { grow(bytes, purpose); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), bytes_(other.bytes_) {
    other.data_ = nullptr;
    other.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        release();
        data_ = other.data_;
        bytes_ = other.bytes_;
        other.data_ = nullptr;
        other.bytes_ = 0;
    }
    return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() noexcept {
    if (data_) cudaFree(data_);
    data_ = nullptr;
    bytes_ = 0;
}

void DeviceBuffer::grow(std::size_t bytes, const char* purpose) {
    if (bytes <= bytes_) return;
    release();
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, bytes);
    if (status != cudaSuccess) {
        cudaGetLastError();
        throw Error(std::string("CUDA: cannot allocate ") + std::to_string(bytes) + " bytes for " + purpose + ": " +
                    cudaGetErrorName(status));
    }
    data_ = p;
    bytes_ = bytes;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes, Stream stream, std::size_t offset) {
    if (bytes == 0) return;
    if (offset + bytes > bytes_) throw Error("CUDA upload of " + std::to_string(bytes) + " bytes overflows a buffer of " + std::to_string(bytes_));
    TOKENSCOPE_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(data_) + offset, host, bytes, cudaMemcpyHostToDevice, stream));
}

void DeviceBuffer::download(void* host, std::size_t bytes, Stream stream, std::size_t offset) const {
    if (bytes == 0) return;
    if (offset + bytes > bytes_) throw Error("CUDA download of " + std::to_string(bytes) + " bytes overflows a buffer of " + std::to_string(bytes_));
    TOKENSCOPE_CUDA_CHECK(cudaMemcpyAsync(host, static_cast<const char*>(data_) + offset, bytes, cudaMemcpyDeviceToHost, stream));
}

void DeviceBuffer::zero(Stream stream) {
    if (bytes_) TOKENSCOPE_CUDA_CHECK(cudaMemsetAsync(data_, 0, bytes_, stream));
}

}  // namespace tokenscope::cuda
