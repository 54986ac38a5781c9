// Compiled graphs built from the dependency DAG: exactly the graph's edges
// (no event, fork or join node, whatever streams an eager run would use),
// copies within a device as kernel nodes, rebinding that re-points the
// kernel nodes of described launches instead of copying, and run_n.
#include "support/gpu.hpp"

#include "compile/capture.hpp"
#include "compile/compile.hpp"
#include "cuda/check.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using loom::Memory;
using loom::Tensor;

__global__ void add_one(const float* in, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] + 1.0F;
}

__global__ void affine(const float* in, float* out, float a, float b, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = a * in[i] + b;
}

// out = in + 1, as a user writes it (kernel_task.hpp): a described launch.
loom::OpPtr plus_one(const Tensor& in, const Tensor& out, std::string name = "plus_one") {
  return loom::kernel_task(std::move(name), {in}, {out}, [in, out](loom::KernelContext& k) {
    const int n = static_cast<int>(out.numel());
    loom::launch(k, add_one, dim3((n + 255) / 256), dim3(256), 0, in.data_as<float>(),
                 out.data_as<float>(), n);
  });
}

loom::OpPtr affine_task(const Tensor& in, const Tensor& out, float a, float b) {
  return loom::kernel_task("affine", {in}, {out}, [=](loom::KernelContext& k) {
    const int n = static_cast<int>(out.numel());
    loom::launch(k, affine, dim3((n + 255) / 256), dim3(256), 0, in.data_as<float>(),
                 out.data_as<float>(), a, b, n);
  });
}

using loom::test::read_back;

void upload(loom::Runtime& rt, const Tensor& t, const std::vector<float>& values) {
  auto host = rt.tensor<float>({t.numel()}, Memory::pinned);
  std::memcpy(host.data(), values.data(), values.size() * sizeof(float));
  rt.copy(host, t).wait();
}

// x + 1, `times` times over, as the kernels compute it: each sum rounded
// (x + 32.0F, rounded once, differs from it in the last bit for about one
// value in ten).
float plus_ones(float x, int times) {
  for (int i = 0; i < times; ++i) x += 1.0F;
  return x;
}

// Fresh inputs each run (the seed is printed: LOOM_TEST_SEED repeats it).
std::vector<float> random_values(std::size_t n) {
  auto rng = loom::test::random_engine();
  return loom::test::random_floats(n, rng, -4.0F, 4.0F);
}

// The nodes and edges of an executable's only segment.
struct Shape {
  std::size_t nodes = 0;
  std::size_t edges = 0;
  std::size_t kernels = 0;
  std::size_t others = 0;  // neither a kernel nor a memcpy node (events, empties)
};

Shape shape_of(const loom::Executable& exe) {
  const auto* graphs = loom::detail::captured_graphs(exe);
  EXPECT_NE(graphs, nullptr);
  EXPECT_EQ(graphs->segments.size(), 1U);
  Shape s;
  cudaGraph_t g = graphs->segments.front()->graph;
  LOOM_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &s.nodes));
  std::vector<cudaGraphNode_t> nodes(s.nodes);
  LOOM_CUDA_CHECK(cudaGraphGetNodes(g, nodes.data(), &s.nodes));
  for (auto n : nodes) {
    cudaGraphNodeType type{};
    LOOM_CUDA_CHECK(cudaGraphNodeGetType(n, &type));
    if (type == cudaGraphNodeTypeKernel) {
      ++s.kernels;
    } else if (type != cudaGraphNodeTypeMemcpy) {
      ++s.others;
    }
  }
  LOOM_CUDA_CHECK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &s.edges));
  return s;
}

}  // namespace

