// The index ops: each binds its kernel and CPU reference to the Op
// interface. The tensors become the kernels' walks (index.hpp) here, in one
// function that checks them first, so validate() and both backends see the
// same checks and the same walk.
#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>
#include <loom/ops/index.hpp>

#include "common/checks.hpp"
#include "index/index.hpp"
#include "index/walk.hpp"

#include <array>
#include <string>
#include <vector>

namespace loom::ops {
namespace {

using detail::reject;
using detail::require_dtype;
using detail::require_dtype_in;
using detail::require_same_memory;
using kernels::IndexedWalk;
using kernels::IndexWalk;
using kernels::kWalkOperands;

using WalkStrides = std::array<Strides, kWalkOperands>;

void require_float(const Tensor& t, std::string_view op, std::string_view role) {
  require_dtype_in(t, {DType::f32, DType::f16, DType::bf16}, op, role);
}

void require_index(const Tensor& t, std::string_view op, std::string_view role) {
  require_dtype_in(t, {DType::i32, DType::i64}, op, role);
}

void require_disjoint(const Tensor& out, const Tensor& in, std::string_view op,
                      std::string_view roles) {
  if (out.shares_storage_with(in)) {
    reject(op, std::string(roles) + " must not share storage; got " + out.describe() + " and " +
                   in.describe());
  }
}

// dim in [-rank, rank), made non-negative.
int normalized_dim(int dim, const Tensor& t, std::string_view op, std::string_view role) {
  const int rank = t.rank();
  if (rank < 1) reject(op, std::string(role) + " must have at least one dimension");
  if (dim < -rank || dim >= rank) {
    reject(op, "dim " + std::to_string(dim) + " is out of range for " + std::string(role) + " " +
                   t.describe());
  }
  return dim < 0 ? dim + rank : dim;
}

// A copy of t's strides with dimension `dim` stepping nowhere: an index
// value addresses it instead.
Strides without_step(const Tensor& t, int dim) {
  Strides s = t.strides();
  s[dim] = 0;
  return s;
}

bool mergeable(const IndexWalk& w, int last, const WalkStrides& strides, int d,
               std::int64_t extent) {
  for (int k = 0; k < kWalkOperands; ++k) {
    if (w.stride[k][last] != strides[static_cast<std::size_t>(k)][d] * extent) return false;
  }
  return true;
}

// The walk over `extents`: extents of 1 dropped, and neighbours merged
// where every operand steps through them evenly.
IndexWalk make_walk(const Shape& extents, const WalkStrides& strides) {
  IndexWalk w;
  w.count = extents.product();
  int r = 0;
  for (int d = 0; d < extents.rank(); ++d) {
    const std::int64_t e = extents[d];
    if (e == 1) continue;
    const bool merge = r > 0 && mergeable(w, r - 1, strides, d, e);
    const int at = merge ? r - 1 : r++;
    w.extent[at] = merge ? w.extent[at] * e : e;
    for (int k = 0; k < kWalkOperands; ++k) {
      w.stride[k][at] = strides[static_cast<std::size_t>(k)][d];
    }
  }
  w.rank = r;
  return w;
}

int element_bytes(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

std::uint32_t nan_word(DType dtype) {
  return dtype == DType::f32 ? kernels::index_detail::kNanWord4 : kernels::index_detail::kNanWord2;
}

// gather and index_select: one kernel, different shape rules.
class Gather final : public Op {
 public:
  Gather(bool select, Tensor x, int dim, Tensor index, Tensor out)
      : select_(select),
        x_(std::move(x)),
        index_(std::move(index)),
        out_(std::move(out)),
        dim_(dim) {}
  std::string_view name() const noexcept override { return select_ ? "index_select" : "gather"; }
  std::vector<Tensor> reads() const override { return {x_, index_}; }
  std::vector<Tensor> writes() const override { return {out_}; }

  void validate() const override { (void)walk(); }
  void run_cpu() const override {
    kernels::gather_reference(x_.data(), index_.data(), index_.dtype(), out_.data(),
                              element_bytes(x_.dtype()), nan_word(x_.dtype()), walk());
  }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::gather(x_.data(), index_.data(), index_.dtype(), out_.data(),
                    element_bytes(x_.dtype()), nan_word(x_.dtype()), walk(),
                    StreamView(cuda_stream(ctx)));
  }

 private:
  // Checks the tensors and derives the walk over out; @throws InvalidArgument.
  IndexedWalk walk() const {
    const std::string_view op = name();
    require_float(x_, op, "x");
    require_index(index_, op, "index");
    require_dtype(out_, x_.dtype(), op, "out");
    require_same_memory(x_, out_, op);
    require_same_memory(index_, out_, op);
    const int dim = normalized_dim(dim_, x_, op, "x");
    require_disjoint(out_, x_, op, "out and x");
    require_disjoint(out_, index_, op, "out and index");
    const Strides index_strides = select_ ? select_shapes(dim) : gather_shapes(dim);
    IndexedWalk w;
    w.walk = make_walk(out_.shape(), {out_.strides(), without_step(x_, dim), index_strides});
    w.indexed_extent = x_.size(dim);
    w.indexed_stride = x_.strides()[dim];
    return w;
  }

  // index has x's rank and extents at most x's but along dim; out has index's shape.
  Strides gather_shapes(int dim) const {
    bool ok = index_.rank() == x_.rank();
    for (int d = 0; ok && d < x_.rank(); ++d) ok = d == dim || index_.size(d) <= x_.size(d);
    if (!ok) {
      reject(name(), "index must have x's rank and, along every dimension but " +
                         std::to_string(dim) + ", an extent at most x's; got x " + x_.describe() +
                         ", index " + index_.describe());
    }
    detail::require_same_shape(index_, out_, name(), "index and out");
    return index_.strides();
  }

  // index is 1-D; out is x with dim's extent replaced by index's. index
  // steps along dim only: every slice reads the same index element.
  Strides select_shapes(int dim) const {
    detail::require_rank(index_, 1, name(), "index");
    Shape expected = x_.shape();
    expected[dim] = index_.size(0);
    if (!(out_.shape() == expected)) {
      reject(name(), "out must have shape " + expected.to_string() + " (x's with dim " +
                         std::to_string(dim) + " of index's extent), got " + out_.describe());
    }
    Strides s = x_.strides();
    for (int d = 0; d < s.rank(); ++d) s[d] = d == dim ? index_.strides()[0] : 0;
    return s;
  }

  bool select_;
  Tensor x_, index_, out_;
  int dim_;
};

class ScatterAdd final : public Op {
 public:
  ScatterAdd(Tensor dst, int dim, Tensor index, Tensor src)
      : dst_(std::move(dst)), index_(std::move(index)), src_(std::move(src)), dim_(dim) {}
  std::string_view name() const noexcept override { return "scatter_add"; }
  std::vector<Tensor> reads() const override { return {dst_, index_, src_}; }
  std::vector<Tensor> writes() const override { return {dst_}; }

