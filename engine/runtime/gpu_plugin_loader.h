#pragma once
// Finds and opens the CUDA plugin once per process. Where it looks, in order:
//   1. $TOKENSCOPE_CUDA_PLUGIN (a file path), when set;
//   2. next to the executable (build tree, portable .tar.gz bundle, Windows install);
//   3. <executable dir>/../lib/tokenscope/ (the .deb layout: /usr/bin + /usr/lib/tokenscope).
// A missing plugin is normal (the CPU-only package); a plugin that is present but cannot be
// opened (e.g. libcublas.so.13 is not installed) is reported with the loader's message.
#include <string>
#include <vector>

#include "runtime/gpu_plugin.h"

namespace tokenscope::runtime {

struct GpuPluginStatus {
    const GpuPlugin* plugin = nullptr;  // null when none could be loaded
    std::string path;                   // the file that was loaded (or failed to load)
    std::string problem;                // why plugin is null; empty when it is not
};

// Thread-safe; the first call does the work, later calls return the same answer. The plugin
// stays loaded until the process exits (its code may back live objects until then).
const GpuPluginStatus& gpu_plugin();

// The candidate paths, in search order, for the executable at `executable_path` (pure: tested).
std::vector<std::string> gpu_plugin_candidates(const std::string& executable_path, const char* env_override);

// The platform's file name of the plugin: libtokenscope_cuda.so or tokenscope_cuda.dll.
const char* gpu_plugin_file_name();

}  // namespace tokenscope::runtime
