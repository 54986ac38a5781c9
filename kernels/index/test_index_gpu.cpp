// The index ops on the GPU against the same graphs on the CPU backend: every
// op, dtype and index type at awkward sizes (1, 31, 4097, about a million
// elements), random data that is never zero, with ties, NaNs and
// out-of-range indices mixed in, outputs poisoned before each run, strided
// and misaligned views (the 16-byte path of index_select and its
// fallback), argmax along the last, a middle and a non-contiguous
// dimension (its warp and thread kernels), a compiled graph's replays
// (the ops' launches described, then rebound to other tensors), expanded
// inputs (stride 0) of every op, empty and size-1 dimensions into outputs
// fenced by poison, and mixed memory spaces rejected.
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
#include <cstddef>
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

// The same without NaNs: the comparisons of numbers decide every row.
std::vector<float> values_with_ties(std::size_t n, std::mt19937_64& rng) {
  auto v = values_with_ties_and_nans(n, rng);
  for (std::size_t i = 17; i < n; i += 4099) v[i] = v[i / 2 + 1];
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
      {1, 1},
      {31, 31},
      {4097, 3},
      {4097, 257},
      {1, 1000003},
      // Whole 16-byte vectors a row: the vectorized kernel (12: in f32 only).
      {4097, 8},
      {513, 1000},
      {65, 12}};
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

// --- expanded inputs ----------------------------------------------------------

// Runs the op `make` builds into a poisoned output of `shape`, and reads it back.
Results into_poisoned(loom::Runtime& rt, DType d, const Shape& shape,
                      const std::function<loom::OpPtr(const Tensor&)>& make) {
  auto out = poisoned(rt, d, shape);
  loom::Graph g;
  g.add(make(out));
  rt.submit(g).wait();
  return Results{{download(rt, out)}, {}};
}

// argmax and argmin of x along dim (indices and values, dim kept at extent 1).
Results arg_reduced(loom::Runtime& rt, const Tensor& x, int dim) {
  Shape out_shape = x.shape();
  out_shape[dim] = 1;
  auto imax = poisoned_indices(rt, out_shape);
  auto vmax = poisoned(rt, x.dtype(), out_shape);
  auto imin = poisoned_indices(rt, out_shape);
  auto vmin = poisoned(rt, x.dtype(), out_shape);
  loom::Graph g;
  g.add(loom::ops::argmax(x, dim, imax, vmax));
  g.add(loom::ops::argmin(x, dim, imin, vmin));
  rt.submit(g).wait();
  return Results{{download(rt, vmax), download(rt, vmin)},
                 {rt.download<std::int64_t>(imax), rt.download<std::int64_t>(imin)}};
}

struct NamedRun {
  std::string name;
  std::function<Results(loom::Runtime&)> run;
};

