#pragma once
// Collectives between processes whose tensors are all on one GPU (ranks of
// the mpi backend that share a device: NCCL refuses two ranks on one GPU).
// Each rank exposes a window of device memory that every other rank maps
// (CUDA IPC); a collective moves its data through the windows a chunk at a
// time, with two barriers a chunk, at device speed instead of through host
// memory and MPI.

#include "comm/collective_spec.hpp"

#include <loom/tensor.hpp>

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::detail {

/// What the windows need from the processes' communicator. Every call is
/// collective and fails (CommError) in bounded time when a rank is missing.
class RankExchange {
 public:
  virtual ~RankExchange() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  /// Every rank's `bytes` bytes, in rank order, into `all`.
  virtual void all_gather_bytes(const void* mine, void* all, std::size_t bytes,
                                const std::string& what) = 0;
  virtual void barrier(const std::string& what) = 0;
};

/// A device's identity across processes (its UUID), as two words; zeros for
/// host memory.
std::array<std::int64_t, 2> device_identity(const Tensor& t);

/// Every rank's window on one GPU, mapped by every rank.
class SharedDeviceWindows {
 public:
  SharedDeviceWindows() = default;
  SharedDeviceWindows(const SharedDeviceWindows&) = delete;
  SharedDeviceWindows& operator=(const SharedDeviceWindows&) = delete;
  ~SharedDeviceWindows();

  /// Runs a collective through the windows, all ranks' tensors being on the
  /// device of `identity`. Returns false, having moved nothing, when the
  /// windows cannot be set up (CUDA IPC refused, memory short): every rank
  /// then returns false, now and for every later call, and the caller
  /// moves the data another way. Collective. @throws CommError, CudaError.
  bool run(RankExchange& ranks, const std::array<std::int64_t, 2>& identity,
           const CollectiveSpec& spec, const Tensor& in, const Tensor& out,
           const std::string& what);

 private:
  bool ready(RankExchange& ranks, int device, const std::array<std::int64_t, 2>& identity,
             std::size_t bytes, const std::string& what);
  void close_mappings() noexcept;
  void release() noexcept;
  void settle(RankExchange& ranks, const std::string& what) const;

  void all_reduce(RankExchange& ranks, const CollectiveSpec& spec, const Tensor& in,
                  const Tensor& out, const std::string& what);
  void reduce_scatter(RankExchange& ranks, const CollectiveSpec& spec, const Tensor& in,
                      const Tensor& out, const std::string& what);
  void all_gather(RankExchange& ranks, const CollectiveSpec& spec, const Tensor& in,
                  const Tensor& out, const std::string& what);
  void broadcast(RankExchange& ranks, const CollectiveSpec& spec, const Tensor& data,
                 const std::string& what);
  void ring_exchange(RankExchange& ranks, const CollectiveSpec& spec, const Tensor& in,
                     const Tensor& out, const std::string& what);

  bool refused_ = false;
  bool kept_ = false;
  int device_ = -1;
  std::array<std::int64_t, 2> identity_{};
  std::size_t capacity_ = 0;
  unsigned char* own_ = nullptr;
  std::vector<unsigned char*> windows_;  // every rank's, own_ among them
  cudaStream_t stream_ = nullptr;
};

}  // namespace loom::detail
