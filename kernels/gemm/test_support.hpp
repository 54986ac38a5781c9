#pragma once
// Host matrices in either layout with padded leading dimensions, and the
// tolerance check of an SGEMM result against the CPU reference; shared by the
// CPU and GPU tests of the family.
#include "gemm/sgemm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace loom::test::gemm {

enum class Order { row_major, col_major };

inline const char* to_string(Order o) { return o == Order::row_major ? "row" : "col"; }

/// rows x cols in `order`, with `pad` unused elements after each row
/// (column), so that leading dimensions differ from the extents.
struct HostMatrix {
  std::int64_t rows = 0, cols = 0;
  Order order = Order::row_major;
  std::int64_t ld = 0;
  std::vector<float> data;

  HostMatrix(std::int64_t r, std::int64_t c, Order o, std::int64_t pad = 0)
      : rows(r), cols(c), order(o), ld((o == Order::row_major ? c : r) + pad) {
    const std::int64_t lines = o == Order::row_major ? r : c;
    data.assign(static_cast<std::size_t>(lines * ld), 0.0F);
  }
  std::int64_t row_stride() const { return order == Order::row_major ? ld : 1; }
  std::int64_t col_stride() const { return order == Order::row_major ? 1 : ld; }
  float& at(std::int64_t i, std::int64_t j) { return data[index(i, j)]; }
  float at(std::int64_t i, std::int64_t j) const { return data[index(i, j)]; }
  std::size_t index(std::int64_t i, std::int64_t j) const {
    return static_cast<std::size_t>(i * row_stride() + j * col_stride());
  }
  void randomize(std::mt19937_64& rng) {
    std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
    for (auto& x : data) x = dist(rng);
  }
  template <class T>
  kernels::MatrixRef<T> ref(T* base) const {
    return {base, row_stride(), col_stride()};
  }
};

/// C = alpha A B + beta C over host matrices (the product's extents theirs).
inline kernels::SgemmArgs product_args(const HostMatrix& a, const HostMatrix& b, HostMatrix& c,
                                       float alpha = 1.0F, float beta = 0.0F) {
  kernels::SgemmArgs p;
  p.m = a.rows;
  p.n = b.cols;
  p.k = a.cols;
  p.alpha = alpha;
  p.beta = beta;
  p.a = a.ref<const float>(a.data.data());
  p.b = b.ref<const float>(b.data.data());
  p.c = c.ref<float>(c.data.data());
  return p;
}

/// Checks C (m x n, in `got`) against `expected`, elementwise within
/// `1e-5 * sqrt(k) * magnitude + 1e-6`, where magnitude is the matching
/// element of |alpha| |A| |B| + |beta| |C0|. Returns the number of bad elements.
inline std::int64_t count_mismatches(const HostMatrix& got, const HostMatrix& expected,
                                     const HostMatrix& magnitude, std::int64_t k,
                                     std::string* first) {
  const double tol = 1e-5 * std::sqrt(static_cast<double>(k > 0 ? k : 1));
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < got.rows; ++i) {
    for (std::int64_t j = 0; j < got.cols; ++j) {
      const double diff = std::fabs(static_cast<double>(got.at(i, j)) - expected.at(i, j));
      if (!(diff <= tol * magnitude.at(i, j) + 1e-6)) {
        if (bad == 0 && first != nullptr) {
          std::ostringstream where;  // (GCC 12 warns falsely on chained string +)
          where << "(" << i << ", " << j << "): got " << got.at(i, j) << ", expected "
                << expected.at(i, j);
          *first = where.str();
        }
        ++bad;
      }
    }
  }
  return bad;
}

/// The magnitudes |alpha| |A| |B| + |beta| |C0| (through the reference on
/// absolute values), in C's layout.
inline HostMatrix magnitudes(const HostMatrix& a, const HostMatrix& b, const HostMatrix& c0,
                             float alpha, float beta) {
  HostMatrix aa = a, bb = b, cc = c0;
  for (auto* m : {&aa, &bb, &cc}) {
    for (auto& x : m->data) x = std::isnan(x) ? 0.0F : std::fabs(x);
  }
  kernels::sgemm_reference(product_args(aa, bb, cc, std::fabs(alpha), std::fabs(beta)));
  return cc;
}

}  // namespace loom::test::gemm
