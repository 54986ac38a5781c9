// Device discovery behaves on every machine: where CUDA is unavailable it
// says why and throws NoDevice instead of crashing; where it is available
// the answers agree with each other.
#include <loom/device.hpp>
#include <loom/error.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(DeviceDiscovery, AvailabilityIsConsistent) {
  const auto& a = loom::cuda_availability();
  EXPECT_GT(a.runtime_version, 0);
  if (a.available) {
    EXPECT_GT(a.device_count, 0);
    EXPECT_TRUE(a.reason.empty());
    EXPECT_GE(a.driver_version, a.runtime_version);
  } else {
    EXPECT_EQ(a.device_count, 0);
    EXPECT_FALSE(a.reason.empty()) << "an unavailable CUDA must say why";
  }
  EXPECT_EQ(loom::device_count(), a.device_count);
  EXPECT_EQ(&loom::cuda_availability(), &a) << "probed once, cached";
}

TEST(DeviceDiscovery, WithoutCudaPropertiesThrowNoDeviceSayingWhy) {
  const auto& a = loom::cuda_availability();
  if (a.available) GTEST_SKIP() << "this machine has a GPU";
  try {
    (void)loom::device_properties(0);
    FAIL() << "expected NoDevice";
  } catch (const loom::NoDevice& e) {
    EXPECT_NE(std::string(e.what()).find(a.reason), std::string::npos) << e.what();
    if (a.driver_version == 0) {
      EXPECT_EQ(e.reason(), loom::NoDevice::Reason::no_driver);
    }
  }
  EXPECT_TRUE(loom::devices().empty());
  EXPECT_TRUE(loom::peer_access_matrix().empty());
}

TEST(DeviceDiscovery, OutOfRangeIndexIsRejected) {
  EXPECT_THROW((void)loom::device_properties(-1), loom::NoDevice);
  EXPECT_THROW((void)loom::device_properties(loom::device_count() + 7), loom::NoDevice);
}

TEST(DeviceDiscovery, ReportNeverThrowsAndSaysWhatItFound) {
  std::string report;
  EXPECT_NO_THROW(report = loom::device_report());
  EXPECT_NE(report.find("CUDA runtime"), std::string::npos);
  if (loom::cuda_availability().available) {
    EXPECT_NE(report.find("device 0:"), std::string::npos) << report;
  } else {
    EXPECT_NE(report.find("CUDA unavailable: " + loom::cuda_availability().reason),
              std::string::npos)
        << report;
  }
}

}  // namespace
