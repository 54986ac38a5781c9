// The reduction ops: each binds the kernels of reduce.hpp and their CPU
// references to the Op interface. A view becomes the kernels' Segments here
// (or is rejected, saying why) once, in validate(), so both backends accept
// and refuse the same inputs.
#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>
#include <loom/ops/reduction.hpp>

#include "common/checks.hpp"
#include "reduction/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace loom::ops {
namespace {

using detail::reject;
using detail::require_dtype_in;
using detail::require_same_memory;
using kernels::ReduceOp;
using kernels::Segments;

// An evenly strided run of elements: count of them, stride apart.
struct Run {
  std::int64_t count = 1;
  std::int64_t stride = 0;
  std::vector<int> dims;  // the tensor's dimensions it covers
};

// Merges the dimensions listed (outermost first) into evenly strided runs:
// neighbours merge when the outer stride is the inner one times its extent.
// Extents of 1 place nothing and are skipped.
std::vector<Run> merge_runs(const Tensor& t, const std::vector<int>& dims) {
  std::vector<Run> runs;
  for (int d : dims) {
    const std::int64_t extent = t.size(d);
    if (extent == 1) continue;
    const std::int64_t stride = t.strides()[d];
    if (!runs.empty() && runs.back().stride == stride * extent) {
      runs.back().count *= extent;
      runs.back().stride = stride;
      runs.back().dims.push_back(d);
    } else {
      runs.push_back(Run{extent, stride, {d}});
    }
  }
  return runs;
}

std::vector<int> dims_except(int rank, int skip) {
  std::vector<int> dims;
  for (int d = 0; d < rank; ++d) {
    if (d != skip) dims.push_back(d);
  }
  return dims;
}

void require_float(const Tensor& t, std::string_view op, std::string_view role) {
  require_dtype_in(t, {DType::f32, DType::f16, DType::bf16}, op, role);
}

ReduceOp reduce_op_of(std::string_view name) {
  if (name.starts_with("max")) return ReduceOp::max;
  if (name.starts_with("min")) return ReduceOp::min;
  return ReduceOp::sum;
}

kernels::ReduceConfig config_of(ReductionOptions options) {
  kernels::ReduceConfig c;
  c.deterministic = options.deterministic;
  c.variant = options.variant;
  return c;
}

std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Every element of x, as at most three runs: x's dimensions by decreasing
// stride (a reduction of every element may visit them in any order, so a
// transpose of a contiguous tensor is one contiguous run). The innermost run
// is the segments' elements, the next the segments, the outermost the batch.
// nullopt when more runs remain, or a stride is negative.
std::optional<Segments> whole_segments(const Tensor& x) {
  if (x.numel() == 0) return Segments{1, 0, 0, 1};
  std::vector<int> dims;
  for (int d = 0; d < x.rank(); ++d) {
    if (x.strides()[d] < 0) return std::nullopt;
    dims.push_back(d);
  }
  std::stable_sort(dims.begin(), dims.end(),
                   [&](int a, int b) { return x.strides()[a] > x.strides()[b]; });
  const std::vector<Run> runs = merge_runs(x, dims);
  if (runs.empty()) return Segments{1, 1, 0, 1};
  if (runs.size() == 1) return Segments{1, runs[0].count, 0, runs[0].stride};
  if (runs.size() == 2)
    return Segments{runs[0].count, runs[1].count, runs[0].stride, runs[1].stride};
  if (runs.size() == 3) {
    // Partials land contiguously, [batch, count].
    return Segments{runs[1].count, runs[2].count,  runs[1].stride, runs[2].stride,
                    runs[0].count, runs[0].stride, runs[1].count};
  }
  return std::nullopt;
}

class WholeReduction final : public Op {
 public:
  WholeReduction(std::string name, Tensor x, Tensor out, ReductionOptions options)
      : name_(std::move(name)), x_(std::move(x)), out_(std::move(out)), options_(options) {}
  std::string_view name() const noexcept override { return name_; }
  std::vector<Tensor> reads() const override { return {x_}; }
  std::vector<Tensor> writes() const override { return {out_}; }

  void validate() const override {
    require_float(x_, name_, "x");
    require_float(out_, name_, "out");
    require_same_memory(x_, out_, name_);
    if (out_.numel() != 1) {
      reject(name_, "out must hold one element, got " + out_.describe());
    }
    if (x_.shares_storage_with(out_)) reject(name_, "out must not share storage with x");
    detail::require_known_variant(options_.variant, name_);
    if (!whole_segments(x_)) {
      reject(name_,
             "x is a strided view whose elements do not form one or two evenly strided "
             "runs, which the reduction kernels cannot take; call contiguous() first. Got " +
                 x_.describe());
    }
  }

