// The elementwise ops: each binds a kernel of this family and its CPU
// reference to the Op interface, with the checks its kernel needs.
#include <loom/cuda_interop.hpp>
#include <loom/device.hpp>
#include <loom/error.hpp>
#include <loom/ops/elementwise.hpp>

#include "common/checks.hpp"
#include "elementwise/fusion.hpp"
#include "elementwise/map.hpp"
#include "elementwise/maps.hpp"
#include "elementwise/vector_add.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace loom {
namespace detail {

/// A node of a MapExpr: an input, a constant, or a map of other nodes.
struct MapNode {
  kernels::FusedOpcode op = kernels::FusedOpcode::input;
  std::vector<std::shared_ptr<const MapNode>> args;
  int input = 0;
  float value = 0.0F;  // constant; axpby's alpha
  float beta = 0.0F;   // axpby's beta
  DType dtype = DType::f32;
};

}  // namespace detail

namespace ops {
namespace {

using detail::count;
using detail::reject;
using detail::require_f32_contiguous;
using detail::require_same_memory;
using detail::require_same_shape;
using kernels::FusedOpcode;
using kernels::MapKind;

class VectorAdd final : public Op {
 public:
  VectorAdd(Tensor a, Tensor b, Tensor c) : a_(std::move(a)), b_(std::move(b)), c_(std::move(c)) {}
  std::string_view name() const noexcept override { return "vector_add"; }
  std::vector<Tensor> reads() const override { return {a_, b_}; }
  std::vector<Tensor> writes() const override { return {c_}; }
  void validate() const override {
    require_f32_contiguous(a_, "vector_add", "a");
    require_f32_contiguous(b_, "vector_add", "b");
    require_f32_contiguous(c_, "vector_add", "c");
    require_same_shape(a_, b_, "vector_add", "a and b");
    require_same_shape(a_, c_, "vector_add", "a and c");
    require_same_memory(a_, b_, "vector_add");
    require_same_memory(a_, c_, "vector_add");
  }
  void run_cpu() const override {
    kernels::vector_add_reference(a_.data_as<float>(), b_.data_as<float>(), c_.data_as<float>(),
                                  count(a_));
  }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::vector_add(a_.data_as<float>(), b_.data_as<float>(), c_.data_as<float>(), count(a_),
                        StreamView(cuda_stream(ctx)));
  }

 private:
  Tensor a_, b_, c_;
};

class Fill final : public Op {
 public:
  Fill(Tensor t, float value) : t_(std::move(t)), value_(value) {}
  std::string_view name() const noexcept override { return "fill"; }
  std::vector<Tensor> reads() const override { return {}; }
  std::vector<Tensor> writes() const override { return {t_}; }
  void validate() const override { require_f32_contiguous(t_, "fill", "t"); }
  void run_cpu() const override { kernels::fill_reference(t_.data_as<float>(), count(t_), value_); }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::fill(t_.data_as<float>(), count(t_), value_, StreamView(cuda_stream(ctx)));
  }

 private:
  Tensor t_;
  float value_;
};

class ScaleCopy final : public Op {
 public:
  ScaleCopy(Tensor src, Tensor dst, float alpha)
      : src_(std::move(src)), dst_(std::move(dst)), alpha_(alpha) {}
  std::string_view name() const noexcept override { return "scale_copy"; }
  std::vector<Tensor> reads() const override { return {src_}; }
  std::vector<Tensor> writes() const override { return {dst_}; }
  void validate() const override {
    require_f32_contiguous(src_, "scale_copy", "src");
    require_f32_contiguous(dst_, "scale_copy", "dst");
    require_same_shape(src_, dst_, "scale_copy", "src and dst");
    require_same_memory(src_, dst_, "scale_copy");
  }
  void run_cpu() const override {
    kernels::scale_copy_reference(src_.data_as<float>(), dst_.data_as<float>(), count(src_),
                                  alpha_);
  }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::scale_copy(src_.data_as<float>(), dst_.data_as<float>(), count(src_), alpha_,
                        StreamView(cuda_stream(ctx)));
  }

 private:
  Tensor src_, dst_;
  float alpha_;
};

