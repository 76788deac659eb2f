#pragma once
// spdlog is configured once per process. The engine logs to stderr only, never stdout,
// so that the CLI's stdout stays machine-readable.
#include <optional>
#include <string>

#include <spdlog/spdlog.h>

namespace tokenscope::log {

// Parses "trace|debug|info|warn|error|critical|off"; nullopt for anything else.
std::optional<spdlog::level::level_enum> parse_level(const std::string& text);

// Sets up the stderr logger. The level comes from `level_text` when given, else from the
// TOKENSCOPE_LOG environment variable, else `fallback`. Throws InvalidArgument for an
// unknown level name. Calling it again only changes the level.
void configure(const std::optional<std::string>& level_text,
               spdlog::level::level_enum fallback = spdlog::level::warn);

}  // namespace tokenscope::log
