#include "transfer/strided_copy.hpp"

#include "common/check.hpp"
#include "common/launch.hpp"

#include <loom/error.hpp>

#include <cstring>
#include <string>

namespace loom::detail {
namespace {

constexpr int kBlock = 256;

__host__ __device__ inline std::int64_t source_offset(const StridedLayout& layout, std::int64_t i) {
  std::int64_t offset = 0;
  for (int d = layout.rank - 1; d >= 0; --d) {
    const std::int64_t extent = layout.shape[d];
    offset += (i % extent) * layout.strides[d];
    i /= extent;
  }
  return offset;
}

template <class Word>
__global__ void strided_copy_kernel(const Word* __restrict__ gSrc, StridedLayout layout,
                                    Word* __restrict__ gDst, std::int64_t numel) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += stride) {
    gDst[i] = gSrc[source_offset(layout, i)];
  }
}

template <class Word>
void launch(const void* src, const StridedLayout& layout, void* dst, std::int64_t numel,
            StreamView stream) {
  const std::int64_t wanted = (numel + kBlock - 1) / kBlock;
  const unsigned blocks = static_cast<unsigned>(wanted < 65535 * 4 ? wanted : 65535 * 4);
  loom::detail::launch_on_stream(stream, strided_copy_kernel<Word>, blocks, kBlock, 0,
                                 static_cast<const Word*>(src), layout, static_cast<Word*>(dst),
                                 numel);
  LOOM_KERNEL_CHECK_LAUNCH("strided_copy kernel launch");
}

}  // namespace

void strided_copy(const void* src, const StridedLayout& layout, void* dst, std::int64_t numel,
                  int element_bytes, StreamView stream) {
  if (numel <= 0) return;
  switch (element_bytes) {
    case 1: return launch<std::uint8_t>(src, layout, dst, numel, stream);
    case 2: return launch<std::uint16_t>(src, layout, dst, numel, stream);
    case 4: return launch<std::uint32_t>(src, layout, dst, numel, stream);
    case 8: return launch<std::uint64_t>(src, layout, dst, numel, stream);
    default:
      throw InvalidArgument("strided_copy: elements of " + std::to_string(element_bytes) +
                            " bytes are not supported (1, 2, 4 or 8)");
  }
}

void strided_copy_reference(const void* src, const StridedLayout& layout, void* dst,
                            std::int64_t numel, int element_bytes) {
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  const auto width = static_cast<std::size_t>(element_bytes);
  for (std::int64_t i = 0; i < numel; ++i) {
    const std::ptrdiff_t from =
        static_cast<std::ptrdiff_t>(source_offset(layout, i)) * static_cast<std::ptrdiff_t>(width);
    std::memcpy(d + static_cast<std::size_t>(i) * width, s + from, width);
  }
}

}  // namespace loom::detail
