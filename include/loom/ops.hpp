#pragma once
/// @file ops.hpp
/// The built-in ops (each a kernel of the catalogue with its CPU reference).
/// Each returns an op to add to a graph; inputs are checked by validate(),
/// at submit, and a bad input is reported naming the task.

#include <loom/export.hpp>
#include <loom/op.hpp>
#include <loom/ops/attention.hpp>
#include <loom/ops/elementwise.hpp>
#include <loom/ops/gemm.hpp>
#include <loom/ops/image.hpp>
#include <loom/ops/index.hpp>
#include <loom/ops/loss.hpp>
#include <loom/ops/reduction.hpp>
#include <loom/ops/ring_attention.hpp>
#include <loom/ops/softmax.hpp>
