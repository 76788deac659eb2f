// The CUDA plugin's one exported symbol: hands the engine the backend factory and the
// device-level tools (device query, kernel self-test, measured peaks, kernel lab).
#include "cuda_backend.h"
#include "device_info.h"
#include "lab/kernel_lab.h"
#include "lab/peaks.h"
#include "runtime/gpu_plugin.h"
#include "selftest/matmul_selftest.h"
#include "selftest/ops_selftest.h"

namespace tokenscope::cuda {
namespace {

std::vector<runtime::GpuCheck> kernel_checks(std::uint64_t seed) {
    std::vector<runtime::GpuCheck> out;
    for (const auto& c : selftest::check_ops(seed)) out.push_back({c.name, c.precision, c.rel_error, c.tolerance, c.passed});
    for (const auto& c : check_matmul(seed)) out.push_back({c.name, c.precision, c.rel_error, c.tolerance, c.passed});
    return out;
}

runtime::GpuPlugin make_plugin() {
    runtime::GpuPlugin p;
    p.abi_version = runtime::kGpuPluginAbiVersion;
    p.layout_signature = runtime::gpu_plugin_layout_signature();
    p.backend = backend_factory();
    p.query_devices = &query_devices;
    p.kernel_checks = &kernel_checks;
    p.measure_peaks = &lab::measure_peaks;
    p.kernel_lab = &lab::run_kernel_lab;
    return p;
}

}  // namespace
}  // namespace tokenscope::cuda

#if defined(_WIN32)
#define TOKENSCOPE_PLUGIN_EXPORT __declspec(dllexport)
#else
#define TOKENSCOPE_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

extern "C" TOKENSCOPE_PLUGIN_EXPORT const tokenscope::runtime::GpuPlugin* tokenscope_gpu_plugin() {
    static const tokenscope::runtime::GpuPlugin plugin = tokenscope::cuda::make_plugin();
    return &plugin;
}
