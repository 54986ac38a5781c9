#pragma once
/// @file device.hpp
/// Discovery of CUDA devices and their properties, read from the hardware.
/// Nothing here needs a GPU to be called: on a machine without a driver or
/// without a device, cuda_availability() says why and device_count() is 0.

#include <loom/export.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace loom {

/// Whether CUDA can be used in this process, and if not, why.
struct CudaAvailability {
  bool available = false;
  int device_count = 0;
  int driver_version = 0;   ///< e.g. 13000 for CUDA 13.0; 0 when no driver
  int runtime_version = 0;  ///< the CUDA runtime loom was built against
  std::string reason;       ///< why CUDA is unavailable; empty when available
};

/// Properties of one CUDA device, as the hardware reports them.
struct DeviceProperties {
  int index = 0;
  std::string name;
  std::string pci_bus_id;  ///< "0000:19:00.0"
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int sm_count = 0;
  std::size_t total_memory = 0;  ///< bytes of device memory
  std::size_t free_memory = 0;   ///< bytes free when the properties were read
  std::size_t l2_cache_bytes = 0;
  std::size_t shared_memory_per_block_optin = 0;  ///< the most a block may ask for
  std::size_t shared_memory_per_sm = 0;
  int max_threads_per_block = 0;
  int warp_size = 0;
  int memory_bus_width_bits = 0;
  int clock_khz = 0;
  int memory_clock_khz = 0;
  int stream_priority_least = 0;     ///< numerically largest stream priority (lowest)
  int stream_priority_greatest = 0;  ///< numerically smallest stream priority (highest)
  bool concurrent_kernels = false;
  bool unified_addressing = false;

  /// Peak DRAM bandwidth from the memory clock and bus width, bytes/s.
  double peak_memory_bandwidth() const noexcept {
    return 2.0 * static_cast<double>(memory_clock_khz) * 1e3 * memory_bus_width_bits / 8.0;
  }
};

/// Probes the CUDA driver and devices once per process and caches the result.
/// Never throws. Thread-safe.
LOOM_API const CudaAvailability& cuda_availability() noexcept;

/// Number of CUDA devices; 0 where CUDA is unavailable. Never throws. Thread-safe.
LOOM_API int device_count() noexcept;

/// Properties of device `index`, read from the hardware on each call.
/// @throws NoDevice when CUDA is unavailable (says whether the driver or the
///         device is missing) or `index` is out of range; CudaError otherwise.
/// Thread-safe.
LOOM_API DeviceProperties device_properties(int index);

/// Properties of every device; empty where CUDA is unavailable. Thread-safe.
LOOM_API std::vector<DeviceProperties> devices();

/// can_access[i][j] is true when device i can read and write device j's
/// memory directly (peer-to-peer). The diagonal is true. Thread-safe.
/// @throws CudaError if a query fails.
LOOM_API std::vector<std::vector<bool>> peer_access_matrix();

/// A human-readable report: versions, each device's properties, the P2P
/// matrix; or why CUDA is unavailable. Never throws. Thread-safe.
LOOM_API std::string device_report();

}  // namespace loom