// Inputs with stride 0 (Tensor::expand): a row or a column grown to a
// table, an added dimension, an index repeated along a row or a column.
// The walks step nowhere along such a dimension, on the 16-byte path of
// gather and index_select too (an index expanded along a row, a table of
// one row); argmax along it ties everywhere (index 0), on the warp kernel
// (contiguous and strided rows) and the thread kernel.
TEST(IndexGpu, ExpandedInputsMatchTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  constexpr std::int64_t kRows = 1031, kCols = 256;  // rows of whole 16-byte units in every dtype
  const Shape table_shape{kRows, kCols};
  loom::Runtime gpu;
  loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
  for (DType d : kFloatTypes) {
    for (DType it : kIndexTypes) {
      const HostArray table(d, random_values(kRows * kCols, rng));
      const HostArray row(d, values_with_ties(2 * kCols, rng));  // every other: a step
      const HostArray column(d, values_with_ties(kRows, rng));
      const HostArray slab(d, random_values(7 * kCols, rng));
      const auto along_rows = indices_with_strays(kRows * kCols, kCols, rng);
      const auto along_columns = indices_with_strays(kRows * kCols, kRows, rng);
      const auto picks = indices_with_strays(kRows, kRows, rng);
      const auto column_picks = indices_with_strays(kCols, kCols, rng);
      const auto middle_picks = indices_with_strays(5, 9, rng);
      const auto first_row = [&](loom::Runtime& rt) {
        return upload(rt, row, {2 * kCols}).slice(0, 0, kCols);
      };
      const auto first_column = [&](loom::Runtime& rt) { return upload(rt, column, {kRows, 1}); };
      const auto index = [&](loom::Runtime& rt, const std::vector<std::int64_t>& v,
                             const Shape& s) { return upload_index(rt, it, v, s); };
      const auto gathered = [&](const std::function<loom::OpPtr(loom::Runtime&, const Tensor&)>& op,
                                const Shape& out_shape) {
        return [&, op, out_shape](loom::Runtime& rt) {
          return into_poisoned(rt, d, out_shape, [&](const Tensor& out) { return op(rt, out); });
        };
      };
      namespace ops = loom::ops;
      const NamedRun runs[] = {
          {"gather from a row expanded to a table, along its rows",
           gathered(
               [&](loom::Runtime& rt, const Tensor& out) {
                 return ops::gather(first_row(rt).expand(table_shape), 1,
                                    index(rt, along_rows, table_shape), out);
               },
               table_shape)},
          {"gather along the expanded dimension of a row",
           gathered(
               [&](loom::Runtime& rt, const Tensor& out) {
                 return ops::gather(first_row(rt).reshape({1, kCols}).expand(table_shape), 0,
                                    index(rt, along_columns, table_shape), out);
               },
               table_shape)},
          {"gather from a column expanded to a table (stride 0 innermost)",
           gathered(
               [&](loom::Runtime& rt, const Tensor& out) {
                 return ops::gather(first_column(rt).expand(table_shape), 0,
                                    index(rt, along_columns, table_shape), out);
               },
               table_shape)},
          {"gather with an index expanded along each row (16-byte rows)",
           gathered(
               [&](loom::Runtime& rt, const Tensor& out) {
                 return ops::gather(upload(rt, table, table_shape), 0,
                                    index(rt, picks, {kRows, 1}).expand(table_shape), out);
               },
               table_shape)},
          {"gather with an index expanded down the columns",
           gathered(
               [&](loom::Runtime& rt, const Tensor& out) {
                 const std::vector<std::int64_t> one_row(along_columns.begin(),
                                                         along_columns.begin() + kCols);
                 return ops::gather(upload(rt, table, table_shape), 0,
                                    index(rt, one_row, {1, kCols}).expand(table_shape), out);
               },
               table_shape)},
          {"index_select of rows of a row expanded to a table (16-byte rows, stride 0)",
           gathered(
               [&](loom::Runtime& rt, const Tensor& out) {
                 return ops::index_select(first_row(rt).expand(table_shape), 0,
                                          index(rt, picks, {kRows}), out);
               },
               table_shape)},
          {"index_select of rows of a column expanded to a table",
           gathered(
               [&](loom::Runtime& rt, const Tensor& out) {
                 return ops::index_select(first_column(rt).expand(table_shape), 0,
                                          index(rt, picks, {kRows}), out);
               },
               table_shape)},
          {"index_select of columns of a column expanded to a table",
           gathered(
               [&](loom::Runtime& rt, const Tensor& out) {
                 return ops::index_select(first_column(rt).expand(table_shape), 1,
                                          index(rt, column_picks, {kCols}), out);
               },
               table_shape)},
          {"index_select with one index expanded to every row",
           gathered(
               [&](loom::Runtime& rt, const Tensor& out) {
                 return ops::index_select(upload(rt, table, table_shape), 0,
                                          index(rt, {picks[0]}, {1}).expand({kRows}), out);
               },
               table_shape)},
          {"index_select along an added middle dimension",
           gathered(
               [&](loom::Runtime& rt, const Tensor& out) {
                 return ops::index_select(upload(rt, slab, {7, 1, kCols}).expand({7, 9, kCols}), 1,
                                          index(rt, middle_picks, {5}), out);
               },
               {7, 5, kCols})},
          {"one_hot of one label expanded to every row",
           gathered(
               [&](loom::Runtime& rt, const Tensor& out) {
                 return ops::one_hot(index(rt, {column_picks[0]}, {1}).expand({kRows}), out);
               },
               table_shape)},
          // argmax and argmin: a warp a row (contiguous, every row one address) ...
          {"argmax along a row expanded to a table",
           [&](loom::Runtime& rt) {
             return arg_reduced(rt, upload(rt, row, {2 * kCols}).expand({31, 2 * kCols}), 1);
           }},
          // ... and a thread an output along the expanded dimension (all tie) ...
          {"argmax down a row expanded to a table",
           [&](loom::Runtime& rt) {
             return arg_reduced(rt, first_row(rt).expand(table_shape), 0);
           }},
          // ... a warp a contiguous column, the outputs of stride 0 ...
          {"argmax down a column expanded to a table",
           [&](loom::Runtime& rt) {
             return arg_reduced(rt, first_column(rt).expand({kRows, 33}), 0);
           }},
          {"argmax along a column expanded to a table",
           [&](loom::Runtime& rt) {
             return arg_reduced(rt, first_column(rt).expand({kRows, 33}), 1);
           }},
          // ... and a warp along stride 0 where the outputs are strided (every other element).
          {"argmax down a stepped row expanded to a table",
           [&](loom::Runtime& rt) {
             return arg_reduced(
                 rt, upload(rt, row, {2 * kCols}).slice(0, 0, 2 * kCols, 2).expand({300, kCols}),
                 0);
           }},
      };
      for (const NamedRun& r : runs) {
        const Results got = r.run(gpu);
        const Results want = r.run(cpu);
        expect_identical(got, want,
                         r.name + " " + std::string(loom::to_string(d)) + " " +
                             std::string(loom::to_string(it)));
      }
    }
  }

  // scatter_add of an expanded source (a scalar, a row, a column with an
  // expanded index): many additions to each destination, in another order
  // on the GPU.
  for (DType it : kIndexTypes) {
    constexpr std::int64_t kDst = 97;
    const auto base = random_values(kDst * kCols, rng);
    const auto values = random_values(kRows, rng);
    const auto down = indices_with_strays(kRows * kCols, kDst, rng);
    const auto across = indices_with_strays(kRows * kCols, kCols, rng);
    const auto per_row = indices_with_strays(kRows, kDst, rng);
    struct ScatterRun {
      std::string name;
      int dim;
      std::function<Tensor(loom::Runtime&)> src;
      std::function<Tensor(loom::Runtime&)> index;
    };
    const ScatterRun runs[] = {
        {"a scalar", 0,
         [&](loom::Runtime& rt) {
           return rt.upload(std::span<const float>(values.data(), 1), {1}).expand(table_shape);
         },
         [&](loom::Runtime& rt) { return upload_index(rt, it, down, table_shape); }},
        {"a row", 1,
         [&](loom::Runtime& rt) {
           return rt.upload(std::span<const float>(values.data(), kCols), {kCols})
               .expand(table_shape);
         },
         [&](loom::Runtime& rt) { return upload_index(rt, it, across, table_shape); }},
        {"a column, its index expanded too", 0,
         [&](loom::Runtime& rt) {
           return rt.upload(std::span<const float>(values), {kRows, 1}).expand(table_shape);
         },
         [&](loom::Runtime& rt) {
           return upload_index(rt, it, per_row, {kRows, 1}).expand(table_shape);
         }},
    };
    for (const ScatterRun& r : runs) {
      const Shape dst_shape = r.dim == 0 ? Shape{kDst, kCols} : Shape{kRows, kCols};
      const auto run = [&](loom::Runtime& rt) {
        std::vector<float> start(static_cast<std::size_t>(dst_shape.product()));
        for (std::size_t i = 0; i < start.size(); ++i) start[i] = base[i % base.size()];
        auto dst = rt.upload(std::span<const float>(start), dst_shape);
        loom::Graph g;
        g.add(loom::ops::scatter_add(dst, r.dim, r.index(rt), r.src(rt)));
        rt.submit(g).wait();
        return rt.download<float>(dst);
      };
      const auto got = run(gpu);
      const auto want = run(cpu);
      ASSERT_EQ(got.size(), want.size());
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        // About a dozen terms of magnitude < 8, added in another order.
        if (!(std::fabs(got[i] - want[i]) <= 1e-3F + 1e-4F * std::fabs(want[i])) && wrong++ < 5) {
          ADD_FAILURE() << to_string(it) << " " << r.name << " element " << i << ": gpu " << got[i]
                        << ", cpu " << want[i];
        }
      }
      EXPECT_EQ(wrong, 0U) << to_string(it) << " " << r.name;
    }
  }
}