// 8 independent lanes of 16 tasks: 128 kernel nodes, 8 x 15 edges, nothing
// else (an eager run would spread them over 4 streams with events).
TEST(CompileDagGpu, EightLanesBecomeExactlyTheirKernelsAndEdges) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 64;
  std::vector<Tensor> lanes;
  loom::Graph g;
  for (int lane = 0; lane < 8; ++lane) lanes.push_back(rt.tensor<float>({n}));
  for (int i = 0; i < 16; ++i) {
    for (const auto& t : lanes) g.add(plus_one(t, t));
  }
  auto exe = rt.compile(g);
  const Shape s = shape_of(exe);
  EXPECT_EQ(s.kernels, 128U);
  EXPECT_EQ(s.others, 0U) << "event, fork or join nodes in the graph";
  EXPECT_EQ(s.nodes, 128U);
  EXPECT_EQ(s.edges, 8U * 15U);
  std::vector<std::vector<float>> start;
  for (std::size_t l = 0; l < lanes.size(); ++l) {
    start.push_back(random_values(n));
    upload(rt, lanes[l], start.back());
  }
  exe.run().wait();
  exe.run().wait();
  for (std::size_t l = 0; l < lanes.size(); ++l) {
    const auto got = read_back(rt, lanes[l]);
    for (std::int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], plus_ones(start[l][i], 32)) << "lane " << l << ", " << i;
    }
  }
}

// A diamond a -> {b, c} -> d plus a redundant a -> d edge (d reads a's
// output too): the implied edge is dropped, the result is the eager one.
TEST(CompileDagGpu, ImpliedEdgesAreDroppedAndTheResultIsTheEagerOne) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 1000;
  auto x = rt.tensor<float>({n});
  auto a = rt.tensor<float>({n});
  auto b = rt.tensor<float>({n});
  auto c = rt.tensor<float>({n});
  auto d = rt.tensor<float>({n});
  loom::Graph g;
  g.add(plus_one(x, a, "a"));
  g.add(affine_task(a, b, 2.0F, 0.5F));
  g.add(affine_task(a, c, -1.0F, 3.0F));
  g.add(loom::kernel_task("d", {a, b, c}, {d}, [=](loom::KernelContext& k) {
    const int m = static_cast<int>(n);
    loom::launch(k, add_one, dim3((m + 255) / 256), dim3(256), 0, b.data_as<float>(),
                 d.data_as<float>(), m);
  }));
  auto exe = rt.compile(g);
  const Shape s = shape_of(exe);
  EXPECT_EQ(s.nodes, 4U);
  EXPECT_EQ(s.edges, 4U) << "a->b, a->c, b->d, c->d; a->d is implied";
  const auto xs = random_values(n);
  upload(rt, x, xs);
  exe.run().wait();
  const auto got = read_back(rt, d);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(got[i], 2.0F * (xs[i] + 1.0F) + 0.5F + 1.0F);
}

// A copy within the device is a kernel node, correct at every alignment.
TEST(CompileDagGpu, DeviceCopiesAreKernelNodesAtAnyAlignment) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 100003;
  auto src = rt.tensor<std::uint8_t>({n});
  auto dst = rt.tensor<std::uint8_t>({n});
  std::vector<std::uint8_t> bytes(n);
  auto rng = loom::test::random_engine();
  for (auto& v : bytes) v = static_cast<std::uint8_t>(rng());
  auto host = rt.tensor<std::uint8_t>({n}, Memory::pinned);
  std::memcpy(host.data(), bytes.data(), bytes.size());
  rt.copy(host, src).wait();
  for (const auto& [from, to, len] :
       std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>{
           {0, 0, n}, {3, 3, 70001}, {1, 7, 50000}, {16, 32, 15}, {5, 5, 11}}) {
    auto fill = rt.tensor<std::uint8_t>({n}, Memory::pinned);
    std::memset(fill.data(), 0xAB, static_cast<std::size_t>(n));
    rt.copy(fill, dst).wait();  // poison
    loom::Graph g;
    g.copy(src.slice(0, from, from + len), dst.slice(0, to, to + len));
    auto exe = rt.compile(g);
    const Shape s = shape_of(exe);
    EXPECT_GE(s.kernels, 1U);
    EXPECT_EQ(s.kernels, s.nodes) << "no memcpy node for a copy within the device";
    exe.run().wait();
    auto back = rt.tensor<std::uint8_t>({n}, Memory::pinned);
    rt.copy(dst, back).wait();
    const auto* got = back.data_as<std::uint8_t>();
    for (std::int64_t i = 0; i < n; ++i) {
      const bool inside = i >= to && i < to + len;
      ASSERT_EQ(got[i], inside ? bytes[static_cast<std::size_t>(i - to + from)] : 0xAB)
          << "byte " << i << " of copy [" << from << ", +" << len << ") -> " << to;
    }
  }
}

