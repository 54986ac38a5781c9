// Moving values in and out without writing the copies by hand: upload
// returns a tensor holding them, download a vector; the forms that do not
// wait keep the caller's memory only as long as they say.
#include "support/cpu.hpp"

#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace {

TEST(UploadDownload, ARoundTripThroughAGraphKeepsEveryValue) {
  loom::Runtime rt(loom::test::cpu(2));
  std::vector<float> values(6 * 7);
  std::iota(values.begin(), values.end(), -3.0F);
  auto x = rt.upload(std::span<const float>(values), {6, 7});
  EXPECT_EQ(x.shape(), loom::Shape({6, 7}));
  EXPECT_EQ(x.memory(), rt.default_memory());
  auto y = rt.tensor<float>({6, 7});
  loom::Graph g;
  g.add(loom::ops::scale_copy(x, y, 2.0F));
  rt.submit(g);  // download waits for the run that writes y
  const std::vector<float> got = rt.download<float>(y);
  ASSERT_EQ(got.size(), values.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], 2.0F * values[i]) << i;
}

TEST(UploadDownload, TheFormsThatDoNotWaitCopyTheValuesFirst) {
  loom::Runtime rt(loom::test::cpu(2));
  auto t = rt.tensor<std::int32_t>({5});
  loom::Completion done;
  {
    std::vector<std::int32_t> gone = {1, 2, 3, 4, 5};
    done = rt.upload_into(t, std::span<const std::int32_t>(gone));
  }  // the caller's values may go as soon as upload_into returns
  done.wait();
  std::vector<std::int32_t> out(5, -1);
  rt.download_into(t, std::span<std::int32_t>(out)).wait();
  EXPECT_EQ(out, (std::vector<std::int32_t>{1, 2, 3, 4, 5}));
}

TEST(UploadDownload, AnotherDtypeOrCountIsRefusedSayingWhat) {
  loom::Runtime rt(loom::test::cpu(2));
  auto t = rt.tensor<float>({4});
  const std::vector<float> three = {1, 2, 3};
  const std::vector<std::int32_t> ints = {1, 2, 3, 4};
  try {
    (void)rt.upload_into(t, std::span<const float>(three));
    FAIL() << "3 values went into 4 elements";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("holds 4 elements, the values 3"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)rt.upload_into(t, std::span<const std::int32_t>(ints)), loom::InvalidArgument);
  EXPECT_THROW((void)rt.download<std::int32_t>(t), loom::InvalidArgument);
  EXPECT_THROW((void)rt.upload(std::span<const float>(three), {2, 2}), loom::InvalidArgument);
}

}  // namespace
