// Jobs joined by real processes started with `ddpio launch`-like environments.
#include "ddpio/comm/rendezvous.h"

#include <unistd.h>

#include "ddpio/comm/communicator_conformance.h"
#include "ddpio/device/probe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/multiprocess.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::comm {
namespace {

using testing::JobWorldAndGroups;
using testing::RunJob;

TEST(Rendezvous, TcpStoreHostedByRankZero) {
  RendezvousOptions o;
  o.token = "tok";
  o.job_id = "job-tcp";
  o.backend = BackendKind::kGloo;
  auto codes = RunJob(4, o, JobWorldAndGroups);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

TEST(Rendezvous, FileStoreAndStaleKeysFromAnEarlierRun) {
  ddpio::testing::TempDir dir;
  RendezvousOptions o;
  o.store = "file:" + dir.Sub("store");
  o.job_id = "run-1";
  auto first = RunJob(2, o, JobWorldAndGroups);
  EXPECT_EQ(first, (std::vector<int>{0, 0}));
  o.job_id = "run-2";  // same directory, keys of run-1 still there
  auto second = RunJob(2, o, JobWorldAndGroups);
  EXPECT_EQ(second, (std::vector<int>{0, 0}));
}

TEST(Rendezvous, RefusesWhatItCannotDoClearly) {
  RankInfo plain;
  RendezvousOptions no_token;
  no_token.token = "";
  const Environment empty;
  EXPECT_CODE(Job::Join(plain, no_token, empty), kFailedPrecondition);  // no launcher's store
  // Started alone (no launcher's environment): a private store, no token needed.
  ASSERT_OK_AND_ASSIGN(RankInfo lone, DiscoverRank({}));
  ASSERT_OK_AND_ASSIGN(auto alone, Job::Join(lone, no_token, empty));
  EXPECT_EQ(alone->world().size(), 1);
  EXPECT_OK(alone->world().Barrier(std::chrono::seconds(5)));
  // Under torchrun's agent store no token is needed, but a store must answer.
  RankInfo agent;
  agent.agent_store = true;
  agent.master_addr = "127.0.0.1";
  agent.master_port = ddpio::testing::FreeLoopbackPort();
  RendezvousOptions quick;
  quick.timeout = std::chrono::milliseconds(300);
  auto nobody = Job::Join(agent, quick, empty);
  EXPECT_CODE(nobody, kDeadlineExceeded);
  EXPECT_THAT(nobody.status().message(), ::testing::HasSubstr("torchrun's agent store"));
  // torchrun with a rendezvous backend (elastic) serves no store: the token is what is missing,
  // and the error says so in torchrun's terms.
  ASSERT_OK_AND_ASSIGN(RankInfo elastic, DiscoverRank({{"RANK", "1"},
                                                       {"WORLD_SIZE", "4"},
                                                       {"MASTER_ADDR", "127.0.0.1"},
                                                       {"MASTER_PORT", "29400"},
                                                       {"TORCHELASTIC_USE_AGENT_STORE", "False"},
                                                       {"TORCHELASTIC_RUN_ID", "job7"}}));
  EXPECT_TRUE(elastic.torchrun_rendezvous);
  auto untokened = Job::Join(elastic, no_token, empty);
  EXPECT_CODE(untokened, kFailedPrecondition);
  EXPECT_THAT(untokened.status().message(),
              ::testing::HasSubstr("--rdzv_backend c10d, as elastic jobs are), which serves its "
                                   "workers no store: set DDPIO_STORE_TOKEN"));
}

// The token and job id come from the environment Join is given, not from the process's: a
// job joined with DDPIO_JOB_ID=from-env keeps its keys under job/from-env/ of the store.
TEST(Rendezvous, ReadsTheEnvironmentItIsGiven) {
  ddpio::testing::TempDir dir;
  RankInfo solo;  // rank 0 of 1, as a launcher would describe it (not "single process")
  solo.source = RankSource::kFlags;
  solo.master_port = ddpio::testing::FreeLoopbackPort();
  RendezvousOptions o;
  o.backend = BackendKind::kGloo;
  // No DDPIO_STORE_TOKEN: what is wrong (no launcher's store) and how jobs are started.
  auto untokened = Job::Join(solo, o, Environment{});
  EXPECT_CODE(untokened, kFailedPrecondition);
  EXPECT_THAT(untokened.status().message(), ::testing::HasSubstr("according to the command line"));
  EXPECT_THAT(untokened.status().message(), ::testing::HasSubstr("ddpio launch --nproc-per-node"));
  {
    ASSERT_OK_AND_ASSIGN(auto job, Job::Join(solo, o, Environment{{"DDPIO_STORE_TOKEN", "t"}}));
    EXPECT_OK(job->world().Barrier(std::chrono::seconds(5)));
  }
  o.store = "file:" + dir.Sub("store");
  {
    ASSERT_OK_AND_ASSIGN(auto job, Job::Join(solo, o, Environment{{"DDPIO_JOB_ID", "from-env"}}));
    ASSERT_OK(job->store()->Set("mark", "1"));
  }
  ASSERT_OK_AND_ASSIGN(auto raw, FileStore::Open(dir.Sub("store")));
  ASSERT_OK_AND_ASSIGN(std::string mark, raw->Get("job/from-env/mark", std::chrono::seconds(1)));
  EXPECT_EQ(mark, "1");
}

// Without a usable device (these machines), asking for NCCL fails before any network traffic
// and says why; auto picks Gloo.
TEST(Rendezvous, BackendChoiceOnAMachineWithoutADevice) {
  if (device::Probe().devices > 0) GTEST_SKIP() << "this machine has a CUDA device";
  RankInfo solo;  // rank 0 of 1
  RendezvousOptions o;
  o.token = "tok";
  o.backend = BackendKind::kNccl;
  auto refused = Job::Join(solo, o);
  EXPECT_CODE(refused, kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("nccl"));
  RendezvousOptions automatic;
  automatic.token = "tok";
  automatic.job_id = "auto";
  auto codes = RunJob(2, automatic, [](Job& job) {
    return job.backend().kind == BackendKind::kGloo && job.world().backend() == "gloo"
               ? JobWorldAndGroups(job)
               : 50;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace ddpio::comm
