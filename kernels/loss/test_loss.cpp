// The loss family on the CPU: the references on hand-checked rows and
// special values, the backward against finite differences of the forward,
// the ops through graphs (every dtype, strided rows, in place, a compiled
// replay, no rows and one row for each reduction), and rejections at submit
// naming the task.
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/ops/loss.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "loss/loss.hpp"
#include "loss/test_support.hpp"
#include "support/cpu.hpp"
#include "support/rejection.hpp"
#include "support/seed.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

using loom::DType;
using loom::ops::CrossEntropyOptions;
using loom::ops::LossReduction;
using loom::test::cpu;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> log_softmax_of(const std::vector<float>& x, std::int64_t rows,
                                  std::int64_t cols) {
  std::vector<float> y(x.size(), -1.0F);
  loom::kernels::log_softmax_reference(x.data(), y.data(), DType::f32, {rows, cols, cols, cols});
  return y;
}

TEST(LossReference, LogSoftmaxOnHandCheckedRows) {
  const auto y = log_softmax_of({1, 2, 3, 1000, 1000, 1000}, 2, 3);
  const double lse = 3 + std::log(1 + std::exp(-1.0) + std::exp(-2.0));
  EXPECT_FLOAT_EQ(y[0], static_cast<float>(1 - lse));
  EXPECT_FLOAT_EQ(y[2], static_cast<float>(3 - lse));
  EXPECT_FLOAT_EQ(y[3], static_cast<float>(-std::log(3.0))) << "large values: the maximum first";
  const auto special = log_softmax_of({-kInf, -kInf, 0, std::nanf(""), 0, kInf, -kInf, 0}, 4, 2);
  EXPECT_TRUE(std::isnan(special[0]) && std::isnan(special[1])) << "all -inf: no distribution";
  EXPECT_TRUE(std::isnan(special[2]) && std::isnan(special[3])) << "a NaN spreads";
  EXPECT_TRUE(std::isnan(special[4]));
  EXPECT_EQ(special[6], -kInf) << "-inf among numbers: log 0";
  EXPECT_EQ(special[7], 0.0F);
}

struct Forward {
  std::vector<float> loss;
  std::vector<float> lse;
};

Forward forward(const std::vector<float>& logits, const std::vector<std::int32_t>& labels,
                std::int64_t cols, LossReduction reduction, std::int64_t ignore = -100) {
  const auto rows = static_cast<std::int64_t>(labels.size());
  Forward f{std::vector<float>(reduction == LossReduction::none ? labels.size() : 1, -1.0F),
            std::vector<float>(labels.size(), -1.0F)};
  loom::kernels::CrossEntropyArgs a;
  a.logits = logits.data();
  a.shape = {rows, cols, cols, cols};
  a.labels = labels.data();
  a.ignore_index = ignore;
  a.reduction = reduction;
  a.loss = f.loss.data();
  a.lse = f.lse.data();
  loom::kernels::cross_entropy_reference(a);
  return f;
}

TEST(LossReference, CrossEntropyOnHandCheckedRows) {
  const std::vector<float> logits{1, 2, 3, 1, 1, 1};
  const double l0 = std::log(1 + std::exp(-1.0) + std::exp(-2.0));  // lse - 3
  const double l1 = std::log(3.0);
  const auto none = forward(logits, {2, 0}, 3, LossReduction::none);
  EXPECT_FLOAT_EQ(none.loss[0], static_cast<float>(l0));
  EXPECT_FLOAT_EQ(none.loss[1], static_cast<float>(l1));
  EXPECT_FLOAT_EQ(none.lse[1], static_cast<float>(1 + l1));
  EXPECT_FLOAT_EQ(forward(logits, {2, 0}, 3, LossReduction::mean).loss[0],
                  static_cast<float>((l0 + l1) / 2));
  EXPECT_FLOAT_EQ(forward(logits, {2, 0}, 3, LossReduction::sum).loss[0],
                  static_cast<float>(l0 + l1));
  // An ignored row counts for nothing, in the mean's divisor too.
  EXPECT_FLOAT_EQ(forward(logits, {2, -100}, 3, LossReduction::mean).loss[0],
                  static_cast<float>(l0));
  EXPECT_EQ(forward(logits, {2, 7}, 3, LossReduction::none, 7).loss[1], 0.0F);
  // A label outside [0, classes) makes its row's loss NaN, and so the mean.
  EXPECT_TRUE(std::isnan(forward(logits, {2, 3}, 3, LossReduction::none).loss[1]));
  EXPECT_FALSE(std::isnan(forward(logits, {2, 3}, 3, LossReduction::none).loss[0]));
  EXPECT_TRUE(std::isnan(forward(logits, {-1, 0}, 3, LossReduction::mean).loss[0]));
  EXPECT_TRUE(std::isnan(forward(logits, {-100, -100}, 3, LossReduction::mean).loss[0]))
      << "a mean of no rows is 0/0";
}

