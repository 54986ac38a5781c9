#pragma once
/// @file dtype.hpp
/// Element types of tensors. f16 and bf16 are stored as their 16-bit
/// patterns (loom::half, loom::bfloat16) so that public code needs no CUDA
/// header; i4 packs two signed 4-bit values a byte, low nibble first.

#include <cstdint>
#include <string_view>

namespace loom {

enum class DType : std::uint8_t { f32, f16, bf16, i8, u8, i32, i64, i4 };

/// IEEE half precision, as its bit pattern.
struct half {
  std::uint16_t bits;
};
/// bfloat16, as its bit pattern (the upper half of an f32).
struct bfloat16 {
  std::uint16_t bits;
};
/// Two signed 4-bit integers in one byte: element 2k in the low nibble.
struct int4x2 {
  std::uint8_t bits;
};

constexpr int bits_of(DType t) noexcept {
  switch (t) {
    case DType::f32: return 32;
    case DType::f16: return 16;
    case DType::bf16: return 16;
    case DType::i8: return 8;
    case DType::u8: return 8;
    case DType::i32: return 32;
    case DType::i64: return 64;
    case DType::i4: return 4;
  }
  return 0;
}

/// Bytes that `count` elements occupy (i4: rounded up to whole bytes).
constexpr std::uint64_t bytes_for(DType t, std::uint64_t count) noexcept {
  return (count * static_cast<std::uint64_t>(bits_of(t)) + 7) / 8;
}

constexpr std::string_view to_string(DType t) noexcept {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::i4: return "i4";
  }
  return "unknown";
}

/// The dtype of a C++ element type: dtype_of<float>() == DType::f32.
template <class T>
constexpr DType dtype_of() noexcept;
template <>
constexpr DType dtype_of<float>() noexcept {
  return DType::f32;
}
template <>
constexpr DType dtype_of<half>() noexcept {
  return DType::f16;
}
template <>
constexpr DType dtype_of<bfloat16>() noexcept {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<std::int8_t>() noexcept {
  return DType::i8;
}
template <>
constexpr DType dtype_of<std::uint8_t>() noexcept {
  return DType::u8;
}
template <>
constexpr DType dtype_of<std::int32_t>() noexcept {
  return DType::i32;
}
template <>
constexpr DType dtype_of<std::int64_t>() noexcept {
  return DType::i64;
}
template <>
constexpr DType dtype_of<int4x2>() noexcept {
  return DType::i4;
}

}  // namespace loom
