#include "comm/shared_device.hpp"

#include "comm/device_reduce.hpp"
#include "core/log.hpp"
#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <mutex>

namespace loom::detail {
namespace {

// A window is at most this large: larger collectives go a chunk at a time.
constexpr std::size_t kLargestWindow = std::size_t{64} << 20;
constexpr std::size_t kSmallestWindow = std::size_t{1} << 20;
constexpr int kMostDevices = 64;

std::size_t window_bytes_for(std::size_t bytes) {
  return std::clamp(std::bit_ceil(bytes), kSmallestWindow, kLargestWindow);
}

// For destructors: a CUDA call that fails because the runtime is already
// gone at exit is not worth a message.
void quietly(cudaError_t code, const char* call) noexcept {
  if (code != cudaSuccess && code != cudaErrorCudartUnloading) {
    report_cuda_error(code, call, __FILE__, __LINE__);
  }
}

unsigned char* bytes_of(const Tensor& t) { return static_cast<unsigned char*>(t.data()); }

// What each rank offers when the windows are made.
struct Offer {
  cudaIpcMemHandle_t handle;
  std::int32_t ok;
  std::int32_t padding;
};

}  // namespace

std::array<std::int64_t, 2> device_identity(const Tensor& t) {
  if (!t.memory().is_device()) return {0, 0};
  const int device = t.memory().device();
  if (device < 0 || device >= kMostDevices) return {0, 0};
  static std::mutex mutex;
  static std::array<std::array<std::int64_t, 2>, kMostDevices> known{};
  std::lock_guard lock(mutex);
  auto& id = known[static_cast<std::size_t>(device)];
  if (id[0] == 0 && id[1] == 0) {
    cudaDeviceProp props{};
    LOOM_CUDA_CHECK(cudaGetDeviceProperties(&props, device));
    static_assert(sizeof(props.uuid.bytes) == sizeof(id));
    std::memcpy(id.data(), props.uuid.bytes, sizeof(id));
    if (id[0] == 0 && id[1] == 0) id[1] = 1;  // never taken for host memory
  }
  return id;
}

SharedDeviceWindows::~SharedDeviceWindows() {
  // Other ranks may still map this rank's window, and the communicator's
  // end is not collective: the window stays allocated until the process
  // ends (freeing memory another process maps is undefined).
  kept_ = true;
  release();
}

void SharedDeviceWindows::close_mappings() noexcept {
  for (unsigned char*& window : windows_) {
    if (window != nullptr && window != own_) quietly(cudaIpcCloseMemHandle(window), "close window");
    window = nullptr;
  }
  windows_.clear();
}

void SharedDeviceWindows::release() noexcept {
  if (device_ < 0) return;
  int previous = 0;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                        cudaSetDevice(device_) == cudaSuccess;
  // Nothing of ours may still be reading a window when the mappings go.
  if (stream_ != nullptr) quietly(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  close_mappings();
  if (own_ != nullptr && !kept_) quietly(cudaFree(own_), "cudaFree(window)");
  own_ = nullptr;
  capacity_ = 0;
  if (stream_ != nullptr) quietly(cudaStreamDestroy(stream_), "cudaStreamDestroy");
  stream_ = nullptr;
  if (switched) quietly(cudaSetDevice(previous), "cudaSetDevice");
  device_ = -1;
}

bool SharedDeviceWindows::ready(RankExchange& ranks, int device,
                                const std::array<std::int64_t, 2>& identity, std::size_t bytes,
                                const std::string& what) {
  if (refused_) return false;
  if (identity == identity_ && device == device_ && window_bytes_for(bytes) <= capacity_) {
    return true;
  }
  // Every rank gets here in the same call: the ranks agreed on the spec and
  // the device, and their windows grew alike.
  if (own_ != nullptr) {
    // Freed only once no rank maps it any more (freeing memory that another
    // process still maps is undefined).
    close_mappings();
    ranks.barrier(what + " (windows closed)");
  }
  release();
  device_ = device;
  identity_ = identity;
  DeviceGuard guard(device);
  const std::size_t want = window_bytes_for(bytes);
  Offer mine{};
  std::string why;
  void* allocated = nullptr;
  if (const cudaError_t s = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
      s != cudaSuccess) {
    (void)cudaGetLastError();
    stream_ = nullptr;
    why = std::string("cudaStreamCreateWithFlags: ") + cudaGetErrorString(s);
  } else if (const cudaError_t e = cudaMalloc(&allocated, want); e != cudaSuccess) {
    (void)cudaGetLastError();
    why = std::string("cudaMalloc: ") + cudaGetErrorString(e);
  } else if (const cudaError_t f = cudaIpcGetMemHandle(&mine.handle, allocated); f != cudaSuccess) {
    (void)cudaGetLastError();
    why = std::string("cudaIpcGetMemHandle: ") + cudaGetErrorString(f);
  } else {
    mine.ok = 1;
  }
  own_ = static_cast<unsigned char*>(allocated);
  const int size = ranks.size();
  std::vector<Offer> offers(static_cast<std::size_t>(size));
  ranks.all_gather_bytes(&mine, offers.data(), sizeof(Offer), what + " (windows)");
  windows_.assign(static_cast<std::size_t>(size), nullptr);
  std::int32_t opened = 1;
  for (int r = 0; r < size; ++r) {
    const Offer& offer = offers[static_cast<std::size_t>(r)];
    if (offer.ok == 0) {
      opened = 0;
      if (why.empty()) why = "rank " + std::to_string(r) + " could not offer its window";
      continue;
    }
    if (r == ranks.rank()) {
      windows_[static_cast<std::size_t>(r)] = own_;
      continue;
    }
    void* mapped = nullptr;
    const cudaError_t e =
        cudaIpcOpenMemHandle(&mapped, offer.handle, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      opened = 0;
      if (why.empty()) why = std::string("cudaIpcOpenMemHandle: ") + cudaGetErrorString(e);
      continue;
    }
    windows_[static_cast<std::size_t>(r)] = static_cast<unsigned char*>(mapped);
  }
  std::vector<std::int32_t> everyone(static_cast<std::size_t>(size));
  ranks.all_gather_bytes(&opened, everyone.data(), sizeof(opened), what + " (windows)");
  const bool all_opened = std::ranges::all_of(everyone, [](std::int32_t o) { return o != 0; });
  if (!all_opened) {
    // Every rank refuses together, and from now on stages through host memory.
    for (int r = 0; r < size; ++r) {
      unsigned char* w = windows_[static_cast<std::size_t>(r)];
      if (w != nullptr && w != own_) quietly(cudaIpcCloseMemHandle(w), "close window");
    }
    windows_.clear();
    ranks.barrier(what + " (windows refused)");
    release();
    refused_ = true;
    logger().warn(
        "mpi communicator: the ranks share a GPU but cannot map each other's memory ({}); "
        "device tensors go through pinned host memory instead",
        why.empty() ? "another rank could not" : why);
    return false;
  }
  capacity_ = want;
  return true;
}

void SharedDeviceWindows::settle(RankExchange& ranks, const std::string& what) const {
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  ranks.barrier(what);
}

bool SharedDeviceWindows::run(RankExchange& ranks, const std::array<std::int64_t, 2>& identity,
                              const CollectiveSpec& spec, const Tensor& in, const Tensor& out,
                              const std::string& what) {
  const std::size_t bytes = std::max(in.nbytes(), out.nbytes());
  if (bytes == 0) return true;
  if (!ready(ranks, in.memory().device(), identity, bytes, what)) return false;
  DeviceGuard guard(device_);
  switch (spec.kind) {
    case CollectiveKind::all_reduce: all_reduce(ranks, spec, in, out, what); break;
    case CollectiveKind::reduce_scatter: reduce_scatter(ranks, spec, in, out, what); break;
    case CollectiveKind::all_gather: all_gather(ranks, spec, in, out, what); break;
    case CollectiveKind::broadcast: broadcast(ranks, spec, out, what); break;
    case CollectiveKind::ring_exchange: ring_exchange(ranks, spec, in, out, what); break;
  }
  return true;
}

// Each rank puts a chunk of its input in its window; then each rank combines
// every window, in rank order (every rank gets the same bits), into its output.
void SharedDeviceWindows::all_reduce(RankExchange& ranks, const CollectiveSpec& spec,
                                     const Tensor& in, const Tensor& out, const std::string& what) {
  const std::size_t e = element_bytes(spec.dtype);
  const auto n = static_cast<std::size_t>(spec.out_count);
  const std::size_t chunk = capacity_ / e;
  const std::vector<const void*> inputs(windows_.begin(), windows_.end());
  for (std::size_t first = 0; first < n; first += chunk) {
    const std::size_t len = std::min(chunk, n - first);
    LOOM_CUDA_CHECK(cudaMemcpyAsync(own_, bytes_of(in) + first * e, len * e,
                                    cudaMemcpyDeviceToDevice, stream_));
    settle(ranks, what);
    device_reduce(spec.dtype, spec.op, bytes_of(out) + first * e, inputs, 0,
                  static_cast<std::int64_t>(len), stream_);
    settle(ranks, what);
  }
}

// The window holds the same stretch of every rank's slice of the input, one
// after another; rank r combines the stretches of slice r.
void SharedDeviceWindows::reduce_scatter(RankExchange& ranks, const CollectiveSpec& spec,
                                         const Tensor& in, const Tensor& out,
                                         const std::string& what) {
  const std::size_t e = element_bytes(spec.dtype);
  const auto m = static_cast<std::size_t>(spec.out_count);
  const auto p = static_cast<std::size_t>(ranks.size());
  const auto r = static_cast<std::size_t>(ranks.rank());
  const std::size_t chunk = capacity_ / (p * e);
  for (std::size_t first = 0; first < m; first += chunk) {
    const std::size_t len = std::min(chunk, m - first);
    // A copy a slice (a 2-D copy's pitch is limited to a few GiB).
    for (std::size_t q = 0; q < p; ++q) {
      LOOM_CUDA_CHECK(cudaMemcpyAsync(own_ + q * len * e, bytes_of(in) + (q * m + first) * e,
                                      len * e, cudaMemcpyDeviceToDevice, stream_));
    }
    settle(ranks, what);
    std::vector<const void*> inputs;
    inputs.reserve(p);
    for (unsigned char* w : windows_) inputs.push_back(w + r * len * e);
    device_reduce(spec.dtype, spec.op, bytes_of(out) + first * e, inputs, 0,
                  static_cast<std::int64_t>(len), stream_);
    settle(ranks, what);
  }
}

void SharedDeviceWindows::all_gather(RankExchange& ranks, const CollectiveSpec& spec,
                                     const Tensor& in, const Tensor& out, const std::string& what) {
  const std::size_t e = element_bytes(spec.dtype);
  const auto m = static_cast<std::size_t>(spec.in_count);
  const std::size_t chunk = capacity_ / e;
  for (std::size_t first = 0; first < m; first += chunk) {
    const std::size_t len = std::min(chunk, m - first);
    LOOM_CUDA_CHECK(cudaMemcpyAsync(own_, bytes_of(in) + first * e, len * e,
                                    cudaMemcpyDeviceToDevice, stream_));
    settle(ranks, what);
    for (std::size_t q = 0; q < windows_.size(); ++q) {
      LOOM_CUDA_CHECK(cudaMemcpyAsync(bytes_of(out) + (q * m + first) * e, windows_[q], len * e,
                                      cudaMemcpyDeviceToDevice, stream_));
    }
    settle(ranks, what);
  }
}

void SharedDeviceWindows::broadcast(RankExchange& ranks, const CollectiveSpec& spec,
                                    const Tensor& data, const std::string& what) {
  const std::size_t e = element_bytes(spec.dtype);
  const auto n = static_cast<std::size_t>(spec.out_count);
  const std::size_t chunk = capacity_ / e;
  const bool root = ranks.rank() == spec.root;
  for (std::size_t first = 0; first < n; first += chunk) {
    const std::size_t len = std::min(chunk, n - first);
    if (root) {
      LOOM_CUDA_CHECK(cudaMemcpyAsync(own_, bytes_of(data) + first * e, len * e,
                                      cudaMemcpyDeviceToDevice, stream_));
    }
    settle(ranks, what);
    if (!root) {
      LOOM_CUDA_CHECK(cudaMemcpyAsync(bytes_of(data) + first * e,
                                      windows_[static_cast<std::size_t>(spec.root)], len * e,
                                      cudaMemcpyDeviceToDevice, stream_));
    }
    settle(ranks, what);
  }
}

void SharedDeviceWindows::ring_exchange(RankExchange& ranks, const CollectiveSpec& spec,
                                        const Tensor& in, const Tensor& out,
                                        const std::string& what) {
  const std::size_t e = element_bytes(spec.dtype);
  const auto n = static_cast<std::size_t>(spec.out_count);
  const std::size_t chunk = capacity_ / e;
  const auto previous = static_cast<std::size_t>((ranks.rank() + ranks.size() - 1) % ranks.size());
  for (std::size_t first = 0; first < n; first += chunk) {
    const std::size_t len = std::min(chunk, n - first);
    LOOM_CUDA_CHECK(cudaMemcpyAsync(own_, bytes_of(in) + first * e, len * e,
                                    cudaMemcpyDeviceToDevice, stream_));
    settle(ranks, what);
    LOOM_CUDA_CHECK(cudaMemcpyAsync(bytes_of(out) + first * e, windows_[previous], len * e,
                                    cudaMemcpyDeviceToDevice, stream_));
    settle(ranks, what);
  }
}

}  // namespace loom::detail
