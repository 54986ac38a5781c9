// The maps' names and dtype table, the geometry helpers, and the family's
// CPU references: the maps' (the same functors as the kernels, with
// round-to-nearest-even conversions from common/convert.hpp), fill's,
// scale_copy's and vector_add's.
#include "common/convert.hpp"
#include "elementwise/map.hpp"
#include "elementwise/maps.hpp"
#include "elementwise/maps_dispatch.hpp"
#include "elementwise/vector_add.hpp"

#include <algorithm>
#include <cstring>

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

}  // namespace loom::kernels
