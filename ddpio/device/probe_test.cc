#include "ddpio/device/probe.h"

#include "gtest/gtest.h"

namespace ddpio::device {
namespace {

TEST(DeviceProbe, DescriptionNamesThePathTaken) {
  const DeviceInfo& info = Probe();
  std::string text = Describe(info);
  if (info.devices > 0) {
    EXPECT_EQ(text.rfind("GPU path", 0), 0u) << text;
  } else {
    EXPECT_EQ(text.rfind("CPU path", 0), 0u) << text;
    EXPECT_FALSE(info.why.empty());
    EXPECT_NE(text.find(info.why), std::string::npos) << text;
  }
#ifdef DDPIO_EXPECT_NCCL
  EXPECT_TRUE(info.nccl_compiled);
  EXPECT_GT(info.nccl_version, 20000);
#endif
}

TEST(DeviceProbe, DescribesAnExplicitNoDeviceState) {
  DeviceInfo info;
  info.cuda_compiled = true;
  info.why = "cudaGetDeviceCount: error 35 cudaErrorInsufficientDriver";
  info.nccl_compiled = true;
  info.nccl_version = 22805;
  EXPECT_EQ(Describe(info),
            "CPU path: CUDA compiled, no usable device (cudaGetDeviceCount: error 35 "
            "cudaErrorInsufficientDriver); NCCL 2.28.5 compiled");
  info.devices = 2;
  EXPECT_EQ(Describe(info).rfind("GPU path: 2 CUDA device(s)", 0), 0u);
}

TEST(DeviceForRank, RanksShareTheDevicesRoundRobin) {
  EXPECT_EQ(DeviceForRank(0, 2), 0);
  EXPECT_EQ(DeviceForRank(1, 2), 1);
  EXPECT_EQ(DeviceForRank(3, 2), 1);  // local rank 3 on a node with 2 devices
  EXPECT_EQ(DeviceForRank(5, 8), 5);
  EXPECT_EQ(DeviceForRank(7, 1), 0);
  EXPECT_EQ(DeviceForRank(3, 0), 0);  // no device: a valid index all the same
}

}  // namespace
}  // namespace ddpio::device