  void validate() const override { (void)walk(); }
  void run_cpu() const override {
    kernels::scatter_add_reference(static_cast<float*>(dst_.data()), index_.data(), index_.dtype(),
                                   static_cast<const float*>(src_.data()), walk());
  }
  // Its kernel goes through launch_on_stream, nothing else: a compiled graph describes it.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::scatter_add(static_cast<float*>(dst_.data()), index_.data(), index_.dtype(),
                         static_cast<const float*>(src_.data()), walk(),
                         StreamView(cuda_stream(ctx)));
  }

 private:
  IndexedWalk walk() const {
    constexpr std::string_view op = "scatter_add";
    require_dtype(dst_, DType::f32, op, "dst");
    require_dtype(src_, DType::f32, op, "src");
    require_index(index_, op, "index");
    require_same_memory(dst_, index_, op);
    require_same_memory(dst_, src_, op);
    const int dim = normalized_dim(dim_, dst_, op, "dst");
    detail::require_same_shape(index_, src_, op, "index and src");
    bool ok = index_.rank() == dst_.rank();
    for (int d = 0; ok && d < dst_.rank(); ++d) ok = d == dim || index_.size(d) <= dst_.size(d);
    if (!ok) {
      reject(op, "index must have dst's rank and, along every dimension but " +
                     std::to_string(dim) + ", an extent at most dst's; got dst " + dst_.describe() +
                     ", index " + index_.describe());
    }
    require_disjoint(dst_, index_, op, "dst and index");
    require_disjoint(dst_, src_, op, "dst and src");
    IndexedWalk w;
    w.walk = make_walk(src_.shape(), {without_step(dst_, dim), src_.strides(), index_.strides()});
    w.indexed_extent = dst_.size(dim);
    w.indexed_stride = dst_.strides()[dim];
    return w;
  }

