#include "support/gpu.hpp"

#include <loom/device.hpp>
#include <loom/error.hpp>

namespace {

TEST(DeviceGpu, PropertiesComeFromTheHardware) {
  LOOM_REQUIRE_GPU();
  for (int i = 0; i < loom::device_count(); ++i) {
    const auto p = loom::device_properties(i);
    EXPECT_EQ(p.index, i);
    EXPECT_FALSE(p.name.empty());
    EXPECT_FALSE(p.pci_bus_id.empty());
    EXPECT_GE(p.compute_capability_major, 7);
    EXPECT_GT(p.sm_count, 0);
    EXPECT_GT(p.total_memory, std::size_t{1} << 30);
    EXPECT_GT(p.free_memory, 0U);
    EXPECT_LE(p.free_memory, p.total_memory);
    EXPECT_GT(p.l2_cache_bytes, 0U);
    EXPECT_GE(p.shared_memory_per_block_optin, 48U * 1024U);
    EXPECT_EQ(p.warp_size, 32);
    EXPECT_GE(p.max_threads_per_block, 1024);
    EXPECT_GT(p.clock_khz, 0);
    EXPECT_GT(p.memory_clock_khz, 0);
    EXPECT_GT(p.peak_memory_bandwidth(), 1e11);
    EXPECT_LE(p.stream_priority_greatest, p.stream_priority_least);
    EXPECT_TRUE(p.unified_addressing);
  }
}

TEST(DeviceGpu, OutOfRangeSaysHowManyDevicesThereAre) {
  LOOM_REQUIRE_GPU();
  try {
    (void)loom::device_properties(loom::device_count());
    FAIL();
  } catch (const loom::NoDevice& e) {
    EXPECT_EQ(e.reason(), loom::NoDevice::Reason::device_out_of_range);
    EXPECT_NE(std::string(e.what()).find(std::to_string(loom::device_count()) + " CUDA device"),
              std::string::npos)
        << e.what();
  }
}

TEST(DeviceGpu, PeerMatrixIsSquareWithATrueDiagonal) {
  LOOM_REQUIRE_GPU();
  const auto m = loom::peer_access_matrix();
  ASSERT_EQ(m.size(), static_cast<std::size_t>(loom::device_count()));
  for (std::size_t i = 0; i < m.size(); ++i) {
    ASSERT_EQ(m[i].size(), m.size());
    EXPECT_TRUE(m[i][i]);
  }
}

TEST(DeviceGpu, ReportListsEveryDevice) {
  LOOM_REQUIRE_GPU();
  const auto report = loom::device_report();
  for (int i = 0; i < loom::device_count(); ++i) {
    EXPECT_NE(report.find("device " + std::to_string(i) + ":"), std::string::npos) << report;
  }
}

}  // namespace