std::vector<float> backward(const std::vector<float>& logits,
                            const std::vector<std::int32_t>& labels, std::int64_t cols,
                            LossReduction reduction, const std::vector<float>& grad_loss) {
  const auto rows = static_cast<std::int64_t>(labels.size());
  auto f = forward(logits, labels, cols, reduction);
  std::vector<float> g(logits.size(), -1.0F);
  loom::kernels::CrossEntropyArgs a;
  a.logits = logits.data();
  a.shape = {rows, cols, cols, cols};
  a.labels = labels.data();
  a.reduction = reduction;
  a.lse = f.lse.data();
  a.grad_loss = grad_loss.empty() ? nullptr : grad_loss.data();
  a.grad = g.data();
  loom::kernels::cross_entropy_backward_reference(a);
  return g;
}

// The backward is the forward's derivative: central differences of the
// reduced loss, for each reduction, with an upstream gradient.
TEST(LossReference, TheBackwardIsTheForwardsDerivative) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const std::int64_t rows = 5;
  const std::int64_t cols = 7;
  auto logits = loom::test::loss::random_logits(static_cast<std::size_t>(rows * cols), rng);
  for (auto& v : logits) v /= 4;  // gentle values: differences in f32 stay accurate
  const auto labels = loom::test::loss::random_labels<std::int32_t>(rows, cols, rng, -100, true);
  for (LossReduction reduction : {LossReduction::mean, LossReduction::sum, LossReduction::none}) {
    const std::vector<float> upstream = reduction == LossReduction::none
                                            ? std::vector<float>{0.5F, -1, 2, 1, 0.25F}
                                            : std::vector<float>{1.5F};
    const auto g = backward(logits, labels, cols, reduction, upstream);
    const auto objective = [&](const std::vector<float>& x) {
      const auto f = forward(x, labels, cols, reduction);
      double v = 0;
      for (std::size_t i = 0; i < f.loss.size(); ++i) v += upstream[i] * f.loss[i];
      return v;
    };
    for (std::size_t i = 0; i < logits.size(); ++i) {
      auto up = logits;
      auto down = logits;
      const float h = 1e-2F;
      up[i] += h;
      down[i] -= h;
      const double want = (objective(up) - objective(down)) / (2.0 * h);
      EXPECT_NEAR(g[i], want, 2e-3)
          << "element " << i << " reduction " << static_cast<int>(reduction);
    }
  }
  // Without an upstream gradient it is 1: softmax - one_hot, over the rows for a mean.
  const auto g = backward({0, 0, 0, 0}, {1, 0}, 2, LossReduction::mean, {});
  EXPECT_EQ(g, (std::vector<float>{0.25F, -0.25F, -0.25F, 0.25F}));
  const auto nan_row = backward({0, 0, 0, 0}, {1, 5}, 2, LossReduction::sum, {});
  EXPECT_TRUE(std::isnan(nan_row[2]) && std::isnan(nan_row[3]));
  EXPECT_EQ(nan_row[0], 0.5F);
}

// ---- ops through graphs on the CPU backend --------------------------------------

