#pragma once
// Whether the current device runs a kernel built for sm_90a (wgmma, TMA,
// setmaxnreg), read once a device (the first 64) and remembered in one
// word: automatic dispatch asks on every launch, so after a device's first
// ask it neither allocates nor queries the driver.
#include "common/check.hpp"

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace loom::kernels {

/// loom's sm_90a kernels take well over 128 registers a thread; the plain
/// sm_90 image beside each in the fatbinary, a stub that traps, far fewer.
/// Should the driver ever load the stub on a 9.0 device, the kernel is
/// refused instead of trapping.
inline constexpr int kSm90aImageMinRegisters = 128;

/// What the current device is to one sm_90a kernel.
struct Sm90aDevice {
  int major = 0;
  int minor = 0;
  int multiprocessors = 0;
  int image_registers = 0;  ///< a thread of the loaded image (read on 9.0 devices only)

  [[nodiscard]] bool runs() const noexcept {
    return major == 9 && minor == 0 && image_registers >= kSm90aImageMinRegisters;
  }

  /// Why the kernel cannot run here ("" where it runs). Allocates: call it
  /// only to report a refusal.
  [[nodiscard]] std::string refusal() const {
    if (major != 9 || minor != 0) {
      return "it needs a device of compute capability 9.0 (H100/H200), this one is " +
             std::to_string(major) + "." + std::to_string(minor);
    }
    if (image_registers < kSm90aImageMinRegisters) {
      return "the driver loaded the kernel's plain sm_90 image (" +
             std::to_string(image_registers) +
             " registers a thread), not its sm_90a one: rebuild with "
             "CMAKE_CUDA_ARCHITECTURES=90a";
    }
    return {};
  }
};

/// One a kernel: `image_registers` reads the registers a thread of the
/// kernel's loaded image takes (0 where the sm_90a image was not built).
class Sm90aDeviceCache {
 public:
  using ImageRegisters = int (*)();

  explicit Sm90aDeviceCache(ImageRegisters image_registers) noexcept
      : image_registers_(image_registers) {}

  Sm90aDevice current() {
    int device = 0;
    LOOM_KERNEL_CHECK(cudaGetDevice(&device));
    const bool cached = device >= 0 && device < static_cast<int>(cache_.size());
    if (cached) {
      const std::uint64_t packed =
          cache_[static_cast<std::size_t>(device)].load(std::memory_order_acquire);
      if ((packed & kFilled) != 0) return unpack(packed);
    }
    Sm90aDevice info;
    LOOM_KERNEL_CHECK(
        cudaDeviceGetAttribute(&info.major, cudaDevAttrComputeCapabilityMajor, device));
    LOOM_KERNEL_CHECK(
        cudaDeviceGetAttribute(&info.minor, cudaDevAttrComputeCapabilityMinor, device));
    LOOM_KERNEL_CHECK(
        cudaDeviceGetAttribute(&info.multiprocessors, cudaDevAttrMultiProcessorCount, device));
    if (info.major == 9 && info.minor == 0) info.image_registers = image_registers_();
    if (cached)
      cache_[static_cast<std::size_t>(device)].store(pack(info), std::memory_order_release);
    return info;
  }

 private:
  // registers << 48 | major << 40 | minor << 32 | multiprocessors, and a
  // bit that says the entry is filled.
  static constexpr std::uint64_t kFilled = std::uint64_t{1} << 63;

  static std::uint64_t pack(const Sm90aDevice& d) noexcept {
    return kFilled | static_cast<std::uint64_t>(d.image_registers & 0xFF) << 48 |
           static_cast<std::uint64_t>(d.major & 0xFF) << 40 |
           static_cast<std::uint64_t>(d.minor & 0xFF) << 32 |
           static_cast<std::uint32_t>(d.multiprocessors);
  }

  static Sm90aDevice unpack(std::uint64_t v) noexcept {
    return {static_cast<int>((v >> 40) & 0xFF), static_cast<int>((v >> 32) & 0xFF),
            static_cast<int>(v & 0xFFFFFFFFU), static_cast<int>((v >> 48) & 0xFF)};
  }

  ImageRegisters image_registers_;
  std::array<std::atomic<std::uint64_t>, 64> cache_{};
};

}  // namespace loom::kernels
