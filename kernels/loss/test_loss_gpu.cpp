// The loss family on the GPU: every op, dtype and reduction against the same
// graph on the CPU backend, over warp-row and block-row shapes, vectorized
// and scalar rows (odd widths, offset slices), ignored and out-of-range
// labels; no rows for each reduction (a mean of NaN, a sum of 0, nothing
// else written); the reduction's bits the same on every run; a compiled
// replay.
#include "support/gpu.hpp"

#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/ops/loss.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "loss/test_support.hpp"
#include "support/seed.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

using loom::DType;
using loom::ops::CrossEntropyOptions;
using loom::ops::LossReduction;

struct Case {
  std::int64_t rows;
  std::int64_t cols;
  std::int64_t pad;         // extra columns of the tensor the rows are sliced from
  std::int64_t offset = 0;  // the first column of the slice (1: rows misaligned)
};

struct Results {
  std::vector<float> loss, lse, grad, logp;
};

// The forward, backward and log_softmax of one case on `rt`, outputs
// poisoned first; 16-bit logits are cast from the same f32 values.
Results run_case(loom::Runtime& rt, const Case& c, DType d, LossReduction reduction,
                 const std::vector<float>& values, const std::vector<std::int64_t>& labels) {
  const std::int64_t width = c.cols + c.pad;
  auto wide32 = rt.upload(std::span<const float>(values), {c.rows, width});
  auto wide = rt.tensor(d, {c.rows, width});
  auto logits = wide.slice(1, c.offset, c.offset + c.cols);
  auto tlabels = rt.upload(std::span<const std::int64_t>(labels), {c.rows});
  const bool none = reduction == LossReduction::none;
  auto loss = rt.tensor<float>({none ? c.rows : 1});
  auto lse = rt.tensor<float>({c.rows});
  auto upstream = rt.tensor<float>({none ? c.rows : 1});
  auto grad = rt.tensor(d, {c.rows, c.cols});
  auto logp = rt.tensor(d, {c.rows, c.cols});
  auto grad32 = rt.tensor<float>({c.rows, c.cols});
  auto logp32 = rt.tensor<float>({c.rows, c.cols});
  loom::Graph g;
  g.add(loom::ops::cast(wide32, wide));
  g.add(loom::ops::fill(loss, -7.0F));
  g.add(loom::ops::fill(grad32, -7.0F));
  g.add(loom::ops::fill(upstream, 0.75F));
  const CrossEntropyOptions options{.reduction = reduction};
  g.add(loom::ops::cross_entropy(logits, tlabels, loss, lse, options));
  g.add(loom::ops::cross_entropy_backward(logits, tlabels, lse, upstream, grad, options));
  g.add(loom::ops::log_softmax(logits, logp));
  g.add(loom::ops::cast(grad, grad32));
  g.add(loom::ops::cast(logp, logp32));
  rt.submit(g).wait();
  return {rt.download<float>(loss), rt.download<float>(lse), rt.download<float>(grad32),
          rt.download<float>(logp32)};
}

TEST(LossGpu, EveryOpDtypeAndReductionMatchesTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const Case cases[] = {{1, 1, 0},    {31, 10, 0},   {256, 10, 3},  {7, 1000, 0}, {5, 1024, 1},
                        {3, 4097, 0}, {4, 32000, 0}, {2, 32000, 5}, {300, 64, 0}};
  loom::Runtime gpu;
  loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
  for (const Case& c : cases) {
    const auto values =
        loom::test::loss::random_logits(static_cast<std::size_t>(c.rows * (c.cols + c.pad)), rng);
    const auto labels =
        loom::test::loss::random_labels<std::int64_t>(c.rows, c.cols, rng, -100, true);
    // One label out of range (a NaN row on both) where the rows' losses stay
    // apart; a mean or a sum would be NaN and compare nothing.
    auto with_stray = labels;
    if (c.rows > 10) with_stray[7] = c.cols;
    for (DType d : {DType::f32, DType::f16, DType::bf16}) {
      for (LossReduction r : {LossReduction::mean, LossReduction::sum, LossReduction::none}) {
        const auto& y = r == LossReduction::none ? with_stray : labels;
        const Results got = run_case(gpu, c, d, r, values, y);
        const Results want = run_case(cpu, c, d, r, values, y);
        const std::string where = std::to_string(c.rows) + "x" + std::to_string(c.cols) + " pad " +
                                  std::to_string(c.pad) + " offset " + std::to_string(c.offset) +
                                  " " + std::string(to_string(d)) + " reduction " +
                                  std::to_string(static_cast<int>(r));
        EXPECT_EQ(loom::test::loss::compare(got.loss, want.loss, DType::f32), "") << where;
        EXPECT_EQ(loom::test::loss::compare(got.lse, want.lse, DType::f32), "") << where;
        EXPECT_EQ(loom::test::loss::compare(got.grad, want.grad, d), "") << where;
        EXPECT_EQ(loom::test::loss::compare(got.logp, want.logp, d), "") << where;
      }
    }
  }
}

