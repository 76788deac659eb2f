#pragma once
// How the engine reaches backends it does not link. The CUDA backend lives in a plugin
// (runtime/gpu_plugin.h) that is loaded on first use; a test or an embedding program may
// register a factory itself instead, which then takes precedence.
#include <memory>
#include <string>

#include "kv/kv_types.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "runtime/backend.h"
#include "runtime/gpu_plugin.h"

namespace tokenscope::runtime {

enum class Device { Cpu, Cuda, Auto };
// "cpu", "cuda", "auto"; throws InvalidArgument naming the text otherwise.
Device parse_device(const std::string& text);
const char* device_name(Device device);

void register_gpu_backend(const GpuBackendFactory& factory);
// The registered factory, else the plugin's (loading it on the first call), else null with
// `why_none` (when given) set to the reason.
const GpuBackendFactory* registered_gpu_backend(std::string* why_none = nullptr);

}  // namespace tokenscope::runtime
