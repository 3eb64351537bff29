#include "ddpio/common/accelerator.h"

#include "gtest/gtest.h"

namespace ddpio {
namespace {

TEST(Accelerator, DescriptionNamesThePathTaken) {
  const AcceleratorInfo& info = ProbeAccelerator();
  std::string text = DescribeAccelerator(info);
  if (info.cuda_devices > 0) {
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

TEST(Accelerator, DescribesAnExplicitNoDeviceState) {
  AcceleratorInfo info;
  info.cuda_compiled = true;
  info.why = "cudaGetDeviceCount: error 35 cudaErrorInsufficientDriver";
  info.nccl_compiled = true;
  info.nccl_version = 22805;
  EXPECT_EQ(DescribeAccelerator(info),
            "CPU path: CUDA compiled, no usable device (cudaGetDeviceCount: error 35 "
            "cudaErrorInsufficientDriver); NCCL 2.28.5 compiled");
  info.cuda_devices = 2;
  EXPECT_EQ(DescribeAccelerator(info).rfind("GPU path: 2 CUDA device(s)", 0), 0u);
}

}  // namespace
}  // namespace ddpio
