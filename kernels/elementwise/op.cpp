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
#include <array>
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
  VectorAdd(Tensor a, Tensor b, Tensor c, MapVariant variant)
      : a_(std::move(a)), b_(std::move(b)), c_(std::move(c)), variant_(variant) {}
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
    detail::require_known_variant(variant_, "vector_add");
  }
  void run_cpu() const override {
    kernels::vector_add_reference(a_.data_as<float>(), b_.data_as<float>(), c_.data_as<float>(),
                                  count(a_));
  }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::vector_add(a_.data_as<float>(), b_.data_as<float>(), c_.data_as<float>(), count(a_),
                        StreamView(cuda_stream(ctx)), variant_);
  }

 private:
  Tensor a_, b_, c_;
  MapVariant variant_;
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

// The view of `in` that out's elements read: itself, or broadcast to out's shape.
Tensor broadcast_view(const Tensor& in, const Shape& shape) {
  return in.shape() == shape ? in : in.expand(shape);
}

// ---- the maps ---------------------------------------------------------------

// The role of each input in messages, by map.
std::vector<const char*> input_roles(MapKind kind) {
  switch (kind) {
    case MapKind::where: return {"mask", "a", "b"};
    case MapKind::relu_backward:
    case MapKind::gelu_tanh_backward: return {"grad", "x"};
    default:
      return kernels::arity(kind) == 1 ? std::vector<const char*>{"x"}
                                       : std::vector<const char*>{"a", "b"};
  }
}

class MapOp final : public Op {
 public:
  MapOp(MapKind kind, std::vector<Tensor> inputs, Tensor out, kernels::MapScalars scalars,
        MapVariant variant)
      : kind_(kind),
        inputs_(std::move(inputs)),
        out_(std::move(out)),
        scalars_(scalars),
        variant_(variant) {}
  std::string_view name() const noexcept override { return kernels::to_string(kind_); }
  std::vector<Tensor> reads() const override { return inputs_; }
  std::vector<Tensor> writes() const override { return {out_}; }

  void validate() const override {
    const std::string_view op = name();
    detail::require_known_variant(variant_, op);
    const std::initializer_list<DType> floats{DType::f32, DType::f16, DType::bf16};
    const auto roles = input_roles(kind_);
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      detail::require_dtype_in(inputs_[i], floats, op, roles[i]);
    }
    detail::require_dtype_in(out_, floats, op, "out");
    for (std::size_t i = 1; i < inputs_.size(); ++i) {
      if (inputs_[i].dtype() != inputs_[0].dtype()) {
        reject(op, std::string(roles[0]) + " and " + roles[i] + " must have one dtype; got " +
                       inputs_[0].describe() + " and " + inputs_[i].describe());
      }
    }
    if (kind_ != MapKind::cast && out_.dtype() != inputs_[0].dtype()) {
      reject(op, "out must have the inputs' dtype " + std::string(to_string(inputs_[0].dtype())) +
                     " (cast converts); got " + out_.describe());
    }
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      // A cast converts one tensor to another: its shapes must agree.
      if (kind_ == MapKind::cast) {
        require_same_shape(inputs_[i], out_, op, std::string(roles[i]) + " and out");
      } else {
        detail::require_broadcastable(inputs_[i], out_.shape(), op, roles[i]);
      }
      require_same_memory(inputs_[i], out_, op);
      // An out whose elements share memory is refused for every op, at
      // submit (Graph::validate).
      require_no_partial_overlap(inputs_[i], out_, op, roles[i]);
    }
  }

  void run_cpu() const override {
    const auto views = input_views();
    if (contiguous(views)) {
      kernels::map_reference(kind_, views[0].dtype(), out_.dtype(), operands(views), count(out_),
                             scalars_);
    } else {
      kernels::map_strided_reference(kind_, views[0].dtype(), out_.dtype(), operands(views),
                                     geometry(views), scalars_);
    }
  }

  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    const StreamView stream(cuda_stream(ctx));
    const auto views = input_views();
    if (contiguous(views)) {
      kernels::map(kind_, views[0].dtype(), out_.dtype(), operands(views), count(out_), stream,
                   scalars_, variant_);
    } else {
      kernels::map_strided(kind_, views[0].dtype(), out_.dtype(), operands(views), geometry(views),
                           stream, scalars_);
    }
  }

 private:
  using Views = std::array<Tensor, 3>;

  // The inputs as out's elements read them (broadcast to its shape).
  Views input_views() const {
    Views v;
    for (std::size_t i = 0; i < inputs_.size(); ++i)
      v[i] = broadcast_view(inputs_[i], out_.shape());
    return v;
  }
  // The contiguous kernels serve a contiguous out and inputs that are
  // either contiguous over out's shape or one element (broadcast: read once).
  bool contiguous(const Views& v) const {
    if (!out_.is_contiguous()) return false;
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      if (!v[i].is_contiguous() && inputs_[i].numel() != 1) return false;
    }
    return true;
  }
  kernels::MapOperands operands(const Views& v) const {
    const auto at = [&](std::size_t i) -> const void* {
      return i < inputs_.size() ? v[i].data() : nullptr;
    };
    kernels::MapOperands o{at(0), at(1), out_.data(), at(2)};
    constexpr unsigned kBits[] = {kernels::kBroadcastX, kernels::kBroadcastY, kernels::kBroadcastZ};
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      if (inputs_[i].numel() == 1 && out_.numel() != 1) o.broadcast |= kBits[i];
    }
    return o;
  }
  kernels::MapGeometry geometry(const Views& v) const {
    kernels::MapGeometry g;
    g.rank = out_.rank();
    const auto strides = [&](std::size_t i, int d) {
      return i < inputs_.size() ? v[i].strides()[d] : 0;
    };
    for (int d = 0; d < out_.rank(); ++d) {
      const auto s = static_cast<std::size_t>(d);
      g.shape[s] = out_.shape()[d];
      g.out_strides[s] = out_.strides()[d];
      g.x_strides[s] = strides(0, d);
      g.y_strides[s] = strides(1, d);
      g.z_strides[s] = strides(2, d);
    }
    return g;
  }

  MapKind kind_;
  std::vector<Tensor> inputs_;
  Tensor out_;
  kernels::MapScalars scalars_;
  MapVariant variant_;
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