// The forward, backward and log_softmax of no rows on `rt`, every output a
// view of the middle of a tensor of -7s (loss: the second of three; lse,
// gradient and log_softmax: no elements). Returns the whole tensors.
Results run_no_rows(loom::Runtime& rt, DType d, DType label_type, LossReduction reduction) {
  const std::int64_t cols = 5;
  const bool none = reduction == LossReduction::none;
  auto loss_slots = rt.tensor<float>({3});
  auto lse_slots = rt.tensor<float>({3});
  auto upstream_slots = rt.tensor<float>({3});
  auto sevens = rt.tensor<float>({3, cols});
  auto grad_rows = rt.tensor(d, {3, cols});
  auto logp_rows = rt.tensor(d, {3, cols});
  loom::Graph poison;
  for (const auto& t : {loss_slots, lse_slots, upstream_slots, sevens}) {
    poison.add(loom::ops::fill(t, -7.0F));
  }
  poison.add(loom::ops::cast(sevens, grad_rows));
  poison.add(loom::ops::cast(sevens, logp_rows));
  rt.submit(poison).wait();
  const CrossEntropyOptions options{.reduction = reduction};
  const auto logits = rt.tensor(d, {0, cols});
  const auto labels = rt.tensor(label_type, {0});
  const auto lse = lse_slots.slice(0, 1, 1);
  loom::Graph g;
  g.add(
      loom::ops::cross_entropy(logits, labels, loss_slots.slice(0, 1, none ? 1 : 2), lse, options));
  g.add(loom::ops::cross_entropy_backward(logits, labels, lse,
                                          upstream_slots.slice(0, 1, none ? 1 : 2),
                                          grad_rows.slice(0, 1, 1), options));
  g.add(loom::ops::log_softmax(logits, logp_rows.slice(0, 1, 1)));
  rt.submit(g).wait();
  auto grad32 = rt.tensor<float>({3, cols});
  auto logp32 = rt.tensor<float>({3, cols});
  loom::Graph back;
  back.add(loom::ops::cast(grad_rows, grad32));
  back.add(loom::ops::cast(logp_rows, logp32));
  rt.submit(back).wait();
  return {rt.download<float>(loss_slots), rt.download<float>(lse_slots), rt.download<float>(grad32),
          rt.download<float>(logp32)};
}

