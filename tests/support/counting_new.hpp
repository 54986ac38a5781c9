#pragma once
// Every allocation through operator new of a test program that links
// support/counting_new.cpp is counted, so that a test can read the count
// around steady-state work (the others ignore it). Not under
// AddressSanitizer: it replaces every form of operator new itself (the
// nothrow and array forms too), and memory from one of its forms freed
// through these would be reported as a mismatch; such a test skips there.

namespace loom::test {

/// Whether this build counts allocations (false under AddressSanitizer).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kCountsAllocations = false;
#else
inline constexpr bool kCountsAllocations = true;
#endif

/// Allocations through operator new so far, on every thread.
long long allocations() noexcept;

}  // namespace loom::test
