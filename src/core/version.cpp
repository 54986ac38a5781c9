#include <loom/version.hpp>

#ifndef LOOM_VERSION_STRING
#error "LOOM_VERSION_STRING must come from the build"
#endif

namespace loom {

std::string_view version() noexcept { return LOOM_VERSION_STRING; }

}  // namespace loom
