// The index ops on the GPU against the same graphs on the CPU backend: every
// op, dtype and index type at awkward sizes (1, 31, 4097, about a million
// elements), random data that is never zero, with ties, NaNs and
// out-of-range indices mixed in, outputs poisoned before each run, strided
// and misaligned views (the 16-byte path of index_select and its
// fallback), argmax along the last, a middle and a non-contiguous
// dimension (its warp and thread kernels), a compiled graph's replays
// (the ops' launches described, then rebound to other tensors), and mixed
// memory spaces rejected.
#include "support/gpu.hpp"

#include <loom/error.hpp>
#include <loom/executable.hpp>
#include <loom/graph.hpp>
#include <loom/ops/index.hpp>
#include <loom/runtime.hpp>

#include "index/test_support.hpp"
#include "support/rejection.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using loom::DType;
using loom::Shape;
using loom::Tensor;
using loom::test::index::download;
using loom::test::index::HostArray;
using loom::test::index::kFloatTypes;
using loom::test::index::random_indices;
using loom::test::index::random_values;
using loom::test::index::upload;
using loom::test::index::upload_index;

constexpr DType kIndexTypes[] = {DType::i32, DType::i64};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// What one run of a graph leaves: its float outputs and its index outputs.
struct Results {
  std::vector<HostArray> floats;
  std::vector<std::vector<std::int64_t>> indices;
};

// A float tensor every byte 0xFF (NaN), and an i64 one of -1: what a kernel
// leaves untouched shows.
Tensor poisoned(loom::Runtime& rt, DType d, const Shape& s) {
  HostArray a(d, static_cast<std::size_t>(s.product()));
  std::fill(a.bytes.begin(), a.bytes.end(), static_cast<unsigned char>(0xFF));
  return upload(rt, a, s);
}
Tensor poisoned_indices(loom::Runtime& rt, const Shape& s) {
  const std::vector<std::int64_t> v(static_cast<std::size_t>(s.product()), -1);
  return rt.upload(std::span<const std::int64_t>(v), s);
}

// The same graph on the GPU and on the CPU backend.
std::pair<Results, Results> on_both(const std::function<Results(loom::Runtime&)>& run) {
  loom::Runtime gpu;
  loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
  return {run(gpu), run(cpu)};
}

// Bit for bit: the index ops round nothing.
void expect_identical(const Results& got, const Results& want, const std::string& what) {
  ASSERT_EQ(got.floats.size(), want.floats.size());
  for (std::size_t k = 0; k < got.floats.size(); ++k) {
    const HostArray& g = got.floats[k];
    const HostArray& w = want.floats[k];
    ASSERT_EQ(g.size(), w.size()) << what << " output " << k;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (g.bits(i) != w.bits(i) && wrong++ < 5) {
        ADD_FAILURE() << what << " output " << k << " element " << i << ": gpu " << g.get(i)
                      << ", cpu " << w.get(i);
      }
    }
    EXPECT_EQ(wrong, 0U) << what << " output " << k;
  }
  ASSERT_EQ(got.indices.size(), want.indices.size());
  for (std::size_t k = 0; k < got.indices.size(); ++k) {
    EXPECT_EQ(got.indices[k], want.indices[k]) << what << " indices " << k;
  }
}

// Random values with ties (every 97th element repeats an earlier one) and
// a few NaNs (every 4099th, from element 17).
std::vector<float> values_with_ties_and_nans(std::size_t n, std::mt19937_64& rng) {
  auto v = random_values(n, rng);
  for (std::size_t i = 97; i < n; i += 97) v[i] = v[i / 2];
  for (std::size_t i = 17; i < n; i += 4099) v[i] = kNaN;
  return v;
}

// Indices in [0, extent), with every 61st made out of range (-1 or extent).
std::vector<std::int64_t> indices_with_strays(std::size_t n, std::int64_t extent,
                                              std::mt19937_64& rng) {
  auto v = random_indices(n, extent, rng);
  for (std::size_t i = 5; i < n; i += 61) v[i] = (i / 61) % 2 == 0 ? -1 : extent;
  return v;
}

