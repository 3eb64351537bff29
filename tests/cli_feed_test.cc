// `ddpio bench feed` under `ddpio launch`, as the users run it: 4 real rank processes,
// Gloo over loopback, a converted synth dataset. What each rank received is checked against
// `ddpio sampler` for that rank, a separate process computing the DistributedSampler's answer.
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "tests/support/rank_lines.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ddpio {
namespace {

using testing::LastLine;
using testing::RankLines;
using testing::RunDdpio;

std::vector<uint64_t> FileIndices(const std::string& path) {
  std::ifstream in(path);
  std::vector<uint64_t> v;
  for (uint64_t i; in >> i;) v.push_back(i);
  return v;
}

std::vector<uint64_t> SamplerIndices(int size, int world, int rank, int epochs) {
  std::vector<uint64_t> v;
  for (int e = 0; e < epochs; ++e) {
    auto r = RunDdpio({"sampler", "--size", std::to_string(size), "--world", std::to_string(world), "--rank",
                       std::to_string(rank), "--epoch", std::to_string(e), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(LastLine(r.out));  // alive for the loop (not a temporary)
    for (uint64_t i : j["indices"]) v.push_back(i);
  }
  return v;
}

class CliFeed : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(RunDdpio({"synth", "--out", dir_.Sub("src"), "--classes", "4", "--per-class", "15", "--size", "48",
                        "--quiet"}).exit_code, 0);
    ASSERT_EQ(RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", dir_.Sub("db"), "--quiet"}).exit_code, 0);
  }
  testing::RunResult Feed(std::vector<std::string> extra) {
    std::vector<std::string> args = {"launch", "--nproc-per-node", "4", "--", testing::DdpioBin(), "bench", "feed",
                                     "--data", dir_.Sub("db"), "--batch-size", "4", "--image-size", "24",
                                     "--workers", "1", "--epochs", "2", "--indices-out", dir_.Sub("idx"), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunDdpio(args);
  }
  testing::TempDir dir_;
};

// Shard: every rank's indices, in order over two epochs, are what `ddpio sampler` gives it; only
// leaders read, each the group's records once; the peers' share is all that crosses the wire.
TEST_F(CliFeed, ShardGivesEveryRankItsSamplerIndicesAndOnlyLeadersRead) {
  auto r = Feed({"--group-size", "2", "--layout", "strided"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = RankLines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(FileIndices(dir_.Sub("idx.rank" + std::to_string(rank) + ".txt")), SamplerIndices(60, 4, rank, 2))
        << "rank " << rank;
    const auto& j = lines[rank];
    const bool leader = rank < 2;  // strided groups of 2 in 4: [0, 2] and [1, 3]
    EXPECT_EQ(j["leader"], leader);
    EXPECT_EQ(j["backend"], "gloo");  // the default
    EXPECT_EQ(j["path"], "cpu");
    EXPECT_EQ(j["images"], 30);  // 15 per epoch
    EXPECT_EQ(j["records_read"], leader ? 60 : 0) << "rank " << rank;
    EXPECT_EQ(j["bytes_received"].get<uint64_t>() > 0, !leader);
    if (leader) {  // what this leader sent is what its peer received
      EXPECT_EQ(j["bytes_sent"], lines[rank + 2]["bytes_received"]);
      EXPECT_LT(j["bytes_sent"].get<uint64_t>(), j["bytes_read"].get<uint64_t>());  // the peer's half only
    }
  }
}

// Replicate: the two members of each group receive identical indices, the group's stream.
TEST_F(CliFeed, ReplicateGivesAGroupIdenticalBatches) {
  auto r = Feed({"--group-size", "2", "--mode", "replicate", "--payload", "decoded"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(RankLines(r.out).size(), 4u) << r.out;
  auto idx = [&](int rank) { return FileIndices(dir_.Sub("idx.rank" + std::to_string(rank) + ".txt")); };
  EXPECT_EQ(idx(0), idx(1));
  EXPECT_EQ(idx(2), idx(3));
  EXPECT_EQ(idx(0), SamplerIndices(60, 2, 0, 2));  // the sampler over 2 groups
  EXPECT_EQ(idx(2), SamplerIndices(60, 2, 1, 2));
}

// A missing dataset: the leaders name it, the job fails, nothing hangs.
TEST_F(CliFeed, AMissingDatasetIsAClearError) {
  auto r = RunDdpio({"launch", "--nproc-per-node", "2", "--", testing::DdpioBin(), "bench", "feed", "--data",
                     dir_.Sub("nope"), "--group-size", "2", "--timeout", "20"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(dir_.Sub("nope")), std::string::npos) << r.err;
}

// These machines have no GPU: --backend nccl is refused by every rank with the reason, before
// any connection (each rank exits on its own: the launcher reports both), within seconds.
TEST_F(CliFeed, BackendNcclWithoutADeviceFailsOnEveryRankAtOnce) {
  auto info = RunDdpio({"info"});
  ASSERT_EQ(info.exit_code, 0);
  if (info.out.find("GPU path") != std::string::npos) GTEST_SKIP() << "this machine has a CUDA device";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = RunDdpio({"launch", "--nproc-per-node", "2", "--", testing::DdpioBin(), "bench", "feed", "--data",
                     dir_.Sub("db"), "--group-size", "2", "--payload", "decoded", "--backend", "nccl",
                     "--timeout", "60"});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));  // not the timeout
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("] ddpio bench feed: error: backend nccl"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("use the gloo"), std::string::npos) << r.err;
  // Every rank decides alone, before any connection: rank 1 of 2 without a rank 0.
  testing::RunOptions solo;
  solo.env = {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
              {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}};
  const auto t1 = std::chrono::steady_clock::now();
  auto alone = RunDdpio({"bench", "feed", "--data", dir_.Sub("db"), "--group-size", "2", "--payload", "decoded",
                         "--backend", "nccl", "--timeout", "60"},
                        solo);
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::seconds(20));
  EXPECT_NE(alone.exit_code, 0);
  EXPECT_NE(alone.err.find("ddpio bench feed: error: backend nccl"), std::string::npos) << alone.err;
}

}  // namespace
}  // namespace ddpio
