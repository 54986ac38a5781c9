#pragma once
// loom's one logger. Internal: public code sets the level through
// loom/log.hpp and never sees spdlog.

#include <spdlog/spdlog.h>

namespace loom::detail {

/// The "loom" logger; created on first use with the level from LOOM_LOG_LEVEL.
spdlog::logger& logger();

}  // namespace loom::detail
