#include "device_info.h"

#include <cuda_runtime.h>

namespace tokenscope::cuda {

DeviceQuery query_devices() {
    DeviceQuery query;
    cudaRuntimeGetVersion(&query.runtime_version);
    if (cudaDriverGetVersion(&query.driver_version) != cudaSuccess || query.driver_version == 0) {
        query.problem = "no NVIDIA driver is installed";
        return query;
    }
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        query.problem = std::string("no usable CUDA device: ") + cudaGetErrorName(status) + " (" +
                        cudaGetErrorString(status) + ")";
        cudaGetLastError();  // clear the sticky error so later calls start clean
        return query;
    }
    if (count == 0) {
        query.problem = "the driver reports no CUDA device";
        return query;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
        DeviceInfo info;
        info.index = i;
        info.name = prop.name;
        info.compute_major = prop.major;
        info.compute_minor = prop.minor;
        info.total_memory_bytes = prop.totalGlobalMem;
        info.multiprocessors = prop.multiProcessorCount;
        int clock_khz = 0;
        int bus_bits = 0;
        if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, i) == cudaSuccess &&
            cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, i) == cudaSuccess) {
            // Double data rate: two transfers per clock.
            info.memory_bandwidth_gbps = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
        }
        if (cudaSetDevice(i) == cudaSuccess) {
            size_t free_bytes = 0, total_bytes = 0;
            if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
                info.free_memory_bytes = free_bytes;
            }
        }
        query.devices.push_back(info);
    }
    return query;
}

}  // namespace tokenscope::cuda
