// The smallest graph: c = a + b, with the copies in and out as tasks.
#include <loom/loom.hpp>
#include <loom/ops.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    loom::Runtime rt;
    const std::int64_t n = 1000;
    std::vector<float> a(n, 1.5F), b(n, 2.25F), c(n, 0.0F);
    auto ha = rt.provide(a.data(), loom::DType::f32, {n}, loom::Memory::pageable);
    auto hb = rt.provide(b.data(), loom::DType::f32, {n}, loom::Memory::pageable);
    auto hc = rt.provide(c.data(), loom::DType::f32, {n}, loom::Memory::pageable);
    auto da = rt.tensor<float>({n});
    auto db = rt.tensor<float>({n});
    auto dc = rt.tensor<float>({n});
    loom::Graph g;
    g.copy(ha, da);
    g.copy(hb, db);
    g.add(loom::ops::vector_add(da, db, dc));
    g.copy(dc, hc);
    rt.submit(g).wait();
    std::printf("c[0] = %.2f, c[%lld] = %.2f (expected 3.75)\n", c[0],
                static_cast<long long>(n - 1), c[static_cast<std::size_t>(n - 1)]);
    return c[0] == 3.75F && c[static_cast<std::size_t>(n - 1)] == 3.75F ? 0 : 1;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