// The expressions in SSA form, shared subexpressions (within one expression
// or across several) computed once.
class Lowering {
 public:
  explicit Lowering(kernels::FusedProgram& p) : p_(p) {}

  int lower(const loom::detail::MapNode* n) {
    if (auto it = done_.find(n); it != done_.end()) return it->second;
    kernels::FusedInstr in;
    in.op = n->op;
    if (!n->args.empty()) in.a = lower(n->args[0].get());
    if (n->args.size() > 1) in.b = lower(n->args[1].get());
    if (n->args.size() > 2) in.c = lower(n->args[2].get());
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
  // The chains are lowered and their source generated once, here; a
  // malformed chain is reported by validate(), at submit, naming the task.
  FusedMap(std::vector<Tensor> inputs, std::vector<Tensor> outs, const std::vector<MapExpr>& exprs)
      : inputs_(std::move(inputs)), outs_(std::move(outs)) {
    try {
      if (exprs.size() != outs_.size()) {
        throw InvalidArgument("fused_map: takes one expression an output; got " +
                              std::to_string(outs_.size()) + " outs and " +
                              std::to_string(exprs.size()) + " exprs");
      }
      kernels::FusedProgram p;
      for (const auto& t : inputs_) p.inputs.push_back(t.defined() ? t.dtype() : DType::f32);
      p.strided = !vectorizable();
      for (const auto& t : inputs_) p.scalar_inputs.push_back(t.defined() && t.numel() == 1);
      Lowering lowering(p);
      for (std::size_t j = 0; j < exprs.size(); ++j) {
        const int reg = lowering.lower(node_of(exprs[j]).get());
        p.outputs.push_back({reg, outs_[j].defined() ? outs_[j].dtype() : DType::f32});
      }
      kernel_.emplace(std::move(p));
    } catch (const InvalidArgument& e) {
      problem_ = e.message();  // validate() rethrows it: "loom: " once
    }
  }
  std::string_view name() const noexcept override { return "fused_map"; }
  std::vector<Tensor> reads() const override { return inputs_; }
  std::vector<Tensor> writes() const override { return outs_; }

  void validate() const override {
    constexpr std::string_view op = "fused_map";
    const std::initializer_list<DType> floats{DType::f32, DType::f16, DType::bf16};
    if (inputs_.empty()) reject(op, "needs at least one input");
    if (static_cast<int>(inputs_.size()) > kernels::kFusedMaxInputs) {
      reject(op, "takes at most " + std::to_string(kernels::kFusedMaxInputs) + " inputs, got " +
                     std::to_string(inputs_.size()));
    }
    if (outs_.empty()) reject(op, "needs at least one output");
    if (static_cast<int>(outs_.size()) > kernels::kFusedMaxOutputs) {
      reject(op, "takes at most " + std::to_string(kernels::kFusedMaxOutputs) + " outputs, got " +
                     std::to_string(outs_.size()));
    }
    for (std::size_t j = 0; j < outs_.size(); ++j) {
      const std::string role = outs_.size() == 1 ? "out" : "output " + std::to_string(j);
      detail::require_dtype_in(outs_[j], floats, op, role);
      require_same_shape(outs_[j], outs_[0], op, "the outputs");
      require_same_memory(outs_[j], outs_[0], op);
      for (std::size_t k = 0; k < j; ++k) {
        if (outs_[j].numel() > 0 && outs_[k].numel() > 0 &&
            outs_[j].shares_storage_with(outs_[k]) && overlaps(outs_[j], outs_[k])) {
          reject(op, "output " + std::to_string(j) + " " + outs_[j].describe() +
                         " overlaps output " + std::to_string(k) + " " + outs_[k].describe() +
                         "; each output needs memory of its own");
        }
      }
    }
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      const std::string role = "input " + std::to_string(i);
      detail::require_dtype_in(inputs_[i], floats, op, role);
      detail::require_broadcastable(inputs_[i], outs_[0].shape(), op, role);
      require_same_memory(inputs_[i], outs_[0], op);
      for (const auto& out : outs_) require_no_partial_overlap(inputs_[i], out, op, role);
    }
    if (!kernel_) throw InvalidArgument(problem_);
    // Compile now, on the submitting thread, rather than on the scheduling
    // thread at the first run; the CPU backend never needs it, but where a
    // GPU is visible a runtime may well be a CUDA one.
    if (cuda_availability().available && kernels::nvrtc_available()) kernel_->prepare();
  }

