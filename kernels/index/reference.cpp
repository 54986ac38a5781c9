// The index family's CPU references: the kernels' walks element by element,
// with the same rules (walk.hpp); what the CPU backend runs and the GPU
// kernels are checked against.
#include "common/convert.hpp"
#include "index/index.hpp"
#include "index/walk.hpp"

#include <cstring>

namespace loom::kernels {
namespace {

using index_detail::Candidate;
using index_detail::walk_offsets;

std::int64_t load_index(const void* index, DType dtype, std::int64_t i) {
  return dtype == DType::i32 ? std::int64_t{static_cast<const std::int32_t*>(index)[i]}
                             : static_cast<const std::int64_t*>(index)[i];
}

bool in_range(std::int64_t i, std::int64_t extent) { return i >= 0 && i < extent; }

// A NaN unit of `size` bytes: nan_word repeated (its first 2 or 4 bytes
// are one NaN element).
void store_nan(unsigned char* p, int size, std::uint32_t nan_word) {
  for (int at = 0; at < size; at += 4) {
    std::memcpy(p + at, &nan_word, static_cast<std::size_t>(size - at < 4 ? size - at : 4));
  }
}

void store_bits(unsigned char* p, int size, std::uint32_t bits) {
  if (size == 4) {
    std::memcpy(p, &bits, 4);
  } else {
    const auto half_bits = static_cast<std::uint16_t>(bits);
    std::memcpy(p, &half_bits, 2);
  }
}

float load_float(const void* x, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::f16: return f16_bits_to_f32(static_cast<const std::uint16_t*>(x)[i]);
    case DType::bf16: return bf16_bits_to_f32(static_cast<const std::uint16_t*>(x)[i]);
    default: return static_cast<const float*>(x)[i];
  }
}

void store_float(void* out, DType dtype, std::int64_t i, float v) {
  switch (dtype) {
    case DType::f16: static_cast<std::uint16_t*>(out)[i] = f32_to_f16_bits(v); break;
    case DType::bf16: static_cast<std::uint16_t*>(out)[i] = f32_to_bf16_bits(v); break;
    default: static_cast<float*>(out)[i] = v; break;
  }
}

template <bool kMax>
Candidate arg_reduce_row(const void* x, DType dtype, std::int64_t base,
                         const ArgReduceShape& shape) {
  Candidate best{load_float(x, dtype, base), 0};
  for (std::int64_t k = 1; k < shape.reduced; ++k) {
    const Candidate c{load_float(x, dtype, base + k * shape.reduced_stride), k};
    if (index_detail::beats<kMax>(c, best)) best = c;
  }
  return best;
}

}  // namespace

void gather_reference(const void* x, const void* index, DType index_dtype, void* out,
                      int element_bytes, std::uint32_t nan_word, const IndexedWalk& walk) {
  const auto* src = static_cast<const unsigned char*>(x);
  auto* dst = static_cast<unsigned char*>(out);
  for (std::int64_t i = 0; i < walk.walk.count; ++i) {
    std::int64_t off[kWalkOperands];
    walk_offsets(walk.walk, i, off);
    const std::int64_t j = load_index(index, index_dtype, off[kGatherIndex]);
    unsigned char* o = dst + off[kGatherOut] * element_bytes;
    if (!in_range(j, walk.indexed_extent)) {
      store_nan(o, element_bytes, nan_word);
      continue;
    }
    std::memcpy(o, src + (off[kGatherX] + j * walk.indexed_stride) * element_bytes,
                static_cast<std::size_t>(element_bytes));
  }
}

void scatter_add_reference(float* dst, const void* index, DType index_dtype, const float* src,
                           const IndexedWalk& walk) {
  for (std::int64_t i = 0; i < walk.walk.count; ++i) {
    std::int64_t off[kWalkOperands];
    walk_offsets(walk.walk, i, off);
    const std::int64_t j = load_index(index, index_dtype, off[kScatterIndex]);
    if (!in_range(j, walk.indexed_extent)) continue;
    dst[off[kScatterDst] + j * walk.indexed_stride] += src[off[kScatterSrc]];
  }
}

void one_hot_reference(const void* labels, DType label_dtype, void* out, const OneHotShape& shape) {
  auto* dst = static_cast<unsigned char*>(out);
  const int size = shape.element_bytes;
  for (std::int64_t r = 0; r < shape.rows; ++r) {
    const std::int64_t label = load_index(labels, label_dtype, r * shape.label_stride);
    const bool valid = in_range(label, shape.classes);
    for (std::int64_t j = 0; j < shape.classes; ++j) {
      const std::uint32_t bits = !valid ? shape.nan_bits : j == label ? shape.one_bits : 0U;
      store_bits(dst + (r * shape.classes + j) * size, size, bits);
    }
  }
}

void arg_reduce_reference(ArgReduce op, const void* x, DType dtype, std::int64_t* indices,
                          void* values, const ArgReduceShape& shape) {
  for (std::int64_t o = 0; o < shape.outputs.count; ++o) {
    std::int64_t off[kWalkOperands];
    walk_offsets(shape.outputs, o, off);
    const Candidate best = op == ArgReduce::max
                               ? arg_reduce_row<true>(x, dtype, off[kArgX], shape)
                               : arg_reduce_row<false>(x, dtype, off[kArgX], shape);
    indices[off[kArgIndices]] = best.index;
    if (values != nullptr) store_float(values, dtype, off[kArgValues], best.value);
  }
}

}  // namespace loom::kernels