// Every dtype (cast from the same f32 logits), strided rows (a slice of a
// wider tensor), in place, against the references over the rounded logits.
TEST(LossOps, EveryDtypeAndStridedRowsThroughAGraph) {
  loom::Runtime rt(cpu(2));
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const std::int64_t rows = 37;
  const std::int64_t cols = 53;
  const auto values =
      loom::test::loss::random_logits(static_cast<std::size_t>(rows * (cols + 3)), rng);
  const auto labels = loom::test::loss::random_labels<std::int64_t>(rows, cols, rng, -100, true);
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    auto wide32 = rt.upload(std::span<const float>(values), {rows, cols + 3});
    auto wide = rt.tensor(d, {rows, cols + 3});
    auto tlabels = rt.upload(std::span<const std::int64_t>(labels), {rows});
    auto logits = wide.slice(1, 2, 2 + cols);  // rows with a stride
    auto loss = rt.tensor<float>({1});
    auto lse = rt.tensor<float>({rows});
    auto grad = rt.tensor(d, {rows, cols});
    auto logp = rt.tensor(d, {rows, cols});
    auto grad32 = rt.tensor<float>({rows, cols});
    auto logp32 = rt.tensor<float>({rows, cols});
    auto rounded = rt.tensor<float>({rows, cols});
    loom::Graph g;
    g.add(loom::ops::cast(wide32, wide));
    g.add(loom::ops::cast(logits, rounded));
    g.add(loom::ops::cross_entropy(logits, tlabels, loss, lse));
    g.add(loom::ops::cross_entropy_backward(logits, tlabels, lse, {}, grad));
    g.add(loom::ops::log_softmax(logits, logp));
    g.add(loom::ops::cast(grad, grad32));
    g.add(loom::ops::cast(logp, logp32));
    rt.submit(g).wait();
    // The references over the same (rounded) logits, contiguous.
    const auto x = rt.download<float>(rounded);
    std::vector<std::int32_t> labels32(labels.begin(), labels.end());
    const auto f = forward(x, labels32, cols, LossReduction::mean);
    EXPECT_TRUE(loom::test::loss::close(rt.download<float>(loss)[0], f.loss[0], DType::f32))
        << to_string(d);
    EXPECT_EQ(loom::test::loss::compare(rt.download<float>(lse), f.lse, DType::f32), "");
    EXPECT_EQ(loom::test::loss::compare(rt.download<float>(grad32),
                                        backward(x, labels32, cols, LossReduction::mean, {}), d),
              "")
        << to_string(d);
    EXPECT_EQ(
        loom::test::loss::compare(rt.download<float>(logp32), log_softmax_of(x, rows, cols), d), "")
        << to_string(d);
  }
}

TEST(LossOps, InPlaceAndACompiledReplay) {
  loom::Runtime rt(cpu(1));
  const std::vector<float> values{1, 2, 3, 1, 1, 1};
  const std::vector<std::int32_t> labels{2, 0};
  auto logits = rt.upload(std::span<const float>(values), {2, 3});
  auto tlabels = rt.upload(std::span<const std::int32_t>(labels), {2});
  auto loss = rt.tensor<float>({2});
  auto lse = rt.tensor<float>({2});
  auto upstream = rt.tensor<float>({2});
  const CrossEntropyOptions none{.reduction = LossReduction::none};
  loom::Graph g;
  g.add(loom::ops::cross_entropy(logits, tlabels, loss, lse, none));
  g.add(
      loom::ops::cross_entropy_backward(logits, tlabels, lse, upstream, logits, none));  // in place
  auto exe = rt.compile(g);
  const std::vector<float> ones{1, 1};
  rt.upload_into(upstream, std::span<const float>(ones)).wait();
  exe.run().wait();
  const auto f = forward(values, labels, 3, LossReduction::none);
  EXPECT_EQ(rt.download<float>(loss), f.loss);
  EXPECT_EQ(rt.download<float>(logits), backward(values, labels, 3, LossReduction::none, ones));
  auto y = rt.upload(std::span<const float>(values), {2, 3});
  loom::Graph in_place;
  in_place.add(loom::ops::log_softmax(y, y));
  rt.submit(in_place).wait();
  EXPECT_EQ(rt.download<float>(y), log_softmax_of(values, 2, 3));
}

