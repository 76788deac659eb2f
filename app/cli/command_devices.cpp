// `tokenscope-cli devices`: the CPU features and GPUs this build can use.
#include <cstdio>
#include <thread>

#include "arguments.h"
#include "commands.h"
#include "table.h"
#include "util/cpu_features.h"
#include "util/json_writer.h"
#include "runtime/gpu_plugin_loader.h"
#include "tensor/matmul.h"

namespace tokenscope::cli {

int run_devices(int argc, char** argv, int first) {
    const Arguments args("devices", {{"json", false}}, argc, argv, first);
    const unsigned threads = std::thread::hardware_concurrency();
    const cpu::X86Features& cpu_features = cpu::x86_features();  // all false off x86-64
    const bool avx2 = cpu_features.avx2 && cpu_features.fma;
    const bool avx512 = cpu_features.avx512f && cpu_features.avx512bw;
    const cpu::X86Model& model = cpu::x86_model();
    JsonWriter json;
    json.begin_object();
    json.key("cpu").begin_object();
    json.key("threads").value(static_cast<std::uint64_t>(threads));
    json.key("avx2").value(avx2);
    json.key("avx512").value(avx512);
    // The level the matmul kernels run at: the best the CPU has, unless TOKENSCOPE_SIMD caps it
    // ("+avx-vnni" at the AVX2 level with AVX-VNNI; TOKENSCOPE_AVXVNNI=0 turns that off).
    json.key("kernels").value(tensor::active_kernels_name());
    json.key("avx_vnni").value(tensor::avx_vnni_available());
    // The cache level the decode kernels prefetch weights into (by CPU model, or
    // TOKENSCOPE_PREFETCH).
    json.key("weight_prefetch").value(tensor::weight_prefetch_name(tensor::weight_prefetch()));
    // F16/BF16 rows have their own level (none on Zen 3, weight_prefetch.h).
    json.key("half_row_prefetch").value(tensor::weight_prefetch_name(tensor::half_row_prefetch()));
    json.key("vendor").value(model.amd ? "amd" : model.intel ? "intel" : "other");
    json.key("family").value(static_cast<std::uint64_t>(model.family));
    json.key("model").value(static_cast<std::uint64_t>(model.model));
    json.end_object();
    json.key("cuda").begin_object();
    const runtime::GpuPluginStatus& plugin = runtime::gpu_plugin();
    runtime::GpuDeviceQuery query;
    if (plugin.plugin) query = plugin.plugin->query_devices();
    json.key("plugin").value(plugin.plugin ? plugin.path : std::string());
    if (!plugin.plugin) json.key("plugin_problem").value(plugin.problem);
    json.key("built").value(plugin.plugin != nullptr);
    json.key("runtime_version").value(query.runtime_version);
    json.key("driver_version").value(query.driver_version);
    if (!query.problem.empty()) json.key("problem").value(query.problem);
    json.key("devices").begin_array();
    for (const auto& d : query.devices) {
        json.begin_object();
        json.key("index").value(d.index);
        json.key("name").value(d.name);
        json.key("compute_capability")
            .value(std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor));
        json.key("total_memory_bytes").value(d.total_memory_bytes);
        json.key("free_memory_bytes").value(d.free_memory_bytes);
        json.key("multiprocessors").value(d.multiprocessors);
        json.key("memory_bandwidth_gbps").value(d.memory_bandwidth_gbps);
        json.end_object();
    }
    json.end_array();
    json.end_object();
    json.end_object();
    if (args.flag("json")) {
        std::printf("%s\n", json.str().c_str());
        return 0;
    }
    const bool capped = tensor::active_simd_level() != tensor::detected_simd_level();
    std::printf(
        "CPU: %u threads, SIMD: %s%s%s; %s family 0x%X model 0x%X, "
        "weight prefetch into %s (F16/BF16 rows: %s)\n",
        threads, avx512 ? "AVX-512" : (avx2 ? "AVX2" : "scalar"),
        capped ? "; kernels capped by TOKENSCOPE_SIMD at " : "",
        capped ? tensor::simd_level_name(tensor::active_simd_level()) : "",
        model.amd     ? "AMD"
        : model.intel ? "Intel"
                      : "CPU",
        model.family, model.model, tensor::weight_prefetch_name(tensor::weight_prefetch()),
        tensor::weight_prefetch_name(tensor::half_row_prefetch()));
    if (!plugin.plugin) {
        std::printf("CUDA: not available: %s\n", plugin.problem.c_str());
        return 0;
    }
    if (query.devices.empty()) {
        std::printf("CUDA: plugin %s loaded, but %s\n", plugin.path.c_str(), query.problem.c_str());
        return 0;
    }
    Table table({"#", "GPU", "compute", "memory", "free", "SMs", "bandwidth GB/s"},
                {true, false, false, true, true, true, true});
    for (const auto& d : query.devices) {
        char bandwidth[32];
        std::snprintf(bandwidth, sizeof bandwidth, "%.0f", d.memory_bandwidth_gbps);
        table.add_row({std::to_string(d.index), d.name,
                       std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor),
                       human_bytes(d.total_memory_bytes), human_bytes(d.free_memory_bytes),
                       std::to_string(d.multiprocessors), bandwidth});
    }
    std::printf("CUDA (plugin %s):\n%s", plugin.path.c_str(), table.render().c_str());
    return 0;
}

}  // namespace tokenscope::cli
