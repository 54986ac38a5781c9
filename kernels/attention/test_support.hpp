#pragma once
// What the attention family's tests share: random [B, H, S, D] inputs in
// bf16/f16, widening, and an attention computed the plain way (the whole
// score matrix of a head, masked, softmaxed) to hold the reference against.
#include <loom/dtype.hpp>
#include <loom/ops/ring_attention.hpp>

#include "common/convert.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace loom::test::attention {

inline std::vector<std::uint16_t> random_halves(std::size_t n, DType dtype, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) {
    x = dtype == DType::bf16 ? kernels::f32_to_bf16_bits(dist(rng))
                             : kernels::f32_to_f16_bits(dist(rng));
  }
  return v;
}

inline float widen(DType dtype, std::uint16_t bits) {
  return dtype == DType::bf16 ? kernels::bf16_bits_to_f32(bits) : kernels::f16_bits_to_f32(bits);
}

/// out and lse of one head, contiguous [S, D] rows: scores of every pair,
/// masked (key j kept for query i when j <= i + offset), softmax by rows.
struct PlainResult {
  std::vector<double> out;
  std::vector<double> lse;
};
inline PlainResult plain_attention(const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, std::int64_t sq, std::int64_t sk,
                                   std::int64_t d, double scale, bool causal, std::int64_t offset) {
  PlainResult r{
      std::vector<double>(static_cast<std::size_t>(sq * d), 0.0),
      std::vector<double>(static_cast<std::size_t>(sq), -std::numeric_limits<double>::infinity())};
  std::vector<double> s(static_cast<std::size_t>(sk));
  for (std::int64_t i = 0; i < sq; ++i) {
    double max = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < sk; ++j) {
      double dot = 0.0;
      for (std::int64_t e = 0; e < d; ++e) dot += double(q[i * d + e]) * k[j * d + e];
      const bool kept = !causal || j <= i + offset;
      s[j] = kept ? dot * scale : -std::numeric_limits<double>::infinity();
      max = std::max(max, s[j]);
    }
    if (max == -std::numeric_limits<double>::infinity()) continue;
    double sum = 0.0;
    for (std::int64_t j = 0; j < sk; ++j) sum += std::exp(s[j] - max);
    for (std::int64_t j = 0; j < sk; ++j) {
      const double p = std::exp(s[j] - max) / sum;
      for (std::int64_t e = 0; e < d; ++e) r.out[i * d + e] += p * v[j * d + e];
    }
    r.lse[i] = max + std::log(sum);
  }
  return r;
}

/// dq, dk and dv of one head given dout, the plain way: P from the whole
/// masked score matrix, dV = P^T dO, dP = dO V^T, dS = P o (dP - rowsum(P o dP)),
/// dQ = scale dS K, dK = scale dS^T Q. Independent of the reference (which
/// takes out and lse as given).
struct PlainGradients {
  std::vector<double> dq, dk, dv;
};
inline PlainGradients plain_attention_gradients(const std::vector<float>& q,
                                                const std::vector<float>& k,
                                                const std::vector<float>& v,
                                                const std::vector<float>& dout, std::int64_t sq,
                                                std::int64_t sk, std::int64_t d, double scale,
                                                bool causal, std::int64_t offset) {
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  PlainGradients g{std::vector<double>(n(sq * d), 0.0), std::vector<double>(n(sk * d), 0.0),
                   std::vector<double>(n(sk * d), 0.0)};
  std::vector<double> p(n(sk));
  std::vector<double> dp(n(sk));
  for (std::int64_t i = 0; i < sq; ++i) {
    double max = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < sk; ++j) {
      double dot = 0.0;
      for (std::int64_t e = 0; e < d; ++e) dot += double(q[i * d + e]) * k[j * d + e];
      p[j] = !causal || j <= i + offset ? dot * scale : -std::numeric_limits<double>::infinity();
      max = std::max(max, p[j]);
    }
    if (max == -std::numeric_limits<double>::infinity()) continue;
    double sum = 0.0;
    for (std::int64_t j = 0; j < sk; ++j) sum += std::exp(p[j] - max);
    double row = 0.0;
    for (std::int64_t j = 0; j < sk; ++j) {
      p[j] = std::exp(p[j] - max) / sum;
      dp[j] = 0.0;
      for (std::int64_t e = 0; e < d; ++e) dp[j] += double(dout[i * d + e]) * v[j * d + e];
      row += p[j] * dp[j];
    }
    for (std::int64_t j = 0; j < sk; ++j) {
      const double ds = p[j] * (dp[j] - row);
      for (std::int64_t e = 0; e < d; ++e) {
        g.dv[j * d + e] += p[j] * dout[i * d + e];
        g.dq[i * d + e] += scale * ds * k[j * d + e];
        g.dk[j * d + e] += scale * ds * q[i * d + e];
      }
    }
  }
  return g;
}

/// A rank's rows of a whole-sequence array of `heads` heads of `length`
/// rows of `width` values, in its block's order (ring_ranges), as floats.
template <class T>
std::vector<float> ring_local_rows(const std::vector<T>& whole, std::int64_t heads,
                                   std::int64_t length,
                                   const std::vector<ops::SequenceRange>& ranges,
                                   std::int64_t width) {
  std::vector<float> out;
  for (std::int64_t bh = 0; bh < heads; ++bh) {
    for (const auto& r : ranges) {
      for (std::int64_t i = r.start; i < r.stop; ++i) {
        const auto at = static_cast<std::size_t>((bh * length + i) * width);
        for (std::int64_t e = 0; e < width; ++e) {
          out.push_back(static_cast<float>(whole[at + static_cast<std::size_t>(e)]));
        }
      }
    }
  }
  return out;
}

/// Attention over a whole sequence and its gradients, head by head: q, k,
/// v and dout hold `heads` heads of `length` rows of d values each.
struct WholeReference {
  std::vector<double> out, lse, dq, dk, dv;
};
inline WholeReference whole_reference(const std::vector<float>& q, const std::vector<float>& k,
                                      const std::vector<float>& v, const std::vector<float>& dout,
                                      std::int64_t heads, std::int64_t length, std::int64_t d,
                                      bool causal) {
  WholeReference w;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const auto rows = static_cast<std::ptrdiff_t>(length * d);
  for (std::int64_t bh = 0; bh < heads; ++bh) {
    const auto head = [&](const std::vector<float>& x) {
      const auto at = x.begin() + bh * rows;
      return std::vector<float>(at, at + rows);
    };
    const auto r = plain_attention(head(q), head(k), head(v), length, length, d, scale, causal, 0);
    const auto g = plain_attention_gradients(head(q), head(k), head(v), head(dout), length, length,
                                             d, scale, causal, 0);
    w.out.insert(w.out.end(), r.out.begin(), r.out.end());
    w.lse.insert(w.lse.end(), r.lse.begin(), r.lse.end());
    w.dq.insert(w.dq.end(), g.dq.begin(), g.dq.end());
    w.dk.insert(w.dk.end(), g.dk.begin(), g.dk.end());
    w.dv.insert(w.dv.end(), g.dv.begin(), g.dv.end());
  }
  return w;
}

}  // namespace loom::test::attention