// No rows, for each reduction: a mean is 0/0 = NaN, a sum 0, and none has
// nothing to write; lse, the gradient and log_softmax have no rows either.
// Every output views the middle of a tensor of -7s, whose other elements
// must keep them.
TEST(LossOps, NoRowsGiveAMeanOfNaNASumOfZeroAndWriteNothingElse) {
  loom::Runtime rt(cpu(1));
  const std::int64_t cols = 5;
  const std::vector<float> sevens(3 * cols, -7.0F);
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    for (DType label_type : {DType::i32, DType::i64}) {
      for (LossReduction r : {LossReduction::mean, LossReduction::sum, LossReduction::none}) {
        const bool none = r == LossReduction::none;
        auto sevens32 = rt.upload(std::span<const float>(sevens), {3, cols});
        auto loss_slots = rt.upload(std::span<const float>(sevens.data(), 3), {3});
        auto lse_slots = rt.upload(std::span<const float>(sevens.data(), 3), {3});
        auto upstream_slots = rt.upload(std::span<const float>(sevens.data(), 3), {3});
        auto grad_rows = rt.tensor(d, {3, cols});
        auto logp_rows = rt.tensor(d, {3, cols});
        loom::Graph poison;
        poison.add(loom::ops::cast(sevens32, grad_rows));
        poison.add(loom::ops::cast(sevens32, logp_rows));
        poison.add(loom::ops::fill(upstream_slots.slice(0, 1, 2), 0.75F));
        rt.submit(poison).wait();

        const auto logits = rt.tensor(d, {0, cols});
        const auto labels = rt.tensor(label_type, {0});
        const auto loss = loss_slots.slice(0, 1, none ? 1 : 2);  // [0] or [1]
        const auto upstream = upstream_slots.slice(0, 1, none ? 1 : 2);
        const auto lse = lse_slots.slice(0, 1, 1);
        const auto grad = grad_rows.slice(0, 1, 1);  // [0, cols]
        const auto logp = logp_rows.slice(0, 1, 1);
        const CrossEntropyOptions options{.reduction = r};
        loom::Graph g;
        g.add(loom::ops::cross_entropy(logits, labels, loss, lse, options));
        g.add(loom::ops::cross_entropy_backward(logits, labels, lse, upstream, grad, options));
        g.add(loom::ops::log_softmax(logits, logp));
        rt.submit(g).wait();

        auto grad32 = rt.tensor<float>({3, cols});
        auto logp32 = rt.tensor<float>({3, cols});
        loom::Graph back;
        back.add(loom::ops::cast(grad_rows, grad32));
        back.add(loom::ops::cast(logp_rows, logp32));
        rt.submit(back).wait();
        const std::string what = std::string(to_string(d)) + " " +
                                 std::string(to_string(label_type)) + " reduction " +
                                 std::to_string(static_cast<int>(r));
        const auto losses = rt.download<float>(loss_slots);
        EXPECT_EQ(losses[0], -7.0F) << what;
        EXPECT_EQ(losses[2], -7.0F) << what;
        if (r == LossReduction::mean) {
          EXPECT_TRUE(std::isnan(losses[1])) << what << ": 0/0";
        }
        if (r == LossReduction::sum) {
          EXPECT_EQ(losses[1], 0.0F) << what;
        }
        if (none) {
          EXPECT_EQ(losses[1], -7.0F) << what;
        }
        EXPECT_EQ(rt.download<float>(lse_slots), std::vector<float>(3, -7.0F)) << what;
        EXPECT_EQ(rt.download<float>(grad32), sevens) << what;
        EXPECT_EQ(rt.download<float>(logp32), sevens) << what;
      }
    }
  }
}

