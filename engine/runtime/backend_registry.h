#pragma once
// How the engine reaches backends it does not link: kernels/ (CUDA) registers a factory at
// start-up (the CLI and the app call tokenscope::cuda::register_backend()), so the engine
// library never includes CUDA headers and builds without the toolkit.
#include <memory>
#include <string>

#include "kv/kv_types.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "runtime/backend.h"

namespace tokenscope::runtime {

enum class Device { Cpu, Cuda, Auto };
// "cpu", "cuda", "auto"; throws InvalidArgument naming the text otherwise.
Device parse_device(const std::string& text);
const char* device_name(Device device);

struct GpuBackendFactory {
    const char* name = "cuda";
    // Why no usable GPU is present ("" when one is): checked before `create` for Device::Auto.
    std::string (*unavailable_reason)() = nullptr;
    // Throws tokenscope::Error (e.g. the model does not fit) before allocating half of it.
    std::unique_ptr<Backend> (*create)(const model::ModelConfig&, const model::ModelWeights&,
                                       const kv::CacheShape&) = nullptr;
};

void register_gpu_backend(const GpuBackendFactory& factory);
const GpuBackendFactory* registered_gpu_backend();

}  // namespace tokenscope::runtime
