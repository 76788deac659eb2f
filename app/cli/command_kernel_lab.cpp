// `tokenscope-cli kernel-lab [--op gemv|attention] [--json]`: the CUDA plugin times every variant
// of an op on the same inputs (kernels/lab/kernel_lab.h); this prints them side by side.
// Exit 77 (skipped) without a usable GPU, like selftest.
#include <cstdio>

#include "arguments.h"
#include "commands.h"
#include "runtime/gpu_plugin_loader.h"
#include "table.h"
#include "util/json_writer.h"

namespace tokenscope::cli {

int run_kernel_lab(int argc, char** argv, int first) {
    const Arguments args("kernel-lab", {{"op"}, {"json", false}}, argc, argv, first);
    const runtime::GpuPluginStatus& status = runtime::gpu_plugin();
    const std::string reason = status.plugin ? status.plugin->backend.unavailable_reason() : status.problem;
    if (!reason.empty()) {
        std::printf("SKIP: kernel-lab: %s\n", reason.c_str());
        return 77;
    }
    const auto timings = status.plugin->kernel_lab(args.value("op").value_or(""));
    if (args.flag("json")) {
        JsonWriter w;
        w.begin_array();
        for (const auto& t : timings) {
            w.begin_object();
            w.key("op").value(t.op);
            w.key("variant").value(t.variant);
            w.key("us").value(t.microseconds);
            w.key("gbps").value(t.gbps);
            w.key("rel_error").value(t.rel_error);
            w.end_object();
        }
        w.end_array();
        std::printf("%s\n", w.str().c_str());
        return 0;
    }
    Table table({"op", "variant", "us", "GB/s", "vs first"}, {false, false, true, true, true});
    char us[32], gbps[32], err[32];
    for (const auto& t : timings) {
        std::snprintf(us, sizeof us, "%.2f", t.microseconds);
        std::snprintf(gbps, sizeof gbps, "%.0f", t.gbps);
        std::snprintf(err, sizeof err, "%.1e", t.rel_error);
        table.add_row({t.op, t.variant, us, gbps, err});
    }
    std::printf("%s", table.render().c_str());
    return 0;
}

}  // namespace tokenscope::cli