  void run_cpu() const override {
    kernels::fused_map_reference(kernel_->program(), input_pointers(), output_pointers(),
                                 geometry());
  }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernel_->launch(input_pointers(), output_pointers(), geometry(), StreamView(cuda_stream(ctx)));
  }

 private:
  static bool overlaps(const Tensor& a, const Tensor& b) {
    const auto [a0, a1] = byte_span(a);
    const auto [b0, b1] = byte_span(b);
    return a0 < b1 && b0 < a1;
  }
  // The vectorized kernel serves contiguous outputs and inputs that are
  // either contiguous with out's shape or a single element; anything else
  // (a slice, a transpose, a row broadcast) takes the strided one.
  bool vectorizable() const {
    if (outs_.empty()) return false;
    for (const auto& o : outs_) {
      if (!o.defined() || !o.is_contiguous()) return false;
    }
    for (const auto& t : inputs_) {
      if (!t.defined()) return false;
      if (t.numel() == 1) continue;
      if (!detail::broadcasts_to(t.shape(), outs_[0].shape())) return false;
      if (!broadcast_view(t, outs_[0].shape()).is_contiguous()) return false;
    }
    return true;
  }
  std::vector<const void*> input_pointers() const {
    std::vector<const void*> v;
    for (const auto& t : inputs_) v.push_back(t.data());
    return v;
  }
  std::vector<void*> output_pointers() const {
    std::vector<void*> v;
    for (const auto& t : outs_) v.push_back(t.data());
    return v;
  }
  // Every operand's strides over out's shape (inputs broadcast to it).
  kernels::FusedGeometry geometry() const {
    kernels::FusedGeometry g;
    const Shape& shape = outs_[0].shape();
    g.rank = shape.rank();
    for (int d = 0; d < g.rank; ++d) g.shape[d] = shape[d];
    std::size_t k = 0;
    const auto add_strides = [&](const Tensor& view) {
      for (int d = 0; d < g.rank; ++d) g.strides[k][d] = view.strides()[d];
      ++k;
    };
    for (const auto& t : inputs_) add_strides(broadcast_view(t, shape));
    for (const auto& t : outs_) add_strides(t);
    if (g.rank == 0) {  // one element: rank 1 for the kernels
      g.rank = 1;
      g.shape[0] = 1;
    }
    return g;
  }

  std::vector<Tensor> inputs_;
  std::vector<Tensor> outs_;
  std::optional<kernels::FusedKernel> kernel_;
  std::string problem_;
};

void describe(const loom::detail::MapNode& n, std::ostringstream& s) {
  switch (n.op) {
    case FusedOpcode::input: s << "in" << n.input; return;
    case FusedOpcode::constant: s << n.value; return;
    case FusedOpcode::axpby:
      s << "axpby(" << n.value << ", ";
      describe(*n.args[0], s);
      s << ", " << n.beta << ", ";
      describe(*n.args[1], s);
      s << ")";
      return;
    case FusedOpcode::round:
      s << "cast(";
      describe(*n.args[0], s);
      s << ", " << to_string(n.dtype) << ")";
      return;
    default:
      s << kernels::opcode_name(n.op) << "(";
      for (std::size_t i = 0; i < n.args.size(); ++i) {
        if (i > 0) s << ", ";
        describe(*n.args[i], s);
      }
      s << ")";
      return;
  }
}

}  // namespace

