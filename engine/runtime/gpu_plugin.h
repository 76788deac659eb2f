#pragma once
// The interface between the engine and the optional CUDA plugin (libtokenscope_cuda.so /
// tokenscope_cuda.dll). The plugin is a separate file so that the packages can ship it as an
// optional part: the executables never link CUDA, and a machine without the CUDA runtime loads
// no CUDA code at all (runtime/gpu_plugin_loader.h finds and opens the plugin on first use).
//
// Both sides are built from the same source tree by the same compiler and shipped together, so
// the interface uses C++ types (std::string, std::vector); `abi_version` guards against a stale
// plugin file from an older build lying next to a newer executable.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inspect/attention_capture.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_types.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "runtime/backend.h"
#include "runtime/batch.h"

namespace tokenscope::runtime {

// Bump whenever a struct below or a function signature changes.
inline constexpr int kGpuPluginAbiVersion = 3;

struct GpuOptions {
    // Record the batch-1 decode step once as a CUDA graph and replay it (fewer launch gaps).
    bool decode_graphs = true;
    // Split-K ("flash-decoding") attention for long contexts; off forces one block per head.
    bool split_k_attention = true;
};

struct GpuBackendFactory {
    const char* name = "cuda";
    // Why no usable GPU is present ("" when one is): checked before `create` for Device::Auto.
    std::string (*unavailable_reason)() = nullptr;
    // Throws tokenscope::Error (e.g. the model does not fit) before allocating half of it.
    std::unique_ptr<Backend> (*create)(const model::ModelConfig&, const model::ModelWeights&,
                                       const kv::CacheShape&, const GpuOptions&) = nullptr;
};

struct GpuDevice {
    int index = 0;
    std::string name;
    int compute_major = 0;
    int compute_minor = 0;
    std::uint64_t total_memory_bytes = 0;
    std::uint64_t free_memory_bytes = 0;
    int multiprocessors = 0;
    double memory_bandwidth_gbps = 0;  // theoretical, from clock and bus width (0 if unknown)
};

struct GpuDeviceQuery {
    std::vector<GpuDevice> devices;
    int runtime_version = 0;
    int driver_version = 0;  // 0 when no driver is installed
    std::string problem;     // why no device is usable (empty when devices were found)
};

// One CPU-vs-GPU comparison of the self-test.
struct GpuCheck {
    std::string name;       // "attention q8 window 8", "Q4_K rows=131 cols=512 tokens=4", ...
    std::string precision;  // what is compared
    double error = 0;       // ||gpu - reference|| / ||reference||
    double tolerance = 0;
    bool passed = false;
};

// The device's ceilings, measured (not read off a data sheet): the denominators of the
// benchmark's percentages.
struct GpuPeaks {
    std::string device_name;
    // cudaMemcpy device-to-device of a large buffer: (bytes read + bytes written) / time.
    double copy_gbps = 0;
    // cublasGemmEx bf16 x bf16 -> f32 accumulate at the given shape (2*m*n*k / time).
    double bf16_gemm_tflops = 0;
    int gemm_m = 0, gemm_n = 0, gemm_k = 0;
};

// One variant of one op timed by the kernel lab (`tools/kernel-lab`).
struct KernelTiming {
    std::string op;        // "gemv Q4_K 2048x8192"
    std::string variant;   // "warp-per-row", "4 rows/warp, 16-byte loads", ...
    double microseconds = 0;
    double gbps = 0;       // bytes the op must read / time
    double rel_error = 0;  // against the reference variant (the first of each op)
};

struct GpuPlugin {
    int abi_version = 0;
    std::uint64_t layout_signature = 0;  // gpu_plugin_layout_signature() of the plugin's build
    GpuBackendFactory backend;
    GpuDeviceQuery (*query_devices)() = nullptr;
    // Every op and matmul path against the CPU on seeded random inputs. Throws when CUDA fails.
    std::vector<GpuCheck> (*kernel_checks)(std::uint64_t seed) = nullptr;
    // Throws when CUDA fails. gemm_tokens is the n of the bf16 GEMM (the prefill length).
    GpuPeaks (*measure_peaks)(int gemm_m, int gemm_n, int gemm_k) = nullptr;
    // Times every variant of the named op ("" = all ops); throws on an unknown op name.
    std::vector<KernelTiming> (*kernel_lab)(const std::string& op) = nullptr;
};

// The plugin runs its own copy of engine code on objects the program owns (the KV cache
// manager, batches, outputs, captures, the model's config and weights). A plugin built from
// other sources, whose types differ in layout, must be refused even when nobody bumped
// kGpuPluginAbiVersion: both sides compute this from the sizes of those types and the loader
// compares them. (Sizes catch most layout changes, not a reordering of equal-size fields; the
// packages pin the exact version besides.)
inline std::uint64_t gpu_plugin_layout_signature() {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the sizes
    for (const std::uint64_t size :
         {sizeof(model::ModelConfig), sizeof(model::ModelWeights), sizeof(model::LayerWeights), sizeof(model::WeightMatrix),
          sizeof(kv::KvCacheManager), sizeof(kv::CacheShape), sizeof(kv::BlockCopy), sizeof(Batch), sizeof(SeqChunk),
          sizeof(ForwardOutputs), sizeof(inspect::AttentionCapture), sizeof(BackendMemory), sizeof(GpuOptions),
          sizeof(GpuBackendFactory), sizeof(GpuDeviceQuery), sizeof(GpuCheck), sizeof(GpuPeaks), sizeof(KernelTiming),
          sizeof(GpuPlugin), sizeof(std::string), sizeof(std::vector<float>)}) {
        h = (h ^ size) * 1099511628211ull;
    }
    return h;
}

}  // namespace tokenscope::runtime

// The one symbol the plugin exports (C linkage so that dlsym/GetProcAddress find it by name).
extern "C" {
typedef const tokenscope::runtime::GpuPlugin* (*TokenscopeGpuPluginEntry)();
}
#define TOKENSCOPE_GPU_PLUGIN_ENTRY "tokenscope_gpu_plugin"
