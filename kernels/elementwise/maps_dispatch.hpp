#pragma once
// From (map, input dtype, output dtype) at run time to the one instantiation
// that serves it, shared by the kernels (maps.cu) and the CPU references
// (reference.cpp). Only the combinations map_supports() lists are ever
// instantiated: 5 maps x 3 dtypes + 9 casts, and the unary maths, the binary
// maths and where x 3 dtypes (one functor each, the map an argument): 33 per form.

#include <loom/dtype.hpp>
#include <loom/error.hpp>

#include "elementwise/functors.hpp"
#include "elementwise/maps.hpp"

#include <string>
#include <type_traits>

namespace loom::kernels::detail {

template <DType D>
using DTypeTag = std::integral_constant<DType, D>;

[[noreturn]] inline void reject_combination(MapKind kind, DType in, DType out) {
  throw InvalidArgument("elementwise " + std::string(to_string(kind)) + ": no kernel for " +
                        std::string(loom::to_string(in)) + " -> " +
                        std::string(loom::to_string(out)) +
                        " (every map but cast takes one dtype of f32, f16, bf16 for every "
                        "operand; cast takes any pair of them)");
}

/// Calls fn(DTypeTag<d>) for d one of f32, f16, bf16.
template <class Fn>
void visit_float_dtype(DType d, Fn&& fn) {
  switch (d) {
    case DType::f32: fn(DTypeTag<DType::f32>{}); return;
    case DType::f16: fn(DTypeTag<DType::f16>{}); return;
    case DType::bf16: fn(DTypeTag<DType::bf16>{}); return;
    default: break;
  }
}

/// Calls fn(functor, in tag, out tag) for a supported combination;
/// @throws InvalidArgument for any other.
template <class Fn>
void visit_map(MapKind kind, DType in, DType out, MapScalars scalars, Fn&& fn) {
  if (!map_supports(kind, in, out)) reject_combination(kind, in, out);
  const auto same = [&](auto f) { visit_float_dtype(in, [&](auto tag) { fn(f, tag, tag); }); };
  switch (kind) {
    case MapKind::add: same(map_fn::Add{}); return;
    case MapKind::mul: same(map_fn::Mul{}); return;
    case MapKind::axpby: same(map_fn::Axpby{scalars.alpha, scalars.beta}); return;
    case MapKind::relu: same(map_fn::Relu{}); return;
    case MapKind::gelu_tanh: same(map_fn::GeluTanh{}); return;
    case MapKind::where: same(map_fn::Where{}); return;
    case MapKind::cast:
      visit_float_dtype(in, [&](auto ti) {
        visit_float_dtype(out, [&](auto to) { fn(map_fn::Cast{}, ti, to); });
      });
      return;
    default: break;
  }
  switch (arity(kind)) {
    case 1: same(map_fn::UnaryMath{kind}); return;
    default: same(map_fn::BinaryMath{kind}); return;
  }
}

}  // namespace loom::kernels::detail
