// Jobs joined by real processes started with `ddpio launch`-like environments.
#include "broadcast/rendezvous.h"

#include <unistd.h>

#include "gtest/gtest.h"
#include "tests/support/multiprocess.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::broadcast {
namespace {

// Forks `world` ranks that Join a job on a free port and run `body`; returns exit codes.
std::vector<int> RunJob(int world, RendezvousOptions options, const std::function<int(Job&)>& body) {
  const int port = testing::FreeLoopbackPort();
  return testing::RunForked(world, [&](int rank) {
    auto info = DiscoverRank({{"RANK", std::to_string(rank)}, {"WORLD_SIZE", std::to_string(world)},
                              {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}});
    if (!info.ok()) return 100;
    auto job = Job::Join(*info, options);
    if (!job.ok()) {
      std::fprintf(stderr, "join: %s\n", job.status().ToString().c_str());
      return 101;
    }
    int code = body(**job);
    job->reset();
    return code;
  });
}

int WorldAndGroups(Job& job) {
  float v = 1;
  if (!job.world().AllReduce(&v, 1, ReduceOp::kSum, std::chrono::seconds(20)).ok()) return 1;
  if (v != static_cast<float>(job.info().world_size)) return 2;
  // Two layouts, created in the same order on every rank.
  for (auto kind : {sampler::LayoutKind::kContiguous, sampler::LayoutKind::kStrided}) {
    auto layout = sampler::GroupLayout::Make(job.info().world_size, 2, kind);
    if (!layout.ok()) return 3;
    auto group = job.Group(*layout);
    if (!group.ok()) return 4;
    float r = static_cast<float>(job.info().rank);
    if (!(*group)->AllReduce(&r, 1, ReduceOp::kSum, std::chrono::seconds(20)).ok()) return 5;
    float want = 0;
    for (int m : layout->members(job.info().rank)) want += static_cast<float>(m);
    if (r != want) return 6;
  }
  return 0;
}

TEST(Rendezvous, TcpStoreHostedByRankZero) {
  RendezvousOptions o;
  o.token = "tok";
  o.job_id = "job-tcp";
  auto codes = RunJob(4, o, WorldAndGroups);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

TEST(Rendezvous, FileStoreAndStaleKeysFromAnEarlierRun) {
  testing::TempDir dir;
  RendezvousOptions o;
  o.store = "file:" + dir.Sub("store");
  o.job_id = "run-1";
  auto first = RunJob(2, o, WorldAndGroups);
  EXPECT_EQ(first, (std::vector<int>{0, 0}));
  o.job_id = "run-2";  // same directory, keys of run-1 still there
  auto second = RunJob(2, o, WorldAndGroups);
  EXPECT_EQ(second, (std::vector<int>{0, 0}));
}

TEST(Rendezvous, RefusesWhatItCannotDoClearly) {
  RankInfo info;
  info.agent_store = true;
  EXPECT_CODE(Job::Join(info, {}), kFailedPrecondition);
  RankInfo plain;
  RendezvousOptions no_token;
  no_token.token = "";
  ::unsetenv("DDPIO_STORE_TOKEN");
  EXPECT_CODE(Job::Join(plain, no_token), kInvalidArgument);
}

}  // namespace
}  // namespace ddpio::broadcast
