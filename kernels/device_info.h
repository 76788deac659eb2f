#pragma once
// What CUDA devices this process can use. Host-only interface: no CUDA types here; the structs
// are the plugin interface's (runtime/gpu_plugin.h), so the answer crosses it unchanged.
#include "runtime/gpu_plugin.h"

namespace tokenscope::cuda {

using DeviceInfo = runtime::GpuDevice;
using DeviceQuery = runtime::GpuDeviceQuery;

// Never throws: a machine without a GPU or driver is a normal answer, described in `problem`.
DeviceQuery query_devices();

}  // namespace tokenscope::cuda