OpPtr vector_add(const Tensor& a, const Tensor& b, const Tensor& c, MapVariant variant) {
  return std::make_shared<VectorAdd>(a, b, c, variant);
}
OpPtr fill(const Tensor& t, float value) { return std::make_shared<Fill>(t, value); }
OpPtr scale_copy(const Tensor& src, const Tensor& dst, float alpha) {
  return std::make_shared<ScaleCopy>(src, dst, alpha);
}

namespace {
OpPtr map_op(MapKind kind, std::vector<Tensor> inputs, const Tensor& out, MapVariant variant,
             kernels::MapScalars scalars = {}) {
  return std::make_shared<MapOp>(kind, std::move(inputs), out, scalars, variant);
}
}  // namespace

OpPtr add(const Tensor& a, const Tensor& b, const Tensor& out, MapVariant variant) {
  return map_op(MapKind::add, {a, b}, out, variant);
}
OpPtr mul(const Tensor& a, const Tensor& b, const Tensor& out, MapVariant variant) {
  return map_op(MapKind::mul, {a, b}, out, variant);
}
OpPtr axpby(float alpha, const Tensor& x, float beta, const Tensor& y, const Tensor& out,
            MapVariant variant) {
  return map_op(MapKind::axpby, {x, y}, out, variant, kernels::MapScalars{alpha, beta});
}
OpPtr relu(const Tensor& x, const Tensor& out, MapVariant variant) {
  return map_op(MapKind::relu, {x}, out, variant);
}
OpPtr gelu_tanh(const Tensor& x, const Tensor& out, MapVariant variant) {
  return map_op(MapKind::gelu_tanh, {x}, out, variant);
}
OpPtr cast(const Tensor& x, const Tensor& out, MapVariant variant) {
  return map_op(MapKind::cast, {x}, out, variant);
}

#define LOOM_UNARY_MAP_FACTORY(name)                                   \
  OpPtr name(const Tensor& x, const Tensor& out, MapVariant variant) { \
    return map_op(MapKind::name, {x}, out, variant);                   \
  }
LOOM_UNARY_MATH_MAPS(LOOM_UNARY_MAP_FACTORY)
#undef LOOM_UNARY_MAP_FACTORY
#define LOOM_BINARY_MAP_FACTORY(name)                                                   \
  OpPtr name(const Tensor& a, const Tensor& b, const Tensor& out, MapVariant variant) { \
    return map_op(MapKind::name, {a, b}, out, variant);                                 \
  }
LOOM_BINARY_MATH_MAPS(LOOM_BINARY_MAP_FACTORY)
#undef LOOM_BINARY_MAP_FACTORY
OpPtr where(const Tensor& mask, const Tensor& a, const Tensor& b, const Tensor& out,
            MapVariant variant) {
  return map_op(MapKind::where, {mask, a, b}, out, variant);
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
#define LOOM_UNARY_EXPR(name) \
  MapExpr name(const MapExpr& x) { return make_node(FusedOpcode::name, {node_of(x)}); }
LOOM_UNARY_MATH_MAPS(LOOM_UNARY_EXPR)
#undef LOOM_UNARY_EXPR
#define LOOM_BINARY_EXPR(name)                                     \
  MapExpr name(const MapExpr& a, const MapExpr& b) {               \
    return make_node(FusedOpcode::name, {node_of(a), node_of(b)}); \
  }
LOOM_BINARY_MATH_MAPS(LOOM_BINARY_EXPR)
#undef LOOM_BINARY_EXPR
MapExpr where(const MapExpr& mask, const MapExpr& a, const MapExpr& b) {
  return make_node(FusedOpcode::where, {node_of(mask), node_of(a), node_of(b)});
}
MapExpr operator+(const MapExpr& a, const MapExpr& b) { return add(a, b); }
MapExpr operator-(const MapExpr& a, const MapExpr& b) { return sub(a, b); }
MapExpr operator/(const MapExpr& a, const MapExpr& b) { return div(a, b); }
MapExpr operator-(const MapExpr& x) { return neg(x); }
MapExpr operator*(const MapExpr& a, const MapExpr& b) { return mul(a, b); }
MapExpr operator*(float s, const MapExpr& x) { return mul(MapExpr::constant(s), x); }

OpPtr fused_map(std::vector<Tensor> inputs, const Tensor& out, const MapExpr& expr) {
  return std::make_shared<FusedMap>(std::move(inputs), std::vector<Tensor>{out},
                                    std::vector<MapExpr>{expr});
}
OpPtr fused_map(std::vector<Tensor> inputs, std::vector<Tensor> outs, std::vector<MapExpr> exprs) {
  return std::make_shared<FusedMap>(std::move(inputs), std::move(outs), exprs);
}

}  // namespace ops
}  // namespace loom
