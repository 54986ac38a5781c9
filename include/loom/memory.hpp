#pragma once
/// @file memory.hpp
/// Memory spaces: pageable host memory, pinned (page-locked) host memory,
/// and the memory of device N. A tensor knows its space, and a copy picks its
/// path from the two spaces it joins.

#include <string>

namespace loom {

class Memory {
 public:
  enum class Kind : unsigned char { pageable, pinned, device };

  static const Memory pageable;  ///< ordinary host memory (malloc, std::vector)
  static const Memory pinned;    ///< page-locked host memory: direct DMA to and from GPUs
  /// Memory of CUDA device `index`.
  static constexpr Memory on_device(int index) noexcept { return Memory(Kind::device, index); }

  constexpr Kind kind() const noexcept { return kind_; }
  /// The device index; -1 for host memory.
  constexpr int device() const noexcept { return device_; }
  constexpr bool is_host() const noexcept { return kind_ != Kind::device; }
  constexpr bool is_device() const noexcept { return kind_ == Kind::device; }
  friend constexpr bool operator==(Memory a, Memory b) noexcept {
    return a.kind_ == b.kind_ && a.device_ == b.device_;
  }

  /// "pageable host", "pinned host", "device 0".
  std::string to_string() const {
    switch (kind_) {
      case Kind::pageable: return "pageable host";
      case Kind::pinned: return "pinned host";
      case Kind::device: return "device " + std::to_string(device_);
    }
    return "unknown";
  }

 private:
  constexpr Memory(Kind kind, int device) noexcept : kind_(kind), device_(device) {}
  Kind kind_;
  int device_;
};

inline constexpr Memory Memory::pageable{Memory::Kind::pageable, -1};
inline constexpr Memory Memory::pinned{Memory::Kind::pinned, -1};

}  // namespace loom