// One row, for each reduction: its mean, its sum and its own loss are all
// lse - x[label], and the gradient is upstream * (softmax - one_hot),
// computed here by hand in double; a row ignored makes the mean 0/0 (NaN),
// the sum and its loss 0, and its gradient 0.
TEST(LossOps, OneRowMatchesAHandComputedLossAndGradientForEachReduction) {
  loom::Runtime rt(cpu(1));
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const std::int64_t cols = 6;
  const auto values = loom::test::loss::random_logits(static_cast<std::size_t>(cols), rng);
  const auto label = loom::test::loss::random_labels<std::int32_t>(1, cols, rng)[0];
  double m = values[0];
  for (float v : values) m = std::max(m, static_cast<double>(v));
  double s = 0;
  for (float v : values) s += std::exp(v - m);
  const double lse = m + std::log(s);
  const float upstream = 0.75F;
  for (const bool ignored : {false, true}) {
    const std::vector<std::int32_t> labels{ignored ? -100 : label};
    for (LossReduction r : {LossReduction::mean, LossReduction::sum, LossReduction::none}) {
      auto logits = rt.upload(std::span<const float>(values), {1, cols});
      auto tlabels = rt.upload(std::span<const std::int32_t>(labels), {1});
      auto loss = rt.tensor<float>({1});
      auto lse_out = rt.tensor<float>({1});
      auto grad_loss = rt.upload(std::span<const float>(&upstream, 1), {1});
      auto grad = rt.tensor<float>({1, cols});
      auto logp = rt.tensor<float>({1, cols});
      const CrossEntropyOptions options{.reduction = r};
      loom::Graph g;
      g.add(loom::ops::fill(loss, -7.0F));
      g.add(loom::ops::fill(grad, -7.0F));
      g.add(loom::ops::cross_entropy(logits, tlabels, loss, lse_out, options));
      g.add(loom::ops::cross_entropy_backward(logits, tlabels, lse_out, grad_loss, grad, options));
      g.add(loom::ops::log_softmax(logits, logp));
      rt.submit(g).wait();
      const std::string what = std::string(ignored ? "ignored" : "counted") + " reduction " +
                               std::to_string(static_cast<int>(r));
      const float got = rt.download<float>(loss)[0];
      if (!ignored) {
        EXPECT_TRUE(
            loom::test::loss::close(got, static_cast<float>(lse - values[label]), DType::f32))
            << what << ": " << got;
      } else if (r == LossReduction::mean) {
        EXPECT_TRUE(std::isnan(got)) << what << ": 0/0, got " << got;
      } else {
        EXPECT_EQ(got, 0.0F) << what;
      }
      EXPECT_TRUE(loom::test::loss::close(rt.download<float>(lse_out)[0], static_cast<float>(lse),
                                          DType::f32))
          << what;
      std::vector<float> want_grad(static_cast<std::size_t>(cols), 0.0F);
      std::vector<float> want_logp(static_cast<std::size_t>(cols));
      for (std::int64_t j = 0; j < cols; ++j) {
        const auto k = static_cast<std::size_t>(j);
        want_logp[k] = static_cast<float>(values[k] - lse);
        if (!ignored) {
          want_grad[k] =
              static_cast<float>(upstream * (std::exp(values[k] - lse) - (j == label ? 1.0 : 0.0)));
        }
      }
      EXPECT_EQ(loom::test::loss::compare(rt.download<float>(grad), want_grad, DType::f32), "")
          << what;
      EXPECT_EQ(loom::test::loss::compare(rt.download<float>(logp), want_logp, DType::f32), "")
          << what;
    }
  }
}

TEST(LossOps, BadInputsAreRejectedAtSubmitNamingTheTask) {
  loom::Runtime rt(cpu(1));
  auto logits = rt.tensor<float>({4, 10});
  auto labels = rt.tensor<std::int32_t>({4});
  auto loss = rt.tensor<float>({1});
  auto lse = rt.tensor<float>({4});
  auto grad = rt.tensor<float>({4, 10});
  const auto rejected = [&](const loom::OpPtr& op, const std::string& words) {
    loom::test::expect_rejected(rt, op, words, "suspect");
  };
  using loom::ops::cross_entropy;
  using loom::ops::cross_entropy_backward;
  rejected(cross_entropy(rt.tensor<float>({40}), labels, loss, lse), "must have rank 2");
  rejected(cross_entropy(rt.tensor<std::int32_t>({4, 10}), labels, loss, lse), "logits");
  rejected(cross_entropy(logits, rt.tensor<float>({4}), loss, lse), "labels");
  rejected(cross_entropy(logits, rt.tensor<std::int32_t>({5}), loss, lse),
           "labels must be a contiguous [4]");
  rejected(cross_entropy(logits, labels, rt.tensor<float>({4}), lse), "loss must be f32 [1] or []");
  rejected(cross_entropy(logits, labels, loss, lse, {.reduction = LossReduction::none}),
           "loss must be a contiguous [4]");
  rejected(cross_entropy(logits, labels, loss, rt.tensor<float>({3})),
           "lse must be a contiguous [4]");
  rejected(cross_entropy(rt.tensor<float>({4, 0}), labels, loss, lse), "at least one class");
  rejected(cross_entropy(logits.transpose(0, 1), labels, loss, lse), "contiguous rows");
  rejected(cross_entropy(logits, labels, loss, lse, {.reduction = static_cast<LossReduction>(9)}),
           "unknown reduction");
  rejected(cross_entropy_backward(logits, labels, lse, rt.tensor<float>({4}), grad),
           "grad_loss must be f32 [1] or []");
  rejected(cross_entropy_backward(logits, labels, lse, {}, rt.tensor(DType::bf16, {4, 10})),
           "grad_logits must be f32");
  rejected(cross_entropy_backward(logits, labels, lse, {}, logits.slice(0, 1, 4).slice(1, 0, 10)),
           "one shape");
  rejected(loom::ops::log_softmax(logits, logits.slice(1, 1, 10).slice(1, 0, 9)), "one shape");
  rejected(loom::ops::log_softmax(logits.slice(1, 0, 9), logits.slice(1, 1, 10)), "same view");
}

}  // namespace
