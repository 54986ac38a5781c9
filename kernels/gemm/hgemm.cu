// hgemm's dispatch and its simple variant (the mma_sync kernel: hgemm_mma_sync.cuh).
#include "gemm/hgemm.hpp"

#include "common/check.hpp"
#include "common/convert.hpp"
#include "common/launch.hpp"
#include "elementwise/functors.hpp"

#include <loom/error.hpp>

#include <climits>
#include <cstdint>
#include <string>

namespace loom::kernels {
namespace {

constexpr int kSimpleTile = 32;
constexpr int kSimpleRowsAThread = 4;  // a block of 32 x 8 threads covers 32 x 32

__device__ __forceinline__ float element(const BatchedMatrix& m, std::int64_t b, std::int64_t i,
                                         std::int64_t j) {
  return load_as_f32(m.data, m.dtype, b * m.batch_stride + i * m.row_stride + j * m.col_stride);
}

// Any layout and alignment: 32 x 32 tiles of A and B in shared memory as
// f32, each thread accumulating 4 elements of a column of C.
__global__ void hgemm_simple(HgemmArgs p) {
  __shared__ float tile_a[kSimpleTile][kSimpleTile + 1];
  __shared__ float tile_b[kSimpleTile][kSimpleTile + 1];
  const std::int64_t b = blockIdx.z;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kSimpleTile;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kSimpleTile;
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  float acc[kSimpleRowsAThread] = {};
  for (std::int64_t k0 = 0; k0 < p.k; k0 += kSimpleTile) {
    for (int r = ty; r < kSimpleTile; r += kSimpleTile / kSimpleRowsAThread) {
      const std::int64_t m = row0 + r;
      const std::int64_t k = k0 + tx;
      tile_a[r][tx] = m < p.m && k < p.k ? element(p.a, b, m, k) : 0.0F;
      const std::int64_t kb = k0 + r;
      const std::int64_t n = col0 + tx;
      tile_b[r][tx] = kb < p.k && n < p.n ? element(p.b, b, kb, n) : 0.0F;
    }
    __syncthreads();
    for (int kk = 0; kk < kSimpleTile; ++kk) {
      const float bv = tile_b[kk][tx];
      for (int i = 0; i < kSimpleRowsAThread; ++i) {
        acc[i] = fmaf(tile_a[ty + i * (kSimpleTile / kSimpleRowsAThread)][kk], bv, acc[i]);
      }
    }
    __syncthreads();
  }
  const std::int64_t n = col0 + tx;
  if (n >= p.n) return;
  for (int i = 0; i < kSimpleRowsAThread; ++i) {
    const std::int64_t m = row0 + ty + i * (kSimpleTile / kSimpleRowsAThread);
    if (m >= p.m) continue;
    const std::int64_t at = b * p.c.batch_stride + m * p.c.row_stride + n * p.c.col_stride;
    float v = p.alpha * acc[i];
    if (p.beta != 0.0F) v = fmaf(p.beta, element(p.c, b, m, n), v);
    if (p.bias.data != nullptr) v += element(p.bias, b, m, n);
    if (p.activation == SgemmActivation::relu) v = map_fn::loom_map_relu(v);
    if (p.activation == SgemmActivation::gelu_tanh) v = map_fn::loom_map_gelu_tanh(v);
    store_from_f32(const_cast<void*>(p.c.data), p.c.dtype, at, v);
  }
}

// A's or B's contiguous dimension (rows if rows_contiguous): its extent,
// leading dimension and batch stride multiples of 8 elements, its data on 16 bytes.
bool operand_fits(const BatchedMatrix& m, std::int64_t rows, std::int64_t cols) {
  const bool row_major = m.col_stride == 1;
  const bool col_major = m.row_stride == 1;
  if (!row_major && !col_major) return false;
  const std::int64_t contiguous = row_major ? cols : rows;
  const std::int64_t ld = row_major ? m.row_stride : m.col_stride;
  return contiguous % 8 == 0 && ld % 8 == 0 && m.batch_stride % 8 == 0 &&
         reinterpret_cast<std::uintptr_t>(m.data) % 16 == 0;
}

void check_extents(const HgemmArgs& p) {
  if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX) {
    throw InvalidArgument("hgemm: extents must fit in int, got m=" + std::to_string(p.m) +
                          " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k));
  }
  if (p.batch > 65535) {
    throw InvalidArgument("hgemm: a batch of at most 65535, got " + std::to_string(p.batch));
  }
  const std::int64_t tiles = ((p.m + 127) / 128) * ((p.n + 127) / 128);
  if (tiles > INT_MAX || (p.n + kSimpleTile - 1) / kSimpleTile > INT_MAX ||
      (p.m + kSimpleTile - 1) / kSimpleTile > 65535) {
    throw InvalidArgument("hgemm: m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) +
                          " exceeds the kernels' grid");
  }
}

}  // namespace

std::string_view to_string(HgemmVariant variant) noexcept {
  switch (variant) {
    case HgemmVariant::automatic: return "automatic";
    case HgemmVariant::mma_sync: return "mma_sync";
    case HgemmVariant::simple: return "simple";
  }
  return "unknown";
}

bool hgemm_mma_sync_fits(const HgemmArgs& p) noexcept {
  return p.m > 0 && p.n > 0 && p.k > 0 && p.a.dtype == p.b.dtype &&
         (p.a.dtype == DType::bf16 || p.a.dtype == DType::f16) && operand_fits(p.a, p.m, p.k) &&
         operand_fits(p.b, p.k, p.n);
}

void hgemm(const HgemmArgs& args, StreamView stream, HgemmVariant variant) {
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0) return;
  check_extents(args);
  const bool fits = hgemm_mma_sync_fits(args);
  if (variant == HgemmVariant::mma_sync && !fits) {
    throw InvalidArgument(
        "hgemm: mma_sync needs the operands' contiguous extents, leading dimensions and batch "
        "strides multiples of 8 elements and 16-byte aligned data");
  }
  if (variant == HgemmVariant::simple || !fits) {
    const dim3 grid(static_cast<unsigned>((args.n + kSimpleTile - 1) / kSimpleTile),
                    static_cast<unsigned>((args.m + kSimpleTile - 1) / kSimpleTile),
                    static_cast<unsigned>(args.batch));
    loom::detail::launch_on_stream(stream, hgemm_simple, grid,
                                   dim3(kSimpleTile, kSimpleTile / kSimpleRowsAThread), 0, args);
    LOOM_KERNEL_CHECK_LAUNCH("hgemm simple kernel launch");
    return;
  }
  if (args.a.dtype == DType::bf16) {
    hgemm_detail::launch_mma_sync_bf16(args, stream);
  } else {
    hgemm_detail::launch_mma_sync_f16(args, stream);
  }
}

}  // namespace loom::kernels
