#pragma once
// What the image family's tests share: byte images and random ones.

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace loom::test::image {

using Bytes = std::vector<std::uint8_t>;

/// n uniformly random bytes.
inline Bytes random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> dist(0, 255);
  Bytes v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(dist(rng));
  return v;
}

}  // namespace loom::test::image