// --- empty and size-1 dimensions ------------------------------------------------

// Poisoned elements on each side of an output: a write outside it shows.
constexpr std::size_t kFence = 8;

// An output of `shape` in the middle of an arena kFence elements longer on
// each side, every byte 0xFF (an i64 arena: -1), but for `values` inside.
struct Fenced {
  Tensor arena;
  Tensor view;
};
Fenced fenced(loom::Runtime& rt, DType d, const Shape& shape,
              const std::vector<float>& values = {}) {
  const auto n = static_cast<std::size_t>(shape.product());
  const Shape whole{static_cast<std::int64_t>(n + 2 * kFence)};
  Tensor arena;
  if (d == DType::i64) {
    arena = poisoned_indices(rt, whole);
  } else {
    HostArray a(d, n + 2 * kFence);
    std::fill(a.bytes.begin(), a.bytes.end(), static_cast<unsigned char>(0xFF));
    for (std::size_t i = 0; i < values.size(); ++i) a.set(kFence + i, values[i]);
    arena = upload(rt, a, whole);
  }
  const auto first = static_cast<std::int64_t>(kFence);
  return {arena, arena.slice(0, first, first + static_cast<std::int64_t>(n)).reshape(shape)};
}

// "" when the fences are still poisoned and every element between them was
// written (no op here leaves an output element alone).
template <class IsPoison>
std::string fence_problem(std::size_t size, const IsPoison& is_poison) {
  for (std::size_t i = 0; i < size; ++i) {
    const bool fence = i < kFence || i >= size - kFence;
    if (fence && !is_poison(i)) return "wrote fence element " + std::to_string(i);
    if (!fence && is_poison(i)) return "left output element " + std::to_string(i - kFence);
  }
  return "";
}
std::string fence_problem(const HostArray& a) {
  const std::uint32_t poison = a.element_size() == 4 ? 0xFFFFFFFFU : 0xFFFFU;
  return fence_problem(a.size(), [&](std::size_t i) { return a.bits(i) == poison; });
}
std::string fence_problem(const std::vector<std::int64_t>& v) {
  return fence_problem(v.size(), [&](std::size_t i) { return v[i] == -1; });
}

