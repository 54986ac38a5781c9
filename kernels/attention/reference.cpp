// The CPU reference for attention: each query row's scores in double, its
// max subtracted before the exponentials, the output rounded once.
#include "attention/attention.hpp"
#include "attention/ring.hpp"
#include "common/convert.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace loom::kernels {
namespace {

std::int64_t row_at(const AttentionTensor& t, std::int64_t b, std::int64_t h, std::int64_t i) {
  return b * t.batch_stride + h * t.head_stride + i * t.row_stride;
}

}  // namespace

void attention_reference(const AttentionArgs& p) {
  const std::int64_t d = p.head_dim;
  std::vector<double> scores(static_cast<std::size_t>(p.k_len));
  std::vector<double> acc(static_cast<std::size_t>(d));
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t h = 0; h < p.heads; ++h) {
      for (std::int64_t i = 0; i < p.q_len; ++i) {
        const std::int64_t q_row = row_at(p.q, b, h, i);
        double max = -std::numeric_limits<double>::infinity();
        std::int64_t kept = 0;
        for (std::int64_t j = 0; j < p.k_len; ++j) {
          if (p.causal && j > i + p.causal_offset) break;
          const std::int64_t k_row = row_at(p.k, b, h, j);
          double dot = 0.0;
          for (std::int64_t e = 0; e < d; ++e) {
            dot += static_cast<double>(load_as_f32(p.q.data, p.dtype, q_row + e)) *
                   load_as_f32(p.k.data, p.dtype, k_row + e);
          }
          scores[static_cast<std::size_t>(j)] = dot * p.scale;
          max = std::max(max, scores[static_cast<std::size_t>(j)]);
          kept = j + 1;
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        double sum = 0.0;
        for (std::int64_t j = 0; j < kept; ++j) {
          const double w = std::exp(scores[static_cast<std::size_t>(j)] - max);
          sum += w;
          const std::int64_t v_row = row_at(p.v, b, h, j);
          for (std::int64_t e = 0; e < d; ++e) {
            acc[static_cast<std::size_t>(e)] += w * load_as_f32(p.v.data, p.dtype, v_row + e);
          }
        }
        const std::int64_t o_row = row_at(p.out, b, h, i);
        for (std::int64_t e = 0; e < d; ++e) {
          const double v = kept > 0 ? acc[static_cast<std::size_t>(e)] / sum : 0.0;
          store_from_f32(const_cast<void*>(p.out.data), p.dtype, o_row + e, static_cast<float>(v));
        }
        if (p.lse.data != nullptr) {
          auto* lse = static_cast<float*>(const_cast<void*>(p.lse.data));
          lse[row_at(p.lse, b, h, i)] = kept > 0 ? static_cast<float>(max + std::log(sum))
                                                 : -std::numeric_limits<float>::infinity();
        }
      }
    }
  }
}

namespace {

double load(const AttentionTensor& t, DType dtype, std::int64_t row, std::int64_t e) {
  return load_as_f32(t.data, dtype, row + e);
}

}  // namespace