// --- argmax / argmin -------------------------------------------------------

struct ArgCase {
  Shape shape;
  int dim;
  bool transpose;  // reduce x^T (of the last two dimensions) instead
};

TEST(IndexGpu, ArgmaxAndArgminMatchTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  const ArgCase cases[] = {
      {{1}, 0, false},            // one element
      {{31}, -1, false},          // a short row: one thread
      {{1000, 33}, 1, false},     // a warp a row, partly idle on its second step
      {{4097}, 0, false},         // one row, several unrolled steps
      {{1000003}, 0, false},      // one long row
      {{31, 4097}, 1, false},     // the last dimension: a warp a row
      {{245, 4097}, -1, false},   // about a million, the last dimension
      {{7, 4097, 31}, 1, false},  // a middle dimension: a thread an output
      {{31, 1, 33}, 1, false},    // a dimension of 1
      {{4097, 31}, 1, true},      // x^T [31, 4097] along its last (stride 31)
      {{4097, 31}, 0, true},      // x^T along its first (contiguous)
      {{3, 4097, 9}, 2, false},   // short contiguous rows: a thread a row
  };
  // With NaNs (a NaN wins a row that holds one: most long rows) and without
  // (the comparisons of numbers decide every row).
  for (const bool nans : {true, false}) {
    for (DType d : kFloatTypes) {
      for (const ArgCase& c : cases) {
        const auto n = static_cast<std::size_t>(c.shape.product());
        auto values = values_with_ties_and_nans(n, rng);
        if (!nans) {
          for (std::size_t i = 17; i < n; i += 4099) values[i] = values[i / 2 + 1];
        }
        const HostArray data(d, values);
        const auto run = [&](loom::Runtime& rt) {
          Tensor x = upload(rt, data, c.shape);
          if (c.transpose) x = x.transpose(x.rank() - 2, x.rank() - 1);
          const int dim = c.dim < 0 ? c.dim + x.rank() : c.dim;
          Shape out_shape = x.shape();
          out_shape[dim] = 1;  // kept at extent 1
          auto imax = poisoned_indices(rt, out_shape);
          auto vmax = poisoned(rt, d, out_shape);
          auto imin = poisoned_indices(rt, out_shape);
          auto vmin = poisoned(rt, d, out_shape);
          auto imax_only = poisoned_indices(rt, out_shape);
          loom::Graph g;
          g.add(loom::ops::argmax(x, c.dim, imax, vmax));
          g.add(loom::ops::argmin(x, c.dim, imin, vmin));
          g.add(loom::ops::argmax(x, c.dim, imax_only));
          rt.submit(g).wait();
          return Results{{download(rt, vmax), download(rt, vmin)},
                         {rt.download<std::int64_t>(imax), rt.download<std::int64_t>(imin),
                          rt.download<std::int64_t>(imax_only)}};
        };
        const auto [gpu, cpu] = on_both(run);
        expect_identical(gpu, cpu,
                         std::string(loom::to_string(d)) + " " + c.shape.to_string() + " dim " +
                             std::to_string(c.dim) + (c.transpose ? " transposed" : "") +
                             (nans ? " with NaNs" : " without NaNs"));
      }
    }
  }
}

// Neither the reduced dimension nor the outputs are contiguous (every other
// element of both): long rows take the warp kernel, short ones the thread kernel.
TEST(IndexGpu, ArgmaxOfAViewStridedEverywhereMatchesTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{62, 8194}, {8194, 62}}) {
    const HostArray data(DType::f32,
                         values_with_ties_and_nans(static_cast<std::size_t>(rows * cols), rng));
    const auto run = [&](loom::Runtime& rt) {
      const Tensor x = upload(rt, data, {rows, cols}).slice(0, 0, rows, 2).slice(1, 1, cols, 2);
      auto indices = poisoned_indices(rt, {rows / 2});
      auto values = poisoned(rt, DType::f32, {rows / 2});
      loom::Graph g;
      g.add(loom::ops::argmax(x, 1, indices, values));
      rt.submit(g).wait();
      return Results{{download(rt, values)}, {rt.download<std::int64_t>(indices)}};
    };
    const auto [gpu, cpu] = on_both(run);
    expect_identical(gpu, cpu, std::to_string(rows) + "x" + std::to_string(cols));
  }
}

