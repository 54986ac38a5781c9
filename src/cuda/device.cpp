#include <loom/device.hpp>
#include <loom/error.hpp>
#include <loom/version.hpp>

#include "core/log.hpp"
#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"

#include <nccl.h>

#include <spdlog/fmt/fmt.h>

#include <string>

namespace loom {
namespace {

std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

CudaAvailability probe() noexcept {
  CudaAvailability a;
  (void)cudaRuntimeGetVersion(&a.runtime_version);
  (void)cudaDriverGetVersion(&a.driver_version);
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  if (rc == cudaSuccess && count > 0) {
    a.available = true;
    a.device_count = count;
  } else if (a.driver_version == 0) {
    a.reason = "no CUDA driver is installed (the driver library could not be loaded)";
  } else if (rc == cudaErrorInsufficientDriver || a.driver_version < a.runtime_version) {
    a.reason = "the CUDA driver supports CUDA " + cuda_version_text(a.driver_version) +
               " but loom was built with CUDA " + cuda_version_text(a.runtime_version);
  } else if (rc == cudaErrorNoDevice || (rc == cudaSuccess && count == 0)) {
    a.reason = "the CUDA driver " + cuda_version_text(a.driver_version) +
               " is present but reports no CUDA device";
  } else {
    a.reason = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(rc) + " (" +
               cudaGetErrorString(rc) + ")";
  }
  try {
    if (a.available) {
      detail::logger().debug("CUDA available: {} device(s), driver {}, runtime {}", count,
                             cuda_version_text(a.driver_version),
                             cuda_version_text(a.runtime_version));
    } else {
      detail::logger().debug("CUDA unavailable: {}", a.reason);
    }
  } catch (...) {
  }
  return a;
}

NoDevice::Reason reason_of(const CudaAvailability& a) {
  if (a.driver_version == 0) return NoDevice::Reason::no_driver;
  if (a.driver_version < a.runtime_version) return NoDevice::Reason::driver_too_old;
  return NoDevice::Reason::no_device;
}

int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}

}  // namespace

const CudaAvailability& cuda_availability() noexcept {
  static const CudaAvailability availability = probe();
  return availability;
}

int device_count() noexcept { return cuda_availability().device_count; }

DeviceProperties device_properties(int index) {
  const auto& a = cuda_availability();
  if (!a.available) throw NoDevice(reason_of(a), "CUDA is unavailable: " + a.reason);
  if (index < 0 || index >= a.device_count) {
    throw NoDevice(NoDevice::Reason::device_out_of_range,
                   "device " + std::to_string(index) + " was asked for, but there are " +
                       std::to_string(a.device_count) + " CUDA device(s) (0.." +
                       std::to_string(a.device_count - 1) + ")");
  }
  cudaDeviceProp prop{};
  LOOM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceProperties p;
  p.index = index;
  p.name = prop.name;
  char bus_id[32] = {};
  LOOM_CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, index));
  p.pci_bus_id = bus_id;
  p.compute_capability_major = prop.major;
  p.compute_capability_minor = prop.minor;
  p.sm_count = prop.multiProcessorCount;
  p.total_memory = prop.totalGlobalMem;
  p.l2_cache_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  p.shared_memory_per_block_optin = prop.sharedMemPerBlockOptin;
  p.shared_memory_per_sm = prop.sharedMemPerMultiprocessor;
  p.max_threads_per_block = prop.maxThreadsPerBlock;
  p.warp_size = prop.warpSize;
  p.memory_bus_width_bits = prop.memoryBusWidth;
  p.concurrent_kernels = prop.concurrentKernels != 0;
  p.unified_addressing = prop.unifiedAddressing != 0;
  // CUDA 13 dropped the clock fields from cudaDeviceProp; the attributes remain.
  p.clock_khz = attribute(cudaDevAttrClockRate, index);
  p.memory_clock_khz = attribute(cudaDevAttrMemoryClockRate, index);
  {
    detail::DeviceGuard guard(index);
    LOOM_CUDA_CHECK(
        cudaDeviceGetStreamPriorityRange(&p.stream_priority_least, &p.stream_priority_greatest));
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    LOOM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    p.free_memory = free_bytes;
  }
  return p;
}

std::vector<DeviceProperties> devices() {
  std::vector<DeviceProperties> all;
  for (int i = 0; i < device_count(); ++i) all.push_back(device_properties(i));
  return all;
}

std::vector<std::vector<bool>> peer_access_matrix() {
  const int n = device_count();
  std::vector<std::vector<bool>> can(static_cast<std::size_t>(n),
                                     std::vector<bool>(static_cast<std::size_t>(n), false));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      int ok = 1;
      if (i != j) LOOM_CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, i, j));
      can[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = ok != 0;
    }
  }
  return can;
}

std::string device_report() {
  try {
    const auto& a = cuda_availability();
    int nccl = 0;
    const bool have_nccl = ncclGetVersion(&nccl) == ncclSuccess;
    std::string out = fmt::format(
        "loom {}\nCUDA runtime {}, driver {}, NCCL {}\n", version(),
        cuda_version_text(a.runtime_version),
        a.driver_version == 0 ? std::string("none") : cuda_version_text(a.driver_version),
        have_nccl ? fmt::format("{}.{}.{}", nccl / 10000, (nccl / 100) % 100, nccl % 100)
                  : std::string("unknown"));
    if (!a.available) {
      out += "CUDA unavailable: " + a.reason + "\n";
      return out;
    }
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    constexpr double kMiB = 1024.0 * 1024.0;
    for (const auto& p : devices()) {
      out += fmt::format(
          "device {}: {} (sm_{}{}), {} SMs, {:.1f} GiB ({:.1f} GiB free), L2 {:.0f} MiB, "
          "smem/block {} KiB, clock {} MHz, bus {} bit at {} MHz ({:.0f} GB/s peak), PCI {}\n",
          p.index, p.name, p.compute_capability_major, p.compute_capability_minor, p.sm_count,
          static_cast<double>(p.total_memory) / kGiB, static_cast<double>(p.free_memory) / kGiB,
          static_cast<double>(p.l2_cache_bytes) / kMiB, p.shared_memory_per_block_optin / 1024,
          p.clock_khz / 1000, p.memory_bus_width_bits, p.memory_clock_khz / 1000,
          p.peak_memory_bandwidth() / 1e9, p.pci_bus_id);
    }
    const auto p2p = peer_access_matrix();
    if (p2p.size() > 1) {
      out += "peer access (row can access column):\n";
      for (std::size_t i = 0; i < p2p.size(); ++i) {
        out += fmt::format("  {}:", i);
        for (bool ok : p2p[i]) out += ok ? " Y" : " .";
        out += "\n";
      }
    }
    return out;
  } catch (const std::exception& e) {
    return std::string("device report failed: ") + e.what() + "\n";
  }
}

}  // namespace loom