void attention_backward_reference(const AttentionBackwardArgs& p) {
  const std::int64_t d = p.head_dim;
  const auto size = [](std::int64_t n) { return static_cast<std::size_t>(n); };
  std::vector<double> dk(size(p.k_len * d));
  std::vector<double> dv(size(p.k_len * d));
  std::vector<double> dq(size(d));
  const auto* lse = static_cast<const float*>(p.lse.data);
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t h = 0; h < p.heads; ++h) {
      std::fill(dk.begin(), dk.end(), 0.0);
      std::fill(dv.begin(), dv.end(), 0.0);
      for (std::int64_t i = 0; i < p.q_len; ++i) {
        const std::int64_t q_row = row_at(p.q, b, h, i);
        const std::int64_t do_row = row_at(p.dout, b, h, i);
        const std::int64_t o_row = row_at(p.out, b, h, i);
        const double row_lse = lse[row_at(p.lse, b, h, i)];
        double delta = 0.0;
        for (std::int64_t e = 0; e < d; ++e) {
          delta += load(p.dout, p.dtype, do_row, e) * load(p.out, p.dtype, o_row, e);
        }
        // The keys row i keeps; none when its lse is -inf.
        std::int64_t kept = std::isinf(row_lse) && row_lse < 0 ? 0 : p.k_len;
        if (p.causal) kept = std::clamp<std::int64_t>(i + p.causal_offset + 1, 0, kept);
        std::fill(dq.begin(), dq.end(), 0.0);
        for (std::int64_t j = 0; j < kept; ++j) {
          const std::int64_t k_row = row_at(p.k, b, h, j);
          const std::int64_t v_row = row_at(p.v, b, h, j);
          double dot = 0.0;
          double dp = 0.0;
          for (std::int64_t e = 0; e < d; ++e) {
            dot += load(p.q, p.dtype, q_row, e) * load(p.k, p.dtype, k_row, e);
            dp += load(p.dout, p.dtype, do_row, e) * load(p.v, p.dtype, v_row, e);
          }
          const double pr = std::exp(dot * p.scale - row_lse);
          const double ds = pr * (dp - delta);
          for (std::int64_t e = 0; e < d; ++e) {
            dv[size(j * d + e)] += pr * load(p.dout, p.dtype, do_row, e);
            dk[size(j * d + e)] += ds * p.scale * load(p.q, p.dtype, q_row, e);
            dq[size(e)] += ds * p.scale * load(p.k, p.dtype, k_row, e);
          }
        }
        const std::int64_t dq_row = row_at(p.dq, b, h, i);
        for (std::int64_t e = 0; e < d; ++e) {
          store_from_f32(const_cast<void*>(p.dq.data), p.dtype, dq_row + e,
                         static_cast<float>(dq[size(e)]));
        }
      }
      for (std::int64_t j = 0; j < p.k_len; ++j) {
        const std::int64_t dk_row = row_at(p.dk, b, h, j);
        const std::int64_t dv_row = row_at(p.dv, b, h, j);
        for (std::int64_t e = 0; e < d; ++e) {
          store_from_f32(const_cast<void*>(p.dk.data), p.dtype, dk_row + e,
                         static_cast<float>(dk[size(j * d + e)]));
          store_from_f32(const_cast<void*>(p.dv.data), p.dtype, dv_row + e,
                         static_cast<float>(dv[size(j * d + e)]));
        }
      }
    }
  }
}

void attention_merge_reference(const AttentionMergeArgs& p) {
  auto* acc = static_cast<float*>(const_cast<void*>(p.acc.data));
  auto* acc_lse = static_cast<float*>(const_cast<void*>(p.acc_lse.data));
  const auto* part_lse = static_cast<const float*>(p.part_lse.data);
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t h = 0; h < p.heads; ++h) {
      for (std::int64_t i = 0; i < p.rows; ++i) {
        const double lb = part_lse[row_at(p.part_lse, b, h, i)];
        double wa = 0.0;
        double wb = 1.0;
        double lse = lb;
        if (!p.first) {
          const double la = acc_lse[row_at(p.acc_lse, b, h, i)];
          const double m = std::max(la, lb);
          if (std::isinf(m) && m < 0) {
            wb = 0.0;  // neither kept a key: out stays 0
          } else {
            wa = std::exp(la - m);
            wb = std::exp(lb - m);
            lse = m + std::log(wa + wb);
            const double s = wa + wb;
            wa /= s;
            wb /= s;
          }
        }
        const std::int64_t a_row = row_at(p.acc, b, h, i);
        const std::int64_t p_row = row_at(p.part, b, h, i);
        for (std::int64_t e = 0; e < p.head_dim; ++e) {
          const double x = load_as_f32(p.part.data, p.dtype, p_row + e);
          const auto v = static_cast<float>(p.first ? x : wa * acc[a_row + e] + wb * x);
          acc[a_row + e] = v;
          if (p.out.data != nullptr) {
            store_from_f32(const_cast<void*>(p.out.data), p.dtype, row_at(p.out, b, h, i) + e, v);
          }
        }
        acc_lse[row_at(p.acc_lse, b, h, i)] = static_cast<float>(lse);
        if (p.out_lse.data != nullptr) {
          static_cast<float*>(const_cast<void*>(p.out_lse.data))[row_at(p.out_lse, b, h, i)] =
              static_cast<float>(lse);
        }
      }
    }
  }
}

void gradient_accumulate_reference(const GradientAccumulateArgs& p) {
  auto* acc = static_cast<float*>(const_cast<void*>(p.acc.data));
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t h = 0; h < p.heads; ++h) {
      for (std::int64_t i = 0; i < p.rows; ++i) {
        const std::int64_t a_row = row_at(p.acc, b, h, i);
        for (std::int64_t e = 0; e < p.head_dim; ++e) {
          float v = p.first ? 0.0F : acc[a_row + e];
          if (p.part.data != nullptr) {
            v += load_as_f32(p.part.data, p.dtype, row_at(p.part, b, h, i) + e);
            acc[a_row + e] = v;
          }
          if (p.out.data != nullptr) {
            store_from_f32(const_cast<void*>(p.out.data), p.dtype, row_at(p.out, b, h, i) + e, v);
          }
        }
      }
    }
  }
}

}  // namespace loom::kernels