// Kernel tasks only: a binding re-points the kernel nodes. The placeholders
// are neither read nor written by the bound run, the next plain replay uses
// them again, and bound runs alternate with plain ones.
TEST(CompileDagGpu, RebindingRepointsDescribedLaunchesWithoutTouchingThePlaceholders) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 4099;
  auto in = rt.tensor<float>({n});
  auto out = rt.tensor<float>({n});
  loom::Graph g;
  auto tmp = g.intermediate(loom::DType::f32, {n});
  // out = 3 in + 1, each step rounded once (3 in + 0 is the same with or
  // without a fused multiply-add), so the host computes it exactly.
  g.add(affine_task(in, tmp, 3.0F, 0.0F));
  g.add(plus_one(tmp, out));
  auto exe = rt.compile(g);
  const auto in_values = random_values(n);
  upload(rt, in, in_values);
  upload(rt, out, std::vector<float>(n, std::nanf("")));
  for (int round = 0; round < 3; ++round) {
    auto in2 = rt.tensor<float>({n});
    auto out2 = rt.tensor<float>({n});
    const auto in2_values = random_values(n);
    upload(rt, in2, in2_values);
    upload(rt, out2, std::vector<float>(n, std::nanf("")));
    exe.run({{in, in2}, {out, out2}}).wait();
    const auto got = read_back(rt, out2);
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 3.0F * in2_values[i] + 1.0F) << i;
    if (round == 0) {
      // In place: the placeholders were neither read nor written.
      for (float v : read_back(rt, out)) ASSERT_TRUE(std::isnan(v));
      const auto in_now = read_back(rt, in);
      ASSERT_EQ(std::memcmp(in_now.data(), in_values.data(), n * sizeof(float)), 0);
    }
    exe.run().wait();  // back on the placeholders
    const auto plain = read_back(rt, out);
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(plain[i], 3.0F * in_values[i] + 1.0F) << i;
  }
}

// A tensor's bytes, and back.
std::vector<unsigned char> bytes_of(loom::Runtime& rt, const Tensor& t) {
  auto host = rt.tensor(t.dtype(), t.shape(), Memory::pinned);
  rt.copy(t, host).wait();
  const auto* p = static_cast<const unsigned char*>(host.data());
  return std::vector<unsigned char>(p, p + t.nbytes());
}

void put_bytes(loom::Runtime& rt, const Tensor& t, const std::vector<unsigned char>& bytes) {
  auto host = rt.tensor(t.dtype(), t.shape(), Memory::pinned);
  std::memcpy(host.data(), bytes.data(), bytes.size());
  rt.copy(host, t).wait();
}

std::vector<unsigned char> random_bytes(std::size_t n) {
  auto rng = loom::test::random_engine();
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng() & 0xFF);
  return v;
}

