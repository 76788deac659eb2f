#pragma once
// The CUDA backend: the same forward pass as the CPU backend, on an NVIDIA GPU. Weights are
// uploaded in their GGUF formats (dequantized inside the kernels), the paged KV cache lives on
// the device with the host's BlockPool bookkeeping, activations are f32. Host-only header.
#include <memory>
#include <string>

#include "kv/kv_types.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "runtime/backend.h"
#include "runtime/gpu_plugin.h"

namespace tokenscope::cuda {

class CudaBackend : public runtime::Backend {
public:
    // Checks the budget with cudaMemGetInfo first: a model or KV cache that does not fit is a
    // tokenscope::Error before anything is allocated.
    CudaBackend(const model::ModelConfig& config, const model::ModelWeights& weights, const kv::CacheShape& shape,
                const runtime::GpuOptions& options = {});
    ~CudaBackend() override;

    void forward(const runtime::Batch& batch, kv::KvCacheManager& kv, runtime::ForwardOutputs& out) override;
    std::string name() const override;
    runtime::BackendMemory memory() const override;

private:
    struct State;
    std::unique_ptr<State> state_;
};

// "" when a CUDA device is usable, else one line saying why not.
std::string unavailable_reason();
// The factory the plugin hands to the engine (kernels/plugin_entry.cpp).
runtime::GpuBackendFactory backend_factory();

}  // namespace tokenscope::cuda
