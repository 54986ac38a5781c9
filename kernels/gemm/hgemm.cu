// hgemm's dispatch and its simple variant (the mma_sync kernel:
// hgemm_mma_sync.cuh; the wgmma kernel: hgemm_wgmma.cuh).
#include "gemm/hgemm.hpp"

#include "common/check.hpp"
#include "common/convert.hpp"
#include "common/launch.hpp"
#include "common/sm90a_device.hpp"
#include "elementwise/functors.hpp"

#include <loom/error.hpp>

#include <array>
#include <atomic>
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

// The wgmma kernel's view of the current device (its sm_90a image's
// registers read only where it was built).
Sm90aDevice current_device_info() {
  static Sm90aDeviceCache cache(
      [] { return hgemm_detail::wgmma_built() ? hgemm_detail::wgmma_kernel_registers() : 0; });
  return cache.current();
}

std::atomic<int> g_automatic_uses_wgmma_for_tests{0};

bool automatic_uses_wgmma() {
  return kHgemmAutomaticUsesWgmma ||
         g_automatic_uses_wgmma_for_tests.load(std::memory_order_acquire) > 0;
}

// TMA's limits on one operand: data on 16 bytes; the leading dimension and
// the batch stride (or, for a shared operand, the one-matrix stride the
// kernel puts in its place) below 2^40 bytes; no negative stride.
bool tma_operand_fits(const BatchedMatrix& m, std::int64_t ld, std::int64_t outer) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 39;  // elements of 2 bytes
  if (reinterpret_cast<std::uintptr_t>(m.data) % 16 != 0) return false;
  if (ld <= 0 || ld >= kLimit || m.batch_stride < 0 || m.batch_stride % 8 != 0) return false;
  if (m.batch_stride != 0) return m.batch_stride < kLimit;
  return outer < kLimit / ld;  // ld * outer < 2^39
}

// Whether wgmma takes these operands, the device aside, as a code:
// automatic asks on every launch, and only a reported refusal builds its
// message (no allocation in steady state).
enum class WgmmaFit { runs, not_built, empty, dtypes, extents, layout, tma };

WgmmaFit wgmma_operands_fit(const HgemmArgs& p) noexcept {
  using hgemm_detail::WgmmaContiguous;
  if (!hgemm_detail::wgmma_built()) return WgmmaFit::not_built;
  if (p.m <= 0 || p.n <= 0 || p.k <= 0 || p.batch <= 0) return WgmmaFit::empty;
  if (p.a.dtype != p.b.dtype || (p.a.dtype != DType::bf16 && p.a.dtype != DType::f16)) {
    return WgmmaFit::dtypes;
  }
  if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX ||
      ((p.m + 127) / 128) * ((p.n + 255) / 256) * p.batch > INT_MAX / 2) {
    return WgmmaFit::extents;
  }
  const WgmmaContiguous a = hgemm_detail::wgmma_contiguous(p.a);
  const WgmmaContiguous b = hgemm_detail::wgmma_contiguous(p.b);
  if (a == WgmmaContiguous::none || b == WgmmaContiguous::none) return WgmmaFit::layout;
  const bool a_cols = a == WgmmaContiguous::cols;
  const bool b_cols = b == WgmmaContiguous::cols;
  if (!tma_operand_fits(p.a, a_cols ? p.a.row_stride : p.a.col_stride, a_cols ? p.m : p.k) ||
      !tma_operand_fits(p.b, b_cols ? p.b.row_stride : p.b.col_stride, b_cols ? p.k : p.n)) {
    return WgmmaFit::tma;
  }
  return WgmmaFit::runs;
}

// Why wgmma cannot take these operands ("" where it can).
std::string wgmma_refusal(WgmmaFit fit, const HgemmArgs& p) {
  switch (fit) {
    case WgmmaFit::runs: return {};
    case WgmmaFit::not_built:
      return "the library was not compiled for sm_90a (CMAKE_CUDA_ARCHITECTURES without 90)";
    case WgmmaFit::empty:
      return "m, n, k and batch must be positive, got m=" + std::to_string(p.m) +
             " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) +
             " batch=" + std::to_string(p.batch);
    case WgmmaFit::dtypes: return "a and b must both be bf16 or both f16";
    case WgmmaFit::extents: return "the extents exceed the kernel's tile indices";
    case WgmmaFit::layout:
      return "each operand must be row- or column-major with a leading dimension that is a "
             "positive multiple of 8 elements (16 bytes, for TMA)";
    case WgmmaFit::tma:
      return "TMA needs each operand's data 16-byte aligned, and its leading dimension and batch "
             "stride non-negative multiples of 8 elements below 2^40 bytes";
  }
  return "unknown refusal";
}

}  // namespace

namespace hgemm_detail {

WgmmaContiguous wgmma_contiguous(const BatchedMatrix& m) noexcept {
  if (m.col_stride == 1 && m.row_stride > 0 && m.row_stride % 8 == 0) return WgmmaContiguous::cols;
  if (m.row_stride == 1 && m.col_stride > 0 && m.col_stride % 8 == 0) return WgmmaContiguous::rows;
  return WgmmaContiguous::none;
}

AutomaticUsesWgmmaForTests::AutomaticUsesWgmmaForTests() {
  g_automatic_uses_wgmma_for_tests.fetch_add(1, std::memory_order_acq_rel);
}

AutomaticUsesWgmmaForTests::~AutomaticUsesWgmmaForTests() {
  g_automatic_uses_wgmma_for_tests.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace hgemm_detail

bool hgemm_wgmma_fits(const HgemmArgs& args) noexcept {
  return wgmma_operands_fit(args) == WgmmaFit::runs;
}

bool hgemm_wgmma_available() {
  if (!hgemm_detail::wgmma_built()) return false;
  return current_device_info().runs();
}

bool hgemm_mma_sync_fits(const HgemmArgs& p) noexcept {
  return p.m > 0 && p.n > 0 && p.k > 0 && p.a.dtype == p.b.dtype &&
         (p.a.dtype == DType::bf16 || p.a.dtype == DType::f16) && operand_fits(p.a, p.m, p.k) &&
         operand_fits(p.b, p.k, p.n);
}

void hgemm(const HgemmArgs& args, StreamView stream, HgemmVariant variant) {
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0) return;
  check_extents(args);
  const bool asked_wgmma = variant == HgemmVariant::wgmma || variant == HgemmVariant::wgmma_cluster;
  if (asked_wgmma || (variant == HgemmVariant::automatic && automatic_uses_wgmma())) {
    const WgmmaFit fit = wgmma_operands_fit(args);
    Sm90aDevice device;
    if (fit == WgmmaFit::runs) device = current_device_info();
    if (fit == WgmmaFit::runs && device.runs()) {
      const bool cluster = variant == HgemmVariant::wgmma_cluster;
      if (args.a.dtype == DType::bf16) {
        hgemm_detail::launch_wgmma_bf16(args, stream, device.multiprocessors, cluster);
      } else {
        hgemm_detail::launch_wgmma_f16(args, stream, device.multiprocessors, cluster);
      }
      return;
    }
    if (asked_wgmma) {
      throw InvalidArgument("hgemm: " + std::string(to_string(variant)) + " cannot run here: " +
                            (fit == WgmmaFit::runs ? device.refusal() : wgmma_refusal(fit, args)));
    }
  }
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
