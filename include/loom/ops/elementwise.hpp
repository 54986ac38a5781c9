#pragma once
/// @file ops/elementwise.hpp
/// Elementwise maps and their fusion (Lectures 2, 8).

#include <loom/export.hpp>
#include <loom/op.hpp>

namespace loom::ops {}  // namespace loom::ops