  Tensor dst_, index_, src_;
  int dim_;
};

class OneHot final : public Op {
 public:
  OneHot(Tensor labels, Tensor out) : labels_(std::move(labels)), out_(std::move(out)) {}
  std::string_view name() const noexcept override { return "one_hot"; }
  std::vector<Tensor> reads() const override { return {labels_}; }
  std::vector<Tensor> writes() const override { return {out_}; }

  void validate() const override { (void)shape(); }
  void run_cpu() const override {
    kernels::one_hot_reference(labels_.data(), labels_.dtype(), out_.data(), shape());
  }
  // Its kernel goes through launch_on_stream, nothing else: a compiled graph describes it.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::one_hot(labels_.data(), labels_.dtype(), out_.data(), shape(),
                     StreamView(cuda_stream(ctx)));
  }

 private:
  kernels::OneHotShape shape() const {
    constexpr std::string_view op = "one_hot";
    require_index(labels_, op, "labels");
    require_float(out_, op, "out");
    require_same_memory(labels_, out_, op);
    detail::require_rank(labels_, 1, op, "labels");
    detail::require_rank(out_, 2, op, "out");
    if (out_.size(0) != labels_.size(0)) {
      reject(op, "out must have one row a label, [" + std::to_string(labels_.size(0)) +
                     ", C]; got labels " + labels_.describe() + ", out " + out_.describe());
    }
    detail::require_contiguous(out_, op, "out");
    require_disjoint(out_, labels_, op, "out and labels");
    const DType d = out_.dtype();
    kernels::OneHotShape s;
    s.rows = out_.size(0);
    s.classes = out_.size(1);
    s.label_stride = labels_.strides()[0];
    s.one_bits = d == DType::f32 ? 0x3F800000U : d == DType::f16 ? 0x3C00U : 0x3F80U;
    s.nan_bits = nan_word(d);
    s.element_bytes = element_bytes(d);
    return s;
  }

  Tensor labels_, out_;
};

class ArgReduction final : public Op {
 public:
  ArgReduction(kernels::ArgReduce which, Tensor x, int dim, Tensor indices, Tensor values)
      : which_(which),
        x_(std::move(x)),
        indices_(std::move(indices)),
        values_(std::move(values)),
        dim_(dim) {}
  std::string_view name() const noexcept override {
    return which_ == kernels::ArgReduce::max ? "argmax" : "argmin";
  }
  std::vector<Tensor> reads() const override { return {x_}; }
  std::vector<Tensor> writes() const override {
    if (values_.defined()) return {indices_, values_};
    return {indices_};
  }