// --- gather and index_select -----------------------------------------------

struct GatherCase {
  Shape x;
  Shape index;
  int dim;
};

TEST(IndexGpu, GatherMatchesTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  const GatherCase cases[] = {
      {{1}, {1}, 0},
      {{31, 33}, {31, 31}, 1},
      {{7, 4097, 5}, {7, 31, 5}, 1},   // a middle dimension
      {{40, 4097}, {33, 4097}, 0},     // index smaller than x along dim 1 too
      {{1000, 1001}, {999, 1001}, 0},  // about a million
      {{4097, 245}, {4097, 245}, -1},  // about a million, the last dimension
  };
  for (DType d : kFloatTypes) {
    for (DType it : kIndexTypes) {
      for (const GatherCase& c : cases) {
        const HostArray data(d, random_values(static_cast<std::size_t>(c.x.product()), rng));
        const int dim = c.dim < 0 ? c.dim + c.x.rank() : c.dim;
        const auto picks =
            indices_with_strays(static_cast<std::size_t>(c.index.product()), c.x[dim], rng);
        const auto run = [&](loom::Runtime& rt) {
          const Tensor x = upload(rt, data, c.x);
          const Tensor index = upload_index(rt, it, picks, c.index);
          auto out = poisoned(rt, d, c.index);
          loom::Graph g;
          g.add(loom::ops::gather(x, c.dim, index, out));
          rt.submit(g).wait();
          return Results{{download(rt, out)}, {}};
        };
        const auto [gpu, cpu] = on_both(run);
        expect_identical(gpu, cpu,
                         std::string(loom::to_string(d)) + " " + std::string(loom::to_string(it)) +
                             " x " + c.x.to_string() + " index " + c.index.to_string());
      }
    }
  }
}

TEST(IndexGpu, GatherOfTransposedInputsMatchesTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  constexpr std::int64_t kRows = 257, kCols = 129;
  const HostArray data(DType::bf16, random_values(kRows * kCols, rng));
  const auto picks = indices_with_strays(kRows * kCols, kRows, rng);
  const auto run = [&](loom::Runtime& rt) {
    const Tensor x = upload(rt, data, {kRows, kCols}).transpose(0, 1);  // [129, 257]
    const Tensor index = upload_index(rt, DType::i64, picks, {kRows, kCols}).transpose(0, 1);
    auto out = poisoned(rt, DType::bf16, {kCols, kRows});
    loom::Graph g;
    g.add(loom::ops::gather(x, 1, index, out));
    rt.submit(g).wait();
    return Results{{download(rt, out)}, {}};
  };
  const auto [gpu, cpu] = on_both(run);
  expect_identical(gpu, cpu, "transposed");
}

struct SelectCase {
  Shape x;
  int dim;
  std::int64_t count;
  std::int64_t column_offset;  // a view starting this many elements into each row
};