// loom's built-in ops (maps, softmax, reductions, image ops, matmul) describe their
// launches like kernel tasks: every task of the graph is added as kernel
// nodes, and a bound run re-points them: it computes what the plain run
// computes on the same values, and never touches the placeholders.
TEST(CompileDagGpu, BuiltInOpsAreDescribedAndABindingRepointsThem) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t rows = 64, cols = 300, h = 48, w = 80;
  auto x = rt.tensor<float>({rows, cols});
  auto y = rt.tensor<float>({rows, cols});
  auto rgb = rt.tensor<std::uint8_t>({h, w, 3});
  auto weights = rt.tensor<float>({cols, 32});
  auto product = rt.tensor<float>({rows, 32});
  auto soft = rt.tensor<float>({rows, cols});
  auto row_sums = rt.tensor<float>({rows});
  auto scaled = rt.tensor<float>({rows, cols});
  auto total = rt.tensor<float>({1});
  auto blurred = rt.tensor<std::uint8_t>({h, w});
  auto counts = rt.tensor<std::int32_t>({256});
  const std::vector<Tensor> inputs = {x, y, rgb, weights};
  const std::vector<Tensor> outputs = {soft, row_sums, scaled, total, blurred, product, counts};
  loom::Graph g;
  auto sum_xy = g.intermediate(loom::DType::f32, {rows, cols});
  auto positive = g.intermediate(loom::DType::f32, {rows, cols});
  auto gray = g.intermediate(loom::DType::u8, {h, w});
  g.add(loom::ops::vector_add(x, y, sum_xy));
  g.add(loom::ops::relu(sum_xy, positive));
  g.add(loom::ops::softmax(positive, soft));
  g.add(loom::ops::sum(soft, 1, row_sums));
  g.add(loom::ops::scale_copy(x, scaled, 2.0F));
  g.add(loom::ops::sum(x, total));
  g.add(loom::ops::rgb_to_gray(rgb, gray));
  g.add(loom::ops::box_blur(gray, blurred, 2));
  g.add(loom::ops::matmul(x, weights, product));
  g.add(loom::ops::histogram(blurred, counts));
  auto exe = rt.compile(g);
  const auto* graphs = loom::detail::captured_graphs(exe);
  ASSERT_NE(graphs, nullptr);
  std::string captured;
  for (std::size_t t = 0; t < graphs->described.size(); ++t) {
    if (!graphs->described[t]) captured += " " + g.tasks()[t].name;
  }
  EXPECT_EQ(std::count(graphs->described.begin(), graphs->described.end(), char{1}), 10)
      << "every built-in op here launches through loom; captured:" << captured;
  EXPECT_EQ(shape_of(exe).others, 0U) << "no event or empty node";

  std::vector<std::vector<unsigned char>> values;
  for (const auto& t : inputs) {
    values.push_back(t.dtype() == loom::DType::u8 ? random_bytes(t.nbytes()) : [&] {
      const auto f = random_values(static_cast<std::size_t>(t.numel()));
      std::vector<unsigned char> b(t.nbytes());
      std::memcpy(b.data(), f.data(), b.size());
      return b;
    }());
    put_bytes(rt, t, values.back());
  }
  exe.run().wait();
  std::vector<std::vector<unsigned char>> plain;
  for (const auto& t : outputs) plain.push_back(bytes_of(rt, t));
  // Softmax rows sum to one: the plain run computed something.
  for (float v : read_back(rt, row_sums)) ASSERT_NEAR(v, 1.0F, 1e-4F);

  std::vector<std::pair<Tensor, Tensor>> bindings;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    auto other = rt.tensor(inputs[i].dtype(), inputs[i].shape());
    put_bytes(rt, other, values[i]);
    bindings.emplace_back(inputs[i], other);
  }
  constexpr unsigned char kPoison = 0xA5;
  for (const auto& t : outputs) {
    auto other = rt.tensor(t.dtype(), t.shape());
    put_bytes(rt, other, std::vector<unsigned char>(t.nbytes(), 0x5A));
    put_bytes(rt, t, std::vector<unsigned char>(t.nbytes(), kPoison));
    bindings.emplace_back(t, other);
  }
  std::vector<loom::Binding> binds;
  for (const auto& [placeholder, tensor] : bindings) binds.push_back({placeholder, tensor});
  const auto reasons = loom::detail::explain_bindings(exe, binds);
  exe.run(binds).wait();
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_EQ(bytes_of(rt, bindings[inputs.size() + i].second), plain[i]) << "output " << i;
    const auto untouched = bytes_of(rt, outputs[i]);
    EXPECT_TRUE(std::all_of(untouched.begin(), untouched.end(),
                            [&](unsigned char b) { return b == kPoison; }))
        << "the placeholder of output " << i << " was written: bound by a copy, not re-pointed ("
        << reasons[inputs.size() + i] << ")";
  }
}