// ---- checks shared by the maps and the fused op ---------------------------

std::size_t element_size(const Tensor& t) { return bytes_for(t.dtype(), 1); }

// The lowest and one past the highest byte a view touches.
std::pair<std::uintptr_t, std::uintptr_t> byte_span(const Tensor& t) {
  const auto base = reinterpret_cast<std::uintptr_t>(t.data());
  const auto size = static_cast<std::int64_t>(element_size(t));
  std::int64_t lo = 0;
  std::int64_t hi = size;
  for (int d = 0; d < t.rank(); ++d) {
    const std::int64_t reach = (t.shape()[d] - 1) * t.strides()[d] * size;
    if (reach < 0) lo += reach;
    if (reach > 0) hi += reach;
  }
  return {base + static_cast<std::uintptr_t>(lo), base + static_cast<std::uintptr_t>(hi)};
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.data() == b.data() && a.dtype() == b.dtype() && a.shape() == b.shape() &&
         (a.strides() == b.strides() || (a.is_contiguous() && b.is_contiguous()));
}

// In place is fine (the same view: each element is read, then written, by one
// thread); any other overlap would let one thread's write reach another's input.
void require_no_partial_overlap(const Tensor& in, const Tensor& out, std::string_view op,
                                std::string_view role) {
  // An empty view touches no byte, whatever its strides say.
  if (in.numel() == 0 || out.numel() == 0) return;
  if (!in.shares_storage_with(out) || same_view(in, out)) return;
  const auto [a0, a1] = byte_span(in);
  const auto [b0, b1] = byte_span(out);
  if (a0 < b1 && b0 < a1) {
    reject(op, "out " + out.describe() + " overlaps " + std::string(role) + " " + in.describe() +
                   " without being the same view; in place needs the very same view, else use "
                   "separate tensors");
  }
}

kernels::MapGeometry geometry_of(const Tensor& out, const Tensor& x, const Tensor* y) {
  kernels::MapGeometry g;
  g.rank = out.rank();
  for (int d = 0; d < out.rank(); ++d) {
    const auto s = static_cast<std::size_t>(d);
    g.shape[s] = out.shape()[d];
    g.out_strides[s] = out.strides()[d];
    g.x_strides[s] = x.strides()[d];
    g.y_strides[s] = y != nullptr ? y->strides()[d] : 0;
  }
  return g;
}

// ---- the maps ---------------------------------------------------------------

class MapOp final : public Op {
 public:
  MapOp(MapKind kind, Tensor x, Tensor y, Tensor out, kernels::MapScalars scalars)
      : kind_(kind), x_(std::move(x)), y_(std::move(y)), out_(std::move(out)), scalars_(scalars) {}
  std::string_view name() const noexcept override { return kernels::to_string(kind_); }
  std::vector<Tensor> reads() const override {
    if (binary()) return {x_, y_};
    return {x_};
  }
  std::vector<Tensor> writes() const override { return {out_}; }

  void validate() const override {
    const std::string_view op = name();
    const std::initializer_list<DType> floats{DType::f32, DType::f16, DType::bf16};
    detail::require_dtype_in(x_, floats, op, x_role());
    if (binary()) detail::require_dtype_in(y_, floats, op, "b");
    detail::require_dtype_in(out_, floats, op, "out");
    if (binary() && y_.dtype() != x_.dtype()) {
      reject(op, std::string(x_role()) + " and " + y_role() + " must have one dtype; got " +
                     x_.describe() + " and " + y_.describe());
    }
    if (kind_ != MapKind::cast && out_.dtype() != x_.dtype()) {
      reject(op, "out must have the inputs' dtype " + std::string(to_string(x_.dtype())) +
                     " (cast converts); got " + out_.describe());
    }
    require_same_shape(x_, out_, op, std::string(x_role()) + " and out");
    require_same_memory(x_, out_, op);
    if (binary()) {
      require_same_shape(y_, out_, op, std::string(y_role()) + " and out");
      require_same_memory(y_, out_, op);
    }
    // An out whose elements share memory is refused for every op, at submit
    // (Graph::validate).
    require_no_partial_overlap(x_, out_, op, x_role());
    if (binary()) require_no_partial_overlap(y_, out_, op, y_role());
  }