// No rows on the GPU, for each reduction, dtype and label type: the mean is
// 0/0 = NaN and the sum 0 (the reduction's one block runs over nothing),
// none writes nothing, and nothing else is written, as on the CPU backend.
TEST(LossGpu, NoRowsGiveAMeanOfNaNASumOfZeroAndWriteNothingElse) {
  LOOM_REQUIRE_GPU();
  loom::Runtime gpu;
  loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
  const std::vector<float> sevens(15, -7.0F);
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    for (DType label_type : {DType::i32, DType::i64}) {
      for (LossReduction r : {LossReduction::mean, LossReduction::sum, LossReduction::none}) {
        const Results got = run_no_rows(gpu, d, label_type, r);
        const Results want = run_no_rows(cpu, d, label_type, r);
        const std::string where = std::string(to_string(d)) + " " +
                                  std::string(to_string(label_type)) + " reduction " +
                                  std::to_string(static_cast<int>(r));
        ASSERT_EQ(got.loss.size(), 3U) << where;
        EXPECT_EQ(got.loss[0], -7.0F) << where;
        EXPECT_EQ(got.loss[2], -7.0F) << where;
        if (r == LossReduction::mean) {
          EXPECT_TRUE(std::isnan(got.loss[1])) << where << ": 0/0";
        }
        if (r == LossReduction::sum) {
          EXPECT_EQ(got.loss[1], 0.0F) << where;
        }
        if (r == LossReduction::none) {
          EXPECT_EQ(got.loss[1], -7.0F) << where;
        }
        EXPECT_EQ(got.lse, std::vector<float>(3, -7.0F)) << where;
        EXPECT_EQ(got.grad, sevens) << where;
        EXPECT_EQ(got.logp, sevens) << where;
        EXPECT_EQ(loom::test::loss::compare(got.loss, want.loss, DType::f32), "") << where;
        EXPECT_EQ(loom::test::loss::compare(got.grad, want.grad, DType::f32), "") << where;
      }
    }
  }
}

// The mean is reduced by one block in a fixed order: the same bits each run.
TEST(LossGpu, TheMeanHasTheSameBitsOnEveryRun) {
  LOOM_REQUIRE_GPU();
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const Case c{8192, 100, 0};
  const auto values =
      loom::test::loss::random_logits(static_cast<std::size_t>(c.rows * c.cols), rng);
  const auto labels = loom::test::loss::random_labels<std::int64_t>(c.rows, c.cols, rng);
  loom::Runtime gpu;
  const auto first = run_case(gpu, c, DType::f32, LossReduction::mean, values, labels);
  for (int k = 0; k < 5; ++k) {
    const auto again = run_case(gpu, c, DType::f32, LossReduction::mean, values, labels);
    EXPECT_EQ(again.loss, first.loss);
    EXPECT_EQ(again.grad, first.grad);
  }
}

// A compiled forward and backward replays with new logits and labels.
TEST(LossGpu, ACompiledStepReplaysWithNewData) {
  LOOM_REQUIRE_GPU();
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const std::int64_t rows = 256;
  const std::int64_t cols = 10;
  loom::Runtime gpu;
  auto logits = gpu.tensor<float>({rows, cols});
  auto labels = gpu.tensor<std::int32_t>({rows});
  auto loss = gpu.tensor<float>({1});
  auto lse = gpu.tensor<float>({rows});
  auto grad = gpu.tensor<float>({rows, cols});
  loom::Graph g;
  g.add(loom::ops::cross_entropy(logits, labels, loss, lse));
  g.add(loom::ops::cross_entropy_backward(logits, labels, lse, {}, grad));
  auto exe = gpu.compile(g);
  loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 1});
  for (int step = 0; step < 3; ++step) {
    const auto values = loom::test::loss::random_logits(static_cast<std::size_t>(rows * cols), rng);
    const auto y = loom::test::loss::random_labels<std::int32_t>(rows, cols, rng);
    gpu.upload_into(logits, std::span<const float>(values)).wait();
    gpu.upload_into(labels, std::span<const std::int32_t>(y)).wait();
    exe.run().wait();
    auto cl = cpu.upload(std::span<const float>(values), {rows, cols});
    auto cy = cpu.upload(std::span<const std::int32_t>(y), {rows});
    auto closs = cpu.tensor<float>({1});
    auto clse = cpu.tensor<float>({rows});
    auto cgrad = cpu.tensor<float>({rows, cols});
    loom::Graph h;
    h.add(loom::ops::cross_entropy(cl, cy, closs, clse));
    h.add(loom::ops::cross_entropy_backward(cl, cy, clse, {}, cgrad));
    cpu.submit(h).wait();
    EXPECT_EQ(loom::test::loss::compare(gpu.download<float>(loss), cpu.download<float>(closs),
                                        DType::f32),
              "")
        << step;
    EXPECT_EQ(loom::test::loss::compare(gpu.download<float>(grad), cpu.download<float>(cgrad),
                                        DType::f32),
              "")
        << step;
  }
}

}  // namespace
