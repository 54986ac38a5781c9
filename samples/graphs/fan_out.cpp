// Fan-out / fan-in: one producer, eight independent branches, one reduction
// of the branches back into one tensor, then a host task that reads it. The
// branches run concurrently on loom's streams (or host workers); the joins
// cost one event a cross-stream edge. Prints the per-task report.
#include <loom/loom.hpp>
#include <loom/ops.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    loom::Runtime rt;
    constexpr int kBranches = 8;
    const loom::Shape shape{1 << 20};
    auto source = rt.tensor<float>(shape);
    std::vector<loom::Tensor> branches;
    for (int i = 0; i < kBranches; ++i) branches.push_back(rt.tensor<float>(shape));
    auto total = rt.tensor<float>(shape);
    auto host =
        rt.tensor<float>(shape, rt.has_gpu() ? loom::Memory::pinned : loom::Memory::pageable);

    loom::Graph g;
    g.add(loom::ops::fill(source, 1.0F), {.name = "produce"});
    for (int i = 0; i < kBranches; ++i) {
      g.add(loom::ops::scale_copy(source, branches[static_cast<std::size_t>(i)], float(i + 1)),
            {.name = "branch " + std::to_string(i)});
    }
    g.add(loom::ops::fill(total, 0.0F), {.name = "zero"});
    for (int i = 0; i < kBranches; ++i) {
      g.add(loom::ops::vector_add(total, branches[static_cast<std::size_t>(i)], total),
            {.name = "join " + std::to_string(i)});
    }
    g.copy(total, host, {.name = "fetch"});
    float value = 0;
    g.host("read", [&] { value = host.data_as<float>()[0]; }, {host});

    auto run = rt.submit(g);
    run.wait();
    std::printf("sum of branches: %.1f (expected %d)\n", value, kBranches * (kBranches + 1) / 2);
    for (const auto& r : run.report()) {
      std::printf("  %-10s %s\n", r.name.c_str(), std::string(loom::to_string(r.status)).c_str());
    }
    return value == kBranches * (kBranches + 1) / 2 ? 0 : 1;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