  void run_cpu() const override {
    if (contiguous()) {
      kernels::map_reference(kind_, x_.dtype(), out_.dtype(), operands(), count(out_), scalars_);
    } else {
      kernels::map_strided_reference(kind_, x_.dtype(), out_.dtype(), operands(), geometry(),
                                     scalars_);
    }
  }

  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    const StreamView stream(cuda_stream(ctx));
    if (contiguous()) {
      kernels::map(kind_, x_.dtype(), out_.dtype(), operands(), count(out_), stream, scalars_);
    } else {
      kernels::map_strided(kind_, x_.dtype(), out_.dtype(), operands(), geometry(), stream,
                           scalars_);
    }
  }

 private:
  bool binary() const noexcept { return kernels::arity(kind_) == 2; }
  const char* x_role() const noexcept { return binary() ? "a" : "x"; }
  const char* y_role() const noexcept { return "b"; }
  bool contiguous() const {
    return x_.is_contiguous() && out_.is_contiguous() && (!binary() || y_.is_contiguous());
  }
  kernels::MapOperands operands() const {
    return {x_.data(), binary() ? y_.data() : nullptr, out_.data()};
  }
  kernels::MapGeometry geometry() const { return geometry_of(out_, x_, binary() ? &y_ : nullptr); }

  MapKind kind_;
  Tensor x_, y_, out_;
  kernels::MapScalars scalars_;
};

// ---- fusion -------------------------------------------------------------------

std::shared_ptr<const loom::detail::MapNode> node_of(const MapExpr& e) {
  if (!e.node()) throw InvalidArgument("fused_map: an empty MapExpr in the chain");
  return e.node();
}

MapExpr make_node(FusedOpcode op, std::vector<std::shared_ptr<const loom::detail::MapNode>> args,
                  float value = 0.0F, float beta = 0.0F, DType dtype = DType::f32) {
  auto n = std::make_shared<loom::detail::MapNode>();
  n->op = op;
  n->args = std::move(args);
  n->value = value;
  n->beta = beta;
  n->dtype = dtype;
  return MapExpr(std::move(n));
}

// The expression in SSA form, shared subexpressions computed once.
class Lowering {
 public:
  explicit Lowering(kernels::FusedProgram& p) : p_(p) {}

  int lower(const loom::detail::MapNode* n) {
    if (auto it = done_.find(n); it != done_.end()) return it->second;
    kernels::FusedInstr in;
    in.op = n->op;
    if (!n->args.empty()) in.a = lower(n->args[0].get());
    if (n->args.size() > 1) in.b = lower(n->args[1].get());
    switch (n->op) {
      case FusedOpcode::input: in.index = n->input; break;
      case FusedOpcode::constant: in.index = slot(n->value); break;
      case FusedOpcode::axpby:
        in.index = slot(n->value);
        slot(n->beta);
        break;
      case FusedOpcode::round: in.dtype = n->dtype; break;
      default: break;
    }
    p_.code.push_back(in);
    const int k = static_cast<int>(p_.code.size()) - 1;
    done_.emplace(n, k);
    return k;
  }

 private:
  int slot(float v) {
    p_.constants.push_back(v);
    return static_cast<int>(p_.constants.size()) - 1;
  }
  kernels::FusedProgram& p_;
  std::map<const loom::detail::MapNode*, int> done_;
};

