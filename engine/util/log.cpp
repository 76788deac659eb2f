#include "util/log.h"

#include <cstdlib>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "util/error.h"

namespace tokenscope::log {

std::optional<spdlog::level::level_enum> parse_level(const std::string& text) {
    static const std::pair<const char*, spdlog::level::level_enum> kLevels[] = {
        {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},
        {"info", spdlog::level::info},   {"warn", spdlog::level::warn},
        {"error", spdlog::level::err},   {"critical", spdlog::level::critical},
        {"off", spdlog::level::off},
    };
    for (const auto& [name, level] : kLevels) {
        if (text == name) return level;
    }
    return std::nullopt;
}

void configure(const std::optional<std::string>& level_text, spdlog::level::level_enum fallback) {
    std::optional<std::string> chosen = level_text;
    const char* source = "--log-level";
    if (!chosen) {
        if (const char* env = std::getenv("TOKENSCOPE_LOG"); env && *env) {
            chosen = env;
            source = "TOKENSCOPE_LOG";
        }
    }
    spdlog::level::level_enum level = fallback;
    if (chosen) {
        auto parsed = parse_level(*chosen);
        if (!parsed) {
            throw InvalidArgument(std::string(source) + ": unknown log level '" + *chosen +
                                  "' (expected trace, debug, info, warn, error, critical or off)");
        }
        level = *parsed;
    }
    static bool configured = false;
    if (!configured) {
        auto logger = spdlog::stderr_color_mt("tokenscope");
        logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
        spdlog::set_default_logger(logger);
        configured = true;
    }
    spdlog::set_level(level);
}

}  // namespace tokenscope::log
