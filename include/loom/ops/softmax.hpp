#pragma once
/// @file ops/softmax.hpp
/// Softmax over rows (Lectures 9, 14).

#include <loom/export.hpp>
#include <loom/op.hpp>

namespace loom::ops {}  // namespace loom::ops
