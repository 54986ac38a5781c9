#pragma once
/// @file collective.hpp
/// A collective (all-reduce, all-gather, ...) is an op (op.hpp) that belongs
/// to a communicator: communicators implement it. Its task reads and writes
/// tensors like any other; it runs on the communication stream, in the order
/// collectives were submitted, so that collectives overlap compute.

#include <loom/export.hpp>
#include <loom/op.hpp>

#include <memory>

namespace loom {

class LOOM_API Collective : public Op {
 public:
  /// Identifies the communicator (never null): its collectives are issued in
  /// submission order on one stream.
  const void* communicator() const noexcept override = 0;
};

using CollectivePtr = std::shared_ptr<const Collective>;

}  // namespace loom
