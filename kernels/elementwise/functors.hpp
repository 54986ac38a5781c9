#pragma once
// The elementwise maps as functors, shared by the CUDA kernels and the CPU
// references so that the two cannot drift: every map computes in f32 (inputs
// widened on load, the result rounded once on store to the output dtype).
// Their arithmetic is map_math.inc, which the fused kernels (fusion.cpp)
// compile too.

#include "elementwise/maps.hpp"

#include <math.h>  // expf, logf, ... unqualified, as map_math.inc calls them

#if defined(__CUDACC__)
#define LOOM_MAP_FN __host__ __device__ __forceinline__
#else
#define LOOM_MAP_FN inline
#endif

namespace loom::kernels::map_fn {

#define LOOM_MATH LOOM_MAP_FN
#include "elementwise/map_math.inc"
#undef LOOM_MATH

struct Add {
  static constexpr int kArity = 2;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  LOOM_MAP_FN float operator()(float a, float b) const { return loom_map_add(a, b); }
};

struct Mul {
  static constexpr int kArity = 2;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  LOOM_MAP_FN float operator()(float a, float b) const { return loom_map_mul(a, b); }
};

struct Axpby {
  static constexpr int kArity = 2;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  float alpha;
  float beta;
  LOOM_MAP_FN float operator()(float x, float y) const { return loom_map_axpby(alpha, x, beta, y); }
};

struct Relu {
  static constexpr int kArity = 1;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  LOOM_MAP_FN float operator()(float x) const { return loom_map_relu(x); }
};

struct GeluTanh {
  static constexpr int kArity = 1;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  LOOM_MAP_FN float operator()(float x) const { return loom_map_gelu_tanh(x); }
};

// The conversion is the load and the store; the arithmetic is the identity.
struct Cast {
  static constexpr int kArity = 1;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  LOOM_MAP_FN float operator()(float x) const { return x; }
};

// The maps added later share one kernel a dtype and an arity, the map chosen
// by a kernel argument: a switch on a value every thread of the grid holds
// (no divergence, a few instructions an element, while a memory-bound map
// has dozens to spare), where a kernel each would have multiplied the
// library's kernels (and its build time) by the number of maps.
struct UnaryMath {
  static constexpr int kArity = 1;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  MapKind kind;
  LOOM_MAP_FN float operator()(float x) const {
    switch (kind) {
#define LOOM_CASE(name) \
  case MapKind::name: return loom_map_##name(x);
      LOOM_UNARY_MATH_MAPS(LOOM_CASE)
#undef LOOM_CASE
      default: return x;
    }
  }
};

struct BinaryMath {
  static constexpr int kArity = 2;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  MapKind kind;
  LOOM_MAP_FN float operator()(float a, float b) const {
    switch (kind) {
#define LOOM_CASE(name) \
  case MapKind::name: return loom_map_##name(a, b);
      LOOM_BINARY_MATH_MAPS(LOOM_CASE)
#undef LOOM_CASE
      default: return a;
    }
  }
};

struct Where {
  static constexpr int kArity = 3;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  LOOM_MAP_FN float operator()(float mask, float a, float b) const {
    return loom_map_where(mask, a, b);
  }
};

}  // namespace loom::kernels::map_fn
