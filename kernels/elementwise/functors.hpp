#pragma once
// The elementwise maps' arithmetic, shared by the CUDA kernels and the CPU
// references so that the two cannot drift: every map computes in f32 (inputs
// widened on load, the result rounded once on store to the output dtype).
// The fused kernels (fusion.cpp) generate the same expressions as text.

#include <cmath>

#if defined(__CUDACC__)
#define LOOM_MAP_FN __host__ __device__ __forceinline__
#else
#define LOOM_MAP_FN inline
#endif

namespace loom::kernels::map_fn {

// Products and sums rounded on their own, never contracted into a fused
// multiply-add: the GPU then computes add, mul and axpby bit for bit as the
// CPU reference does, and a fused chain as its unfused maps do.
LOOM_MAP_FN float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

LOOM_MAP_FN float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// x / (1 + e), rounded to nearest (CPU) or within 2 ulp (GPU's fast division:
// an order of magnitude fewer instructions than the IEEE one; for e beyond
// 2^126 it returns 0 where the quotient is below 2^-122 |x| anyway).
LOOM_MAP_FN float div_fast(float x, float e) {
#if defined(__CUDA_ARCH__)
  return __fdividef(x, e);
#else
  return x / e;
#endif
}

// The cubic coefficient of the tanh approximation of GELU, and its scale
// sqrt(2 / pi) times -2 log2(e): see GeluTanh.
inline constexpr float kGeluCubic = 0.044715F;
inline constexpr float kGeluExp2Scale =
    static_cast<float>(-2.0 * 0.7978845608028654 * 1.4426950408889634);

struct Add {
  static constexpr int kArity = 2;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  LOOM_MAP_FN float operator()(float a, float b) const { return add_rn(a, b); }
};

struct Mul {
  static constexpr int kArity = 2;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  LOOM_MAP_FN float operator()(float a, float b) const { return mul_rn(a, b); }
};

struct Axpby {
  static constexpr int kArity = 2;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  float alpha;
  float beta;
  LOOM_MAP_FN float operator()(float x, float y) const {
    return add_rn(mul_rn(alpha, x), mul_rn(beta, y));
  }
};

// NaN propagates (as torch.relu): a comparison with NaN is false, so x stays.
struct Relu {
  static constexpr int kArity = 1;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  LOOM_MAP_FN float operator()(float x) const { return x < 0.0F ? 0.0F : x; }
};

// 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3), computed through
// the identity 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)): one exp2 and one
// division, 7 PTX instructions an element where the tanhf form took 26 (the
// 16-bit maps and fused chains were bound by them), and no cancellation in 1 + tanh(u)
// where u is very negative. The GPU's exp2f is within 2 ulp and its division
// within 2: a few ulp of f32 from the CPU's, far inside every test tolerance.
// x = -inf gives NaN, as 0.5 x (1 + tanh(u)) does.
struct GeluTanh {
  static constexpr int kArity = 1;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  LOOM_MAP_FN float operator()(float x) const {
    const float poly = x + kGeluCubic * x * x * x;
    return div_fast(x, 1.0F + exp2f(kGeluExp2Scale * poly));
  }
};

// The conversion is the load and the store; the arithmetic is the identity.
struct Cast {
  static constexpr int kArity = 1;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  LOOM_MAP_FN float operator()(float x) const { return x; }
};

}  // namespace loom::kernels::map_fn