  void validate() const override { (void)shape(); }
  void run_cpu() const override {
    kernels::arg_reduce_reference(which_, x_.data(), x_.dtype(), indices(), values(), shape());
  }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::arg_reduce(which_, x_.data(), x_.dtype(), indices(), values(), shape(),
                        StreamView(cuda_stream(ctx)));
  }

 private:
  std::int64_t* indices() const { return static_cast<std::int64_t*>(indices_.data()); }
  void* values() const { return values_.defined() ? values_.data() : nullptr; }

  kernels::ArgReduceShape shape() const {
    const std::string_view op = name();
    require_float(x_, op, "x");
    require_dtype(indices_, DType::i64, op, "indices");
    require_same_memory(x_, indices_, op);
    const int dim = normalized_dim(dim_, x_, op, "x");
    if (x_.size(dim) == 0) {
      reject(op, "dim " + std::to_string(dim_) + " of x " + x_.describe() +
                     " has no elements, so it has no " +
                     (which_ == kernels::ArgReduce::max ? "largest" : "smallest") + " one");
    }
    const bool keep_dim = check_output_shape(indices_, dim, "indices");
    require_disjoint(indices_, x_, op, "indices and x");
    Strides value_strides = indices_.strides();
    bool values_keep_dim = keep_dim;
    if (values_.defined()) {
      require_dtype(values_, x_.dtype(), op, "values");
      require_same_memory(x_, values_, op);
      values_keep_dim = check_output_shape(values_, dim, "values");
      require_disjoint(values_, x_, op, "values and x");
      require_disjoint(values_, indices_, op, "values and indices");
      value_strides = values_.strides();
    } else {
      for (int d = 0; d < value_strides.rank(); ++d) value_strides[d] = 0;
    }
    // The walk runs over x's shape without dim.
    std::vector<std::int64_t> e, sx, si, sv;
    for (int d = 0; d < x_.rank(); ++d) {
      if (d == dim) continue;
      const int i_dim = keep_dim || d < dim ? d : d - 1;
      const int v_dim = values_keep_dim || d < dim ? d : d - 1;
      e.push_back(x_.size(d));
      sx.push_back(x_.strides()[d]);
      si.push_back(indices_.strides()[i_dim]);
      sv.push_back(value_strides[v_dim]);
    }
    kernels::ArgReduceShape s;
    s.outputs = make_walk(Shape(e), {Strides(sx), Strides(si), Strides(sv)});
    s.reduced = x_.size(dim);
    s.reduced_stride = x_.strides()[dim];
    return s;
  }

  // out has x's shape without dim, or with dim at extent 1; returns whether it keeps dim.
  bool check_output_shape(const Tensor& out, int dim, std::string_view role) const {
    const bool keep_dim = out.rank() == x_.rank();
    bool ok = keep_dim || out.rank() == x_.rank() - 1;
    for (int d = 0, o = 0; ok && d < x_.rank(); ++d) {
      if (d == dim) {
        if (keep_dim) ok = out.size(o++) == 1;
        continue;
      }
      ok = out.size(o++) == x_.size(d);
    }
    if (!ok) {
      reject(name(), std::string(role) + " must have x's shape without dim " + std::to_string(dim) +
                         " (or with it of extent 1): x " + x_.describe() + ", " +
                         std::string(role) + " " + out.describe());
    }
    return keep_dim;
  }

  kernels::ArgReduce which_;
  Tensor x_, indices_, values_;
  int dim_;
};

}  // namespace

OpPtr argmax(const Tensor& x, int dim, const Tensor& indices, const Tensor& values) {
  return std::make_shared<ArgReduction>(kernels::ArgReduce::max, x, dim, indices, values);
}
OpPtr argmin(const Tensor& x, int dim, const Tensor& indices, const Tensor& values) {
  return std::make_shared<ArgReduction>(kernels::ArgReduce::min, x, dim, indices, values);
}
OpPtr gather(const Tensor& x, int dim, const Tensor& index, const Tensor& out) {
  return std::make_shared<Gather>(false, x, dim, index, out);
}
OpPtr index_select(const Tensor& x, int dim, const Tensor& index, const Tensor& out) {
  return std::make_shared<Gather>(true, x, dim, index, out);
}
OpPtr scatter_add(const Tensor& dst, int dim, const Tensor& index, const Tensor& src) {
  return std::make_shared<ScatterAdd>(dst, dim, index, src);
}
OpPtr one_hot(const Tensor& labels, const Tensor& out) {
  return std::make_shared<OneHot>(labels, out);
}

}  // namespace loom::ops
