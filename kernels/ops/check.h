#pragma once
// Error checks for CUDA runtime calls and kernel launches in kernels/ops. Never exits: throws
// tokenscope::Error with the file, line, what was being done and the CUDA error name.
// Include only where cuda_runtime.h is available (.cu files, kernels/*.cpp).
#include <string>

#include <cuda_runtime.h>

#include "util/error.h"

namespace tokenscope::cuda::ops::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* what, const char* file,
                                          int line) {
    throw Error(std::string(file) + ":" + std::to_string(line) + ": " + what + " failed: " +
                cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

}  // namespace tokenscope::cuda::ops::detail

// Throws when `call` (a cudaError_t expression) is not cudaSuccess.
#define TOKENSCOPE_CUDA_CHECK(call)                                                         \
    do {                                                                                    \
        const cudaError_t tokenscope_status_ = (call);                                      \
        if (tokenscope_status_ != cudaSuccess) {                                            \
            ::tokenscope::cuda::ops::detail::throw_cuda_error(tokenscope_status_, #call,    \
                                                              __FILE__, __LINE__);          \
        }                                                                                   \
    } while (0)

// After a <<<...>>> launch: throws naming the kernel when the launch failed.
#define TOKENSCOPE_CUDA_CHECK_LAUNCH(kernel_name)                                           \
    do {                                                                                    \
        const cudaError_t tokenscope_status_ = cudaGetLastError();                          \
        if (tokenscope_status_ != cudaSuccess) {                                            \
            ::tokenscope::cuda::ops::detail::throw_cuda_error(                              \
                tokenscope_status_, "launch of kernel " kernel_name, __FILE__, __LINE__);   \
        }                                                                                   \
    } while (0)
