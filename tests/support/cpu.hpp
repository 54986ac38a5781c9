#pragma once
// Runtime options for the CPU backend, shared by the CPU test files.

#include <loom/runtime.hpp>

namespace loom::test {

/// The CPU backend with `workers` host workers (0: from the core count).
inline RuntimeOptions cpu(int workers = 0) {
  RuntimeOptions o;
  o.backend = Backend::cpu;
  o.workers = workers;
  return o;
}

}  // namespace loom::test
