// The NCCL backend's own code (NcclCommunicator, the system API layer, backend choice, the
// rendezvous Job) linked against the stand-in instead of libnccl/libcudart: real processes,
// real TCP on loopback, the same conformance suite the Gloo backend passes.
#include <cstdlib>

#include "ddpio/comm/backend.h"
#include "ddpio/comm/communicator_conformance.h"
#include "ddpio/comm/nccl/nccl_api.h"
#include "ddpio/comm/nccl/nccl_communicator.h"
#include "ddpio/device/cuda_runtime.h"
#include "ddpio/device/probe.h"
#include "gtest/gtest.h"
#include "tests/support/multiprocess.h"

namespace ddpio::comm {
namespace {

absl::StatusOr<std::unique_ptr<Communicator>> MakeNccl(std::shared_ptr<Store> store, int rank,
                                                       int size,
                                                       std::chrono::milliseconds timeout) {
  NcclOptions o;
  o.timeout = timeout;
  absl::StatusOr<std::unique_ptr<device::CudaRuntime>> cuda =
      device::OpenDeviceForRank(/*local_rank=*/0);
  if (!cuda.ok()) return cuda.status();
  auto comm =
      NcclCommunicator::Create(SystemNcclApi(), *std::move(cuda), std::move(store), rank, size, o);
  if (!comm.ok()) return comm.status();
  return std::unique_ptr<Communicator>(std::move(comm).value());
}

TEST(NcclStandIn, CollectivesAreCorrectForWorldSizesOneToFour) {
  testing::ExpectCollectivesCorrect(MakeNccl);
}
TEST(NcclStandIn, GroupsInBothLayouts) { testing::ExpectGroupsWork(MakeNccl); }
TEST(NcclStandIn, KilledPeerGivesUnavailableFast) {
  testing::ExpectKilledPeerGivesUnavailable(MakeNccl);
}
TEST(NcclStandIn, StalledPeerGivesDeadlineExceeded) {
  testing::ExpectStalledPeerGivesDeadlineExceeded(MakeNccl);
}
TEST(NcclStandIn, MissingPeerFailsCreateAfterTheTimeout) {
  testing::ExpectMissingPeerFailsCreate(MakeNccl);
}
TEST(NcclStandIn, AbortPoisonsTheCommunicator) { testing::ExpectAbortPoisons(MakeNccl); }

// Every check of the backend choice runs in a fresh process: the device probe is cached.
int InChild(const char* devices, const std::function<int()>& body) {
  return ddpio::testing::RunForked(1, [&](int) {
    ::setenv("DDPIO_NCCL_STANDIN_DEVICES", devices, 1);
    return body();
  })[0];
}

TEST(NcclStandIn, AutoPicksNcclWhenTheRuntimeReportsADevice) {
  EXPECT_EQ(InChild("2",
                    [] {
                      auto c = ChooseBackend(BackendKind::kAuto, device::Probe());
                      return c.ok() && c->kind == BackendKind::kNccl ? 0 : 1;
                    }),
            0);
  // cudaGetDeviceCount failing (no driver) or reporting no device means Gloo, and nccl is refused.
  for (const char* none : {"0", "nodriver"}) {
    EXPECT_EQ(InChild(none,
                      [] {
                        const device::DeviceInfo& p = device::Probe();
                        auto a = ChooseBackend(BackendKind::kAuto, p);
                        auto n = ChooseBackend(BackendKind::kNccl, p);
                        if (!a.ok() || a->kind != BackendKind::kGloo) return 1;
                        return n.status().code() == absl::StatusCode::kFailedPrecondition ? 0 : 2;
                      }),
              0)
        << none;
  }
}

// The rendezvous Job with backend auto on "GPU" ranks: the world and every group are NCCL
// communicators, each with its own unique id exchanged through the job's store.
TEST(NcclStandIn, JobBuildsTheWorldAndGroupsOnNccl) {
  ::setenv("DDPIO_NCCL_STANDIN_DEVICES", "2", 1);  // inherited by the forked ranks
  RendezvousOptions o;
  o.token = "tok";
  o.job_id = "nccl-job";
  auto codes = testing::RunJob(4, o, [](Job& job) {
    if (job.backend().kind != BackendKind::kNccl || job.world().backend() != "nccl") return 50;
    auto* nccl = dynamic_cast<NcclCommunicator*>(&job.world());
    if (nccl == nullptr || nccl->device() != job.info().local_rank % 2) return 51;
    return testing::JobWorldAndGroups(job);
  });
  ::unsetenv("DDPIO_NCCL_STANDIN_DEVICES");
  for (int r = 0; r < 4; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

}  // namespace
}  // namespace ddpio::comm
