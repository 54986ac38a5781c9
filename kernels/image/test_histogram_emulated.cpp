// The shared histogram kernel's own code (histogram_shared.cuh), run on the
// CPU: every block of a small grid one after another, each phase (zero the
// copies, count, merge) for every thread of the block before the next, as
// the kernel's barriers order them; atomics are plain additions. It checks
// what a GPU run would of the index arithmetic (the split around the 16-byte
// body at every misalignment, the grid stride with its unrolled and single
// steps, head and tail bytes, runs of equal bytes and words of four equal
// bytes, the copies and their merge) against the CPU reference; timing and the memory model are not
// emulated (the GPU tests cover those).
#include "image/histogram.hpp"  // first: CUDA's headers define the qualifiers redefined below

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "support/seed.hpp"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "support/emulated_cuda.hpp"

namespace loom::kernels::histogram_detail {
// Its phases run thread by thread, one at a time: atomics are plain additions.
using namespace loom::emulated;  // NOLINT: the kernel's code reads CUDA's names unqualified
}  // namespace loom::kernels::histogram_detail

#include "image/histogram_shared.cuh"

namespace {

namespace emu = loom::kernels::histogram_detail;
using Bytes = std::vector<std::uint8_t>;
using Counts = std::vector<std::int32_t>;

// The kernel over `pixels` bytes at `image` on a grid of `blocks` blocks,
// after the launcher's zeroing of the counts.
Counts run_grid(const std::uint8_t* image, std::size_t pixels, unsigned blocks) {
  Counts counts(emu::kBins, 0);
  const emu::Split split = emu::split_at_alignment(reinterpret_cast<std::uintptr_t>(image), pixels);
  const std::size_t threads = std::size_t{blocks} * emu::kBlock;
  for (unsigned block = 0; block < blocks; ++block) {
    // Poisoned: shared memory starts with whatever the last block left.
    std::vector<unsigned> sCopies(emu::kSharedWords, 0xDEADBEEFU);
    for (unsigned t = 0; t < emu::kBlock; ++t) emu::zero_copies(sCopies.data(), t);
    for (unsigned t = 0; t < emu::kBlock; ++t) {
      emu::count_share(image, split, std::size_t{block} * emu::kBlock + t, threads,
                       sCopies.data() + emu::copy_of(t) * emu::kCopyPitch);
    }
    for (unsigned t = 0; t < emu::kBlock; ++t) emu::merge_copies(sCopies.data(), counts.data(), t);
  }
  return counts;
}

// A 16-byte aligned buffer, and `pixels` bytes `offset` bytes into it with
// bytes of value `guard` around them: a read outside would count a guard.
struct Staged {
  Staged(const Bytes& pixels, std::size_t offset, std::uint8_t guard)
      : storage(pixels.size() + offset + 64, guard) {
    const auto address = reinterpret_cast<std::uintptr_t>(storage.data());
    image = storage.data() + (16 - address % 16) % 16 + offset;
    std::copy(pixels.begin(), pixels.end(), image);
  }
  Bytes storage;
  std::uint8_t* image;
};

enum class Pattern { random, constant, runs };

Bytes make_pixels(std::size_t n, Pattern pattern, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  Bytes v(n);
  if (pattern == Pattern::random) {
    for (auto& b : v) b = static_cast<std::uint8_t>(byte(rng));
  } else if (pattern == Pattern::constant) {
    std::fill(v.begin(), v.end(), static_cast<std::uint8_t>(byte(rng)));
  } else {
    // Runs of 1 to 40 equal bytes over a few neighbouring values, as in a blurred image.
    std::uniform_int_distribution<int> length(1, 40);
    std::uniform_int_distribution<int> value(120, 126);
    for (std::size_t i = 0; i < n;) {
      const auto b = static_cast<std::uint8_t>(value(rng));
      for (int k = length(rng); k > 0 && i < n; --k) v[i++] = b;
    }
  }
  return v;
}

void check(std::size_t pixels, std::size_t offset, unsigned blocks, Pattern pattern,
           std::mt19937_64& rng) {
  const Bytes values = make_pixels(pixels, pattern, rng);
  Counts want(emu::kBins);
  loom::kernels::histogram_reference(values.data(), pixels, want.data());
  const auto guard = static_cast<std::uint8_t>(values.empty() ? 0 : values[0] ^ 0x80U);
  Staged staged(values, offset, guard);
  EXPECT_EQ(run_grid(staged.image, pixels, blocks), want)
      << "pixels=" << pixels << " offset=" << offset << " blocks=" << blocks
      << " pattern=" << static_cast<int>(pattern);
}

TEST(HistogramSharedEmulated, MatchesTheReferenceAtEveryMisalignment) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  // Bytes only (no whole vector), one vector and a byte either side, the
  // grid's stride exact and not, unrolled steps with a single step after.
  const std::size_t one_stride = std::size_t{emu::kBlock} * emu::kVectorBytes;
  const std::size_t sizes[] = {0,
                               1,
                               15,
                               16,
                               17,
                               31,
                               33,
                               1000,
                               4099,
                               one_stride,
                               one_stride + 1,
                               emu::kUnroll * one_stride * 2 + 16 * 3 + 5};
  for (std::size_t offset = 0; offset < 16; ++offset) {
    for (std::size_t pixels : sizes) {
      for (unsigned blocks : {1U, 3U}) check(pixels, offset, blocks, Pattern::random, rng);
    }
  }
}

