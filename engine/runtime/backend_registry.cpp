#include "runtime/backend_registry.h"

#include <optional>

#include "runtime/gpu_plugin_loader.h"
#include "util/error.h"

namespace tokenscope::runtime {

namespace {
std::optional<GpuBackendFactory>& slot() {
    static std::optional<GpuBackendFactory> factory;
    return factory;
}
}  // namespace

Device parse_device(const std::string& text) {
    if (text == "cpu") return Device::Cpu;
    if (text == "cuda") return Device::Cuda;
    if (text == "auto") return Device::Auto;
    throw InvalidArgument("device '" + text + "' is not cpu, cuda or auto");
}

const char* device_name(Device device) {
    switch (device) {
        case Device::Cpu: return "cpu";
        case Device::Cuda: return "cuda";
        case Device::Auto: return "auto";
    }
    return "?";
}

void register_gpu_backend(const GpuBackendFactory& factory) { slot() = factory; }

const GpuBackendFactory* registered_gpu_backend(std::string* why_none) {
    if (slot()) return &*slot();
    const GpuPluginStatus& plugin = gpu_plugin();
    if (plugin.plugin) return &plugin.plugin->backend;
    if (why_none) *why_none = plugin.problem;
    return nullptr;
}

}  // namespace tokenscope::runtime
