// The CPU reference for SGEMM: blocked over N and K so that a panel of B and
// the accumulators stay in cache, accumulating in double so that its own
// rounding is negligible beside the GPU kernels'.
#include "common/convert.hpp"
#include "elementwise/functors.hpp"
#include "gemm/hgemm.hpp"
#include "gemm/sgemm.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace loom::kernels {
namespace {

constexpr std::int64_t kBlockN = 256;
constexpr std::int64_t kBlockK = 128;

// B(k0 .. k0+kb, n0 .. n0+nb), row-major and contiguous, in double.
void pack_b(const SgemmArgs& p, std::int64_t k0, std::int64_t kb, std::int64_t n0, std::int64_t nb,
            std::vector<double>& panel) {
  for (std::int64_t kk = 0; kk < kb; ++kk) {
    const float* row = p.b.data + (k0 + kk) * p.b.row_stride;
    for (std::int64_t j = 0; j < nb; ++j) {
      panel[static_cast<std::size_t>(kk * nb + j)] = row[(n0 + j) * p.b.col_stride];
    }
  }
}

// The activation on the f32 value, as the kernels apply it.
float activate(SgemmActivation activation, float v) {
  switch (activation) {
    case SgemmActivation::relu: return map_fn::loom_map_relu(v);
    case SgemmActivation::gelu_tanh: return map_fn::loom_map_gelu_tanh(v);
    default: return v;
  }
}

}  // namespace

void hgemm_reference(const HgemmArgs& p) {
  if (p.m <= 0 || p.n <= 0) return;
  // B's batch entry as a row-major panel of doubles: the inner loop then runs
  // along contiguous memory whatever B's layout.
  std::vector<double> panel(static_cast<std::size_t>(p.k * p.n));
  std::vector<double> row(static_cast<std::size_t>(p.n));
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t kk = 0; kk < p.k; ++kk) {
      for (std::int64_t j = 0; j < p.n; ++j) {
        panel[static_cast<std::size_t>(kk * p.n + j)] = load_as_f32(
            p.b.data, p.b.dtype, b * p.b.batch_stride + kk * p.b.row_stride + j * p.b.col_stride);
      }
    }
    for (std::int64_t i = 0; i < p.m; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      for (std::int64_t kk = 0; kk < p.k; ++kk) {
        const double aik = load_as_f32(
            p.a.data, p.a.dtype, b * p.a.batch_stride + i * p.a.row_stride + kk * p.a.col_stride);
        const double* bk = panel.data() + kk * p.n;
        for (std::int64_t j = 0; j < p.n; ++j) row[static_cast<std::size_t>(j)] += aik * bk[j];
      }
      for (std::int64_t j = 0; j < p.n; ++j) {
        const std::int64_t at = b * p.c.batch_stride + i * p.c.row_stride + j * p.c.col_stride;
        double v = static_cast<double>(p.alpha) * row[static_cast<std::size_t>(j)];
        if (p.beta != 0.0F) v += static_cast<double>(p.beta) * load_as_f32(p.c.data, p.c.dtype, at);
        if (p.bias.data != nullptr) {
          v += load_as_f32(p.bias.data, p.bias.dtype,
                           b * p.bias.batch_stride + i * p.bias.row_stride + j * p.bias.col_stride);
        }
        store_from_f32(const_cast<void*>(p.c.data), p.c.dtype, at,
                       activate(p.activation, static_cast<float>(v)));
      }
    }
  }
}

void sgemm_reference(const SgemmArgs& p) {
  if (p.m <= 0 || p.n <= 0) return;
  std::vector<double> panel(static_cast<std::size_t>(kBlockK * kBlockN));
  std::vector<double> acc(static_cast<std::size_t>(p.m * std::min(p.n, kBlockN)));
  for (std::int64_t n0 = 0; n0 < p.n; n0 += kBlockN) {
    const std::int64_t nb = std::min(kBlockN, p.n - n0);
    std::fill(acc.begin(), acc.end(), 0.0);
    for (std::int64_t k0 = 0; k0 < p.k; k0 += kBlockK) {
      const std::int64_t kb = std::min(kBlockK, p.k - k0);
      pack_b(p, k0, kb, n0, nb, panel);
      for (std::int64_t i = 0; i < p.m; ++i) {
        double* out = acc.data() + i * nb;
        const float* a = p.a.data + i * p.a.row_stride + k0 * p.a.col_stride;
        for (std::int64_t kk = 0; kk < kb; ++kk) {
          const double aik = a[kk * p.a.col_stride];
          const double* b = panel.data() + kk * nb;
          for (std::int64_t j = 0; j < nb; ++j) out[j] += aik * b[j];
        }
      }
    }
    for (std::int64_t i = 0; i < p.m; ++i) {
      for (std::int64_t j = 0; j < nb; ++j) {
        float& c = p.c.data[i * p.c.row_stride + (n0 + j) * p.c.col_stride];
        const double scaled =
            static_cast<double>(p.alpha) * acc[static_cast<std::size_t>(i * nb + j)];
        // beta == 0 ignores C, NaN included, as the kernels do.
        double v = p.beta == 0.0F ? scaled : scaled + static_cast<double>(p.beta) * c;
        if (p.bias.data != nullptr) {
          v += p.bias.data[i * p.bias.row_stride + (n0 + j) * p.bias.col_stride];
        }
        c = activate(p.activation, static_cast<float>(v));
      }
    }
  }
}

}  // namespace loom::kernels
