#pragma once
/// @file ops/gemm.hpp
/// Matrix multiplication: SGEMM fp32 (Lectures 5, 8, 15).

#include <loom/export.hpp>
#include <loom/op.hpp>

namespace loom::ops {}  // namespace loom::ops
