// `ddpio bench feed` under `ddpio launch`, as users run it: 4 real rank processes,
// Gloo over loopback, a converted synth dataset. What each rank received is checked against
// `ddpio sampler` for that rank, a separate process computing the DistributedSampler's answer.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/background.h"
#include "tests/support/multiprocess.h"
#include "tests/support/rank_lines.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ddpio {
namespace {

using testing::LastLine;
using testing::RankLines;
using testing::RunDdpio;

std::vector<uint64_t> SamplerIndices(int size, int world, int rank, int epochs) {
  std::vector<uint64_t> v;
  for (int e = 0; e < epochs; ++e) {
    auto r = RunDdpio({"sampler", "--size", std::to_string(size), "--world", std::to_string(world),
                       "--rank", std::to_string(rank), "--epoch", std::to_string(e), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(LastLine(r.out));  // alive for the loop (not a temporary)
    for (uint64_t i : j["indices"]) v.push_back(i);
  }
  return v;
}

class CliFeed : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(RunDdpio({"synth", "--out", dir_.Sub("src"), "--classes", "4", "--per-class", "15",
                        "--size", "48", "--quiet"})
                  .exit_code,
              0);
    ASSERT_EQ(RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", dir_.Sub("db"), "--quiet"})
                  .exit_code,
              0);
  }
  // `ranks` ranks of `bench feed` over the test dataset (batch 4, 24 px, one worker, two
  // epochs), with `extra` flags.
  testing::RunResult Launch(int ranks, std::vector<std::string> extra) {
    std::vector<std::string> args = {"launch",
                                     "--nproc-per-node",
                                     std::to_string(ranks),
                                     "--",
                                     testing::DdpioBin(),
                                     "bench",
                                     "feed",
                                     "--data",
                                     dir_.Sub("db"),
                                     "--batch-size",
                                     "4",
                                     "--image-size",
                                     "24",
                                     "--workers",
                                     "1",
                                     "--epochs",
                                     "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunDdpio(args);
  }
  // Four ranks writing their indices, JSON lines.
  testing::RunResult Feed(std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--indices-out", dir_.Sub("idx"), "--json"});
    return Launch(4, std::move(extra));
  }
  // Two ranks.
  testing::RunResult FeedTwo(std::vector<std::string> extra) { return Launch(2, std::move(extra)); }
  testing::TempDir dir_;
};

// A rank's ceiling, as `bench loader` reports its own: one round before each epoch and one after
// the last, the ceiling their median, each epoch's ratio its rate over the mean of the two rounds
// around it, the ratio their median. `threads`: the decoders the rank measured with.
void ExpectCeilingOfADecodingRank(const nlohmann::json& j, int threads, const std::string& what) {
  EXPECT_EQ(j["ceiling_threads"], threads) << what;
  const auto& rounds = j["ceiling_rounds_images_per_s"];
  const auto& rates = j["epoch_images_per_s"];
  ASSERT_EQ(rates.size(), 2u) << what;
  ASSERT_EQ(rounds.size(), 3u) << what;  // epochs + 1
  std::vector<double> sorted;
  for (const auto& r : rounds) {
    EXPECT_GT(r.get<double>(), 0) << what;
    sorted.push_back(r.get<double>());
  }
  std::sort(sorted.begin(), sorted.end());
  EXPECT_DOUBLE_EQ(j["ceiling_images_per_s"].get<double>(), sorted[1]) << what;
  ASSERT_EQ(j["epoch_ratios"].size(), 2u) << what;
  for (int e = 0; e < 2; ++e) {
    const double around = (rounds[e].get<double>() + rounds[e + 1].get<double>()) / 2;
    EXPECT_NEAR(j["epoch_ratios"][e].get<double>(), rates[e].get<double>() / around, 1e-9)
        << what << " epoch " << e;
  }
  EXPECT_NEAR(j["ratio"].get<double>(),
              (j["epoch_ratios"][0].get<double>() + j["epoch_ratios"][1].get<double>()) / 2, 1e-9)
      << what;
}

// Every rank of the job measures the ceiling at once, in wall time: no rank decodes a round
// before every rank has ended the epoch before it (a barrier over the world), and no rank starts
// an epoch before every rank has decoded the round before it (another) — ranks in groups of one
// too, which otherwise never wait for each other. A member that decodes nothing ends its rounds
// at once: without the second barrier it would start feeding while its leader still decodes.
// Epoch times leave the rounds out.
void ExpectRoundsAndEpochsInStep(const std::map<int, nlohmann::json>& lines,
                                 const std::string& what) {
  for (const auto& [rank, j] : lines) {
    ASSERT_EQ(j["epoch_start_unix_s"].size(), 2u) << what;
    ASSERT_EQ(j["epoch_end_unix_s"].size(), 2u) << what;
    ASSERT_EQ(j["ceiling_round_start_unix_s"].size(), 3u) << what;
    ASSERT_EQ(j["ceiling_round_end_unix_s"].size(), 3u) << what;
    EXPECT_EQ(j["start_unix_s"], j["epoch_start_unix_s"][0]) << what;
    EXPECT_EQ(j["end_unix_s"], j["epoch_end_unix_s"][1]) << what;
    EXPECT_NEAR(j["images_per_s"].get<double>(),
                j["images"].get<double>() / j["seconds"].get<double>(), 1e-6)
        << what << " rank " << rank;
  }
  auto at = [&](int rank, const char* key, int i) { return lines.at(rank)[key][i].get<double>(); };
  for (const auto& [a, ja] : lines) {
    for (const auto& [b, jb] : lines) {
      for (int e = 0; e < 3; ++e) {
        if (e > 0) {
          EXPECT_LE(at(b, "epoch_end_unix_s", e - 1), at(a, "ceiling_round_start_unix_s", e))
              << what << ": rank " << a << " decoded round " << e << " before rank " << b
              << " ended epoch " << e - 1;
        }
        if (e < 2) {
          EXPECT_LE(at(a, "ceiling_round_end_unix_s", e), at(b, "epoch_start_unix_s", e))
              << what << ": rank " << b << " started epoch " << e << " before rank " << a
              << " had decoded round " << e;
        }
      }
    }
  }
}

// The ceiling measured as the job runs: every rank decodes with its loaders' workers at once,
// before each epoch and after the last. A group of one and an encoded group: every rank decodes
// with its one worker. A decoded group: the leader decodes for both members (a one-worker loader
// each: 2 decoders), its peer decodes nothing — 0 decoders, rounds of 0 and no ratio, though it
// takes part in every round. --ceiling-images 0: no ceiling at all.
TEST_F(CliFeed, EveryRankReportsItsConcurrentCeilingAndItsRatioToIt) {
  for (const std::string group : {"1", "2"}) {
    const std::string what = "encoded, group size " + group;
    auto r = FeedTwo({"--group-size", group, "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto lines = RankLines(r.out);
    ASSERT_EQ(lines.size(), 2u) << r.out;
    for (const auto& [rank, j] : lines)
      ExpectCeilingOfADecodingRank(j, 1, what + " rank " + std::to_string(rank));
    ExpectRoundsAndEpochsInStep(lines, what);
  }
  {
    auto r = FeedTwo({"--group-size", "2", "--payload", "decoded", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto lines = RankLines(r.out);
    ASSERT_EQ(lines.size(), 2u) << r.out;
    ExpectCeilingOfADecodingRank(lines.at(0), 2, "decoded leader");
    const auto& peer = lines.at(1);
    EXPECT_EQ(peer["leader"], false);
    EXPECT_EQ(peer["ceiling_threads"], 0);
    EXPECT_EQ(peer["ceiling_rounds_images_per_s"], nlohmann::json::array({0.0, 0.0, 0.0}));
    EXPECT_EQ(peer["ceiling_images_per_s"], 0.0);
    EXPECT_TRUE(peer["ratio"].is_null()) << peer;
    EXPECT_TRUE(peer["epoch_ratios"].is_null()) << peer;
    ExpectRoundsAndEpochsInStep(lines, "decoded");
  }
  {
    auto r = FeedTwo({"--group-size", "2", "--payload", "decoded"});  // the text lines
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("[rank 0]   ceiling "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("2 decoder(s) at once on this rank"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[rank 0]   ratio "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[rank 1]   ceiling       none: this rank decodes nothing"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("[rank 1]   ratio "), std::string::npos) << r.out;
  }
  {
    auto r = FeedTwo({"--group-size", "1", "--ceiling-images", "0", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto lines = RankLines(r.out);
    ASSERT_EQ(lines.size(), 2u) << r.out;
    for (const auto& [rank, j] : lines) {
      EXPECT_TRUE(j["ceiling_rounds_images_per_s"].empty()) << j;
      EXPECT_TRUE(j["ceiling_images_per_s"].is_null()) << j;
      EXPECT_TRUE(j["ratio"].is_null()) << j;
    }
  }
  auto help = RunDdpio({"bench", "feed", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--ceiling-images"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("Ceiling: before each epoch and after the last"), std::string::npos)
      << help.out;
}

// Shard: every rank's indices, in order over two epochs, are what `ddpio sampler` gives it; only
// leaders read, each the group's records once; the peers' share is all that crosses the wire.
TEST_F(CliFeed, ShardGivesEveryRankItsSamplerIndicesAndOnlyLeadersRead) {
  auto r = Feed({"--group-size", "2", "--layout", "strided"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = RankLines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(testing::IndicesFile(dir_.Sub("idx.rank" + std::to_string(rank) + ".txt")),
              SamplerIndices(60, 4, rank, 2))
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
      EXPECT_LT(j["bytes_sent"].get<uint64_t>(),
                j["bytes_read"].get<uint64_t>());  // the peer's half only
    }
  }
}

// Replicate: the two members of each group receive identical indices, the group's stream.
TEST_F(CliFeed, ReplicateGivesAGroupIdenticalBatches) {
  auto r = Feed({"--group-size", "2", "--mode", "replicate", "--payload", "decoded"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(RankLines(r.out).size(), 4u) << r.out;
  auto idx = [&](int rank) {
    return testing::IndicesFile(dir_.Sub("idx.rank" + std::to_string(rank) + ".txt"));
  };
  EXPECT_EQ(idx(0), idx(1));
  EXPECT_EQ(idx(2), idx(3));
  EXPECT_EQ(idx(0), SamplerIndices(60, 2, 0, 2));  // the sampler over 2 groups
  EXPECT_EQ(idx(2), SamplerIndices(60, 2, 1, 2));
}

// A missing dataset: the leaders name it, the job fails, nothing hangs.
TEST_F(CliFeed, AMissingDatasetIsAClearError) {
  auto r = RunDdpio({"launch", "--nproc-per-node", "2", "--", testing::DdpioBin(), "bench", "feed",
                     "--data", dir_.Sub("nope"), "--group-size", "2", "--timeout", "20"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(dir_.Sub("nope")), std::string::npos) << r.err;
}

// Four nodes of one rank each (four launchers on loopback, as on four hosts: each launcher stops
// only its own rank), `bench feed` in contiguous groups of 2 — group 0 = ranks 0 and 1, group 1 =
// ranks 2 and 3 — with --timeout 10. Rank 3 is killed mid-run. Group 1 ends at once (rank 2 feeds
// rank 3). Group 0 has no connection to group 1 in the feeder and used to feed on until its
// epochs were done (120 s), failing only at the final barrier; now every rank of group 0 exits
// with an error naming rank 3, long before 3 x the timeout (the bound here is loose on purpose:
// the machine is shared; the property is "within the timeout", not a speed).
TEST_F(CliFeed, ALostRankInAnotherGroupEndsEveryRankWithinTheTimeout) {
  const std::string port = std::to_string(testing::FreeLoopbackPort());
  const std::map<std::string, std::string> env = {{"DDPIO_STORE_TOKEN", "lost-rank-secret"},
                                                  {"DDPIO_JOB_ID", ""}};
  std::vector<std::unique_ptr<testing::Background>> nodes;
  for (int n = 0; n < 4; ++n) {
    nodes.push_back(
        std::make_unique<testing::Background>(std::vector<std::string>{testing::DdpioBin(),
                                                                       "launch",
                                                                       "--nnodes",
                                                                       "4",
                                                                       "--node-rank",
                                                                       std::to_string(n),
                                                                       "--nproc-per-node",
                                                                       "1",
                                                                       "--master-port",
                                                                       port,
                                                                       "--",
                                                                       testing::DdpioBin(),
                                                                       "bench",
                                                                       "feed",
                                                                       "--data",
                                                                       dir_.Sub("db"),
                                                                       "--batch-size",
                                                                       "4",
                                                                       "--image-size",
                                                                       "24",
                                                                       "--workers",
                                                                       "1",
                                                                       "--group-size",
                                                                       "2",
                                                                       "--epochs",
                                                                       "100000",
                                                                       "--timeout",
                                                                       "10"},
                                              env));
  }
  // Rank 0 logs its settings once the feeder is open on every rank: the job is running.
  ASSERT_TRUE(nodes[0]->WaitFor("] bench feed: ", std::chrono::seconds(120))) << nodes[0]->output();
  const pid_t victim = nodes[3]->FirstChild();
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  for (int n = 0; n < 3; ++n) {
    const int code = nodes[n]->Wait(std::chrono::seconds(60));
    ASSERT_NE(code, -1) << "rank " << n << " still running 60 s after rank 3 was killed:\n"
                        << nodes[n]->output();
    EXPECT_NE(code, 0) << nodes[n]->output();
  }
  EXPECT_EQ(nodes[3]->Wait(std::chrono::seconds(10)), 128 + SIGKILL);
  for (int n = 0; n < 2; ++n) {  // group 0
    const double seconds = std::chrono::duration<double>(nodes[n]->exited_at() - killed).count();
    EXPECT_LT(seconds, 30) << "rank " << n << " exited " << seconds << " s after rank 3 was killed";
    const std::string& err = nodes[n]->output();
    const std::string prefix = "[rank " + std::to_string(n) + "] ddpio bench feed: error: ";
    const auto line = err.find(prefix);
    ASSERT_NE(line, std::string::npos) << err;
    const std::string message = err.substr(line, err.find('\n', line) - line);
    // Rank 2 leaves too (its feed is cut), but the ranks agree on the loss that came first.
    EXPECT_NE(message.find("the job lost rank 3 (group 1)"), std::string::npos) << message;
    std::printf("rank %d: exit %d, %.1f s after rank 3 was killed: %s\n", n,
                nodes[n]->Wait(std::chrono::seconds(0)), seconds, message.c_str());
  }
}

// These machines have no GPU: --backend nccl is refused by every rank with the reason, before
// any connection (each rank exits on its own: the launcher reports both), within seconds.
TEST_F(CliFeed, BackendNcclWithoutADeviceFailsOnEveryRankAtOnce) {
  auto info = RunDdpio({"info"});
  ASSERT_EQ(info.exit_code, 0);
  if (info.out.find("GPU path") != std::string::npos)
    GTEST_SKIP() << "this machine has a CUDA device";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = RunDdpio({"launch", "--nproc-per-node", "2", "--", testing::DdpioBin(), "bench", "feed",
                     "--data", dir_.Sub("db"), "--group-size", "2", "--payload", "decoded",
                     "--backend", "nccl", "--timeout", "60"});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));  // not the timeout
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("] ddpio bench feed: error: backend nccl"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("use the gloo"), std::string::npos) << r.err;
  // Every rank decides alone, before any connection: rank 1 of 2 without a rank 0.
  testing::RunOptions solo;
  solo.env = {{"RANK", "1"},
              {"WORLD_SIZE", "2"},
              {"LOCAL_RANK", "1"},
              {"LOCAL_WORLD_SIZE", "2"},
              {"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", "1"}};
  const auto t1 = std::chrono::steady_clock::now();
  auto alone = RunDdpio({"bench", "feed", "--data", dir_.Sub("db"), "--group-size", "2",
                         "--payload", "decoded", "--backend", "nccl", "--timeout", "60"},
                        solo);
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::seconds(20));
  EXPECT_NE(alone.exit_code, 0);
  EXPECT_NE(alone.err.find("ddpio bench feed: error: backend nccl"), std::string::npos)
      << alone.err;
}

}  // namespace
}  // namespace ddpio
