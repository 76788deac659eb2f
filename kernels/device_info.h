#pragma once
// What CUDA devices this process can use. Host-only interface: no CUDA types here.
#include <cstdint>
#include <string>
#include <vector>

namespace tokenscope::cuda {

struct DeviceInfo {
    int index = 0;
    std::string name;
    int compute_major = 0;
    int compute_minor = 0;
    std::uint64_t total_memory_bytes = 0;
    std::uint64_t free_memory_bytes = 0;
    int multiprocessors = 0;
    double memory_bandwidth_gbps = 0;  // theoretical, from clock and bus width (0 if unknown)
};

struct DeviceQuery {
    std::vector<DeviceInfo> devices;
    int runtime_version = 0;
    int driver_version = 0;  // 0 when no driver is installed
    std::string problem;     // why no device is usable (empty when devices were found)
};

// Never throws: a machine without a GPU or driver is a normal answer, described in `problem`.
DeviceQuery query_devices();

}  // namespace tokenscope::cuda
