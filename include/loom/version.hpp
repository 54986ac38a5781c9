#pragma once
/// @file version.hpp
/// loom's version, as compiled into the headers and as built into libloom.so.

#include <loom/export.hpp>

#include <string_view>

namespace loom {

inline constexpr int kVersionMajor = 0;
inline constexpr int kVersionMinor = 1;
inline constexpr int kVersionPatch = 0;

/// The version of the library that is loaded, "major.minor.patch". A
/// mismatch with the header constants means headers and library differ.
LOOM_API std::string_view version() noexcept;

}  // namespace loom
