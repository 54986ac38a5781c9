// loom data parallel: one training step of a small two-layer network, as a
// graph, on every rank of the job. Each rank holds its own shard of the
// data, computes its gradients, all-reduces them with the other ranks, and
// takes the same SGD step, so the weights stay equal everywhere; the loss
// printed each step is the whole job's, the same on every rank.
//
//   mpirun -np 4 ./loom_data_parallel             # nccl: a GPU a rank
//   mpirun -np 2 ./loom_data_parallel             # one GPU: mpi
//   LOOM_DEVICE=cpu mpirun -np 2 ./loom_data_parallel
//
// The network: out = (x W1)^2 W2, trained with a mean squared error to a
// fixed teacher network of the same form (the square keeps the backward
// within loom's built-in ops: matmul, mul, axpby, sum). On the nccl backend
// the step is compiled once and replayed, its all-reduces inside.
#include <loom/comm.hpp>
#include <loom/error.hpp>
#include <loom/executable.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t kBatch = 64;   // samples a rank
constexpr std::int64_t kIn = 32;      // inputs
constexpr std::int64_t kHidden = 64;  // hidden units
constexpr std::int64_t kOut = 8;      // outputs
constexpr float kLearningRate = 0.02F;

std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, float scale,
                                 std::mt19937& gen) {
  std::normal_distribution<float> normal(0.0F, scale);
  std::vector<float> m(static_cast<std::size_t>(rows * cols));
  for (auto& v : m) v = normal(gen);
  return m;
}

// y = (x a)^2 b on the host: the teacher's answers for a rank's shard.
std::vector<float> teacher(const std::vector<float>& x, const std::vector<float>& a,
                           const std::vector<float>& b) {
  std::vector<float> y(static_cast<std::size_t>(kBatch * kOut), 0.0F);
  for (std::int64_t s = 0; s < kBatch; ++s) {
    for (std::int64_t h = 0; h < kHidden; ++h) {
      float pre = 0;
      for (std::int64_t i = 0; i < kIn; ++i) {
        pre +=
            x[static_cast<std::size_t>(s * kIn + i)] * a[static_cast<std::size_t>(i * kHidden + h)];
      }
      for (std::int64_t o = 0; o < kOut; ++o) {
        y[static_cast<std::size_t>(s * kOut + o)] +=
            pre * pre * b[static_cast<std::size_t>(h * kOut + o)];
      }
    }
  }
  return y;
}

class Trainer {
 public:
  Trainer(loom::Runtime& rt, std::shared_ptr<loom::Communicator> comm)
      : rt_(rt), comm_(std::move(comm)) {}

  loom::Tensor device(const std::vector<float>& values, loom::Shape shape) {
    auto host = rt_.tensor<float>(shape, loom::Memory::pageable);
    std::copy(values.begin(), values.end(), host.data_as<float>());
    auto t = rt_.tensor<float>(shape);
    rt_.copy(host, t).wait();
    return t;
  }

  float read(const loom::Tensor& scalar) {
    auto host = rt_.tensor<float>({1}, loom::Memory::pageable);
    rt_.copy(scalar, host).wait();
    return host.data_as<float>()[0];
  }

  // The whole job's value of a scalar combined by `op`, through loom.
  float combined(float value, loom::ReduceOp op) {
    auto x = device({value}, {1});
    loom::Graph g;
    g.collective(comm_->all_reduce(x, x, op));
    rt_.submit(g).wait();
    return read(x);
  }

