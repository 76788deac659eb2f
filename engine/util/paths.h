#pragma once
// Where tokenscope keeps user data, following the XDG base directory spec on Linux.
#include <filesystem>

namespace tokenscope::paths {

inline constexpr const char* kDefaultModelFile = "gemma-3-270m-q4_k_m.gguf";

// $XDG_DATA_HOME/tokenscope (default ~/.local/share/tokenscope).
std::filesystem::path data_dir();
// $TOKENSCOPE_MODELS when set, else data_dir()/models.
std::filesystem::path models_dir();
// models_dir()/gemma-3-270m-q4_k_m.gguf (whether or not it exists).
std::filesystem::path default_model();

}  // namespace tokenscope::paths