class FusedMap final : public Op {
 public:
  // The chain is lowered and its source generated once, here; a malformed
  // chain is reported by validate(), at submit, naming the task.
  FusedMap(std::vector<Tensor> inputs, Tensor out, const MapExpr& expr)
      : inputs_(std::move(inputs)), out_(std::move(out)) {
    try {
      kernels::FusedProgram p;
      for (const auto& t : inputs_) p.inputs.push_back(t.defined() ? t.dtype() : DType::f32);
      p.output = out_.defined() ? out_.dtype() : DType::f32;
      Lowering(p).lower(node_of(expr).get());
      kernel_.emplace(std::move(p));
    } catch (const InvalidArgument& e) {
      problem_ = e.message();  // validate() rethrows it: "loom: " once
    }
  }
  std::string_view name() const noexcept override { return "fused_map"; }
  std::vector<Tensor> reads() const override { return inputs_; }
  std::vector<Tensor> writes() const override { return {out_}; }

  void validate() const override {
    constexpr std::string_view op = "fused_map";
    const std::initializer_list<DType> floats{DType::f32, DType::f16, DType::bf16};
    if (inputs_.empty()) reject(op, "needs at least one input");
    if (static_cast<int>(inputs_.size()) > kernels::kFusedMaxInputs) {
      reject(op, "takes at most " + std::to_string(kernels::kFusedMaxInputs) + " inputs, got " +
                     std::to_string(inputs_.size()));
    }
    detail::require_dtype_in(out_, floats, op, "out");
    detail::require_contiguous(out_, op, "out");
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      const std::string role = "input " + std::to_string(i);
      detail::require_dtype_in(inputs_[i], floats, op, role);
      detail::require_contiguous(inputs_[i], op, role);
      require_same_shape(inputs_[i], out_, op, role + " and out");
      require_same_memory(inputs_[i], out_, op);
      require_no_partial_overlap(inputs_[i], out_, op, role);
    }
    if (!kernel_) throw InvalidArgument(problem_);
    // Compile now, on the submitting thread, rather than on the scheduling
    // thread at the first run; the CPU backend never needs it, but where a
    // GPU is visible a runtime may well be a CUDA one.
    if (cuda_availability().available && kernels::nvrtc_available()) kernel_->prepare();
  }

  void run_cpu() const override {
    kernels::fused_map_reference(kernel_->program(), pointers(), out_.data(), count(out_));
  }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernel_->launch(pointers(), out_.data(), count(out_), StreamView(cuda_stream(ctx)));
  }

 private:
  std::vector<const void*> pointers() const {
    std::vector<const void*> v;
    for (const auto& t : inputs_) v.push_back(t.data());
    return v;
  }

  std::vector<Tensor> inputs_;
  Tensor out_;
  std::optional<kernels::FusedKernel> kernel_;
  std::string problem_;
};

void describe(const loom::detail::MapNode& n, std::ostringstream& s) {
  const auto arg = [&](std::size_t i) { describe(*n.args[i], s); };
  switch (n.op) {
    case FusedOpcode::input: s << "in" << n.input; return;
    case FusedOpcode::constant: s << n.value; return;
    case FusedOpcode::add:
      s << "add(";
      arg(0);
      s << ", ";
      arg(1);
      s << ")";
      return;
    case FusedOpcode::mul:
      s << "mul(";
      arg(0);
      s << ", ";
      arg(1);
      s << ")";
      return;
    case FusedOpcode::axpby:
      s << "axpby(" << n.value << ", ";
      arg(0);
      s << ", " << n.beta << ", ";
      arg(1);
      s << ")";
      return;
    case FusedOpcode::relu:
      s << "relu(";
      arg(0);
      s << ")";
      return;
    case FusedOpcode::gelu_tanh:
      s << "gelu_tanh(";
      arg(0);
      s << ")";
      return;
    case FusedOpcode::round:
      s << "cast(";
      arg(0);
      s << ", " << to_string(n.dtype) << ")";
      return;
  }
}

}  // namespace

