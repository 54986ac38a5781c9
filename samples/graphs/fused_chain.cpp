// A chain of elementwise maps as one kernel: y = gelu(x + bias) * scale,
// rounded to bf16, where x and bias are f32. Unfused, that is three kernels
// and two f32 temporaries; fused_map reads x and bias once and writes y once.
// On the GPU the chain is compiled at submit (once per distinct chain, then
// cached); on the CPU backend the same chain is evaluated on the host.
#include <loom/loom.hpp>
#include <loom/ops.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

float bf16_to_float(loom::bfloat16 v) {
  const std::uint32_t bits = static_cast<std::uint32_t>(v.bits) << 16;
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float gelu_tanh(float v) {
  return 0.5F * v * (1.0F + std::tanh(0.7978845608F * (v + 0.044715F * v * v * v)));
}

}  // namespace

int main() {
  try {
    loom::Runtime rt;
    const std::int64_t n = 1 << 20;
    std::vector<float> x(n), bias(n);
    for (std::int64_t i = 0; i < n; ++i) {
      x[static_cast<std::size_t>(i)] = static_cast<float>(i % 1000) / 250.0F - 2.0F;
      bias[static_cast<std::size_t>(i)] = 0.25F;
    }
    std::vector<loom::bfloat16> y(n);
    auto hx = rt.provide(x.data(), loom::DType::f32, {n}, loom::Memory::pageable);
    auto hb = rt.provide(bias.data(), loom::DType::f32, {n}, loom::Memory::pageable);
    auto hy = rt.provide(y.data(), loom::DType::bf16, {n}, loom::Memory::pageable);
    auto dx = rt.tensor<float>({n});
    auto db = rt.tensor<float>({n});
    auto dy = rt.tensor(loom::DType::bf16, {n});

    using loom::ops::MapExpr;
    const auto chain =
        1.5F * loom::ops::gelu_tanh(MapExpr::input(0) + MapExpr::input(1));  // one kernel
    loom::Graph g;
    g.copy(hx, dx);
    g.copy(hb, db);
    g.add(loom::ops::fused_map({dx, db}, dy, chain));
    g.copy(dy, hy);
    rt.submit(g).wait();

    // bf16 keeps 8 significant bits: a relative error of 2^-8 is one rounding.
    std::size_t bad = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      const float want = 1.5F * gelu_tanh(x[k] + bias[k]);
      if (std::fabs(bf16_to_float(y[k]) - want) > 1e-2F * std::fabs(want) + 1e-6F) ++bad;
    }
    std::printf("%s on the %s backend: y[0] = %.4f, y[%lld] = %.4f, %zu of %lld off\n",
                chain.to_string().c_str(), rt.has_gpu() ? "CUDA" : "CPU", bf16_to_float(y[0]),
                static_cast<long long>(n - 1), bf16_to_float(y[static_cast<std::size_t>(n - 1)]),
                bad, static_cast<long long>(n));
    return bad == 0 ? 0 : 1;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
