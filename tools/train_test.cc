// How `ddpio train` decides where the model lives from --device and --backend.
#include "tools/train.h"

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::tools {
namespace {

device::DeviceInfo Gpus(int n) {
  device::DeviceInfo p;
  p.nccl_compiled = true;
  p.devices = n;
  if (n == 0) p.why = "cudaGetDeviceCount: error 35";
  return p;
}

TEST(ResolveTrainDevice, DeviceAloneBackendAloneAndBoth) {
  EXPECT_EQ(*ResolveTrainDevice("", "", Gpus(0), true), "cpu");  // the default
  EXPECT_EQ(*ResolveTrainDevice("cuda", "", Gpus(0), true),
            "cuda");  // fails later, at the rendezvous
  EXPECT_EQ(*ResolveTrainDevice("", "gloo", Gpus(2), true), "cpu");
  EXPECT_EQ(*ResolveTrainDevice("", "nccl", Gpus(2), true), "cuda");
  EXPECT_EQ(*ResolveTrainDevice("cuda", "nccl", Gpus(2), true), "cuda");
  // auto: the device when one is usable and the device model is compiled in.
  EXPECT_EQ(*ResolveTrainDevice("", "auto", Gpus(2), true), "cuda");
  EXPECT_EQ(*ResolveTrainDevice("", "auto", Gpus(0), true), "cpu");
  EXPECT_EQ(*ResolveTrainDevice("", "auto", Gpus(2), false), "cpu");
}

TEST(ResolveTrainDevice, ContradictionsAndMissingDevicesAreErrors) {
  auto nccl = ResolveTrainDevice("", "nccl", Gpus(0), true);
  EXPECT_EQ(nccl.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(nccl.status().message().find("error 35"), std::string::npos) << nccl.status();
  auto clash = ResolveTrainDevice("cpu", "nccl", Gpus(2), true);
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(clash.status().message().find("--device cpu"), std::string::npos) << clash.status();
  EXPECT_EQ(ResolveTrainDevice("cuda", "gloo", Gpus(2), true).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveTrainDevice("", "mpi", Gpus(2), true).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ddpio::tools
