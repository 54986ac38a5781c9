#pragma once
/// @file variant.hpp
/// How an op with several kernels is told which one to run: every family has
/// one enum, `automatic` first (the fastest for the shape, and the default),
/// then its kernels in the order the lecture teaches them. One table a
/// family names them (VariantNames), and serves printing, parsing and the
/// messages that list them alike.
///
/// @code
///   g.add(loom::ops::box_blur(src, dst, 3, loom::ops::BlurVariant::naive));
///   auto v = loom::ops::parse_variant<loom::ops::BlurVariant>("tiled");  // from a flag
///   std::puts(to_string(*v).data());  // "tiled"
/// @endcode

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace loom::ops {

/// Each family specializes it: `names[i]` is the name of the enum's value i.
template <class Variant>
struct VariantNames;

/// Whether `v` is one of its family's values (not a cast of another number).
template <class Variant>
constexpr bool is_known(Variant v) noexcept {
  return static_cast<std::size_t>(v) < VariantNames<Variant>::names.size();
}

/// The variant's name; "unknown" for a value outside the family.
template <class Variant>
requires requires { VariantNames<Variant>::names; }
constexpr std::string_view to_string(Variant v) noexcept {
  return is_known(v) ? VariantNames<Variant>::names[static_cast<std::size_t>(v)]
                     : std::string_view("unknown");
}

/// The variant of that name; nullopt for any other name.
template <class Variant>
constexpr std::optional<Variant> parse_variant(std::string_view name) noexcept {
  const auto& names = VariantNames<Variant>::names;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<Variant>(i);
  }
  return std::nullopt;
}

/// Every name of the family, comma-separated, for messages.
template <class Variant>
std::string variant_list() {
  std::string out;
  for (const auto name : VariantNames<Variant>::names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace loom::ops
