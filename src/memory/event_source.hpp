#pragma once
// How a pool learns that a stream has finished with a block: it records a
// marker on the stream and later asks whether the marker has completed. The
// CUDA implementation uses pooled events; tests use a fake they control.

#include <cstdint>

namespace loom::detail {

/// Opaque identity of a stream (a cudaStream_t's bits); 0 is the host.
using StreamKey = std::uintptr_t;

class EventSource {
 public:
  using Marker = std::uintptr_t;
  virtual ~EventSource() = default;
  /// Records a marker after the work submitted to `stream` so far. @throws loom::Error.
  virtual Marker record(StreamKey stream) = 0;
  /// True once the work before the marker has completed. Never blocks.
  virtual bool completed(Marker marker) = 0;
  /// The pool is done with the marker.
  virtual void release(Marker marker) noexcept = 0;
  /// True when every piece of work submitted to `stream` so far has
  /// completed. Never blocks. (Lets a pool hand a stream's idle cached
  /// blocks to another stream instead of growing.)
  virtual bool stream_idle(StreamKey stream) = 0;
};

}  // namespace loom::detail
