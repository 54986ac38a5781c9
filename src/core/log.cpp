#include "core/log.hpp"

#include <loom/log.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <string>

namespace loom {
namespace {

constexpr LogLevel kDefaultLevel = LogLevel::warn;

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::trace: return spdlog::level::trace;
    case LogLevel::debug: return spdlog::level::debug;
    case LogLevel::info: return spdlog::level::info;
    case LogLevel::warn: return spdlog::level::warn;
    case LogLevel::error: return spdlog::level::err;
    case LogLevel::off: return spdlog::level::off;
  }
  return spdlog::level::warn;
}

LogLevel from_spdlog(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return LogLevel::trace;
    case spdlog::level::debug: return LogLevel::debug;
    case spdlog::level::info: return LogLevel::info;
    case spdlog::level::warn: return LogLevel::warn;
    case spdlog::level::err:
    case spdlog::level::critical: return LogLevel::error;
    default: return LogLevel::off;
  }
}

std::shared_ptr<spdlog::logger> make_logger() {
  // Not registered with spdlog's global registry: a program's own "loom"
  // logger, or its spdlog::set_level calls, must not collide with ours.
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("loom", std::move(sink));
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%^%l%$] [tid %t] %v");
  LogLevel level = kDefaultLevel;
  bool bad_value = false;
  std::string text;
  if (const char* env = std::getenv("LOOM_LOG_LEVEL"); env != nullptr && *env != '\0') {
    text = env;
    if (auto parsed = parse_log_level(text)) {
      level = *parsed;
    } else {
      bad_value = true;
    }
  }
  logger->set_level(to_spdlog(level));
  logger->flush_on(spdlog::level::warn);
  if (bad_value) {
    logger->warn("LOOM_LOG_LEVEL='{}' is not one of trace, debug, info, warn, error, off; using {}",
                 text, to_string(level));
  }
  return logger;
}

}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view text) noexcept {
  const auto is = [text](std::string_view name) {
    return std::equal(text.begin(), text.end(), name.begin(), name.end(), [](char a, char b) {
      return std::tolower(static_cast<unsigned char>(a)) == b;
    });
  };
  if (is("trace")) return LogLevel::trace;
  if (is("debug")) return LogLevel::debug;
  if (is("info")) return LogLevel::info;
  if (is("warn") || is("warning")) return LogLevel::warn;
  if (is("error")) return LogLevel::error;
  if (is("off")) return LogLevel::off;
  return std::nullopt;
}

std::string_view to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::trace: return "trace";
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
    case LogLevel::off: return "off";
  }
  return "unknown";
}

void set_log_level(LogLevel level) { detail::logger().set_level(to_spdlog(level)); }

LogLevel log_level() { return from_spdlog(detail::logger().level()); }

namespace detail {

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = make_logger();
  return *instance;
}

}  // namespace detail
}  // namespace loom