TEST(IndexGpu, IndexSelectMatchesTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  const SelectCase cases[] = {
      {{1, 1}, 0, 1, 0},         {{31, 31}, 0, 31, 0},  // rows of 31: element by element
      {{4097, 256}, 0, 4097, 0},                        // about a million: 16 bytes a thread
      {{1000, 260}, 0, 4097, 4},                        // a view 16-byte aligned for f32 only
      {{1000, 257}, 0, 4097, 1},                        // misaligned rows: the fallback
      {{31, 4097}, 1, 33, 0},                           // columns
      {{5, 4097, 7}, 1, 31, 0},                         // a middle dimension
  };
  for (DType d : kFloatTypes) {
    for (DType it : kIndexTypes) {
      for (const SelectCase& c : cases) {
        const HostArray data(d, random_values(static_cast<std::size_t>(c.x.product()), rng));
        Shape view = c.x;
        view[view.rank() - 1] -= c.column_offset;
        const auto picks = indices_with_strays(static_cast<std::size_t>(c.count), view[c.dim], rng);
        const auto run = [&](loom::Runtime& rt) {
          Tensor x = upload(rt, data, c.x);
          x = x.slice(x.rank() - 1, c.column_offset, c.x[c.x.rank() - 1]);
          const Tensor index = upload_index(rt, it, picks, {c.count});
          Shape out_shape = view;
          out_shape[c.dim] = c.count;
          auto out = poisoned(rt, d, out_shape);
          loom::Graph g;
          g.add(loom::ops::index_select(x, c.dim, index, out));
          rt.submit(g).wait();
          return Results{{download(rt, out)}, {}};
        };
        const auto [gpu, cpu] = on_both(run);
        expect_identical(gpu, cpu,
                         std::string(loom::to_string(d)) + " " + std::string(loom::to_string(it)) +
                             " x " + c.x.to_string() + " dim " + std::to_string(c.dim) +
                             " offset " + std::to_string(c.column_offset));
      }
    }
  }
}

// --- scatter_add -----------------------------------------------------------

struct ScatterCase {
  Shape dst;
  Shape src;
  int dim;
};

TEST(IndexGpu, ScatterAddMatchesTheCpuBackendUpToTheOrderOfItsSums) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  const ScatterCase cases[] = {
      {{1}, {1}, 0},
      {{31, 31}, {31, 31}, 1},
      {{1000, 256}, {4097, 256}, 0},    // about a million, many collisions a row
      {{7, 50, 31}, {7, 4097, 31}, 1},  // a middle dimension
      {{4097, 33}, {4097, 245}, -1},
  };
  for (DType it : kIndexTypes) {
    for (const ScatterCase& c : cases) {
      const auto base = random_values(static_cast<std::size_t>(c.dst.product()), rng);
      const auto add = random_values(static_cast<std::size_t>(c.src.product()), rng);
      const int dim = c.dim < 0 ? c.dim + c.dst.rank() : c.dim;
      const auto picks =
          indices_with_strays(static_cast<std::size_t>(c.src.product()), c.dst[dim], rng);
      const auto run = [&](loom::Runtime& rt) {
        auto dst = rt.upload(std::span<const float>(base), c.dst);
        const auto src = rt.upload(std::span<const float>(add), c.src);
        const Tensor index = upload_index(rt, it, picks, c.src);
        loom::Graph g;
        g.add(loom::ops::scatter_add(dst, c.dim, index, src));
        rt.submit(g).wait();
        return rt.download<float>(dst);
      };
      loom::Runtime gpu;
      loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
      const auto got = run(gpu);
      const auto want = run(cpu);
      ASSERT_EQ(got.size(), want.size());
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        // Up to about a hundred terms of magnitude < 8, added in another order.
        if (!(std::fabs(got[i] - want[i]) <= 1e-3F + 1e-4F * std::fabs(want[i])) && wrong++ < 5) {
          ADD_FAILURE() << to_string(it) << " " << c.src.to_string() << " element " << i << ": gpu "
                        << got[i] << ", cpu " << want[i];
        }
      }
      EXPECT_EQ(wrong, 0U) << to_string(it) << " " << c.src.to_string();
    }
  }
}

// --- one_hot ---------------------------------------------------------------