OpPtr vector_add(const Tensor& a, const Tensor& b, const Tensor& c) {
  return std::make_shared<VectorAdd>(a, b, c);
}
OpPtr fill(const Tensor& t, float value) { return std::make_shared<Fill>(t, value); }
OpPtr scale_copy(const Tensor& src, const Tensor& dst, float alpha) {
  return std::make_shared<ScaleCopy>(src, dst, alpha);
}

OpPtr add(const Tensor& a, const Tensor& b, const Tensor& out) {
  return std::make_shared<MapOp>(MapKind::add, a, b, out, kernels::MapScalars{});
}
OpPtr mul(const Tensor& a, const Tensor& b, const Tensor& out) {
  return std::make_shared<MapOp>(MapKind::mul, a, b, out, kernels::MapScalars{});
}
OpPtr axpby(float alpha, const Tensor& x, float beta, const Tensor& y, const Tensor& out) {
  return std::make_shared<MapOp>(MapKind::axpby, x, y, out, kernels::MapScalars{alpha, beta});
}
OpPtr relu(const Tensor& x, const Tensor& out) {
  return std::make_shared<MapOp>(MapKind::relu, x, Tensor{}, out, kernels::MapScalars{});
}
OpPtr gelu_tanh(const Tensor& x, const Tensor& out) {
  return std::make_shared<MapOp>(MapKind::gelu_tanh, x, Tensor{}, out, kernels::MapScalars{});
}
OpPtr cast(const Tensor& x, const Tensor& out) {
  return std::make_shared<MapOp>(MapKind::cast, x, Tensor{}, out, kernels::MapScalars{});
}

MapExpr::MapExpr(std::shared_ptr<const loom::detail::MapNode> node) noexcept
    : node_(std::move(node)) {}

MapExpr MapExpr::input(int index) {
  auto n = std::make_shared<loom::detail::MapNode>();
  n->op = FusedOpcode::input;
  n->input = index;
  return MapExpr(std::move(n));
}

MapExpr MapExpr::constant(float value) { return make_node(FusedOpcode::constant, {}, value); }

std::string MapExpr::to_string() const {
  if (!node_) return "(empty)";
  std::ostringstream s;
  describe(*node_, s);
  return s.str();
}

MapExpr add(const MapExpr& a, const MapExpr& b) {
  return make_node(FusedOpcode::add, {node_of(a), node_of(b)});
}
MapExpr mul(const MapExpr& a, const MapExpr& b) {
  return make_node(FusedOpcode::mul, {node_of(a), node_of(b)});
}
MapExpr axpby(float alpha, const MapExpr& x, float beta, const MapExpr& y) {
  return make_node(FusedOpcode::axpby, {node_of(x), node_of(y)}, alpha, beta);
}
MapExpr relu(const MapExpr& x) { return make_node(FusedOpcode::relu, {node_of(x)}); }
MapExpr gelu_tanh(const MapExpr& x) { return make_node(FusedOpcode::gelu_tanh, {node_of(x)}); }
MapExpr cast(const MapExpr& x, DType dtype) {
  return make_node(FusedOpcode::round, {node_of(x)}, 0.0F, 0.0F, dtype);
}
MapExpr operator+(const MapExpr& a, const MapExpr& b) { return add(a, b); }
MapExpr operator*(const MapExpr& a, const MapExpr& b) { return mul(a, b); }
MapExpr operator*(float s, const MapExpr& x) { return mul(MapExpr::constant(s), x); }

OpPtr fused_map(std::vector<Tensor> inputs, const Tensor& out, const MapExpr& expr) {
  return std::make_shared<FusedMap>(std::move(inputs), out, expr);
}

}  // namespace ops
}  // namespace loom
