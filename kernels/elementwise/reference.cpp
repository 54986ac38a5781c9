// The maps' names and dtype table, the geometry helpers, and the family's
// CPU references: the maps' (the same functors as the kernels, with
// round-to-nearest-even conversions from common/convert.hpp), fill's,
// scale_copy's, vector_add's, and fused_map's (an interpreter of the fused
// program; fusion.cpp generates and launches its kernel).
#include "common/convert.hpp"
#include "elementwise/functors.hpp"
#include "elementwise/fusion.hpp"
#include "elementwise/map.hpp"
#include "elementwise/maps.hpp"
#include "elementwise/maps_dispatch.hpp"
#include "elementwise/vector_add.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

namespace loom::kernels {
namespace {

bool is_float(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }

template <DType D>
float load(const void* base, std::int64_t i) {
  if constexpr (D == DType::f32) {
    return static_cast<const float*>(base)[i];
  } else {
    std::uint16_t bits = 0;
    std::memcpy(&bits, static_cast<const std::uint16_t*>(base) + i, sizeof bits);
    return D == DType::f16 ? f16_bits_to_f32(bits) : bf16_bits_to_f32(bits);
  }
}

template <DType D>
void store(void* base, std::int64_t i, float v) {
  if constexpr (D == DType::f32) {
    static_cast<float*>(base)[i] = v;
  } else {
    const std::uint16_t bits = D == DType::f16 ? f32_to_f16_bits(v) : f32_to_bf16_bits(v);
    std::memcpy(static_cast<std::uint16_t*>(base) + i, &bits, sizeof bits);
  }
}

template <DType In, DType Out, class F>
void apply_at(const F& f, const MapOperands& ops, std::int64_t o, std::int64_t xi, std::int64_t yi,
              std::int64_t zi) {
  if constexpr (F::kArity == 3) {
    store<Out>(ops.out, o, f(load<In>(ops.x, xi), load<In>(ops.y, yi), load<In>(ops.z, zi)));
  } else if constexpr (F::kArity == 2) {
    (void)zi;
    store<Out>(ops.out, o, f(load<In>(ops.x, xi), load<In>(ops.y, yi)));
  } else {
    (void)yi;
    (void)zi;
    store<Out>(ops.out, o, f(load<In>(ops.x, xi)));
  }
}

#define LOOM_MAP_KIND_ENTRY(name) MapKind::name,
constexpr MapKind kAllKinds[] = {MapKind::add,
                                 MapKind::mul,
                                 MapKind::axpby,
                                 MapKind::relu,
                                 MapKind::gelu_tanh,
                                 MapKind::cast,
                                 LOOM_UNARY_MATH_MAPS(LOOM_MAP_KIND_ENTRY)
                                     LOOM_BINARY_MATH_MAPS(LOOM_MAP_KIND_ENTRY) MapKind::where};
#undef LOOM_MAP_KIND_ENTRY

}  // namespace

std::string_view to_string(MapKind kind) noexcept {
  switch (kind) {
    case MapKind::add: return "add";
    case MapKind::mul: return "mul";
    case MapKind::axpby: return "axpby";
    case MapKind::relu: return "relu";
    case MapKind::gelu_tanh: return "gelu_tanh";
    case MapKind::cast: return "cast";
    case MapKind::where: return "where";
#define LOOM_MAP_KIND_NAME(name) \
  case MapKind::name: return #name;
      LOOM_UNARY_MATH_MAPS(LOOM_MAP_KIND_NAME) LOOM_BINARY_MATH_MAPS(LOOM_MAP_KIND_NAME)
#undef LOOM_MAP_KIND_NAME
  }
  return "unknown";
}

std::span<const MapKind> all_map_kinds() noexcept { return kAllKinds; }

int arity(MapKind kind) noexcept {
  switch (kind) {
    case MapKind::relu:
    case MapKind::gelu_tanh:
    case MapKind::cast: return 1;
    case MapKind::where: return 3;
#define LOOM_MAP_KIND_UNARY(name) case MapKind::name:
      LOOM_UNARY_MATH_MAPS(LOOM_MAP_KIND_UNARY) return 1;
#undef LOOM_MAP_KIND_UNARY
    default: return 2;
  }
}

bool map_supports(MapKind kind, DType in, DType out) noexcept {
  if (!is_float(in) || !is_float(out)) return false;
  return kind == MapKind::cast || in == out;
}

std::int64_t MapGeometry::numel() const noexcept {
  std::int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[static_cast<std::size_t>(d)];
  return n;
}

MapGeometry coalesce(const MapGeometry& g) noexcept {
  MapGeometry out;
  for (int d = 0; d < g.rank; ++d) {
    const auto s = static_cast<std::size_t>(d);
    if (g.shape[s] == 1) continue;
    if (g.shape[s] == 0) {  // no elements: one empty dimension says it all
      out = MapGeometry{};
      out.rank = 1;
      return out;
    }
    if (out.rank > 0) {
      const auto last = static_cast<std::size_t>(out.rank - 1);
      // The previous (outer) dimension steps over exactly one run of this one in every operand.
      const auto follows = [&](const auto& outer, const auto& inner) {
        return outer[last] == inner[s] * g.shape[s];
      };
      if (follows(out.out_strides, g.out_strides) && follows(out.x_strides, g.x_strides) &&
          follows(out.y_strides, g.y_strides) && follows(out.z_strides, g.z_strides)) {
        out.shape[last] *= g.shape[s];
        out.out_strides[last] = g.out_strides[s];
        out.x_strides[last] = g.x_strides[s];
        out.y_strides[last] = g.y_strides[s];
        out.z_strides[last] = g.z_strides[s];
        continue;
      }
    }
    const auto k = static_cast<std::size_t>(out.rank++);
    out.shape[k] = g.shape[s];
    out.out_strides[k] = g.out_strides[s];
    out.x_strides[k] = g.x_strides[s];
    out.y_strides[k] = g.y_strides[s];
    out.z_strides[k] = g.z_strides[s];
  }
  return out;
}

void map_reference(MapKind kind, DType in, DType out, const MapOperands& operands, std::size_t n,
                   MapScalars scalars) {
  detail::visit_map(kind, in, out, scalars, [&](auto f, auto in_tag, auto out_tag) {
    constexpr DType kIn = decltype(in_tag)::value;
    constexpr DType kOut = decltype(out_tag)::value;
    for (std::size_t i = 0; i < n; ++i) {
      const auto at = static_cast<std::int64_t>(i);
      const auto pick = [&](unsigned bit) -> std::int64_t {
        return (operands.broadcast & bit) != 0 ? 0 : at;
      };
      apply_at<kIn, kOut>(f, operands, at, pick(kBroadcastX), pick(kBroadcastY), pick(kBroadcastZ));
    }
  });
}

void map_strided_reference(MapKind kind, DType in, DType out, const MapOperands& operands,
                           const MapGeometry& geometry, MapScalars scalars) {
  detail::visit_map(kind, in, out, scalars, [&](auto f, auto in_tag, auto out_tag) {
    constexpr DType kIn = decltype(in_tag)::value;
    constexpr DType kOut = decltype(out_tag)::value;
    const std::int64_t n = geometry.numel();
    if (n <= 0) return;
    // An odometer over the shape, innermost dimension fastest (row-major order).
    std::array<std::int64_t, kMapMaxRank> index{};
    std::int64_t o = 0;
    std::int64_t x = 0;
    std::int64_t y = 0;
    std::int64_t z = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      apply_at<kIn, kOut>(f, operands, o, x, y, z);
      for (int d = geometry.rank - 1; d >= 0; --d) {
        const auto s = static_cast<std::size_t>(d);
        o += geometry.out_strides[s];
        x += geometry.x_strides[s];
        y += geometry.y_strides[s];
        z += geometry.z_strides[s];
        if (++index[s] < geometry.shape[s]) break;
        o -= geometry.out_strides[s] * geometry.shape[s];
        x -= geometry.x_strides[s] * geometry.shape[s];
        y -= geometry.y_strides[s] * geometry.shape[s];
        z -= geometry.z_strides[s] * geometry.shape[s];
        index[s] = 0;
      }
    }
  });
}