TEST(IndexGpu, OneHotMatchesTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  const std::pair<std::int64_t, std::int64_t> shapes[] = {
      {1, 1}, {31, 31}, {4097, 3}, {4097, 257}, {1, 1000003}};
  for (DType d : kFloatTypes) {
    for (DType it : kIndexTypes) {
      for (const auto& [rows, classes] : shapes) {
        const auto labels = indices_with_strays(static_cast<std::size_t>(rows), classes, rng);
        const auto run = [&](loom::Runtime& rt) {
          const Tensor l = upload_index(rt, it, labels, {rows});
          auto out = poisoned(rt, d, {rows, classes});
          loom::Graph g;
          g.add(loom::ops::one_hot(l, out));
          rt.submit(g).wait();
          return Results{{download(rt, out)}, {}};
        };
        const auto [gpu, cpu] = on_both(run);
        expect_identical(gpu, cpu,
                         std::string(loom::to_string(d)) + " " + std::string(loom::to_string(it)) +
                             " " + std::to_string(rows) + "x" + std::to_string(classes));
      }
    }
  }
}

// --- compiled graphs and memory spaces ---------------------------------------

// The ops launch through loom: a compiled graph describes their kernels, and
// a rebinding run points them at other tensors without copies.
TEST(IndexGpu, ACompiledGraphReplaysAndRebindsLikeTheEagerRun) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  constexpr std::int64_t kVocab = 1000, kWidth = 128, kTokens = 300;
  loom::Runtime rt;
  const auto table_a = random_values(kVocab * kWidth, rng);
  const auto table_b = random_values(kVocab * kWidth, rng);
  const auto ids = random_indices(kTokens, kVocab, rng);
  auto table = rt.upload(std::span<const float>(table_a), {kVocab, kWidth});
  auto other = rt.upload(std::span<const float>(table_b), {kVocab, kWidth});
  const Tensor index = upload_index(rt, DType::i64, ids, {kTokens});
  auto rows = rt.tensor<float>({kTokens, kWidth});
  auto best = rt.tensor<std::int64_t>({kTokens});
  loom::Graph g;
  g.add(loom::ops::index_select(table, 0, index, rows));
  g.add(loom::ops::argmax(rows, 1, best));
  loom::Executable exe = rt.compile(g);
  for (const auto* values : {&table_a, &table_b}) {
    if (values == &table_a) {
      exe.run().wait();
    } else {
      exe.run({{table, other}}).wait();
    }
    const auto got_rows = rt.download<float>(rows);
    const auto got_best = rt.download<std::int64_t>(best);
    for (std::int64_t t = 0; t < kTokens; ++t) {
      const float* want = values->data() + ids[static_cast<std::size_t>(t)] * kWidth;
      std::int64_t arg = 0;
      for (std::int64_t j = 0; j < kWidth; ++j) {
        ASSERT_EQ(got_rows[static_cast<std::size_t>(t * kWidth + j)], want[j]) << t << "," << j;
        if (want[j] > want[arg]) arg = j;
      }
      EXPECT_EQ(got_best[static_cast<std::size_t>(t)], arg) << t;
    }
  }
}

TEST(IndexGpu, TensorsInDifferentMemorySpacesAreRejected) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto device_x = rt.tensor<float>({4, 6});
  auto host_x = rt.tensor<float>({4, 6}, loom::Memory::pinned);
  auto device_i = rt.tensor<std::int64_t>({4});
  auto host_i = rt.tensor<std::int64_t>({4}, loom::Memory::pinned);
  using loom::test::expect_rejected;
  expect_rejected(rt, loom::ops::argmax(host_x, 1, device_i), "one memory space");
  expect_rejected(rt, loom::ops::index_select(device_x, 0, host_i, rt.tensor<float>({4, 6})),
                  "one memory space");
  expect_rejected(rt, loom::ops::one_hot(host_i, rt.tensor<float>({4, 3})), "one memory space");
  expect_rejected(
      rt,
      loom::ops::scatter_add(device_x, 0, rt.tensor<std::int64_t>({4, 6}, loom::Memory::pinned),
                             rt.tensor<float>({4, 6})),
      "one memory space");
}

}  // namespace