// A kernel may have been picked for its pointers' alignment (vector_add's
// 16-byte loads): a tensor bound at another alignment is copied through the
// placeholder, not re-pointed, and the result is right.
TEST(CompileDagGpu, ABindingAtAnotherAlignmentIsCopiedNotRepointed) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 4096;
  auto a = rt.tensor<float>({n});
  auto b = rt.tensor<float>({n});
  auto c = rt.tensor<float>({n});
  loom::Graph g;
  g.add(loom::ops::vector_add(a, b, c));
  auto exe = rt.compile(g);
  auto wide = rt.tensor<float>({n + 1});
  auto shifted = wide.slice(0, 1, n + 1);  // 4 bytes past a 16-byte boundary
  const auto a_values = random_values(n);
  const auto b_values = random_values(n);
  upload(rt, shifted, a_values);
  upload(rt, b, b_values);
  auto c2 = rt.tensor<float>({n});
  exe.run({{a, shifted}, {c, c2}}).wait();
  const auto got = read_back(rt, c2);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], a_values[i] + b_values[i]) << i;
  const auto placeholder = read_back(rt, a);
  ASSERT_EQ(std::memcmp(placeholder.data(), a_values.data(), n * sizeof(float)), 0)
      << "the shifted tensor was re-pointed, not copied into its placeholder";
}

// A placeholder an opaque op uses (one that does more than launch kernels:
// a memset first) is bound by copies, as before: the placeholder holds the
// output as well.
TEST(CompileDagGpu, APlaceholderAnOpaqueOpUsesIsBoundByCopies) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 777;
  auto in = rt.tensor<float>({n});
  auto mid = rt.tensor<float>({n});
  auto out = rt.tensor<float>({n});
  loom::Graph g;
  g.add(plus_one(in, mid));  // described
  g.add(loom::kernel_task("memset, then 2x", {mid}, {out}, [mid, out](loom::KernelContext& k) {
    LOOM_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, out.nbytes(), loom::cuda_stream(k)));
    const int m = static_cast<int>(out.numel());
    loom::launch(k, affine, dim3((m + 255) / 256), dim3(256), 0, mid.data_as<float>(),
                 out.data_as<float>(), 2.0F, 0.0F, m);
  }));  // opaque: captured
  auto exe = rt.compile(g);
  const auto in2_values = random_values(n);
  auto in2 = rt.tensor<float>({n});
  auto out2 = rt.tensor<float>({n});
  upload(rt, in2, in2_values);
  exe.run({{in, in2}, {out, out2}}).wait();
  const auto got = read_back(rt, out2);
  const auto placeholder = read_back(rt, out);
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_FLOAT_EQ(got[i], 2.0F * (in2_values[i] + 1.0F));
    ASSERT_FLOAT_EQ(placeholder[i], got[i]) << "out was bound by a copy out of its placeholder";
  }
}

// One tensor bound to an input and to an output: both re-pointed, its
// readers and writers would be nodes that no edge orders, so the first
// binding is a copy into its placeholder (a task of the run, ordered by its
// data before the replay that writes the tensor) and the second is
// re-pointed (its placeholder untouched); the result is right.
TEST(CompileDagGpu, OneTensorBoundToAnInputAndAnOutputIsNotRepointedTwice) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 513;
  auto in = rt.tensor<float>({n});
  auto out = rt.tensor<float>({n});
  loom::Graph g;
  g.add(plus_one(in, out));
  auto exe = rt.compile(g);
  upload(rt, in, std::vector<float>(n, 0.0F));
  upload(rt, out, std::vector<float>(n, std::nanf("")));
  const auto values = random_values(n);
  auto buf = rt.tensor<float>({n});
  upload(rt, buf, values);
  exe.run({{in, buf}, {out, buf}}).wait();
  const auto got = read_back(rt, buf);
  const auto in_now = read_back(rt, in);
  const auto out_now = read_back(rt, out);
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], values[i] + 1.0F) << i;
    ASSERT_EQ(in_now[i], values[i]) << "in was bound by a copy into its placeholder";
    ASSERT_TRUE(std::isnan(out_now[i])) << "out was re-pointed: its placeholder is untouched";
  }
}

