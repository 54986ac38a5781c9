#pragma once
// Graphs for the compiled-graph tests, built twice from one random sequence:
// once over graph-scoped intermediates (for Runtime::compile, whose arena
// packs them), once over ordinary tensors (the eager reference, where nothing
// shares memory). Outputs are ordinary tensors in both.

#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <cstdint>
#include <random>
#include <vector>

namespace loom::test {

struct TwinGraphs {
  Graph planned;
  Graph eager;
  std::vector<Tensor> planned_outputs;
  std::vector<Tensor> eager_outputs;
};

/// A random DAG of `ops` elementwise ops (scale_copy, vector_add, both also
/// in place) over values of `n` floats: new values are intermediates in the
/// planned twin; ops read recent values (short lifetimes, so the arena
/// shares), and now and then add a value into one of `outputs` outputs.
inline TwinGraphs random_twins(Runtime& rt, std::mt19937_64& rng, int ops, std::int64_t n,
                               int outputs = 4) {
  TwinGraphs twins;
  struct Value {
    Tensor planned;
    Tensor eager;
    bool intermediate = false;
  };
  std::vector<Value> values;
  const auto pick = [&](std::size_t window) {
    const std::size_t lo = values.size() > window ? values.size() - window : 0;
    return std::uniform_int_distribution<std::size_t>(lo, values.size() - 1)(rng);
  };
  const float alphas[] = {0.5F, -0.75F, 0.25F, -0.5F};  // keeps long chains finite
  const auto alpha = [&] { return alphas[std::uniform_int_distribution<int>(0, 3)(rng)]; };
  for (int k = 0; k < 2; ++k) {  // inputs, written in the graph
    Value v{rt.tensor<float>({n}), rt.tensor<float>({n}), false};
    twins.planned.add(ops::fill(v.planned, 1.0F + 0.25F * static_cast<float>(k)));
    twins.eager.add(ops::fill(v.eager, 1.0F + 0.25F * static_cast<float>(k)));
    values.push_back(v);
  }
  for (int k = 0; k < outputs; ++k) {
    twins.planned_outputs.push_back(rt.tensor<float>({n}));
    twins.eager_outputs.push_back(rt.tensor<float>({n}));
    twins.planned.add(ops::fill(twins.planned_outputs.back(), 0.0F));
    twins.eager.add(ops::fill(twins.eager_outputs.back(), 0.0F));
  }
  for (int i = 0; i < ops; ++i) {
    const int kind = std::uniform_int_distribution<int>(0, 4)(rng);
    const std::size_t a = pick(6);
    const std::size_t b = pick(6);
    if (kind <= 1) {  // a new value
      Value v{twins.planned.intermediate(DType::f32, {n}), rt.tensor<float>({n}), true};
      if (kind == 0) {
        const float s = alpha();
        twins.planned.add(ops::scale_copy(values[a].planned, v.planned, s));
        twins.eager.add(ops::scale_copy(values[a].eager, v.eager, s));
      } else {
        twins.planned.add(ops::vector_add(values[a].planned, values[b].planned, v.planned));
        twins.eager.add(ops::vector_add(values[a].eager, values[b].eager, v.eager));
      }
      values.push_back(v);
    } else if (kind == 2 && values[a].intermediate) {  // in place
      const float s = alpha();
      twins.planned.add(ops::scale_copy(values[a].planned, values[a].planned, s));
      twins.eager.add(ops::scale_copy(values[a].eager, values[a].eager, s));
    } else if (kind == 3 && values[a].intermediate && a != b) {  // in place, reading another
      twins.planned.add(ops::vector_add(values[a].planned, values[b].planned, values[a].planned));
      twins.eager.add(ops::vector_add(values[a].eager, values[b].eager, values[a].eager));
    } else {  // into an output
      const auto o =
          std::uniform_int_distribution<std::size_t>(0, twins.planned_outputs.size() - 1)(rng);
      const Tensor& po = twins.planned_outputs[o];
      const Tensor& eo = twins.eager_outputs[o];
      twins.planned.add(ops::vector_add(po, values[a].planned, po));
      twins.eager.add(ops::vector_add(eo, values[a].eager, eo));
    }
  }
  return twins;
}

}  // namespace loom::test
