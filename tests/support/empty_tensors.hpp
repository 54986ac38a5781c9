#pragma once
// The README's promise for tensors with no elements, checked on whichever
// backend `rt` runs: every op takes them and does what it defines (writes
// nothing; a reduction writes its identity; matmul with k = 0 scales C;
// histogram zeroes its counts). Values go in and out through rt.upload and
// rt.download, so the same checks read device memory on a GPU.

#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace loom::test {

inline void expect_empty_tensors_work(Runtime& rt) {
  const auto f32 = [&](Shape s) { return rt.tensor<float>(s); };
  const auto u8 = [&](Shape s) { return rt.tensor<std::uint8_t>(s); };
  const auto filled = [&](Shape s, float v) {
    const std::vector<float> values(static_cast<std::size_t>(s.product()), v);
    return rt.upload(std::span<const float>(values), s);
  };
  const auto run = [&](const std::string& what, OpPtr op) {
    Graph g;
    g.add(std::move(op));
    EXPECT_NO_THROW(rt.submit(g).wait()) << what;
  };
  run("vector_add", ops::vector_add(f32({0}), f32({0}), f32({0})));
  run("fill", ops::fill(f32({0}), 1.0F));
  run("scale_copy", ops::scale_copy(f32({0}), f32({0}), 2.0F));
  run("add", ops::add(f32({0, 4}), f32({0, 4}), f32({0, 4})));
  run("add, strided", ops::add(f32({4, 0}).transpose(0, 1), f32({0, 4}), f32({0, 4})));
  run("relu", ops::relu(f32({0}), f32({0})));
  run("gelu_tanh", ops::gelu_tanh(f32({0}), f32({0})));
  run("cast", ops::cast(f32({0}), rt.tensor<bfloat16>({0})));
  run("axpby", ops::axpby(1.0F, f32({0}), 2.0F, f32({0}), f32({0})));
  run("fused_map", ops::fused_map({f32({0}), f32({0})}, f32({0}),
                                  ops::MapExpr::input(0) + ops::MapExpr::input(1)));
  run("rgb_to_gray", ops::rgb_to_gray(u8({0, 4, 3}), u8({0, 4})));
  run("rgb_to_gray, planar", ops::rgb_to_gray(u8({3, 4, 0}), u8({4, 0})));
  run("box_blur", ops::box_blur(u8({0, 4}), u8({0, 4}), 1));
  run("box_blur, planes", ops::box_blur(u8({0, 4, 4}), u8({0, 4, 4}), 1));
  const std::vector<std::int32_t> sevens(256, 7);
  auto counts = rt.upload(std::span<const std::int32_t>(sevens), {256});
  run("histogram", ops::histogram(u8({0}), counts));
  EXPECT_EQ(rt.download<std::int32_t>(counts)[5], 0) << "histogram zeroes its counts";
  auto whole = filled({3}, 42.0F);
  auto along = filled({3, 3}, 42.0F);
  run("sum", ops::sum(f32({0}), whole.slice(0, 0, 1)));
  run("max", ops::max(f32({0, 3}).transpose(0, 1), whole.slice(0, 1, 2)));
  run("min", ops::min(f32({0}), whole.slice(0, 2, 3)));
  const auto w = rt.download<float>(whole);
  EXPECT_EQ(w[0], 0.0F);
  EXPECT_EQ(w[1], -INFINITY);
  EXPECT_EQ(w[2], INFINITY);
  run("sum along an empty dim", ops::sum(f32({3, 0}), 1, along.slice(0, 0, 1).reshape({3})));
  run("max along an empty dim", ops::max(f32({3, 0}), 1, along.slice(0, 1, 2).reshape({3})));
  run("min along an empty dim", ops::min(f32({3, 0}), 1, along.slice(0, 2, 3).reshape({3})));
  const auto a = rt.download<float>(along);
  EXPECT_EQ(a[2], 0.0F);
  EXPECT_EQ(a[5], -INFINITY);
  EXPECT_EQ(a[8], INFINITY);
  run("sum with no output", ops::sum(f32({0, 3}), 1, f32({0})));
  run("softmax, no rows", ops::softmax(f32({0, 4}), f32({0, 4})));
  run("softmax, empty rows", ops::softmax(f32({4, 0}), f32({4, 0})));
  run("matmul, m = 0", ops::matmul(f32({0, 4}), f32({4, 3}), f32({0, 3})));
  run("matmul, n = 0", ops::matmul(f32({2, 4}), f32({4, 0}), f32({2, 0})));
  auto c = filled({2, 3}, 5.0F);
  run("matmul, k = 0", ops::matmul(f32({2, 0}), f32({0, 3}), c, 1.0F, 0.5F));
  EXPECT_EQ(rt.download<float>(c)[5], 2.5F) << "C = beta C";
  auto nan_c = filled({2, 3}, std::nanf(""));
  run("matmul, k = 0, beta = 0", ops::matmul(f32({2, 0}), f32({0, 3}), nan_c));
  EXPECT_EQ(rt.download<float>(nan_c)[5], 0.0F) << "beta = 0 zeroes C, NaN included";
  EXPECT_NO_THROW(rt.copy(f32({0}), f32({0})).wait());
  Graph copies;
  copies.copy(f32({0}), f32({0}));
  copies.copy(f32({0, 4}), f32({0, 4}));
  EXPECT_NO_THROW(rt.submit(copies).wait());
}

}  // namespace loom::test
