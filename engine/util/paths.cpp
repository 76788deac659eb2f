#include "util/paths.h"

#include <cstdlib>

namespace tokenscope::paths {

namespace {
const char* env(const char* name) {
    const char* value = std::getenv(name);
    return value && *value ? value : nullptr;
}
}  // namespace

std::filesystem::path data_dir() {
    if (const char* xdg = env("XDG_DATA_HOME")) return std::filesystem::path(xdg) / "tokenscope";
#ifdef _WIN32
    if (const char* appdata = env("LOCALAPPDATA"))
        return std::filesystem::path(appdata) / "tokenscope";
#endif
    if (const char* home = env("HOME")) {
        return std::filesystem::path(home) / ".local" / "share" / "tokenscope";
    }
    return std::filesystem::current_path() / "tokenscope-data";
}

std::filesystem::path models_dir() {
    if (const char* models = env("TOKENSCOPE_MODELS")) return models;
    return data_dir() / "models";
}

std::filesystem::path default_model() {
    return models_dir() / kDefaultModelFile;
}

}  // namespace tokenscope::paths
