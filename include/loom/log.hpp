#pragma once
/// @file log.hpp
/// loom logs through one named spdlog logger, "loom", to standard error.
/// The level comes from the environment variable LOOM_LOG_LEVEL (trace,
/// debug, info, warn, error, off; default warn) the first time loom logs,
/// and can be changed at any time. Hot paths log at debug level or below.

#include <loom/export.hpp>

#include <optional>
#include <string_view>

namespace loom {

enum class LogLevel { trace, debug, info, warn, error, off };

/// Parses "trace", "debug", "info", "warn" (or "warning"), "error", "off"
/// (case-insensitive). Returns nullopt for anything else. Thread-safe.
LOOM_API std::optional<LogLevel> parse_log_level(std::string_view text) noexcept;

/// The name of a level, as parse_log_level accepts it.
LOOM_API std::string_view to_string(LogLevel level) noexcept;

/// Sets the level of loom's logger. Thread-safe.
LOOM_API void set_log_level(LogLevel level);

/// The current level of loom's logger. Thread-safe.
LOOM_API LogLevel log_level();

}  // namespace loom