// run_n(k) replays k times in one run: one graph launched k times.
TEST(CompileDagGpu, RunNReplaysKTimesInOneRun) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 300;
  auto x = rt.tensor<float>({n});
  loom::Graph g;
  g.add(plus_one(x, x));
  g.add(plus_one(x, x));
  auto exe = rt.compile(g);
  const auto start = random_values(n);
  upload(rt, x, start);
  exe.run_n(10).wait();
  exe.run_n(0).wait();
  auto got = read_back(rt, x);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], plus_ones(start[i], 20)) << i;
  // The graph kept for a count serves the next call with it, also while
  // the one before is in flight; another count builds its own.
  auto first = exe.run_n(10);
  auto second = exe.run_n(10);
  exe.run_n(4).wait();
  first.wait();
  second.wait();
  got = read_back(rt, x);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], plus_ones(start[i], 68)) << i;
  int left = 3;
  exe.run_until([&] { return left-- == 0; }).wait();
  got = read_back(rt, x);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], plus_ones(start[i], 74)) << i;
  EXPECT_THROW((void)exe.run_n(-1), loom::InvalidArgument);
}

// An executable of one kernel (a one-node graph): plain, bound to other
// tensors (re-pointed, the placeholders left alone), back on the
// placeholders, and k times in one run.
TEST(CompileDagGpu, OneKernelExecutableReplaysPlainBoundAndRepeated) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 4099;
  auto in = rt.tensor<float>({n});
  auto out = rt.tensor<float>({n});
  loom::Graph g;
  g.add(affine_task(in, out, 3.0F, 0.0F));  // 3 in, rounded once either way
  auto exe = rt.compile(g);
  const auto in_values = random_values(n);
  upload(rt, in, in_values);
  upload(rt, out, std::vector<float>(n, std::nanf("")));
  exe.run().wait();
  auto got = read_back(rt, out);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 3.0F * in_values[i]) << i;
  upload(rt, out, std::vector<float>(n, std::nanf("")));
  auto in2 = rt.tensor<float>({n});
  auto out2 = rt.tensor<float>({n});
  const auto in2_values = random_values(n);
  upload(rt, in2, in2_values);
  exe.run({{in, in2}, {out, out2}}).wait();
  got = read_back(rt, out2);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 3.0F * in2_values[i]) << i;
  for (float v : read_back(rt, out)) ASSERT_TRUE(std::isnan(v));
  exe.run().wait();
  got = read_back(rt, out);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 3.0F * in_values[i]) << i;

  auto x = rt.tensor<float>({n});
  loom::Graph once;
  once.add(plus_one(x, x));
  auto step = rt.compile(once);
  const auto start = random_values(n);
  upload(rt, x, start);
  step.run_n(5).wait();
  step.run().wait();
  got = read_back(rt, x);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], plus_ones(start[i], 6)) << i;
  auto x2 = rt.tensor<float>({n});
  upload(rt, x2, in2_values);
  step.run({{x, x2}}).wait();
  got = read_back(rt, x2);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], plus_ones(in2_values[i], 1)) << i;
  got = read_back(rt, x);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], plus_ones(start[i], 6)) << i;
}

namespace {

struct Span {
  float* data;
  int n;
};

__global__ void add_one_span(Span s) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < s.n) s.data[i] += 1.0F;
}

}  // namespace

