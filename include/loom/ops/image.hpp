#pragma once
/// @file ops/image.hpp
/// Image ops: RGB to gray, box blur (Lectures 2, 3).

#include <loom/export.hpp>
#include <loom/op.hpp>

namespace loom::ops {}  // namespace loom::ops
