// common/convert.hpp on the GPU: the conversion intrinsics that the header
// lets kernels use give its bits for every one of the 2^32 f32 patterns
// (narrowing) and the 2^16 f16 patterns (widening), NaNs included; and the
// header's functions compiled for the device give the bits they give on the
// host.
#include "support/gpu.hpp"

#include "common/convert.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

namespace {

using loom::kernels::bf16_bits_to_f32;
using loom::kernels::f16_bits_to_f32;
using loom::kernels::f32_to_bf16_bits;
using loom::kernels::f32_to_f16_bits;

// What the intrinsics are checked as, and where a mismatch is counted.
enum Check : int {
  kFloat2HalfRn,
  kFloats2Half2Rn,
  kFloat2Bfloat16Rn,
  kFloats2Bfloat162Rn,
  kHalf2Float,
  kChecks
};
const char* const kNames[kChecks] = {"__float2half_rn", "__floats2half2_rn", "__float2bfloat16_rn",
                                     "__floats2bfloat162_rn", "__half2float"};

struct Mismatches {
  unsigned long long count[kChecks];
  unsigned int first[kChecks];  // the smallest input that differs
};

__device__ void mismatch(Mismatches* m, int check, unsigned int input) {
  atomicAdd(&m->count[check], 1ULL);
  atomicMin(&m->first[check], input);
}

// Every f32 pattern, the pairs' second value its sign flipped and its lowest
// bit toggled (so that each half of a pair sees other inputs than the first).
__global__ void narrow_every_f32(Mismatches* m) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i =
           static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < (1ULL << 32); i += stride) {
    const auto u = static_cast<unsigned int>(i);
    const float a = __uint_as_float(u);
    const float b = __uint_as_float(u ^ 0x80000001U);
    const std::uint16_t ha = f32_to_f16_bits(a);
    const std::uint16_t hb = f32_to_f16_bits(b);
    const std::uint16_t ba = f32_to_bf16_bits(a);
    const std::uint16_t bb = f32_to_bf16_bits(b);
    if (__half_as_ushort(__float2half_rn(a)) != ha) mismatch(m, kFloat2HalfRn, u);
    if (__bfloat16_as_ushort(__float2bfloat16_rn(a)) != ba) mismatch(m, kFloat2Bfloat16Rn, u);
    const __half2 h2 = __floats2half2_rn(a, b);
    if (__half_as_ushort(h2.x) != ha || __half_as_ushort(h2.y) != hb) {
      mismatch(m, kFloats2Half2Rn, u);
    }
    const __nv_bfloat162 b2 = __floats2bfloat162_rn(a, b);
    if (__bfloat16_as_ushort(b2.x) != ba || __bfloat16_as_ushort(b2.y) != bb) {
      mismatch(m, kFloats2Bfloat162Rn, u);
    }
  }
}

__global__ void widen_every_f16(Mismatches* m) {
  const unsigned int u = blockIdx.x * blockDim.x + threadIdx.x;
  if (u >= 0x10000U) return;
  const auto h = static_cast<unsigned short>(u);
  if (__float_as_uint(__half2float(__ushort_as_half(h))) != __float_as_uint(f16_bits_to_f32(h))) {
    mismatch(m, kHalf2Float, u);
  }
}

TEST(ConvertGpu, TheIntrinsicsKernelsUseGiveTheSharedBits) {
  LOOM_REQUIRE_GPU();
  loom::test::DeviceBuffer<Mismatches> d_m(1);
  Mismatches init{};
  for (unsigned int& first : init.first) first = 0xFFFFFFFFU;
  d_m.upload({init});
  narrow_every_f32<<<4096, 256>>>(d_m.data());
  LOOM_CUDA_CHECK(cudaGetLastError());
  widen_every_f16<<<256, 256>>>(d_m.data());
  LOOM_CUDA_CHECK(cudaGetLastError());
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  const Mismatches m = d_m.download()[0];
  for (int c = 0; c < kChecks; ++c) {
    EXPECT_EQ(m.count[c], 0U) << kNames[c] << " differs from common/convert.hpp, first for input 0x"
                              << std::hex << m.first[c];
  }
}

// The device's results of the shared functions, for the host to compare.
__global__ void shared_on_device(const float* in, std::size_t n, std::uint16_t* f16,
                                 std::uint16_t* bf16, std::uint32_t* f16_wide,
                                 std::uint32_t* bf16_wide) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    f16[i] = f32_to_f16_bits(in[i]);
    bf16[i] = f32_to_bf16_bits(in[i]);
  }
  if (i < 0x10000U) {
    f16_wide[i] = __float_as_uint(f16_bits_to_f32(static_cast<std::uint16_t>(i)));
    bf16_wide[i] = __float_as_uint(bf16_bits_to_f32(static_cast<std::uint16_t>(i)));
  }
}

TEST(ConvertGpu, DeviceAndHostGiveTheSameBits) {
  LOOM_REQUIRE_GPU();
  // Every upper half with lower halves on and around both formats' rounding
  // boundaries and the extremes; every f16 pattern widened, and every bf16.
  constexpr std::uint32_t kLows[] = {0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x3000,
                                     0x7FFF, 0x8000, 0x8001, 0xF000, 0xFFFF};
  std::vector<float> in;
  for (std::uint32_t hi = 0; hi < 0x10000; ++hi) {
    for (std::uint32_t lo : kLows) in.push_back(std::bit_cast<float>((hi << 16) | lo));
  }
  const std::size_t n = in.size();
  loom::test::DeviceBuffer<float> d_in(n);
  loom::test::DeviceBuffer<std::uint16_t> d_f16(n), d_bf16(n);
  loom::test::DeviceBuffer<std::uint32_t> d_f16_wide(0x10000), d_bf16_wide(0x10000);
  d_in.upload(in);
  shared_on_device<<<static_cast<unsigned>((n + 255) / 256), 256>>>(
      d_in.data(), n, d_f16.data(), d_bf16.data(), d_f16_wide.data(), d_bf16_wide.data());
  LOOM_CUDA_CHECK(cudaGetLastError());
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  const auto f16 = d_f16.download();
  const auto bf16 = d_bf16.download();
  const auto f16_wide = d_f16_wide.download();
  const auto bf16_wide = d_bf16_wide.download();
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(f16[i], f32_to_f16_bits(in[i])) << std::hex << std::bit_cast<std::uint32_t>(in[i]);
    ASSERT_EQ(bf16[i], f32_to_bf16_bits(in[i])) << std::hex << std::bit_cast<std::uint32_t>(in[i]);
  }
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    ASSERT_EQ(f16_wide[b], std::bit_cast<std::uint32_t>(f16_bits_to_f32(h))) << std::hex << b;
    ASSERT_EQ(bf16_wide[b], std::bit_cast<std::uint32_t>(bf16_bits_to_f32(h))) << std::hex << b;
  }
}

}  // namespace