  void run_cpu() const override {
    const Segments s = *whole_segments(x_);
    std::vector<double> per_segment(static_cast<std::size_t>(s.batch * s.count));
    const ReduceOp op = reduce_op_of(name_);
    kernels::reduce_segments_reference(op, x_.data(), x_.dtype(), s, per_segment.data());
    double acc = per_segment.empty() ? 0.0 : per_segment[0];
    for (std::size_t i = 1; i < per_segment.size(); ++i) {
      acc = fold(op, acc, per_segment[i]);
    }
    kernels::store_host(out_.data(), out_.dtype(), 0, acc);
  }

  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    const Segments s = *whole_segments(x_);
    const ReduceOp op = reduce_op_of(name_);
    const StreamView stream(cuda_stream(ctx));
    const kernels::ReduceConfig config = config_of(options_);
    const std::int64_t segments = s.batch * s.count;
    if (segments == 1 && s.element_stride == 1) {
      const auto n = static_cast<std::size_t>(s.length);
      const std::size_t bytes = kernels::reduce_workspace_bytes(n, config);
      void* workspace = bytes > 0 ? ctx.workspace(bytes) : nullptr;
      kernels::reduce(op, x_.data(), x_.dtype(), n, out_.data(), out_.dtype(), workspace, stream,
                      config);
      return;
    }
    if (segments == 1) {  // one strided run: a segment the row kernel cuts up
      const std::size_t bytes = kernels::reduce_segments_workspace_bytes(s);
      void* workspace = bytes > 0 ? ctx.workspace(bytes) : nullptr;
      kernels::reduce_segments(op, x_.data(), x_.dtype(), s, out_.data(), out_.dtype(), 1,
                               workspace, stream);
      return;
    }
    // Two or three runs: fold each segment into f32, then those partials.
    const auto partials = static_cast<std::size_t>(segments);
    const std::size_t seg_bytes = aligned(kernels::reduce_segments_workspace_bytes(s));
    const std::size_t partial_bytes = aligned(partials * sizeof(float));
    const std::size_t flat_bytes = kernels::reduce_workspace_bytes(partials, config);
    auto* base = static_cast<char*>(ctx.workspace(seg_bytes + partial_bytes + flat_bytes));
    kernels::reduce_segments(op, x_.data(), x_.dtype(), s, base + seg_bytes, DType::f32, 1,
                             seg_bytes > 0 ? base : nullptr, stream);
    kernels::reduce(op, base + seg_bytes, DType::f32, partials, out_.data(), out_.dtype(),
                    flat_bytes > 0 ? base + seg_bytes + partial_bytes : nullptr, stream, config);
  }

 private:
  static double fold(ReduceOp op, double a, double b) {
    switch (op) {
      case ReduceOp::sum: return a + b;
      case ReduceOp::max: return (a > b || std::isnan(a)) ? a : b;
      case ReduceOp::min: return (a < b || std::isnan(a)) ? a : b;
    }
    return a;
  }

  std::string name_;
  Tensor x_, out_;
  ReductionOptions options_;
};

// What a reduction along a dimension hands the kernels.
struct AlongPlan {
  Segments segments;
  std::int64_t out_stride = 1;
};

class AlongReduction final : public Op {
 public:
  AlongReduction(std::string name, Tensor x, int dim, Tensor out)
      : name_(std::move(name)), x_(std::move(x)), dim_(dim), out_(std::move(out)) {}
  std::string_view name() const noexcept override { return name_; }
  std::vector<Tensor> reads() const override { return {x_}; }
  std::vector<Tensor> writes() const override { return {out_}; }

  void validate() const override { (void)plan(); }

