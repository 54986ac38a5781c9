#pragma once
/// @file collective.hpp
/// The interface of a collective (all-reduce, all-gather, ...) as a graph
/// task. Communicators implement it; a collective runs on a communication
/// stream in one order per communicator, so that collectives overlap compute.

#include <loom/export.hpp>
#include <loom/op.hpp>

namespace loom {

class LOOM_API Collective {
 public:
  virtual ~Collective() = default;
  virtual std::string_view name() const noexcept = 0;
  virtual std::vector<Tensor> reads() const = 0;
  virtual std::vector<Tensor> writes() const = 0;
  /// @throws InvalidArgument.
  virtual void validate() const = 0;
  /// Identifies the communicator: collectives of one communicator are issued
  /// in submission order on one stream.
  virtual const void* communicator() const noexcept = 0;
  /// Enqueues the collective on ctx's stream (CUDA backend).
  virtual void run_cuda(const ExecutionContext& ctx) const = 0;
  /// Runs the collective on the host (CPU backend, host-staged fallback).
  virtual void run_cpu() const = 0;
};

using CollectivePtr = std::shared_ptr<const Collective>;

}  // namespace loom