void fill_reference(float* t, std::size_t n, float value) noexcept { std::fill(t, t + n, value); }

void scale_copy_reference(const float* src, float* dst, std::size_t n, float alpha) noexcept {
  for (std::size_t i = 0; i < n; ++i) dst[i] = alpha * src[i];
}

void vector_add_reference(const float* a, const float* b, float* c, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

// ---- fused_map: the program interpreted ----------------------------------

namespace {

// A fused program's operands carry their dtype at run time.
float load(DType d, const void* base, std::int64_t i) {
  if (d == DType::f32) return load<DType::f32>(base, i);
  return d == DType::f16 ? load<DType::f16>(base, i) : load<DType::bf16>(base, i);
}

void store(DType d, void* base, std::int64_t i, float v) {
  if (d == DType::f32) {
    store<DType::f32>(base, i, v);
  } else if (d == DType::f16) {
    store<DType::f16>(base, i, v);
  } else {
    store<DType::bf16>(base, i, v);
  }
}

float round_to(DType d, float v) {
  switch (d) {
    case DType::f16: return f16_bits_to_f32(f32_to_f16_bits(v));
    case DType::bf16: return bf16_bits_to_f32(f32_to_bf16_bits(v));
    default: return v;
  }
}

// One instruction over a block of elements (a, b, c: its operands' registers).
template <std::size_t kChunk>
void interpret(const FusedProgram& p, const FusedInstr& in, std::size_t count,
               const std::array<float, kChunk>& a, const std::array<float, kChunk>& b,
               const std::array<float, kChunk>& c, std::array<float, kChunk>& dst) {
  const auto each = [&](auto f) {
    for (std::size_t e = 0; e < count; ++e) dst[e] = f(e);
  };
  switch (in.op) {
    case FusedOpcode::input:
    case FusedOpcode::constant: return;  // read by the caller
    case FusedOpcode::add: each([&](auto e) { return map_fn::Add{}(a[e], b[e]); }); return;
    case FusedOpcode::mul: each([&](auto e) { return map_fn::Mul{}(a[e], b[e]); }); return;
    case FusedOpcode::axpby: {
      const map_fn::Axpby f{p.constants[static_cast<std::size_t>(in.index)],
                            p.constants[static_cast<std::size_t>(in.index) + 1]};
      each([&](auto e) { return f(a[e], b[e]); });
      return;
    }
    case FusedOpcode::relu: each([&](auto e) { return map_fn::Relu{}(a[e]); }); return;
    case FusedOpcode::gelu_tanh: each([&](auto e) { return map_fn::GeluTanh{}(a[e]); }); return;
    case FusedOpcode::round: each([&](auto e) { return round_to(in.dtype, a[e]); }); return;
    case FusedOpcode::where:
      each([&](auto e) { return map_fn::Where{}(a[e], b[e], c[e]); });
      return;
#define LOOM_FUSED_UNARY(name) \
  case FusedOpcode::name: each([&](auto e) { return map_fn::loom_map_##name(a[e]); }); return;
      LOOM_UNARY_MATH_MAPS(LOOM_FUSED_UNARY)
#undef LOOM_FUSED_UNARY
#define LOOM_FUSED_BINARY(name) \
  case FusedOpcode::name: each([&](auto e) { return map_fn::loom_map_##name(a[e], b[e]); }); return;
      LOOM_BINARY_MATH_MAPS(LOOM_FUSED_BINARY)
#undef LOOM_FUSED_BINARY
  }
}

}  // namespace

void fused_map_reference(const FusedProgram& p, const std::vector<const void*>& inputs, void* out,
                         std::size_t n) {
  fused_map_reference(p, inputs, std::vector<void*>{out}, FusedGeometry::contiguous(p, n));
}

void fused_map_reference(const FusedProgram& p, const std::vector<const void*>& inputs,
                         const std::vector<void*>& outputs, const FusedGeometry& geometry) {
  check_program(p);
  check_operand_counts(p, inputs.size(), outputs.size());
  const std::int64_t n = geometry.numel();
  if (n <= 0) return;
  const auto results = p.results();
  const std::size_t operands = inputs.size() + outputs.size();
  // Every element's offsets, in row-major order (an odometer over the shape).
  std::vector<std::int64_t> offsets(operands, 0);
  std::array<std::int64_t, kFusedMaxRank> index{};
  const auto advance = [&] {
    for (int d = geometry.rank - 1; d >= 0; --d) {
      for (std::size_t k = 0; k < operands; ++k) offsets[k] += geometry.strides[k][d];
      if (++index[static_cast<std::size_t>(d)] < geometry.shape[d]) return;
      for (std::size_t k = 0; k < operands; ++k) {
        offsets[k] -= geometry.strides[k][d] * geometry.shape[d];
      }
      index[static_cast<std::size_t>(d)] = 0;
    }
  };
  // A block of elements an instruction at a time: the dispatch is paid once
  // a block, not once an element.
  constexpr std::size_t kChunk = 256;
  std::vector<std::array<float, kChunk>> r(p.code.size());
  std::vector<std::array<std::int64_t, kChunk>> at(operands);
  for (std::int64_t begin = 0; begin < n; begin += static_cast<std::int64_t>(kChunk)) {
    const auto count = static_cast<std::size_t>(std::min<std::int64_t>(kChunk, n - begin));
    for (std::size_t e = 0; e < count; ++e) {
      for (std::size_t k = 0; k < operands; ++k) at[k][e] = offsets[k];
      advance();
    }
    for (std::size_t k = 0; k < p.code.size(); ++k) {
      const FusedInstr& in = p.code[k];
      auto& dst = r[k];
      const auto operand = [&](int reg) -> const std::array<float, kChunk>& {
        return r[static_cast<std::size_t>(std::max(reg, 0))];
      };
      if (in.op == FusedOpcode::input) {
        const auto i = static_cast<std::size_t>(in.index);
        for (std::size_t e = 0; e < count; ++e) dst[e] = load(p.inputs[i], inputs[i], at[i][e]);
      } else if (in.op == FusedOpcode::constant) {
        dst.fill(p.constants[static_cast<std::size_t>(in.index)]);
      } else {
        interpret(p, in, count, operand(in.a), operand(in.b), operand(in.c), dst);
      }
    }
    for (std::size_t j = 0; j < results.size(); ++j) {
      const auto& value = r[static_cast<std::size_t>(results[j].reg)];
      const auto& where = at[inputs.size() + j];
      for (std::size_t e = 0; e < count; ++e)
        store(results[j].dtype, outputs[j], where[e], value[e]);
    }
  }
}

}  // namespace loom::kernels