  void run_cpu() const override {
    const AlongPlan p = plan();
    std::vector<double> values(static_cast<std::size_t>(p.segments.batch * p.segments.count));
    kernels::reduce_segments_reference(reduce_op_of(name_), x_.data(), x_.dtype(), p.segments,
                                       values.data());
    const Segments& s = p.segments;
    std::size_t i = 0;
    for (std::int64_t b = 0; b < s.batch; ++b) {
      for (std::int64_t k = 0; k < s.count; ++k) {
        kernels::store_host(out_.data(), out_.dtype(), b * s.out_batch_stride + k * p.out_stride,
                            values[i++]);
      }
    }
  }

  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    const AlongPlan p = plan();
    const std::size_t bytes = kernels::reduce_segments_workspace_bytes(p.segments);
    void* workspace = bytes > 0 ? ctx.workspace(bytes) : nullptr;
    kernels::reduce_segments(reduce_op_of(name_), x_.data(), x_.dtype(), p.segments, out_.data(),
                             out_.dtype(), p.out_stride, workspace, StreamView(cuda_stream(ctx)));
  }

 private:
  // Checks the inputs and derives the segments; @throws InvalidArgument.
  AlongPlan plan() const {
    require_float(x_, name_, "x");
    require_float(out_, name_, "out");
    require_same_memory(x_, out_, name_);
    const int rank = x_.rank();
    if (rank < 1) reject(name_, "x must have at least one dimension, got " + x_.describe());
    if (dim_ < -rank || dim_ >= rank) {
      reject(name_, "dim " + std::to_string(dim_) + " is out of range for " + x_.describe());
    }
    const int dim = dim_ < 0 ? dim_ + rank : dim_;
    if (x_.shares_storage_with(out_)) reject(name_, "out must not share storage with x");
    const std::vector<int> others = dims_except(rank, dim);
    const bool keep_dim = out_.rank() == rank;
    bool shape_ok = out_.rank() == rank - 1 || keep_dim;
    for (std::size_t i = 0; shape_ok && i < others.size(); ++i) {
      const int out_dim = keep_dim ? others[i] : static_cast<int>(i);
      shape_ok = out_.size(out_dim) == x_.size(others[i]);
    }
    if (keep_dim && shape_ok) shape_ok = out_.size(dim) == 1;
    if (!shape_ok) {
      reject(name_, "out must have x's shape without dim " + std::to_string(dim) +
                        " (or with it of extent 1): x " + x_.describe() + ", out " +
                        out_.describe());
    }
    std::int64_t count = 1;
    for (int d : others) count *= x_.size(d);
    AlongPlan p;
    p.segments = Segments{count, x_.size(dim), 0, x_.strides()[dim]};
    if (count == 0) return p;  // nothing to write: no layout to check
    const std::vector<Run> x_runs = merge_runs(x_, others);
    if (x_runs.size() > 2) {
      reject(name_, "x is a strided view whose dimensions other than " + std::to_string(dim) +
                        " do not merge into at most two evenly strided runs, which the kernels "
                        "cannot take; call contiguous() first. Got " +
                        x_.describe());
    }
    // out's dimensions of each of x's runs must merge likewise.
    std::vector<Run> out_runs;
    for (const Run& run : x_runs) {
      std::vector<int> out_dims;
      for (int d : run.dims) out_dims.push_back(keep_dim || d < dim ? d : d - 1);
      const std::vector<Run> merged = merge_runs(out_, out_dims);
      if (merged.size() != 1) {
        reject(name_, "out is a strided view that does not run evenly where x does; got " +
                          out_.describe() + " for x " + x_.describe());
      }
      out_runs.push_back(merged[0]);
    }
    if (x_runs.size() == 1) {
      p.segments.segment_stride = x_runs[0].stride;
      p.out_stride = out_runs[0].stride;
    } else if (x_runs.size() == 2) {  // the outer run batches the inner one
      p.segments.count = x_runs[1].count;
      p.segments.segment_stride = x_runs[1].stride;
      p.segments.batch = x_runs[0].count;
      p.segments.batch_stride = x_runs[0].stride;
      p.segments.out_batch_stride = out_runs[0].stride;
      p.out_stride = out_runs[1].stride;
    }
    return p;
  }

  std::string name_;
  Tensor x_;
  int dim_;
  Tensor out_;
};

}  // namespace

OpPtr sum(const Tensor& x, const Tensor& out, ReductionOptions options) {
  return std::make_shared<WholeReduction>("sum", x, out, options);
}
OpPtr max(const Tensor& x, const Tensor& out, ReductionOptions options) {
  return std::make_shared<WholeReduction>("max", x, out, options);
}
OpPtr min(const Tensor& x, const Tensor& out, ReductionOptions options) {
  return std::make_shared<WholeReduction>("min", x, out, options);
}
OpPtr sum(const Tensor& x, int dim, const Tensor& out) {
  return std::make_shared<AlongReduction>("sum_along", x, dim, out);
}
OpPtr max(const Tensor& x, int dim, const Tensor& out) {
  return std::make_shared<AlongReduction>("max_along", x, dim, out);
}
OpPtr min(const Tensor& x, int dim, const Tensor& out) {
  return std::make_shared<AlongReduction>("min_along", x, dim, out);
}

}  // namespace loom::ops
