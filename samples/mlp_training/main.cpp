// loom MLP training: a two-layer classifier's whole training step as one
// graph of catalogue ops, compiled once and replayed.
//
//   ./loom_mlp_training                       # 200 steps at the full shape
//   ./loom_mlp_training --steps 40 --batch 64 --hidden 128 --time
//   LOOM_DEVICE=cpu ./loom_mlp_training ...   # the CPU backend, same graph
//
// The network: logits = relu(x W1 + b1) W2 + b2, trained with softmax
// cross-entropy on synthetic data (10 clusters in 512 dimensions) by plain
// SGD. Forward, loss, backward and update are 16 tasks:
//   matmul with a fused bias and relu; matmul with a fused bias;
//   cross_entropy (loss and log-sum-exp in one read of the logits) and its
//   backward (softmax - one_hot, one read and one write);
//   the weight gradients as matmuls of transposed views; the bias gradients
//   as sums along the batch; relu_backward; and one fused SGD map a
//   parameter, reading the learning rate from a device tensor, so that the
//   schedule changes it between replays without recompiling.
// The first step's loss is checked against the same forward computed on the
// host; the program fails if training does not bring the loss down.
#include <loom/error.hpp>
#include <loom/executable.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

struct Config {
  std::int64_t batch = 256;
  std::int64_t in = 512;
  std::int64_t hidden = 1024;
  std::int64_t classes = 10;
  int steps = 200;
  bool time = false;
};

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&] {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return std::stoll(argv[++i]);
    };
    if (arg == "--steps") {
      c.steps = static_cast<int>(value());
    } else if (arg == "--batch") {
      c.batch = value();
    } else if (arg == "--hidden") {
      c.hidden = value();
    } else if (arg == "--time") {
      c.time = true;
    } else {
      throw std::invalid_argument("unknown argument " + arg +
                                  " (--steps N, --batch N, --hidden N, --time)");
    }
  }
  return c;
}