// A kernel task that does more than loom::launch (a memset on its stream),
// and one whose kernel takes a struct, are captured as they are: the replay
// is still right, and a binding of their tensors is copied.
TEST(CompileDagGpu, KernelTasksThatAreNotPlainLaunchesAreCaptured) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 513;
  auto x = rt.tensor<float>({n});
  auto y = rt.tensor<float>({n});
  loom::Graph g;
  g.add(loom::kernel_task("memset then +1", {}, {x}, [x](loom::KernelContext& k) {
    LOOM_CUDA_CHECK(cudaMemsetAsync(x.data(), 0, x.nbytes(), loom::cuda_stream(k)));
    const int m = static_cast<int>(x.numel());
    loom::launch(k, add_one, dim3((m + 255) / 256), dim3(256), 0, x.data_as<float>(),
                 x.data_as<float>(), m);
  }));
  g.add(loom::kernel_task("struct +1", {x}, {y}, [x, y](loom::KernelContext& k) {
    const int m = static_cast<int>(y.numel());
    loom::launch(k, add_one, dim3((m + 255) / 256), dim3(256), 0, x.data_as<float>(),
                 y.data_as<float>(), m);
    loom::launch(k, add_one_span, dim3((m + 255) / 256), dim3(256), 0, Span{y.data_as<float>(), m});
  }));
  auto exe = rt.compile(g);
  const auto* graphs = loom::detail::captured_graphs(exe);
  ASSERT_NE(graphs, nullptr);
  EXPECT_EQ(std::count(graphs->described.begin(), graphs->described.end(), char{1}), 0)
      << "a task that is not plain launches was described";
  const Shape s = shape_of(exe);
  EXPECT_EQ(s.kernels, 3U);
  EXPECT_EQ(s.nodes, 4U) << "the memset, then the three launches";
  EXPECT_EQ(s.edges, 3U);
  upload(rt, x, random_values(n));
  upload(rt, y, random_values(n));
  exe.run().wait();
  for (float v : read_back(rt, y)) ASSERT_EQ(v, 3.0F);
  auto y2 = rt.tensor<float>({n});
  upload(rt, y, std::vector<float>(n, std::nanf("")));  // re-pointed, y would keep these
  exe.run({{y, y2}}).wait();
  for (float v : read_back(rt, y2)) ASSERT_EQ(v, 3.0F);
  for (float v : read_back(rt, y)) ASSERT_EQ(v, 3.0F) << "y was bound by a copy out";
}

// A kernel task that breaks the capture while it is described (a
// synchronizing call whose error it ignores) is named at compile, not the
// task after it whose own stream work then fails: a segment whose probe
// stops capturing is described again task by task.
TEST(CompileDagGpu, AKernelTaskThatBreaksCaptureUnseenIsNamedAtCompile) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 64;
  auto x = rt.tensor<float>({n});
  auto y = rt.tensor<float>({n});
  loom::Graph g;
  g.add(plus_one(x, y));
  g.add(loom::kernel_task("syncs quietly", {y}, {x}, [x, y](loom::KernelContext& k) {
    (void)cudaStreamSynchronize(loom::cuda_stream(k));
    (void)cudaGetLastError();
    const int m = static_cast<int>(x.numel());
    loom::launch(k, add_one, dim3(1), dim3(64), 0, y.data_as<float>(), x.data_as<float>(), m);
  }));
  auto z = rt.tensor<float>({n});
  g.add(loom::kernel_task("innocent memset", {}, {z}, [z](loom::KernelContext& k) {
    LOOM_CUDA_CHECK(cudaMemsetAsync(z.data(), 0, z.nbytes(), loom::cuda_stream(k)));
  }));
  try {
    (void)rt.compile(g);
    FAIL() << "compile accepted a task that broke the capture";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "syncs quietly") << e.what();
  }
  loom::Graph ok;
  ok.add(plus_one(x, y));
  upload(rt, x, std::vector<float>(n, 1.0F));
  rt.compile(ok).run().wait();
  for (float v : read_back(rt, y)) ASSERT_EQ(v, 2.0F);
}
