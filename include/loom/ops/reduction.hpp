#pragma once
/// @file ops/reduction.hpp
/// Reductions: sum, max, min, whole tensors and rows (Lecture 9).

#include <loom/export.hpp>
#include <loom/op.hpp>

namespace loom::ops {}  // namespace loom::ops
