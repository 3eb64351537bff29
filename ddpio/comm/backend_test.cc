#include "ddpio/comm/backend.h"

#include "ddpio/device/probe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::comm {
namespace {

using ::testing::HasSubstr;

device::DeviceInfo NoDriver() {
  return {.cuda_compiled = true,
          .nccl_compiled = true,
          .devices = 0,
          .why = "cudaGetDeviceCount: error 35 CUDA driver version is insufficient"};
}
device::DeviceInfo TwoGpus() {
  return {.cuda_compiled = true, .nccl_compiled = true, .devices = 2};
}
device::DeviceInfo NotCompiled() { return {.devices = 0, .why = "built without CUDA"}; }
device::DeviceInfo GpusWithoutNccl() {
  return {.cuda_compiled = true, .nccl_compiled = false, .devices = 2};
}

TEST(Backend, ParsesTheThreeNamesAndRejectsOthers) {
  EXPECT_EQ(*ParseBackend("auto"), BackendKind::kAuto);
  EXPECT_EQ(*ParseBackend("gloo"), BackendKind::kGloo);
  EXPECT_EQ(*ParseBackend("nccl"), BackendKind::kNccl);
  EXPECT_CODE(ParseBackend("mpi"), kInvalidArgument);
  for (auto k : {BackendKind::kAuto, BackendKind::kGloo, BackendKind::kNccl})
    EXPECT_EQ(*ParseBackend(BackendName(k)), k);
}

TEST(Backend, AutoTakesNcclOnlyWithAUsableDevice) {
  auto gpu = ChooseBackend(BackendKind::kAuto, TwoGpus());
  ASSERT_OK(gpu);
  EXPECT_EQ(gpu->kind, BackendKind::kNccl);
  EXPECT_THAT(gpu->why, HasSubstr("2 CUDA device"));
  for (const device::DeviceInfo& p : {NoDriver(), NotCompiled()}) {
    auto cpu = ChooseBackend(BackendKind::kAuto, p);
    ASSERT_OK(cpu);
    EXPECT_EQ(cpu->kind, BackendKind::kGloo);
    EXPECT_THAT(cpu->why, HasSubstr(p.why));  // the log says why
  }
  auto no_nccl = ChooseBackend(BackendKind::kAuto, GpusWithoutNccl());
  ASSERT_OK(no_nccl);
  EXPECT_EQ(no_nccl->kind, BackendKind::kGloo);
  EXPECT_THAT(no_nccl->why, HasSubstr("built without NCCL"));
}

TEST(Backend, NcclWithoutADeviceOrWithoutNcclIsAClearError) {
  auto no_device = ChooseBackend(BackendKind::kNccl, NoDriver());
  EXPECT_CODE(no_device, kFailedPrecondition);
  EXPECT_THAT(no_device.status().message(), HasSubstr("error 35"));
  auto not_built = ChooseBackend(BackendKind::kNccl, NotCompiled());
  EXPECT_CODE(not_built, kFailedPrecondition);
  EXPECT_THAT(not_built.status().message(), HasSubstr("built without NCCL"));
  EXPECT_EQ(ChooseBackend(BackendKind::kNccl, TwoGpus())->kind, BackendKind::kNccl);
}

// Creating an NCCL communicator without a usable device fails before any network traffic (the
// store is never touched) and says why.
TEST(Backend, AnNcclCommunicatorWithoutADeviceIsRefused) {
  if (device::Probe().devices > 0) GTEST_SKIP() << "this machine has a CUDA device";
  auto comm = CreateCommunicator(BackendChoice{BackendKind::kNccl, "asked for"}, nullptr, 0, 1,
                                 CommOptions{});
  EXPECT_CODE(comm, kFailedPrecondition);
}

TEST(Backend, GlooIsAlwaysAvailable) {
  for (const device::DeviceInfo& p : {NoDriver(), TwoGpus(), NotCompiled()}) {
    EXPECT_EQ(ChooseBackend(BackendKind::kGloo, p)->kind, BackendKind::kGloo);
  }
}

// The real probe agrees with itself: no device comes with a reason, and auto follows it. (On
// these CI machines, without a GPU, it takes the first branch.)
TEST(Backend, ProbeOnThisMachineIsConsistent) {
  const device::DeviceInfo& p = device::Probe();
  auto choice = ChooseBackend(BackendKind::kAuto, p);
  ASSERT_OK(choice);
  if (p.devices == 0) {
    EXPECT_FALSE(p.why.empty());
    EXPECT_EQ(choice->kind, BackendKind::kGloo);
  } else {
    EXPECT_TRUE(p.nccl_compiled);
    EXPECT_EQ(choice->kind, BackendKind::kNccl);
  }
}

}  // namespace
}  // namespace ddpio::comm
