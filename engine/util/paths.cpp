#include "util/paths.h"

#include <cstdlib>
#include <string>

namespace tokenscope::paths {

namespace {

// The process environment. On Windows the wide variant, so that a user name outside the ANSI
// code page still gives a correct path.
std::optional<std::filesystem::path> process_env(const char* name) {
#ifdef _WIN32
    const std::wstring wide_name(name, name + std::char_traits<char>::length(name));
    const wchar_t* value = _wgetenv(wide_name.c_str());
#else
    const char* value = std::getenv(name);
#endif
    if (!value || !*value) return std::nullopt;
    return std::filesystem::path(value);
}

constexpr Platform kThisPlatform =
#ifdef _WIN32
    Platform::Windows;
#else
    Platform::Posix;
#endif

}  // namespace

std::filesystem::path data_dir_for(Platform platform, const EnvLookup& env) {
    if (const auto xdg = env("XDG_DATA_HOME")) return *xdg / "tokenscope";
    if (platform == Platform::Windows) {
        if (const auto local = env("LOCALAPPDATA")) return *local / "tokenscope";
        if (const auto profile = env("USERPROFILE"))
            return *profile / "AppData" / "Local" / "tokenscope";
    } else if (const auto home = env("HOME")) {
        return *home / ".local" / "share" / "tokenscope";
    }
    return std::filesystem::current_path() / "tokenscope-data";
}

std::filesystem::path data_dir() {
    return data_dir_for(kThisPlatform, process_env);
}

std::filesystem::path models_dir() {
    if (const auto models = process_env("TOKENSCOPE_MODELS")) return *models;
    return data_dir() / "models";
}

std::filesystem::path default_model() {
    const std::filesystem::path instruct = models_dir() / kDefaultModelFile;
    std::error_code ec;
    if (!std::filesystem::exists(instruct, ec) && std::filesystem::exists(gemma_model(), ec))
        return gemma_model();
    return instruct;
}

std::filesystem::path gemma_model() {
    return models_dir() / kGemmaModelFile;
}

}  // namespace tokenscope::paths
