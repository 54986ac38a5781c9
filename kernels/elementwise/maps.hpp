#pragma once
// Elementwise maps, each with its CPU reference: add, mul, axpby
// (alpha * x + beta * y), relu, gelu-tanh, cast between f32, f16 and bf16;
// the unary and binary maths of LOOM_UNARY_MATH_MAPS and
// LOOM_BINARY_MATH_MAPS (exp, ..., sub, div, ..., comparisons, the
// activations' backwards); and where(mask, a, b), the one ternary map.
// Their arithmetic is map_math.inc.
//
// Every map computes in f32: inputs are widened on load and the result is
// rounded once, to nearest even, on store to the output dtype. For f16 and
// bf16 outputs the vectorized kernel's log and pow use lg2/ex2.approx
// (maps.cu): within a 16-bit rounding, not always the same last bit.
//
// Which dtypes each map takes (the instantiations are bounded to these):
//   every map but cast                one dtype for every operand: f32, f16 or bf16
//   cast                              any input and output of f32, f16, bf16 (9 pairs;
//                                     the same dtype on both sides is a copy)
// map_supports() says whether a combination is one of them.
//
// Variants over contiguous data, in the order the lecture teaches them:
//   naive        one thread an element, the grid covers n exactly.
//   grid_stride  a grid sized to the machine (8 blocks an SM); each thread
//                strides through n, so one launch shape serves every n.
//   vectorized   a vector is 16 bytes of the output (one 16-byte store; the
//                input's part is 8 bytes for a widening cast, 32 for a
//                narrowing one), kMapVectorsPerThread vectors a thread (twice
//                as many with 8-byte input parts: bytes in flight hide DRAM
//                latency), a scalar head and tail. Pointers whose
//                misalignments can be peeled together (offset views of one
//                layout) take a scalar head until each is aligned to its part
//                of a vector (16 bytes, 8 for a widening cast's input);
//                others fall back to grid_stride.
// map() picks vectorized for `automatic` (see kMapDefault for why).
//
// Strided views (slices, transposes, any strides, inputs with zero strides)
// take map_strided(): a grid-stride loop whose index arithmetic walks the
// shape, up to rank kMapMaxRank (Dims::kMaxRank: every loom tensor).
// Contiguous dimensions are merged first, so a slice of rows is rank 1 or 2,
// and a rank-1 walk (a scalar broadcast over a contiguous tensor) divides nothing.

#include <loom/cuda_interop.hpp>
#include <loom/dtype.hpp>
#include <loom/ops/elementwise.hpp>
#include <loom/ops/variant.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace loom::kernels {

/// The maps that share one kernel a dtype (map_fn::UnaryMath, BinaryMath).
// clang-format off
#define LOOM_UNARY_MATH_MAPS(X) X(exp) X(log) X(sqrt) X(rsqrt) X(tanh) X(sigmoid) X(abs) X(neg)
#define LOOM_BINARY_MATH_MAPS(X) X(sub) X(div) X(minimum) X(maximum) X(pow) \
  X(gt) X(ge) X(lt) X(le) X(eq) X(relu_backward) X(gelu_tanh_backward)
// clang-format on

#define LOOM_MAP_KIND_ENUMERATOR(name) name,
enum class MapKind {
  add,
  mul,
  axpby,
  relu,
  gelu_tanh,
  cast,
  LOOM_UNARY_MATH_MAPS(LOOM_MAP_KIND_ENUMERATOR) LOOM_BINARY_MATH_MAPS(LOOM_MAP_KIND_ENUMERATOR)
      where
};
#undef LOOM_MAP_KIND_ENUMERATOR
using MapVariant = loom::ops::MapVariant;  // named by its table (loom/ops/variant.hpp)

// So that to_string(variant) resolves here and by argument-dependent lookup.
using loom::ops::to_string;

/// The variant `automatic` resolves to for contiguous data. vectorized: a
/// 16-byte access moves 4 (f32) or 8 (f16, bf16) elements an instruction, so
/// the load/store units issue a quarter to an eighth of the instructions of
/// the scalar forms, and two vectors a thread keep 32 bytes an operand in
/// flight, what an H200's 4.8 TB/s needs across 132 SMs at ~600 ns latency.
/// grid_stride and naive are for teaching and comparison; at small n every
/// variant is one launch and costs the same.
inline constexpr MapVariant kMapDefault = MapVariant::vectorized;
/// Vectors each thread of the vectorized variant moves (doubled for widening casts).
inline constexpr int kMapVectorsPerThread = 2;
inline constexpr int kMapMaxRank = 8;

std::string_view to_string(MapKind kind) noexcept;
/// Every MapKind, in declaration order.
std::span<const MapKind> all_map_kinds() noexcept;
/// 1 for relu, gelu_tanh, cast and the unary maths; 3 for where; else 2.
int arity(MapKind kind) noexcept;
/// Whether `kind` is instantiated for inputs of `in` and an output of `out`.
bool map_supports(MapKind kind, DType in, DType out) noexcept;

/// The scalars of axpby (ignored by the other maps).
struct MapScalars {
  float alpha = 1.0F;
  float beta = 1.0F;
};

/// A map's operands: y is null for unary maps, z for all but where (whose
/// x is the mask). Device pointers for map(), host pointers for the
/// references. out may equal an input (in place), and must not partly overlap one.
/// For map() and map_reference(), an input whose bit is set in `broadcast`
/// (kBroadcastX, kBroadcastY, kBroadcastZ) is one element read for every
/// element of out (a scalar operand: a learning rate in a tensor).
struct MapOperands {
  const void* x = nullptr;
  const void* y = nullptr;
  void* out = nullptr;
  const void* z = nullptr;
  unsigned broadcast = 0;
};
inline constexpr unsigned kBroadcastX = 1;
inline constexpr unsigned kBroadcastY = 2;
inline constexpr unsigned kBroadcastZ = 4;

/// Shape and per-operand strides (elements) of a strided map.
struct MapGeometry {
  int rank = 0;
  std::array<std::int64_t, kMapMaxRank> shape{};
  std::array<std::int64_t, kMapMaxRank> out_strides{};
  std::array<std::int64_t, kMapMaxRank> x_strides{};
  std::array<std::int64_t, kMapMaxRank> y_strides{};
  std::array<std::int64_t, kMapMaxRank> z_strides{};
  std::int64_t numel() const noexcept;
};

/// Merges dimensions that are contiguous in every operand and drops extents
/// of 1: the same elements in the same order, with fewer indices to compute.
MapGeometry coalesce(const MapGeometry& geometry) noexcept;

/// Enqueues out[i] = kind(x[i], y[i]) for i < n on `stream`, contiguous
/// operands. n == 0 launches nothing. @throws InvalidArgument for an
/// unsupported dtype combination; CudaError if the launch fails.
void map(MapKind kind, DType in, DType out, const MapOperands& operands, std::size_t n,
         StreamView stream, MapScalars scalars = {}, MapVariant variant = MapVariant::automatic);

/// The same over strided operands (rank <= kMapMaxRank; see the header comment).
void map_strided(MapKind kind, DType in, DType out, const MapOperands& operands,
                 const MapGeometry& geometry, StreamView stream, MapScalars scalars = {});

/// The CPU references. Host pointers. @throws InvalidArgument as map().
void map_reference(MapKind kind, DType in, DType out, const MapOperands& operands, std::size_t n,
                   MapScalars scalars = {});
void map_strided_reference(MapKind kind, DType in, DType out, const MapOperands& operands,
                           const MapGeometry& geometry, MapScalars scalars = {});

}  // namespace loom::kernels