TEST(HistogramSharedEmulated, RunsAndConstantImagesAcrossGrids) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const std::size_t pixels = std::size_t{emu::kBlock} * emu::kVectorBytes * emu::kUnroll * 5 + 77;
  for (Pattern pattern : {Pattern::constant, Pattern::runs, Pattern::random}) {
    for (unsigned blocks : {1U, 2U, 7U}) {
      for (std::size_t offset : {std::size_t{0}, std::size_t{5}, std::size_t{15}}) {
        check(pixels, offset, blocks, pattern, rng);
      }
    }
  }
}

TEST(HistogramSharedEmulated, TheSplitCoversEveryByteOnce) {
  for (std::uintptr_t address = 0; address < 48; ++address) {
    for (std::size_t pixels = 0; pixels < 80; ++pixels) {
      const emu::Split s = emu::split_at_alignment(address, pixels);
      EXPECT_LT(s.head, 16U);
      EXPECT_LT(s.tail, 16U);
      EXPECT_EQ(s.head + 16 * s.vectors + s.tail, pixels);
      if (s.vectors > 0) {
        EXPECT_EQ((address + s.head) % 16, 0U) << address << " " << pixels;
      }
    }
  }
}

TEST(HistogramSharedEmulated, AWarpsAtomicsFallInDistinctBanksWhateverTheValues) {
  // The claim beside kCopies: lane l's atomic lands in bank l whatever
  // value it counts, so 32 lanes never meet on a bank (nor an address).
  std::mt19937 rng(loom::test::fresh_seed());
  std::uniform_int_distribution<int> value(0, emu::kBins - 1);
  for (int trial = 0; trial < 1000; ++trial) {
    std::set<int> banks;
    for (unsigned lane = 0; lane < 32; ++lane) {
      const int v = trial < emu::kBins ? trial : value(rng);  // equal values, then random
      banks.insert(emu::bank_of(emu::copy_of(lane), v));
    }
    EXPECT_EQ(banks.size(), 32U) << "trial " << trial;
  }
  // The copies of one block tile the shared words exactly once.
  std::set<int> words;
  for (int c = 0; c < emu::kCopies; ++c) {
    for (int v = 0; v < emu::kBins; ++v) words.insert(c * emu::kCopyPitch + v * emu::kBinPitch);
  }
  EXPECT_EQ(words.size(), static_cast<std::size_t>(emu::kSharedWords));
  EXPECT_EQ(*words.rbegin(), emu::kSharedWords - 1);
  for (unsigned lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(emu::copy_of(lane + 32 * 5), emu::copy_of(lane));
  }
}

}  // namespace
