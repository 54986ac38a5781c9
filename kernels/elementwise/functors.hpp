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

// sqrt(2 / pi) and the cubic coefficient of the tanh approximation of GELU.
inline constexpr float kGeluScale = 0.7978845608028654F;
inline constexpr float kGeluCubic = 0.044715F;

struct Add {
  static constexpr int kArity = 2;
  LOOM_MAP_FN float operator()(float a, float b) const { return add_rn(a, b); }
};

struct Mul {
  static constexpr int kArity = 2;
  LOOM_MAP_FN float operator()(float a, float b) const { return mul_rn(a, b); }
};

struct Axpby {
  static constexpr int kArity = 2;
  float alpha;
  float beta;
  LOOM_MAP_FN float operator()(float x, float y) const {
    return add_rn(mul_rn(alpha, x), mul_rn(beta, y));
  }
};

// NaN propagates (as torch.relu): a comparison with NaN is false, so x stays.
struct Relu {
  static constexpr int kArity = 1;
  LOOM_MAP_FN float operator()(float x) const { return x < 0.0F ? 0.0F : x; }
};

struct GeluTanh {
  static constexpr int kArity = 1;
  LOOM_MAP_FN float operator()(float x) const {
    const float inner = kGeluScale * (x + kGeluCubic * x * x * x);
    return 0.5F * x * (1.0F + tanhf(inner));
  }
};

// The conversion is the load and the store; the arithmetic is the identity.
struct Cast {
  static constexpr int kArity = 1;
  LOOM_MAP_FN float operator()(float x) const { return x; }
};

}  // namespace loom::kernels::map_fn