std::vector<float> normal(std::size_t n, float scale, std::mt19937& gen) {
  std::normal_distribution<float> dist(0.0F, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Points around one of `classes` random centers, and their classes.
struct Data {
  std::vector<float> x;
  std::vector<std::int32_t> y;
};
Data synthetic(const Config& c, std::mt19937& gen) {
  const auto centers = normal(static_cast<std::size_t>(c.classes * c.in), 1.0F, gen);
  std::uniform_int_distribution<std::int32_t> label(0, static_cast<std::int32_t>(c.classes) - 1);
  std::normal_distribution<float> noise(0.0F, 1.0F);
  Data d{std::vector<float>(static_cast<std::size_t>(c.batch * c.in)),
         std::vector<std::int32_t>(static_cast<std::size_t>(c.batch))};
  for (std::int64_t s = 0; s < c.batch; ++s) {
    const std::int32_t k = label(gen);
    d.y[static_cast<std::size_t>(s)] = k;
    for (std::int64_t i = 0; i < c.in; ++i) {
      d.x[static_cast<std::size_t>(s * c.in + i)] =
          centers[static_cast<std::size_t>(k * c.in + i)] + noise(gen);
    }
  }
  return d;
}

// The forward's mean cross-entropy on the host, in double: what step 0 must report.
double host_loss(const Config& c, const Data& d, const std::vector<float>& w1,
                 const std::vector<float>& b1, const std::vector<float>& w2,
                 const std::vector<float>& b2) {
  double total = 0;
  std::vector<double> h(static_cast<std::size_t>(c.hidden));
  std::vector<double> logits(static_cast<std::size_t>(c.classes));
  for (std::int64_t s = 0; s < c.batch; ++s) {
    std::fill(h.begin(), h.end(), 0.0);
    for (std::int64_t i = 0; i < c.in; ++i) {
      const double xi = d.x[static_cast<std::size_t>(s * c.in + i)];
      for (std::int64_t j = 0; j < c.hidden; ++j) {
        h[static_cast<std::size_t>(j)] += xi * w1[static_cast<std::size_t>(i * c.hidden + j)];
      }
    }
    for (std::int64_t j = 0; j < c.hidden; ++j) {
      auto& v = h[static_cast<std::size_t>(j)];
      v = std::max(0.0, v + b1[static_cast<std::size_t>(j)]);
    }
    double m = -INFINITY;
    for (std::int64_t k = 0; k < c.classes; ++k) {
      double v = b2[static_cast<std::size_t>(k)];
      for (std::int64_t j = 0; j < c.hidden; ++j) {
        v += h[static_cast<std::size_t>(j)] * w2[static_cast<std::size_t>(j * c.classes + k)];
      }
      logits[static_cast<std::size_t>(k)] = v;
      m = std::max(m, v);
    }
    double sum = 0;
    for (double v : logits) sum += std::exp(v - m);
    total += m + std::log(sum) - logits[static_cast<std::size_t>(d.y[static_cast<std::size_t>(s)])];
  }
  return total / static_cast<double>(c.batch);
}

int run(const Config& c) {
  loom::Runtime rt;
  std::printf("loom mlp_training on the %s backend: batch %lld, %lld -> %lld -> %lld, %d steps\n",
              rt.backend() == loom::Backend::cuda ? "cuda" : "cpu", static_cast<long long>(c.batch),
              static_cast<long long>(c.in), static_cast<long long>(c.hidden),
              static_cast<long long>(c.classes), c.steps);
  std::mt19937 gen(7);
  const Data data = synthetic(c, gen);
  const auto w1 = normal(static_cast<std::size_t>(c.in * c.hidden),
                         std::sqrt(2.0F / static_cast<float>(c.in)), gen);
  const auto w2 = normal(static_cast<std::size_t>(c.hidden * c.classes),
                         std::sqrt(1.0F / static_cast<float>(c.hidden)), gen);
  const std::vector<float> b1(static_cast<std::size_t>(c.hidden), 0.0F);
  const std::vector<float> b2(static_cast<std::size_t>(c.classes), 0.0F);

  // Parameters, data and the learning rate live on the device.
  auto x = rt.upload(std::span<const float>(data.x), {c.batch, c.in});
  auto y = rt.upload(std::span<const std::int32_t>(data.y), {c.batch});
  auto W1 = rt.upload(std::span<const float>(w1), {c.in, c.hidden});
  auto B1 = rt.upload(std::span<const float>(b1), {c.hidden});
  auto W2 = rt.upload(std::span<const float>(w2), {c.hidden, c.classes});
  auto B2 = rt.upload(std::span<const float>(b2), {c.classes});
  auto lr = rt.tensor<float>({1});
  // Activations and gradients.
  auto h = rt.tensor<float>({c.batch, c.hidden});
  auto logits = rt.tensor<float>({c.batch, c.classes});
  auto loss = rt.tensor<float>({1});
  auto lse = rt.tensor<float>({c.batch});
  auto dlogits = rt.tensor<float>({c.batch, c.classes});
  auto dW2 = rt.tensor<float>({c.hidden, c.classes});
  auto dB2 = rt.tensor<float>({c.classes});
  auto dh = rt.tensor<float>({c.batch, c.hidden});
  auto dW1 = rt.tensor<float>({c.in, c.hidden});
  auto dB1 = rt.tensor<float>({c.hidden});

  namespace ops = loom::ops;
  using ops::MapExpr;
  loom::Graph g;
  // Forward: h = relu(x W1 + b1), logits = h W2 + b2, the loss.
  g.add(ops::matmul(x, W1, h, {.bias = B1, .activation = ops::Activation::relu}), {.name = "fc1"});
  g.add(ops::matmul(h, W2, logits, {.bias = B2}), {.name = "fc2"});
  g.add(ops::cross_entropy(logits, y, loss, lse), {.name = "loss"});
  // Backward.
  g.add(ops::cross_entropy_backward(logits, y, lse, {}, dlogits), {.name = "dlogits"});
  g.add(ops::matmul(h.transpose(0, 1), dlogits, dW2), {.name = "dW2"});
  g.add(ops::sum(dlogits, 0, dB2), {.name = "db2"});
  g.add(ops::matmul(dlogits, W2.transpose(0, 1), dh), {.name = "dh"});
  g.add(ops::relu_backward(dh, h, dh), {.name = "relu_backward"});  // h > 0 where fc1's input was
  g.add(ops::matmul(x.transpose(0, 1), dh, dW1), {.name = "dW1"});
  g.add(ops::sum(dh, 0, dB1), {.name = "db1"});
  // SGD, p = p - lr * dp, each after every task that reads p (loom orders by the data).
  const auto sgd = MapExpr::input(0) - MapExpr::input(2) * MapExpr::input(1);
  g.add(ops::fused_map({W1, dW1, lr}, W1, sgd), {.name = "sgd_W1"});
  g.add(ops::fused_map({B1, dB1, lr}, B1, sgd), {.name = "sgd_b1"});
  g.add(ops::fused_map({W2, dW2, lr}, W2, sgd), {.name = "sgd_W2"});
  g.add(ops::fused_map({B2, dB2, lr}, B2, sgd), {.name = "sgd_b2"});
  auto step = rt.compile(g);

  const auto set_lr = [&](float value) {
    rt.upload_into(lr, std::span<const float>(&value, 1)).wait();
  };
  set_lr(0.1F);
  float first = 0;
  float last = 0;
  for (int s = 0; s < c.steps; ++s) {
    if (s == c.steps / 2) set_lr(0.05F);  // a schedule: a new value, the same compiled step
    step.run().wait();
    last = rt.download<float>(loss)[0];
    if (s == 0) {
      first = last;
      const double want = host_loss(c, data, w1, b1, w2, b2);
      std::printf("step 0: loss %.6f (host forward %.6f)\n", last, want);
      if (std::fabs(last - want) > 1e-4 * std::max(1.0, std::fabs(want))) {
        std::fprintf(stderr, "mlp_training: step 0's loss differs from the host's\n");
        return 1;
      }
    } else if (s % std::max(1, c.steps / 10) == 0 || s == c.steps - 1) {
      std::printf("step %d: loss %.6f\n", s, last);
    }
  }
  if (c.time) {
    const int replays = 100;
    const auto start = std::chrono::steady_clock::now();
    step.run_n(replays).wait();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count() /
        replays;
    std::printf("step time: %.1f us (mean of %d replays)\n", us, replays);
  }
  if (!(last < 0.5F * first)) {
    std::fprintf(stderr, "mlp_training: the loss did not fall (%.6f -> %.6f)\n", first, last);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlp_training: %s\n", e.what());
    return 1;
  }
}
