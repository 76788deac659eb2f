#include "runtime/gpu_plugin_loader.h"

#include <filesystem>
#include <mutex>

#include <spdlog/spdlog.h>

#ifdef _WIN32
#include "util/windows_api.h"

#include "util/error.h"
#else
#include <dlfcn.h>
#endif

namespace tokenscope::runtime {

namespace {

namespace fs = std::filesystem;

std::string executable_path() {
#ifdef _WIN32
    wchar_t buffer[32768];
    const DWORD n = GetModuleFileNameW(nullptr, buffer, static_cast<DWORD>(std::size(buffer)));
    return n == 0 ? std::string() : fs::path(std::wstring(buffer, n)).string();
#else
    std::error_code ec;
    const fs::path p = fs::read_symlink("/proc/self/exe", ec);
    return ec ? std::string() : p.string();
#endif
}

// Opens one candidate; on failure returns null and the loader's message.
void* open_library(const std::string& path, std::string& error) {
#ifdef _WIN32
    // LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR (cuBLAS beside the plugin) takes absolute paths only,
    // and $TOKENSCOPE_CUDA_PLUGIN may be relative.
    std::error_code ec;
    fs::path file = fs::absolute(fs::path(path), ec);
    if (ec) file = fs::path(path);
    HMODULE h = LoadLibraryExW(file.wstring().c_str(), nullptr,
                               LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
    if (!h) {
        const DWORD code = GetLastError();
        error = "LoadLibraryExW failed: " + windows_error_text(code);
    }
    return reinterpret_cast<void*>(h);
#else
    // RTLD_LOCAL: the plugin's own copies of engine code stay private to it.
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char* e = dlerror();
        error = e ? e : "dlopen failed";
    }
    return h;
#endif
}

void* find_symbol(void* library, const char* name) {
#ifdef _WIN32
    return reinterpret_cast<void*>(GetProcAddress(reinterpret_cast<HMODULE>(library), name));
#else
    return dlsym(library, name);
#endif
}

GpuPluginStatus load() {
    GpuPluginStatus status;
    const auto candidates = gpu_plugin_candidates(executable_path(), std::getenv("TOKENSCOPE_CUDA_PLUGIN"));
    std::string looked;
    for (const auto& path : candidates) {
        std::error_code ec;
        if (!fs::exists(path, ec)) {
            looked += (looked.empty() ? "" : ", ") + path;
            continue;
        }
        status.path = path;
        std::string error;
        void* library = open_library(path, error);
        if (!library) {
            status.problem = "the CUDA plugin " + path + " could not be loaded: " + error;
            return status;
        }
        auto entry = reinterpret_cast<TokenscopeGpuPluginEntry>(find_symbol(library, TOKENSCOPE_GPU_PLUGIN_ENTRY));
        if (!entry) {
            status.problem = "the CUDA plugin " + path + " has no " TOKENSCOPE_GPU_PLUGIN_ENTRY " symbol";
            return status;
        }
        const GpuPlugin* plugin = entry();
        if (!plugin || plugin->abi_version != kGpuPluginAbiVersion) {
            status.problem = "the CUDA plugin " + path + " was built for interface version " +
                             std::to_string(plugin ? plugin->abi_version : -1) + ", this program needs " +
                             std::to_string(kGpuPluginAbiVersion) + " (reinstall the matching tokenscope-cuda)";
            return status;
        }
        if (plugin->layout_signature != gpu_plugin_layout_signature()) {
            status.problem = "the CUDA plugin " + path +
                             " was built from other sources than this program (engine type layouts differ; "
                             "rebuild both, or reinstall the matching tokenscope-cuda)";
            return status;
        }
        status.plugin = plugin;
        spdlog::debug("loaded the CUDA plugin {}", path);
        return status;
    }
    status.problem = std::string("the CUDA plugin ") + gpu_plugin_file_name() + " is not installed (looked in " +
                     (looked.empty() ? "no place: the executable's path is unknown" : looked) + ")";
    return status;
}

}  // namespace

const char* gpu_plugin_file_name() {
#ifdef _WIN32
    return "tokenscope_cuda.dll";
#else
    return "libtokenscope_cuda.so";
#endif
}

std::vector<std::string> gpu_plugin_candidates(const std::string& executable, const char* env_override) {
    std::vector<std::string> out;
    if (env_override && *env_override) out.emplace_back(env_override);
    if (!executable.empty()) {
        const fs::path dir = fs::path(executable).parent_path();
        out.push_back((dir / gpu_plugin_file_name()).string());
        out.push_back((dir.parent_path() / "lib" / "tokenscope" / gpu_plugin_file_name()).string());
    }
    return out;
}

const GpuPluginStatus& gpu_plugin() {
    static std::once_flag once;
    static GpuPluginStatus status;
    std::call_once(once, [] { status = load(); });
    return status;
}

}  // namespace tokenscope::runtime