// Every op with a dimension of 0 (no output, or an output every index of
// which is out of an empty range, or nothing to add) and of 1, through
// graphs on both backends, into outputs fenced by poison: the GPU writes
// every element of its output and nothing past it, as the CPU does, and
// launches nothing that faults.
TEST(IndexGpu, EmptyAndSizeOneDimensionsWriteTheirOutputsAndNothingElse) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  loom::Runtime gpu;
  loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
  namespace ops = loom::ops;
  for (DType d : kFloatTypes) {
    for (DType it : kIndexTypes) {
      const auto data = random_values(64, rng);  // enough for any input here
      // An input of `shape` holding data's first elements (none: nothing allocated to read).
      const auto input = [&](loom::Runtime& rt, DType dtype, const Shape& shape) {
        const auto n = static_cast<std::size_t>(shape.product());
        if (n == 0) return rt.tensor(dtype, shape);
        return upload(rt, HostArray(dtype, std::vector<float>(data.begin(), data.begin() + n)),
                      shape);
      };
      const auto index = [&](loom::Runtime& rt, const std::vector<std::int64_t>& v,
                             const Shape& shape) {
        return v.empty() ? rt.tensor(it, shape) : upload_index(rt, it, v, shape);
      };
      // gather (or index_select) of x [x_shape] along dim into a fenced output.
      const auto picked = [&](bool select, Shape x_shape, int dim, std::vector<std::int64_t> v,
                              Shape index_shape, Shape out_shape) {
        return [&, select, x_shape, dim, v, index_shape, out_shape](loom::Runtime& rt) {
          const Fenced out = fenced(rt, d, out_shape);
          const Tensor x = input(rt, d, x_shape);
          const Tensor i = index(rt, v, index_shape);
          loom::Graph g;
          g.add(select ? ops::index_select(x, dim, i, out.view) : ops::gather(x, dim, i, out.view));
          rt.submit(g).wait();
          return Results{{download(rt, out.arena)}, {}};
        };
      };
      const auto hot = [&](std::vector<std::int64_t> labels, Shape out_shape) {
        return [&, labels, out_shape](loom::Runtime& rt) {
          const Fenced out = fenced(rt, d, out_shape);
          loom::Graph g;
          g.add(ops::one_hot(index(rt, labels, {out_shape[0]}), out.view));
          rt.submit(g).wait();
          return Results{{download(rt, out.arena)}, {}};
        };
      };
      // argmax and argmin of x (x: an input, or a row of 4 expanded to x_shape) along dim.
      const auto arg = [&](Shape x_shape, int dim, bool expanded) {
        return [&, x_shape, dim, expanded](loom::Runtime& rt) {
          const Tensor x =
              expanded ? input(rt, d, {1, x_shape[1]}).expand(x_shape) : input(rt, d, x_shape);
          Shape out_shape = x_shape;
          out_shape[dim] = 1;
          const Fenced imax = fenced(rt, DType::i64, out_shape);
          const Fenced vmax = fenced(rt, d, out_shape);
          const Fenced imin = fenced(rt, DType::i64, out_shape);
          const Fenced vmin = fenced(rt, d, out_shape);
          loom::Graph g;
          g.add(ops::argmax(x, dim, imax.view, vmax.view));
          g.add(ops::argmin(x, dim, imin.view, vmin.view));
          rt.submit(g).wait();
          return Results{
              {download(rt, vmax.arena), download(rt, vmin.arena)},
              {rt.download<std::int64_t>(imax.arena), rt.download<std::int64_t>(imin.arena)}};
        };
      };
      // scatter_add of src [index_shape] into a fenced dst holding data (no two
      // indices here meet: the sums are exact in any order).
      const auto scatter = [&](Shape dst_shape, int dim, std::vector<std::int64_t> v,
                               Shape index_shape) {
        return [&, dst_shape, dim, v, index_shape](loom::Runtime& rt) {
          const auto n = static_cast<std::size_t>(dst_shape.product());
          const Fenced dst =
              fenced(rt, DType::f32, dst_shape,
                     std::vector<float>(data.end() - static_cast<std::ptrdiff_t>(n), data.end()));
          loom::Graph g;
          g.add(ops::scatter_add(dst.view, dim, index(rt, v, index_shape),
                                 input(rt, DType::f32, index_shape)));
          rt.submit(g).wait();
          return Results{{download(rt, dst.arena)}, {}};
        };
      };
      const NamedRun runs[] = {
          // Dimensions of 0.
          {"gather, no index rows", picked(false, {4, 3}, 0, {}, {0, 3}, {0, 3})},
          {"gather from no rows (every index out of range)",
           picked(false, {0, 3}, 0, {0, 0, 1, 1, 0, 2}, {2, 3}, {2, 3})},
          {"gather, rows of no columns", picked(false, {4, 0}, 1, {}, {4, 0}, {4, 0})},
          {"index_select, no indices", picked(true, {4, 3}, 0, {}, {0}, {0, 3})},
          {"index_select from no rows (every index out of range)",
           picked(true, {0, 3}, 0, {0, 1}, {2}, {2, 3})},
          {"index_select, rows of no columns", picked(true, {4, 0}, 0, {3, 1}, {2}, {2, 0})},
          {"one_hot, no labels", hot({}, {0, 5})},
          {"one_hot, no classes", hot({0, 1, 2}, {3, 0})},
          {"argmax, no rows", arg({0, 4}, 1, false)},
          {"argmax, rows of no columns, down the rows", arg({3, 0}, 0, false)},
          {"argmax, a row expanded to no rows", arg({0, 4}, 1, true)},
          // Dimensions of 1 (7 and -1 out of range).
          {"gather, one element", picked(false, {1, 1}, 0, {0}, {1, 1}, {1, 1})},
          {"gather down a column", picked(false, {5, 1}, 0, {4, 0, 7}, {3, 1}, {3, 1})},
          {"gather along a row", picked(false, {1, 6}, 1, {5, -1, 0, 2}, {1, 4}, {1, 4})},
          {"index_select, one row", picked(true, {1, 7}, 0, {0}, {1}, {1, 7})},
          {"index_select, rows of one column", picked(true, {6, 1}, 0, {5, 0, 6, 2}, {4}, {4, 1})},
          {"index_select, columns of a column", picked(true, {6, 1}, 1, {0, 0, 1}, {3}, {6, 3})},
          {"one_hot, one row of one class", hot({0}, {1, 1})},
          {"one_hot, rows of one class", hot({0, 1, 0}, {3, 1})},
          {"argmax of one element", arg({1, 1}, 1, false)},
          {"argmax down one row", arg({1, 7}, 0, false)},
          {"argmax along one row", arg({1, 7}, 1, false)},
          {"argmax along rows of one column", arg({7, 1}, 1, false)},
          {"argmax down one column", arg({7, 1}, 0, false)},
      };
      std::vector<NamedRun> all(std::begin(runs), std::end(runs));
      if (d == DType::f32) {  // scatter_add is f32 only
        all.push_back({"scatter_add, no source rows", scatter({2, 3}, 0, {}, {0, 3})});
        all.push_back({"scatter_add into no rows (every index out of range)",
                       scatter({0, 3}, 0, {0, 1, 0, 1, 0, 1}, {2, 3})});
        all.push_back({"scatter_add, rows of no columns", scatter({2, 0}, 0, {}, {2, 0})});
        all.push_back({"scatter_add, one element", scatter({1, 1}, 0, {0}, {1, 1})});
        all.push_back({"scatter_add down a column", scatter({5, 1}, 0, {4, 0, 7}, {3, 1})});
        all.push_back({"scatter_add along a row", scatter({1, 6}, 1, {5, 0, 3, 1, 4, -1}, {1, 6})});
      }
      for (const NamedRun& r : all) {
        const std::string what =
            r.name + " " + std::string(loom::to_string(d)) + " " + std::string(loom::to_string(it));
        const Results got = r.run(gpu);
        const Results want = r.run(cpu);
        for (const Results* results : {&got, &want}) {
          const char* backend = results == &got ? " (gpu)" : " (cpu)";
          for (const HostArray& a : results->floats)
            EXPECT_EQ(fence_problem(a), "") << what << backend;
          for (const auto& v : results->indices) EXPECT_EQ(fence_problem(v), "") << what << backend;
        }
        expect_identical(got, want, what);
      }
    }
  }
  // A kernel that faulted would have left its error behind.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
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
