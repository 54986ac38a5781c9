#pragma once
// A test and benchmark stand-in, not part of the ops catalogue: an op that
// busy-waits for a known time on the device (sleeps on the CPU backend),
// then adds 1 to the first element of the f32 tensor t. For scheduling tests
// and benchmarks that need a kernel of known duration.

#include <loom/op.hpp>
#include <loom/tensor.hpp>

#include <cstdint>

namespace loom::testing {

/// @throws nothing; a bad t or a negative duration is rejected at submit.
OpPtr spin(const Tensor& t, std::int64_t microseconds);

}  // namespace loom::testing
