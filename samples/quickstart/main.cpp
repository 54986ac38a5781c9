// loom quickstart: report the machine, then run a real task graph: upload
// two vectors, add them, scale the sum, download it and check it on the
// host. On a GPU the ops are CUDA kernels on loom's streams; without one the
// same graph runs on the CPU backend. Set LOOM_TRACE=trace.json to get a
// Chrome trace of each run, LOOM_LOG_LEVEL=info to see the backend chosen.
#include <loom/loom.hpp>
#include <loom/ops.hpp>

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  try {
    std::printf("%s", loom::device_report().c_str());
    loom::Runtime rt;
    std::printf("backend: %s\n", rt.has_gpu() ? "CUDA" : "CPU");

    constexpr std::int64_t kN = std::int64_t{1} << 24;
    const unsigned seed = std::random_device{}();
    std::printf("input seed: %u\n", seed);  // the inputs can be made again from it
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
    std::vector<float> a(kN), b(kN), result(kN);
    for (std::int64_t i = 0; i < kN; ++i) {
      a[static_cast<std::size_t>(i)] = dist(rng);
      b[static_cast<std::size_t>(i)] = dist(rng);
    }

    // The user's vectors, wrapped without copies; the work tensors live
    // where the backend computes (device 0, or host memory).
    const loom::Shape shape{kN};
    auto ha = rt.provide(a.data(), loom::DType::f32, shape, loom::Memory::pageable);
    auto hb = rt.provide(b.data(), loom::DType::f32, shape, loom::Memory::pageable);
    auto hr = rt.provide(result.data(), loom::DType::f32, shape, loom::Memory::pageable);
    auto da = rt.tensor<float>(shape);
    auto db = rt.tensor<float>(shape);
    auto dc = rt.tensor<float>(shape);

    loom::Graph g;
    g.copy(ha, da, {.name = "upload a"});
    g.copy(hb, db, {.name = "upload b"});
    g.add(loom::ops::vector_add(da, db, dc));    // after both uploads: it reads da, db
    g.add(loom::ops::scale_copy(dc, dc, 0.5F));  // in place, after the add
    g.copy(dc, hr, {.name = "download"});
    std::size_t mismatches = 0;
    g.host("check",
           [&] {
             for (std::int64_t i = 0; i < kN; ++i) {
               const auto k = static_cast<std::size_t>(i);
               if (result[k] != 0.5F * (a[k] + b[k])) ++mismatches;
             }
           },
           {hr});

    rt.submit(g).wait();  // warm-up: pools, streams, staging buffers
    const auto t0 = std::chrono::steady_clock::now();
    auto run = rt.submit(g);
    run.wait();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("graph of %zu tasks over %lld floats: %.2f ms, %zu mismatches\n", g.size(),
                static_cast<long long>(kN), ms, mismatches);
    const auto stats = rt.statistics(rt.default_memory());
    std::printf("%s pool: %s\n", rt.default_memory().to_string().c_str(),
                loom::to_string(stats).c_str());
    return mismatches == 0 ? 0 : 1;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