  loom::Runtime& rt_;
  std::shared_ptr<loom::Communicator> comm_;
};

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 100;
  try {
    loom::Runtime rt;
    auto comm = loom::world_communicator(rt);
    const int rank = comm->rank();
    const int ranks = comm->size();
    Trainer t(rt, comm);
    namespace ops = loom::ops;

    // The teacher and the starting weights come from one seed (every rank
    // the same); each rank's data shard from a seed of its own.
    std::mt19937 shared(2024);
    const auto teacher_a = random_matrix(kIn, kHidden, 0.3F, shared);
    const auto teacher_b = random_matrix(kHidden, kOut, 0.3F, shared);
    std::mt19937 mine(77 + static_cast<unsigned>(rank));
    const auto x_host = random_matrix(kBatch, kIn, 1.0F, mine);
    const auto y_host = teacher(x_host, teacher_a, teacher_b);

    auto x = t.device(x_host, {kBatch, kIn});
    auto y = t.device(y_host, {kBatch, kOut});
    // Rank 0's starting weights, broadcast, so that every rank starts equal
    // whatever the others drew.
    std::mt19937 start(rank == 0 ? 99u : 1000u + static_cast<unsigned>(rank));
    auto w1 = t.device(random_matrix(kIn, kHidden, 0.2F, start), {kIn, kHidden});
    auto w2 = t.device(random_matrix(kHidden, kOut, 0.2F, start), {kHidden, kOut});
    {
      loom::Graph init;
      init.collective(comm->broadcast(w1, 0));
      init.collective(comm->broadcast(w2, 0));
      rt.submit(init).wait();
    }

    auto pre = rt.tensor<float>({kBatch, kHidden});
    auto h = rt.tensor<float>({kBatch, kHidden});
    auto out = rt.tensor<float>({kBatch, kOut});
    auto diff = rt.tensor<float>({kBatch, kOut});
    auto squares = rt.tensor<float>({kBatch, kOut});
    auto loss = rt.tensor<float>({1});
    auto d_out = rt.tensor<float>({kBatch, kOut});
    auto d_w2 = rt.tensor<float>({kHidden, kOut});
    auto d_h = rt.tensor<float>({kBatch, kHidden});
    auto d_pre = rt.tensor<float>({kBatch, kHidden});
    auto d_w1 = rt.tensor<float>({kIn, kHidden});
    // The loss is the mean over the whole job's samples: each rank's
    // gradients are its share, and their sum (the all-reduce) the gradient.
    const float mean = 1.0F / static_cast<float>(kBatch * kOut * ranks);

    loom::Graph step;
    step.add(ops::matmul(x, w1, pre), {.name = "x W1"});
    step.add(ops::mul(pre, pre, h), {.name = "square"});
    step.add(ops::matmul(h, w2, out), {.name = "h W2"});
    step.add(ops::axpby(1.0F, out, -1.0F, y, diff), {.name = "out - y"});
    step.add(ops::mul(diff, diff, squares), {.name = "squares"});
    step.add(ops::sum(squares, loss), {.name = "local loss"});
    step.collective(comm->all_reduce(loss, loss), {.name = "loss all-reduce"});
    step.add(ops::scale_copy(diff, d_out, 2.0F * mean), {.name = "d out"});
    step.add(ops::matmul(h.transpose(0, 1), d_out, d_w2), {.name = "d W2"});
    step.add(ops::matmul(d_out, w2.transpose(0, 1), d_h), {.name = "d h"});
    step.add(ops::mul(pre, d_h, d_pre), {.name = "d pre / 2"});
    step.add(ops::matmul(x.transpose(0, 1), d_pre, d_w1, 2.0F), {.name = "d W1"});
    step.collective(comm->all_reduce(d_w1, d_w1), {.name = "d W1 all-reduce"});
    step.collective(comm->all_reduce(d_w2, d_w2), {.name = "d W2 all-reduce"});
    step.add(ops::axpby(1.0F, w1, -kLearningRate, d_w1, w1), {.name = "SGD W1"});
    step.add(ops::axpby(1.0F, w2, -kLearningRate, d_w2, w2), {.name = "SGD W2"});

    std::optional<loom::Executable> compiled;
    if (comm->backend() == "nccl") compiled = rt.compile(step);
    if (rank == 0) {
      std::printf("# data parallel: %d rank(s), backend %s, %s, %s\n", ranks,
                  std::string(comm->backend()).c_str(), rt.default_memory().to_string().c_str(),
                  compiled ? "compiled step" : "submitted step");
    }
    float first = 0;
    float last = 0;
    bool equal = true;
    for (int s = 0; s < steps; ++s) {
      if (compiled) {
        compiled->run().wait();
      } else {
        rt.submit(step).wait();
      }
      last = t.read(loss) * mean;
      if (s == 0) first = last;
      // Every rank holds the same loss, bit for bit.
      const float high = t.combined(last, loom::ReduceOp::max);
      const float low = t.combined(last, loom::ReduceOp::min);
      equal = equal && high == low;
      if (rank == 0 && (s % 10 == 0 || s + 1 == steps)) {
        std::printf("step %4d  loss %.6f%s\n", s, static_cast<double>(last),
                    high == low ? "" : "  (ranks differ!)");
      }
    }
    const bool fell = last < 0.5F * first && std::isfinite(last);
    if (rank == 0) {
      std::printf("# loss %.6f -> %.6f; %s across ranks\n", static_cast<double>(first),
                  static_cast<double>(last), equal ? "equal" : "NOT equal");
    }
    return equal && fell ? 0 : 1;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom_data_parallel: %s\n", e.what());
    return 1;
  }
}
